"""The AM's view of the cluster: read from the RM once, then kept from node updates.

Every allocate response carries the nodes whose usage, health or containers
changed since the AM's previous heartbeat (``AllocateResponse.node_updates``);
applying them keeps the :class:`ClusterView` what the RM says, without pulling
and rebuilding the whole cluster every heartbeat. The RM's usage already holds
this AM's granted containers; what it cannot hold yet (asks not granted, the
per-role instance counts behind ``max_instances_per_node``) is booked on a
scratch copy when a gang is placed (:meth:`ClusterTracker.scratch`).

Applying updates also says whether anything *grew*: a node with more free memory,
vcores, GPUs or ports than before, a GPU with more milli-GPU free for a share, or a
node healthy again. Only such a change can
let a gang that did not fit fit now, so a waiting gang is placed again only then.
"""
from __future__ import annotations

from typing import Callable, Iterable, NamedTuple

from gangmaster.selectors.cluster import ClusterView, NodeColumns, ports_grew
from gangmaster.selectors.fit import GPU_MILLI
from gangmaster.selectors.identity_memo import IdentityMemo
from gangmaster.selectors.ports import PortRanges

from .gang_placement import GangDoesNotFit, GangPlacement, PipelineFor, blocked_by_avoidance, check_fits_empty
from gangmaster.am.spec.jobspec_model import RoleSpec
from gangmaster.protocol.rm_protocol import NodeReport, NodeState, view_from_nodes


class _Room(NamedTuple):
    """What one node of the view offers now: whether it is usable, and what is free
    (``shares_used``: milli-GPU taken by shares per GPU, only where some GPU holds shares;
    elsewhere the wholly free GPUs of ``gpu_mask`` say it all)."""

    healthy: bool
    memory_mb: int
    mvcores: int
    gpu_mask: int
    ports: PortRanges
    shares_used: list[int] | None

    @classmethod
    def of(cls, view: ClusterView, i: int) -> "_Room":
        shares = view.gpu_share_used[i].tolist() if view.gpus_shared.item(i) else None
        return _make_room(cls, (view.healthy.item(i), view.memory_free.item(i), view.mvcores_free.item(i),
                                view.gpu_free_mask.item(i), view.ports_free[i], shares))

    @property
    def gpu_milli(self) -> tuple[int, ...] | None:
        """Milli-GPU free per GPU, where some GPU holds shares (as
        :meth:`ClusterView.gpu_milli_free_rows` counts it: a whole GPU free, what shares
        leave on a shared one, none on one taken whole); None elsewhere."""
        used = self.shares_used
        if used is None:
            return None
        return tuple(GPU_MILLI if self.gpu_mask >> k & 1 else (GPU_MILLI - used[k] if used[k] > 0 else 0)
                     for k in range(len(used)))

    def grew_from(self, before: "_Room") -> bool:
        """More room than ``before`` in any dimension (a GPU or port freed, or milli-GPU
        freed on a shared GPU, counts even when another was taken), or usable again."""
        return ((self.healthy and not before.healthy) or self.memory_mb > before.memory_mb
                or self.mvcores > before.mvcores or bool(self.gpu_mask & ~before.gpu_mask)
                or self._ports_grew_from(before)
                or (self.shares_used is not None and self._shares_grew_from(before)))

    def _ports_grew_from(self, before: "_Room") -> bool:
        """Some port free now was not free before (none can be when none is free)."""
        return ports_grew(self.ports, before.ports)

    def _shares_grew_from(self, before: "_Room") -> bool:
        """Some GPU that holds shares now has more milli free than before (a GPU wholly
        freed is in the mask's comparison); only asked where some GPU holds shares now."""
        now = self.gpu_milli
        was = before.gpu_milli or tuple(GPU_MILLI if before.gpu_mask >> k & 1 else 0 for k in range(len(now)))
        return any(a > b for a, b in zip(now, was))


def _in_use(view: ClusterView, i: int) -> bool:
    """Node ``i`` is not as on the idle cluster: something of it is used, or it is
    unhealthy (enough to know that ``view.is_empty()`` is False, without a look at every
    node)."""
    return (view.memory_free.item(i) != view.memory_capacity.item(i)   # (most often: asked first)
            or view.gpu_free_mask.item(i) != view.gpu_capacity_mask.item(i)
            or view.mvcores_free.item(i) != view.mvcores_capacity.item(i)
            or not view.healthy.item(i) or bool(view.gpus_shared.item(i)))


