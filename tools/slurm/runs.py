"""Jobs through the AM on a Slurm cluster (``gangmaster run JOB.yaml --rm slurm``).

The same AM, driver and report as ``gangmaster run --live``; the RM is Slurm, reached
through :class:`~.client.SlurmRMClient`. The AM and its barrier coordinator run in this
process; the tasks run in Slurm jobs, started by each job's launcher (a batch step), so
they outlive this process.

**Failover.** If this process dies (``kill -9``, the machine the AM runs on reboots),
running the same job into the same work folder again takes the application back
instead of submitting a new one: the new AM registers as the next attempt, gets the
containers still running (their tasks never stopped), reads from the journal which
task each is, and carries on in the same gang attempt. Its barrier coordinator listens
on the port the previous one had (recorded in the work folder), so tasks that dial it
again find it; one that calls before the new AM has reopened its barrier is told to come
back, not refused.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from gangmaster.am.spec.am_settings import AMSettings
from gangmaster.am.spec.jobspec_model import JobSpec
from gangmaster.selectors.domains import DomainAsk
from gangmaster.selectors.settings import SelectionSettings

from ..job_runner import JobRun, RemoteRuns
from ..work_folder import claim
from .client import SlurmRMClient

BARRIER_PORT_FILE = "barrier-port"


def job_domain(job: JobSpec) -> DomainAsk | None:
    """The job's ``networkDomain`` (each role carries it as its gang's)."""
    return next((r.gang_network_domain for r in job.roles if r.gang_network_domain is not None), None)


class SlurmRuns(RemoteRuns):
    """Jobs on Slurm, in real time: :class:`RemoteRuns` with Slurm as the RM, and a failover
    that is a rerun's (see the module docstring). ``work_dir``/slurm holds the client's
    records and every job's launcher folder (tasks' logs included)."""

    def __init__(self, work_dir: str | Path, partition: str | None = None, settings: AMSettings | None = None,
                 selection: SelectionSettings | None = None, barrier_config=None,
                 echo: Callable[[str], None] | None = None, client: SlurmRMClient | None = None):
        self.state_dir = Path(work_dir) / "slurm"
        client = client or SlurmRMClient(self.state_dir, partition)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        super().__init__(client, settings, selection, barrier_config, echo, self.state_dir / BARRIER_PORT_FILE)
        self.cluster_name = f"slurm{':' + partition if partition else ''}"

    rm_name = "Slurm"
    restarts_replaced = False   # a replaced attempt is a rerun's: it takes the application back

    def _start_am(self, run: JobRun) -> None:
        """Before the AM asks: the job's ``networkDomain`` as sbatch can say it (the client's
        :meth:`~.client.SlurmRMClient.keep_in_domain`)."""
        self.client.keep_in_domain(run.app_id, job_domain(run.job))
        super()._start_am(run)

    def submit(self, job: JobSpec, work_dir: str | Path, queue: str = "default") -> JobRun:
        """Submit the job, or take back its application when an earlier run into this folder
        did not finish and Slurm still holds the application (failover)."""
        earlier = claim(work_dir, self.identity(job))
        if (not earlier.empty and not earlier.finished and earlier.app_id and self.client.knows(earlier.app_id)
                and not self.client.application_report(earlier.app_id).state.finished):
            with self.clock.lock:
                run = JobRun(job, earlier.app_id, Path(work_dir), queue)
                self.runs.append(run)
                if self.echo is not None:
                    self.echo(f"taking back application {earlier.app_id} of the earlier run into {work_dir}")
                self._start_am(run)
                return run
        return super().submit(job, work_dir, queue)
