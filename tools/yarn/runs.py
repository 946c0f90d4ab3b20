"""Jobs through the AM on a YARN cluster (``gangmaster run JOB.yaml --rm yarn``).

Unlike ``--live`` and Slurm, the AM does not run in this process: each job is a YARN
application whose AM container runs the gangmaster AM (:mod:`.am_container`), its
barrier coordinator with it, its journal and log in the job's work folder. This process
submits the application over the RM's REST API, follows the AM's log (the progress
lines), waits for the application to end, and reports the job from the journal: the same
report as every other run.

A work folder belongs to one job, as for every run. Running the job again into its
folder: a run that finished is reported; one whose application YARN still runs (this
process was killed, not the application) is followed again; one whose application
ended without the job ending is resumed by a new application (its AM resumes the
journal). Ctrl-C, SIGTERM or ``--timeout`` kill the application: YARN stops every
container. If the AM container dies, YARN starts the next AM attempt itself, which
takes the running tasks back (see :mod:`.am_container`).
"""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from gangmaster.am.spec.am_settings import AMSettings
from gangmaster.am.core.journal import JOURNAL_FILE, read_records, read_state
from gangmaster.am.spec.jobspec_model import JobSpec
from gangmaster.protocol.rm_protocol import ApplicationSubmission, AppState, NotFound, RMError
from gangmaster.am.ops.run_report import RecordedRun

from ..job_runner import STOP_SIGNALS, JobRun
from ..work_folder import JobIdentity, claim
from .am_container import METRICS_URL_FILE, handed_on
from .client import YarnRMClient, shell_value
from .rest import AMSpec
from .target import YarnTarget

POLL_S = 0.5
AM_MEMORY_MB = 256
AM_LOG = "am-container.log"


@dataclass
class YarnAMResult:
    """What a YARN run's AM left: its journal's record of the job, read by this process
    (the AM ran in its container); ``done`` once YARN ended the application."""

    recorded: RecordedRun
    done: bool

    def __getattr__(self, name):
        return getattr(self.recorded, name)

    @property
    def job(self) -> JobSpec:
        return self.recorded.job

    @property
    def app_id(self) -> str:
        return self.recorded.app_id

    @property
    def outcome(self) -> str | None:
        return self.recorded.outcome

    @property
    def reason(self) -> str:
        return self.recorded.reason


