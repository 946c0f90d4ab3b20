"""The one placement loop: where ``count`` instances of one request go.

``select_single_node()`` is this loop with a count of one; gang placement runs it
once per role with the role's instances. Both pick in the same total order, so
placing a role in bulk gives exactly the nodes that placing its instances one at a
time (a ``select_single_node()`` and a booking each) would give.

The pick order
--------------
1. **Eligible nodes**: those that pass every filter of the chain (health, label,
   GPU type, non-GPU jobs, the role's per-node cap, the fit with ports counted at
   or above ``port_min``) and the rack policy.
2. **Locality tier**, unless the strategy opts out (``prefer_locality``): the job's
   hosts (``request.placed_hosts``) first, then the other nodes of their racks,
   then the rest — over every eligible node, not only the best few by key.
3. **The strategy's key** (:meth:`Selector.rank`), lower first.
4. **Exact ties** by the pipeline's tie order: a permutation of the node positions
   seeded by ``selection.seed`` (:class:`TieOrder`), so a decision can be replayed
   and another seed breaks ties differently.

A ``pick_at_random`` strategy (``random``, qizhi's baseline) draws instead, for
every instance, uniformly with the pipeline's RNG among the ``keep()`` best
eligible nodes in (key, tie order).

Why a node can be filled in one step
------------------------------------
Once an instance is booked on a node picked from tier 1 or 2, that node is one of
the job's hosts and the only one with room left, so the next pick is that node
again until it is full — whatever its key does. The loop therefore gives such a
node every instance it can take (its *room*: :func:`fit.room`, capped by
``max_instances_per_node`` minus the instances already there) at once. Where the
argument does not hold, it places one instance per pick and ranks again: a
strategy that opts out of locality, a random pick, the ``spread`` rack policy
(each instance changes which racks are preferred), and a pick among several of the
job's hosts with room — unless the strategy's key only falls as a node fills and no
other node's key moves (:attr:`Selector.key_falls_when_booked`, job packing): then the
host picked first stays first until it is full, and the job's hosts with room are
filled in one step, in (key, tie order) (:meth:`_Loop._fill_held`).

Where one instance goes per pick with no tiers (a random pick, a strategy that opts
out of locality) and the key is a node key, the eligible nodes are kept sorted by
(key, tie order) and only the node booked moves (:meth:`_Loop._in_key_order`).

Keys are read fresh at every pick, over the nodes of the best tier only, so a
node's key must not depend on which other nodes are ranked with it (a node-key
column is refreshed by the view only for the nodes booked). When the strategy orders
the nodes of a tier by a node key whether or not the job has hosts
(:meth:`Selector.key_within_tiers`: its node key, or job packing's for ``locality``,
whose tiers are the loop's), there is no rack policy, and no host of the job nor
more than one of their racks has room left, the rest of the role goes rack by rack
without further picks — that rack first, then the racks in the order of their best
node, each rack's nodes in (key, tie order) — because each node placed keeps its
rack the only one of the job's racks with room: one sort and a cumulative sum of
room (:meth:`_Loop._sweep`).

One instance, not booked (``select_single_node``): with a node key and no rack
policy, the same order is searched without building the loop and without a look at
every node, by the :class:`LonePick` the view keeps for the request's shape
(:func:`_lone`): for a job with hosts whose order within the tiers is that node key,
the job's hosts, the best of the rest of their racks (an index of the nodes by rack,
kept up to date row by row), then the strategy's node index in (key, tie order),
skipping those racks (:meth:`~gangmaster.selectors.candidates.KeyWalk.best_near`,
the order of :func:`~gangmaster.selectors.candidates.best_by_tier`); with no hosts (a
gang of one, a job's first instance) or no tiers (a random pick), the index alone,
which also gives a random pick its few best to draw from. Otherwise (a key that is
not a node key, hosts the view does not know) the loop picks
(:meth:`_Loop._indexed_pick`, or its scan). One instance of a job with no hosts yet,
booked (a gang's first instance: story 3's coordinator), is that same
:class:`LonePick`'s, then booked: on the view ``place`` is given as ``same`` when the
view it books on is a fresh scratch copy of it, whose indexes would be made afresh.

What a step placed is kept as arrays (:class:`Placement`): the per-node lists of GPU
masks and ports are made only when read, and the view keeps its free ports as codes into
a table of the distinct sets (:mod:`~gangmaster.selectors.port_column`), so a step of
thousands of nodes costs numpy calls, not Python work per node. A step among the job's
hosts (a pick, the hosts filled in one step) is counted at once and booked with the
sweep that follows it, if one does: one booking, GPU and port choice for both.

GPUs and ports
--------------
A node's instances get their GPUs from the strategy's ``choose_gpus``, one choice
after another as if each were booked before the next (the base class's lowest free
bits, for many nodes at once), and their ports from the
node's free ports at or above ``port_min`` (sequentially: the lowest ones, as
successive single choices would; or drawn with the pipeline's RNG), unless the
request names its ports; the sequential choice of each (free set, instances) is worked
out once by the view's table of port sets, for good
(:meth:`~gangmaster.selectors.port_column.PortTable.sequential`), and handed to the
booking as a :class:`~gangmaster.selectors.port_column.PortChoice`.
Everything a step places is booked on the view at once
(:meth:`ClusterView.allocate_many`) when the caller asks for booking.

A share of one GPU (``gpu_milli``) is placed the same way — a node's room for it is
Σ over its GPUs of ⌊milli free / share⌋, which any GPU choice with room lowers by
exactly one, so filling a node in one step still holds — but its instances get their
GPU one at a time: ``choose_gpus`` on the view as the instances before left it
(several may land on one GPU or on several), each instance booked on its own
(:meth:`ClusterView.allocate`: a share names its GPU, which a bulk booking cannot).
Not booking, the shares chosen are booked on the view while choosing and given back.
"""
from __future__ import annotations

import bisect
import operator
from dataclasses import replace
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Callable, Iterable, TypeVar, Union

import numpy as np

from gangmaster.gpu_topology.masks import lowest_bits

from .candidates import KeyWalk, best_by_tier, node_passes
from .cluster import ClusterView
from .explanation import NotAvailable
from .filters import BEFORE_ROOM, RACK_STAGE, FilterContext
from .fit import room as fit_room
from .identity_memo import IdentityMemo
from .port_column import PortChoice, distinct
from .ports import NO_PORTS, PortRanges
from .request import SelectionRequest
from .resources import ResourceDescriptor
from .selector import Selector

