"""All-or-nothing placement of a gang against the AM's view.

Every instance of the gang (or the ones named in ``indices``) is placed against a
scratch copy of the view, with the same filters, strategy and final pick as one
``select_single_node()`` per instance; the placement is returned only if every
instance found a node, so nothing is ever half-placed. The instance that finds no
node stops the attempt with the pipeline's explanation, in numbers.

Why not one select() per instance: that filters and ranks the whole cluster for
every instance — 6,001 times for story 3's gang, a second of CPU. The instances of
a role are identical, so a role is placed in *rounds*:

1. filter and rank once (``pipeline.filter``, ``selector.order``), for all the
   instances left;
2. walk the ranked nodes: at each change of node, pick among the next ``keep()``
   nodes that still have room exactly as the final pick of select() does
   (``pipeline.final_pick``: the job's hosts, then their racks, then the key, ties
   by the seeded RNG); give the picked node its instances one by one, each with
   the strategy's GPU mask (``choose_gpus``, topology-aware where the strategy is)
   and the pipeline's ports (``choose_ports``), booked on the scratch view so
   nothing is double-booked. How many instances a node can take is counted once:
   memory, vcores, GPUs, ports at or above ``port_min``, and the role's
   ``max_instances_per_node`` minus the instances already there.

How faithful that is to one select() per instance depends on what the strategy
promises about its keys (two flags of :class:`~gangmaster.selectors.selector.Selector`):

* ``booking_never_worsens_key`` (job packing, random, locality): the node picked
  keeps winning the next pick until it is full — a fuller node packs better, and it
  is one of the job's hosts — so it takes every instance that fits without another
  pick, as the per-instance method would. A random-pick strategy (qizhi's) picks
  again for every instance, among the same few best nodes. Otherwise (topology: its
  best NVLink set can go as its GPUs do) the node is ranked again after each
  instance and keeps the instances only while it still wins the pick; when it
  loses with room left the round ends, so it is ranked afresh.
* ``key_is_per_node`` (job packing, random, topology): the keys of the nodes not
  booked are still exact after a booking, so the round goes on to the next node.
  Otherwise (locality: a node's key depends on the hosts the job holds) every change
  of node starts a new round, and the next pick sees fresh keys.

Both flags default to False, which is exact for keys that depend only on the
node's own state, and ranks again at every change of node (a ranking of twice the
window only, so about one select() per node used) so keys that follow the job's
hosts are fresh at each pick; while one node fills, the others keep the keys of
the round. A round whose window runs past the ranked nodes while the strategy kept
only its best ones (``keep()``) ranks again rather than pick from a short list.

Rack policies hold as in the filter: ``spread`` ends a round once every preferred
rack has received one instance (the next round sees the new counts), ``pack``
rounds only see the racks the filter kept and end when those are full.

Known differences from one select() per instance, all within the same rules: the
ports are chosen on the picked node alone (select() chooses ports common to its
few candidates, because qizhi asks the RM for any of them; a gang instance goes to
one host), and a node whose key does not change when it takes an instance (a role
asking no memory, vcores nor GPUs) keeps the instances where select() would draw
between it and its equals. If a round places nothing (its counts disagree with the
filter, e.g. ports free only below ``port_min``), the next instance goes through
``select_single_node`` exactly as before: it either finds a node or raises the
explanation.

:func:`check_fits_empty` applies Spark 2.4's rule: a gang that could not be placed
even on the empty cluster (labels, GPU types, per-node caps, capacity) fails at
submission instead of waiting forever.
"""
from __future__ import annotations

import operator
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence, Union

import numpy as np

from gangmaster.selectors.candidates import smallest
from gangmaster.selectors.cluster import ClusterView
from gangmaster.selectors.explanation import NotAvailable
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor, milli

from .jobspec_model import RoleSpec

__all__ = ["InstancePlacement", "GangPlacement", "GangDoesNotFit", "PipelineFor", "role_request",
           "place_gang", "empty_view", "check_fits_empty"]

#: One pipeline for every role, or the pipeline of each role (roles can name their
#: own strategy).
PipelineFor = Union[SelectionPipeline, Callable[[RoleSpec], SelectionPipeline]]


@dataclass(frozen=True)
class InstancePlacement:
    role: str
    index: int
    host: str
    gpu_mask: int
    ports: str
    resource: object  # the ResourceDescriptor booked (asked of the RM)


@dataclass
class GangPlacement:
    instances: list[InstancePlacement] = field(default_factory=list)

    def hosts(self) -> list[str]:
        return [p.host for p in self.instances]


