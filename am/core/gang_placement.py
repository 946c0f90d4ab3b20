"""All-or-nothing placement of a gang against the AM's view.

Each role is one run of the placement loop (:mod:`gangmaster.selectors.placement`)
for all its instances (or the ones named in ``indices``), on a scratch copy of the
view, role after role, the job's recent hosts carried from one role to the next.
The loop picks exactly as one ``select_single_node()`` and one booking per instance
would, but fills a node with every instance it takes in one step, and the rest of a
role rack by rack with one sort when it can. The placement is returned only if every
instance found a node, so nothing is ever half-placed; the instance that finds no
node stops the attempt with the filter chain's explanation, in numbers.

A role that sets no rack policy gets ``selection.rack_policy`` (its pipeline's). A gang
or role that asks a network domain (``networkDomain``) is placed whole inside the domain
:mod:`~gangmaster.am.core.gang_domains` chooses for it, or not at all.

:func:`check_fits_empty` applies Spark 2.4's rule: a gang that could not be placed
even on the empty cluster (labels, GPU types, per-node caps, capacity) fails at
submission instead of waiting forever. It is the same computation on an empty copy
of the view.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Callable, Mapping, NamedTuple, Sequence, Union

from gangmaster.selectors.cluster import ClusterView
from gangmaster.selectors.explanation import Explanation, NotAvailable
from gangmaster.selectors.identity_memo import IdentityMemo
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.ports import NO_PORTS, PortRanges
from gangmaster.selectors.domains import DomainAsk
from gangmaster.selectors.placement import LonePick, Placement, RecentHosts, place, room_per_node
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor

from gangmaster.am.spec.jobspec_model import RoleSpec

from .gang_domains import DomainShort, Need, choose_domain

__all__ = ["InstancePlacement", "RolePlaced", "GangPlacement", "GangDoesNotFit", "PipelineFor", "role_request",
           "place_gang", "empty_view", "check_fits_empty", "RoleOutcome", "place_each_role", "pipeline_of"]

#: One pipeline for every role, or the pipeline of each role (roles can name their
#: own strategy).
PipelineFor = Union[SelectionPipeline, Callable[[RoleSpec], SelectionPipeline]]

#: How many of the job's most recent distinct hosts count as its hosts (locality tiers).
RECENT_HOSTS = 8


class InstancePlacement(NamedTuple):
    """Where one instance goes. A named tuple: a gang makes thousands of them per
    placement, and a tuple is made three times faster than a frozen dataclass."""

    role: str
    index: int
    host: str
    gpu_mask: int       # the GPUs given; for a share, the one GPU it sits on
    ports: str
    resource: ResourceDescriptor  # what is asked of the RM (its GPUs and ports named; a share's gpu_milli)


class RolePlaced(NamedTuple):
    """Where :func:`place_gang` put the instances of one role, as the placement loop gave
    them (columns, one entry per node and step): ``indices`` the instances in ascending
    order, ``placed`` the loop's :class:`~gangmaster.selectors.placement.Placement` (nodes,
    GPU masks and ports per instance), ``hosts`` the view's host names, ``asked`` the
    resource one instance asks."""

    role: str
    indices: Sequence[int]
    placed: Placement
    hosts: list[str]
    asked: ResourceDescriptor


class GangPlacement:
    """Where each instance of a gang goes, in the order placed (:func:`place_gang`). A
    plain slotted class: one is made per placement (per job, in a trace replay).

    It keeps what each role's placement loop gave (:class:`RolePlaced`) and makes the
    :class:`InstancePlacement` of each instance only when ``instances`` is first read: a
    gang of thousands is decided many times (a never-fits check, a bench, a gang that
    waits) for each time its instances are asked of the RM one by one."""

    __slots__ = ("_instances", "_roles")

    def __init__(self, instances: list[InstancePlacement] | None = None):
        self._instances: list[InstancePlacement] = [] if instances is None else instances
        self._roles: list[RolePlaced] = []   # placed after ``_instances``, not yet made into instances

    @property
    def instances(self) -> list[InstancePlacement]:
        if self._roles:
            for placed in self._roles:
                _record(self._instances, placed)
            self._roles = []
        return self._instances

    def add_role(self, placed: RolePlaced) -> None:
        """The instances of one role, placed after those already here."""
        self._roles.append(placed)

    def extend(self, other: "GangPlacement") -> None:
        """``other``'s instances, placed after those already here."""
        if other._instances:
            self.instances.extend(other._instances)
        self._roles.extend(other._roles)

    def hosts(self) -> list[str]:
        """The host of each instance, in order (from the columns: no instance is made)."""
        hosts = [p.host for p in self._instances]
        for placed in self._roles:
            hosts += map(placed.hosts.__getitem__, placed.placed.instance_nodes().tolist())
        return hosts

    def __eq__(self, other: object) -> bool:
        return self.instances == other.instances if isinstance(other, GangPlacement) else NotImplemented

    __hash__ = None   # (changeable: its list grows while it is placed)

    def __repr__(self) -> str:
        return f"GangPlacement(instances={self.instances!r})"


