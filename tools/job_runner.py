"""Drivers that run jobs through the AM on the RM simulator.

* :class:`SimulatedRuns` — virtual time: what a task does is the simulator's
  workload model's to say (it meets its gang at the simulation's in-process
  barrier, then lasts its simulated duration); a day of cluster time passes in
  moments, and the same inputs give the same run.
* :class:`LiveRuns` — real time: tasks are real local processes started by the
  RM's process NodeManager, and they meet at barriers served by a real gRPC
  coordinator inside the AM. The RM is the live RM ``gangmaster rm serve`` runs
  (:class:`~gangmaster.tools.rmsim.live_rm.LiveRM`), in this process.
* :class:`RemoteRuns` — real time against a separate ``gangmaster rm serve``
  over gRPC (``gangmaster am``): the AM and its barrier coordinator run here,
  the RM and the tasks there.

Each does what YARN does for an AM: submit the application, start the AM once it
is accepted, call its heartbeat on the clock, and start a new AM when the RM
declares the running one dead (``kill_am`` in a scenario, a missed heartbeat).
The new AM recovers the job from the journal in the same work folder. When the
RM ends the application instead (killed, AM attempts used up), the last AM
records the RM's verdict.

A work folder belongs to one job (:mod:`gangmaster.tools.work_folder`). Running
the job again into a folder that holds an earlier run of it:

* the earlier run finished (succeeded or failed): nothing is submitted; the
  run reports that outcome from the journal (:attr:`JobRun.finished_earlier`);
* it did not finish (interrupted, killed, the machine went down): a new
  application resumes the job from the journal: the attempts that were running
  end as interrupted and start again as new attempts
  (:func:`gangmaster.am.core.recovery.resume`), and the AM's clock goes on from the
  journal's last record. Its tasks went with its RM when the RM was this
  process's; a separate RM (:class:`RemoteRuns`) may still run them (the earlier
  AM was ``kill -9``'d): the earlier application is killed there first, and the
  new one starts once every one of its tasks has stopped, so no task ever runs
  twice at once.

In virtual time a run that can never progress is stopped as soon as that is
certain (:meth:`SimulatedRuns.run`).
"""
from __future__ import annotations

import contextlib
import functools
import gc
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from gangmaster.am.spec.am_settings import AMSettings
from gangmaster.am.spec.jobspec_model import JobSpec
from gangmaster.am.core.gang_run import PENDING
from gangmaster.am.core.master import ApplicationMaster
from gangmaster.am.ops.metrics import AMMetrics, MetricsEndpoint
from gangmaster.am.core.recovery import ENDED_WITH_THE_RUN
from gangmaster.am.core.reservation_plan import declared_gang
from gangmaster.protocol.rm_client import InProcessRMClient, RMClient
from gangmaster.protocol.rm_protocol import ApplicationSubmission, NotFound, RMError, WrongState
from gangmaster.am.ops.run_report import RecordedRun, RunResult
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.settings import SelectionSettings

from .occupancy import rm_occupants, simulated_occupants
from .rmsim.clock import RealTimeLoop
from .rmsim.core import ResourceManager, RMEvent
from .rmsim.live_rm import LiveRM
from .rmsim.preemption_monitor import PreemptionMonitor
from .rmsim.queues import Queue
from .rmsim.rm_settings import RMSettings
from .rmsim.scenario import Scenario
from .rmsim.simulation import Simulation
from .work_folder import JobIdentity, claim

#: A crashed AM is started again this long after the RM declares it dead (seconds).
AM_RESTART_DELAY_S = 2.0
#: How long a rerun waits for the tasks of the earlier application it killed at a separate RM
#: to stop (the RM's kill grace, then SIGKILL, is far shorter) before it refuses to start.
EARLIER_TASKS_STOP_S = 300.0
#: The signals that end a live run early: its tasks are stopped first (see LiveRuns.run).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

log = logging.getLogger(__name__)


class RunCannotGoOn(Exception):
    """An AM's run cannot go on, for the reason its message says (a fact of the run, such
    as an RM that lost the application, not a bug: no traceback)."""


