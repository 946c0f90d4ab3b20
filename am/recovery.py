"""An AM that starts where a journal already is: failover and resume.

* **Failover** (:func:`recover`, AM attempt 2 and later of the same application):
  the RM kept the running containers. Each gang is rebuilt through the same
  transitions it lived: a new attempt waiting, or an attempt launched with the
  tasks the journal recorded; a task that ended while no AM was watching ends now,
  through the AM's own :meth:`~ApplicationMaster.task_ended_unwatched`, and the gangs
  then decide as after any heartbeat. A container the journal never saw launched
  is stopped.
* **Resume** (:func:`resume`, the first AM of a *new* application in a folder that
  holds an unfinished run): that run's containers are gone (they went with its RM,
  or the driver killed its application at the RM and waited for them to stop; the
  driver says which). An attempt that had started ends as interrupted (not a
  failure: it does not count against the retry limit) and its gang starts again as
  the next attempt; an attempt still waiting simply waits again.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .gang_run import GangRun, gang_name, recorded_gangs
from .journal import JournalState
from .lifecycle import AttemptRecord, RoleState, TaskState
from .rm_protocol import ContainerState, ExitStatus, NotFound

if TYPE_CHECKING:
    from .master import ApplicationMaster

#: What became of an earlier run's tasks when its RM was its own process's: they ended with it.
ENDED_WITH_THE_RUN = "ended with it"


def recover(am: "ApplicationMaster", previous: JournalState, kept_containers) -> None:
    """Take the job over from the journal of this application's previous AM attempt, with
    the containers the RM kept running (see the module docstring)."""
    kept = {c.container_id for c in kept_containers}
    am.log(f"recovering from the journal of AM attempt(s) {previous.am_attempts}; the RM kept "
           f"{len(kept)} running container(s)")
    if previous.outcome is not None:
        am.finish(previous.outcome, previous.reason)
        return
    known: set[str] = set()
    now = am.now()
    for number, names in enumerate(am.job.gangs):
        name = gang_name(names)
        saved = previous.gangs.get(name)
        roles = am.job.gang_roles(number)
        if saved is None:
            am.gangs.append(am.begin_attempt(name, roles, 1, []))
            continue
        gang = am.begin_attempt(name, roles, saved.attempt, saved.history, waiting_since=saved.waiting_since)
        gang.record.releases = saved.releases
        if saved.launched is not None:
            gang.acquisition = None
            gang.launched(saved.launched)
            gang.state, gang.record.started_at = RoleState.RUNNING, saved.started_at
            am.take_back_running(gang)
            for task in gang.tasks:
                known.add(task.container_id)
                if task.state is TaskState.RUNNING and task.container_id not in kept:
                    try:
                        status = am.rm.container_status(task.container_id)
                    except NotFound:
                        am.task_ended_unwatched(gang, task, ExitStatus.LOST_ON_RM_RESTART,
                                          "the RM no longer knows its container", now)
                        continue
                    if status.state is not ContainerState.RUNNING:
                        am.task_ended_unwatched(gang, task, status.exit_status, status.diagnostics or
                                          "ended while the AM was down", now)
            running = gang.running
            am.log(f"gang {name} attempt {gang.attempt}: recovered {len(gang.tasks)} task(s), "
                   f"{running} still running")
            am.reopen_barrier(gang, saved.barrier_token)
        am.gangs.append(gang)
    for cid in sorted(kept - known):   # started by a launch the journal never recorded
        am.log(f"stopping container {cid}: its gang's launch was not completed by the previous AM")
        am.stop_container(cid)
    am.decide_gangs(now)


def resume(am: "ApplicationMaster", previous: JournalState, earlier_tasks: str = ENDED_WITH_THE_RUN) -> None:
    """Carry on a job whose earlier run stopped (interrupted, killed, or the machine went
    down) under a new application (see the module docstring); ``earlier_tasks`` says what
    became of that run's tasks ("ended with it", "were killed at the RM ...")."""
    am.journal.write("resumed", am_attempts=previous.am_attempts, app_id=previous.app_id)
    if previous.finished:   # the drivers report such a folder without starting an AM (tools.job_runner)
        am.gangs = recorded_gangs(am.job, previous)
        am.finish(previous.outcome, f"already finished in an earlier run: {previous.reason}")
        return
    am.log(f"resuming the job from the journal of an earlier run ({previous.app_id}, AM attempt(s) "
           f"{previous.am_attempts}); the tasks it was running {earlier_tasks}")
    for number, names in enumerate(am.job.gangs):
        name, roles = gang_name(names), am.job.gang_roles(number)
        saved = previous.gangs.get(name)
        if saved is None:
            am.gangs.append(am.begin_attempt(name, roles, 1, []))
            continue
        history = saved.history
        ended = any(a.attempt == saved.attempt for a in history)
        if not ended and saved.launched is None:
            am.gangs.append(am.begin_attempt(name, roles, saved.attempt, history))
            continue
        if not ended:   # the attempt that was running ends now, as any attempt ends
            gang = GangRun(name, roles, saved.attempt, RoleState.RUNNING,
                           AttemptRecord(name, saved.attempt, saved.waiting_since, saved.started_at), history=history)
            gang.launched(saved.launched)
            for task in gang.tasks:
                if task.state is TaskState.RUNNING:
                    gang.end_task(task, TaskState.STOPPED, previous.last_time, "the run was interrupted")
            am.end_attempt(gang, "stopped", f"the run was interrupted: its tasks {earlier_tasks}", previous.last_time)
        am.log(f"gang {name}: attempt {saved.attempt} ended with the earlier run; "
               f"starting attempt {saved.attempt + 1}")
        am.gangs.append(am.begin_attempt(name, roles, saved.attempt + 1, history))
