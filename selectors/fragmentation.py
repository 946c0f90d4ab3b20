"""GPU fragmentation as Weng et al. measure it, per node and for the cluster, kept row by row.

Source: Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC'23, §3 (the fragmentation measure), and the
definitions of its simulator (github.com/hkust-adsl/kubernetes-scheduler-simulator,
``pkg/utils/frag.go``), read, not copied.

Definitions (amounts in milli-GPU; a GPU has 1000; ``free[g]`` is what GPU g of node n
has left):

* A task of shape m **cannot run on node n at all** when the node lacks its vcores or
  memory, offers none of its GPU types, has fewer than ``count_m`` GPUs with at least
  ``need_m`` free (``need_m``: 1000 per GPU for whole GPUs, the share for a share), or
  when m asks for no GPU. Then every idle milli-GPU of the node is a fragment to m:
  ``F_n(m) = Σ_g free[g]``.
* Otherwise only the GPUs that cannot serve m's per-GPU need are fragments:
  ``F_n(m) = Σ_{g: free[g] < need_m} free[g]``.
* The node's fragmentation is the expectation over the workload's typical shapes
  (:class:`~gangmaster.selectors.workload.WorkloadShapes`): ``F_n = Σ_m p_m F_n(m)``;
  the cluster's is ``Σ_n F_n``, reported against the idle milli-GPU ``Σ_n Σ_g free[g]``.

One deviation, deliberate: the simulator checks vcores only; here memory is checked too
(a task that does not fit a node's memory cannot use its GPUs either). On the openb
trace memory rarely binds.

How it is computed: every node × GPU × shape at once with numpy (:func:`fragment_units`),
and kept per node in a column of the view (:meth:`NodeColumns.cached_column
<gangmaster.selectors.cluster.NodeColumns.cached_column>`), so after a booking only the
node booked is brought up to date: its value is remembered per distinct node state
(nodes take few) and computed only for a state not seen yet
(:func:`remembered_fragment_units`). The cluster's sums are kept the same way, moved by
each changed node (:class:`FragmentationTotals`). Weights enter as integers (``p_m`` in
millionths, at least 1), so every sum is exact: nodes in equal states get equal values
bit for bit, whatever batch computed them, and a strategy's ties stay ties.
"""
from __future__ import annotations

import itertools
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from .fit import GPU_MILLI
from .identity_memo import IdentityMemo
from .workload import WorkloadShapes

if TYPE_CHECKING:
    from .cluster import NodeColumns

#: the weights' unit: p_m is counted in millionths (rounded, at least 1)
WEIGHT_UNITS = 1_000_000
#: How many node states a table remembers the fragment units of (then it starts afresh).
STATES_KEPT = 1 << 16
_tokens = itertools.count()


class ShapeTable:
    """A workload's shapes as columns, for the vector computation (one per workload)."""

    def __init__(self, shapes: WorkloadShapes):
        self.shapes = shapes
        self.token = next(_tokens)  # names this workload's cached columns in a view
        s = shapes.shapes
        self.need = np.array([shape.gpu_need for shape in s], dtype=np.int64)
        self.count = np.array([shape.gpu_count for shape in s], dtype=np.int64)
        self.mvcores = np.array([shape.mvcores for shape in s], dtype=np.int64)
        self.memory = np.array([shape.memory_mb for shape in s], dtype=np.int64)
        self.asks_gpu = self.count > 0
        self.units = np.maximum(np.rint(np.array(shapes.weights) * WEIGHT_UNITS), 1).astype(np.int64)
        self.total_units = int(self.units.sum())
        self._access: dict[tuple[str, ...], np.ndarray] = {}
        #: a node state (:func:`node_states`) -> its fragment units and idle milli-GPU
        #: (:func:`remembered_fragment_units`)
        self.units_by_state: dict[tuple, tuple[int, int]] = {}

    def column_rows(self, view: "NodeColumns", rows) -> np.ndarray:
        """The fragment units column's values for ``rows`` (:meth:`NodeColumns.cached_column
        <gangmaster.selectors.cluster.NodeColumns.cached_column>`'s ``compute``): every node
        at once with numpy, changed rows by their remembered states."""
        if isinstance(rows, slice):
            return node_fragment_units(view, self, rows)
        return np.array([units for units, _ in remembered_fragment_units(view, self, rows)], dtype=np.int64)

    def access(self, gpu_types: list[str]) -> np.ndarray:
        """bool [type code, shape]: a node of that GPU type may run the shape (a shape
        naming no type runs on any; a node without a type runs none that names one)."""
        key = tuple(gpu_types)
        table = self._access.get(key)
        if table is None:
            table = self._access[key] = np.array(
                [[not shape.gpu_types or (t != "" and t in shape.gpu_types) for shape in self.shapes.shapes]
                 for t in key], dtype=bool).reshape(len(key), len(self.shapes))
        return table