@dataclass
class JobRun:
    """One job submitted to the RM, and every AM that has served it."""

    job: JobSpec
    app_id: str
    work_dir: Path
    queue: str
    ams: list[ApplicationMaster] = field(default_factory=list)
    metrics: AMMetrics = field(default_factory=AMMetrics)
    clock_offset: float = 0.0                  # the AMs' clock goes on from an earlier run's journal
    earlier_tasks: str = ENDED_WITH_THE_RUN    # what became of the tasks of the earlier run it resumes
    finished_earlier: RecordedRun | None = None  # the folder's run had already finished: nothing was run

    @property
    def am(self) -> ApplicationMaster:
        return self.ams[-1]

    @property
    def result(self) -> RunResult:
        """What to report: the AM that served the job last, or the earlier run's record."""
        return self.finished_earlier if self.finished_earlier is not None else self.am

    @property
    def done(self) -> bool:
        if self.finished_earlier is not None:
            return True
        return bool(self.ams) and self.am.done and self.am.outcome is not None

    @property
    def outcome(self) -> str | None:
        if self.finished_earlier is not None:
            return self.finished_earlier.outcome
        return self.am.outcome if self.ams else None


class _AMDriver:
    """What every driver shares: submitting jobs, and starting their AMs and a new AM
    when the RM gives an application a new attempt (:meth:`_restart_later`)."""

    def __init__(self, client: RMClient, clock, settings: AMSettings, selection: SelectionSettings,
                 echo: Callable[[str], None] | None):
        self.client, self.clock = client, clock
        self.settings, self.selection, self.echo = settings, selection, echo
        self.runs: list[JobRun] = []
        self.prefix_lines = False          # start each progress line with the job's name (several jobs)
        self.cluster_name = "the cluster"  # how the cluster is named in a work folder's identity
        self.metrics: MetricsEndpoint | None = None   # with settings.metrics_port: every job's metrics
        self._timers: dict[str, object] = {}

    def cluster_specs(self) -> list[NodeSpec]:
        """The RM's nodes, for a work folder's identity."""
        raise NotImplementedError

    def identity(self, job: JobSpec) -> JobIdentity:
        return JobIdentity.of(job, self.cluster_specs(), self.cluster_name)

    def check_work_dir(self, job: JobSpec, work_dir: str | Path) -> None:
        """Refuse (``WorkFolderTaken``, a ConfigError) a folder that holds another job's run;
        claims a new one. :meth:`submit` checks too; call this first to check every job of a
        run before submitting any."""
        claim(work_dir, self.identity(job))

    def submit(self, job: JobSpec, work_dir: str | Path, queue: str = "default") -> JobRun:
        work_dir = Path(work_dir)
        earlier = claim(work_dir, self.identity(job))
        if earlier.finished:
            run = JobRun(job, earlier.app_id, work_dir, queue, finished_earlier=RecordedRun.of(job, earlier))
            self.runs.append(run)
            return run
        earlier_tasks = self._stop_earlier(earlier.app_id, work_dir) if earlier.app_id else None
        gang, duration_s = declared_gang(job)   # (what a reserving queue plans for it)
        app_id = self.client.submit(ApplicationSubmission(
            job.name, queue, max_attempts=self.settings.max_am_attempts, keep_containers_across_attempts=True,
            priority=job.priority, gang=gang, expected_duration_s=duration_s))
        run = JobRun(job, app_id, work_dir, queue, clock_offset=earlier.last_time)
        if earlier_tasks is not None:
            run.earlier_tasks = earlier_tasks
        self.runs.append(run)
        self._serve_metrics(run)
        self._start_am(run)
        return run

    def _serve_metrics(self, run: JobRun) -> None:
        """With ``settings.metrics_port``: ``run``'s metrics, diagnoses and status on this
        driver's one endpoint (served from the first run on; each run labelled job_name and app_id)."""
        if self.settings.metrics_port is None:
            return
        if self.metrics is None:
            self.metrics = MetricsEndpoint()
            self.metrics.serve(self.settings.metrics_port, self.settings.metrics_host)
        self.metrics.add(run.metrics, why=lambda: self._why_report(run), attempts=lambda: self._attempts(run),
                         job_name=run.job.name, app_id=run.app_id)

    def _stop_earlier(self, app_id: str, work_dir: Path) -> str | None:
        """Before an unfinished earlier run into ``work_dir`` (application ``app_id``) is
        resumed: make sure none of its tasks runs on, and say what became of them (None:
        they ended with that run, its RM being this process's)."""
        return None

    def _why_report(self, run: JobRun) -> dict:
        """What ``/why`` says of ``run`` (asked from the endpoint's thread: under the clock's
        lock when it has one, so the AM does not change while it is read)."""
        lock = getattr(self.clock, "lock", None)
        with lock if lock is not None else contextlib.nullcontext():
            if not run.ams:
                return {"job": run.job.name, "app_id": run.app_id, "outcome": run.outcome, "waiting": {}}
            return run.am.why_report()

    def _attempts(self, run: JobRun) -> list[dict]:
        """Every attempt of ``run``'s gangs so far, for the status page (under the clock's
        lock, as :meth:`_why_report`)."""
        lock = getattr(self.clock, "lock", None)
        with lock if lock is not None else contextlib.nullcontext():
            return [a.to_dict() for a in run.result.history()] if run.ams or run.finished_earlier else []

    @property
    def metrics_url(self) -> str:
        """Where the metrics are served ("" when they are not)."""
        return self.metrics.url if self.metrics is not None else ""

    def metrics_url_of(self, run: JobRun) -> str:
        """Where ``run``'s metrics are served ("" when they are not): this driver's one endpoint."""
        return self.metrics_url

    def _start_am(self, run: JobRun) -> None:
        if run.ams:   # a restart: the application may have ended while no AM was running
            report = self.client.application_report(run.app_id)
            if report.state.finished:
                run.am.application_ended(report)
                return
        echo = None
        if self.echo is not None:
            prefix = f"{run.job.name} ({run.app_id}): " if self.prefix_lines else ""
            echo = (lambda line, p=prefix: self.echo(p + line))
        now = self.clock.now if not run.clock_offset else (lambda: self.clock.now() + run.clock_offset)
        extras = self._am_extras(run)
        am = ApplicationMaster(run.job, self.client, run.app_id, now, run.work_dir,
                               settings=self.settings, selection=self.selection, metrics=run.metrics,
                               echo=echo, earlier_tasks=run.earlier_tasks, **extras)
        run.ams.append(am)
        run.metrics.watch(am.gauge_values)   # (the scrape reads what the AM serving the job holds)
        if "barrier" in extras:   # the job's barrier calls its coordinator holds (its barriers are the app's)
            run.metrics.watch_barrier(functools.partial(extras["barrier"].waiting_tasks, run.app_id))
        self._timers[run.app_id] = self.clock.every(self.settings.heartbeat_s, lambda: self._beat(am))

    def _beat(self, am: ApplicationMaster) -> None:
        """What the clock calls at each heartbeat of ``am``."""
        self._heartbeat(am)

    def _heartbeat(self, am: ApplicationMaster) -> None:
        am.heartbeat()

    def _am_extras(self, run: JobRun) -> dict:
        return {}

    def _restart_later(self, app_id: str) -> None:
        """The RM declared the application's AM dead: stop its heartbeats and start a new AM
        (which recovers the job from the journal) after :data:`AM_RESTART_DELAY_S`."""
        for run in self.runs:
            if run.app_id == app_id:
                timer = self._timers.pop(run.app_id, None)
                if timer is not None:
                    self.clock.cancel(timer)
                self._timers[run.app_id] = self.clock.call_later(AM_RESTART_DELAY_S, self._start_am, run)

    @property
    def all_done(self) -> bool:
        return all(r.done for r in self.runs)

    def close(self) -> None:
        for timer in self._timers.values():
            self.clock.cancel(timer)
        self._timers.clear()
        for run in self.runs:
            for am in run.ams:
                am.close()
        if self.metrics is not None:
            self.metrics.stop()


