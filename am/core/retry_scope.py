"""Restarting what a failure calls for: the retry scope of the failed roles.

A failed task ends the attempt of its retry scope: the whole job (``retry.scope: job``:
every gang restarts, the failed ones' attempts ``failed``, the others' ``stopped``), or
the gang of the failed role. A task never launched restarts its gang whatever the
completion policy says (a gang starts whole or not at all). Attempts that failed count
against the limit (the job's ``retry.attempts``, or the least of the failed roles'); one
stopped by an interrupted run does not. Past the limit nothing restarts: the AM fails the
job with the reason given here.
"""
from __future__ import annotations

from typing import Callable, Sequence

from .gang_events import GangEvents
from .gang_run import GangRun, failed_attempts, failure
from .job_shutdown import Shutdown
from gangmaster.am.spec.jobspec_model import JobSpec, RoleSpec
from .lifecycle import TASK_FAILED
from gangmaster.protocol.rm_protocol import ExitStatus


def retry_failures(job: JobSpec, gangs: list[GangRun], failing: Sequence[GangRun], shutdown: Shutdown,
                   events: GangEvents, now: float, clock: Callable[[], float]) -> str | None:
    """What the failed tasks of ``failing`` (gangs of ``gangs`` whose tasks ended) call for,
    done: gangs the RM preempted restart once every task of theirs has ended (the others may
    still be checkpointing); else the retry scope of the roles that reached their failure
    threshold restarts. None when they call for nothing (the job may still succeed); ""
    when it is done or awaited; else why the job fails (its retry limit is reached)."""
    preempted = preempted_gangs(failing)
    if preempted:
        if not any(g.running for g in preempted):
            restart_preempted(gangs, preempted, shutdown, events, now, clock, job.retry.attempts)
        return ""
    failed_roles = roles_to_restart(job, failing)
    if failed_roles:
        return restart(job, gangs, failed_roles, shutdown, events, now, clock)
    return None


def roles_to_restart(job: JobSpec, failing: Sequence[GangRun]) -> list[RoleSpec]:
    """The roles whose retry scope the failed tasks of ``failing`` restart: those of a task
    never launched, else those that reached their failure threshold ([]: none; the job may
    still succeed)."""
    unlaunched = [t for g in failing for t in g.tasks if t.launch_failed]
    if unlaunched:
        return [job.role(name) for name in dict.fromkeys(t.role for t in unlaunched)]
    return [r for g in failing for r in g.roles if r.completion.failed(g.failed.get(r.name, 0))]


def restart(job: JobSpec, gangs: list[GangRun], failed_roles: list[RoleSpec], shutdown: Shutdown,
            events: GangEvents, now: float, clock: Callable[[], float]) -> str:
    """End the attempts of the retry scope of ``failed_roles`` and begin the next ones (in
    place in ``gangs``); "" when they restarted, else why the job fails: the retry limit is
    reached (nothing restarted)."""
    names = {r.name for r in failed_roles}
    culprits = [g for g in gangs if names & {r.name for r in g.roles}]
    if job.retry.scope == "job":
        restarting, limit = list(gangs), job.retry.attempts
    else:
        restarting = culprits
        limit = min(r.retry.attempts for r in failed_roles)
    failures = [t for g in culprits for t in g.tasks if t.state is TASK_FAILED]
    reason = "; ".join(failure(t) for t in failures[:5])
    if len(failures) > 5:
        reason += f" and {len(failures) - 5} more"
    for gang in restarting:
        outcome = "failed" if gang in culprits else "stopped"
        shutdown.end_attempt(gang, outcome, reason if gang in culprits else f"restarted with the job: {reason}", now)
    if job.retry.scope == "job":
        failed = failed_attempts(gangs)
    else:
        failed = max(failed_attempts([g]) for g in culprits)
    if failed >= limit:
        return f"attempt {failed} of {limit} failed: {reason}"
    for i, gang in enumerate(gangs):
        if gang in restarting:
            events.restarting(gang, limit)
            gangs[i] = gang.restart(clock())
    return ""


def preempted_gangs(failing: Sequence[GangRun]) -> list[GangRun]:
    """The gangs of ``failing`` the RM preempted (a task ended with the preempted status)."""
    return [g for g in failing if any(t.exit_status == ExitStatus.PREEMPTED for t in g.tasks)]


def restart_preempted(gangs: list[GangRun], preempted: list[GangRun], shutdown: Shutdown, events: GangEvents,
                      now: float, clock: Callable[[], float], limit: int) -> None:
    """The preempted gangs start again as new attempts (in place in ``gangs``); a preemption
    is no failure, so it spends none of the job's retries (:func:`failed_attempts` counts
    ``failed`` only)."""
    reason = next(t.diagnostics for g in preempted for t in g.tasks if t.exit_status == ExitStatus.PREEMPTED)
    for gang in preempted:
        shutdown.end_attempt(gang, "preempted", reason, now)
    for i, gang in enumerate(gangs):
        if gang in preempted:
            events.restarting(gang, limit)
            gangs[i] = gang.restart(clock())