def shape_table(shapes: WorkloadShapes) -> ShapeTable:
    """The one table of ``shapes`` (equal workloads share it, and so their cached columns).
    Found by the workload's identity first: hashing a workload hashes every shape, and a
    replay asks with the same workload at every sample of the measure."""
    table = _tables_by_identity.get(id(shapes))
    if table is None:
        table = _tables_by_identity.put(id(shapes), (shapes,), _table_of(shapes))
    return table


@lru_cache(maxsize=64)
def _table_of(shapes: WorkloadShapes) -> ShapeTable:
    return ShapeTable(shapes)


#: id(workload) -> its table (64 workloads at a time)
_tables_by_identity: IdentityMemo[ShapeTable] = IdentityMemo(64)


def fragment_units(gpu_free: np.ndarray, mvcores_free: np.ndarray, memory_free: np.ndarray,
                   access: np.ndarray, table: ShapeTable) -> np.ndarray:
    """``Σ_m units_m · F(m)`` (int64, milli-GPU × weight units) for each of k node states.

    ``gpu_free``: (k, W) milli free per GPU (0 for GPUs a node lacks); ``mvcores_free``,
    ``memory_free``: (k,); ``access``: (k, M) bool, the shapes each state's GPU type
    admits. Every state × GPU × shape at once: (k, W, M) booleans."""
    free = np.asarray(gpu_free, dtype=np.int64)
    idle = free.sum(axis=1)                                           # (k,)
    serves = free[:, :, None] >= table.need[None, None, :]            # (k, W, M)
    runs = ((serves.sum(axis=1) >= table.count[None, :])
            & (np.asarray(mvcores_free)[:, None] >= table.mvcores[None, :])
            & (np.asarray(memory_free)[:, None] >= table.memory[None, :])
            & access & table.asks_gpu[None, :])                       # (k, M)
    served = np.einsum("kw,kwm->km", free, serves)                    # milli on GPUs that serve m
    fragments = np.where(runs, idle[:, None] - served, idle[:, None])
    return fragments @ table.units


def _rows(view, rows) -> np.ndarray:
    return np.arange(len(view)) if isinstance(rows, slice) else np.asarray(rows, dtype=np.int64)


def node_fragment_units(view: "NodeColumns", table: ShapeTable, rows=slice(None)) -> np.ndarray:
    """:func:`fragment_units` of the view's nodes ``rows`` as they are now."""
    at = _rows(view, rows)
    access = table.access(view.gpu_types)[view.gpu_type_code[at]]
    return fragment_units(view.gpu_milli_free_rows(at), view.mvcores_free[at], view.memory_free[at], access, table)


def remembered_fragment_units(view: "NodeColumns", table: ShapeTable, rows: np.ndarray) -> list[tuple[int, int]]:
    """``(units, idle)`` of each node of ``rows`` (an index array): its :func:`fragment_units`
    and its idle milli-GPU, remembered per distinct node state (:func:`node_states`) in the
    table: nodes take few distinct states, so a few changed rows are mostly looked up, and
    only the states not seen yet are computed (with one numpy call). The values are the same
    integers either way."""
    known = table.units_by_state
    keys = node_states(view, rows)
    values = [known.get(key) for key in keys]
    unseen = [j for j, value in enumerate(values) if value is None]
    if unseen:
        if len(known) + len(unseen) > STATES_KEPT:
            known.clear()
        at = rows[unseen]
        free = view.gpu_milli_free_rows(at)
        access = table.access(view.gpu_types)[view.gpu_type_code[at]]
        units = fragment_units(free, view.mvcores_free[at], view.memory_free[at], access, table).tolist()
        for j, value in zip(unseen, zip(units, free.sum(axis=1).tolist())):
            values[j] = known[keys[j]] = value
    return values