class _Runs(_AMDriver):
    """Drivers whose RM core runs in this process: the core's events tell when the RM
    declared an AM dead."""

    def __init__(self, core: ResourceManager, client: InProcessRMClient, clock, settings: AMSettings,
                 selection: SelectionSettings, echo: Callable[[str], None] | None):
        super().__init__(client, clock, settings, selection, echo)
        self.core = core
        core.subscribe(self._on_event, kinds=("attempt_failed",))
        #: the RM's preemption monitor (``rm.preemption``; None: off, nothing preempts but a scenario)
        self.preemption: PreemptionMonitor | None = None

    def monitor_preemption(self, grace_s: float) -> None:
        """Turn the RM's preemption monitor on: after each heartbeat, a gang of that AM that
        waits for room preempts lower-priority gangs if that makes its room (.preemption_monitor)."""
        self.preemption = PreemptionMonitor(self.core, grace_s, self.echo)

    def _start_am(self, run: JobRun) -> None:
        super()._start_am(run)
        if self.preemption is not None and run.ams:   # its diagnosis says whom it will preempt
            run.am.why.preemption = self.preemption.outlook

    def _heartbeat(self, am: ApplicationMaster) -> None:
        am.heartbeat()
        self._preempt_for(am)

    def _preempt_for(self, am: ApplicationMaster) -> None:
        """The monitor's look at ``am``'s gangs waiting for room, after its heartbeat."""
        if self.preemption is None:
            return
        if am.done or not any(g.state in PENDING for g in am.gangs):
            self.preemption.started(am.app_id)
            return
        for gang in am.dispatch.waiting_for_room(am.now()):
            if self.preemption.preempt_for(am.app_id, gang.roles, am.placement.cluster.view,
                                           am.placement.pipeline_for, self.core.clock.now()):
                return

    def cluster_specs(self) -> list[NodeSpec]:
        return self.core.ledger.specs

    def _on_event(self, event: RMEvent) -> None:
        if event.kind == "attempt_failed":   # the RM calls us inside its own call: act after it returns
            self._restart_later(event.app_id)