class GangDoesNotFit(Exception):
    """No placement for the whole gang now; ``role``/``index`` is the instance that
    found no node, ``explanation`` says why."""

    def __init__(self, role: str, index: int, placed: int, total: int, cause: NotAvailable,
                 never: bool = False):
        self.role, self.index, self.placed, self.total = role, index, placed, total
        self.cause, self.explanation, self.never = cause, cause.explanation, never
        when = "even on the empty cluster" if never else "now"
        super().__init__(f"the gang does not fit {when}: {placed}/{total} instances placed; "
                         f"{role}[{index}] found no node: {cause}")


def role_request(role: RoleSpec, pending: int, placed_hosts: tuple[str, ...]) -> SelectionRequest:
    return SelectionRequest(
        role=role.name, resource=role.ask_resource(), node_label=role.node_label,
        gpu_types=role.gpu_types, pending_tasks=max(1, pending), placed_hosts=placed_hosts,
        max_instances_per_node=role.max_instances_per_node, rack_policy=role.rack_policy)


def place_gang(view: ClusterView, roles: tuple[RoleSpec, ...], pipeline: PipelineFor,
               recent_hosts: int = 8,
               indices: Mapping[str, Sequence[int]] | None = None) -> GangPlacement:
    """Place the gang's instances on a scratch copy of ``view`` (``view`` is not
    changed) and return where each went, or raise :class:`GangDoesNotFit`.

    ``pipeline``: one :class:`SelectionPipeline` for every role, or a callable giving
    the pipeline of a role. ``indices``: for each role name, the instance indices to
    place (default: all of every role; a role missing from the mapping places none),
    placed in ascending order; the AM uses it to select again only the instances the
    RM has not granted. ``recent_hosts``: how many of the most recently used
    distinct hosts are passed as the job's placed hosts (locality); bounded so
    placing thousands of instances stays linear.

    Example::

        placement = place_gang(view, job.roles, pipeline, indices={"worker": [3, 7]})
        [(p.index, p.host, p.gpu_mask, p.ports) for p in placement.instances]
    """
    wanted = _wanted_indices(roles, indices)
    booking = _Booking(view.copy(), sum(len(w) for w in wanted), recent_hosts)
    for role, todo in zip(roles, wanted):
        if todo:
            _RolePlacer(booking, role, todo, _pipeline_of(pipeline, role)).place()
    return booking.placement


def empty_view(view: ClusterView) -> ClusterView:
    """The same nodes, all healthy and unused."""
    return ClusterView(view.specs)


def check_fits_empty(view: ClusterView, roles: tuple[RoleSpec, ...], pipeline: PipelineFor) -> None:
    """Raise :class:`GangDoesNotFit` (``never=True``) if the gang cannot be placed
    even on the empty cluster."""
    try:
        place_gang(empty_view(view), roles, pipeline)
    except GangDoesNotFit as exc:
        raise GangDoesNotFit(exc.role, exc.index, exc.placed, exc.total, exc.cause, never=True) from None


# --------------------------------------------------------------------- internals
def _pipeline_of(pipeline: PipelineFor, role: RoleSpec) -> SelectionPipeline:
    if isinstance(pipeline, SelectionPipeline):
        return pipeline
    chosen = pipeline(role)
    if not isinstance(chosen, SelectionPipeline):
        raise TypeError(f"the pipeline of role {role.name!r}: expected a SelectionPipeline, "
                        f"got {type(chosen).__name__}")
    return chosen


def _wanted_indices(roles: tuple[RoleSpec, ...],
                    indices: Mapping[str, Sequence[int]] | None) -> list[list[int]]:
    """The sorted instance indices to place, per role; bad input named precisely."""
    if indices is None:
        return [list(range(role.instances)) for role in roles]
    names = [role.name for role in roles]
    unknown = sorted(set(indices) - set(names))
    if unknown:
        raise ValueError(f"indices: unknown role(s) {', '.join(map(repr, unknown))}; "
                         f"the gang's roles are {', '.join(map(repr, names))}")
    wanted = []
    for role in roles:
        given = indices.get(role.name, ())
        try:
            todo = sorted(operator.index(i) for i in given)
        except TypeError:
            raise ValueError(f"indices[{role.name!r}]: expected integers, got {list(given)!r}") from None
        bad = [i for i in todo if not 0 <= i < role.instances]
        if bad:
            raise ValueError(f"indices[{role.name!r}]: expected indices in 0..{role.instances - 1}, got {bad}")
        twice = sorted({a for a, b in zip(todo, todo[1:]) if a == b})
        if twice:
            raise ValueError(f"indices[{role.name!r}]: index(es) {twice} given more than once")
        wanted.append(todo)
    return wanted