class GangDoesNotFit(Exception):
    """No placement for the whole gang now; ``role``/``index`` is the instance that
    found no node, ``explanation`` says why."""

    def __init__(self, role: str, index: int, placed: int, total: int, cause: NotAvailable,
                 never: bool = False):
        super().__init__()
        self.role, self.index, self.placed, self.total = role, index, placed, total
        self.cause, self.never = cause.with_traceback(None), never   # (kept for its explanation, not its frames)

    @property
    def explanation(self) -> Explanation:
        return self.cause.explanation

    def __str__(self) -> str:   # (formatted when read: the explanation is worked out then)
        when = "even on the empty cluster" if self.never else "now"
        return (f"the gang does not fit {when}: {self.placed}/{self.total} instances placed; "
                f"{self.role}[{self.index}] found no node: {self.cause}")


def role_request(role: RoleSpec, pending: int, placed_hosts: tuple[str, ...],
                 rack_policy: str = "none") -> SelectionRequest:
    """The request of one instance of ``role``; ``rack_policy``: the default for a role
    that sets none (``selection.rack_policy``)."""
    if pending <= 1 and not placed_hosts:
        known = _first_by_identity.get((id(role), rack_policy))
        if known is not None and known[0] is role:
            return known[1]
        request = _first_request(role, rack_policy)
        if len(_first_by_identity) >= FIRST_REQUESTS_KEPT:
            _first_by_identity.clear()
        _first_by_identity[(id(role), rack_policy)] = (role, request)   # (the role kept: its id stays its)
        return request
    return _request(role, pending, placed_hosts, rack_policy)


#: how many roles' first requests are found by the role's identity (then the memo starts afresh)
FIRST_REQUESTS_KEPT = 4096
#: (id(role), rack policy) -> (role, its first request): :func:`_first_request` without hashing
#: the role (a frozen dataclass hashes every field at every call)
_first_by_identity: dict[tuple[int, str], tuple[RoleSpec, SelectionRequest]] = {}


def _request(role: RoleSpec, pending: int, placed_hosts: tuple[str, ...], rack_policy: str) -> SelectionRequest:
    return SelectionRequest(
        role=role.name, resource=role.ask_resource(), node_label=role.node_label,
        gpu_types=role.gpu_types, pending_tasks=max(1, pending), placed_hosts=placed_hosts,
        max_instances_per_node=role.max_instances_per_node, rack_policy=role.rack_policy or rack_policy)


@lru_cache(maxsize=4096)
def _first_request(role: RoleSpec, rack_policy: str) -> SelectionRequest:
    """The request a placement starts from (one pending, no hosts yet), made once per role
    and default rack policy: both are immutable, and every placement of a role (and, in a
    trace replay, every job of one shape: they share their RoleSpec) asks the same."""
    return _request(role, 1, (), rack_policy)


