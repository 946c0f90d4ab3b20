"""The ApplicationMaster: runs one job's gangs through the RM, all or nothing.

Each gang of the job (``gangmaster: gangs`` in the spec) lives through attempts.
An attempt waits, acquires every container of the gang
(:mod:`gangmaster.am.acquisition`), starts them all in one heartbeat, and runs
until the job's completion policy decides. A failed task ends the attempt of
its retry scope (the whole job, or the gang of the failed role): the AM fails
the attempt's barrier first (so every waiting task of the dead gang is told at
once), stops the tasks, and places the gang again as attempt n+1. Completions
from an older attempt are ignored; a task is never run twice at once.

A task that cannot even be launched (the RM refuses to start its container:
a command too long for ``exec``, a node lost in between) is a failed task like
any other: its attempt ends and the gang restarts, or the job fails saying why.

The AM never sleeps and never asks which RM it has: a driver calls
:meth:`ApplicationMaster.heartbeat` on a clock (virtual time in simulation, real
time with ``--live``). Everything it decides goes to its journal first, so an AM
started again after a crash recovers the job, and the tasks still running are
kept (:mod:`gangmaster.am.journal`). The journal also lets a *new* application
resume the job in the same work folder after the whole run stopped (the RM
with it): the attempts that were running end as interrupted and their gangs
start again as new attempts. Each AM process writes its own log,
``am-<n>.log`` (n counts the AM processes the folder has seen), in the job's
work folder; none is ever overwritten.

The job ends ``succeeded`` or ``failed`` by its own policy, ``killed`` or
``failed`` when the RM ends the application (a client killed it, its AM
attempts ran out: :meth:`ApplicationMaster.application_ended`), or ``failed``
when the driver finds it can make no progress
(:meth:`ApplicationMaster.cannot_progress`).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence, TextIO

from gangmaster.selectors.cluster import ClusterView
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.selector import get_selector
from gangmaster.selectors.settings import SelectionSettings
from gangmaster.gpu_topology.masks import indices_of

from .acquisition import GangAcquisition
from .am_settings import AMSettings
from .barrier import TaskInfo
from .gang_barrier import GangBarrier
from .gang_placement import GangDoesNotFit, GangPlacement, check_fits_empty, place_gang
from .journal import JOURNAL_FILE, Journal, JournalState, read_records, replay
from .jobspec_model import JobSpec, RoleSpec
from .launch_env import PlacedTask, gang_env, label_ports, own_env
from .lifecycle import AttemptRecord, RoleState, TaskRecord, TaskState
from .metrics import CONTAINER_STATES, AMMetrics
from .rm_client import RMClient
from .rm_protocol import AllocateRequest, AllocateResponse, ApplicationReport, AppState, ContainerState, \
    ExitStatus, LaunchContext, NotFound, RMError, WrongState, view_from_nodes


@dataclass
class GangRun:
    """One gang and its current attempt."""

    name: str
    roles: tuple[RoleSpec, ...]
    attempt: int
    state: RoleState
    record: AttemptRecord
    acquisition: GangAcquisition | None = None
    tasks: list[TaskRecord] = field(default_factory=list)
    history: list[AttemptRecord] = field(default_factory=list)
    barrier_open: bool = False

    def counts(self) -> tuple[dict[str, int], dict[str, int]]:
        succeeded: dict[str, int] = {}
        failed: dict[str, int] = {}
        for t in self.tasks:
            if t.state is TaskState.SUCCEEDED:
                succeeded[t.role] = succeeded.get(t.role, 0) + 1
            elif t.state is TaskState.FAILED:
                failed[t.role] = failed.get(t.role, 0) + 1
        return succeeded, failed

    def role_state(self, role: RoleSpec) -> RoleState:
        if self.state is not RoleState.RUNNING:
            return self.state
        mine = [t for t in self.tasks if t.role == role.name]
        failed = sum(1 for t in mine if t.state is TaskState.FAILED)
        if role.completion.failed(failed):
            return RoleState.FAILED
        if all(t.state is not TaskState.RUNNING for t in mine):
            return RoleState.SUCCEEDED
        return RoleState.RUNNING


class ProgressLog:
    """The AM's own log file, each line also handed to ``echo`` (the CLI prints it)."""

    def __init__(self, path: Path, now: Callable[[], float], echo: Callable[[str], None] | None = None):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.now = now
        self.echo = echo
        self._file: TextIO = open(path, "a", encoding="utf-8")

    def __call__(self, message: str) -> None:
        line = f"[{self.now():9.1f}s] {message}"
        self._file.write(line + "\n")
        self._file.flush()
        if self.echo is not None:
            self.echo(line)

    def close(self) -> None:
        self._file.close()


