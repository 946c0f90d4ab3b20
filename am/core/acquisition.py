"""All-or-nothing acquisition of one gang attempt's containers from the RM.

The AM places every instance against its view of the cluster, asks the RM for
each one on the host it chose (with that host's exact GPUs and ports, no
relaxed locality), and starts nothing until every instance is granted.

Two things can keep a gang from completing, and neither may hang it:

* **Another AM took a node first.** An ask still not granted after
  ``reselect_after_s`` is checked against a fresh view: when its host cannot hold
  it any more, the ask is cancelled and the instance is selected again, together
  with every other instance not yet asked for.
* **Two gangs each hold part of what the other needs** (each fits the cluster
  alone, not both). A gang that has held some containers for ``hold_timeout_s``
  without the rest gives them all back and waits ``release_backoff_s × 2^(k-1)``
  (capped, times a seeded random factor) before it asks again, so the colliding
  gangs fall out of step and one of them gets everything.

The acquisition only decides: the asks, cancels and releases it wants sent wait
in the outbox its AM's acquisitions share (:class:`AcquisitionContext`) for the
AM's next heartbeat, and what it did is reported through the context's ``report``.

Placing is the expensive step, so it runs only when it can decide something new.
A gang whose last placement found no room is placed again only when something
happened that could let it fit: the cluster grew (the AM's
:class:`~gangmaster.am.core.cluster_tracker.ClusterTracker` says so), the gang gave
back what it held, the RM rejected one of its asks or lost one of its
containers, or its backoff is over. A stuck gang's heartbeat is a few
comparisons.
"""
from __future__ import annotations

import itertools
import random
import time
from functools import lru_cache
from itertools import starmap
from types import MappingProxyType
from typing import Callable, Mapping, Sequence

from gangmaster.selectors.cluster import ClusterView
from gangmaster.selectors.resources import ResourceError

from gangmaster.am.spec.am_settings import AMSettings
from .gang_events import GangEvents
from .gang_placement import GangDoesNotFit, GangPlacement, InstancePlacement
from gangmaster.am.spec.jobspec_model import RoleSpec
from .launch_env import PortKinds
from gangmaster.protocol.reasons import NO_REASON, Reason
from gangmaster.protocol.rm_protocol import Container, ResourceRequest

#: place(view, {role: [instance indices]}) -> placement; raises GangDoesNotFit.
Placer = Callable[[ClusterView, Mapping[str, Sequence[int]]], GangPlacement]


class Slot:
    """One instance of the gang on its way to a container. What it has not been given yet
    (an ask, a container, a rejection) reads as the class's defaults: a gang's slots are
    made at every attempt, and most are asked for once and granted."""

    placement: InstancePlacement | None = None
    request_id: int | None = None     # the ask outstanding for it, if any
    asked_at: float = 0.0
    container: Container | None = None
    rejections: int = 0
    pending_reason: Reason = NO_REASON   # why the RM did not grant it in its last pass

    def __init__(self, role: str, index: int):
        self.role, self.index = role, index

    @property
    def name(self) -> str:
        return f"{self.role}[{self.index}]"

    def __repr__(self) -> str:
        return f"Slot({self.name}, request {self.request_id}, container {self.container})"


class GangLayout:
    """What every attempt of a gang of these roles starts from, worked out once per set of
    roles (:func:`layout_of`): the roles by name, each instance's ``(role, index)`` in rank
    order (the order of :attr:`GangAcquisition.slots`), the instances to place when
    none is held or asked for (every one, by role), and the kinds of ports its tasks
    are launched with (:class:`~gangmaster.am.core.launch_env.PortKinds`, each worked out
    when a launch first meets it, for every gang of these roles). Read only."""

    __slots__ = ("roles", "keys", "everything", "port_kinds")

    def __init__(self, roles: Sequence[RoleSpec]):
        self.roles: Mapping[str, RoleSpec] = MappingProxyType({r.name: r for r in roles})
        self.keys = tuple([(r.name, i) for r in roles for i in range(r.instances)])
        self.everything: Mapping[str, Sequence[int]] = MappingProxyType(
            {r.name: tuple(range(r.instances)) for r in roles if r.instances})
        self.port_kinds = PortKinds(self.roles)