class _Booking:
    """The scratch view, what is placed on it so far, and the job's recent hosts."""

    def __init__(self, scratch: ClusterView, total: int, recent_hosts: int):
        self.scratch, self.total, self.recent_limit = scratch, total, recent_hosts
        self.placement = GangPlacement()
        self.recent: list[str] = []

    def request(self, role: RoleSpec, pending: int) -> SelectionRequest:
        return role_request(role, pending, tuple(self.recent))

    def book(self, role: RoleSpec, index: int, node: int, gpu_mask: int, ports: PortRanges,
             resource: ResourceDescriptor) -> None:
        named = {}  # the exact GPUs and ports, in one copy (this runs per instance)
        if ports:
            named.update(ports=ports.count, port_ranges=ports)
        if gpu_mask:
            named.update(gpus=0, gpu_mask=gpu_mask)
        if named:
            resource = replace(resource, **named)
        self.scratch.allocate(node, resource, role=role.name)
        host = self.scratch.hosts[node]
        self.placement.instances.append(
            InstancePlacement(role.name, index, host, gpu_mask, str(ports) if ports else "", resource))
        if host not in self.recent:
            self.recent.append(host)
            del self.recent[:-self.recent_limit]


class _RolePlacer:
    """Places the instances ``todo`` of one role, round after round (module docstring)."""

    def __init__(self, booking: _Booking, role: RoleSpec, todo: list[int], pipeline: SelectionPipeline):
        self.booking, self.role, self.pipeline = booking, role, pipeline
        self.todo = deque(todo)
        self.selector = pipeline.selector
        self.resource = role.ask_resource()
        # what the strategy promises about its keys (module docstring)
        # (the promise flags are gone from Selector: the always-exact setting until the
        # placement loop is rebuilt on best_nodes)
        self.per_node = False
        self.never_worse = False
        self.sticky = self.never_worse and not self.selector.pick_at_random

    def place(self) -> None:
        while self.todo:
            if not self._round():
                self._place_one_by_select()

    def _round(self) -> int:
        """One filter and ranking, then as many instances as it can serve."""
        view = self.booking.scratch
        # A round of a strategy whose keys depend on the job's hosts ends at the first
        # change of node: it needs only the few best nodes (twice the window, so the
        # node it fills can be compared with a full window of others), not them all.
        request = self.booking.request(self.role, len(self.todo) if self.per_node else 2)
        survivors, _ = self.pipeline.filter(view, request)
        if survivors.size == 0:
            return 0
        keys = np.asarray(self.selector.rank(view, survivors, request))
        chosen = smallest(keys, self.selector.keep(request, survivors.size))
        ranked, keys = survivors[chosen], keys[chosen]
        walk = _RankedNodes(ranked.tolist(), keys.tolist(), self._room,
                            view.rack_code if request.rack_policy == "spread" else None)
        truncated = ranked.size < survivors.size  # the strategy kept only its best
        window = self.selector.keep(replace(request, pending_tasks=1), len(ranked))
        placed, node, last = 0, None, False
        while self.todo:
            if node is None or not (self.sticky and walk.room(node) > 0):
                room_left = node is not None and walk.room(node) > 0
                if node is not None and not room_left and not self.per_node:
                    break  # the job's hosts changed, and with them the keys: rank again
                single = self.booking.request(self.role, 1)  # the job's hosts as of now
                moved = None
                if room_left and not self.never_worse:
                    moved = (node, self.selector.rank(view, np.array([node]), single)[0])
                nodes, node_keys, short = walk.window(window, moved)
                if not nodes or (short and truncated):
                    break  # the nodes after the ranked ones would count: rank again
                if self.selector.pick_at_random and len(nodes) > 1:
                    # a uniform pick draws a position: order the few by their keys now
                    fresh = self.selector.rank(view, np.array(nodes), single).tolist()
                    nodes, node_keys = map(list, zip(*sorted(zip(nodes, fresh), key=lambda nk: (nk[1], nk[0]))))
                pick = nodes[self.pipeline.final_pick(view, single, nodes, node_keys)]
                # The pick is right, but a node left with room (re-ranked) or keys that
                # follow the job's hosts make the ranking stale after it: rank again.
                last = room_left and pick != node and not (self.never_worse and self.per_node)
                node = pick
            self._book(node, request)
            walk.took(node)
            placed += 1
            if last:
                break
        return placed

    def _book(self, node: int, request: SelectionRequest) -> None:
        view = self.booking.scratch
        gpu_mask = self.selector.choose_gpus(view, node, request)
        ports = self.pipeline.choose_ports(view, request, node)
        self.booking.book(self.role, self.todo.popleft(), node, gpu_mask, ports, self.resource)

    def _place_one_by_select(self) -> None:
        """The next instance through select_single_node: a node, or the explanation."""
        view = self.booking.scratch
        index = self.todo[0]
        try:
            result = self.pipeline.select_single_node(view, self.booking.request(self.role, 1))
        except NotAvailable as exc:
            raise GangDoesNotFit(self.role.name, index, len(self.booking.placement.instances),
                                 self.booking.total, exc) from None
        self.todo.popleft()
        choice = result.best
        self.booking.book(self.role, index, view.index(choice.host), choice.gpu_mask, result.ports,
                          result.resource)

    def _room(self, node: int) -> int:
        """How many more instances of the role fit on ``node`` now."""
        view, need = self.booking.scratch, self.resource
        room = len(self.todo)
        cap = self.role.max_instances_per_node
        if cap is not None:
            room = min(room, cap - int(view.instances_of(self.role.name)[node]))
        if need.memory_mb:
            room = min(room, int(view.memory_free[node]) // need.memory_mb)
        if milli(need.vcores):
            room = min(room, int(view.mvcores_free[node]) // milli(need.vcores))
        if need.gpus:
            room = min(room, int(view.gpus_free[node]) // need.gpus)
        if need.gpu_mask and (int(view.gpu_free_mask[node]) & need.gpu_mask) != need.gpu_mask:
            room = 0
        if need.port_ranges:
            room = min(room, 1 if need.port_ranges.fits_in(view.ports_free[node]) else 0)
        elif need.ports:
            free = view.ports_free[node].above(self.pipeline.settings.port_min).count
            room = min(room, free // need.ports)
        return max(0, room)


class _RankedNodes:
    """A round's ranking, walked best first: how much room each node has left, and
    the next few nodes with room. Full nodes (and, for ``spread``, nodes of a rack
    that already got its instance this round) are skipped for good, in near-constant
    time, so a round over thousands of nodes stays linear."""

    def __init__(self, nodes: list[int], keys: list, room: Callable[[int], int],
                 spread_racks: np.ndarray | None):
        self.nodes, self.keys, self._count_room = nodes, keys, room
        self.spread_racks = spread_racks
        self.racks_served: set[int] = set()
        self.left: dict[int, int] = {}
        self.jump = list(range(len(nodes) + 1))  # next position still worth a look

    def room(self, node: int) -> int:
        if self.spread_racks is not None and int(self.spread_racks[node]) in self.racks_served:
            return 0
        left = self.left.get(node)
        if left is None:
            left = self.left[node] = self._count_room(node)
        return left

    def took(self, node: int) -> None:
        self.left[node] -= 1
        if self.spread_racks is not None:
            self.racks_served.add(int(self.spread_racks[node]))

    def window(self, size: int, moved: tuple[int, object] | None = None) -> tuple[list[int], list, bool]:
        """The first ``size`` nodes with room, best first, with their keys, and whether
        the ranking ran out before ``size`` of them (``moved`` aside); ``moved`` is a
        node whose key changed since the ranking, placed by its new key."""
        nodes, keys = [], []
        position = self._next(0)
        while position < len(self.nodes) and len(nodes) < size:
            node = self.nodes[position]
            if self.room(node) <= 0:
                self.jump[position] = position + 1
            elif moved is None or node != moved[0]:
                nodes.append(node)
                keys.append(self.keys[position])
            position = self._next(position + 1)
        short = len(nodes) < size
        if moved is not None and self.room(moved[0]) > 0:
            nodes.append(moved[0])
            keys.append(moved[1])
            order = sorted(range(len(nodes)), key=lambda j: (keys[j], nodes[j]))
            nodes, keys = [nodes[j] for j in order], [keys[j] for j in order]
        return nodes[:size], keys[:size], short

    def _next(self, position: int) -> int:
        """The first position at or after ``position`` not skipped (path-halving)."""
        jump = self.jump
        while jump[position] != position:
            jump[position] = jump[jump[position]]
            position = jump[position]
        return position
