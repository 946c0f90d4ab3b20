"""Watching the gangs that wait: diagnose one once it has waited ``am.explain_after_s``,
say it again when the diagnosis changes, and end the job when a gang has waited
``am.max_wait_s``.

A diagnosis costs about a dozen gang placements (:mod:`~gangmaster.am.ops.diagnosis`), so
it is redone only after the gang's placement failed again — which itself happens only
when something changed that could let the gang fit — and at most once per
``explain_after_s``, never per heartbeat: a gang stuck for an hour is diagnosed once,
and one that waits on a busy cluster (placed again each time a container ends) at most
once a minute. A heartbeat costs this watch a few comparisons per gang.
"""
from __future__ import annotations

from typing import Callable

from gangmaster.am.spec.am_settings import AMSettings
from .diagnosis import Diagnosis
from gangmaster.am.core.gang_run import GangRun
from .metrics import AMMetrics


#: how a gang's diagnosis is made (:meth:`~gangmaster.am.ops.why_feed.WhyFeed.diagnose`)
Diagnose = Callable[[GangRun], Diagnosis]


class WaitingWatch:
    """The AM's watch on its waiting gangs. It keeps no reference to the AM: its feed
    (:class:`~gangmaster.am.ops.why_feed.WhyFeed`) hands it how to diagnose a gang at each call
    (so they make no reference cycle)."""

    def __init__(self, settings: AMSettings, log: Callable[[str], None], metrics: AMMetrics):
        self.settings, self.log, self.metrics = settings, log, metrics
        self.latest: dict[str, Diagnosis] = {}       # gang name -> its last diagnosis while it waits
        self._diagnosed_after: dict[str, tuple] = {}  # gang name -> (attempt, failed placements) diagnosed
        self._diagnosed_at: dict[str, float] = {}     # gang name -> when it was last diagnosed

    def check(self, gang: GangRun, now: float, diagnose: Diagnose) -> str:
        """Called each heartbeat for a gang still pending: diagnose it when due; returns why
        the job must fail ("" when it need not): the gang waited ``max_wait_s``."""
        waited = now - gang.record.waiting_since
        acq = gang.acquisition
        every = self.settings.explain_after_s
        if every is not None and waited >= every and acq.found_no_room:
            key = (gang.attempt, acq.failed_placements)
            if (self._diagnosed_after.get(gang.name) != key
                    and now - self._diagnosed_at.get(gang.name, -every) >= every):
                self._diagnosed_after[gang.name], self._diagnosed_at[gang.name] = key, now
                self._record(gang, self._diagnosed(gang, diagnose), waited)
        limit = self.settings.max_wait_s
        if limit is None or waited < limit:
            return ""
        return f"gang {gang.name} waited {waited:g}s, the limit (am.max_wait_s / --max-wait): {self.why(gang, diagnose)}"

    def why(self, gang: GangRun, diagnose: Diagnose) -> str:
        """Why ``gang`` waits, in one line, for the reason its job ends: its diagnosis made
        now (the expected ends of the jobs holding the capacity are counted from now) when
        its placement found no room, else how far the RM got granting it."""
        acq = gang.acquisition
        if not acq.found_no_room:
            return f"{len(acq.by_container)}/{acq.total} containers granted"
        self._diagnosed_after[gang.name] = (gang.attempt, acq.failed_placements)
        self._record(gang, self._diagnosed(gang, diagnose), None)
        return self.latest[gang.name].summary()

    def started(self, gangs: list[GangRun]) -> None:
        """Forget the diagnoses of the gangs no longer pending (their gauges go back to 0)."""
        for gang in gangs:
            if gang.name in self.latest and not gang.pending:
                self._clear(self.latest.pop(gang.name))

    def _diagnosed(self, gang: GangRun, diagnose: Diagnose) -> Diagnosis:
        self.metrics.diagnoses.inc()
        return diagnose(gang)

    def _record(self, gang: GangRun, diagnosis: Diagnosis, waited: float | None) -> None:
        before = self.latest.get(gang.name)
        self.latest[gang.name] = diagnosis
        if before is not None and before.signature() == diagnosis.signature():
            return
        if before is not None:
            self._clear(before)
        for role in diagnosis.roles.values():
            self.metrics.gang_shortfall.labels(role.role).set(role.shortfall)
            for reason in role.reasons:
                self.metrics.gang_blocked_nodes.labels(role.role, reason.code).set(reason.count)
        changed = "changed" if before is not None else "" if waited is None else f"after {waited:.0f}s"
        self.log(f"gang {gang.name}: why it waits" + (f" ({changed})" if changed else "") + ":")
        for line in diagnosis.text().splitlines():
            self.log(line)

    def _clear(self, diagnosis: Diagnosis) -> None:
        for role in diagnosis.roles.values():
            self.metrics.gang_shortfall.labels(role.role).set(0)
            for reason in role.reasons:
                self.metrics.gang_blocked_nodes.remove(role.role, reason.code)


def watches(settings: AMSettings) -> bool:
    """Whether :meth:`WaitingWatch.check` can do anything with these settings: a diagnosis is
    due some time, or a wait has a limit."""
    return settings.explain_after_s is not None or settings.max_wait_s is not None
