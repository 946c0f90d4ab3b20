"""``gangmaster diagnose JOB.yaml``: will the job's gangs start on this cluster, and if
not, why — per role, in numbers, with the jobs holding the capacity and what would
unblock it (:mod:`gangmaster.am.ops.diagnosis`).

The run is the real one, in virtual time: the ``--after`` jobs are submitted first
and run (each through its own AM, until its gangs have started), the scenario's
events due by then happen, then JOB is submitted and its AM runs until its gangs
start or have waited ``--wait`` seconds; the diagnosis is the AM's own. With
``--snapshot`` the cluster is a real one's, as an operator dumped it (YARN REST,
kubectl, Slurm JSON): its nodes, the unhealthy ones marked so at the RM, and what
runs there booked as containers of placeholder applications named after their jobs
(each lasting until its expected end when the snapshot knows it).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from gangmaster.am.core.victims import Outlook, Priority, may_preempt
from gangmaster.conf.limits import MAX_DURATION_S
from gangmaster.tools.arg_types import count, epoch_seconds, seconds
from gangmaster.tools.rmsim.preemptible import Preemptible, Standing
from gangmaster.tools.snapshot_cmd import TOPOLOGY_CONF_HELP


def add_parser(sub):
    parser = sub.add_parser(
        "diagnose", help="say whether a job's gangs can start on a cluster, and if not why, in numbers",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run JOB through the ApplicationMaster on the RM simulator in virtual time and print, for "
                    "each gang that cannot start, per role: instances needed, placeable now (the other roles "
                    "placed as the gang would place them), the shortfall, what one instance asks (vcores after "
                    "requestRatio), and the reasons nodes turn it down with their counts, each marked whether "
                    "waiting helps (resources held by other jobs) or not (unhealthy or blacklisted machines, "
                    "labels, GPU types, machines too small, the per-machine cap, the gang's own instances); "
                    "whether it fits the empty cluster; the jobs holding the capacity and when they are "
                    "expected to end; and the smallest change that lets it start, each checked by placing the "
                    "whole gang.",
        epilog="Order of events: the --after jobs are submitted first and run until their gangs have started; "
               "the --scenario's events due by then happen (e.g. machines blacklisted at time 0); JOB is "
               "submitted and its gangs wait at most --wait seconds.\n\n"
               "--json prints one object: {\"job\", \"gang_can_start\", \"fits_empty_cluster\", "
               "\"healthy_machines\", \"machines\", \"roles\": {ROLE: {\"needed\", \"placeable\", \"shortfall\", "
               "\"asked\": {\"vcores\", \"memoryMB\", \"gpus\", \"gpuMilli\" (a share of one GPU)}, \"reasons\": [{\"code\", \"count\", "
               "\"waiting_helps\", \"detail\"}]}}, \"blocking_jobs\": [{\"job\", \"machines\", \"holds\", "
               "\"expected_end_s\"}], \"hint\", \"gangs\": {GANG: the same, per gang, with \"preempts\": [{\"job\", "
               "\"priority\", \"gpus\", \"lost_gpu_h\"}] (whom preemption would take for it, the fewest GPU-hours "
               "of lost work first) and, on a snapshot, \"preemption\": {\"engine\", \"state\" (on, off or unknown), "
               "\"why\"}}}.\n\n"
               "Reason codes: unhealthy (blacklisted or lost), label-mismatch, gpu-type-mismatch, "
               "gpu-node-reserved, role-cap-reached (maxInstancesPerNode), role-failed-here, and for each "
               "resource R (memory, vcores, gpus, gpu-mask, gpu-share (a share of one GPU, counted in milli of one GPU), "
               "ports): R-too-small (the machine's capacity), "
               "R-held-by-gang (the gang's own instances take it) — waiting does not help any of these — and "
               "R-exhausted (other jobs hold it: waiting helps); network-domain (a gang or role whose "
               "networkDomain is required: no single domain of the level has room for it now, with the best "
               "domain's room; waiting helps) and network-domain-too-small (not even the empty cluster has "
               "one).\n\n"
               "--snapshot FILE... diagnoses against a real cluster's state instead of --cluster: Hadoop YARN's "
               "/ws/v1/cluster/nodes (+ /ws/v1/cluster/apps) JSON, `kubectl get nodes -o json` (+ `kubectl get "
               "pods -A -o json`), or Slurm's `sinfo --json` / `squeue --json` / `scontrol show node --json`; "
               "the format is detected. --yarn-rm URL|DIR reads YARN's three answers (/nodes, /apps, /scheduler) from the "
               "running RM at once.\n\n"
               "Exit status: 0 every gang can start, 1 one cannot, 2 bad input (the message names the file "
               "and field).")
    parser.add_argument("job", help="the job file (OpenPAI v2 YAML, see conf/jobs/README.md)")
    parser.add_argument("--cluster", help="cluster file (default: the embedded conf/clusters/default.yaml)")
    parser.add_argument("--scenario", help="fault scenario YAML played on the RM's clock (e.g. mark_unhealthy "
                                           "at time 0: machines blacklisted before JOB is submitted)")
    parser.add_argument("--after", nargs="+", default=[], metavar="OTHER.yaml",
                        help="jobs submitted first, which run (until their gangs start, at most "
                             "am.simulated_max_wait_s) before JOB is submitted")
    parser.add_argument("--wait", type=seconds, default=60.0,
                        help="virtual seconds JOB's gangs may wait to start before the diagnosis (default 60)")
    parser.add_argument("--snapshot", nargs="+", metavar="FILE",
                        help="a real cluster's state as its engine dumps it (YARN, Kubernetes or Slurm JSON), "
                             "instead of --cluster")
    parser.add_argument("--yarn-rm", metavar="URL|DIR",
                        help="like --snapshot, read now from a running YARN ResourceManager: its web address "
                             "(http://HOST:8088) or a `gangmaster yarn local-cluster` folder")
    parser.add_argument("--snapshot-time", type=epoch_seconds, metavar="EPOCH",
                        help="with --snapshot: when it was taken, in Unix seconds: expected ends (Slurm end_time, "
                             "Kubernetes deadlines) are counted from it (default: the time the snapshot says, "
                             "else the files' modification time)")
    parser.add_argument("--topology-conf", metavar="FILE", help="with --snapshot: " + TOPOLOGY_CONF_HELP)
    parser.add_argument("--priority", type=count(-(2 ** 31), 2 ** 31 - 1), metavar="N",
                        help="with --snapshot or --yarn-rm: JOB's priority in the engine's own terms (a "
                             "PriorityClass value, a YARN application priority), which the running jobs' are "
                             "compared with to say whom it would preempt there (default: the job's gangmaster: "
                             "priority)")
    parser.add_argument("--config", help="override file for conf/defaults.yaml (am:, selection:)")
    parser.add_argument("--seed", type=int, help="selection seed (default: selection.seed)")
    parser.add_argument("--json", action="store_true", help="print the diagnosis as one JSON object")
    parser.set_defaults(func=_run)
    return parser


def _run(args) -> int:
    from dataclasses import replace

    from gangmaster.am.spec.am_settings import AMSettings
    from gangmaster.am.spec.jobspec import load_job
    from gangmaster.conf.fields import ConfigError
    from gangmaster.conf.settings import Settings
    from gangmaster.selectors.cluster_file import default_cluster_path, load_cluster_specs
    from gangmaster.selectors.selector import selector_classes
    from gangmaster.selectors.settings import SelectionSettings
    from gangmaster.tools.rmsim.scenario import Scenario

    if args.yarn_rm is not None and (args.snapshot or args.snapshot_time is not None):
        raise ConfigError("--yarn-rm", "", "either --snapshot FILE... or --yarn-rm (a snapshot read now), not both",
                          " ".join(args.snapshot or []) or args.snapshot_time)
    if args.priority is not None and not (args.snapshot or args.yarn_rm is not None):
        raise ConfigError("--priority", "", "it only with --snapshot or --yarn-rm (a priority in the snapshot "
                                            "engine's terms)", args.priority)
    if args.topology_conf is not None and not args.snapshot:
        raise ConfigError("--topology-conf", "", "it only with --snapshot (a Slurm snapshot's topology.conf)",
                          args.topology_conf)
    if args.snapshot_time is not None and not args.snapshot:
        raise ConfigError("--snapshot-time", "", "it only with --snapshot (it says when the snapshot was taken)",
                          args.snapshot_time)
    settings = Settings(args.config)
    am_settings = AMSettings.from_fields(settings.section("am"))
    selection = SelectionSettings.from_fields(settings.section("selection"))
    if args.seed is not None:
        selection = replace(selection, seed=args.seed)
    known = list(selector_classes())
    job = load_job(args.job, selectors=known)
    after = [load_job(path, selectors=known) for path in args.after]
    snapshot = None
    if args.snapshot or args.yarn_rm is not None:
        flag = "--snapshot" if args.snapshot else "--yarn-rm"
        if args.cluster:
            raise ConfigError(flag, "", f"either --cluster or {flag}, not both", args.cluster)
        snapshot = _load_snapshot(args.snapshot, args.snapshot_time, args.yarn_rm, args.topology_conf)
        specs = snapshot.specs
    else:
        specs = load_cluster_specs(args.cluster or default_cluster_path())
    scenario = Scenario.load(args.scenario, {s.host for s in specs}) if args.scenario else None
    # JOB is diagnosed here once it has waited --wait: the AM's own limit must not end it first. The
    # --after jobs get the usual limit to start (am.simulated_max_wait_s).
    after_limit_s = am_settings.max_wait_s or am_settings.simulated_max_wait_s
    am_settings = replace(am_settings, max_wait_s=None, simulated_max_wait_s=MAX_DURATION_S)
    with tempfile.TemporaryDirectory(prefix="gangmaster-diagnose-") as work:
        result = diagnose_job(job, specs, Path(work), am_settings, selection, scenario=scenario, after=after,
                              wait_s=args.wait, snapshot=snapshot, after_limit_s=after_limit_s,
                              priority=args.priority)
    for note in (snapshot.notes if snapshot is not None else ()):
        print(f"gangmaster diagnose: snapshot: {note}", file=sys.stderr)
    for warning in result["warnings"]:
        print(f"gangmaster diagnose: snapshot: {warning}", file=sys.stderr)
    for name in result["after_not_started"]:
        print(f"gangmaster diagnose: --after job {name} had not started after {after_limit_s:g}s "
              f"(am.simulated_max_wait_s); diagnosing {job.name} anyway", file=sys.stderr)
    if args.json:
        shown = {k: v for k, v in result.items() if k not in ("text", "after_not_started", "warnings")}
        print(json.dumps(shown, indent=2))
    else:
        print(result["text"])
    return 0 if result["gang_can_start"] else 1


def _load_snapshot(paths: list[str] | None, taken_at: float | None, yarn_rm: str | None,
                   topology_conf: str | None = None):
    from gangmaster.tools.snapshots import load_snapshot   # its SnapshotError is a ConfigError: exit 2
    if yarn_rm is not None:
        from gangmaster.tools.yarn.live_snapshot import fetch_snapshot
        return fetch_snapshot(yarn_rm)
    return load_snapshot([Path(p) for p in paths or []], taken_at=taken_at, topology_conf=topology_conf)


def diagnose_job(job, specs, work: Path, am_settings, selection, *, scenario=None, after=(), wait_s: float = 60.0,
                 snapshot=None, after_limit_s: float = 86400.0, priority: int | None = None) -> dict:
    """Run the ``after`` jobs (until their gangs start, at most ``after_limit_s``), then
    ``job``, in virtual time, and return the diagnosis of ``job`` as the JSON object
    ``--json`` prints (with ``"text"``, what is printed without, ``"after_not_started"``,
    the ``after`` jobs whose gangs had not started, and ``"warnings"``, what of the
    snapshot could not be booked as given). On a snapshot, ``priority`` is ``job``'s in the
    engine's terms (None: its own), to say whom it would preempt there."""
    from gangmaster.am.ops.diagnosis import Diagnosis
    from gangmaster.am.spec.jobspec_model import gang_name
    from gangmaster.tools.job_runner import SimulatedRuns

    runs = SimulatedRuns(specs, am_settings, selection, scenario=scenario)
    try:
        warnings = book_snapshot(runs.sim, snapshot) if snapshot is not None else []
        loop = runs.sim.loop
        others = [runs.submit(other, work / f"after-{k}-{other.name}") for k, other in enumerate(after)]
        limit = loop.now() + after_limit_s
        while not all(_started_or_done(r) for r in others) and _step(loop, limit):
            pass
        _step(loop, loop.now())   # the events due now (a scenario's at: 0) happen before JOB arrives
        run = runs.submit(job, work / job.name)
        if snapshot is not None and snapshot.preemption is not None and run.ams:
            ranked = {run.app_id: priority} if priority is not None else {}
            run.am.why.preemption = SnapshotJobs(runs.core, snapshot, ranked).outlook
        deadline = loop.now() + wait_s
        while not _started_or_done(run) and _step(loop, deadline):
            pass
        am = run.am
        diagnoses: list[Diagnosis] = []
        for gang in am.gangs:
            if gang.pending and gang.acquisition is not None:
                diagnoses.append(am.why.diagnose(gang))
            else:
                diagnoses.append(Diagnosis.started(job.name, gang.name, gang.roles, runs.sim.client.cluster_nodes()))
        if not am.gangs:   # refused at submission: it can never run here
            diagnoses = [am.why.diagnose_roles(gang_name(names), job.gang_roles(number))
                         for number, names in enumerate(job.gangs)]
        not_started = [r.job.name for r in others if not _started_or_done(r)]
    finally:
        runs.close()
    return {**_combined(job.name, diagnoses), "after_not_started": not_started, "warnings": warnings}