@lru_cache(maxsize=1024)
def layout_of(roles: tuple[RoleSpec, ...]) -> GangLayout:
    """The :class:`GangLayout` of a gang of ``roles``: one per set of roles (a trace replay's
    jobs of one shape share their RoleSpecs, and start tens of thousands of gangs)."""
    return GangLayout(roles)


class AcquisitionContext:
    """What every gang acquisition of one AM shares, made once with the AM: its settings,
    where they report (a line, or an event for :mod:`~gangmaster.am.core.gang_events`'s observers
    to build their own line from), the selection-latency observer, the request
    ids (``next_request_id``), the seeded random a release backoff is jittered with, and
    the **outbox**: the asks, cancels and releases the acquisitions decided (each gang's
    in the order it decided them), which the AM sends at its next heartbeat
    (:meth:`take_outbox`), and to which it adds the containers it gives back itself.

    The random is ``random.Random(seed)``, ``seed`` being ``seed_parts`` joined by ``:``, made
    when first drawn from: only a release backoff draws, which is rare, and seeding from a
    string hashes it (a trace replay starts tens of thousands of AMs that never draw)."""

    _random: random.Random | None = None   # made when first drawn from

    def __init__(self, settings: AMSettings, seed_parts: tuple, report: Callable[[str], None],
                 events: GangEvents, observe_selection: Callable[[float], None], first_request_id: int):
        self.settings, self.report, self.events = settings, report, events
        self.observe_selection = observe_selection
        self.next_request_id = itertools.count(first_request_id).__next__
        self.asks: list[ResourceRequest] = []
        self.cancels: list[int] = []
        self.releases: list[str] = []
        self._seed_parts = seed_parts

    @property
    def seed(self) -> str:
        return ":".join(map(str, self._seed_parts))

    def uniform(self, a: float, b: float) -> float:
        if self._random is None:
            self._random = random.Random(self.seed)
        return self._random.uniform(a, b)

    def take_outbox(self) -> tuple[list[ResourceRequest], list[int], list[str]]:
        """The asks, cancels and releases to send now (the outbox starts empty again)."""
        out = (self.asks, self.cancels, self.releases)
        self.asks, self.cancels, self.releases = [], [], []
        return out