def place_gang(view: ClusterView, roles: tuple[RoleSpec, ...], pipeline: PipelineFor,
               recent_hosts: int = RECENT_HOSTS,
               indices: Mapping[str, Sequence[int]] | None = None) -> GangPlacement:
    """Place the gang's instances on a scratch copy of ``view`` (``view`` is not
    changed) and return where each went, or raise :class:`GangDoesNotFit`.

    ``pipeline``: one :class:`SelectionPipeline` for every role, or a callable giving
    the pipeline of a role. ``indices``: for each role name, the instance indices to
    place (default: all of every role; a role missing from the mapping places none),
    placed in ascending order; the AM uses it to select again only the instances the
    RM has not granted. ``recent_hosts``: how many of the job's most recently used
    distinct hosts count as its hosts for the locality tiers; bounded so placing
    thousands of instances stays linear.

    Example::

        placement = place_gang(view, job.roles, pipeline, indices={"worker": [3, 7]})
        [(p.index, p.host, p.gpu_mask, p.ports) for p in placement.instances]
    """
    if indices is None and len(roles) == 1 and roles[0].instances == 1 and not (
            roles[0].gang_network_domain or roles[0].network_domain):   # (one node: in one domain, if in any)
        return _place_lone(view, roles[0], pipeline)
    placement = GangPlacement()
    _place_roles(view, roles, pipeline, recent_hosts, _wanted_indices(roles, indices), placement)
    return placement


def _place_lone(view: ClusterView, role: RoleSpec, pipeline: PipelineFor) -> GangPlacement:
    """:func:`place_gang` of a gang of one role of one instance (most jobs of a trace):
    what :func:`_place_roles` does for it, without its lists of indices and loops over
    roles, nodes and instances — the one pick on ``view`` itself, not booked, recorded —
    through the :class:`_LoneRole` the view keeps for the role and its pipeline."""
    chosen = pipeline_of(pipeline, role)
    name = ("lone-role", id(chosen), id(role))
    lone = view.prepared.get(name)
    if lone is None:
        lone = view.prepared.put(name, (chosen, role), _LoneRole(view, chosen, role))
    return lone.place()


class _LoneRole:
    """:func:`_place_lone` made ready once for one view, pipeline and role (a trace
    replay's jobs of one shape share their RoleSpec): the role's request, its
    :class:`~gangmaster.selectors.placement.LonePick`, and the instance placed on each
    node and GPUs when it asks no ports (a value: made once, given to every gang placed
    there)."""

    __slots__ = ("pipeline", "view", "role", "request", "lone", "_instances")

    def __init__(self, view: ClusterView, pipeline: SelectionPipeline, role: RoleSpec):
        self.pipeline, self.view, self.role = pipeline, view, role
        self.request = role_request(role, 1, (), pipeline.settings.rack_policy)
        self.lone = LonePick(pipeline, view, self.request)   # (its own: one entry per role in the view's memo)
        self._instances: dict[tuple[int, int], InstancePlacement] = {}

    def place(self) -> GangPlacement:
        try:
            picked = self.lone.pick()
            if picked is None:   # (not a lone pick: the loop's)
                placed = place(self.pipeline, self.view, self.request, 1, None, book=False)
                picked = placed.nodes[0], placed.gpu_masks[0][0], placed.ports[0][0], None
        except NotAvailable as exc:
            raise GangDoesNotFit(self.role.name, 0, 0, 1, exc) from None
        node, gpu_mask, ports, _ = picked
        if ports is not NO_PORTS:
            return GangPlacement([self._instance(node, gpu_mask, ports)])
        instances = self._instances
        instance = instances.get((node, gpu_mask))
        if instance is None:
            if len(instances) >= INSTANCES_KEPT:
                instances.clear()
            instance = instances[node, gpu_mask] = self._instance(node, gpu_mask, ports)
        return GangPlacement([instance])

    def _instance(self, node: int, gpu_mask: int, ports: PortRanges) -> InstancePlacement:
        resource, ports_text = _kind(self.request.resource, gpu_mask, ports)
        return _instance((self.role.name, 0, self.view.hosts[node], gpu_mask, ports_text, resource))


