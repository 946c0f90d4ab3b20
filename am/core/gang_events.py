"""What happens to a job's gangs, told to whoever keeps it: the journal, the log, the metrics.

A gang's transitions (:class:`~gangmaster.am.core.gang_run.GangRun`) and the AM's verdict tell
one :class:`GangEvents` what they did; each keeper is an observer that takes the events
it keeps and makes its own record of them: the journal a line per event
(:class:`JournalEvents`: those lines *are* the journal a restarted AM reads), the log a
line for a person (:class:`LogEvents`), the metrics a count (:class:`MetricsEvents`). An
observer is attached only when there is something to keep: a journal that keeps nothing
(:class:`~gangmaster.am.core.journal.NoJournal`) or a quiet log attach none, so no record or
line is built for them, and nothing that decides asks whether they are there.

Every method of :class:`GangEvents` does nothing: an observer overrides those it keeps.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from .lifecycle import LaunchedTasks, TaskEndings, TaskRecord

if TYPE_CHECKING:
    from .acquisition import GangAcquisition
    from .gang_run import GangRun
    from gangmaster.am.ops.metrics import AMMetrics


class GangEvents:
    """The events of a job and its gangs; each does nothing here (see the module docstring)."""

    def am_started(self, am_attempt: int, app_id: str, job: str, instances: int, gangs: int, work_dir) -> None:
        """An AM attempt began serving the job."""

    def resumed(self, am_attempts: list[int], app_id: str) -> None:
        """The first AM of a new application carries on the run of an earlier one (``app_id``,
        whose AM attempts were ``am_attempts``)."""

    def attempt_began(self, gang: "GangRun", now: float, new: bool) -> None:
        """A gang attempt began to wait (``new``: not one a journal recorded already)."""

    def no_room(self, acquisition: "GangAcquisition", why: Exception) -> None:
        """A gang's placement found no room (told before ``acquisition`` keeps ``why``)."""

    def asking(self, gang: str, granted: int, total: int, hosts: Sequence[str]) -> None:
        """A gang asks the RM for containers on ``hosts`` (one per instance asked)."""

    def released(self, gang: "GangRun", containers: list[str], now: float) -> None:
        """A gang gave back the partial hold it had (it timed out)."""

    def reselected(self, gang: "GangRun", count: int) -> None:
        """A gang selected ``count`` instances again (their asks went stale)."""

    def launched(self, gang: "GangRun", token: str | None, now: float, refused: bool) -> None:
        """Every container of a gang attempt was started (``refused``: the RM refused the last)."""

    def task_ended(self, gang: "GangRun", task: TaskRecord, now: float) -> None:
        """A task of a gang's current attempt ended by itself."""

    def deciding(self, now: float) -> None:
        """The AM is about to decide on the tasks that ended: what is kept of them is kept now."""

    def restarting(self, gang: "GangRun", limit: int) -> None:
        """A gang's attempt ended by a failure and the gang starts again."""

    def avoidance_dropped(self, gang: "GangRun", role: str, now: float) -> None:
        """``role`` of ``gang`` is placed again on the nodes where it failed: avoiding them
        would leave the gang unable to start even on the idle cluster."""

    def attempt_ended(self, gang: "GangRun", now: float) -> None:
        """A gang attempt ended (``gang.record`` says how)."""

    def job_finished(self, job: str, outcome: str, reason: str, now: float) -> None:
        """The job ended."""


def avoidance_dropped_text(role: str) -> str:
    """What the log and the run report say when a role's avoidance of its failed nodes is dropped."""
    return (f"role {role} is placed again on the nodes where it failed: avoiding them would leave the gang "
            f"unable to start even on the idle cluster")


#: The observer of a job nobody watches.
NO_EVENTS = GangEvents()


class Fanout(GangEvents):
    """Each event told to every one of ``observers``, in order."""

    def __init__(self, observers: Sequence[GangEvents]):
        self.observers = tuple(observers)


def _fan(name: str) -> Callable:
    def tell_each(self, *args):
        for observer in self.observers:
            getattr(observer, name)(*args)
    tell_each.__name__ = name
    return tell_each


for _name in [n for n in vars(GangEvents) if not n.startswith("_")]:
    setattr(Fanout, _name, _fan(_name))


def observers(metrics: "AMMetrics", journal, log) -> GangEvents:
    """The one observer of a job's events: its metrics, its journal and its log, each attached
    only when it keeps something (a journal or a log that keeps nothing says so by
    ``keeps_nothing``: :class:`~gangmaster.am.core.journal.NoJournal`, a quiet log); the one
    itself when only one is."""
    kept: list[GangEvents] = [MetricsEvents(metrics)]
    if not getattr(journal, "keeps_nothing", False):
        kept.append(JournalEvents(journal))
    if not getattr(log, "keeps_nothing", False):
        kept.append(LogEvents(log))
    return kept[0] if len(kept) == 1 else Fanout(kept)


