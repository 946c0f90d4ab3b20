"""An AM that starts where a journal already is: failover and resume.

The journal is the gangs' own events (:mod:`~gangmaster.am.core.gang_events`), and each gang is
rebuilt by replaying them through the same transitions it lived (:func:`replay_gangs`:
:class:`~gangmaster.am.core.gang_run.GangRun`'s ``released``, ``reselected``, ``launched``,
``end_task``, ``end_attempt``), on a gang nobody observes until it carries on under the
new AM (``taken_over``). What the AM must still do about them comes back as data
(:class:`Recovered`), which the AM acts on as on any heartbeat's news. Which of the two
below a new AM does, :func:`carry_on` decides from its registration. Nothing here
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
from typing import Callable

from .acquisition import AcquisitionContext
from .gang_run import GangRun
from gangmaster.am.spec.jobspec_model import JobSpec, gang_name
from .journal import ENDING_KINDS, JournalState, endings_of
from .lifecycle import ROLE_FAILED, ROLE_SUCCEEDED, TaskRecord, TaskState
from gangmaster.protocol.rm_protocol import ContainerState, ContainerStatus, ExitStatus, NotFound, RegisterResponse

#: What became of an earlier run's tasks when its RM was its own process's: they ended with it.
ENDED_WITH_THE_RUN = "ended with it"


@dataclass
class Replayed:
    """A gang as its journaled events left it (its current attempt, and those before in
    its history), and what the journal knows of its launch."""

    gang: GangRun
    launched: bool = False             # its current attempt had launched (every task started)
    barrier_token: str | None = None   # the token the AM gave its tasks (launched only)


def replay_gangs(job: JobSpec, journal: JournalState) -> dict[str, Replayed]:
    """Each gang of ``job`` the journal saw, its events replayed through the gang's own
    transitions (by name; the events of a gang not in ``job``, or of an attempt that is
    not the gang's current one, change nothing)."""
    roles = {gang_name(names): job.gang_roles(number) for number, names in enumerate(job.gangs)}
    gangs: dict[str, Replayed] = {}
    for r in journal.gang_events:
        kind = r["kind"]
        name = r["record"]["gang"] if kind == "attempt_ended" else r.get("gang")
        if name not in roles:
            continue
        seen = gangs.get(name)
        if kind == "gang_attempt":
            gangs[name] = Replayed(GangRun.recorded(name, roles[name], int(r["attempt"]), float(r["waiting_since"]),
                                                    seen.gang.history if seen is not None else []))
            continue
        if kind == "attempt_ended" and seen is None:   # (an attempt whose beginning the journal lacks)
            ended = r["record"]
            seen = gangs[name] = Replayed(GangRun.recorded(name, roles[name], int(ended["attempt"]),
                                                           float(ended["waiting_since"]), []))
        if seen is None or seen.gang.attempt != (r["record"]["attempt"] if kind == "attempt_ended" else r["attempt"]):
            continue
        gang = seen.gang
        if kind == "released":
            gang.released(r["containers"], float(r["t"]))
        elif kind == "reselected":
            gang.reselected(int(r["count"]))
        elif kind == "launched":
            gang.launched([TaskRecord.from_dict(t) for t in r["tasks"]], float(r["started_at"]))
            seen.launched, seen.barrier_token = True, r.get("barrier_token")
        elif kind in ENDING_KINDS and seen.launched:
            by_task = {(t.role, t.index): t for t in gang.tasks}
            for end in endings_of(r):
                task = by_task.get((end["role"], end["index"]))
                if task is not None and task.state is TaskState.RUNNING:
                    gang.end_task(task, TaskState(end["state"]), end["finished_at"], end["diagnostics"],
                                  end["exit_status"])
        elif kind == "attempt_ended":
            ended = r["record"]
            gang.end_attempt(ended["outcome"], ended.get("reason", ""), ended["ended_at"])
    return gangs


def recorded_gangs(job: JobSpec, journal: JournalState) -> list[GangRun]:
    """The job's gangs as a journal left them, every attempt in their history: what a
    report of a finished run shows, without an AM."""
    replayed = replay_gangs(job, journal)
    gangs = []
    for number, names in enumerate(job.gangs):
        saved = replayed.get(gang_name(names))
        if saved is not None and saved.gang.history:
            history = saved.gang.history
            last = history[-1]
            state = ROLE_SUCCEEDED if last.outcome == "succeeded" else ROLE_FAILED
            gangs.append(GangRun(last.gang, job.gang_roles(number), last.attempt, state, last,
                                 tasks=last.tasks, history=list(history)))
    return gangs


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


def carry_on(job: JobSpec, previous: JournalState, registration: RegisterResponse, context: AcquisitionContext,
             clock: Callable[[], float], container_status: Callable[[str], ContainerStatus],
             log: Callable[[str], None], earlier_tasks: str = ENDED_WITH_THE_RUN) -> Recovered:
    """What a new AM (registered as ``registration`` says) takes over from the journal of an
    earlier run, ``previous`` (not empty): a later AM attempt of the same application fails
    over (:func:`recover`, with the containers the RM kept). The first AM of a new
    application resumes (:func:`resume`): the journal is an earlier run's, and that run's
    containers went with its RM; nothing of it can be recovered but the record (the journal
    records that it resumed: ``context.events``)."""
    if registration.attempt == 1:
        context.events.resumed(previous.am_attempts, previous.app_id)
        return resume(job, previous, context, clock, log, earlier_tasks)
    return recover(job, previous, registration.containers_from_previous_attempts, context, clock, container_status,
                   log)


def recover(job: JobSpec, previous: JournalState, kept_containers, context: AcquisitionContext,
            clock: Callable[[], float], container_status: Callable[[str], ContainerStatus],
            log: Callable[[str], None]) -> Recovered:
    """Take the job over from the journal of this application's previous AM attempt, with
    the containers the RM kept running (see the module docstring); the gangs' attempts
    share the new AM's acquisition ``context``; ``container_status`` asks the RM about a
    container it did not keep."""
    kept = {c.container_id for c in kept_containers}
    log(f"recovering from the journal of AM attempt(s) {previous.am_attempts}; the RM kept "
        f"{len(kept)} running container(s)")
    if previous.outcome is not None:
        return Recovered(finished=(previous.outcome, previous.reason))
    replayed = replay_gangs(job, previous)
    out = Recovered()
    known: set[str] = set()
    for number, names in enumerate(job.gangs):
        name = gang_name(names)
        saved = replayed.get(name)
        if saved is None:
            out.gangs.append(TakenBack(GangRun.begin(name, job.gang_roles(number), 1, [], context, clock())))
            continue
        gang = saved.gang
        if gang.record.outcome:   # it ended, and the previous AM stopped before its next attempt began
            out.gangs.append(TakenBack(GangRun.begin(name, gang.roles, gang.attempt + 1, gang.history, context,
                                                     clock())))
            continue
        gang.taken_over(context, clock())
        taken = TakenBack(gang, launched=saved.launched, barrier_token=saved.barrier_token)
        if saved.launched:
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


def resume(job: JobSpec, previous: JournalState, context: AcquisitionContext, clock: Callable[[], float],
           log: Callable[[str], None], earlier_tasks: str = ENDED_WITH_THE_RUN) -> Recovered:
    """Carry on a job whose earlier run stopped (interrupted, killed, or the machine went
    down) under a new application (see the module docstring); ``earlier_tasks`` says what
    became of that run's tasks ("ended with it", "were killed at the RM ..."). The
    interrupted attempts end through the new AM's observers (``context.events``: the
    journal records their end)."""
    if previous.finished:   # the drivers report such a folder without starting an AM (tools.job_runner)
        return Recovered([TakenBack(g) for g in recorded_gangs(job, previous)],
                         finished=(previous.outcome, f"already finished in an earlier run: {previous.reason}"))
    log(f"resuming the job from the journal of an earlier run ({previous.app_id}, AM attempt(s) "
        f"{previous.am_attempts}); the tasks it was running {earlier_tasks}")
    replayed = replay_gangs(job, previous)
    out = Recovered()
    for number, names in enumerate(job.gangs):
        name, roles = gang_name(names), job.gang_roles(number)
        saved = replayed.get(name)
        if saved is None:
            out.gangs.append(TakenBack(GangRun.begin(name, roles, 1, [], context, clock())))
            continue
        gang = saved.gang
        if not gang.record.outcome and not saved.launched:
            out.gangs.append(TakenBack(GangRun.begin(name, roles, gang.attempt, gang.history, context, clock())))
            continue
        if not gang.record.outcome:   # the attempt that was running ends now, as any attempt ends
            gang.events = context.events
            for task in gang.tasks:
                if task.state is TaskState.RUNNING:
                    gang.end_task(task, TaskState.STOPPED, previous.last_time, "the run was interrupted")
            gang.end_attempt("stopped", f"the run was interrupted: its tasks {earlier_tasks}", previous.last_time)
        log(f"gang {name}: attempt {gang.attempt} ended with the earlier run; starting attempt {gang.attempt + 1}")
        out.gangs.append(TakenBack(GangRun.begin(name, roles, gang.attempt + 1, gang.history, context, clock())))
    return out