#: how many instances a :class:`_LoneRole` keeps (then it starts afresh)
INSTANCES_KEPT = 1 << 16


def _place_roles(view: ClusterView, roles: tuple[RoleSpec, ...], pipeline: PipelineFor, recent_hosts: int,
                 wanted: list[Sequence[int]], placement: GangPlacement | None) -> None:
    """:func:`place_gang`'s loop; the instances are recorded in ``placement`` when one is
    given (the never-fits check needs only the answer, not 6,001 records of it). A gang that
    asks a network domain is placed whole inside the one :func:`choose_domain` picks."""
    ask = _gang_ask(roles)
    if ask is None or not any(wanted):   # (nothing to place: no domain to choose)
        _place_each(view, roles, pipeline, recent_hosts, wanted, placement)
        return

    def attempt(trial: ClusterView) -> tuple[GangPlacement, int]:
        placed = GangPlacement()
        _place_each(trial, roles, pipeline, recent_hosts, wanted, placed, scratch_copy=False)
        return placed, len(set(placed.hosts()))

    try:
        chosen, _ = choose_domain(view, ask, _needs(view, roles, pipeline, wanted), attempt, GangDoesNotFit)
    except DomainShort as short:
        first = next(k for k, todo in enumerate(wanted) if todo)
        raise GangDoesNotFit(roles[first].name, wanted[first][0], 0, sum(map(len, wanted)), short) from None
    if placement is not None:
        placement.extend(chosen)


def _gang_ask(roles: tuple[RoleSpec, ...]) -> DomainAsk | None:
    """The network domain the gang asks (its roles carry the job's ask)."""
    for role in roles:
        if role.gang_network_domain is not None:
            return role.gang_network_domain
    return None


def _needs(view: ClusterView, roles: tuple[RoleSpec, ...], pipeline: PipelineFor,
           wanted: list[Sequence[int]]) -> list[Need]:
    """What each role with instances to place needs inside a domain, with its room per node."""
    needs = []
    for role, todo in zip(roles, wanted):
        if todo:
            chosen = pipeline_of(pipeline, role)
            request = role_request(role, 1, (), chosen.settings.rack_policy)
            needs.append(Need(role, len(todo), room_per_node(view, request, chosen.settings)))
    return needs


def _place_each(view: ClusterView, roles: tuple[RoleSpec, ...], pipeline: PipelineFor, recent_hosts: int,
                wanted: list[Sequence[int]], placement: GangPlacement | None, scratch_copy: bool = True) -> None:
    """The roles placed one after another on a scratch copy of ``view`` (on ``view`` itself
    when not ``scratch_copy``: a trial copy of the caller's), a role that asks a network
    domain inside the one :func:`choose_domain` picks for it."""
    total = sum(map(len, wanted))
    # A lone instance books nothing a later one would see: it is picked on the view itself,
    # not booked (place() leaves a view it does not book on as it was), as one
    # select_single_node() picks — the same node, without a copy of the view, and with no
    # hosts of the job to carry.
    alone = total == 1 and not any(role.network_domain for role in roles)
    # (the scratch copy books in bulk and reads ``view``'s indexes for a lone pick: it carries none)
    scratch = view if alone or not scratch_copy else view.copy(keep_indexes=False)
    recent = None if alone else RecentHosts(scratch, limit=recent_hosts)
    # (the last role's last step need not be written into a scratch copy of our own: nothing
    # reads it after; a trial copy is the caller's, read after)
    last = max((k for k, todo in enumerate(wanted) if todo), default=-1) if scratch is not view else -1
    placed_before = 0
    for k, (role, todo) in enumerate(zip(roles, wanted)):
        if not todo:
            continue
        chosen = pipeline_of(pipeline, role)
        request = role_request(role, 1, (), chosen.settings.rack_policy)
        # (until a role books, ``view`` stands as its scratch copy does: a lone pick reads the
        # indexes ``view`` keeps, not the copy's made afresh)
        same = view if placed_before == 0 and scratch is not view else None
        try:
            if role.network_domain is None:
                placed = place(chosen, scratch, request, len(todo), recent, book=not alone, same=same,
                               final=k == last)
            else:
                placed, scratch, recent = _place_in_domain(chosen, scratch, request, role, len(todo), recent)
        except NotAvailable as exc:
            done = exc.placed.count
            raise GangDoesNotFit(role.name, todo[done], placed_before + done, total, exc) from None
        if placement is not None:
            placement.add_role(RolePlaced(role.name, todo, placed, scratch.hosts, request.resource))
        placed_before += len(todo)


