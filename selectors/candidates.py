"""The best nodes that can take a request: through the strategy's node index, or by a scan.

Both ways give one answer: the ``k`` nodes that pass every filter, with the lowest
(strategy key, tie rank), best first; the tie rank is the node number unless the
caller gives a seeded order.

* **Indexed**, when the strategy gives a node key for the request
  (:meth:`~gangmaster.selectors.selector.Selector.node_key`) and the request has no
  rack policy: the view's :class:`~gangmaster.selectors.node_index.NodeIndex` for that
  key is walked best first, from the buckets of nodes with enough free GPUs, checked
  by the stages that judge each node alone: its first few nodes one at a time in plain
  Python (:meth:`~gangmaster.selectors.filters.Filter.check_one`; most walks end
  there), then a chunk at a time (:meth:`~gangmaster.selectors.filters.Filter.passes`),
  until ``k`` pass. The cost is the nodes read before ``k`` pass, not the cluster.
  A pick of one instance walks through a :class:`KeyWalk` the view keeps per request
  shape (:class:`~gangmaster.selectors.placement.LonePick`): what the walk needs is
  made once, not at every pick; for a job with hosts, by tier as below, its racks read
  through an index of the nodes by rack (:meth:`KeyWalk.best_near`).
* **By tier**, when the key depends on the job's hosts only through the locality
  tier, a node key below it (:meth:`~gangmaster.selectors.selector.Selector.key_within_tiers`:
  locality's with placed hosts), and no rack policy (:func:`best_by_tier`): the job's
  hosts, then the other nodes of their racks (the view's rack grouping), each checked
  and sorted, then the index walk for the rest, skipping those racks. The cost is
  the hosts' racks and ``k``, not the cluster; the keys are the strategy's rank of
  the nodes found.
* **Scanned** otherwise (a rack policy, which compares racks; a plugin that only
  ranks; or a search restricted to given rows): those stages over every node
  considered, the rack policy, then the strategy's rank of the survivors and the
  ``k`` smallest.

Neither explains: when nothing passes, the caller runs the filter chain, which
accounts for every node exactly.
"""
from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from .filters import NODE_STAGES, RACK_STAGE, Filter, FilterContext, NodeCheck, RowCheck
from .node_index import NodeIndex, min_bucket, room_bucket, room_buckets

if TYPE_CHECKING:
    from .cluster import ClusterView
    from .request import SelectionRequest
    from .selector import NodeKey, Selector
    from .settings import SelectionSettings

NO_NODES = np.zeros(0, dtype=np.int64)