class ApplicationMaster:
    """One job's AM. Build it once its application is ACCEPTED by the RM; then
    call :meth:`heartbeat` every ``settings.heartbeat_s`` until :attr:`done`."""

    def __init__(self, job: JobSpec, rm: RMClient, app_id: str, now: Callable[[], float], work_dir: str | Path, *,
                 settings: AMSettings | None = None, selection: SelectionSettings | None = None,
                 barrier: GangBarrier, metrics: AMMetrics | None = None, echo: Callable[[str], None] | None = None,
                 task_env: Mapping[str, str] | None = None):
        self.job, self.rm, self.app_id, self.now = job, rm, app_id, now
        self.settings = settings or AMSettings()
        self.selection = selection or SelectionSettings()
        self.barrier = barrier            # live: the gRPC coordinator; simulation: the in-process one
        self.metrics = metrics or AMMetrics()
        self.task_env = dict(task_env or {})
        self.work_dir = Path(work_dir)
        registration = rm.register(app_id)
        self.am_attempt = registration.attempt
        self.queue, self.queue_limit = registration.queue, registration.queue_limit
        previous = replay(read_records(self.work_dir / JOURNAL_FILE))
        self.log = ProgressLog(self.work_dir / f"am-{len(previous.am_attempts) + 1}.log", now, echo)
        self.journal = Journal(self.work_dir / JOURNAL_FILE, now)
        self.rng = random.Random(f"{self.selection.seed}:{job.name}:{app_id}:{self.am_attempt}")
        self._pipelines: dict[str, SelectionPipeline] = {}
        self._next_request = self.am_attempt * 1_000_000   # request ids of different AM attempts never collide
        self._to_release: list[str] = []   # containers to give back at the next heartbeat
        self._to_cancel: list[int] = []    # asks to withdraw at the next heartbeat
        self._failed_hosts: dict[str, set[str]] = {}
        self._running: dict[str, tuple[GangRun, TaskRecord]] = {}   # container id -> its task, while it runs
        self.done = False
        self.outcome: str | None = None
        self.reason = ""
        self.gangs: list[GangRun] = []
        self.journal.write("am_started", am_attempt=self.am_attempt, app_id=app_id, job=job.name)
        self.log(f"AM attempt {self.am_attempt} of {app_id} for job {job.name!r} "
                 f"({job.total_instances} instance(s) in {len(job.gangs)} gang(s)); work folder {self.work_dir}")
        if previous.empty:
            self._start_fresh()
        elif self.am_attempt == 1:
            # The first AM of a new application: the journal is an earlier run's, and that
            # run's containers went with its RM. Nothing of it can be recovered but the record.
            self._resume(previous)
        else:
            self._recover(previous, registration.containers_from_previous_attempts)

    # =============================================================== start
    def _start_fresh(self) -> None:
        view = self._view()
        for number, names in enumerate(self.job.gangs):
            roles = self.job.gang_roles(number)
            try:
                check_fits_empty(view, roles, self._pipeline_for)
            except GangDoesNotFit as exc:
                self._finish("failed", f"gang {_gang_name(names)} can never run on this cluster: {exc}")
                return
            over = self._over_queue_limit(roles)
            if over:
                self._finish("failed", f"gang {_gang_name(names)} can never run in queue {self.queue}: {over}")
                return
        for number, names in enumerate(self.job.gangs):
            self.gangs.append(self._new_gang(_gang_name(names), self.job.gang_roles(number), 1, []))

    def _over_queue_limit(self, roles: tuple[RoleSpec, ...]) -> str:
        """Why the whole gang asks more than its queue may ever hold at once ("" when it fits)."""
        limit = self.queue_limit
        if limit is None:
            return ""
        memory = sum(r.instances * r.memory_mb for r in roles)
        vcores = sum(r.instances * r.ask_vcores for r in roles)
        gpus = sum(r.instances * r.gpus for r in roles)
        over = [f"{need:g} {what} in all, the queue is limited to {cap:g}"
                for need, cap, what in ((memory, limit.memory_mb, "MB memory"), (vcores, limit.vcores, "vcores"),
                                        (gpus, limit.gpus, "GPUs")) if need > cap + 1e-9]
        return "; ".join(over)

    def _new_gang(self, name: str, roles: tuple[RoleSpec, ...], attempt: int,
                  history: list[AttemptRecord], waiting_since: float | None = None) -> GangRun:
        now = self.now()
        since = now if waiting_since is None else waiting_since
        gang = GangRun(name, roles, attempt, RoleState.WAITING, AttemptRecord(name, attempt, since), history=history)
        if waiting_since is None:
            self.journal.write("gang_attempt", gang=name, attempt=attempt, waiting_since=since)
            self.metrics.attempts.inc()
        gang.acquisition = self._acquisition(gang, now)
        self.log(f"gang {name} attempt {attempt}: waiting for {sum(r.instances for r in roles)} instance(s)")
        return gang

    def _acquisition(self, gang: GangRun, now: float) -> GangAcquisition:
        return GangAcquisition(gang.name, gang.roles, self.settings, self.rng, now, self.log,
                               self.metrics.selection_latency.observe)

    # ============================================================ heartbeat
    def heartbeat(self) -> None:
        """One round: decide, talk to the RM once, react."""
        if self.done:
            return
        now = self.now()
        for gang in self.gangs:
            if gang.state in (RoleState.WAITING, RoleState.ACQUIRING):
                self._plan(gang, now)
        request = self._request()
        try:
            response = self.rm.allocate(request)
        except WrongState as exc:
            ended = self._ended_application()
            if ended is not None:
                self.application_ended(ended)
            else:   # a newer AM attempt took over (the RM declared this one dead)
                self.log(f"the RM no longer accepts AM attempt {self.am_attempt}: {exc}; stopping")
                self._stop_quietly()
            return
        self._absorb(response, now)
        if self.done:
            return
        for gang in self.gangs:
            if gang.state is RoleState.ACQUIRING and gang.acquisition.complete:
                self._launch(gang, now)
        self._evaluate(now)
        self._update_metrics()

    def _plan(self, gang: GangRun, now: float) -> None:
        acq = gang.acquisition
        acq.plan(now, self._view_for_placement, lambda view, wanted: self._place(gang, view, wanted),
                 self._new_request_id)
        if acq.release_count > gang.record.releases:
            gang.record.releases = acq.release_count
            self.metrics.releases.inc()
            self.journal.write("released", gang=gang.name, attempt=gang.attempt, containers=list(acq.releases),
                               reason="partial hold timed out")
        if acq.reselections > gang.record.reselections:
            self.metrics.reselections.inc(acq.reselections - gang.record.reselections)
            gang.record.reselections = acq.reselections
        asking = acq.asks or acq.outstanding or acq.granted
        gang.state = RoleState.ACQUIRING if asking else RoleState.WAITING

    def _request(self) -> AllocateRequest:
        asks, cancels, releases = [], list(self._to_cancel), list(self._to_release)
        self._to_release.clear()
        self._to_cancel.clear()
        for gang in self.gangs:
            if gang.acquisition is not None:
                a, c, r = gang.acquisition.take_outbox()
                asks += a
                cancels += c
                releases += r
        return AllocateRequest(self.app_id, self.am_attempt, asks=tuple(asks), cancel=tuple(cancels),
                               releases=tuple(releases), progress=self._progress())

    def _absorb(self, response: AllocateResponse, now: float) -> None:
        owners = {rid: g for g in self.gangs if g.acquisition is not None for rid in g.acquisition.by_request}
        for container in response.allocated:
            gang = owners.get(container.request_id)
            if gang is None or not gang.acquisition.on_granted(container, now):
                self._to_release.append(container.container_id)
        for rejection in response.rejected:
            gang = owners.get(rejection.request_id)
            if gang is not None:
                gang.acquisition.on_rejected(rejection.request_id, rejection.reason)
                if gang.acquisition.never_reason:
                    self._finish("failed", f"gang {gang.name} can never be granted: {gang.acquisition.never_reason}")
                    return
        for pending in response.pending:
            gang = owners.get(pending.request_id)
            if gang is not None:
                gang.acquisition.on_pending(pending.request_id, pending.reason)
        for status in response.completed:
            self._container_finished(status.container_id, status.exit_status, status.diagnostics, now)

    def _container_finished(self, container_id: str, exit_status: int | None, diagnostics: str, now: float) -> None:
        found = self._running.pop(container_id, None)
        if found is not None:
            gang, task = found
            if gang is self._gang_named(gang.name) and task.state is TaskState.RUNNING:   # not an older attempt
                self._task_finished(gang, task, exit_status, diagnostics, now)
            return
        for gang in self.gangs:
            if gang.state is RoleState.ACQUIRING and gang.acquisition.on_lost(container_id):
                self.log(f"gang {gang.name}: granted container {container_id} was lost before it started "
                         f"({diagnostics}); selecting again")
                return
        # a container of an older attempt, or one given back: nothing to do

    def _gang_named(self, name: str) -> GangRun | None:
        return next((g for g in self.gangs if g.name == name), None)

    def _task_finished(self, gang: GangRun, task: TaskRecord, exit_status: int | None, diagnostics: str,
                       now: float) -> None:
        self._running.pop(task.container_id, None)
        task.exit_status = exit_status
        task.diagnostics = diagnostics
        task.finished_at = now
        task.state = TaskState.SUCCEEDED if exit_status == 0 else TaskState.FAILED
        if task.state is TaskState.FAILED:
            if exit_status is not None and exit_status < 0:   # the node or the RM, not the program
                self._failed_hosts.setdefault(task.role, set()).add(task.host)
            self.log(f"gang {gang.name} attempt {gang.attempt}: {task.name} on {task.host} failed with exit "
                     f"status {exit_status}" + (f" ({diagnostics})" if diagnostics else ""))
        self.journal.write("task_finished", gang=gang.name, attempt=gang.attempt, role=task.role, index=task.index,
                           state=task.state.value, exit_status=exit_status, diagnostics=diagnostics, finished_at=now)

    # ============================================================ placement
    def _pipeline_for(self, role: RoleSpec) -> SelectionPipeline:
        name = role.selector or self.selection.selector
        if name not in self._pipelines:
            self._pipelines[name] = SelectionPipeline(
                self.selection, get_selector(name, self.selection.candidate_nodes_factor))
        return self._pipelines[name]

    def _view(self) -> ClusterView:
        return view_from_nodes(self.rm.cluster_nodes())

    def _view_for_placement(self) -> ClusterView:
        view = self._view()
        for role, hosts in self._failed_hosts.items():
            for host in hosts:
                view.mark_failed(role, host)
        for gang in self.gangs:   # the per-node caps count our running instances
            for task in gang.tasks:
                if task.state is TaskState.RUNNING:
                    view.instances_of(task.role)[view.index(task.host)] += 1
        return view

    def _place(self, gang: GangRun, view: ClusterView, wanted: Mapping[str, Sequence[int]]) -> GangPlacement:
        return place_gang(view, gang.roles, self._pipeline_for, indices=wanted)

    def _new_request_id(self) -> int:
        self._next_request += 1
        return self._next_request

    # =============================================================== launch
    def _launch(self, gang: GangRun, now: float) -> None:
        """Every instance is granted: start them all now. A task the RM cannot start is a
        failed task: the ones already started run on until :meth:`_evaluate` ends the attempt
        in this same heartbeat, and the containers never started are given back."""
        gang.state = RoleState.LAUNCHING
        slots = gang.acquisition.in_order()
        placed = [PlacedTask(s.role, s.index, s.container.host,
                             label_ports(gang.acquisition.roles[s.role].ports, s.container.resource.port_ranges))
                  for s in slots]
        infos = [TaskInfo(rank, p.host, {label: ports[0] for label, ports in p.ports.items() if ports},
                          p.role, p.index) for rank, p in enumerate(placed)]
        token = self.barrier.open_attempt(self.job.name, gang.name, gang.attempt, infos,
                                          timeout_s=self.job.barrier_timeout_s)
        gang.barrier_open = True
        tasks: list[TaskRecord] = []
        shared = {**self.task_env, **gang_env(self.job, placed, gang.attempt, self.queue)}
        for rank, (slot, me) in enumerate(zip(slots, placed)):
            role = gang.acquisition.roles[slot.role]
            env = {**shared, **own_env(me), **self.barrier.task_env(self.job.name, gang.name, gang.attempt, rank)}
            launch = LaunchContext.of(["/bin/sh", "-c", _script(role.commands)], env)
            c = slot.container
            task = TaskRecord(slot.role, slot.index, rank, c.container_id, c.host,
                              tuple(indices_of(c.resource.gpu_mask)), infos[rank].ports, now)
            tasks.append(task)
            try:
                self.rm.start_container(c.container_id, launch)
            except RMError as exc:
                task.state, task.finished_at, task.diagnostics = TaskState.FAILED, now, exc.message
                self._to_release += [s.container.container_id for s in slots[rank:]]
                break
        gang.tasks = tasks
        self._running.update((t.container_id, (gang, t)) for t in tasks if t.state is TaskState.RUNNING)
        gang.state = RoleState.RUNNING
        gang.record.started_at = now
        gang.record.tasks = tasks
        self.journal.write("launched", gang=gang.name, attempt=gang.attempt, started_at=now, barrier_token=token,
                           tasks=[t.to_dict() for t in tasks])
        unlaunched = [t for t in tasks if t.launch_failed]
        if unlaunched:
            self.log(f"gang {gang.name} attempt {gang.attempt}: {_failure(unlaunched[0])}; the attempt fails")
            return
        self.metrics.gang_wait.observe(now - gang.record.waiting_since)
        self.log(f"gang {gang.name} attempt {gang.attempt}: started all {len(tasks)} task(s) after waiting "
                 f"{now - gang.record.waiting_since:.1f}s on {len({t.host for t in tasks})} host(s)")

    # ============================================================ decisions
    def _evaluate(self, now: float) -> None:
        succeeded: dict[str, int] = {}
        failed: dict[str, int] = {}
        unlaunched: list[TaskRecord] = []
        for gang in self.gangs:
            s, f = gang.counts()
            for k, v in s.items():
                succeeded[k] = succeeded.get(k, 0) + v
            for k, v in f.items():
                failed[k] = failed.get(k, 0) + v
            if f and gang.state is RoleState.RUNNING:   # only a failed task can be one never launched
                unlaunched += [t for t in gang.tasks if t.launch_failed]
        if unlaunched:   # a gang starts whole or not at all, whatever the completion policy says
            self._restart([self.job.role(name) for name in dict.fromkeys(t.role for t in unlaunched)], now)
            return
        outcome = self.job.outcome(succeeded, failed)
        if outcome == "succeeded":
            self._finish("succeeded", "every role completed" if not any(
                r.completion.succeeded(succeeded.get(r.name, 0)) for r in self.job.roles)
                else "a role reached its minSucceededInstances")
        elif outcome == "failed":
            failed_roles = [r for r in self.job.roles if r.completion.failed(failed.get(r.name, 0))]
            self._restart(failed_roles, now)

    def _restart(self, failed_roles: list[RoleSpec], now: float) -> None:
        names = {r.name for r in failed_roles}
        culprits = [g for g in self.gangs if names & {r.name for r in g.roles}]
        if self.job.retry.scope == "job":
            restart, limit = list(self.gangs), self.job.retry.attempts
        else:
            restart = culprits
            limit = min(r.retry.attempts for r in failed_roles)
        failures = [t for g in culprits for t in g.tasks if t.state is TaskState.FAILED]
        reason = "; ".join(_failure(t) for t in failures[:5])
        if len(failures) > 5:
            reason += f" and {len(failures) - 5} more"
        for gang in restart:
            outcome = "failed" if gang in culprits else "stopped"
            self._end_attempt(gang, outcome, reason if gang in culprits else f"restarted with the job: {reason}", now)
        # Attempts that failed count against the limit; one stopped by an interrupted run does not.
        if self.job.retry.scope == "job":
            failed_attempts = _failed_attempts(self.gangs)
        else:
            failed_attempts = max(_failed_attempts([g]) for g in culprits)
        if failed_attempts >= limit:
            self._finish("failed", f"attempt {failed_attempts} of {limit} failed: {reason}")
            return
        for i, gang in enumerate(self.gangs):
            if gang in restart:
                self.metrics.restarts.inc()
                self.log(f"gang {gang.name}: restarting as attempt {gang.attempt + 1} of {limit}")
                self.gangs[i] = self._new_gang(gang.name, gang.roles, gang.attempt + 1, gang.history)

    def _end_attempt(self, gang: GangRun, outcome: str, reason: str, now: float) -> None:
        """Fail the barrier first (waiters are told at once), then stop the tasks, then record."""
        if gang.barrier_open:
            if outcome == "succeeded":
                self.barrier.close_attempt(self.job.name, gang.name, gang.attempt)
            else:
                waiters = self.barrier.fail_attempt(self.job.name, gang.name, gang.attempt,
                                                    f"gang {gang.name} attempt {gang.attempt} ended ({outcome}): "
                                                    f"{reason}")
                self.log(f"gang {gang.name} attempt {gang.attempt}: barrier failed, {waiters} waiting task(s) "
                         f"told at once")
            gang.barrier_open = False
        for task in gang.tasks:
            if task.state is TaskState.RUNNING:
                self._stop(task.container_id)
                self._running.pop(task.container_id, None)
                task.state, task.finished_at, task.diagnostics = TaskState.STOPPED, now, "stopped: its attempt ended"
        if gang.acquisition is not None and gang.state in (RoleState.WAITING, RoleState.ACQUIRING):
            gang.acquisition.abandon()
            _asks, cancels, releases = gang.acquisition.take_outbox()
            self._to_release += releases
            self._to_cancel += cancels
        gang.record.ended_at, gang.record.outcome, gang.record.reason = now, outcome, reason
        gang.record.tasks = gang.tasks
        gang.history.append(gang.record)
        gang.state = RoleState.SUCCEEDED if outcome == "succeeded" else RoleState.FAILED
        self.journal.write("attempt_ended", record=gang.record.to_dict())

    def _stop(self, container_id: str) -> None:
        try:
            self.rm.stop_container(container_id)
        except RMError as exc:
            self.log(f"stopping {container_id}: {exc}")

    def _finish(self, outcome: str, reason: str, unregister: bool = True) -> None:
        now = self.now()
        for gang in self.gangs:
            if not gang.record.outcome:   # the attempts still open end with the job
                self._end_attempt(gang, "succeeded" if outcome == "succeeded" else "stopped",
                                  reason if outcome == "succeeded" else f"job {outcome}: {reason}", now)
        self.outcome, self.reason, self.done = outcome, reason, True
        self.journal.write("job_finished", outcome=outcome, reason=reason)
        self.log(f"job {self.job.name} {outcome}: {reason}")
        if unregister:
            try:
                self.rm.finish(self.app_id, self.am_attempt, "SUCCEEDED" if outcome == "succeeded" else "FAILED",
                               reason)
            except RMError as exc:
                self.log(f"unregistering from the RM: {exc}")
        self._update_metrics()
        self.close()

    def _stop_quietly(self) -> None:
        """This AM attempt was replaced (the RM declared it dead): stop without deciding anything.
        Its files stay open: should the application end before a new AM registers, this one
        records the RM's verdict (:meth:`application_ended`)."""
        self.done = True

    def close(self) -> None:
        """Close the log and the journal (the driver calls it when the run is over). An AM
        closed before its job finished records when it stopped, so a run that resumes the
        job later knows how long the interrupted attempts lasted."""
        if not self.done and not self.journal.closed:
            self.journal.write("am_stopped", reason="the run stopped before the job finished")
        self.log.close()
        self.journal.close()

    # ====================================================== ended from outside
    def _ended_application(self) -> ApplicationReport | None:
        """The RM's report of this application when the RM has ended it, else None."""
        try:
            report = self.rm.application_report(self.app_id)
        except RMError:
            return None
        return report if report.state.finished else None

    def application_ended(self, report: ApplicationReport) -> None:
        """The RM ended the application without this AM (a client killed it, or its AM attempts
        ran out): the job ends ``killed`` or ``failed`` with the reason the RM gave. The RM has
        already stopped every container; the tasks are recorded as stopped. Does nothing when
        the job already has an outcome."""
        if self.outcome is not None:
            return
        outcome = {AppState.KILLED: "killed", AppState.FINISHED: report.final_status.lower()}.get(report.state)
        if outcome not in ("killed", "succeeded", "failed"):
            outcome = "failed"
        reason = report.diagnostics or f"the ResourceManager ended {self.app_id} ({report.state.value})"
        self.log(f"the RM ended {self.app_id} ({report.state.value}): {reason}")
        self._finish(outcome, reason, unregister=False)

    # ===================================================== no progress possible
    def waiting_on_cluster(self) -> bool:
        """True when nothing this AM does by itself can move the job on: none of its tasks
        runs, and every gang not finished waits, holding and asking for nothing and not
        backing off, because its last placement found no room. Only a change from outside
        (a node coming back, another application's containers ending) can help it then.
        The driver, which knows whether any such change is still to come, decides whether to
        call :meth:`cannot_progress`."""
        if self.done or self._running:
            return False
        now = self.now()
        waiting = False
        for gang in self.gangs:
            if gang.state is RoleState.LAUNCHING:
                return False
            if gang.state in (RoleState.WAITING, RoleState.ACQUIRING):
                if not gang.acquisition.stalled(now):
                    return False
                waiting = True
        return waiting

    def cannot_progress(self, why: str) -> None:
        """The driver found that nothing still to come can change what this job waits for:
        the job fails, saying ``why`` and why each gang waits (:meth:`why_waiting`)."""
        waiting = "; ".join(f"gang {gang} is waiting: {reason}" for gang, reason in self.why_waiting().items())
        self._finish("failed", f"it can make no progress ({why}); {waiting}")

    # ============================================================ recovery
    def _recover(self, previous: JournalState, kept_containers) -> None:
        kept = {c.container_id for c in kept_containers}
        self.log(f"recovering from the journal of AM attempt(s) {previous.am_attempts}; the RM kept "
                 f"{len(kept)} running container(s)")
        if previous.outcome is not None:
            self._finish(previous.outcome, previous.reason)
            return
        known: set[str] = set()
        now = self.now()
        for number, names in enumerate(self.job.gangs):
            name = _gang_name(names)
            saved = previous.gangs.get(name)
            roles = self.job.gang_roles(number)
            if saved is None:
                self.gangs.append(self._new_gang(name, roles, 1, []))
                continue
            gang = self._new_gang(name, roles, saved.attempt, saved.history, waiting_since=saved.waiting_since)
            gang.record.releases = saved.releases
            if saved.launched is not None:
                gang.acquisition = None
                gang.tasks, gang.state = saved.launched, RoleState.RUNNING
                gang.record.started_at, gang.record.tasks = saved.started_at, gang.tasks
                self._running.update((t.container_id, (gang, t)) for t in gang.tasks if t.state is TaskState.RUNNING)
                for task in gang.tasks:
                    known.add(task.container_id)
                    if task.state is TaskState.RUNNING and task.container_id not in kept:
                        try:
                            status = self.rm.container_status(task.container_id)
                        except NotFound:
                            self._task_finished(gang, task, ExitStatus.LOST_ON_RM_RESTART,
                                                "the RM no longer knows its container", now)
                            continue
                        if status.state is not ContainerState.RUNNING:
                            self._task_finished(gang, task, status.exit_status, status.diagnostics or
                                                "ended while the AM was down", now)
                running = sum(1 for t in gang.tasks if t.state is TaskState.RUNNING)
                self.log(f"gang {name} attempt {gang.attempt}: recovered {len(gang.tasks)} task(s), "
                         f"{running} still running")
                self._reopen_barrier(gang, saved.barrier_token)
            self.gangs.append(gang)
        for cid in sorted(kept - known):   # started by a launch the journal never recorded
            self.log(f"stopping container {cid}: its gang's launch was not completed by the previous AM")
            self._stop(cid)
        self._evaluate(now)

    def _resume(self, previous: JournalState) -> None:
        """Carry on a job whose earlier run stopped (interrupted, killed, or the machine went
        down) under a new application. Its containers went with the RM of that run, so no
        task of it is running: an attempt that had started ends as interrupted and its gang
        starts again as the next attempt (an interruption is not a failure: it does not count
        against the retry limit); an attempt still waiting simply waits again."""
        self.journal.write("resumed", am_attempts=previous.am_attempts, app_id=previous.app_id)
        if previous.finished:   # the drivers report such a folder without starting an AM (tools.job_runner)
            self.gangs = recorded_gangs(self.job, previous)
            self._finish(previous.outcome, f"already finished in an earlier run: {previous.reason}")
            return
        self.log(f"resuming the job from the journal of an earlier run ({previous.app_id}, AM attempt(s) "
                 f"{previous.am_attempts}); the tasks it was running ended with it")
        for number, names in enumerate(self.job.gangs):
            name, roles = _gang_name(names), self.job.gang_roles(number)
            saved = previous.gangs.get(name)
            if saved is None:
                self.gangs.append(self._new_gang(name, roles, 1, []))
                continue
            history = saved.history
            ended = any(a.attempt == saved.attempt for a in history)
            if not ended and saved.launched is None:
                self.gangs.append(self._new_gang(name, roles, saved.attempt, history))
                continue
            if not ended:
                record = AttemptRecord(name, saved.attempt, saved.waiting_since, saved.started_at,
                                       ended_at=previous.last_time, outcome="stopped",
                                       reason="the run was interrupted: its tasks ended with it", tasks=saved.launched)
                for task in record.tasks:
                    if task.state is TaskState.RUNNING:
                        task.state, task.finished_at = TaskState.STOPPED, previous.last_time
                        task.diagnostics = "the run was interrupted"
                history.append(record)
                self.journal.write("attempt_ended", record=record.to_dict())
            self.log(f"gang {name}: attempt {saved.attempt} ended with the earlier run; "
                     f"starting attempt {saved.attempt + 1}")
            self.gangs.append(self._new_gang(name, roles, saved.attempt + 1, history))

    def _reopen_barrier(self, gang: GangRun, token: str | None) -> None:
        """The recovered attempt's barrier: still open when the coordinator outlived the
        AM (it belongs to the driver); otherwise opened again with the token its tasks
        already hold, so their next call is accepted."""
        try:
            self.barrier.task_env(self.job.name, gang.name, gang.attempt, 0)
        except KeyError:
            infos = [TaskInfo(t.rank, t.host, t.ports, t.role, t.index) for t in gang.tasks]
            try:
                self.barrier.open_attempt(self.job.name, gang.name, gang.attempt, infos, token=token,
                                          timeout_s=self.job.barrier_timeout_s)
            except ValueError as exc:
                # The coordinator outlived the AM and had already ended this attempt: the old AM
                # failed the barrier and died before it journaled the restart. The tasks were
                # told (or are told at their next call) and fail; their failures restart the gang.
                self.log(f"gang {gang.name} attempt {gang.attempt}: its barrier has already ended at the "
                         f"coordinator ({exc}); its tasks are told at their next barrier call")
                gang.barrier_open = False
                return
        gang.barrier_open = True

    # ============================================================== status
    def _progress(self) -> float:
        total = self.job.total_instances
        finished = sum(1 for g in self.gangs for t in g.tasks if t.state is not TaskState.RUNNING)
        return min(1.0, finished / total) if total else 1.0

    def _update_metrics(self) -> None:
        m = self.metrics
        m.pending_gangs.set(sum(1 for g in self.gangs if g.state in (RoleState.WAITING, RoleState.ACQUIRING)))
        counts = dict.fromkeys(CONTAINER_STATES, 0)
        for g in self.gangs:
            if g.acquisition is not None and g.state is RoleState.ACQUIRING:
                counts["requested"] += len(g.acquisition.outstanding)
                counts["allocated"] += len(g.acquisition.granted)
            for t in g.tasks:
                counts[t.state.value] += 1
        for state, n in counts.items():
            m.containers.labels(state).set(n)

    def role_states(self) -> dict[str, RoleState]:
        return {r.name: g.role_state(r) for g in self.gangs for r in g.roles}

    def history(self) -> list[AttemptRecord]:
        """Every attempt of every gang, finished ones first, in the order they ended."""
        return attempt_history(self.gangs)

    def why_waiting(self) -> dict[str, str]:
        """For each gang not running yet: why, in numbers (empty when it is just being granted)."""
        out = {}
        for g in self.gangs:
            if g.state in (RoleState.WAITING, RoleState.ACQUIRING) and g.acquisition is not None:
                acq = g.acquisition
                pending = [f"{s.name} on {s.placement.host}: {s.pending_reason}" for s in acq.outstanding
                           if s.pending_reason]
                granted = f"{len(acq.granted)}/{acq.total} granted"
                out[g.name] = acq.waiting_reason or "; ".join([granted, *pending[:3]])
        return out


