"""The Slurm :class:`~gangmaster.protocol.rm_client.RMClient`: the AM on a real Slurm cluster.

The AM does not know it talks to Slurm. How each call maps:

* ``cluster_nodes`` / node updates: ``sinfo --json`` (:mod:`.slurm_json`); node
  features give racks, labels and topology presets, the GRES in use the free GPU mask
  (:mod:`.names`). Slurm knows no ports: the client hands out a node's ``task_ports``
  and keeps the ones its own containers hold.
* ``allocate``: the asks of one heartbeat (a gang, as the AM asks for a whole gang at
  once) become **one heterogeneous job**, one component per host (``-w host``, the
  CPUs and memory of the asks on it, each GPU by its own GRES type when the node
  declares per-GPU types): Slurm grants it whole or keeps it pending, holding nothing.
  The job-wide options (``--partition``, and ``sbatch_options``: ``--account``, ``--qos``,
  ``--time``) come once, before the first component: Slurm propagates them to the others.
  A job whose ``networkDomain`` is ``{required: leaf}`` (one leaf switch of topology.conf)
  adds ``--switches=1`` to them (:meth:`SlurmRMClient.keep_in_domain`): Slurm's own
  request for one leaf switch. The AM names every host of the gang inside one leaf already;
  Slurm takes ``--switches`` as a wish it waits for at most ``max_switch_wait`` (its
  SchedulerParameters, 300 s by default) and then drops, so the AM's placement is what
  keeps the gang in the leaf, and ``--switches=1`` states it to Slurm (``squeue``, ``sacct``).
  A level above the leaf (spine, core, block) has no sbatch option: the AM's placement alone.
  With ``dry_run`` the command is handed to it instead of run, and the job stays
  "not submitted" (never granted, never asked about).
  Its pending reason is every ask's pending reason; an ``sbatch`` refusal ("Requested
  node configuration is not available") rejects them. A cancelled ask of a pending job
  cancels the job and the rest are asked again as a new one.
* ``start_containers``: the job's batch step is the application's launcher
  (:mod:`.launcher`): the client writes each task's launch file, the launcher runs it
  as a step (``srun --het-group --exact``) with the task's environment; Slurm sets
  ``CUDA_VISIBLE_DEVICES`` to the step's GPUs.
* completions: the launcher's exit files (a killed task: 128 + signal); a job that
  ends under its tasks (NODE_FAIL: a node died) ends them as ``NODE_LOST``, any other
  end as killed by the RM.
* ``stop_container``, releases: the launcher stops the step; a job none of whose
  containers is still wanted is cancelled (``scancel``), as are all of an application's
  jobs when it finishes or is killed.
* ``register``: the application's state lives in ``state_dir`` (a JSON file per
  application, :mod:`.records`), so an AM started again (the same ``gangmaster run --rm slurm`` into the
  same work folder) registers as the next attempt and gets the containers still running:
  the tasks outlived the AM in their launcher.

Nothing here sleeps: every call asks Slurm once and answers.
"""
from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

from gangmaster.protocol.reasons import ReasonCode as R
from gangmaster.protocol.reasons import reason
from gangmaster.protocol.rm_client import RMClient
from gangmaster.protocol.rm_protocol import (
    AllocateRequest, AllocateResponse, ApplicationReport, ApplicationSubmission, AppState, Container, ContainerState,
    ContainerStatus, ExitStatus, InvalidRequest, LaunchContext, NodeReport, NodeState, NotFound, PendingAsk,
    RegisterResponse, Rejection, ResourceRequest, RMError, StartContainers, StartRefused, WrongState,
)
from gangmaster.conf.limits import SLURM_COMMAND_TIMEOUT_S
from gangmaster.gpu_topology.masks import full_mask, indices_of
from gangmaster.selectors.domains import DomainAsk
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor

from .launcher import write_whole
from .records import AppRecord, ContainerRecord, SlurmJobRecord
from ..snapshots.slurm_topology import TREE_LEVELS, merged, read_topology, topology_conf_of
from .names import UNTYPED_GPU, per_gpu_type, read_domains, read_features
from .slurm_json import SlurmJob, SlurmJSONError, SlurmNode, read_jobs, read_nodes

#: Ports a node offers its tasks (Slurm does not manage ports; the AM picks from these).
DEFAULT_TASK_PORTS = "20000-29999"
JOB_PREFIX = "gm-"
#: A job's state under ``dry_run``: its sbatch was printed, not run.
NOT_SUBMITTED = "not submitted"