class JournalEvents(GangEvents):
    """The events a restarted AM needs, as journal records (:mod:`~gangmaster.am.core.journal`).
    The tasks that end at one heartbeat are written as one line per gang attempt (a
    heartbeat that sees 6,001 tasks end writes one line, not 6,001), before anything is
    decided on them (:meth:`deciding`)."""

    def __init__(self, journal):
        self.journal = journal
        self._endings: dict[tuple, list[TaskRecord]] = {}   # (gang, attempt, time) -> tasks ended

    def am_started(self, am_attempt, app_id, job, instances, gangs, work_dir) -> None:
        self.journal.write("am_started", am_attempt=am_attempt, app_id=app_id, job=job)

    def resumed(self, am_attempts, app_id) -> None:
        self.journal.write("resumed", am_attempts=am_attempts, app_id=app_id)

    def attempt_began(self, gang, now, new) -> None:
        if new:
            self.journal.write("gang_attempt", now, gang=gang.name, attempt=gang.attempt,
                               waiting_since=gang.record.waiting_since)

    def released(self, gang, containers, now) -> None:
        self.journal.write("released", now, gang=gang.name, attempt=gang.attempt, containers=list(containers),
                           reason="partial hold timed out")

    def reselected(self, gang, count) -> None:
        self.journal.write("reselected", gang=gang.name, attempt=gang.attempt, count=count)

    def avoidance_dropped(self, gang, role, now) -> None:
        self.journal.write("avoidance_dropped", now, gang=gang.name, attempt=gang.attempt, role=role)

    def launched(self, gang, token, now, refused) -> None:
        self.journal.write("launched", now, gang=gang.name, attempt=gang.attempt, started_at=now,
                           barrier_token=token, tasks=LaunchedTasks(gang.tasks))

    def task_ended(self, gang, task, now) -> None:
        self._endings.setdefault((gang.name, gang.attempt, now), []).append(task)

    def deciding(self, now) -> None:
        if self._endings:
            for (gang, attempt, ended), tasks in self._endings.items():
                self.journal.write("tasks_finished", now, gang=gang, attempt=attempt, finished_at=ended,
                                   tasks=TaskEndings(tasks))
            self._endings.clear()

    def attempt_ended(self, gang, now) -> None:
        self.journal.write("attempt_ended", now, record=gang.record)   # final now: written as its dict

    def job_finished(self, job, outcome, reason, now) -> None:
        self.deciding(now)
        self.journal.write("job_finished", now, outcome=outcome, reason=reason)


class LogEvents(GangEvents):
    """The events a person reads in the AM's log, each line built only here."""

    def __init__(self, log: Callable[[str], None]):
        self.log = log

    def am_started(self, am_attempt, app_id, job, instances, gangs, work_dir) -> None:
        self.log(f"AM attempt {am_attempt} of {app_id} for job {job!r} "
                 f"({instances} instance(s) in {gangs} gang(s)); work folder {work_dir}")

    def attempt_began(self, gang, now, new) -> None:
        self.log(f"gang {gang.name} attempt {gang.attempt}: waiting for "
                 f"{sum(r.instances for r in gang.roles)} instance(s)")

    def no_room(self, acquisition, why) -> None:
        text = str(why)
        if text != acquisition.waiting_reason:   # (said once while it stays the same)
            self.log(f"gang {acquisition.gang}: waiting, {len(acquisition.by_container)}/{acquisition.total} "
                     f"granted; {text}")

    def asking(self, gang, granted, total, hosts) -> None:
        self.log(f"gang {gang}: asking for {len(hosts)} instance(s) ({granted}/{total} granted) on "
                 f"{_hosts_summary(hosts)}")

    def launched(self, gang, token, now, refused) -> None:
        if not refused:
            tasks = gang.tasks
            self.log(f"gang {gang.name} attempt {gang.attempt}: started all {len(tasks)} task(s) after waiting "
                     f"{now - gang.record.waiting_since:.1f}s on {len({t.host for t in tasks})} host(s)")

    def restarting(self, gang, limit) -> None:
        self.log(f"gang {gang.name}: restarting as attempt {gang.attempt + 1} of {limit}")

    def avoidance_dropped(self, gang, role, now) -> None:
        self.log(f"gang {gang.name}: {avoidance_dropped_text(role)}")

    def job_finished(self, job, outcome, reason, now) -> None:
        self.log(f"job {job} {outcome}: {reason}")


class MetricsEvents(GangEvents):
    """The events the AM's metrics count (:class:`~gangmaster.am.ops.metrics.AMMetrics`)."""

    def __init__(self, metrics: "AMMetrics"):
        self.metrics = metrics

    def attempt_began(self, gang, now, new) -> None:
        if new:
            self.metrics.attempts.inc()

    def released(self, gang, containers, now) -> None:
        self.metrics.releases.inc()

    def reselected(self, gang, count) -> None:
        self.metrics.reselections.inc(count)

    def launched(self, gang, token, now, refused) -> None:
        if not refused:
            self.metrics.gang_wait.observe(now - gang.record.waiting_since)

    def restarting(self, gang, limit) -> None:
        self.metrics.restarts.inc()


def _hosts_summary(hosts: Sequence[str], shown: int = 4) -> str:
    counts: dict[str, int] = {}
    for host in hosts:
        counts[host] = counts.get(host, 0) + 1
    parts = [f"{h}×{n}" if n > 1 else h for h, n in counts.items()]
    more = len(parts) - shown
    return ", ".join(parts[:shown]) + (f" and {more} more host(s)" if more > 0 else "")
