"""Choosing the network domain for a whole gang (or a role), not instance by instance.

A gang or role that asks a level (:class:`~gangmaster.selectors.domains.DomainAsk`) is
placed by the ordinary placement loop, but on a copy of the view where only the nodes
of the domain tried are in play (the others marked out, as unhealthy nodes are):

* ``required``: every domain whose room (:func:`~gangmaster.selectors.placement.room_per_node`
  summed over its nodes, per role) could hold what is asked is tried, tightest first (the
  least room: the big domains stay whole for big gangs), at most :data:`MAX_TRIALS`; of the
  placements that succeed, the one on the fewest hosts wins (fewest fragments), ties to the
  tighter domain. None succeeds: the gang waits with :class:`DomainShort`, whose numbers
  say how close the best domain came ("no single rack has room for 6 × 4 GPUs (the best,
  rack-a, has room for 4 of the 6)").
* ``preferred``: one domain as above when one can hold it; else the fewest domains, the
  roomiest first, whose union holds it; else anywhere.

The instances the AM places again (those of a gang not granted yet) join the domain of
those the gang holds, which the view it places on counts per role.

The whole gang is placed inside the chosen domain or not at all: the caller's
all-or-nothing rule is kept, each trial on its own copy.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar

import numpy as np

from gangmaster.selectors.cluster import ClusterView
from gangmaster.selectors.domains import DomainAsk, Domains, domains_of
from gangmaster.selectors.explanation import EXHAUSTED, FILTERED, NETWORK_DOMAIN, Explanation, NotAvailable, Rejection
from gangmaster.selectors.placement import Placement

from gangmaster.am.spec.jobspec_model import RoleSpec

__all__ = ["DomainShort", "Need", "choose_domain", "MAX_TRIALS", "ask_text"]

#: how many domains a ``required`` ask tries at most (the tightest that could hold it)
MAX_TRIALS = 32

T = TypeVar("T")


@dataclass(frozen=True)
class Need:
    """One role's part of what must fit inside the domain: ``count`` instances, and how
    many each node takes now (``room``)."""

    role: RoleSpec
    count: int
    room: np.ndarray


class DomainShort(NotAvailable):
    """No single domain of the level has room for what is asked; ``best``: the domain that
    came closest (None: the cluster has no domain of the level), ``room``: per role, the
    instances it has room for there (``room_of``: by role name)."""

    def __init__(self, ask: DomainAsk, needs: Sequence[Need], domains: Domains, nodes: int,
                 allowed: np.ndarray | None = None):
        self.ask, self.needs = ask, tuple(needs)
        self.placed = Placement([], [], [], [], 0)   # (nothing placed: a domain is chosen for all or none)
        self.best, self.room = _closest(needs, domains, allowed)
        self.room_of = {need.role.name: room for need, room in zip(needs, self.room)}
        self.domains = len(domains)   # how many the level has (none held it)
        self.asked = ask_text(needs)
        super().__init__(Explanation(nodes, needs[0].role.name if needs else "", [Rejection(
            "network-domain", NETWORK_DOMAIN, EXHAUSTED if len(domains) else FILTERED,
            int(np.count_nonzero(domains.code >= 0)), requested=ask.level)]), self.sentence())

    def sentence(self) -> str:
        """``no single rack has room for 6 × 4 GPUs (the best, rack-a, has room for 4 of the 6)``"""
        level = self.ask.level
        head = f"no single {level} has room for {self.asked}"
        if self.best is None:
            return f"{head} (the cluster describes no {level})"
        if all(room >= need.count for room, need in zip(self.room, self.needs)):
            return f"{head} (the best, {self.best}, has room for each role alone, not for all together)"
        if len(self.needs) == 1:
            return f"{head} (the best, {self.best}, has room for {self.room[0]} of the {self.needs[0].count})"
        parts = ", ".join(f"{room}/{need.count} {need.role.name}" for room, need in zip(self.room, self.needs))
        return f"{head} (the best, {self.best}, has room for {parts})"


def ask_text(needs: Sequence[Need]) -> str:
    """What the needs ask, as people count it: ``6 × 4 GPUs``, ``1 × 8 vcores + 6 × 4 GPUs``."""
    def one(role: RoleSpec) -> str:
        if role.gpus:
            return f"{role.gpus} GPUs"
        if role.gpu_milli:
            return f"{role.gpu_milli} milli-GPU"
        return f"{role.ask_vcores:g} vcores, {role.memory_mb} MB"
    return " + ".join(f"{need.count} × {one(need.role)}" for need in needs)


def _closest(needs: Sequence[Need], domains: Domains,
             allowed: np.ndarray | None = None) -> tuple[str | None, tuple[int, ...]]:
    """The domain (of the ``allowed`` ones) that holds the most of what is asked (each role's
    instances capped at its count), and its room per role."""
    if not len(domains) or (allowed is not None and not allowed.any()):
        return None, tuple(0 for _ in needs)
    rooms = [np.minimum(domains.sums(need.room), need.count).astype(np.int64) for need in needs]
    total = sum(rooms)
    best = int(np.argmax(np.where(allowed, total, -1) if allowed is not None else total))
    return domains.names[best], tuple(int(room[best]) for room in rooms)


def choose_domain(view: ClusterView, ask: DomainAsk, needs: Sequence[Need],
                  attempt: Callable[[ClusterView], tuple[T, int]],
                  failure: type[Exception] | tuple[type[Exception], ...]) -> tuple[T, ClusterView]:
    """Place inside the domain of ``ask.level`` the module docstring says: ``attempt(trial)``
    places on ``trial`` (a copy of ``view`` whose nodes outside the domain are out of play)
    and returns its result and the count of hosts it used, or raises ``failure``. Returns
    the chosen result and its trial view with every node back in play (the caller goes on
    from it). Raises :class:`DomainShort` when ``required`` finds no domain, or a
    ``preferred`` placement's own failure when it fits nowhere.

    Where the view already holds instances of the needs' roles (the AM places again the
    instances of a gang not granted yet: the granted ones are counted on the view), only
    their domain is tried: the rest of the gang joins them."""
    domains = domains_of(view, ask.level)
    rooms = [domains.sums(need.room) for need in needs]
    allowed = _joined(view, domains, needs)
    holds = allowed.copy()
    for room, need in zip(rooms, needs):
        holds &= room >= need.count
    fits = np.flatnonzero(holds)
    tightest = fits[np.argsort(sum(rooms)[fits], kind="stable")][:MAX_TRIALS] if fits.size else fits
    best: tuple[T, ClusterView, int] | None = None
    for domain in tightest.tolist():
        tried = _attempt_within(view, domains.rows(domain), attempt, failure)
        if tried is not None and (best is None or tried[2] < best[2]):
            best = tried
    if best is not None:
        return best[0], best[1]
    if ask.required:
        raise DomainShort(ask, needs, domains, len(view), allowed)
    return _fewest_domains(view, domains, needs, rooms, attempt, failure)


def _joined(view: ClusterView, domains: Domains, needs: Sequence[Need]) -> np.ndarray:
    """Per domain, whether the needs may go there: the domains holding instances of their
    roles already, where some do; else every one."""
    held = np.zeros(len(view), dtype=bool)
    for need in needs:
        counts = view.role_count.get(need.role.name)
        if counts is not None:
            held |= counts > 0
    allowed = np.zeros(len(domains), dtype=bool)
    codes = domains.code[held]
    if not held.any():
        allowed[:] = True
    else:
        allowed[codes[codes >= 0]] = True
    return allowed


def _fewest_domains(view: ClusterView, domains: Domains, needs: Sequence[Need], rooms: list[np.ndarray],
                    attempt: Callable[[ClusterView], tuple[T, int]],
                    failure: type[Exception] | tuple[type[Exception], ...]) -> tuple[T, ClusterView]:
    """``preferred`` when no one domain holds it: the roomiest domains, two, three, ... of
    them, until their union holds it; else anywhere (``attempt``'s own failure)."""
    capped = sum(np.minimum(room, need.count) for room, need in zip(rooms, needs))
    roomiest = np.argsort(-np.asarray(capped, dtype=np.float64), kind="stable").tolist()
    for k in range(2, len(roomiest) + 1):
        chosen = roomiest[:k]
        if any(room[chosen].sum() < need.count for room, need in zip(rooms, needs)):
            continue
        rows = np.concatenate([domains.rows(d) for d in chosen])
        tried = _attempt_within(view, rows, attempt, failure)
        if tried is not None:
            return tried[0], tried[1]
    trial = view.copy()
    result, _ = attempt(trial)
    return result, trial


def _attempt_within(view: ClusterView, rows: np.ndarray, attempt: Callable[[ClusterView], tuple[T, int]],
                    failure: type[Exception] | tuple[type[Exception], ...]) -> tuple[T, ClusterView, int] | None:
    """``attempt`` on a copy of ``view`` where only ``rows`` are in play; the copy is given
    back with the other nodes as they were (None: it did not fit)."""
    trial = view.copy()
    outside = np.ones(len(view), dtype=bool)
    outside[rows] = False
    outside_rows = np.flatnonzero(outside)
    trial.set_health_rows(outside_rows, False)
    try:
        result, hosts = attempt(trial)
    except failure:
        return None
    trial.set_health_rows(outside_rows, view.healthy[outside_rows])
    return result, trial, hosts
