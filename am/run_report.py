"""The end-of-run report of ``gangmaster run``: every attempt of every gang,
where each task ran (host, GPUs, ports), how it ended, and the job's outcome."""
from __future__ import annotations

from .lifecycle import AttemptRecord
from .master import ApplicationMaster


def format_report(am: ApplicationMaster) -> str:
    lines = [f"job {am.job.name} ({am.app_id}): {(am.outcome or 'unfinished').upper()}"
             + (f" - {am.reason}" if am.reason else "")]
    for record in am.history():
        lines.extend(_attempt_lines(record))
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
    if a.outcome in ("failed", "stopped") and a.reason:
        head += f"\n    reason: {a.reason}"
    lines = [head]
    for t in a.tasks:
        status = t.state.value if t.exit_status is None else f"{t.state.value} (exit {t.exit_status})"
        lines.append(f"    {t.name:<16} rank {t.rank:<4} {t.where():<44} {status}")
    return lines