class GangAcquisition:
    """One gang attempt's acquisition. Its counts and reasons not set yet (no grant, no
    release, no failed placement) read as the class's defaults."""

    first_grant_at: float | None = None
    not_before = float("-inf")    # no asking before then: backing off after a release
    release_count = 0
    last_released: list[str] = []   # the containers the last release gave back (read only)
    reselections = 0
    _waiting: "GangDoesNotFit | str" = ""   # the last placement's failure (its reason formatted when read)
    #: whether the last placement found no room (what :attr:`waiting_reason` explains)
    found_no_room = False
    never_reason = ""             # set when an instance can never be granted
    failed_placements = 0         # placements that found no room (a diagnosis is redone after one)
    _placed_at_growth = -1        # the cluster's growth count when the last placement failed
    _changed = True               # something of its own changed since that placement

    def __init__(self, gang: str, roles: tuple[RoleSpec, ...], context: AcquisitionContext):
        """``context``: what the AM's acquisitions share, their outbox among it."""
        self.gang = gang
        layout = self.layout = layout_of(roles)
        self.roles = layout.roles
        self.context = context
        keys = layout.keys   # (role, index) in rank order
        self.slots: dict[tuple[str, int], Slot] = dict(zip(keys, starmap(Slot, keys)))
        self.by_request: dict[int, Slot] = {}          # the slots with an ask outstanding
        self.by_container: dict[str, Slot] = {}        # the slots holding a granted container

    # ------------------------------------------------------------------ state
    @property
    def total(self) -> int:
        return len(self.slots)

    @property
    def granted(self) -> list[Slot]:
        return list(self.by_container.values())

    @property
    def complete(self) -> bool:
        return len(self.by_container) == len(self.slots)

    @property
    def outstanding(self) -> list[Slot]:
        return list(self.by_request.values())

    @property
    def waiting_reason(self) -> str:
        """Why the gang cannot be placed now, in numbers ("" when its last placement
        fitted): the failed placement's explanation, formatted when first read (an AM that
        logs nothing may never read it)."""
        if not isinstance(self._waiting, str):
            self._waiting = str(self._waiting)
        return self._waiting

    def stalled(self, now: float, cluster_growth: int) -> bool:
        """Holding and asking for nothing, not backing off, and the last placement found no
        room with nothing new since: planning again changes nothing until the cluster does."""
        return now >= self.not_before and not self.by_container and self._nothing_new(cluster_growth)

    def _nothing_new(self, cluster_growth: int) -> bool:
        """The last placement found no room and nothing since could let the gang fit:
        the cluster has not grown and nothing of the gang's own changed."""
        return (self.found_no_room and not self._changed and not self.by_request
                and cluster_growth == self._placed_at_growth)

    def in_order(self) -> list[Slot]:
        """Slots by role (in the gang's order), then instance index: rank order, the order
        :attr:`slots` was made in."""
        return list(self.slots.values())

    # ------------------------------------------------------------------- plan
    def plan(self, now: float, view_source: Callable[[], ClusterView], place: Placer, cluster_growth: int = 0) -> None:
        """Decide this heartbeat's asks, cancels and releases (into the context's outbox,
        each ask with the next of its request ids). ``cluster_growth`` counts
        the times the cluster grew (:attr:`ClusterTracker.grown`): while it stays the same
        and nothing of the gang's own changed, a gang that did not fit is not placed again."""
        if self.never_reason:
            return
        if self.first_grant_at is not None:   # holding some of its containers
            if self.complete:   # (every one: they start in the heartbeat the last one came)
                return
            if now - self.first_grant_at >= self.context.settings.hold_timeout_s:
                self.release_all(now, f"held {len(self.granted)}/{self.total} containers for "
                                      f"{now - self.first_grant_at:g}s without the rest")
                return
        if now < self.not_before or self.found_no_room and self._nothing_new(cluster_growth):
            return
        if self.by_request or self.by_container:
            to_place = self._to_place_again(now, view_source)
            if to_place is None:
                return
            view, wanted = to_place
        else:   # holding and asking for nothing: every instance is placed, on the view as it is
            view, wanted = view_source(), self.layout.everything
        context = self.context
        started = time.perf_counter()
        self._changed, self._placed_at_growth = False, cluster_growth
        try:
            placement = place(view, wanted)
        except GangDoesNotFit as exc:
            self.failed_placements += 1
            exc = exc.with_traceback(None)   # (formatted when read: an AM that logs nothing may never read it)
            context.events.no_room(self, exc)
            self._waiting, self.found_no_room = exc, True
            return
        finally:
            context.observe_selection(time.perf_counter() - started)
        if self.found_no_room:
            self._waiting, self.found_no_room = "", False
        slots, roles, by_request, asks = self.slots, self.roles, self.by_request, context.asks
        next_request_id = context.next_request_id
        for p in placement.instances:
            slot = slots[(p.role, p.index)]
            slot.placement, slot.request_id, slot.asked_at = p, next_request_id(), now
            by_request[slot.request_id] = slot
            asks.append(ResourceRequest(slot.request_id, p.resource, 1, host=p.host, relax_locality=False,
                                        node_label=roles[p.role].node_label))
        context.events.asking(self.gang, len(self.by_container), self.total, placement.hosts())

    def _to_place_again(self, now: float,
                        view_source: Callable[[], ClusterView]) -> tuple[ClusterView, dict[str, list[int]]] | None:
        """For a gang that holds or asks for some of its containers: the view to place the
        rest on, with what it holds and asks booked on it, and the instances to place (by
        role): those neither asked for nor granted, and those whose ask went stale on a host
        that can no longer hold them (cancelled here). None when there is nothing to place."""
        unplaced = [s for s in self.slots.values() if s.container is None and s.request_id is None]
        stale = [s for s in self.outstanding if now - s.asked_at >= self.context.settings.reselect_after_s]
        if not unplaced and not stale:
            return None
        view = view_source()
        for s in self.by_container.values():
            view.instances_of(s.role)[view.index(s.container.host)] += 1
        for s in self.outstanding:
            try:   # our own asks are not in the RM's usage yet: book them so nothing picks them twice
                if not view.healthy[view.index(s.placement.host)]:
                    raise ResourceError(f"{s.placement.host} is not healthy")
                view.allocate(s.placement.host, s.placement.resource, role=s.role)
            except ResourceError:
                if s in stale:   # its host cannot hold it any more: another AM took it, or it was lost
                    self._reselect(s)
                    unplaced.append(s)
        if not unplaced:
            return None
        wanted: dict[str, list[int]] = {}
        for s in unplaced:
            wanted.setdefault(s.role, []).append(s.index)
        return view, wanted

    def _reselect(self, slot: Slot) -> None:
        context = self.context
        context.cancels.append(slot.request_id)
        self.by_request.pop(slot.request_id, None)
        self._changed = True
        self.reselections += 1
        context.report(f"gang {self.gang}: {slot.name} not granted on {slot.placement.host} after "
                       f"{context.settings.reselect_after_s:g}s ({slot.pending_reason or 'taken by another application'}); "
                       f"selecting again")
        slot.request_id, slot.placement, slot.pending_reason = None, None, NO_REASON

    def release_all(self, now: float, reason: str) -> list[str]:
        """Give back every container and cancel every ask; back off before asking again."""
        context = self.context
        released = [s.container.container_id for s in self.granted]
        context.releases.extend(released)
        context.cancels.extend(s.request_id for s in self.outstanding)
        self._clear()
        self.release_count += 1
        self.last_released = released
        s = context.settings
        backoff = min(s.release_backoff_max_s, s.release_backoff_s * 2 ** (self.release_count - 1))
        backoff *= context.uniform(1 - s.release_jitter, 1 + s.release_jitter)
        self.not_before = now + backoff
        context.report(f"gang {self.gang}: released {len(released)} container(s): {reason}; "
                       f"asking again in {backoff:.1f}s (release {self.release_count})")
        return released

    def abandon(self) -> None:
        """The attempt is over before it started: give back what was granted, cancel every ask."""
        self.context.releases.extend(s.container.container_id for s in self.granted)
        self.context.cancels.extend(s.request_id for s in self.outstanding)
        self._clear()

    def _clear(self) -> None:
        """Every slot back to nothing: no ask, no container."""
        for s in (*self.by_request.values(), *self.by_container.values()):
            s.container = s.placement = s.request_id = None
            s.pending_reason = NO_REASON
        self.by_request.clear()
        self.by_container.clear()
        self.first_grant_at = None
        self._changed = True

    # -------------------------------------------------------------- responses
    def on_granted(self, container: Container, now: float) -> bool:
        """Take a granted container; False when it is not wanted (the AM releases it)."""
        slot = self.by_request.pop(container.request_id, None)
        if slot is None or slot.container is not None:
            return False
        slot.container, slot.request_id, slot.pending_reason = container, None, NO_REASON
        self.by_container[container.container_id] = slot
        if self.first_grant_at is None:
            self.first_grant_at = now
        return True

    def on_rejected(self, request_id: int, reason: Reason) -> None:
        slot = self.by_request.pop(request_id, None)
        if slot is None:
            return
        slot.rejections += 1
        host = slot.placement.host if slot.placement else "?"
        slot.request_id, slot.placement = None, None
        self._changed = True
        if slot.rejections >= self.context.settings.max_rejections:
            self.never_reason = (f"{slot.name} was rejected by the RM {slot.rejections} times "
                                 f"(last on {host}): {reason}")
        else:
            self.context.report(f"gang {self.gang}: the RM rejected {slot.name} on {host}: {reason}; selecting again")

    def on_pending(self, request_id: int, reason: Reason) -> None:
        slot = self.by_request.get(request_id)
        if slot is not None:
            slot.pending_reason = reason

    def on_lost(self, container_id: str) -> bool:
        """A granted, not yet started container ended (node lost, allocation expired)."""
        slot = self.by_container.pop(container_id, None)
        if slot is None:
            return False
        slot.container = slot.placement = None
        if not self.by_container:
            self.first_grant_at = None
        self._changed = True
        return True

    def owns(self, container_id: str) -> bool:
        return container_id in self.by_container