def _place_in_domain(chosen: SelectionPipeline, scratch: ClusterView, request: SelectionRequest, role: RoleSpec,
                     count: int, recent: RecentHosts) -> tuple[Placement, ClusterView, RecentHosts]:
    """``count`` instances of a role that asks its own network domain, booked on a trial copy
    of ``scratch`` that becomes the scratch view; the job's hosts go on from the trial's."""
    need = Need(role, count, room_per_node(scratch, request, chosen.settings))

    def attempt(trial: ClusterView) -> tuple[tuple[Placement, RecentHosts], int]:
        hosts = RecentHosts(trial, recent.hosts(), limit=recent.limit)
        placed = place(chosen, trial, request, count, hosts, book=True)
        return (placed, hosts), len(set(placed.nodes))

    (placed, hosts), trial = choose_domain(scratch, role.network_domain, [need], attempt, NotAvailable)
    return placed, trial, hosts


@dataclass
class RoleOutcome:
    """How far one role of the gang got in :func:`place_each_role`: ``placed`` of the
    ``wanted`` instances, and when some found no node, why (``cause``: the filter
    chain's explanation for the first of them, over the view as it was then)."""

    role: RoleSpec
    wanted: int
    placed: int
    cause: NotAvailable | None = None


def place_each_role(view: ClusterView, roles: tuple[RoleSpec, ...], pipeline: PipelineFor,
                    indices: Mapping[str, Sequence[int]] | None = None,
                    recent_hosts: int = RECENT_HOSTS,
                    on_short: Callable[[RoleOutcome, ClusterView], None] | None = None
                    ) -> tuple[list[RoleOutcome], ClusterView]:
    """Place the roles as :func:`place_gang` does, on a scratch copy of ``view``, but a
    role that cannot place all its instances keeps those it placed and the next role
    is placed after it: every role is evaluated with the others placed as the gang
    would place them (a diagnosis needs all of them, not the first that fails).
    Returns each role's outcome and the scratch view with everything placed booked;
    ``on_short(outcome, scratch)`` is called when a role falls short, before the next
    role is placed (the view as the role's explanation saw it)."""
    scratch = view.copy()
    recent = RecentHosts(scratch, limit=recent_hosts)
    outcomes = []
    for role, todo in zip(roles, _wanted_indices(roles, indices)):
        outcome = RoleOutcome(role, len(todo), len(todo))
        if todo:
            chosen = pipeline_of(pipeline, role)
            try:
                place(chosen, scratch, role_request(role, 1, (), chosen.settings.rack_policy), len(todo), recent)
            except NotAvailable as exc:
                outcome.placed, outcome.cause = exc.placed.count, exc
                if on_short is not None:
                    on_short(outcome, scratch)
        outcomes.append(outcome)
    return outcomes, scratch


def empty_view(view: ClusterView) -> ClusterView:
    """The same nodes, all healthy and unused."""
    return ClusterView(view.specs)