#: builds a :class:`_Room` from its fields in order, without the named tuple's argument
#: handling (a node update builds two)
_make_room = tuple.__new__


#: the node states in which a node takes containers (``NodeState.usable``), read without a
#: property call and an Enum member's look-up per update
_USABLE = frozenset(state for state in NodeState if state.usable)


#: not yet known (a gang shape the tracker has not checked)
_UNKNOWN = object()


class ClusterTracker:
    def __init__(self, read_nodes: Callable[[], list[NodeReport]]):
        self._read_nodes = read_nodes
        self.view: ClusterView = view_from_nodes(read_nodes())
        self.grown = 0      # counts the updates after which some node had more room than before
        self._failed: set[tuple[str, str]] = set()   # (role, host): the role failed there because of the node
        self._fits_empty: dict[tuple, GangDoesNotFit | None] = {}   # see check_fits_empty
        self._fits_empty_by_id: IdentityMemo = IdentityMemo(4096)   # the same, by the roles' id: see _fits_empty_of
        self._empty, self._empty_when = False, -1   # view.is_empty(), and view.changes when last asked (-1: never)

    def apply(self, updates: Iterable[NodeReport]) -> bool:
        """Take the RM's node updates; True when some node has more room than before
        (:meth:`ClusterView.set_free` compares what it overwrites; where a GPU holds
        shares, before or after, the node's whole :class:`_Room` is compared)."""
        view = self.view
        grew = False
        in_use = False   # some node updated holds something: the view is not the idle cluster
        for report in updates:
            i = view.host_index.get(report.host)
            if i is None:   # a node this view never had: read the cluster afresh
                self._rebuild()
                view, grew = self.view, True
                continue
            shares = report.gpu_milli_free is not None or view.gpus_shared.item(i)
            before = _Room.of(view, i) if shares and not grew else None   # once one node grew, the answer is known
            more = view.set_free(i, report.free, report.gpu_milli_free)
            grew = self._row_grew(i, report.state in _USABLE, more, before) or grew
            in_use = in_use or _in_use(view, i)
        return self._took(grew, in_use)

    def check_fits_empty(self, roles: tuple[RoleSpec, ...], pipeline_for) -> GangPlacement | None:
        """:func:`~gangmaster.am.core.gang_placement.check_fits_empty` on this cluster, remembered
        per gang shape and pipelines: the empty cluster is the same for every gang until the
        nodes themselves change, and a tracker shared by many AMs that share their pipelines
        (trace replay) answers most gangs from what it found for an earlier one of the same
        shape. While the view is the idle cluster itself the check is the gang's placement
        on it, returned as that function returns it; else None."""
        pipelines = tuple(map(pipeline_for, roles))
        never = self._fits_empty_by_id.get((id(roles), pipelines), _UNKNOWN)   # (see _fits_empty_of)
        if never is _UNKNOWN:
            never = self._fits_empty_of(roles, pipelines)
        if never is _UNKNOWN or self._view_is_empty():
            try:
                placed = check_fits_empty(self.view, roles, lambda role: pipelines[roles.index(role)])
            except GangDoesNotFit as exc:
                self._remember_fits_empty(roles, pipelines, exc)
                raise
            self._remember_fits_empty(roles, pipelines, None)
            return placed
        if never is not None:
            raise never
        return None

    def _fits_empty_of(self, roles: tuple[RoleSpec, ...], pipelines: tuple) -> GangDoesNotFit | None | object:
        """What :meth:`check_fits_empty` found for this gang shape (``_UNKNOWN`` when not
        asked yet), by the roles' value, for a roles' tuple not found by its identity (the
        caller looks there first: AMs of one shape share it, no role is hashed, and the tuple
        kept with the answer keeps its id its own); found, it is remembered by this one's
        identity too."""
        never = self._fits_empty.get((roles, pipelines), _UNKNOWN)   # (pipelines by identity)
        if never is not _UNKNOWN:
            self._fits_empty_by_id.put((id(roles), pipelines), (roles,), never)
        return never

    def _remember_fits_empty(self, roles: tuple[RoleSpec, ...], pipelines: tuple,
                             never: GangDoesNotFit | None) -> None:
        self._fits_empty[(roles, pipelines)] = never
        self._fits_empty_by_id.put((id(roles), pipelines), (roles,), never)

    def _view_is_empty(self) -> bool:
        """``view.is_empty()``, looked at again only once the view has changed: the view
        counts each change made through it (``changes``), and the tracker's view is changed
        only through it (AMs book on scratch copies). :meth:`apply` answers it when a node
        it updated is in use."""
        changes = self.view.changes
        if self._empty_when != changes:
            self._empty, self._empty_when = self.view.is_empty(), changes
        return self._empty

    def opened(self) -> None:
        """Room the AM could not use is open to it now (a node the RM held for another gang is
        no longer held): counted as growth, so a gang that found no room is placed again."""
        self.grown += 1

    def mark_failed(self, role: str, host: str) -> None:
        """``role`` failed on ``host`` because of the node: its instances avoid it from now on."""
        self._failed.add((role, host))
        if host in self.view.host_index:
            self.view.mark_failed(role, host)

    def keep_placeable(self, roles: tuple[RoleSpec, ...], pipeline_for) -> list[str]:
        """Stop avoiding the nodes where a role of the gang failed (:meth:`mark_failed`) when
        avoiding them would leave the gang unable to start even on the idle cluster: on a
        small cluster it is placed on those nodes again rather than waiting for good (YARN
        likewise ignores its AM blacklist past a share of the nodes). The roles forgiven,
        in the order found."""
        forgiven: list[str] = []
        while (role := blocked_by_avoidance(self.view, roles, pipeline_for)) is not None:
            if self.view.failed_here(role) is None:   # crowded out by another role's avoidance
                role = next(r.name for r in roles if self.view.failed_here(r.name) is not None)
            self._failed = {(r, host) for r, host in self._failed if r != role}
            self.view.forget_failures(role)
            forgiven.append(role)
        return forgiven

    def scratch(self, running: Iterable[tuple[str, str]]) -> ClusterView:
        """A copy to place on, with the instances of ``running`` ((role, host) pairs) counted
        per node so per-node caps hold."""
        view = self.view.copy()
        for role, host in running:
            i = view.host_index.get(host)
            if i is not None:
                view.instances_of(role)[i] += 1
        return view

    def take_rows(self, ledger: NodeColumns, rows: Iterable[int]) -> bool:
        """:meth:`apply` for a driver that keeps one view for all its AMs (trace replay) and
        takes what changed from the RM's ledger itself: ``rows``, the nodes changed since its
        last call (``NodeColumns.watch_rows`` of the ledger), are copied from ``ledger``'s columns (its
        nodes in this view's order) instead of through a node report each. The view and the
        answer are what :meth:`apply` of their reports gives (tests/property/test_rm_invariants.py
        holds them equal); a row where either side holds GPU shares is taken by the reports'
        rule for shares (:meth:`ClusterView.set_free`)."""
        view = self.view
        grew = False
        in_use = False
        usable = ledger.usable
        for i in rows:
            before = None
            if ledger.gpus_shared.item(i) or view.gpus_shared.item(i):
                before = _Room.of(view, i) if not grew else None
                more = view.set_free(i, ledger.free(i),
                                     ledger.gpu_milli_free_of(i) if ledger.gpus_shared.item(i) else None)
            else:
                more = view.take_free_row(ledger, i)
            grew = self._row_grew(i, usable.item(i), more, before) or grew
            in_use = in_use or _in_use(view, i)
        return self._took(grew, in_use)

    def _row_grew(self, i: int, usable: bool, more: bool, before: _Room | None) -> bool:
        """Node ``i``'s free resources were just overwritten (``more``: whether they grew, as
        :meth:`ClusterView.set_free` says): its health becomes ``usable``; whether the node has
        more room than before — usable again, or, where a GPU holds shares (``before``: its
        :class:`_Room` before), compared whole."""
        view = self.view
        if view.healthy.item(i) != usable:
            view.set_health(view.hosts[i], usable)
            more = more or usable   # usable again
        if before is not None:
            more = _Room.of(view, i).grew_from(before)
        return more

    def _took(self, grew: bool, in_use: bool) -> bool:
        """Some nodes were updated (:meth:`apply`, :meth:`take_rows`): the view is not the idle
        cluster when one of them is in use, and an update after which some node grew is
        counted (:attr:`grown`). Returns ``grew``."""
        if in_use:
            self._empty, self._empty_when = False, self.view.changes
        if grew:
            self.grown += 1
        return grew

    def _rebuild(self) -> None:
        self.view = view_from_nodes(self._read_nodes())
        self._fits_empty.clear()
        self._fits_empty_by_id.clear()
        self._empty_when = -1
        for role, host in self._failed:
            if host in self.view.host_index:
                self.view.mark_failed(role, host)