T = TypeVar("T")

if TYPE_CHECKING:
    from .pipeline import SelectionPipeline
    from .selector import NodeKey
    from .settings import SelectionSettings


class TieOrder:
    """The pipeline's order for exact ties: a permutation of node positions drawn from
    the seed (one per cluster size, kept)."""

    def __init__(self, seed: int):
        self.seed = seed
        self._by_size: dict[int, np.ndarray] = {}

    def of(self, nodes: int, hosts: list[str] | None = None) -> np.ndarray:
        """``order[node]``: the lower, the earlier the node wins a tie (``hosts``, the
        view's host names, serve the ``node-name`` rule's order; this one ignores them)."""
        order = self._by_size.get(nodes)
        if order is None:
            order = self._by_size[nodes] = _seeded_order(self.seed, nodes)
        return order


@lru_cache(maxsize=64)
def _seeded_order(seed: int, nodes: int) -> np.ndarray:
    """:meth:`TieOrder.of`, drawn once per seed and cluster size (a pipeline is made per
    AM, per bench run; the order is the same). Read only."""
    permutation = np.random.default_rng(seed & (2**64 - 1)).permutation(nodes)
    order = np.empty(nodes, dtype=np.int64)
    order[permutation] = np.arange(nodes)
    order.flags.writeable = False
    return order


class RecentHosts:
    """The job's hosts as the locality tiers see them: the distinct hosts used, in the
    order first used, the oldest dropped beyond ``limit`` (None: no limit)."""

    def __init__(self, view: ClusterView, hosts=(), limit: int | None = None):
        self.view, self.limit = view, limit
        self.nodes: list[int] = []
        self._held: set[int] = set()
        self.add([view.host_index[h] for h in hosts if h in view.host_index])

    def add(self, nodes: list[int] | np.ndarray) -> None:
        if len(nodes) == 0:
            return
        if self.limit is not None and len(nodes) > 1 and not self._any_held(nodes):
            # all new (a sweep): the last ``limit`` of them at once
            self.nodes = (self.nodes + np.asarray(nodes)[-self.limit:].tolist())[-self.limit:]
            self._held = set(self.nodes)
            return
        for node in (nodes.tolist() if isinstance(nodes, np.ndarray) else nodes):
            if node not in self._held:
                self.nodes.append(int(node))
                self._held.add(node)
                if self.limit is not None and len(self.nodes) > self.limit:
                    self._held.discard(self.nodes.pop(0))

    def _any_held(self, nodes: list[int] | np.ndarray) -> bool:
        """Whether some of ``nodes`` (distinct) is held already: marked in one pass, not
        compared with each held node in turn."""
        if not self.nodes:
            return False
        marked = np.zeros(len(self.view), dtype=bool)
        marked[nodes] = True
        return bool(marked[self.nodes].any())

    def hosts(self) -> tuple[str, ...]:
        return tuple(self.view.hosts[i] for i in self.nodes)


def place(pipeline: "SelectionPipeline", view: ClusterView, request: SelectionRequest, count: int,
          recent: RecentHosts | None = None, book: bool = True, same: ClusterView | None = None,
          final: bool = False) -> "Placement":
    """Place ``count`` instances of ``request`` (its ``placed_hosts`` are replaced by
    ``recent`` when given); book them on ``view`` when ``book``. Raises
    :class:`NotAvailable` (the filter chain's explanation for the instance that found
    no node) with the :class:`Placement` so far in ``placed``.

    ``same``: a view whose nodes stand exactly as ``view``'s do now (the AM's view, of which
    ``view`` is a scratch copy nothing was booked on yet), read and never changed: a pick
    of one instance reads the indexes it keeps (made once for every placement, where a
    fresh copy would make them again).

    ``final``: nothing reads ``view`` after this call (a gang's scratch copy, after its last
    role): the last step is chosen as booked steps are, from the view as the steps before it
    left it, but not written into the view (a bulk booking of thousands of rows nobody reads)."""
    if count == 1 and not book and recent is None:
        placed = _lone(pipeline, view, request)   # (the request as asked: the job's hosts are its own)
        if placed is not None:
            return placed
    loop = _Loop(pipeline, view, request, count, recent, book, same, final)
    loop.run()
    return loop.placement


def _lone(pipeline: "SelectionPipeline", view: ClusterView, request: SelectionRequest) -> "Placement | None":
    """One instance, not booked: :meth:`LonePick.pick` of the pick the view keeps for the
    request's shape, as a :class:`Placement`; None when that does not apply (the loop
    decides)."""
    picked = lone_pick(view, pipeline, request).pick(request)
    if picked is None:
        return None
    node, gpu_mask, ports, key = picked
    return Placement([node], [[gpu_mask]], [[ports]], [np.int64(key)], 1)