class SimulatedRuns(_Runs):
    """Jobs on the simulator in virtual time."""

    def __init__(self, specs: list[NodeSpec], settings: AMSettings | None = None,
                 selection: SelectionSettings | None = None, queues: list[Queue] | None = None,
                 scenario: Scenario | None = None, echo: Callable[[str], None] | None = None,
                 scheduling_interval_s: float | None = None, allocation_expiry_s: float | None = None):
        self.sim = Simulation(specs, queues, scenario, scheduling_interval_s=scheduling_interval_s,
                              allocation_expiry_s=allocation_expiry_s)
        self._seen: dict[int, int] = {}   # id(am) -> the RM's version its last heartbeat saw, if it changed nothing
        super().__init__(self.sim.core, self.sim.client, self.sim.loop, (settings or AMSettings()).for_virtual_time(),
                         selection or SelectionSettings(), echo)

    def submit(self, job: JobSpec, work_dir: str | Path, queue: str = "default") -> JobRun:
        self.sim.workload.add_job(job)   # before its AM can launch a task
        return super().submit(job, work_dir, queue)

    def _am_extras(self, run: JobRun) -> dict:
        return {"barrier": self.sim.barrier, "occupants": lambda: simulated_occupants(self.sim, run.app_id)}

    def run(self) -> bool:
        """Run until every job is done or ``max_virtual_time_s`` passes; True when all are done.

        A job that can make no progress fails as soon as that is certain: every AM still
        running waits on the cluster (:meth:`ApplicationMaster.waiting_on_cluster`) as it is
        now, and the clock holds nothing but heartbeats: no task will end, no scenario step
        or AM restart is to come. Nothing can change what they wait for, so waiting longer
        would only burn heartbeats."""
        loop, limit = self.sim.loop, self.settings.max_virtual_time_s
        # What exists now (the cluster, the jobs, their AMs) lives through the run: the
        # collector need not scan it again at each of its full passes (a story-3 run makes
        # several, ~40% of the run's time). It is handed back to the collector at the end.
        gc.freeze()
        try:
            while not self.all_done:
                next_time = loop.next_time()
                if next_time is None or next_time > limit:
                    break
                loop.step()
                if self._stuck():
                    for run in self.runs:
                        if not run.done:
                            run.am.cannot_progress("no task will end and no event is scheduled")
        finally:
            gc.unfreeze()
        self.close()
        return self.all_done

    def _heartbeat(self, am: ApplicationMaster) -> None:
        before = self.core.version
        am.heartbeat()
        self._preempt_for(am)
        if self.core.version == before:   # it saw the cluster as it still is
            self._seen[id(am)] = before
        else:
            self._seen.pop(id(am), None)

    def _stuck(self) -> bool:
        waiting = [run.am for run in self.runs if not run.done]
        version = self.core.version   # the cheap test first: this runs after every event
        return (bool(waiting) and all(self._seen.get(id(am)) == version for am in waiting)
                and all(am.waiting_on_cluster() for am in waiting) and not self.sim.loop.has_one_shot_calls())