def best_fitting(view: "ClusterView", request: "SelectionRequest", settings: "SelectionSettings",
                 selector: "Selector", k: int, rows=None,
                 ties: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best nodes (among ``rows``, distinct node indices, when given) that pass
    every filter, best first by (key, tie rank), and their keys; empty when none
    pass. ``ties`` ranks equal keys (one rank per node, lower first; keep the same
    array for the same order: the view keeps an index per array); the node number
    when None."""
    ctx = FilterContext(view, request, settings)
    ties = None if ties is None else np.asarray(ties)
    if rows is None and request.rack_policy == "none":
        key = selector.node_key(request)
        if key is not None:
            return _indexed(ctx, key, k, ties)
        within = selector.key_within_tiers(request)
        if within is not None:
            nodes = best_by_tier(ctx, within, k, ties)
            return nodes, (np.asarray(selector.rank(view, nodes, request)) if nodes.size else NO_NODES)
    return _scanned(ctx, selector, k, rows, ties)


def best_by_tier(ctx: FilterContext, key: "NodeKey", k: int, ties: np.ndarray | None) -> np.ndarray:
    """The ``k`` best nodes that pass the stages judging a node alone, best first by
    (locality tier, ``key``, tie rank): the job's hosts (``ctx.request.placed_hosts``),
    then the other nodes of their racks, then the rest through ``key``'s index."""
    view = ctx.view
    known = view.host_index
    hosts = {known[h] for h in ctx.request.placed_hosts if h in known}
    if not hosts:
        return _indexed(ctx, key, k, ties)[0]
    column = key.column(view)
    racks = view.rack_code[list(hosts)]
    near = view.rack_rows(racks)  # the hosts' racks, the hosts among them
    passing = node_passes(ctx, near)
    fitting = near if passing is None else near[passing]
    on_host = np.zeros(fitting.size, dtype=bool)
    for host in hosts:  # a few hosts: cheaper than np.isin over the racks
        on_host |= fitting == host
    found: list[np.ndarray] = []
    wanted = k
    for on_hosts in (True, False):
        tier = fitting[on_host if on_hosts else ~on_host]
        if tier.size:
            chosen = tier[smallest(column[tier], wanted, tier if ties is None else ties[tier])]
            found.append(chosen)
            wanted -= chosen.size
        if wanted == 0:
            return np.concatenate(found)
    held_racks = np.zeros(len(view.racks), dtype=bool)
    held_racks[racks] = True
    elsewhere = _indexed(ctx, key, wanted, ties, skip=lambda nodes: held_racks[view.rack_code[nodes]])[0]
    return np.concatenate(found + [elsewhere])


def _indexed(ctx: FilterContext, key: "NodeKey", k: int, ties: np.ndarray | None,
             skip=None) -> tuple[np.ndarray, np.ndarray]:
    """The index walk: the ``k`` best nodes by (key, tie rank) that pass (and that
    ``skip``, a bool per node, leaves), and their keys."""
    lowest = min_bucket(ctx.request.resource)
    index = node_index(ctx.view, key, ties, lowest)
    passes, passes_one = _built_when_asked(ctx), node_check_one(ctx)
    if skip is None:
        return index.best(k, lowest, passes, passes_one)
    return index.best(k, lowest, lambda nodes: passes(nodes) & ~skip(nodes),
                      lambda node: not skip(node) and passes_one(node))


class KeyWalk:
    """:func:`best_fitting` for a request whose strategy gives ``key`` as its node key
    and that has no rack policy (the index walk), made ready once for one view and
    kept to walk again (:meth:`best`) as the view changes: the view's index by ``key``
    (equal keys by ``ties``), the first bucket the request reads, and the request's
    checks of one node (:func:`node_check_one`, made again only when the view gains a
    role's count or failures: the checks hold those columns). The check of chunks
    (:func:`node_check`) is made for the view as it stands, when a walk first asks it
    after the view changed. A pick of one instance walks the same few request shapes
    again and again (a trace replay's, a bench's stream): see
    :class:`~gangmaster.selectors.placement.LonePick`. The request it is made with
    stands for its shape: the checks read nothing of it but the shape (not its hosts)."""

    __slots__ = ("view", "key", "ctx", "index", "lowest", "ties", "_key_of", "_bucket_of", "_columns", "_one",
                 "_one_for", "_rows", "_rows_for", "_racks")

    def __init__(self, view: "ClusterView", request: "SelectionRequest", settings: "SelectionSettings",
                 key: "NodeKey", ties: np.ndarray | None):
        self.view, self.key = view, key
        self.ctx = FilterContext(view, request, settings)
        self.index = kept_node_index(view, key, ties)
        self.lowest = min_bucket(request.resource)
        self.ties = ties
        self._racks: NodeIndex | None = None   # the nodes by rack (see best_near), made at its first ask
        compute_row = key.compute_row
        self._key_of = None if compute_row is None else partial(compute_row, view)
        self._bucket_of = partial(room_bucket, view)
        self._columns = partial(every_entry, view, key)
        self._one_for = self._rows_for = None   # the view's state the checks were made for

    def best(self, k: int) -> list[tuple[int, int, int]]:
        """The ``k`` best nodes that pass every filter now, as ``(key, tie rank, node)``
        of each, best first: Python values for a caller that picks one of a few."""
        return self.index.best_entries(k, self.lowest, self._passes, self._take_in())

    def best_near(self, hosts: set[int]) -> tuple[int, int, int] | None:
        """:func:`best_by_tier` for one node, as its ``(key, tie rank, node)`` (None when
        none passes): the best of the job's ``hosts`` (node numbers) that passes, else of
        the other nodes of their racks, else of the rest (the index walk, skipping those
        racks). The racks are read through an index of the nodes by rack and bucket
        (:func:`kept_rack_index`, kept up to date row by row as the main one): in each of
        the hosts' racks, each of its runs of a bucket the request reads is walked to its
        first node that passes — a few of a rack's nodes read, not the rack."""
        passes_one = self._take_in()
        lowest = self.lowest
        entries, bucket_of, runs = self.index.rows()
        best = None
        for node in hosts:   # (a node in a bucket below lowest cannot pass; nor a parked one then)
            if bucket_of[node] >= lowest and passes_one(node):
                entry = entries[node]
                if best is None or entry < best:
                    best = entry
        if best is not None:
            return best
        rack_code = self.view.rack_code
        held = {rack_code.item(node) for node in hosts}
        run_of = self._by_rack().rows()[2].get
        buckets = [bucket for bucket in runs if bucket >= lowest]   # (a rack's buckets are some of these)
        for rack in held:
            first = (rack + 1) * RACK_STRIDE
            for bucket in buckets:
                for entry in run_of(first + bucket, ()):
                    if best is not None and entry >= best:
                        break
                    node = entry[2]
                    if node not in hosts and passes_one(node):
                        best = entry
                        break
        if best is not None:
            return best
        away = np.ones(len(self.view.racks), dtype=bool)
        away[list(held)] = False
        found = self.index.best_entries(1, lowest, lambda nodes: self._passes(nodes) & away[rack_code[nodes]],
                                        lambda node: rack_code.item(node) not in held and passes_one(node))
        return found[0] if found else None

    def _take_in(self) -> "NodeCheck":
        """The index up to date with the view (node_index's taking in, with this walk's
        functions); returns the check of one node for the view as it stands."""
        view, index = self.view, self.index
        if index.dirty or not self.lowest and index.parked:
            index.take_in(self._key_of or self.key.column(view).item, self._bucket_of, self._columns, self.lowest)
        roles = (len(view.role_count), len(view.role_failed))
        if roles != self._one_for:
            self._one, self._one_for = node_check_one(self.ctx), roles
        return self._one

    def _by_rack(self) -> NodeIndex:
        """The view's index of its nodes by rack and bucket (:func:`kept_rack_index`), up to date."""
        racks = self._racks
        if racks is None:
            racks = self._racks = kept_rack_index(self.view, self.key, self.ties)
        if racks.dirty:
            view = self.view
            racks.take_in(self._key_of or self.key.column(view).item, partial(rack_bucket, view),
                          partial(every_rack_entry, view, self.key), 1)
        return racks

    def _passes(self, rows: np.ndarray) -> np.ndarray:
        view = self.view
        state = (view.changes, len(view.role_count), len(view.role_failed))
        if state != self._rows_for:
            self._rows, self._rows_for = node_check(self.ctx) or _every, state
        return self._rows(rows)


def _built_when_asked(ctx: FilterContext) -> "RowCheck":
    """:func:`node_check` for ``ctx`` (every node passing when it is None), made at its
    first call: an index walk whose first nodes pass one by one never asks it."""
    built: list = []

    def passes(rows: np.ndarray) -> np.ndarray:
        if not built:
            built.append(node_check(ctx) or _every)
        return built[0](rows)

    return passes


def node_index(view: "ClusterView", key: "NodeKey", ties: np.ndarray | None, lowest: int = 0) -> NodeIndex:
    """The view's index of its nodes by ``key`` (equal keys by ``ties``), up to date with
    every row changed since it was last read. A driver that keeps one view which many
    placements copy (trace replay) reads it on that view, so each copy starts from an
    index kept up to date once instead of building its own.

    The rows changed since are taken in one by one: each one's key by the key's
    ``compute_row`` (its column when it has none) and its bucket by :func:`room_bucket`,
    from the view's row; the key's column is brought up to date by whoever reads it.
    ``lowest``: the first bucket the caller reads (a full node is taken in when one reads
    bucket 0: :meth:`NodeIndex.take_in`)."""
    index = kept_node_index(view, key, ties)
    if index.dirty or not lowest and index.parked:
        compute_row = key.compute_row
        key_of = key.column(view).item if compute_row is None else partial(compute_row, view)
        index.take_in(key_of, partial(room_bucket, view), partial(every_entry, view, key), lowest)
    return index


def kept_node_index(view: "ClusterView", key: "NodeKey", ties: np.ndarray | None) -> NodeIndex:
    """The view's index by ``key`` (equal keys by ``ties``), built if it has none, as it
    stands: the rows changed since it was last read are taken in by :func:`node_index`,
    when it is read."""
    # an index holds its tie array, so the array's id names it as long as it lives
    name = ("node-index", key.name, None if ties is None else id(ties))
    return view.derived(name, lambda v: NodeIndex(*every_entry(v, key), key.name, ties))


#: a rack's buckets in the index by rack: ``(rack code + 1) * RACK_STRIDE + room bucket``
#: (a room bucket is below it: at most 64 GPUs, BUCKETS_PER_GPU each; never 0, so no node
#: is parked there)
RACK_STRIDE = 1024


def kept_rack_index(view: "ClusterView", key: "NodeKey", ties: np.ndarray | None) -> NodeIndex:
    """The view's index of its nodes by rack, each rack's runs by room bucket
    (:func:`rack_bucket`), each run in (``key``, tie rank) (:meth:`KeyWalk.best_near`),
    built if it has none; its changed rows are taken in by the walk that reads it."""
    name = ("rack-index", key.name, None if ties is None else id(ties))
    return view.derived(name, lambda v: NodeIndex(*every_rack_entry(v, key), key.name, ties))


def rack_bucket(view: "ClusterView", i: int) -> int:
    """Node ``i``'s bucket in the index by rack: its rack's and its room bucket's."""
    return (view.rack_code.item(i) + 1) * RACK_STRIDE + room_bucket(view, i)


def every_rack_entry(view: "ClusterView", key: "NodeKey") -> tuple[np.ndarray, np.ndarray]:
    """:func:`every_entry` with each node's :func:`rack_bucket` for its bucket."""
    keys, buckets = every_entry(view, key)
    return keys, (view.rack_code.astype(np.int64) + 1) * RACK_STRIDE + buckets


def every_entry(view: "ClusterView", key: "NodeKey") -> tuple[np.ndarray, np.ndarray]:
    """Every node's key and bucket, for an index built (or built again). A key with a
    one-node function is worked out afresh: the index keeps it itself (it takes changed
    rows in with that function), not in a key column the view would keep up to date too.
    A key without one (FGD's: costly, numpy only) is its column, which the index reads
    for changed rows anyway and the view brings up to date for the changed rows alone."""
    keys = key.column(view) if key.compute_row is None else np.asarray(key.compute(view, slice(None)))
    return keys, room_buckets(view, slice(None))


def node_passes(ctx: FilterContext, rows=None, stages: tuple[Filter, ...] = NODE_STAGES) -> np.ndarray | None:
    """Bool per node (per entry of ``rows``): every stage that judges a node alone
    (of ``stages``) lets it pass; None when no stage restricts anything."""
    check = node_check(ctx, stages)
    return None if check is None else check(rows)


def node_check(ctx: FilterContext, stages: tuple[Filter, ...] = NODE_STAGES) -> "RowCheck | None":
    """:func:`node_passes` for ``ctx``'s request as a function of ``rows``, for the view
    as it stands; None when no stage restricts anything. The stages that restrict
    nothing for this request are left out here, once, and the others bound to it
    (:meth:`~gangmaster.selectors.filters.Filter.check`): an index walk asks it of chunk
    after chunk."""
    checks = [check for check in (stage.check(ctx) for stage in stages) if check is not None]
    if len(checks) <= 1:
        return checks[0] if checks else None
    first, rest = checks[0], checks[1:]

    def passing(rows=None) -> np.ndarray:
        ok = first(rows)
        for check in rest:
            ok = ok & check(rows)   # (not in place: a stage may answer with a column of the view)
        return ok

    return passing


def node_check_one(ctx: FilterContext) -> "NodeCheck":
    """:func:`node_check` of one node (its number), in plain Python: every stage's
    :meth:`~gangmaster.selectors.filters.Filter.check_one`, the stages that restrict
    nothing left out."""
    checks = []
    for stage in NODE_STAGES:
        check = stage.check_one(ctx)
        if check is not None:
            checks.append(check)
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:   # (health and fit, most often: no loop)
        first, second = checks
        return lambda node: first(node) and second(node)
    return lambda node: all(check(node) for check in checks)


def _every(nodes: np.ndarray) -> np.ndarray:
    return np.ones(nodes.size, dtype=bool)


def _scanned(ctx: FilterContext, selector: "Selector", k: int, rows,
             ties: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    view, request = ctx.view, ctx.request
    if rows is None:
        ok = node_passes(ctx)
        survivors = np.arange(len(view)) if ok is None else np.flatnonzero(ok)
    else:
        considered = np.asarray(rows, dtype=np.int64)
        ok = node_passes(ctx, considered)
        survivors = considered if ok is None else considered[ok]
    if request.rack_policy != "none" and survivors.size:
        alive = np.zeros(len(view), dtype=bool)
        alive[survivors] = True
        survivors = np.flatnonzero(RACK_STAGE.verdict(ctx, alive).passed)
    if survivors.size == 0:
        return NO_NODES, NO_NODES
    keys = np.asarray(selector.rank(view, survivors, request))
    if keys.shape != survivors.shape:
        raise ValueError(f"{type(selector).__name__}.rank returned {keys.shape} keys for "
                         f"{survivors.shape[0]} candidates")
    if ties is not None:
        second = ties[survivors]
    else:  # rows come in any order: equal keys by node number (survivors of a scan are in order)
        second = None if rows is None else survivors
    chosen = smallest(keys, k, second)
    return survivors[chosen], keys[chosen]


def smallest(keys: np.ndarray, k: int, ties: np.ndarray | None = None) -> np.ndarray:
    """Positions of the ``k`` smallest keys, ordered by (key, tie rank); ``ties``
    ranks the positions (their order when None).

    No partition of all the keys (``np.partition`` costs 10x a ``min``): the k-th
    smallest key is found by :func:`kth_smallest`; only the keys below it, and the
    first positions with it, are sorted; for one, the minimum alone."""
    if k == 1 and keys.size:
        at = np.flatnonzero(keys == keys.min())
        return at[:1] if ties is None or at.size == 1 else at[np.argmin(ties[at])][None]
    if k >= keys.size:
        inside = np.arange(keys.size)
    else:
        cut = kth_smallest(keys, k)
        below = np.flatnonzero(keys < cut)
        at = np.flatnonzero(keys == cut)
        wanted = k - below.size
        at = at[:wanted] if ties is None else at[np.argsort(ties[at], kind="stable")[:wanted]]
        inside = np.concatenate([below, at])
    second = inside if ties is None else ties[inside]
    return inside[np.lexsort((second, keys[inside]))][:k]


def kth_smallest(keys: np.ndarray, k: int):
    """The k-th smallest of ``keys`` (1-based, ``k <= keys.size``): the minimum for one;
    else a sorted sample of about sqrt(2kn) keys gives a bound ``guess`` with at least
    2k keys at or below it, and only the keys below it are sorted (about 2k·n/sample
    of them, whatever the number of keys equal to ``guess``)."""
    if k == 1:
        return keys.min()
    step = max(1, keys.size // int(np.sqrt(2 * k * keys.size)))
    sample = np.sort(keys[::step])
    if sample.size <= 2 * k:
        return np.sort(keys)[k - 1]
    guess = sample[2 * k]  # 2k + 1 sampled keys are <= guess
    lower = keys[keys < guess]
    return guess if lower.size < k else np.sort(lower)[k - 1]