def _step(loop, until: float) -> bool:
    """Run the next event due by ``until``; False when there is none."""
    next_time = loop.next_time()
    if next_time is None or next_time > until:
        return False
    loop.step()
    return True


def _started_or_done(run) -> bool:
    return run.done or (bool(run.am.gangs) and not any(g.pending for g in run.am.gangs))


def _combined(job: str, diagnoses) -> dict:
    """One object for the job: every role of every gang; per gang, its own diagnosis."""
    first = diagnoses[0]
    roles, blocking, hints = {}, [], []
    for d in diagnoses:
        roles.update(d.to_dict()["roles"])
        blocking += [b.to_dict() for b in d.blocking_jobs]
        if d.hint:
            hints.append(d.hint if len(diagnoses) == 1 else f"gang {d.gang}: {d.hint}")
    return {"job": job, "gang_can_start": all(d.gang_can_start for d in diagnoses),
            "fits_empty_cluster": all(d.fits_empty_cluster for d in diagnoses),
            "healthy_machines": first.healthy_machines, "machines": first.machines, "roles": roles,
            "blocking_jobs": blocking, "hint": "; ".join(hints),
            "gangs": {d.gang: d.to_dict() for d in diagnoses},
            "text": "\n".join(d.text() for d in diagnoses)}