class _RealTime:
    """What the real-time drivers (:class:`LiveRuns`, :class:`RemoteRuns`) share: a real
    gRPC barrier coordinator for the tasks, the wait for the jobs (ended early by SIGTERM,
    SIGINT or a timeout) and the shutdown that kills at the RM every job not done.

    Nothing a run starts outlives it: :meth:`run` returns early on SIGTERM or SIGINT
    (:attr:`interrupted` says which) or when an AM fails (:attr:`failure` says how), and
    :meth:`shutdown` then has the RM stop every task's processes."""

    def _start_coordinator(self, barrier_config, taking_over: bool = False) -> None:
        """Start the barrier coordinator, and catch the stop signals from now on: one that
        arrives before :meth:`run` (while a job is submitted) ends it at once, and the
        application is still killed at the RM. ``taking_over``: a previous AM's tasks may
        call it before the AMs started here reopen their barriers; until :meth:`run`
        begins, such calls are told to come back, not refused
        (:meth:`~gangmaster.am.barrier.coordinator.BarrierCoordinator.taking_over`)."""
        from gangmaster.am.barrier.config import BarrierConfig
        from gangmaster.am.barrier.cq_server import new_barrier_server

        self.barrier = new_barrier_server(barrier_config or BarrierConfig.load())
        self.barrier.coordinator.taking_over(taking_over)
        self.barrier.start()
        self._finished = threading.Event()
        self.interrupted: signal.Signals | None = None   # the signal that ended run() early
        self.failure: str | None = None   # how an AM's heartbeat failed, which ended run() early
        self.timed_out = False
        self.stopped_tasks = 0     # containers whose processes shutdown() had to stop
        self.not_killed: dict[str, str] = {}   # app id -> why shutdown() could not kill it at the RM
        self._previous_handlers: dict = {}
        self._catch_stop_signals()

    def _am_extras(self, run: JobRun) -> dict:
        # Tasks run with this Python first on PATH, so a job's `python -m ...` finds gangmaster.
        path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
        return {"barrier": self.barrier,
                "task_env": {"PATH": path, "GANGMASTER_OUTPUT_DIR": str(run.work_dir / "output")}}

    def submit(self, job: JobSpec, work_dir: str | Path, queue: str = "default") -> JobRun:
        with self.clock.lock:
            return super().submit(job, work_dir, queue)

    def _beat(self, am: ApplicationMaster) -> None:
        """A heartbeat on the clock's thread: an AM that fails there would beat no more and
        its job never end (the run would sit until --timeout), so it ends the run, saying why."""
        try:
            self._heartbeat(am)
        except RunCannotGoOn as exc:
            self._end_early(am, str(exc))
        except Exception as exc:
            log.error("the AM of %s (%s) failed", am.job.name, am.app_id, exc_info=True)
            self._end_early(am, f"the AM of job {am.job.name} ({am.app_id}) failed: {type(exc).__name__}: {exc}")

    def _end_early(self, am: ApplicationMaster, why: str) -> None:
        """``am`` beats no more, and the run ends (:meth:`run` returns), saying ``why``."""
        timer = self._timers.pop(am.app_id, None)
        if timer is not None:
            self.clock.cancel(timer)
        self.failure = self.failure or why

    def run(self, timeout_s: float | None = None) -> bool:
        """Wait until every job is done, ``timeout_s`` passes, or SIGTERM or SIGINT
        arrives (or arrived since the driver was built); True when all are done. Call
        :meth:`shutdown` afterwards: the signals stay caught until it has stopped every task.
        Every AM has started by now, its recovered barriers reopened: a call naming an
        attempt the coordinator does not know is refused from now on."""
        self.barrier.coordinator.taking_over(False)
        watcher = self.clock.every(0.05, self._check_done)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            while not self._finished.wait(0.1):
                if self.interrupted is not None or self.failure is not None:
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    self.timed_out = True
                    break
        finally:   # also when interrupted: no AM may act on the shutdown that follows
            self.clock.cancel(watcher)
            with self.clock.lock:
                self.close()
        return self._finished.is_set()

    def _check_done(self) -> None:
        if self.all_done:
            self._finished.set()

    def _catch_stop_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread() or self._previous_handlers:
            return                          # signal handlers belong to the main thread
        for sig in STOP_SIGNALS:
            self._previous_handlers[sig] = signal.signal(sig, self._on_stop_signal)

    def _on_stop_signal(self, signum, _frame) -> None:
        self.interrupted = self.interrupted or signal.Signals(signum)

    def shutdown(self) -> None:
        """End the run: every job not done is killed at the RM (saying why), so the RM
        stops its tasks' processes (SIGTERM, then SIGKILL after the kill grace); then the
        RM side of the run ends (:meth:`_stop_rm`) and the coordinator stops. The AMs are
        not told: to their journal the run was interrupted, and it can be resumed."""
        why = (f"the run was interrupted by {self.interrupted.name}" if self.interrupted is not None
               else "the run timed out" if self.timed_out
               else f"the run was stopped: {self.failure}" if self.failure is not None else "the run was stopped")
        with self.clock.lock:
            for run in self.runs:
                if not run.done:
                    try:
                        self.client.kill(run.app_id, why)
                    except RMError as exc:   # best effort on the way out (a remote RM may be gone)
                        log.warning("could not kill %s at the RM: %s", run.app_id, exc.message)
                        self.not_killed[run.app_id] = exc.message
        self._stop_rm()
        self.barrier.stop()
        for sig, handler in self._previous_handlers.items():
            signal.signal(sig, handler)
        self._previous_handlers = {}

    def _stop_rm(self) -> None:
        raise NotImplementedError


