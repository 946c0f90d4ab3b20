"""The gangmaster AM in the container YARN starts for it (``gangmaster run --rm yarn``'s AM).

``python -m gangmaster.tools.yarn.am_container --job FILE --work-dir DIR --yarn-rm X``:
the same ApplicationMaster as every other run, over :class:`~.client.YarnRMClient` with the
AMRMToken of this container, its barrier coordinator serving the tasks from here, its
journal and log in the work folder (which ``gangmaster run`` reads to follow and report
the job). It heartbeats until the job ends, then unregisters (the application ends
FINISHED with the job's verdict as YARN's final status).

When YARN starts it again (AM attempt 2 after this process died; the application keeps
its containers across attempts), it registers, gets the containers still running, and
recovers the job from the journal: the tasks go on, nothing restarts. Its coordinator
listens on the port the previous one had (recorded in the work folder), where the tasks
dial it again; a task that calls before this AM has reopened its barrier is told to come
back, not refused (:meth:`~gangmaster.am.barrier.coordinator.BarrierCoordinator.taking_over`).
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

from gangmaster.am.spec.jobspec_model import JobSpec

from ..arg_types import port_number
from ..job_runner import JobRun, RemoteRuns

BARRIER_PORT_FILE = "barrier-port"
#: where the AM says the URL of its metrics (``--metrics-port``), for ``gangmaster run`` to print
METRICS_URL_FILE = "metrics-url"
#: addresses that listen on every interface: the AM's URL names its container's host instead
ANY_ADDRESS = ("0.0.0.0", "::", "")
#: what YARN sets in every container: never handed on from one container to another
YARN_CONTAINER_VARIABLES = frozenset({
    "CONTAINER_ID", "NM_HOST", "NM_PORT", "NM_HTTP_PORT", "LOCAL_DIRS", "LOCAL_USER_DIRS", "LOG_DIRS", "USER",
    "LOGNAME", "HOME", "PWD", "OLDPWD", "SHLVL", "_", "HADOOP_TOKEN_FILE_LOCATION", "JVM_PID",
    "APPLICATION_WEB_PROXY_BASE", "APP_SUBMIT_TIME_ENV", "HADOOP_CONF_DIR", "HADOOP_HOME", "HADOOP_COMMON_HOME",
    "HADOOP_HDFS_HOME", "HADOOP_YARN_HOME", "HADOOP_MAPRED_HOME", "MALLOC_ARENA_MAX", "CLASSPATH",
    "CONTAINER_WORK_DIR", "MAX_APP_ATTEMPTS"})


def handed_on(env: dict[str, str]) -> dict[str, str]:
    """The variables of ``env`` a container passes on to the next (the AM's to its tasks,
    ``gangmaster run``'s to the AM): all but what YARN sets in each container itself."""
    return {k: v for k, v in env.items() if k not in YARN_CONTAINER_VARIABLES and not k.startswith("NM_AUX_SERVICE_")}


class YarnAMRuns(RemoteRuns):
    """The one job of this AM container, on YARN: :class:`RemoteRuns` with the application
    already submitted (by ``gangmaster run``) and YARN starting the next AM attempt itself."""

    rm_name = "YARN"
    restarts_replaced = False   # YARN starts the next attempt's container
    replaced = False

    def __init__(self, client, state_dir: Path, settings=None, selection=None, barrier_config=None):
        self.state_dir = state_dir
        state_dir.mkdir(parents=True, exist_ok=True)
        super().__init__(client, settings, selection, barrier_config, echo=None,
                         port_file=state_dir / BARRIER_PORT_FILE)

    def _am_extras(self, run: JobRun) -> dict:
        extras = super()._am_extras(run)
        extras["task_env"] = {**handed_on(dict(os.environ)), **extras["task_env"]}
        return extras

    def serve(self, job: JobSpec, work_dir: Path, app_id: str) -> JobRun:
        """Run the job as application ``app_id`` (this container's). With
        ``settings.metrics_port`` its metrics, /why and status page are served from here
        before the AM registers, which gives YARN their address as the application's
        tracking URL (the RM's UI and proxy link to it, as for any YARN AM), and it is
        written to the work folder (:data:`METRICS_URL_FILE`) for ``gangmaster run``."""
        with self.clock.lock:
            run = JobRun(job, app_id, work_dir, "default")
            self.runs.append(run)
            self._serve_metrics(run)
            if self.metrics is not None:
                host = self.settings.metrics_host
                if host in ANY_ADDRESS:
                    host = os.environ.get("NM_HOST") or socket.getfqdn()
                root = f"http://{host}:{self.metrics.server.server_port}/"
                self.client.tracking_url = root
                written = self.state_dir / f"{METRICS_URL_FILE}.tmp"   # (read as it is written: whole or not)
                written.write_text(f"{root}metrics\n")
                written.replace(self.state_dir / METRICS_URL_FILE)
            self._start_am(run)
            return run

    def _heartbeat(self, am) -> None:
        super()._heartbeat(am)
        if am.done and am.outcome is None:   # a newer attempt took over: this container has nothing to do
            self.replaced = True
            self._finished.set()

    def shutdown(self) -> None:
        """Stop serving: the application is YARN's to end (killing it, or the AM's finish)."""
        self.close()
        self.barrier.stop()
        import signal
        for sig, handler in self._previous_handlers.items():
            signal.signal(sig, handler)
        self._previous_handlers = {}


def parser() -> argparse.ArgumentParser:
    """The AM container's command line (what ``gangmaster run --rm yarn`` gives it, :mod:`.runs`)."""
    parser = argparse.ArgumentParser(prog="python -m gangmaster.tools.yarn.am_container",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--job", required=True, help="the job file")
    parser.add_argument("--work-dir", required=True, type=Path)
    parser.add_argument("--yarn-rm", required=True, help="the RM's web address or a local cluster's folder")
    parser.add_argument("--cluster", help="node metadata: a gangmaster cluster file named by YARN's node names")
    parser.add_argument("--config")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--max-wait", type=float)
    parser.add_argument("--metrics-port", type=port_number)
    parser.add_argument("--metrics-host")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    print(f"gangmaster AM in {os.environ.get('CONTAINER_ID', '?')} (pid {os.getpid()}) for {args.job}", flush=True)

    from gangmaster.am.barrier.config import BarrierConfig
    from gangmaster.am.spec.jobspec import load_job
    from gangmaster.selectors.selector import selector_classes
    from gangmaster.tools.run_cmd import am_and_selection_settings

    from .client import YarnRMClient
    from .target import resolve

    am_settings, selection = am_and_selection_settings(args)
    job = load_job(args.job, selectors=list(selector_classes()))
    state_dir = args.work_dir / "yarn"
    client = YarnRMClient.in_container(resolve(args.yarn_rm, args.cluster), state_dir)
    runs = YarnAMRuns(client, state_dir, am_settings, selection, BarrierConfig.load(args.config))
    try:
        run = runs.serve(job, args.work_dir, client.app_id)
        runs.run(None)
    finally:
        runs.shutdown()
        client.close()
    if runs.replaced:
        print("a newer AM attempt took over: stopping", flush=True)
        return 1
    print(f"job {job.name}: {run.outcome} ({run.am.reason})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