def check_fits_empty(view: ClusterView, roles: tuple[RoleSpec, ...],
                     pipeline: PipelineFor) -> GangPlacement | None:
    """Raise :class:`GangDoesNotFit` (``never=True``) if the gang cannot be placed
    even on the empty cluster. When ``view`` is the empty cluster itself
    (:meth:`ClusterView.is_empty`, an AM starting on an idle cluster), the check is the
    gang's placement on it, and returns it: what :func:`place_gang` gives on ``view``
    while it stays as it is, so the gang need not be placed again. Else None.

    The empty cluster of ``view``'s nodes is made once per list of nodes
    (:func:`_idle_view`), not per check: the check leaves it as it was."""
    try:
        if view.is_empty():
            return place_gang(view, roles, pipeline)
        _place_roles(_idle_view(view), roles, pipeline, RECENT_HOSTS, _wanted_indices(roles, None), None)
    except GangDoesNotFit as exc:
        raise GangDoesNotFit(exc.role, exc.index, exc.placed, exc.total, exc.cause, never=True) from None
    return None


def blocked_by_avoidance(view: ClusterView, roles: tuple[RoleSpec, ...], pipeline: PipelineFor) -> str | None:
    """The role whose instances find no node on the idle cluster once the nodes where roles
    of the gang failed (``view``'s :meth:`~ClusterView.failed_here`) are avoided; None when
    the gang starts there, or does not even without the avoidance (that is
    :func:`check_fits_empty`'s to say). Such a role waits for good only because of the
    avoidance: waiting does not help."""
    failed = {role.name: view.failed_here(role.name) for role in roles}
    if all(f is None for f in failed.values()):
        return None
    idle = empty_view(view)
    for name, nodes in failed.items():
        if nodes is not None:
            idle.role_failed[name] = nodes.copy()
    wanted = _wanted_indices(roles, None)
    try:
        _place_roles(idle, roles, pipeline, RECENT_HOSTS, wanted, None)
    except GangDoesNotFit as exc:
        try:
            _place_roles(_idle_view(view), roles, pipeline, RECENT_HOSTS, wanted, None)
        except GangDoesNotFit:
            return None
        return exc.role
    return None


# --------------------------------------------------------------------- internals
#: id(view.specs) -> :func:`empty_view` of them (a few lists of nodes at a time)
_idle_views: IdentityMemo[ClusterView] = IdentityMemo(4)


def _idle_view(view: ClusterView) -> ClusterView:
    """:func:`empty_view` of ``view``, one per list of nodes (a view and its copies share
    theirs), for :func:`check_fits_empty`: placing on it changes nothing for good (a lone
    instance is picked on it unbooked, more on a scratch copy), so each check reads the
    same one, its strategies' node indexes built once instead of with every new view."""
    specs = view.specs
    idle = _idle_views.get(id(specs))
    if idle is None:
        idle = _idle_views.put(id(specs), (specs,), empty_view(view))
    return idle


def pipeline_of(pipeline: PipelineFor, role: RoleSpec) -> SelectionPipeline:
    """The pipeline that places ``role``."""
    if isinstance(pipeline, SelectionPipeline):
        return pipeline
    chosen = pipeline(role)
    if not isinstance(chosen, SelectionPipeline):
        raise TypeError(f"the pipeline of role {role.name!r}: expected a SelectionPipeline, "
                        f"got {type(chosen).__name__}")
    return chosen