class SnapshotJobs(Preemptible):
    """The snapshot's running jobs, booked as placeholder applications (:func:`book_snapshot`,
    at the RM's time 0, when the snapshot was taken), as its engine ranks them for preemption
    (:mod:`gangmaster.tools.snapshots.preemption_rules`): each with the priority, queue and
    time run the snapshot gives; a job the snapshot gives no priority is no candidate. The
    jobs gangmaster runs itself (JOB, the ``--after`` jobs) keep their own priority, but
    those ``ranked`` (app id -> a priority in the engine's terms: ``--priority``)."""

    def __init__(self, core, snapshot, ranked: dict[str, int]):
        rules = snapshot.preemption
        super().__init__(core, rules.rule or may_preempt)
        self.snapshot, self.rules, self.ranked = snapshot, rules, ranked
        self.placeholders = {a.job for a in snapshot.running}

    def standing(self, app) -> Standing | None:
        if app.app_id in self.ranked:
            return Standing(app.queue, Priority(0, self.ranked[app.app_id]))
        known = self.snapshot.standing.get(app.name)
        if known is not None:
            if known.priority is None:
                return None
            return Standing(known.queue, Priority(0, known.priority), None if known.ran_s is None else -known.ran_s)
        if app.name in self.placeholders:   # ("(unattributed)", a job the listing gives nothing of)
            return None
        return super().standing(app)

    def outlook(self, app_id: str, roles) -> Outlook:
        """What the diagnosis of ``app_id``'s waiting gang ``roles`` is told under the engine's rules."""
        rules = self.rules
        return super().outlook(app_id, roles, None, engine=rules.engine, state=rules.state, why=rules.why,
                               judged=rules.rule is not None)