class LonePick:
    """The loop's pick of one instance, not booked, without the loop, for every request of
    one shape (:func:`request_shape`) on ``view``, made ready once and kept by the view
    (:func:`lone_pick`) to pick again as the view changes: with a node key and no rack
    policy, the best node that fits through the strategy's node index, walked by a
    :class:`~gangmaster.selectors.candidates.KeyWalk` kept for the key (a random pick
    draws among the ``keep()`` best) — for a job with hosts, when the strategy orders by
    locality, the hosts, then their racks, then the index
    (:meth:`~gangmaster.selectors.candidates.KeyWalk.best_near`) —, its GPUs and ports
    chosen as the loop chooses them. The strategy is asked its node key at every pick
    (FGD's changes with the workload it learns); the walk is made again when the key is
    another."""

    __slots__ = ("pipeline", "view", "request", "selector", "applies", "at_random", "locality", "walk", "_gpus",
                 "_plain", "_ports", "_lowest", "_sequential", "_tiers_by_key")

    def __init__(self, pipeline: "SelectionPipeline", view: ClusterView, request: SelectionRequest):
        self.pipeline, self.view, self.request = pipeline, view, request   # (any request of the shape)
        self.selector = selector = pipeline.selector   # (a pipeline's strategy is set when it is made)
        self.at_random = selector.pick_at_random
        self.locality = selector.prefer_locality and not selector.pick_at_random
        #: the order within the tiers is the node key, by the base class's rule (not asked per pick)
        self._tiers_by_key = type(selector).key_within_tiers is Selector.key_within_tiers
        self.applies = request.rack_policy == "none"
        self.walk: KeyWalk | None = None
        resource, demand = request.resource, request.demand
        #: GPUs and ports chosen by the plain rules: whole GPUs by count (or none) by the base
        #: class's (the lowest free ones), ports by count (or none) sequentially (the lowest
        #: free at or above ``port_min``); else :func:`_one_instance` chooses
        self._plain = (type(selector).choose_gpus is Selector.choose_gpus and not resource.gpu_mask
                       and not resource.gpu_milli and not demand.port_ranges
                       and (not demand.ports or pipeline.settings.port_choice == "sequential"))
        self._gpus, self._ports = resource.gpus, demand.ports
        #: the plain choices made so far (values): GPUs per free mask; ports per free ports
        #: (by identity: nodes of a kind share their free ports), kept with them
        self._lowest: dict[int, int] = {}
        self._sequential: dict = {}

    def pick(self, request: SelectionRequest | None = None) -> tuple[int, int, PortRanges, int] | None:
        """``(node, GPU mask, ports, key)`` of the one instance of ``request`` (of this
        pick's shape; the one it was made with when None); None when the pick does not apply (a rack policy, no node key, a
        job's hosts the view does not know or whose order is not a node key's within the
        tiers); raises :class:`NotAvailable` when no node takes it."""
        if not self.applies:
            return None
        request = request or self.request
        selector = self.selector
        key = selector.node_key(request)
        if key is None:
            return None
        walk = self.walk
        if walk is None or walk.key is not key:
            walk = self._walk(key)
        placed = request.placed_hosts
        if placed and self.locality:
            if not self._tiers_by_key and selector.key_within_tiers(request) is not key:
                return None
            known = self.view.host_index
            hosts = {known[h] for h in placed if h in known}
            if not hosts:
                return None
            entry = walk.best_near(hosts)
        else:
            found = walk.best(selector.keep(request, len(self.view)) if self.at_random else 1)
            # (a random pick draws among the keep() best: at most those that fit)
            entry = found[0] if len(found) == 1 else found[self.pipeline.rng.randrange(len(found))] if found else None
        if entry is None:
            raise _not_available(self.pipeline, self.view, request, Placement.nothing())
        key, _, node = entry
        if not self._plain:
            return (node, *_one_instance(self.pipeline, self.view, request, node), key)
        gpu_mask, ports = 0, NO_PORTS
        if self._gpus:
            free = self.view.gpu_free_mask.item(node)
            gpu_mask = self._lowest.get(free)
            if gpu_mask is None:
                gpu_mask = self._lowest[free] = lowest_bits(free, self._gpus)
        if self._ports:
            column = self.view.ports_free
            free_ports = column.table.values[column.codes.item(node)]
            known = self._sequential.get(id(free_ports))
            if known is None:
                if len(self._sequential) >= SEQUENTIAL_KEPT:
                    self._sequential.clear()
                taken = free_ports.take_sequential(self._ports, self.pipeline.settings.port_min)
                known = self._sequential[id(free_ports)] = (PortRanges.from_ports(taken), free_ports)
            ports = known[0]
        return node, gpu_mask, ports, key

    def _walk(self, key: "NodeKey") -> KeyWalk:
        """The walk of ``key`` (the strategy's node key now), made and kept."""
        pipeline, view = self.pipeline, self.view
        self.walk = KeyWalk(view, self.request, pipeline.settings, key, pipeline.tie_order.of(len(view), view.hosts))
        return self.walk


#: how many sequential port choices a :class:`LonePick` keeps (then it starts afresh)
SEQUENTIAL_KEPT = 1024


def request_shape(request: SelectionRequest) -> tuple:
    """What a :class:`LonePick` reads of a request beyond the pick itself: everything the
    filters and the GPU and port choice read — all of it but the job's hosts (the pick
    reads them) and the pending count (a random pick's ``keep()``, read at the pick). The
    resource by its fields and port sets by their ranges: a tuple of numbers, strings, None
    and tuples, hashed and compared in C (a descriptor's own hash and ``==`` run in Python,
    at every select())."""
    resource = request.resource
    return (resource.memory_mb, resource.vcores, resource.gpus, resource.gpu_mask, resource.ports,
            resource.port_ranges.ranges, resource.gpu_milli, request.role, request.node_label, request.gpu_types,
            request.reuse_ports.ranges, request.job_gpus, request.max_instances_per_node, request.rack_policy)


def lone_pick(view: ClusterView, pipeline: "SelectionPipeline", request: SelectionRequest) -> LonePick:
    """The :class:`LonePick` of ``request``'s shape on ``view`` with ``pipeline``, made at the
    shape's first ask and kept by the view
    (:attr:`~gangmaster.selectors.cluster.ClusterView.prepared`), found by the identity of
    the pipeline and the request's shape (a replay's jobs and the bench's stream ask a few
    hundred shapes through thousands of request objects)."""
    name = (id(pipeline), request_shape(request))
    lone = view.prepared.get(name)
    if lone is None:
        lone = view.prepared.put(name, (pipeline,), LonePick(pipeline, view, request))
    return lone


def _not_available(pipeline: "SelectionPipeline", view: ClusterView, request: SelectionRequest,
                   placed: "Placement") -> NotAvailable:
    """No eligible node: the filter chain's explanation, as one select() would give it now,
    with what was placed so far. The chain runs when the explanation is first read, over
    a copy of the view as it is now (a replay's dropped pods never read theirs)."""
    now = view.copy(keep_derived=False)
    exc = NotAvailable(lambda: pipeline.filter(now, request)[1])
    exc.placed = placed
    return exc


def _one_instance(pipeline: "SelectionPipeline", view: ClusterView, request: SelectionRequest,
                  node: int) -> tuple[int, PortRanges]:
    """The GPUs and ports of one instance on ``node``, not booked: the GPUs named, the
    strategy's choice (a share's GPU checked), or none; the ports as :func:`_ports` gives them."""
    demand = request.demand
    if demand.gpu_milli:
        gpu_mask = _share_gpu(pipeline.selector, view, node, request)
    else:
        gpu_mask = demand.gpu_mask or (pipeline.selector.choose_gpus(view, node, request) if demand.gpus else 0)
    if not demand.ports:   # (_ports's answer for an instance that asks none)
        return gpu_mask, NO_PORTS
    ports = _ports(pipeline, view, demand, np.array([node], dtype=np.int64), np.ones(1, dtype=np.int64))[0]
    return gpu_mask, (ports() if callable(ports) else ports)[0][0]