class LiveRuns(_RealTime, _Runs):
    """Jobs on the live RM (:class:`~gangmaster.tools.rmsim.live_rm.LiveRM`, as
    ``gangmaster rm serve`` builds it) in this process: real time, real task processes,
    a real barrier coordinator. The AM's heartbeats run on the RM clock's thread, under
    the RM's lock, exactly as the simulated ones do on the virtual loop.

    :meth:`shutdown` stops every task's processes (gone when it returns; :attr:`stopped_tasks`
    counts them); if this process dies without a chance to (``kill -9``), every task's
    supervisor sees it and stops its task (see
    :class:`~gangmaster.tools.rmsim.nodemanager.ProcessNodeManager`)."""

    def __init__(self, specs: list[NodeSpec], work_dir: str | Path, settings: AMSettings | None = None,
                 selection: SelectionSettings | None = None, queues: list[Queue] | None = None,
                 barrier_config=None, rm_settings: RMSettings | None = None, scenario: Scenario | None = None,
                 echo: Callable[[str], None] | None = None):
        self.live = LiveRM.from_settings(specs, queues, rm_settings or RMSettings(),
                                         work_dir=Path(work_dir) / "tasks", scenario=scenario)
        self.node_manager = self.live.node_manager
        self._start_coordinator(barrier_config)
        super().__init__(self.live.core, InProcessRMClient(self.live.core), self.live.clock,
                         settings or AMSettings(), selection or SelectionSettings(), echo)

    def _am_extras(self, run: JobRun) -> dict:
        return {**super()._am_extras(run), "occupants": lambda: rm_occupants(self.live.core, run.app_id)}

    def _stop_rm(self) -> None:
        self.stopped_tasks = self.live.stop()


def _same_port(barrier_config, port_file: Path):
    """The barrier configuration, on the port an earlier coordinator wrote to ``port_file``
    (when the configuration names none and that port is free: else as configured)."""
    from dataclasses import replace

    from gangmaster.am.barrier.config import BarrierConfig
    from gangmaster.protocol.grpc_security import ListenError, check_bindable

    config = barrier_config or BarrierConfig.load()
    try:
        port = int(port_file.read_text())
    except (OSError, ValueError):
        return config
    if config.port:
        return config
    try:
        check_bindable("0.0.0.0", port)
    except ListenError:                  # taken by now: any free port, as configured
        return config
    return replace(config, port=port)