def recorded_gangs(job: JobSpec, journal: JournalState) -> list[GangRun]:
    """The job's gangs as a journal left them, every attempt in their history: what a
    report of a finished run shows, without an AM."""
    gangs = []
    for number, names in enumerate(job.gangs):
        saved = journal.gangs.get(_gang_name(names))
        if saved is not None and saved.history:
            last = saved.history[-1]
            state = RoleState.SUCCEEDED if last.outcome == "succeeded" else RoleState.FAILED
            gangs.append(GangRun(last.gang, job.gang_roles(number), last.attempt, state, last,
                                 tasks=last.tasks, history=list(saved.history)))
    return gangs


def attempt_history(gangs: Sequence[GangRun]) -> list[AttemptRecord]:
    """Every attempt of every gang, finished ones first, in the order they ended."""
    ended = sorted((a for g in gangs for a in g.history), key=lambda a: (a.ended_at or 0, a.gang))
    current = [g.record for g in gangs if not g.record.outcome]
    return ended + current


def _gang_name(roles: Sequence[str]) -> str:
    return "+".join(roles)


def _failure(task: TaskRecord) -> str:
    """How a failed task failed, in one phrase."""
    if task.launch_failed:
        return f"task {task.name} could not be launched on {task.host}: {task.diagnostics}"
    return f"{task.name} exited with status {task.exit_status} on {task.host}"


def _failed_attempts(gangs: Sequence[GangRun]) -> int:
    """How many attempts of these gangs failed (gangs restarted together share attempt numbers)."""
    return len({a.attempt for g in gangs for a in g.history if a.outcome == "failed"})


def _script(commands: Sequence[str]) -> str:
    """OpenPAI runs a role's commands as one shell script; the first failing one fails the task."""
    return "set -e\n" + "\n".join(commands)