def room_per_node(view: ClusterView, request: SelectionRequest, settings: "SelectionSettings",
                  limit: int | None = None) -> np.ndarray:
    """int64 per node: how many instances of ``request`` the node takes now — 0 where a
    filter other than the rack policy says no, else the fit model's room capped by
    ``max_instances_per_node`` less the role's instances there (and by ``limit``). The
    placement loop starts from it; a diagnosis asks it of nodes it imagines (restored,
    added)."""
    # The cap and the fit are counted here (0 exactly where their stages would say no), the
    # other stages asked of every node, and the nodes where the role failed kept off as the
    # fit's stage keeps them: one pass of the fit model, not two. Where most nodes pass (a
    # gang's roles, mostly), the room is counted on whole columns and the others zeroed after:
    # a few numpy calls over contiguous columns, not a gather of each column at the survivors.
    passing = node_passes(FilterContext(view, request, settings), stages=BEFORE_ROOM)
    failed = view.failed_here(request.role) if settings.skip_nodes_where_role_failed else None
    if failed is not None:
        passing = ~failed if passing is None else passing & ~failed
    rows = None
    if passing is not None:
        survivors = int(np.count_nonzero(passing))
        if survivors == len(view):
            passing = None
        elif survivors * 2 < len(view):   # (few pass: counted at them alone)
            rows = np.flatnonzero(passing)
    counts = fit_room(view, request.demand, settings.port_min, rows=rows)
    cap = request.max_instances_per_node
    if cap is not None:
        counts = np.minimum(counts, cap - _take(view.instances_of(request.role), rows))
    np.maximum(counts, 0, out=counts)
    if limit is not None:
        np.minimum(counts, limit, out=counts)
    if rows is not None:
        room = np.zeros(len(view), dtype=np.int64)
        room[rows] = counts
        return room
    if passing is not None:
        counts *= passing
    return counts


class Placement:
    """What :func:`place` put where, one entry per node and step, in the order placed:
    the node, one GPU mask and one port range per instance there, and the strategy's
    key of the node when it was picked (for the nodes of a rack-by-rack sweep, its key
    within the tier, :meth:`Selector.key_within_tiers`: locality's without the tier);
    ``count``: the instances placed. A plain slotted class: one is made per pick.

    A step of many nodes (a sweep) is kept as the loop made it — the nodes, counts and
    keys as arrays, the GPU masks and ports as what makes their lists — and turned into
    the lists when they are first read: a gang of thousands is decided many times (a
    never-fits check, a bench, a domain's trial) for each time its instances are read
    one by one. :meth:`instance_nodes` reads the node of each instance from the arrays."""

    __slots__ = ("count", "_lists", "_steps")

    def __init__(self, nodes: list[int], gpu_masks: list[list[int]], ports: list[list[PortRanges]],
                 keys: list, count: int):
        self._lists = (nodes, gpu_masks, ports, keys)
        self._steps: list[tuple] = []   # (nodes, takes, GPU masks, ports, keys), not yet in the lists
        self.count = count

    @classmethod
    def nothing(cls) -> "Placement":
        """Nothing placed yet."""
        return cls([], [], [], [], 0)

    def add(self, nodes: np.ndarray, takes: np.ndarray, gpu_masks: "Lazy[list[list[int]]]",
            ports: "Lazy[list[list[PortRanges]]]", keys: "Lazy[list | np.ndarray]", count: int) -> None:
        """One step: ``takes[k]`` instances on ``nodes[k]``; ``gpu_masks``, ``ports`` and
        ``keys`` the per-node lists, or what makes them (called once, when first read)."""
        self._steps.append((nodes, takes, gpu_masks, ports, keys))
        self.count += count

    @property
    def nodes(self) -> list[int]:
        return self._read()[0]

    @property
    def gpu_masks(self) -> list[list[int]]:
        return self._read()[1]

    @property
    def ports(self) -> list[list[PortRanges]]:
        return self._read()[2]

    @property
    def keys(self) -> list:
        return self._read()[3]

    def instance_nodes(self) -> np.ndarray:
        """The node of each instance, in order (from the steps' arrays: no list is made)."""
        nodes, masks = self._lists[0], self._lists[1]
        parts = [np.repeat(np.asarray(nodes, dtype=np.int64), list(map(len, masks)))] if nodes else []
        parts += [np.repeat(step[0], step[1]) for step in self._steps]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def _read(self) -> tuple[list[int], list[list[int]], list[list[PortRanges]], list]:
        nodes, gpu_masks, ports, keys = lists = self._lists
        for at, _, masks, ports_of, keys_of in self._steps:
            nodes += at.tolist()
            gpu_masks += masks() if callable(masks) else masks
            ports += ports_of() if callable(ports_of) else ports_of
            keys += _listed(keys_of() if callable(keys_of) else keys_of)
        self._steps = []
        return lists

    def __repr__(self) -> str:
        return (f"Placement(nodes={self.nodes!r}, gpu_masks={self.gpu_masks!r}, ports={self.ports!r}, "
                f"keys={self.keys!r}, count={self.count!r})")