class YarnRuns:
    """Jobs on a YARN cluster: submitted, followed and reported from here (module docstring)."""

    rm_name = "YARN"

    def __init__(self, target: YarnTarget, settings: AMSettings, echo: Callable[[str], None] | None = None,
                 am_options: list[str] | None = None, cluster_file: str | None = None,
                 client: YarnRMClient | None = None):
        self.target, self.settings, self.echo = target, settings, echo
        self.client = client or YarnRMClient(target)
        self.am_options = list(am_options or [])
        self.cluster_file = cluster_file
        self.runs: list[JobRun] = []
        self.prefix_lines = False
        self.metrics_urls: dict[str, str] = {}   # app id -> where its AM serves its metrics (--metrics-port)
        self.report_json = False                 # the report is JSON on stdout: "metrics: URL" goes to stderr
        self.interrupted: signal.Signals | None = None
        self.timed_out = False
        self._log_read: dict[Path, int] = {}
        self._previous_handlers: dict = {}
        self._catch_stop_signals()

    # ---------------------------------------------------------------- submit
    def identity(self, job: JobSpec) -> JobIdentity:
        return JobIdentity.of(job, [n.spec for n in self.client.cluster_nodes()], self.target.name)

    def check_work_dir(self, job: JobSpec, work_dir: Path) -> None:
        claim(work_dir, self.identity(job))

    def submit(self, job: JobSpec, work_dir: Path, queue: str = "default") -> JobRun:
        work_dir = Path(work_dir).resolve()
        earlier = claim(work_dir, self.identity(job))
        if earlier.finished:
            run = JobRun(job, earlier.app_id, work_dir, queue)
            run.ams.append(YarnAMResult(RecordedRun.of(job, earlier), True))
            run.finished_earlier = run.ams[-1].recorded
            self.runs.append(run)
            return run
        if earlier.app_id and self._still_running(earlier.app_id):
            self._say(f"following application {earlier.app_id} of the earlier run into {work_dir} (YARN still runs it)")
            run = JobRun(job, earlier.app_id, work_dir, queue)
            self.runs.append(run)
            return run
        state = work_dir / "yarn"
        state.mkdir(parents=True, exist_ok=True)
        (state / METRICS_URL_FILE).unlink(missing_ok=True)   # (an earlier application's AM's)
        job_file = state / "job.yaml"
        shutil.copyfile(job.source, job_file)
        self.client.am_spec = lambda submission: self._am_spec(submission, job_file, work_dir)
        app_id = self.client.submit(ApplicationSubmission(
            job.name, queue, max_attempts=self.settings.max_am_attempts, keep_containers_across_attempts=True,
            priority=job.priority))
        self._say(f"submitted {job.name} as YARN application {app_id} ({self.target.rest}/cluster/app/{app_id})")
        run = JobRun(job, app_id, work_dir, queue)
        self.runs.append(run)
        return run

    def _still_running(self, app_id: str) -> bool:
        try:
            return not self.client.application_report(app_id).state.finished
        except NotFound:
            return False

    def _am_spec(self, submission: ApplicationSubmission, job_file: Path, work_dir: Path) -> AMSpec:
        argv = [sys.executable, "-m", "gangmaster.tools.yarn.am_container", "--job", str(job_file),
                "--work-dir", str(work_dir), "--yarn-rm", self.target.argument, *self.am_options]
        if self.cluster_file:
            argv += ["--cluster", str(Path(self.cluster_file).resolve())]
        log = shlex.quote(str(work_dir / "yarn" / AM_LOG))
        command = f"cd {shlex.quote(os.getcwd())} && exec {shlex.join(argv)} 1>>{log} 2>&1"
        env = {k: shell_value(v) for k, v in handed_on(dict(os.environ)).items() if k.isidentifier()}
        return AMSpec(submission.name, [command], env, memory_mb=AM_MEMORY_MB, vcores=1, queue=submission.queue,
                      max_app_attempts=submission.max_attempts,
                      keep_containers_across_attempts=submission.keep_containers_across_attempts,
                      priority=submission.priority)

    # ------------------------------------------------------------------ wait
    @property
    def metrics_url(self) -> str:
        """Where the metrics of the one job are served, once its AM said so ("" before, or with several
        jobs: each AM serves its own, :meth:`metrics_url_of`)."""
        return next(iter(self.metrics_urls.values())) if len(self.runs) == 1 and self.metrics_urls else ""

    def metrics_url_of(self, run: JobRun) -> str:
        return self.metrics_urls.get(run.app_id, "")

    def run(self, timeout_s: float | None = None) -> bool:
        """Follow every application until each ended, ``timeout_s`` passed or a stop signal
        came; True when all ended. Each job's result is read from its journal then."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            self._follow_logs()
            self._follow_metrics()
            pending = [r for r in self.runs if not r.done]
            for run in pending:
                try:
                    report = self.client.application_report(run.app_id)
                except RMError as exc:
                    self._say(f"YARN did not answer about {run.app_id} ({exc.message}); trying again")
                    continue
                if report.state.finished:
                    self._follow_logs()
                    self._ended(run, report)
            if all(r.done for r in self.runs):
                return True
            if self.interrupted is not None:
                return False
            if deadline is not None and time.monotonic() >= deadline:
                self.timed_out = True
                return False
            time.sleep(POLL_S)

    def _ended(self, run: JobRun, report) -> None:
        recorded = RecordedRun.of(run.job, read_state(read_records(run.work_dir / JOURNAL_FILE)))
        recorded.app_id = run.app_id
        if recorded.outcome is None:   # the AM never recorded an end: YARN's verdict
            outcome = {AppState.KILLED: "killed"}.get(report.state, "failed")
            tail = _tail(run.work_dir / "yarn" / AM_LOG)
            recorded.outcome = outcome
            recorded.reason = (f"YARN ended {run.app_id} {report.state.value}"
                               + (f": {report.diagnostics}" if report.diagnostics else "")
                               + (f"; the AM container's log ends: {tail}" if tail else ""))
        run.ams[:] = [YarnAMResult(recorded, True)] * max(1, report.attempt)

    def _follow_logs(self) -> None:
        """Echo the lines the AMs added to their logs (``am-<n>.log``) since the last look."""
        if self.echo is None:
            return
        for run in self.runs:
            if run.finished_earlier is not None:
                continue
            for log in sorted(run.work_dir.glob("am-*.log")):
                try:
                    with open(log, encoding="utf-8", errors="replace") as f:
                        f.seek(self._log_read.get(log, 0))
                        text = f.read()
                        end = text.rfind("\n") + 1
                        self._log_read[log] = self._log_read.get(log, 0) + len(text[:end].encode())
                except OSError:
                    continue
                prefix = f"{run.job.name} ({run.app_id}): " if self.prefix_lines else ""
                for line in text[:end].splitlines():
                    self.echo(prefix + line)

    def _follow_metrics(self) -> None:
        """Print where each AM serves its metrics when it says so (:data:`~.am_container.METRICS_URL_FILE`;
        a later AM attempt may serve elsewhere), as ``metrics: URL``, as every run prints it."""
        if self.settings.metrics_port is None:
            return
        for run in self.runs:
            try:
                url = (run.work_dir / "yarn" / METRICS_URL_FILE).read_text().strip()
            except OSError:
                continue
            if url and url != self.metrics_urls.get(run.app_id):
                self.metrics_urls[run.app_id] = url
                prefix = f"{run.job.name} ({run.app_id}): " if self.prefix_lines else ""
                print(f"{prefix}metrics: {url}", file=sys.stderr if self.report_json else sys.stdout, flush=True)

    def _say(self, line: str) -> None:
        if self.echo is not None:
            self.echo(line)

    # -------------------------------------------------------------- the end
    def _catch_stop_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in STOP_SIGNALS:
            self._previous_handlers[sig] = signal.signal(sig, self._on_stop_signal)

    def _on_stop_signal(self, signum, _frame) -> None:
        self.interrupted = self.interrupted or signal.Signals(signum)

    def shutdown(self) -> None:
        """Kill every application not ended (YARN stops their containers), saying why."""
        why = (f"the run was interrupted by {self.interrupted.name}" if self.interrupted is not None
               else "the run timed out" if self.timed_out else "the run was stopped")
        for run in self.runs:
            if not run.done:
                try:
                    self.client.kill(run.app_id, why)
                except RMError as exc:
                    print(f"gangmaster run: could not kill {run.app_id} at YARN: {exc.message}", file=sys.stderr)
                recorded = RecordedRun.of(run.job, read_state(read_records(run.work_dir / JOURNAL_FILE)))
                recorded.app_id = run.app_id
                recorded.outcome, recorded.reason = None, why
                run.ams[:] = [YarnAMResult(recorded, False)]
        for sig, handler in self._previous_handlers.items():
            signal.signal(sig, handler)
        self._previous_handlers = {}


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()[-lines:]
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text if line.strip())