def node_states(view: "NodeColumns", rows: np.ndarray) -> list[tuple]:
    """What the nodes ``rows``' :func:`fragment_units` depend on, a key per node: its free
    GPU mask when its GPUs hold no shares (else its milli free per GPU), vcores, memory and
    GPU type."""
    types = view.gpu_types
    return [(tuple(view.gpu_milli_free_row(i)) if shared else mask, mvcores, memory, types[code])
            for i, shared, mask, mvcores, memory, code in zip(
                rows.tolist(), view.gpus_shared[rows].tolist(), view.gpu_free_mask[rows].tolist(),
                view.mvcores_free[rows].tolist(), view.memory_free[rows].tolist(),
                view.gpu_type_code[rows].tolist())]


def fragment_units_column(view: "NodeColumns", table: ShapeTable) -> np.ndarray:
    """Every node's :func:`fragment_units`, kept by the view: after a change to a node
    only its row is brought up to date (:func:`remembered_fragment_units`)."""
    return view.cached_column(f"fragmentation:{table.token}", table.column_rows)


def node_fragmentation(view: "NodeColumns", shapes: WorkloadShapes, rows=None) -> np.ndarray:
    """``F_n`` in milli-GPU (float64) for every node, or for ``rows`` (node indices):
    the idle milli-GPU the typical shapes cannot use, in expectation (module docstring)."""
    table = shape_table(shapes)
    column = fragment_units_column(view, table)
    values = column if rows is None else column[np.asarray(rows, dtype=np.int64)]
    return values / table.total_units


def cluster_fragmentation(view: "NodeColumns", shapes: WorkloadShapes) -> tuple[float, int]:
    """``(Σ_n F_n, idle)``: the cluster's fragmentation and its idle milli-GPU (both in
    milli-GPU), for "% of capacity" (against ``1000 × Σ GPUs``) and "% of idle"."""
    table = shape_table(shapes)
    frag_units, idle = view.derived(("fragmentation-totals", table.token),
                                    lambda v: FragmentationTotals(v, table)).current(view)
    return float(frag_units) / table.total_units, idle


class FragmentationTotals:
    """``Σ_n`` of every node's :func:`fragment_units` and of its idle milli-GPU
    (:meth:`NodeColumns.gpu_milli_free_rows
    <gangmaster.selectors.cluster.NodeColumns.gpu_milli_free_rows>` summed), kept by the
    view (:meth:`NodeColumns.derived <gangmaster.selectors.cluster.NodeColumns.derived>`):
    a changed node's values are found by its state (:func:`remembered_fragment_units`) and
    the sums moved by its change, in integers (so exactly the sums over every node)."""

    def __init__(self, view: "NodeColumns", table: ShapeTable):
        self.table = table
        self.dirty: set[int] = set()
        self.units: list[int] = node_fragment_units(view, table).tolist()
        self.idle: list[int] = view.gpu_milli_free_rows().sum(axis=1).tolist()
        self.units_sum = sum(self.units)
        self.idle_sum = sum(self.idle)

    def copy(self) -> "FragmentationTotals":
        clone = object.__new__(FragmentationTotals)
        clone.__dict__.update(self.__dict__)
        clone.dirty, clone.units, clone.idle = set(self.dirty), self.units.copy(), self.idle.copy()
        return clone

    def current(self, view: "NodeColumns") -> tuple[int, int]:
        """``(Σ units, Σ idle)`` of the view's nodes as they are now."""
        if self.dirty:
            rows = np.fromiter(self.dirty, dtype=np.int64, count=len(self.dirty))
            self.dirty.clear()
            units, idle = self.units, self.idle
            now = remembered_fragment_units(view, self.table, rows)
            for i, (now_units, now_idle) in zip(rows.tolist(), now):
                self.units_sum += now_units - units[i]
                self.idle_sum += now_idle - idle[i]
                units[i], idle[i] = now_units, now_idle
        return self.units_sum, self.idle_sum