class _Loop:
    def __init__(self, pipeline: "SelectionPipeline", view: ClusterView, request: SelectionRequest,
                 count: int, recent: RecentHosts | None, book: bool, same: ClusterView | None = None,
                 final: bool = False):
        self.pipeline, self.view, self.left, self.book, self.final = pipeline, view, count, book, final
        self.same = view if same is None else same   # (read for a lone pick: see place())
        self.selector: Selector = pipeline.selector
        self.settings = pipeline.settings
        asked = RecentHosts(view, request.placed_hosts) if recent is None or request.placed_hosts else None
        self.recent = recent if recent is not None else asked
        self._hosts_asked = list(asked.nodes) if asked else []  # the request's hosts the view knows
        self.request = request
        self.demand = request.demand
        self.policy = request.rack_policy
        self.ties = pipeline.tie_order.of(len(view), view.hosts)
        self.placement = Placement.nothing()
        self.random_pick = self.selector.pick_at_random
        self.locality = self.selector.prefer_locality and not self.random_pick
        # one instance per pick where filling a node at once is not what one pick per
        # instance would do (module docstring)
        self.one_per_pick = self.random_pick or not self.locality or self.policy == "spread"
        self.room: np.ndarray | None = None
        #: a step counted but not yet booked, booked with the next (see _place)
        self._kept: tuple[np.ndarray, np.ndarray, list | np.ndarray] | None = None
        self._tiers_keyed: bool | None = None   # see _can_sweep

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        if self.left == 1 and self._one_pick():
            return
        self.room = self._initial_room()
        if self.one_per_pick and self._keys_stay():
            self._in_key_order()
            return
        while self.left > 0:
            if self._can_sweep():
                self._sweep()   # (books the step kept before it with its own)
                return
            self._book_kept()
            if self._fill_held():
                continue
            node, key, rivals = self._pick()
            take = 1 if self.one_per_pick or rivals else min(int(self.room[node]), self.left)
            self._place([node], [take], [key], keep=True)
        self._book_kept(last=True)

    def _one_pick(self) -> bool:
        """One instance placed without a look at every node, where the kept indexes give the
        loop's pick: with no hosts of the job (a gang's first instance: its coordinator), the
        :class:`LonePick` the view keeps for the request's shape, its GPUs and ports as it
        chose them, booked when booking; not booking, for a job with hosts,
        :meth:`_indexed_pick`. Whether it was (else the loop picks)."""
        if not self.recent.nodes:
            request = self._current()
            picked = lone_pick(self.same, self.pipeline, request).pick(request)
            if picked is None:
                return False
            self._take_one(*picked)
            return True
        if self.book:
            return False
        indexed = self._indexed_pick()   # (select_single_node for a job with hosts)
        if indexed is None:
            return False
        node, key = indexed
        self._take_one(node, *_one_instance(self.pipeline, self.view, self.request, node), key)
        return True

    def _initial_room(self) -> np.ndarray:
        """Room per node (0 where a filter other than the rack policy says no)."""
        return room_per_node(self.view, self.request, self.settings, self.left)

    def _current(self) -> SelectionRequest:
        """The request as one pick sees it now: the job's hosts so far (the request
        itself while they are the hosts it names that the view knows, so that a key
        reported is the strategy's rank for the request as asked)."""
        if self.recent.nodes == self._hosts_asked:
            return self.request
        hosts = self.recent.hosts()
        return self.request if hosts == self.request.placed_hosts else with_hosts(self.request, hosts)

    def _eligible(self) -> np.ndarray:
        alive = self.room > 0
        if self.policy != "none" and alive.any():
            ctx = FilterContext(self.view, replace(self.request, rack_policy=self.policy), self.settings)
            alive = RACK_STAGE.verdict(ctx, alive).passed
        return alive

    def _pick(self) -> tuple[int, object, bool]:
        """The next node in the pick order, its key, and whether other hosts of the job
        with room compete with it."""
        eligible = self._eligible()
        candidates = np.flatnonzero(eligible)
        if candidates.size == 0:
            self._give_up()
        rivals = False
        if self.locality and self.recent.nodes:
            held = [i for i in self.recent.nodes if eligible[i]]
            if held:
                candidates, rivals = np.array(held, dtype=np.int64), len(held) > 1
            else:
                racks = np.zeros(len(self.view.racks), dtype=bool)
                racks[self.view.rack_code[self.recent.nodes]] = True
                near = racks[self.view.rack_code[candidates]]
                if near.any():
                    candidates = candidates[near]
        request = self._current()
        keys = np.asarray(self.selector.rank(self.view, candidates, request))
        if keys.shape != candidates.shape:
            raise ValueError(f"{type(self.selector).__name__}.rank returned {keys.shape} keys for "
                             f"{candidates.shape[0]} candidates")
        if self.random_pick:
            kept = self.selector.keep(request, candidates.size)
            inside = np.flatnonzero(keys <= np.partition(keys, kept - 1)[kept - 1])  # the kept, and ties
            best = inside[np.lexsort((self.ties[candidates[inside]], keys[inside]))]
            j = best[0 if kept == 1 else self.pipeline.rng.randrange(kept)]
            return int(candidates[j]), keys[j], rivals
        return (*self._first(candidates, keys), rivals)

    def _fill_held(self) -> bool:
        """Place on the job's hosts with room in one step, when there are several and the
        strategy's key only falls as a node fills (:attr:`Selector.key_falls_when_booked`):
        one pick at a time would take the first in (key, tie order) until it is full, then
        the next. Whether it did."""
        if not (self.selector.key_falls_when_booked and self.locality and self.policy == "none"):
            return False
        room = self.room
        held = [i for i in self.recent.nodes if room[i] > 0]
        if len(held) < 2:
            return False
        candidates = np.array(held, dtype=np.int64)
        keys = np.asarray(self.selector.rank(self.view, candidates, self._current()))
        order = np.lexsort((self.ties[candidates], keys))
        nodes, keys = candidates[order], keys[order]
        cumulative = np.cumsum(room[nodes])
        used = min(int(np.searchsorted(cumulative, self.left)) + 1, nodes.size)
        takes = room[nodes[:used]].copy()
        takes[-1] -= max(0, int(cumulative[used - 1]) - self.left)
        self._place(nodes[:used], takes, list(keys[:used]), keep=True)
        return True

    def _first(self, nodes: np.ndarray, keys: np.ndarray) -> tuple[int, object]:
        """The first of ``nodes`` in (key, tie order), and its key."""
        best = np.flatnonzero(keys == keys.min())
        j = best[0] if best.size == 1 else best[np.argmin(self.ties[nodes[best]])]
        return int(nodes[j]), keys[j]

    def _indexed_pick(self) -> tuple[int, object] | None:
        """The same pick for one instance of a job with hosts without a look at every
        node, when the order is a node key's within the tiers and there is no rack policy
        (module docstring): the job's hosts, their racks, then the index; None when it
        does not apply (without tiers to search, the pick is :func:`_lone`'s)."""
        request, selector, view = self._current(), self.selector, self.view
        if self.policy != "none" or not (self.locality and self.recent.nodes):
            return None
        within = selector.key_within_tiers(request)
        if within is None:
            return None
        ctx = FilterContext(view, request, self.settings)
        nodes = best_by_tier(ctx, within, 1, self.ties)
        if nodes.size == 0:
            self._give_up()
        node = int(nodes[0])
        if selector.node_key(request) is not None:  # the rank is that key: read it
            return node, selector.node_key(request).column(view)[node]
        return node, np.asarray(selector.rank(view, nodes, request))[0]

    def _give_up(self) -> None:
        """No eligible node: the filter chain says why, as one select() would now."""
        self._book_kept()
        raise _not_available(self.pipeline, self.view, self._current(), self.placement)

    # ------------------------------------------------------------------ key order
    def _keys_stay(self) -> bool:
        """The key is a node key whatever the job's hosts, and no rack policy moves the
        eligible set: booking a node changes that node's key alone."""
        probe = with_hosts(self.request, tuple(self.view.hosts[:1]))
        return (self.policy == "none" and self.selector.node_key(self.request) is not None
                and self.selector.node_key(probe) is not None)

    def _in_key_order(self) -> None:
        """One instance per pick (no locality tiers here: a random pick or a strategy
        that opts out), the eligible nodes kept sorted by (key, tie order): only the
        node booked moves, to where its new key puts it."""
        column = self.selector.node_key(self.request).column
        nodes = np.flatnonzero(self.room > 0)
        keys = column(self.view)[nodes]
        order = sorted(zip(keys.tolist(), self.ties[nodes].tolist(), nodes.tolist()))
        while self.left > 0:
            if not order:
                self._give_up()
            j = 0
            if self.random_pick:
                kept = self.selector.keep(self.request, len(order))
                j = 0 if kept == 1 else self.pipeline.rng.randrange(kept)
            key, tie, node = order.pop(j)
            self._place([node], [1], [key])
            if self.room[node] > 0:
                bisect.insort(order, (column(self.view)[node].item(), tie, node))

    # ------------------------------------------------------------------ sweep
    def _can_sweep(self) -> bool:
        """Whether the rest of the role can go rack by rack (module docstring)."""
        if self.one_per_pick or self.policy != "none" or self.left <= 1:
            return False
        if self._tiers_keyed is None:   # (the strategy's answer for this request: asked once per loop)
            probe = with_hosts(self.request, tuple(self.view.hosts[:1]))
            self._tiers_keyed = (self.selector.key_within_tiers(self.request) is not None
                                 and self.selector.key_within_tiers(probe) is not None)
        if not self._tiers_keyed:
            return False
        if max(map(self.room.item, self.recent.nodes), default=0) > 0:   # (a held node has room)
            return False
        racks = {int(self.view.rack_code[i]) for i in self.recent.nodes}
        with_room = [r for r in racks if self._rack_has_room(r)]
        return len(with_room) <= 1

    def _rack_has_room(self, rack: int) -> bool:
        return bool((self.room[self.view.rack_rows([rack])] > 0).any())

    def _sweep(self) -> None:
        view = self.view
        by_tie = _tie_sorted(self.ties)
        nodes = by_tie[self.room[by_tie] > 0]   # (in tie order: one stable sort by key orders both)
        if nodes.size == 0:
            self._give_up()
        column = self.selector.key_within_tiers(self.request).column(view)
        by_key = nodes[np.argsort(column[nodes], kind="stable")]
        job_racks = set(view.rack_code[self.recent.nodes].tolist())
        ordered = by_key[_by_rack(view.rack_code[by_key], len(view.racks), job_racks)]
        room = self.room[ordered]
        cumulative = np.cumsum(room)
        used = int(np.searchsorted(cumulative, self.left)) + 1
        if used > ordered.size:  # not enough room: place what fits, then explain
            used = ordered.size
        chosen = ordered[:used]
        takes = room[:used]
        takes[-1] -= max(0, int(cumulative[used - 1]) - self.left)
        self._place(chosen, takes, column[chosen])
        if self.left > 0:
            self._give_up()

    # ------------------------------------------------------------------ booking
    def _place(self, nodes: list[int] | np.ndarray, takes: list[int] | np.ndarray, keys: list | np.ndarray,
               keep: bool = False) -> None:
        """Give ``takes[k]`` instances to ``nodes[k]``: GPUs, ports, booking. ``keep``: the
        step is counted now (room, instances left, the job's hosts) and booked with the next
        one — a sweep of the rest of the role (:meth:`_sweep`), or alone before anything else
        reads the view (:meth:`_book_kept`): a pick among the job's hosts and the sweep after
        it are one booking, not two. A sweep reads no node of the step kept (each is full, or
        it is one of the job's hosts with room and no sweep follows), and the keys, GPUs and
        ports of the others do not depend on it (the sweep's key is a node key)."""
        at, counts = np.asarray(nodes, dtype=np.int64), np.asarray(takes, dtype=np.int64)
        if self.room is not None:
            self.room[at] -= counts
        self.left -= int(counts.sum())
        self.recent.add(at)
        kept = self._kept
        if keep:
            self._book_kept()
            self._kept = (at, counts, keys)
            return
        if kept is not None:
            self._kept = None
            if bool(self.room[kept[0]].any()):   # (a node of it has room left: booked first, on its own)
                self._book(*kept)
            else:
                at, counts = np.concatenate([kept[0], at]), np.concatenate([kept[1], counts])
                keys = partial(_joined, kept[2], keys)
        self._book(at, counts, keys, last=self.left == 0)

    def _book_kept(self, last: bool = False) -> None:
        """Book the step :meth:`_place` kept, if any (``last``: the loop's last step)."""
        if self._kept is not None:
            kept, self._kept = self._kept, None
            self._book(*kept, last=last)

    def _book(self, at: np.ndarray, counts: np.ndarray, keys: "Lazy[list | np.ndarray]", last: bool = False) -> None:
        """GPUs, ports and booking of a step :meth:`_place` counted; recorded in the placement.
        The loop's ``last`` step is not written into a ``final`` view (see :func:`place`)."""
        ports, port_unions = _ports(self.pipeline, self.view, self.demand, at, counts)
        if self.demand.gpu_milli:
            ports = ports() if callable(ports) else ports
            gpu_masks = self._place_shares(at.tolist(), ports)
        else:
            gpu_masks, gpus = self._gpu_masks(at, counts)
            if self.book and not (last and self.final):
                self.view.allocate_many(at, counts, self.demand, gpus, port_unions, role=self.request.role)
        self.placement.add(at, counts, gpu_masks, ports, keys, int(counts.sum()))

    def _take_one(self, node: int, gpu_mask: int, ports: PortRanges, key) -> None:
        """:meth:`_place` for one instance whose GPUs and ports are chosen (as :meth:`_place`
        chooses them), without the arrays: booked when booking, recorded."""
        demand = self.demand
        if self.book:
            if demand.gpu_milli:   # (a share names its GPU: booked alone, as _place_shares books it)
                self.view.allocate(node, ResourceDescriptor.exactly(demand.memory_mb, self.request.resource.vcores,
                                                                    gpu_mask, ports, demand.gpu_milli),
                                   role=self.request.role)
            else:
                self.view.allocate_many(np.array([node], dtype=np.int64), np.ones(1, dtype=np.int64), demand,
                                        [gpu_mask] if demand.gpus else None,
                                        [ports] if demand.ports or demand.port_ranges else None,
                                        role=self.request.role)
        self.recent.add([node])
        placement = self.placement
        placement.nodes.append(node)
        placement.gpu_masks.append([gpu_mask])
        placement.ports.append([ports])
        placement.keys.append(np.int64(key) if isinstance(key, int) else key)
        placement.count += 1
        self.left -= 1

    def _gpu_masks(self, at: np.ndarray, counts: np.ndarray) -> tuple["Lazy[list[list[int]]]", np.ndarray | None]:
        """Per node, ``take`` successive GPU choices, as if each were booked before the
        next (their lists, or what makes them when read); and the GPUs of each node in all
        (None when the request asks none)."""
        wanted, named = self.demand.gpus, self.demand.gpu_mask
        # The lists of masks are shared by the nodes given the same (a placement's lists are
        # read, never changed): a gang's thousands of nodes get a few distinct ones.
        if not wanted:
            return partial(_repeated, 0, counts), None
        if named:  # the same GPUs cannot go twice: one instance per node
            return partial(_repeated, named, counts), np.full(at.size, named, dtype=np.uint64)
        lowest = type(self.selector).choose_gpus is Selector.choose_gpus   # (the lowest free bits)
        if lowest and at.size <= 8:   # a few nodes: in plain Python, no booking to choose the next
            masks, unions = [], []
            for node, take in zip(at.tolist(), counts.tolist()):
                free = was = self.view.gpu_free_mask.item(node)
                chosen = []
                for _ in range(take):
                    chosen.append(lowest_bits(free, wanted))
                    free &= ~chosen[-1]
                masks.append(chosen)
                unions.append(was & ~free)
            return masks, np.array(unions, dtype=np.uint64)
        if lowest:  # many nodes: at once
            was = self.view.gpu_free_mask[at]
            free = was.copy()
            rounds = []
            for k in range(int(counts.max())):
                mask = _lowest_bits(free, wanted) * (counts > k)
                free &= ~mask
                rounds.append(mask)
            return partial(_in_rounds, rounds, counts), was & ~free
        takes = counts.tolist()
        masks = [self._chosen_in_turn(node, take) for node, take in zip(at.tolist(), takes)]
        unions = [0] * len(masks)
        for k, chosen in enumerate(masks):
            for mask in chosen:
                unions[k] |= mask
        return masks, np.array(unions, dtype=np.uint64)

    def _chosen_in_turn(self, node: int, take: int) -> list[int]:
        """The strategy's own GPU choices on ``node``, each booked on the view before the
        next and given back after."""
        masks = [self.selector.choose_gpus(self.view, node, self.request)]
        if take > 1:
            for _ in range(take - 1):
                self.view.allocate(node, ResourceDescriptor(gpu_mask=masks[-1]))
                masks.append(self.selector.choose_gpus(self.view, node, self.request))
            for mask in masks[:-1]:
                self.view.release(node, ResourceDescriptor(gpu_mask=mask))
        return masks

    def _place_shares(self, nodes: list[int], ports: list[list[PortRanges]]) -> list[list[int]]:
        """Per node, the GPU of each instance of a share, chosen one after another on the
        view as the instances before left it; each instance booked (with its ports) when
        booking, else only its share, for the next choice, and given back at the end.
        A booking that fails gives back what this step booked before raising."""
        view, need, role = self.view, self.demand.gpu_milli, self.request.role
        memory, vcores = self.demand.memory_mb, self.request.resource.vcores
        booked: list[tuple[int, ResourceDescriptor, str | None]] = []
        masks: list[list[int]] = []
        try:
            for node, ports_of in zip(nodes, ports):
                chosen = []
                for instance_ports in ports_of:
                    gpu = _share_gpu(self.selector, view, node, self.request)
                    if self.book:
                        share = ResourceDescriptor.exactly(memory, vcores, gpu, instance_ports, need)
                    else:
                        share = ResourceDescriptor(gpu_milli=need, gpu_mask=gpu)
                    view.allocate(node, share, role=role if self.book else None)
                    booked.append((node, share, role if self.book else None))
                    chosen.append(gpu)
                masks.append(chosen)
        except Exception:
            self._give_back(booked)
            raise
        if not self.book:
            self._give_back(booked)
        return masks

    def _give_back(self, booked: list[tuple[int, ResourceDescriptor, str | None]]) -> None:
        for node, share, role in reversed(booked):
            self.view.release(node, share, role=role)



