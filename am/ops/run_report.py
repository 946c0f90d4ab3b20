"""The end-of-run report of ``gangmaster run``: every attempt of every gang,
where each task ran (host, GPUs, ports), how it ended, and the job's outcome.

It reads a run through :class:`RunResult`: the AM that served it last, or, for
a job whose work folder holds a run that already finished, that run's journal
(:class:`RecordedRun`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from gangmaster.am.spec.jobspec_model import JobSpec
from gangmaster.am.core.gang_events import avoidance_dropped_text
from gangmaster.am.core.journal import JournalState, avoidance_drops
from gangmaster.am.core.lifecycle import AttemptRecord
from gangmaster.am.core.gang_run import attempt_history
from gangmaster.am.core.master import ApplicationMaster
from gangmaster.am.core.recovery import recorded_gangs


class RunResult(Protocol):
    job: JobSpec
    app_id: str
    outcome: str | None
    reason: str

    def history(self) -> list[AttemptRecord]: ...

    def why_waiting(self) -> dict[str, str]: ...

    def avoidance_drops(self) -> list[tuple[str, int, str]]: ...


@dataclass
class RecordedRun:
    """A run that already finished, as its journal recorded it."""

    job: JobSpec
    app_id: str
    outcome: str | None
    reason: str
    attempts: list[AttemptRecord]
    dropped: list[tuple[str, int, str]] = field(default_factory=list)   # (gang, attempt, role): avoidance_drops

    @classmethod
    def of(cls, job: JobSpec, journal: JournalState) -> "RecordedRun":
        return cls(job, journal.app_id, journal.outcome, journal.reason,
                   attempt_history(recorded_gangs(job, journal)), avoidance_drops(journal))

    def history(self) -> list[AttemptRecord]:
        return list(self.attempts)

    def why_waiting(self) -> dict[str, str]:
        return {}

    def avoidance_drops(self) -> list[tuple[str, int, str]]:
        return list(self.dropped)


def format_report(am: RunResult | ApplicationMaster) -> str:
    lines = [f"job {am.job.name} ({am.app_id}): {(am.outcome or 'unfinished').upper()}"
             + (f" - {am.reason}" if am.reason else "")]
    for record in am.history():
        lines.extend(_attempt_lines(record))
    for gang, attempt, role in am.avoidance_drops():
        lines.append(f"  gang {gang} after attempt {attempt}: {avoidance_dropped_text(role)}")
    waiting = am.why_waiting()
    for gang, why in waiting.items():
        lines.append(f"  gang {gang} is waiting: {why}")
    return "\n".join(lines)


def _attempt_lines(a: AttemptRecord) -> list[str]:
    span = ""
    if a.started_at is not None:
        span = f"waited {a.started_at - a.waiting_since:.1f}s, started at {a.started_at:.1f}s"
        if a.ended_at is not None:
            span += f", ended at {a.ended_at:.1f}s"
    extra = []
    if a.releases:
        extra.append(f"{a.releases} release(s)")
    if a.reselections:
        extra.append(f"{a.reselections} re-selection(s)")
    head = f"  gang {a.gang} attempt {a.attempt}: {a.outcome or 'in progress'}"
    head += f" ({'; '.join(filter(None, [span, *extra]))})" if span or extra else ""
    if a.outcome in ("failed", "stopped", "preempted") and a.reason:
        head += f"\n    reason: {a.reason}"
    lines = [head]
    for t in a.tasks:
        if t.launch_failed:
            status = "failed (not launched)"
        else:
            status = t.state.value if t.exit_status is None else f"{t.state.value} (exit {t.exit_status})"
        lines.append(f"    {t.name:<16} rank {t.rank:<4} {t.where():<44} {status}")
    return lines