# ------------------------------------------------------------- the gradient: what a placement adds
#: the key of a node that cannot take the request at all (the filters never offer one)
CANNOT_TAKE = np.iinfo(np.int64).max // 4


def placement_options(gpu_free: np.ndarray, gpus: int, gpu_milli: int,
                      gpu_mask: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct ways to give one task its GPUs on each of k nodes: ``(node, gpu,
    after)`` per option, ``after`` the node's GPU column once the task is booked
    (``gpu``: the GPU taken for a share, -1 for whole GPUs or none).

    A share may go on any GPU with enough left; GPUs with equal milli free give equal
    states, so only the lowest-index one of each value is an option. Whole GPUs take the
    lowest-index wholly free ones (any wholly free GPUs give the same state). ``gpu_mask``
    names the GPUs when the request does."""
    free = np.asarray(gpu_free, dtype=np.int64)
    k, width = free.shape
    if gpu_milli:
        ok = free >= gpu_milli
        if gpu_mask:
            ok &= ((gpu_mask >> np.arange(width)) & 1).astype(bool)[None, :]
        earlier_equal = np.triu(np.ones((width, width), dtype=bool), 1)   # [g', g]: g' < g
        repeat = ((free[:, :, None] == free[:, None, :]) & earlier_equal[None, :, :] & ok[:, :, None]).any(axis=1)
        node, gpu = np.nonzero(ok & ~repeat)
        after = free[node].copy()
        after[np.arange(node.size), gpu] -= gpu_milli
        return node, gpu, after
    node = np.arange(k)
    if not gpus:
        return node, np.full(k, -1), free.copy()
    whole = free == GPU_MILLI
    if gpu_mask:
        taken = whole & ((gpu_mask >> np.arange(width)) & 1).astype(bool)[None, :]
        fits = taken.sum(axis=1) == gpus
    else:
        taken = whole & (np.cumsum(whole, axis=1) <= gpus)
        fits = taken.sum(axis=1) == gpus
    after = np.where(taken, 0, free)
    return node[fits], np.full(int(fits.sum()), -1), after[fits]


def fragmentation_increase(view: "NodeColumns", table: ShapeTable, mvcores: int, memory_mb: int,
                           gpus: int, gpu_milli: int, rows=slice(None), gpu_mask: int = 0,
                           score=None) -> tuple[np.ndarray, np.ndarray]:
    """Per node of ``rows``: the least increase of ``F_n`` (in :func:`fragment_units`)
    that one task of this ask can cause there, and the GPU that causes it (-1: whole
    GPUs or none; ties: the lowest GPU index). A node that cannot take the task gets
    :data:`CANNOT_TAKE`. Only vcores, memory and GPUs are judged here; the filters judge
    the rest. ``score``, when given, maps the increases (int64 array) to the integer
    keys compared instead (non-decreasing in the increase)."""
    at = _rows(view, rows)
    before = fragment_units_column(view, table)[at]
    increase = np.full(at.size, CANNOT_TAKE, dtype=np.int64)
    best_gpu = np.full(at.size, -1, dtype=np.int64)
    mv_left = view.mvcores_free[at] - mvcores
    mem_left = view.memory_free[at] - memory_mb
    enough = (mv_left >= 0) & (mem_left >= 0)
    node, gpu, after = placement_options(view.gpu_milli_free_rows(at), gpus, gpu_milli, gpu_mask)
    keep = enough[node]
    node, gpu, after = node[keep], gpu[keep], after[keep]
    if node.size == 0:
        return increase, best_gpu
    access = table.access(view.gpu_types)[view.gpu_type_code[at[node]]]
    delta = fragment_units(after, mv_left[node], mem_left[node], access, table) - before[node]
    if score is not None:
        delta = np.asarray(score(delta), dtype=np.int64)
    # the best option per node: options come node by node, GPUs ascending, so a stable
    # sort by (node, delta) puts each node's least delta, lowest GPU first, at its start
    order = np.lexsort((delta, node))
    node, gpu, delta = node[order], gpu[order], delta[order]
    first = np.ones(node.size, dtype=bool)
    first[1:] = node[1:] != node[:-1]
    increase[node[first]] = delta[first]
    best_gpu[node[first]] = gpu[first]
    return increase, best_gpu