def _by_rack(racks: np.ndarray, count: int, first: set[int]) -> np.ndarray:
    """The positions of ``racks`` (rack codes, of ``count`` racks) grouped by rack, each
    rack's in order: the racks in ``first`` (the job's) before the others, the others in
    the order of their first position. A stable sort by each rack's rank, as small integers
    (numpy sorts those by radix: no comparison sort of the thousands of nodes); each rack's
    first position is the least of its positions (one pass, no sort)."""
    small = np.int16 if count < 1 << 15 else np.int64
    first_seen = np.full(count, racks.size, dtype=np.int64)
    np.minimum.at(first_seen, racks, np.arange(racks.size))   # (each rack's first position)
    for rack in first:
        first_seen[rack] = -1
    rank = np.searchsorted(np.sort(first_seen), first_seen).astype(small)   # (equal for equal positions)
    return np.argsort(rank[racks], kind="stable")


def with_hosts(request: SelectionRequest, hosts: tuple[str, ...]) -> SelectionRequest:
    """``request`` with the job's hosts ``hosts``, made once per request and hosts (found by
    the request's identity): the loop asks it of every role it places, and the gangs of one
    shape ask the same again (a dataclass's ``replace`` checks every field anew)."""
    key = (id(request), hosts)
    known = _with_hosts.get(key)
    if known is None:
        known = _with_hosts.put(key, (request,), replace(request, placed_hosts=hosts))
    return known


