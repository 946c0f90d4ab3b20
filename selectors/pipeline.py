"""select(): the filter chain, the strategy, the ports, and the final single-node pick.

::

    pipeline = SelectionPipeline(SelectionSettings(), get_selector("job-packing"))
    result = pipeline.select_single_node(view, SelectionRequest("worker", resource))
    result.best.host, result.best.gpu_mask, result.ports, result.explanation.summary()

select() finds its candidates through :mod:`~gangmaster.selectors.candidates` (the
strategy's node index, kept sorted by the view row by row, or a scan) and runs the
explaining filter chain only when nothing fits, or when a result's explanation is
read. :meth:`SelectionPipeline.best_nodes` is that search on its own.

Why the final pick is not uniformly random (qizhi's choice): the tasks of a
distributed GPU job talk to each other every step. Picking uniformly among the
candidates scatters them over machines and racks, so their all-reduce crosses
the network instead of NVLink or one switch. We prefer the hosts that already
hold the job's tasks, then their racks, then the strategy's order, and break
exact ties by an order of the nodes drawn from the seed, so any decision can be
replayed (a strategy may declare ``tie_rule = "node-name"`` instead: the smallest
host name first; the pick is the placement loop's, :mod:`~gangmaster.selectors.placement`). Two AMs can still
pick the same node; the RM arbitrates and the loser selects again.
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from functools import partial

import numpy as np

from .cluster import ClusterView
from .candidates import best_fitting
from .explanation import Explanation, NotAvailable, StaleExplanation
from .filters import FILTER_CHAIN, FilterContext
from .placement import TieOrder, lone_pick, place
from .ports import NO_PORTS, PortError, PortRanges
from .request import Candidate, SelectionRequest, SelectionResult
from .selector import Selector, get_selector
from .settings import SelectionSettings


class SelectionPipeline:
    """One AM's selection machinery: settings, a strategy, a seeded order of the nodes for
    exact ties, and a seeded RNG (random port choice, the ``random`` strategy's draw)."""

    def __init__(self, settings: SelectionSettings | None = None, selector: Selector | None = None,
                 tie_hosts: Sequence[str] = ()):
        """``tie_hosts``, the hosts from first to last, replaces the strategy's tie order, under
        either rule: a replay's with the FGD artifact's draws, its nodes renamed by the seed
        (the artifact's scheduler takes the smallest name among equal scores: the ``node-name``
        rule on those names, and the ``seeded`` rule's draw where ours draws one)."""
        self.settings = settings or SelectionSettings()
        self.selector = selector or get_selector(self.settings.selector, self.settings.candidate_nodes_factor)
        self.rng = random.Random(self.settings.seed)
        self.tie_order = (GivenHostOrder(tie_hosts) if tie_hosts
                          else tie_order_for(self.selector.tie_rule, self.settings.seed))

    # ------------------------------------------------------------------ filters
    def filter(self, view: ClusterView, request: SelectionRequest,
               rows=None) -> tuple[np.ndarray, Explanation]:
        """Node indices that pass every filter (of ``rows``, an index array, when
        given), and the account of the rest: the whole chain over every node, for
        explanations (select() itself searches through the strategy's index)."""
        if rows is None:
            alive = np.ones(len(view), dtype=bool)
        else:
            alive = np.zeros(len(view), dtype=bool)
            alive[rows] = True
        explanation = Explanation(total=int(np.count_nonzero(alive)), role=request.role)
        ctx = FilterContext(view, request, self.settings)
        for stage in FILTER_CHAIN:
            verdict = stage.verdict(ctx, alive)
            explanation.rejections.extend(verdict.rejections)
            alive = verdict.passed
        survivors = np.flatnonzero(alive)
        explanation.survivors = int(survivors.size)
        return survivors, explanation

    # ------------------------------------------------------------------- select
    def select(self, view: ClusterView, request: SelectionRequest) -> SelectionResult:
        """Ranked candidates for ``request`` (pending tasks × factor of them), equal keys
        by node number (by host name under the ``node-name`` tie rule).

        The explanation is computed when first read (the filter chain over every
        node), so read it before changing the view; raises NotAvailable, with the
        explanation, when no node fits."""
        request = self._with_reused_ports(request)
        ties = self.tie_order.of(len(view), view.hosts) if self.selector.tie_rule == "node-name" else None
        ranked, keys = self._best_nodes(view, request, self.selector.keep(request, len(view)), ties=ties)
        ranked, keys, ports = self._choose_ports(view, request, ranked, keys)
        resource, request_with_ports = request.resource, request
        if ports:
            resource = resource.with_ports(ports)
            request_with_ports = replace(request, resource=resource)
        candidates = [Candidate(view.hosts[i], self.selector.choose_gpus(view, int(i), request_with_ports))
                      for i in ranked]
        return SelectionResult(request, candidates, resource, partial(self._explain, view, request, view.changes),
                               ports, keys)

    def best_nodes(self, view: ClusterView, request: SelectionRequest, k: int, rows=None,
                   ties: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best nodes that can take ``request`` (among ``rows``, distinct
        node indices in any order, when given) and their keys, best first by (strategy key, node index):
        select()'s candidates before ports and GPUs. ``ties``, a rank per node (lower
        first), orders equal keys instead of the node index; pass the same array for
        the same order (the view keeps one index per array). Fewer nodes when fewer
        fit; raises NotAvailable with the filter chain's explanation (of ``rows``)
        when none do. Costs the nodes read before ``k`` fit, not the cluster, for a
        strategy with a node key and no rack policy (selectors/candidates.py)."""
        if k < 1:
            raise ValueError(f"best_nodes: k must be >= 1, got {k}")
        return self._best_nodes(view, self._with_reused_ports(request), k, rows, ties)

    def select_single_node(self, view: ClusterView, request: SelectionRequest) -> SelectionResult:
        """One node: the placement loop for one instance, not booked
        (:mod:`~gangmaster.selectors.placement`: eligible nodes, the job's hosts then
        their racks, the strategy's key, exact ties by the seeded tie order)."""
        if request.reuse_ports.ranges:
            request = self._with_reused_ports(request)
        picked = lone_pick(view, self, request).pick(request)   # (the loop's pick without the loop, when it applies)
        if picked is None:
            placed = place(self, view, request, 1, book=False)
            picked = placed.nodes[0], placed.gpu_masks[0][0], placed.ports[0][0], placed.keys[0]
        node, gpu_mask, ports, key = picked
        return SelectionResult(request, [Candidate(view.hosts[node], gpu_mask)], None,
                               partial(self._explain, view, request, view.changes), ports, (key,))

    # ---------------------------------------------------------------- internals
    def _best_nodes(self, view: ClusterView, request: SelectionRequest, k: int,
                    rows=None, ties: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        nodes, keys = best_fitting(view, request, self.settings, self.selector, k, rows, ties)
        if nodes.size == 0:
            raise NotAvailable(self.filter(view, request, rows)[1])
        return nodes, keys

    def _explain(self, view: ClusterView, request: SelectionRequest, changes: int) -> Explanation:
        """The explanation of a select() that succeeded on ``view`` as it was at ``changes``
        (a result's ``explain``, bound to them: computed when first read, refused once the
        view changed)."""
        if view.changes != changes:
            raise StaleExplanation(request.role)
        return self.filter(view, request)[1]

    def _with_reused_ports(self, request: SelectionRequest) -> SelectionRequest:
        if not request.reuse_ports.ranges:
            return request
        return replace(request, resource=request.resource.with_ports(request.reuse_ports))

    def _choose_ports(self, view: ClusterView, request: SelectionRequest, ranked: np.ndarray,
                      keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, PortRanges]:
        """Ports free on as many of the ranked candidates as possible.

        Reused or explicit ports were already checked by the fit filter. Otherwise
        take the longest prefix of the ranking whose common free ports are enough,
        and choose from those (sequentially or at random above ``port_min``). The
        fit filter guarantees the best candidate alone has enough."""
        res = request.resource
        if res.port_ranges or not res.ports:
            return ranked, keys, res.port_ranges or NO_PORTS
        common = None
        prefix = 0
        for i in ranked:
            merged = view.ports_free[i] if common is None else common.intersect(view.ports_free[i])
            if merged.above(self.settings.port_min).count < res.ports:
                break
            common, prefix = merged, prefix + 1
        if common is None:
            raise PortError(f"{view.hosts[ranked[0]]}: needs {res.ports} port(s) >= "
                            f"{self.settings.port_min}, free: {view.ports_free[ranked[0]]}")
        if self.settings.port_choice == "random":
            ports = common.take_random(res.ports, self.rng, self.settings.port_min)
        else:
            ports = common.take_sequential(res.ports, self.settings.port_min)
        return ranked[:prefix], keys[:prefix], ports


#: the tie rules a strategy may declare (:attr:`Selector.tie_rule`)
TIE_RULES = ("seeded", "node-name")


class HostNameOrder:
    """The tie order of the ``node-name`` rule: the smallest host name wins a tie (the
    FGD paper's scheduler). One order per list of host names (a view and its copies
    share theirs), the same array each time, as the node indexes want."""

    def __init__(self):
        self._orders: dict[int, tuple[list[str], np.ndarray]] = {}

    def of(self, nodes: int, hosts: list[str] | None = None) -> np.ndarray:
        """``order[node]``: the rank of the node's host among ``hosts`` (:meth:`_ranks`)."""
        if hosts is None or len(hosts) != nodes:
            raise ValueError(f"the {type(self).__name__} tie order needs the view's host names")
        known = self._orders.get(id(hosts))
        if known is None or known[0] is not hosts:
            order = self._ranks(hosts)
            order.flags.writeable = False
            known = self._orders[id(hosts)] = (hosts, order)
        return known[1]

    def _ranks(self, hosts: list[str]) -> np.ndarray:
        order = np.empty(len(hosts), dtype=np.int64)
        order[np.argsort(np.array(hosts, dtype=object), kind="stable")] = np.arange(len(hosts))
        return order


class GivenHostOrder(HostNameOrder):
    """A tie order given as the hosts from first to last (a fill replay's with the FGD
    artifact's draws: its nodes by their seeded new names, ``openb.artifact_fill_plan``)."""

    def __init__(self, hosts: Sequence[str]):
        super().__init__()
        self.rank = {host: k for k, host in enumerate(hosts)}
        if len(self.rank) != len(hosts):
            raise ValueError("a given tie order names a host twice")

    def _ranks(self, hosts: list[str]) -> np.ndarray:
        missing = [host for host in hosts if host not in self.rank]
        if missing:
            raise ValueError(f"the given tie order has no rank for host {missing[0]!r} ({len(missing)} hosts)")
        return np.fromiter((self.rank[host] for host in hosts), dtype=np.int64, count=len(hosts))


def tie_order_for(rule: str, seed: int):
    """The pipeline's order for exact ties under a strategy's ``tie_rule``."""
    if rule == "seeded":
        return TieOrder(seed)
    if rule == "node-name":
        return HostNameOrder()
    raise ValueError(f"unknown tie rule {rule!r}; known: {', '.join(TIE_RULES)}")


def select(view: ClusterView, request: SelectionRequest, settings: SelectionSettings | None = None,
           selector: str | Selector | None = None) -> SelectionResult:
    """Convenience: a one-off pipeline (a fresh RNG) for one request."""
    settings = settings or SelectionSettings()
    if isinstance(selector, str):
        selector = get_selector(selector, settings.candidate_nodes_factor)
    return SelectionPipeline(settings, selector).select(view, request)