def book_snapshot(sim, snapshot) -> list[str]:
    """Make the simulated RM hold what the snapshot says: each job's running allocations
    as containers of a placeholder application of that name, on their hosts, lasting
    until their expected end (else until stopped); then unhealthy nodes marked so (a
    drained node keeps what runs on it).

    A snapshot is taken from a live system and may not add up (a pod counted on a node
    it overcommits, a host missing from the node list): what cannot be booked as given
    is booked as far as the host has room, or skipped, and said in the returned
    warnings."""
    from gangmaster.protocol.rm_protocol import (AllocateRequest, ApplicationSubmission, ContainerLaunch, LaunchContext,
                                           ResourceRequest, StartContainers)
    from gangmaster.selectors.resources import ResourceDescriptor
    from gangmaster.tools.rmsim.workload import raw_task_env

    warnings = []
    hosts = {spec.host: spec for spec in snapshot.specs}
    left = {h: [s.vcores, s.memory_mb, s.gpus] for h, s in hosts.items()}   # what is not booked yet
    by_job: dict[str, list] = {}
    for a in snapshot.running:
        if a.host not in left:
            warnings.append(f"{a.job} runs on {a.host}, which is not among the snapshot's nodes: ignored")
            continue
        room = left[a.host]
        asked = (min(a.vcores, room[0]), min(a.memory_mb, room[1]), min(a.gpus, room[2]))
        if asked != (a.vcores, a.memory_mb, a.gpus):
            warnings.append(f"{a.job} on {a.host}: {a.vcores:g} vcores, {a.memory_mb} MB, {a.gpus} GPU(s) do not fit "
                            f"what is left of the host; booked {asked[0]:g}, {asked[1]}, {asked[2]}")
        if not any(asked):
            continue
        room[0], room[1], room[2] = room[0] - asked[0], room[1] - asked[1], room[2] - asked[2]
        by_job.setdefault(a.job, []).append((a, asked))
    client = sim.client
    for name, allocations in by_job.items():
        app_id = client.submit(ApplicationSubmission(name))
        client.register(app_id)
        asks = tuple(ResourceRequest(k + 1, ResourceDescriptor(memory_mb=m, vcores=v, gpus=g), 1, host=a.host,
                                     relax_locality=False) for k, (a, (v, m, g)) in enumerate(allocations))
        granted = list(client.allocate(AllocateRequest(app_id, 1, asks=asks)).allocated)
        granted += client.allocate(AllocateRequest(app_id, 1)).allocated
        launches = []
        for container in granted:
            a, _ = allocations[container.request_id - 1]
            env = raw_task_env(a.expected_end_s) if a.expected_end_s is not None else {}
            launches.append(ContainerLaunch(container.container_id, LaunchContext(("placeholder",),
                                                                                  tuple(env.items()))))
        client.start_containers(StartContainers(tuple(launches)))
    # Marked after the bookings: a drained or failing node still runs what it ran.
    for host, state in sorted(snapshot.unhealthy.items()):
        if host in hosts:
            sim.core.mark_unhealthy(host, state or "unhealthy")
        else:
            warnings.append(f"unhealthy host {host} is not among the snapshot's nodes: ignored")
    return warnings
