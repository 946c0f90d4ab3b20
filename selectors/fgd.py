"""``fgd``: fragmentation gradient descent — the node and GPU where a task adds least fragmentation.

Source: Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent" (USENIX ATC'23), §4, and its simulator's FGD score
(``fgd_score.go``, read, not copied). For a task, every node that can take it is
judged by how much placing it there would raise the node's fragmentation ``F_n``
(:mod:`~gangmaster.selectors.fragmentation`, measured against the workload's typical
shapes): ``Δ_n = F_n(after) − F_n(now)``, the vcores and memory taken and, for a share,
over every GPU with enough left (the node's best GPU counts); whole GPUs go on the
lowest wholly free ones, which all leave the same state. The node with the least ``Δ_n``
wins, on it the GPU that achieves it (lowest index on a tie); equal ``Δ_n`` go by the run's
seeded node order (``tie_rule``), as in the artifact: its scheduler takes the smallest node
name, but its simulator first renames every node ``"%04d-" % rand.Perm(n)[i] + name`` with
the run's seed, so "the smallest name" is one seeded permutation of the nodes per run (as
for ``packing``; by the trace's own host names ``fgd`` left 0.27 point more GPU unallocated
on openb's default list, seeds 42-44: BENCHMARKS.md, session 14).

The simulator passes ``Δ_n`` through a sigmoid and truncates it to an integer 0..100
before comparing nodes (its score ``⌊100 · σ(−Δ_n / 1000)⌋``, Δ in milli-GPU); ``fgd``
compares ``Δ_n`` exactly (integer weight units, see the fragmentation module), so only
nodes with equal ``Δ_n`` tie. ``fgd-k8s`` compares the simulator's score instead, GPUs
too (:class:`FgdAsScheduled`): nodes whose increases differ by less than ~40 milli-GPU
then tie and go by the seeded node order, which packs more tightly (on openb it left
~0.5 point less GPU unallocated than ``fgd`` in a quick check).

Speed: ``Δ_n`` depends only on the node's state and the ask, so it is a node key, one
column per distinct ask (vcores, memory, GPUs, share), kept by the view row by row: a
booking recomputes the booked node's row of each column, not the cluster (and ``F_n``
itself is one more such column). select() then walks the column's sorted index.

It needs the workload: :meth:`observe_workload` (the replay passes the trace's shapes;
elsewhere ``--workload FILE``). Without it, it refuses to rank with :class:`NeedsWorkload`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .fit import milli
from .fragmentation import ShapeTable, fragmentation_increase, shape_table
from .selector import NodeKey, Selector

if TYPE_CHECKING:
    from .cluster import ClusterView
    from .request import SelectionRequest
    from .workload import WorkloadShapes


class NeedsWorkload(RuntimeError):
    """A workload-aware strategy asked to rank before it was given the workload."""


class FragmentationGradientDescent(Selector):
    name = "fgd"
    description = ("the node and GPU where the task adds least expected fragmentation for the workload's "
                   "typical shapes (needs the workload); ties by the run's seeded node order (the artifact's "
                   "renamed nodes)")
    tie_rule = "seeded"

    def __init__(self, candidate_nodes_factor: int = 2):
        super().__init__(candidate_nodes_factor)
        self.table: ShapeTable | None = None
        self._node_keys: dict[tuple, NodeKey] = {}

    def observe_workload(self, shapes: "WorkloadShapes") -> None:
        self.table = shape_table(shapes)
        self._node_keys = {}

    def _table(self) -> ShapeTable:
        if self.table is None:
            raise NeedsWorkload(
                "the fgd strategy needs the workload's typical task shapes: give --workload FILE "
                "(see selectors/workload.py for its form), or run it under `gangmaster replay`, which "
                "passes the trace's shapes")
        return self.table

    @staticmethod
    def _ask(request: "SelectionRequest") -> tuple[int, int, int, int]:
        res = request.resource
        return (milli(res.vcores), res.memory_mb, res.gpus, res.gpu_milli)

    def score(self, increase: np.ndarray) -> np.ndarray:
        """The integer keys compared for the increases (in ``fragment_units``): the
        increases themselves (``fgd-k8s`` compares its scheduler's score)."""
        return increase

    def node_key(self, request: "SelectionRequest") -> NodeKey | None:
        # named GPUs are judged as named, by a scan (rank); rare
        if request.resource.gpu_mask:
            return None
        table = self._table()
        ask = self._ask(request)
        key = self._node_keys.get(ask)
        if key is None:
            key = self._node_keys[ask] = NodeKey(
                f"{self.name}:{table.token}:{':'.join(map(str, ask))}",
                lambda view, rows: fragmentation_increase(view, table, *ask, rows=rows, score=self.score)[0])
        return key

    def _increase(self, view, rows, request, gpu_mask: int = 0) -> tuple[np.ndarray, np.ndarray]:
        return fragmentation_increase(view, self._table(), *self._ask(request), rows=rows, gpu_mask=gpu_mask,
                                      score=self.score)

    def rank(self, view: "ClusterView", candidates: np.ndarray, request: "SelectionRequest") -> np.ndarray:
        if request.resource.gpu_mask:
            return self._increase(view, np.asarray(candidates), request, request.resource.gpu_mask)[0]
        return super().rank(view, candidates, request)

    def choose_gpus(self, view: "ClusterView", node: int, request: "SelectionRequest") -> int:
        res = request.resource
        if res.gpu_mask or not res.gpu_milli:
            return super().choose_gpus(view, node, request)  # named GPUs; whole GPUs: the lowest free
        _, gpu = self._increase(view, np.array([node]), request)
        if gpu[0] < 0:  # no GPU with enough left: what the base class says about it
            return super().choose_gpus(view, node, request)
        return 1 << int(gpu[0])


class FgdAsScheduled(FragmentationGradientDescent):
    """``fgd-k8s``: FGD as the paper's Kubernetes score plugin compares nodes and GPUs: the
    integer score ``⌊100 · σ(−Δ / 1000)⌋`` (Δ in milli-GPU), higher first; the key is
    ``100 −`` that score. Ties, many more than ``fgd``'s, go by the run's seeded node order.
    The fragmentation is measured against the plugin's typical pods, not every shape
    (:meth:`observe_workload`)."""

    name = "fgd-k8s"
    description = ("fgd as the paper's scheduler plugin scores it (100·sigmoid(-increase/1000), an integer); "
                   "ties by the run's seeded node order")

    def observe_workload(self, shapes: "WorkloadShapes") -> None:
        """The workload as the plugin knows it: its typical pods (no memory, the most popular
        shapes that hold 95 % of the tasks; :meth:`WorkloadShapes.artifact_typical`). On openb's
        cpu200, seeds 42-43, this took fgd-k8s from 5.36, 5.62 to 5.13, 4.69 % unallocated at
        100 % arrived, the artifact's FGD 5.22, 5.03 (BENCHMARKS.md, session 14)."""
        super().observe_workload(shapes.artifact_typical())

    def score(self, increase: np.ndarray) -> np.ndarray:
        milli_gpu = increase / self._table().total_units
        return 100 - np.floor(100 / (1 + np.exp(np.clip(milli_gpu / 1000, -700, 700)))).astype(np.int64)