class RemoteRuns(_RealTime, _AMDriver):
    """Jobs on a separate RM process (``gangmaster rm serve``) reached over gRPC, YARN's
    shape: the AM runs in this process on its own real-time clock, with a real barrier
    coordinator its tasks reach on this machine; the tasks are processes the RM's
    NodeManager starts.

    No event stream comes from a remote RM: an AM learns that the RM gave its
    application a new attempt when its heartbeat is refused (it stops without deciding
    anything, ``done`` with no outcome), and a new AM is started then, as
    :class:`LiveRuns` does on the RM's event. A heartbeat that cannot reach the RM is
    said once and tried again at the next one, unless the RM no longer knows the
    application (an RM restarted without its state): that ends the run, as nothing
    the AM can do brings the application back."""

    def __init__(self, client: RMClient, settings: AMSettings | None = None,
                 selection: SelectionSettings | None = None, barrier_config=None,
                 echo: Callable[[str], None] | None = None, port_file: Path | None = None):
        """``port_file``: where the coordinator's port is kept, so that the next AM of the same
        folder (a rerun, YARN's next attempt) listens where the running tasks look for it."""
        self._start_coordinator(_same_port(barrier_config, port_file) if port_file else barrier_config,
                                taking_over=port_file is not None and port_file.exists())
        if port_file:
            port_file.write_text(self.barrier.address.rsplit(":", 1)[1])
        super().__init__(client, RealTimeLoop(threading.RLock()), settings or AMSettings(),
                         selection or SelectionSettings(), echo)
        self._unreachable = ""   # what the last failed heartbeat said; "" while the RM answers

    rm_name = "the RM"   # how messages name the RM
    restarts_replaced = True
    """Whether this process starts the AM of an application's new attempt itself. False where
    a replaced attempt's successor is another process's (Slurm: a rerun takes it back)."""

    def cluster_specs(self) -> list[NodeSpec]:
        return [node.spec for node in self.client.cluster_nodes()]

    def _heartbeat(self, am: ApplicationMaster) -> None:
        try:
            am.heartbeat()
        except RMError as exc:
            if isinstance(exc, NotFound) and not self._knows(am.app_id):
                raise RunCannotGoOn(f"{self.rm_name} no longer knows application {am.app_id} (it restarted "
                                    "without --state?)") from None
            if exc.message != self._unreachable and self.echo is not None:
                self.echo(f"{self.rm_name} did not answer a heartbeat ({exc.message}); trying again")
            self._unreachable = exc.message
            return
        if self._unreachable and self.echo is not None:
            self.echo(f"{self.rm_name} answers again")
        self._unreachable = ""
        if self.restarts_replaced and am.done and am.outcome is None:   # replaced: the RM gave it a new attempt
            self._restart_later(am.app_id)

    def _stop_earlier(self, app_id: str, work_dir: Path) -> str | None:
        """The earlier run's AM may have died (``kill -9``) while this RM runs its tasks on:
        kill its application here and wait until every one of its tasks has stopped, so
        the resumed job's new attempts never run beside them."""
        try:
            report = self.client.application_report(app_id)
        except NotFound:          # an RM restarted without its state: the tasks ended with it
            return None
        if report.state.finished and not report.stopping_containers:
            return None
        running = report.running_containers + report.stopping_containers
        killed = not report.state.finished
        if killed:
            self.client.kill(app_id, f"its AM is gone: a new run into {work_dir} resumes the job")
        if self.echo is not None:
            self.echo(f"the earlier run's application {app_id} was still at {self.rm_name} with {running} "
                      f"task(s) running; killed it there, and waiting for them to stop" if killed else
                      f"the earlier run's application {app_id} has ended at {self.rm_name}; waiting for its "
                      f"{running} task(s) to stop")
        deadline = time.monotonic() + EARLIER_TASKS_STOP_S
        while self.client.application_report(app_id).stopping_containers:
            if time.monotonic() >= deadline:
                raise WrongState(f"the {running} task(s) of the earlier run's application {app_id} had not stopped "
                                 f"{EARLIER_TASKS_STOP_S:g} s after it was killed; not starting the job again "
                                 "while they may run")
            if self.interrupted is not None:
                break
            time.sleep(0.1)
        return f"were killed at {self.rm_name} with {app_id} before this run started" if killed else None

    def _knows(self, app_id: str) -> bool:
        """Whether the RM still knows ``app_id`` (True when it cannot be asked: that is
        a transient failure, tried again at the next heartbeat)."""
        try:
            self.client.application_report(app_id)
        except NotFound:
            return False
        except RMError:
            pass
        return True

    def _stop_rm(self) -> None:
        self.clock.stop()