class SlurmError(RMError):
    """A Slurm command failed or could not be read (the message says which and why)."""


class SlurmUnreachable(SlurmError):
    """slurmctld did not answer: Slurm is not configured here (``SLURM_CONF``), or it is down.
    The message is the line of Slurm's answer that says why."""


# ----------------------------------------------------------------------- the client
class SlurmRMClient(RMClient):
    """The AM's RM on the Slurm cluster ``SLURM_CONF`` names (or the environment's default).

    ``state_dir`` holds every application's record and each job's launcher folder; it
    must be on a file system the AM and the nodes share, and is created by the first
    submission (nothing is written before: :meth:`ping` first). ``partition``: where jobs go
    (a submission's queue other than ``default`` names the partition instead)."""

    def __init__(self, state_dir: str | Path, partition: str | None = None, env: dict[str, str] | None = None,
                 task_ports: str = DEFAULT_TASK_PORTS, python: str | None = None,
                 run_command: Callable[..., subprocess.CompletedProcess] = subprocess.run,
                 sbatch_options: Sequence[str] = (), dry_run: Callable[[list[str]], None] | None = None):
        self.state_dir = Path(state_dir).resolve()
        self.partition = partition
        self.env = dict(env if env is not None else os.environ)
        self.task_ports = PortRanges.parse(task_ports)
        self.python = python or sys.executable
        self.run_command = run_command   # subprocess.run's signature: the one way Slurm is reached
        self.sbatch_options = tuple(sbatch_options)   # job-wide: --account=..., --qos=..., --time=...
        self._app_options: dict[str, tuple[str, ...]] = {}   # app id -> its own job-wide options (keep_in_domain)
        self.dry_run = dry_run
        self.apps: dict[str, AppRecord] = {}
        self._nodes: dict[str, SlurmNode] = {}
        self._sent: dict[str, NodeReport] = {}        # app id + host -> the report last sent to that app
        self._completed: dict[str, list[ContainerStatus]] = {}   # app id -> completions not yet reported
        self._completed_later: dict[str, list[ContainerStatus]] = {}   # ... held back one response
        self.slurm_version = ""
        self._switches: dict[str, tuple[tuple[str, str], ...]] | None = None   # node -> its switches (read once)

    # ------------------------------------------------------------ Slurm commands
    def _run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess:
        try:
            done = self.run_command(command, env=self.env, capture_output=True, text=True,
                                    timeout=SLURM_COMMAND_TIMEOUT_S)
        except FileNotFoundError:
            raise SlurmError(f"{command[0]} not found: is slurm-wlm installed and on PATH?") from None
        except subprocess.TimeoutExpired:
            raise SlurmError(f"{' '.join(command[:3])}: no answer within {SLURM_COMMAND_TIMEOUT_S:g}s "
                             f"(SLURM_COMMAND_TIMEOUT_S); is slurmctld up?") from None
        if check and done.returncode != 0:
            raise SlurmError(f"{' '.join(command[:3])} failed (exit {done.returncode}): "
                             f"{(done.stderr or done.stdout).strip()[-400:]}")
        return done

    def ping(self) -> None:
        """Raise :class:`SlurmUnreachable` unless slurmctld answers. ``scontrol ping`` answers
        at once, where ``sinfo`` waits ~10 s for a controller that is down and then says only
        "Unspecified error"."""
        done = self._run("scontrol", "ping", check=False)
        if done.returncode != 0:
            said = [line.strip() for line in (done.stderr + "\n" + done.stdout).splitlines() if line.strip()]
            fatal = [line for line in said if "fatal:" in line]   # unconfigured: errors, then why it gave up
            why = fatal[-1] if fatal else said[0] if said else f"exit {done.returncode}"
            raise SlurmUnreachable(why)

    def _read_nodes(self) -> list[SlurmNode]:
        out = self._run("sinfo", "--json").stdout
        try:
            nodes = read_nodes(out)
        except SlurmJSONError as exc:
            raise SlurmError(f"sinfo --json: {exc}") from None
        if self.partition:
            nodes = [n for n in nodes if not n.partitions or self.partition in n.partitions]
        self._nodes = {n.name: n for n in nodes}
        return nodes

    def _read_jobs(self) -> dict[int, list[SlurmJob]]:
        """Our jobs (named gm-<app>-<n>) by their leader's id, every component (a name may
        be an earlier run's too: the id is what sbatch gave us)."""
        out = self._run("squeue", "--json").stdout
        try:
            jobs = read_jobs(out)
        except SlurmJSONError as exc:
            raise SlurmError(f"squeue --json: {exc}") from None
        mine: dict[int, list[SlurmJob]] = {}
        for job in jobs:
            if job.name.startswith(JOB_PREFIX):
                mine.setdefault(job.leader, []).append(job)
        return mine

    def _scancel(self, job_id: int) -> None:
        if job_id:
            self._run("scancel", str(job_id), check=False)

    # ------------------------------------------------------------------ records
    def _app_file(self, app_id: str) -> Path:
        return self.state_dir / "apps" / app_id / "app.json"

    def _save(self, app: AppRecord) -> None:
        path = self._app_file(app.app_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_whole(path, app.to_dict())

    def _app(self, app_id: str) -> AppRecord:
        app = self.apps.get(app_id)
        if app is None:
            path = self._app_file(app_id)
            if not path.is_file():
                raise NotFound(f"unknown application {app_id!r} (no {path})")
            app = self.apps[app_id] = AppRecord.from_dict(json.loads(path.read_text()))
        return app

    def knows(self, app_id: str) -> bool:
        """Whether this state folder holds the application (an earlier AM's)."""
        return app_id in self.apps or self._app_file(app_id).is_file()

    def _job_dir(self, app: AppRecord, key: str) -> Path:
        return self.state_dir / "apps" / app.app_id / key

    # ------------------------------------------------------------ client side
    def submit(self, submission: ApplicationSubmission) -> str:
        (self.state_dir / "apps").mkdir(parents=True, exist_ok=True)
        taken = {p.name for p in (self.state_dir / "apps").iterdir()}
        n = len(taken) + 1
        while f"app_{n:04d}" in taken:
            n += 1
        app_id = f"app_{n:04d}"
        partition = submission.queue if submission.queue != "default" else self.partition
        app = AppRecord(app_id, submission.name, submission.queue, partition, time.time())
        self.apps[app_id] = app
        self._save(app)
        return app_id

    def keep_in_domain(self, app_id: str, domain: DomainAsk | None) -> None:
        """The application's gangs are asked of Slurm inside ``domain`` (the job's
        ``networkDomain``) where sbatch can say it: ``--switches=1`` for ``required: leaf``."""
        self._app_options[app_id] = switches_option(domain)

    def kill(self, app_id: str, diagnostics: str = "") -> None:
        self._end(self._app(app_id), AppState.KILLED, "KILLED", diagnostics or "killed by a client")

    def _end(self, app: AppRecord, state: AppState, final_status: str, diagnostics: str) -> None:
        if app.state.finished:
            return
        for job in app.jobs.values():
            if job.state != "ended":
                self._scancel(job.job_id)
                job.state = "ended"
        for rec in app.containers.values():
            if not rec.state.finished:
                rec.state, rec.exit_status = ContainerState.KILLED, ExitStatus.KILLED_AFTER_APP_COMPLETION
                rec.diagnostics = "the application ended"
        app.state, app.final_status, app.diagnostics, app.finished_at = state, final_status, diagnostics, time.time()
        self._save(app)

    def application_report(self, app_id: str) -> ApplicationReport:
        app = self._app(app_id)
        running = sum(1 for c in app.containers.values() if not c.state.finished)
        pending = sum(len(j.asks) for j in app.jobs.values() if j.state == "pending")
        return ApplicationReport(app.app_id, app.name, app.queue, app.state, app.attempt, app.submitted_at,
                                 app.finished_at, app.final_status, app.diagnostics, running, pending)

    def cluster_nodes(self, usable_only: bool = False) -> list[NodeReport]:
        in_use = self._ports_in_use()
        reports = [self.node_report(n, in_use) for n in self._read_nodes()]
        return [r for r in reports if r.state.usable] if usable_only else reports

    def _ports_in_use(self) -> dict[str, PortRanges]:
        used: dict[str, PortRanges] = {}
        for app in self.apps.values():
            for rec in app.containers.values():
                if not rec.state.finished and rec.container.resource.port_ranges.ranges:
                    host = rec.container.host
                    used[host] = used.get(host, PortRanges()).add(rec.container.resource.port_ranges)
        return used

    def node_report(self, node: SlurmNode, ports_in_use: dict[str, PortRanges]) -> NodeReport:
        rack, labels, topology = read_features(node.features)
        gpus = node.gpus
        capacity = ResourceDescriptor(node.memory_mb, float(node.cpus), gpus, full_mask(gpus),
                                      port_ranges=self.task_ports)
        used_mask = sum(1 << g for g in node.used_gpus)
        free_mask = full_mask(gpus) & ~used_mask
        free_ports = self.task_ports.subtract(ports_in_use.get(node.name, PortRanges()))
        free = ResourceDescriptor(max(0, node.memory_mb - node.alloc_memory_mb),
                                  float(max(0, node.cpus - node.alloc_cpus)), bin(free_mask).count("1"), free_mask,
                                  port_ranges=free_ports)
        state = NodeState.LOST if node.lost else NodeState.RUNNING if node.usable else NodeState.UNHEALTHY
        gpu_type = node.gpu_type if gpus else None
        return NodeReport(node.name, rack, state, capacity, free, labels, gpu_type, topology,
                          health_report=node.reason or ("" if state.usable else "/".join(sorted(node.states))),
                          domains=merged(read_domains(node.features), self.switches().get(node.name, ())))

    def switches(self) -> dict[str, tuple[tuple[str, str], ...]]:
        """Each node's switches, as Slurm's topology.conf names them (leaf, spine, core...;
        :mod:`~gangmaster.tools.snapshots.slurm_topology`), read once: where ``scontrol show
        config`` says Slurm reads it (none: no TopologyPlugin that reads it, or no such file
        where this process runs, as in a configless Slurm; or ``scontrol show config`` itself
        fails: the switches are unknown, which costs a ``networkDomain`` gang its domains, not the
        node reports)."""
        if self._switches is None:
            try:
                config = self._run("scontrol", "show", "config", check=False)
            except SlurmError:
                config = None
            said = config.stdout if config is not None and config.returncode == 0 else ""
            path = topology_conf_of(said)
            self._switches = read_topology(path) if path is not None and path.is_file() else {}
        return self._switches

    # --------------------------------------------------------------- AM side
    def register(self, app_id: str) -> RegisterResponse:
        app = self._app(app_id)
        if app.state.finished:
            raise WrongState(f"application {app_id} is {app.state.value}")
        self._refresh(app)
        app.attempt += 1
        app.held = []   # the asks of an AM attempt that is gone
        app.state = AppState.RUNNING
        self._save(app)
        kept = tuple(rec.container for rec in app.containers.values() if rec.state is ContainerState.RUNNING)
        nodes = self._nodes.values() or self._read_nodes()
        biggest = max(nodes, key=lambda n: (n.gpus, n.cpus, n.memory_mb), default=None)
        maximum = (ResourceDescriptor(biggest.memory_mb, float(biggest.cpus), biggest.gpus, full_mask(biggest.gpus))
                   if biggest else ResourceDescriptor())
        return RegisterResponse(app_id, app.attempt, app.partition or app.queue, maximum, kept)

    def allocate(self, request: AllocateRequest) -> AllocateResponse:
        app = self._app(request.app_id)
        if app.state.finished:
            raise WrongState(f"application {app.app_id} is {app.state.value}")
        if request.attempt != app.attempt:
            raise WrongState(f"AM attempt {request.attempt} of {app.app_id} is not the current one "
                             f"({app.attempt})")
        for cid in request.releases:
            self._release(app, cid)
        rejected: list[Rejection] = []
        self._read_nodes()   # first: a job that ended is told apart by its nodes' state
        cancel = set(request.cancel)
        held = [a for a in app.held + self._cancel(app, cancel) if a.request_id not in cancel]
        app.held = []
        asks = list(request.asks)
        if any(a.resource.gpu_milli for a in asks):   # Slurm's GRES are whole GPUs: the gang cannot be asked
            rejected += [Rejection(a.request_id, reason(R.SLURM_WHOLE_GPUS, milli=a.resource.gpu_milli)) for a in asks]
            asks = []
        if asks:   # a gang's asks go to Slurm together, as one job
            rejected += self._submit_job(app, held + asks)
        else:
            app.held = held
        allocated, pending, gone = self._refresh(app)
        pending += [PendingAsk(a.request_id, 1, reason(R.SLURM_GANG_HELD)) for a in app.held]
        rejected += gone
        node_updates = self._node_updates(app)
        completed = tuple(self._completed.pop(app.app_id, []))
        self._completed[app.app_id] = self._completed_later.pop(app.app_id, [])
        self._cancel_unwanted_jobs(app)
        self._save(app)
        return AllocateResponse(allocated=tuple(allocated), completed=completed, node_updates=node_updates,
                                rejected=tuple(rejected), pending=tuple(pending))

    def _release(self, app: AppRecord, cid: str) -> None:
        rec = app.containers.get(cid)
        if rec is None or rec.state.finished:
            return
        if rec.state is ContainerState.RUNNING:
            self._stop_step(app, rec)
        rec.state, rec.exit_status, rec.diagnostics = ContainerState.KILLED, ExitStatus.ABORTED, "released by the AM"

    def _cancel(self, app: AppRecord, cancel: set[int]) -> list[ResourceRequest]:
        """Withdraw asks; a pending job that loses one is cancelled, its other asks returned.
        They are asked again together with the next asks of the AM (the instances it selects
        again), so the gang stays one job: a heterogeneous job cannot be changed, and asked
        alone they could be granted while the rest waits."""
        if not cancel:
            return []
        again: list[ResourceRequest] = []
        for job in list(app.jobs.values()):
            if job.state == "pending" and cancel & {a.request_id for a in job.asks}:
                self._scancel(job.job_id)
                job.state, job.reason = "ended", "cancelled by the AM"
                again += [a for a in job.asks if a.request_id not in cancel]
        return again

    def _submit_job(self, app: AppRecord, asks: list[ResourceRequest]) -> list[Rejection]:
        """One heterogeneous job for the asks (one component per host); the asks rejected.
        The AM names a host for every ask (it chose the node and its GPUs): one without a
        host, or on a host Slurm does not have, is rejected and the others are asked."""
        if not self._nodes:
            self._read_nodes()
        rejected: list[Rejection] = []
        by_host: dict[str, list[ResourceRequest]] = {}
        for ask in asks:
            if ask.host is None or ask.host not in self._nodes:
                where = (reason(R.SLURM_NO_HOST) if not ask.host
                         else reason(R.SLURM_UNKNOWN_HOST_IN_PARTITION, host=ask.host, partition=app.partition)
                         if app.partition else reason(R.SLURM_UNKNOWN_HOST, host=ask.host))
                rejected.append(Rejection(ask.request_id, where))
                continue
            by_host.setdefault(ask.host, []).extend([ask if ask.count == 1 else replace(ask, count=1)] * ask.count)
        if not by_host:
            return rejected
        app.jobs_made += 1
        key = f"{JOB_PREFIX}{app.app_id}-{app.jobs_made}"
        folder = self._job_dir(app, key)
        folder.mkdir(parents=True, exist_ok=True)
        hosts = list(by_host)
        command = ["sbatch", "--parsable", f"--job-name={key}", f"--output={folder}/launcher.log",
                   f"--chdir={folder}", "--export=ALL", "--no-requeue"]   # the AM restarts a gang, not Slurm
        if app.partition:
            command.append(f"--partition={app.partition}")
        command += self.sbatch_options
        command += self._app_options.get(app.app_id, ())
        for k, host in enumerate(hosts):
            if k:
                command.append(":")
            command += self._component(host, by_host[host])
        command += [str(self._launcher_script()), str(folder)]
        if self.dry_run is not None:
            self.dry_run(command)
            job_id, state = 0, NOT_SUBMITTED
        else:
            done = self._run(*command, check=False)
            if done.returncode != 0:
                refused = reason(R.SLURM_REFUSED, why=_sbatch_error(done.stderr or done.stdout))
                return rejected + [Rejection(a.request_id, refused) for h in hosts for a in by_host[h]]
            job_id, state = int(done.stdout.strip().split(";")[0]), "pending"
        app.jobs[key] = SlurmJobRecord(key, [a for h in hosts for a in by_host[h]], [h for h in hosts for _ in by_host[h]],
                             job_id, state)
        self._save(app)
        return rejected

    def _component(self, host: str, asks: list[ResourceRequest]) -> list[str]:
        cpus = sum(max(1, math.ceil(a.resource.vcores)) for a in asks)
        memory = sum(max(1, a.resource.memory_mb) for a in asks)
        opts = ["-N1", "-n1", f"--cpus-per-task={cpus}", f"--mem={memory}M", f"--nodelist={host}"]
        gres = gres_request([a.resource for a in asks], self._nodes.get(host))
        if gres:
            opts.append(f"--gres={gres}")
        return opts

    def _launcher_script(self) -> Path:
        script = self.state_dir / "launcher.sh"
        text = f"#!/bin/sh\nexec {shlex.quote(self.python)} -m gangmaster.tools.slurm.launcher \"$1\"\n"
        if not script.is_file() or script.read_text() != text:
            write_whole(script, text)
            script.chmod(0o755)
        return script

    # ------------------------------------------------------------- what happened
    def _refresh(self, app: AppRecord) -> tuple[list[Container], list[PendingAsk], list[Rejection]]:
        """Ask Slurm once about the app's jobs: grants, pending reasons, jobs that ended
        before they started (their asks rejected: cancelled by someone else, refused by a
        limit) or under their tasks; then read the launchers' exit files."""
        allocated, pending, rejected = [], [], []
        exits = self._exit_files(app)   # before squeue: a task Slurm killed is then seen with its job's end
        live = [j for j in app.jobs.values() if j.state not in ("ended", NOT_SUBMITTED)]
        if live:
            slurm_jobs = self._read_jobs()
            for job in live:
                records = slurm_jobs.get(job.job_id, [])
                if job.state == "pending":
                    allocated += self._maybe_granted(app, job, records, pending, rejected)
                if job.state == "granted":
                    self._maybe_ended(app, job, records, exits)
        self._apply_exits(app, {cid: e for cid, e in exits.items() if not self._on_dead_node(app, cid)})
        return allocated, pending, rejected

    def _on_dead_node(self, app: AppRecord, cid: str) -> bool:
        """Whether the container's node is down: its srun's exit status then means nothing
        until Slurm ends the job (NODE_FAIL, :meth:`_maybe_ended`)."""
        node = self._nodes.get(app.containers[cid].container.host)
        return node is not None and node.lost

    def _maybe_granted(self, app: AppRecord, job: SlurmJobRecord, records: list[SlurmJob], pending: list,
                       rejected: list) -> list[Container]:
        if records and all(r.running for r in records):
            job.state = "granted"
            return self._grant(app, job, sorted(records, key=lambda r: r.het_offset))
        if any(r.ended for r in records) or not records:
            job.state = "ended"
            why = next((r.reason for r in records if r.reason and r.reason != "None"), "")
            ended = (reason(R.SLURM_ENDED_SAYING, job_id=str(job.job_id), why=why) if why
                     else reason(R.SLURM_ENDED_BEFORE_START, job_id=str(job.job_id)))
            job.reason = str(ended)   # (the job's record keeps its words)
            rejected += [Rejection(a.request_id, ended) for a in job.asks]
            return []
        slurm_reason = next((r.reason for r in records if r.reason and r.reason != "None"), "Priority")
        job.reason = slurm_reason
        waiting = reason(R.SLURM_PENDING, job_id=str(job.job_id), why=slurm_reason)
        pending += [PendingAsk(a.request_id, 1, waiting) for a in job.asks]
        return []

    def _grant(self, app: AppRecord, job: SlurmJobRecord, records: list[SlurmJob]) -> list[Container]:
        """The job runs: one container per ask, with the GPUs Slurm gave where it chose them."""
        components = list(dict.fromkeys(job.hosts))
        got: dict[int, list[int]] = {k: list(r.gpu_indices) for k, r in enumerate(records)}
        out = []
        now = time.time()
        for i, (ask, host) in enumerate(zip(job.asks, job.hosts)):
            k = components.index(host)
            resource = ask.resource
            node = self._nodes.get(host)
            if resource.gpus and not (node is not None and node.per_gpu_types):
                given, got[k] = got[k][:resource.gpus], got[k][resource.gpus:]   # what Slurm chose, recorded
                if len(given) == resource.gpus:
                    resource = replace(resource, gpu_mask=sum(1 << g for g in given))
            rack = read_features(node.features)[0] if node is not None else "default-rack"
            container = Container(f"{job.key}-{i}", app.app_id, app.attempt, host, rack, resource, ask.request_id,
                                  now)
            app.containers[container.container_id] = ContainerRecord(container, job.key, k)
            out.append(container)
        return out

    def _maybe_ended(self, app: AppRecord, job: SlurmJobRecord, records: list[SlurmJob], exits: dict[str, dict]) -> None:
        """A granted job Slurm ended (or requeued) under its tasks. A task that ended by
        itself before (its exit status says so, not a signal) keeps its own ending. After a
        node failure only the tasks on the dead node(s) are lost now; the others, killed by
        Slurm with the job, are reported a heartbeat later, once the AM has stopped their gang
        for the lost ones: they did not fail, and their nodes are not to blame."""
        ended = [r for r in records if r.ended or not r.running]   # not running again: requeued
        if records and not ended:
            return
        job.state = "ended"
        mine = [rec for rec in app.containers.values() if rec.job_key == job.key and not rec.state.finished]
        down = {h for h in job.hosts if h in self._nodes and self._nodes[h].lost}
        node_failed = any(r.node_failed or "PENDING" in r.states for r in ended) or bool(down)
        if node_failed:
            down = down or {r.nodes for r in ended if r.node_failed}
        # what a task's srun said stands, but not on a dead node: its srun lost the node and
        # exits 0 however the task fared
        self._apply_exits(app, {cid: e for cid, e in exits.items() if e.get("exit_status", 0) < 128
                                and cid in {r.container.container_id for r in mine if r.container.host not in down}})
        killed = [rec for rec in mine if not rec.state.finished]
        if node_failed:
            why = f"Slurm job {job.job_id} ended NODE_FAIL: node {', '.join(sorted(down))} is down"
            for rec in killed:
                if rec.container.host in down:
                    self._finish(app, rec, ContainerState.FAILED, ExitStatus.NODE_LOST, why)
                else:
                    self._finish(app, rec, ContainerState.KILLED, ExitStatus.KILLED_BY_RESOURCEMANAGER,
                                 f"killed by Slurm with its job: {why}", later=True)
            return
        why = f"Slurm job {job.job_id} ended ({'/'.join(sorted(ended[0].states)) if ended else 'gone from squeue'})"
        for rec in killed:
            self._finish(app, rec, ContainerState.KILLED, ExitStatus.KILLED_BY_RESOURCEMANAGER, why)

    def _exit_files(self, app: AppRecord) -> dict[str, dict]:
        """What the launchers wrote of the running containers that ended, by container."""
        out = {}
        for rec in app.containers.values():
            if rec.state is not ContainerState.RUNNING:
                continue
            path = self._job_dir(app, rec.job_key) / "exit" / f"{rec.container.container_id}.json"
            try:
                out[rec.container.container_id] = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
        return out

    def _apply_exits(self, app: AppRecord, exits: dict[str, dict]) -> None:
        for cid, ended in exits.items():
            rec = app.containers[cid]
            if rec.state is not ContainerState.RUNNING:
                continue
            code = int(ended["exit_status"])
            diagnostics = ended.get("diagnostics") or (
                f"exited with status {code}" + (f" (killed by signal {code - 128})" if code > 128 else ""))
            self._finish(app, rec, ContainerState.COMPLETED if code == 0 else ContainerState.FAILED, code,
                         diagnostics)

    def _finish(self, app: AppRecord, rec: ContainerRecord, state: ContainerState, status: int, diagnostics: str,
                later: bool = False) -> None:
        """The container ended: reported in the next allocate response (``later``: the one after)."""
        rec.state, rec.exit_status, rec.diagnostics = state, status, diagnostics
        (self._completed_later if later else self._completed).setdefault(app.app_id, []).append(rec.status())

    def _cancel_unwanted_jobs(self, app: AppRecord) -> None:
        """A granted job none of whose containers is still wanted is cancelled: its
        resources go back to Slurm (the launcher and any step still stopping go with it)."""
        for job in app.jobs.values():
            if job.state == "granted" and all(c.state.finished for c in app.containers.values()
                                              if c.job_key == job.key):
                self._scancel(job.job_id)
                job.state = "ended"

    def _node_updates(self, app: AppRecord) -> tuple[NodeReport, ...]:
        ports = self._ports_in_use()
        out = []
        for node in self._nodes.values():
            report = self.node_report(node, ports)
            key = f"{app.app_id}\0{node.name}"
            if self._sent.get(key) != report:
                self._sent[key] = report
                out.append(report)
        return tuple(out)

    def finish(self, app_id: str, attempt: int, final_status: str = "SUCCEEDED", diagnostics: str = "") -> None:
        app = self._app(app_id)
        if attempt != app.attempt:
            raise WrongState(f"AM attempt {attempt} of {app_id} is not the current one ({app.attempt})")
        self._end(app, AppState.FINISHED, final_status, diagnostics)

    # ------------------------------------------------------- NodeManager side
    def start_containers(self, request: StartContainers) -> StartRefused | None:
        for index, launch in enumerate(request.containers):
            try:
                self._start(launch.container_id, launch.launch.over(request.shared))
            except RMError as exc:
                return StartRefused(index, launch.container_id, exc)
        return None

    def _find(self, cid: str) -> tuple[AppRecord, ContainerRecord]:
        for app in self.apps.values():
            if cid in app.containers:
                return app, app.containers[cid]
        raise NotFound(f"unknown container {cid!r}")

    def _start(self, cid: str, launch: LaunchContext) -> None:
        app, rec = self._find(cid)
        if rec.state is not ContainerState.ALLOCATED:
            raise WrongState(f"container {cid} is {rec.state.value}; only an ALLOCATED container can be started")
        if not launch.command:
            raise InvalidRequest(f"container {cid}: no command")
        c = rec.container
        node = self._nodes.get(c.host)
        gpus = ",".join(str(g) for g in indices_of(c.resource.gpu_mask))
        ports = ",".join(str(p) for p in c.resource.port_ranges)
        address = node.address if node is not None and node.address else c.host
        env = {"PAI_CONTAINER_HOST_PORT_LIST": ports, "PAI_CURRENT_CONTAINER_PORT": ports.split(",")[0],
               **launch.env_dict,
               "GANGMASTER_HOST": c.host, "GANGMASTER_RACK": c.rack, "GANGMASTER_APP_ID": c.app_id,
               "GANGMASTER_CONTAINER_ID": cid, "GANGMASTER_PORTS": ports, "GANGMASTER_GPU_INDICES": gpus,
               "PAI_CONTAINER_ID": cid, "PAI_CONTAINER_HOST_NAME": c.host, "PAI_CONTAINER_HOST_IP": address,
               "PAI_CURRENT_CONTAINER_IP": address, "PAI_WORK_DIR": os.getcwd()}
        node_type = node.gpu_type if node is not None else None
        if c.resource.gpus and node is not None and node.per_gpu_types:
            gres = ",".join(f"gpu:{per_gpu_type(node_type, g)}:1" for g in indices_of(c.resource.gpu_mask))
        elif c.resource.gpus:
            gres = f"gpu:{c.resource.gpus}"
        else:
            gres = ""
        folder = self._job_dir(app, rec.job_key)
        (folder / "launch").mkdir(parents=True, exist_ok=True)
        write_whole(folder / "launch" / f"{cid}.json", {
            "container_id": cid, "het_group": rec.het_group if self._components(app, rec.job_key) > 1 else None, "cpus": max(1, math.ceil(c.resource.vcores)),
            "memory_mb": max(1, c.resource.memory_mb), "gres": gres, "command": list(launch.command),
            "env": env, "cwd": os.getcwd()})
        rec.state = ContainerState.RUNNING
        self._save(app)

    @staticmethod
    def _components(app: AppRecord, key: str) -> int:
        """Components of the job: a job of one is an ordinary job (no het group to name)."""
        return len(set(app.jobs[key].hosts))

    def stop_container(self, container_id: str) -> None:
        app, rec = self._find(container_id)
        if rec.state.finished:
            return
        if rec.state is ContainerState.RUNNING:
            self._stop_step(app, rec)
        self._finish(app, rec, ContainerState.KILLED, ExitStatus.KILLED_BY_APPMASTER,
                     "stopped by the application master")
        self._save(app)

    def _stop_step(self, app: AppRecord, rec: ContainerRecord) -> None:
        stop = self._job_dir(app, rec.job_key) / "stop"
        stop.mkdir(parents=True, exist_ok=True)
        (stop / rec.container.container_id).touch()

    def container_status(self, container_id: str) -> ContainerStatus:
        app, rec = self._find(container_id)
        if rec.state is ContainerState.RUNNING:
            self._apply_exits(app, self._exit_files(app))
        return rec.status()


def switches_option(domain: DomainAsk | None) -> tuple[str, ...]:
    """sbatch's own way to keep a job under one leaf switch, for a ``required`` leaf domain
    (Slurm's topology/tree's lowest level); nothing for any other ask."""
    return ("--switches=1",) if domain is not None and domain.required and domain.level == TREE_LEVELS[0] else ()


def gres_request(resources: list[ResourceDescriptor], node: SlurmNode | None) -> str:
    """The ``--gres`` of some asks on one node: each GPU by its own type where the node
    declares per-GPU types (exact: the GPUs the AM chose), else a count of the node's GPU
    type (Slurm chooses which; the client records what it got)."""
    gpus = sum(r.gpus for r in resources)
    if not gpus:
        return ""
    if node is not None and node.per_gpu_types:
        mask = 0
        for r in resources:
            mask |= r.gpu_mask
        if bin(mask).count("1") == gpus:
            return ",".join(f"gpu:{per_gpu_type(node.gpu_type, g)}:1" for g in indices_of(mask))
    gpu_type = node.gpu_type if node is not None else None
    return f"gpu:{gpu_type}:{gpus}" if gpu_type and gpu_type != UNTYPED_GPU else f"gpu:{gpus}"


def _sbatch_error(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else "no reason given"
    return last.split("error: ", 1)[-1]