#: (id(request), hosts) -> the request with those hosts: see with_hosts
_with_hosts: IdentityMemo[SelectionRequest] = IdentityMemo(1024)


def _take(column: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """``column`` at ``rows`` (all of it when None)."""
    return column if rows is None else column[rows]


def _tie_sorted(ties: np.ndarray) -> np.ndarray:
    """The nodes in tie order (``ties`` a pipeline's :meth:`TieOrder.of`), sorted once per order."""
    by_tie = _by_tie.get(id(ties))
    if by_tie is None:
        by_tie = _by_tie.put(id(ties), (ties,), np.argsort(ties, kind="stable"))
    return by_tie


#: id(tie order) -> the nodes sorted by it
_by_tie: IdentityMemo[np.ndarray] = IdentityMemo(64)


def _shared(chosen: Iterable[tuple[int, ...]]) -> list[list[int]]:
    """A list per tuple of ``chosen``, one list object for the tuples that are equal."""
    chosen = list(chosen)
    lists = {each: list(each) for each in dict.fromkeys(chosen)}
    return list(map(lists.__getitem__, chosen))


def _listed(keys: list | np.ndarray) -> list:
    """Keys as a list (of Python numbers, from an array)."""
    return keys.tolist() if isinstance(keys, np.ndarray) else keys


def _joined(first: list | np.ndarray, then: list | np.ndarray) -> list:
    """The keys of two steps booked as one, in order."""
    return _listed(first) + _listed(then)


def _repeated(mask: int, counts: np.ndarray) -> list[list[int]]:
    """Per node, ``mask`` once per instance there."""
    return _shared((mask,) * take for take in counts.tolist())


def _in_rounds(rounds: list[np.ndarray], counts: np.ndarray) -> list[list[int]]:
    """Per node, the masks of its instances: round ``k`` gives each node its ``k``-th (0 to
    a node that took fewer)."""
    rows = [mask.tolist() for mask in rounds]
    if int(counts.min()) == len(rows):
        return _shared(zip(*rows))
    return _shared(map(operator.getitem, zip(*rows), map(slice, counts.tolist())))


#: a value, or what makes it when first read (a placement's lists: :class:`Placement`)
Lazy = Union[T, Callable[[], T]]


def _share_gpu(selector: Selector, view: ClusterView, node: int, request: SelectionRequest) -> int:
    """The strategy's GPU for one instance of a share on ``node`` (the one named, when
    the request names it); a choice that is not one GPU of the node is the strategy's
    error, named as such."""
    demand = request.demand
    gpu = int(demand.gpu_mask or selector.choose_gpus(view, node, request))
    if gpu <= 0 or gpu & (gpu - 1) or gpu.bit_length() > int(view.gpu_capacity[node]):
        raise ValueError(f"{type(selector).__name__}.choose_gpus gave {gpu:#x} for a share of "
                         f"{demand.gpu_milli} milli on {view.hosts[node]}: expected one of its GPUs")
    return gpu


def _ports(pipeline: "SelectionPipeline", view: ClusterView, demand, at: np.ndarray,
           counts: np.ndarray) -> tuple["Lazy[list[list[PortRanges]]]", list[PortRanges] | PortChoice | None]:
    """Per node ``at[k]``, the ports of each of its ``counts[k]`` instances (their lists,
    or what makes them when read); and the ports of each node in all, as
    :meth:`ClusterView.allocate_many` takes them (None when the request asks none; for
    sequential ports, a :class:`~gangmaster.selectors.port_column.PortChoice`: nodes of a
    kind share their free ports, and each (free ports, count) is worked out once, by the
    view's table of port sets, for good)."""
    if demand.port_ranges:  # named ports cannot go twice: one instance per node
        return partial(_repeated_ports, demand.port_ranges, counts), [demand.port_ranges] * at.size
    if not demand.ports:
        return partial(_repeated_ports, NO_PORTS, counts), None
    settings = pipeline.settings
    port_min, free_ports = settings.port_min, view.ports_free
    if settings.port_choice == "random":
        chosen, unions = [], []
        for node, take in zip(at.tolist(), counts.tolist()):
            free = free_ports[node]
            each = []
            for _ in range(take):
                each.append(free.take_random(demand.ports, pipeline.rng, port_min))
                free = free.subtract(each[-1])
            chosen.append(each)
            unions.append(free_ports[node].subtract(free))
        return chosen, unions
    table = free_ports.table
    if at.size == 1:   # (one pick)
        free, takes, inverse = [free_ports.codes.item(at.item(0))], [counts.item(0)], np.zeros(1, dtype=np.int64)
    else:
        most = int(counts.max()) + 1
        unique, inverse = distinct(free_ports.codes[at].astype(np.int64) * most + counts, len(table) * most)
        free, takes = (part.tolist() for part in divmod(unique, most))
    each_lists, taken, left = [], [], []
    for code, take in zip(free, takes):
        lists, union, rest = table.sequential(code, demand.ports, take, port_min)
        each_lists.append(lists)
        taken.append(union)
        left.append(rest)
    choice = PortChoice(np.array(free, dtype=np.int64), np.array(takes, dtype=np.int64),
                        np.array(taken, dtype=np.int64), np.array(left, dtype=np.int32), inverse, table)
    return partial(_gathered, each_lists, inverse), choice


def _repeated_ports(ports: PortRanges, counts: np.ndarray) -> list[list[PortRanges]]:
    return [[ports] * take for take in counts.tolist()]


def _gathered(lists: list, inverse: np.ndarray) -> list:
    """``lists[inverse[k]]`` for each k (one C-level pass)."""
    return list(map(lists.__getitem__, inverse.tolist()))


def _lowest_bits(free: np.ndarray, count: int) -> np.ndarray:
    """Per mask, its ``count`` lowest set bits (``lowest_bits`` for a column)."""
    if count == 1:
        return free & (~free + np.uint64(1))
    chosen = np.zeros_like(free)
    left = free.copy()
    for _ in range(count):
        low = left & (~left + np.uint64(1))
        chosen |= low
        left ^= low
    return chosen