def _wanted_indices(roles: tuple[RoleSpec, ...],
                    indices: Mapping[str, Sequence[int]] | None) -> list[Sequence[int]]:
    """The sorted instance indices to place, per role (a range of them all, with no
    ``indices``); bad input named precisely (a role's bad indices before names that are
    no role's)."""
    if indices is None:
        return list(map(range, map(_INSTANCES, roles)))
    wanted = []
    named = 0   # the roles the mapping names
    for role in roles:
        given = indices.get(role.name)
        if given is None:
            wanted.append([])
            continue
        named += 1
        try:
            todo = sorted(map(operator.index, given))   # (C-level passes: the AM asks for thousands at once)
        except TypeError:
            raise ValueError(f"indices[{role.name!r}]: expected integers, got {list(given)!r}") from None
        if todo and not 0 <= todo[0] <= todo[-1] < role.instances:
            bad = [i for i in todo if not 0 <= i < role.instances]
            raise ValueError(f"indices[{role.name!r}]: expected indices in 0..{role.instances - 1}, got {bad}")
        if len(todo) > 1 and len(set(todo)) != len(todo):
            twice = sorted({a for a, b in zip(todo, todo[1:]) if a == b})
            raise ValueError(f"indices[{role.name!r}]: index(es) {twice} given more than once")
        wanted.append(todo)
    if named != len(indices):   # some name may not be a role's
        names = [role.name for role in roles]
        unknown = sorted(set(indices) - set(names))
        if unknown:
            raise ValueError(f"indices: unknown role(s) {', '.join(map(repr, unknown))}; "
                             f"the gang's roles are {', '.join(map(repr, names))}")
    return wanted


#: a role's count of instances
_INSTANCES = operator.attrgetter("instances")


def _record(instances: list[InstancePlacement], placed: RolePlaced) -> None:
    """One InstancePlacement per instance of a role, appended to ``instances``, indices in
    ascending order. The resources asked of the RM name their GPUs and ports; instances of
    a kind share one descriptor (:func:`_kind`: a gang has thousands of instances and few
    kinds, the port objects of a kind are shared, so they are told apart by identity)."""
    index = iter(placed.indices)
    append, name, hosts, asked = instances.append, placed.role, placed.hosts, placed.asked
    loop = placed.placed
    for node, gpu_masks, ports_of in zip(loop.nodes, loop.gpu_masks, loop.ports):
        host = hosts[node]
        for gpu_mask, ports in zip(gpu_masks, ports_of):
            resource, ports_text = _kind(asked, gpu_mask, ports)
            append(_instance((name, next(index), host, gpu_mask, ports_text, resource)))


#: an InstancePlacement from its fields in order, without the named tuple's argument handling
_instance = partial(tuple.__new__, InstancePlacement)


def _kind(asked: ResourceDescriptor, gpu_mask: int, ports: PortRanges) -> tuple[ResourceDescriptor, str]:
    """The resource to ask of the RM for these GPUs and ports, and the ports as text; for
    a share of one GPU, the share on the GPU chosen (``gpu_milli`` kept, ``gpu_mask`` its GPU).
    Made once per distinct ask, GPUs and ports (found by the ask's and the ports' identity,
    both kept with the answer): the gangs of one shape ask the same few again and again,
    and a descriptor is a value nobody changes."""
    key = (id(asked), gpu_mask, id(ports))
    kind = _kinds.get(key)
    if kind is None:
        kind = _kinds.put(key, (asked, ports), _new_kind(asked, gpu_mask, ports))
    return kind


#: (id(ask), GPU mask, id(ports)) -> the ask's kind: see _kind
_kinds: IdentityMemo[tuple[ResourceDescriptor, str]] = IdentityMemo(4096)


def _new_kind(asked: ResourceDescriptor, gpu_mask: int, ports: PortRanges) -> tuple[ResourceDescriptor, str]:
    if not gpu_mask:
        return (asked.with_ports(ports), str(ports)) if ports else (asked, "")
    # ``asked`` was checked when made and the GPUs and ports come from the view's own
    # columns (place() names ports whenever some are asked): made as is, as a booking's
    # descriptor is, not checked again
    resource = ResourceDescriptor.exactly(asked.memory_mb, asked.vcores, gpu_mask, ports or asked.port_ranges,
                                          asked.gpu_milli)
    return resource, (str(ports) if ports else "")
