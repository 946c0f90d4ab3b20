"""An AM that starts where a journal already is: failover and resume.

The journal is the gangs' own events (:mod:`~gangmaster.am.gang_events`), folded per gang
by :func:`~gangmaster.am.journal.replay`; each gang is rebuilt here through the same
transitions it lived (:class:`~gangmaster.am.gang_run.GangRun`'s ``begin``, ``launched``,
``end_attempt``), and what the AM must still do about them comes back as data
(:class:`Recovered`), which the AM acts on as on any heartbeat's news. Nothing here
knows the AM.

* **Failover** (:func:`recover`, AM attempt 2 and later of the same application):
  the RM kept the running containers. Each gang is a new attempt waiting, or an
  attempt launched with the tasks the journal recorded; a task that ended while no AM
  was watching is handed back as ended (the AM ends it as any task ends), and the gangs
  then decide as after any heartbeat. A container the journal never saw launched is
  handed back to be stopped.
* **Resume** (:func:`resume`, the first AM of a *new* application in a folder that
  holds an unfinished run): that run's containers are gone (they went with its RM,
  or the driver killed its application at the RM and waited for them to stop; the
  driver says which). An attempt that had started ends as interrupted (not a
  failure: it does not count against the retry limit) and its gang starts again as
  the next attempt; an attempt still waiting simply waits again.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

from .gang_events import GangEvents
from .gang_run import GangRun, gang_name, recorded_gangs
from .jobspec_model import JobSpec, RoleSpec
from .journal import JournalState
from .lifecycle import AttemptRecord, RoleState, TaskRecord, TaskState
from .rm_protocol import ContainerState, ContainerStatus, ExitStatus, NotFound

#: What became of an earlier run's tasks when its RM was its own process's: they ended with it.
ENDED_WITH_THE_RUN = "ended with it"


class BeginAttempt(Protocol):
    """How a gang attempt begins (:meth:`GangRun.begin` with the AM's shared acquisition
    context): ``waiting_since`` for one the journal recorded already."""

    def __call__(self, name: str, roles: tuple[RoleSpec, ...], attempt: int, history: list[AttemptRecord],
                 waiting_since: float | None = None) -> GangRun: ...


@dataclass
class TakenBack:
    """A gang taken back from the journal, and what the AM must do about it."""

    gang: GangRun
    #: its tasks that ended while no AM watched: (task, exit status, diagnostics)
    ended: list[tuple[TaskRecord, int | None, str]] = field(default_factory=list)
    launched: bool = False          # its attempt had launched: its running tasks are the AM's to watch
    barrier_token: str | None = None   # the token the previous AM gave its tasks (launched only)


@dataclass
class Recovered:
    """What a journal leaves the new AM: the gangs (in the job's order), the containers to
    stop, and the job's verdict when it was already given."""

    gangs: list[TakenBack] = field(default_factory=list)
    strays: list[str] = field(default_factory=list)     # containers no gang owns: to stop
    finished: tuple[str, str] | None = None              # (outcome, reason): the job ends with it


def recover(job: JobSpec, previous: JournalState, kept_containers, begin: BeginAttempt,
            container_status: Callable[[str], ContainerStatus], log: Callable[[str], None]) -> Recovered:
    """Take the job over from the journal of this application's previous AM attempt, with
    the containers the RM kept running (see the module docstring); ``container_status``
    asks the RM about a container it did not keep."""
    kept = {c.container_id for c in kept_containers}
    log(f"recovering from the journal of AM attempt(s) {previous.am_attempts}; the RM kept "
        f"{len(kept)} running container(s)")
    if previous.outcome is not None:
        return Recovered(finished=(previous.outcome, previous.reason))
    out = Recovered()
    known: set[str] = set()
    for number, names in enumerate(job.gangs):
        name = gang_name(names)
        saved = previous.gangs.get(name)
        roles = job.gang_roles(number)
        if saved is None:
            out.gangs.append(TakenBack(begin(name, roles, 1, [])))
            continue
        gang = begin(name, roles, saved.attempt, saved.history, waiting_since=saved.waiting_since)
        gang.record.releases = saved.releases
        taken = TakenBack(gang)
        if saved.launched is not None:
            gang.launched(saved.launched, saved.started_at)
            taken.launched, taken.barrier_token = True, saved.barrier_token
            for task in gang.tasks:
                known.add(task.container_id)
                if task.state is TaskState.RUNNING and task.container_id not in kept:
                    try:
                        status = container_status(task.container_id)
                    except NotFound:
                        taken.ended.append((task, ExitStatus.LOST_ON_RM_RESTART,
                                            "the RM no longer knows its container"))
                        continue
                    if status.state is not ContainerState.RUNNING:
                        taken.ended.append((task, status.exit_status,
                                            status.diagnostics or "ended while the AM was down"))
        out.gangs.append(taken)
    out.strays = sorted(kept - known)   # started by a launch the journal never recorded
    return out


def resume(job: JobSpec, previous: JournalState, begin: BeginAttempt, events: GangEvents,
           log: Callable[[str], None], earlier_tasks: str = ENDED_WITH_THE_RUN) -> Recovered:
    """Carry on a job whose earlier run stopped (interrupted, killed, or the machine went
    down) under a new application (see the module docstring); ``earlier_tasks`` says what
    became of that run's tasks ("ended with it", "were killed at the RM ..."). The
    interrupted attempts end through ``events`` (the journal records their end)."""
    if previous.finished:   # the drivers report such a folder without starting an AM (tools.job_runner)
        return Recovered([TakenBack(g) for g in recorded_gangs(job, previous)],
                         finished=(previous.outcome, f"already finished in an earlier run: {previous.reason}"))
    log(f"resuming the job from the journal of an earlier run ({previous.app_id}, AM attempt(s) "
        f"{previous.am_attempts}); the tasks it was running {earlier_tasks}")
    out = Recovered()
    for number, names in enumerate(job.gangs):
        name, roles = gang_name(names), job.gang_roles(number)
        saved = previous.gangs.get(name)
        if saved is None:
            out.gangs.append(TakenBack(begin(name, roles, 1, [])))
            continue
        history = saved.history
        ended = any(a.attempt == saved.attempt for a in history)
        if not ended and saved.launched is None:
            out.gangs.append(TakenBack(begin(name, roles, saved.attempt, history)))
            continue
        if not ended:   # the attempt that was running ends now, as any attempt ends
            gang = GangRun(name, roles, saved.attempt, RoleState.RUNNING,
                           AttemptRecord(name, saved.attempt, saved.waiting_since), history=history, events=events)
            gang.launched(saved.launched, saved.started_at)
            for task in gang.tasks:
                if task.state is TaskState.RUNNING:
                    gang.end_task(task, TaskState.STOPPED, previous.last_time, "the run was interrupted")
            gang.end_attempt("stopped", f"the run was interrupted: its tasks {earlier_tasks}", previous.last_time)
        log(f"gang {name}: attempt {saved.attempt} ended with the earlier run; starting attempt {saved.attempt + 1}")
        out.gangs.append(TakenBack(begin(name, roles, saved.attempt + 1, history)))
    return out
