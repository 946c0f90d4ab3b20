"""``gangmaster run JOB.yaml``: run a job through the AM on the RM simulator."""
from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from gangmaster.tools.arg_types import port_number, seconds

DEFAULT_RUNS_DIR = "gangmaster-runs"


def add_parser(sub):
    parser = sub.add_parser(
        "run", help="run a job through the ApplicationMaster on the RM simulator (or on Slurm or YARN: --rm)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a job (OpenPAI v2 YAML, see conf/jobs/README.md) through the ApplicationMaster on "
                    "the ResourceManager simulator: the AM places every gang all-or-nothing, asks the RM for "
                    "every instance, starts them together, restarts a gang when a task fails, and prints "
                    "where every task ran, each attempt, and the outcome.",
        epilog="Without --live the commands are not run: each task lasts its simulated duration "
               "(gangmaster.simulatedDurationSeconds, default 60 s) in virtual time, so the run takes "
               "moments. With --live each task is a real local process, told its simulated host, ports and "
               "GPUs through the environment (OpenPAI's PAI_* variables and GANGMASTER_*), and the gang's "
               "barriers are served by a real gRPC coordinator in the AM.\n\n"
               "The work folder keeps the job's identity (job.json: its name, a hash of its spec and of "
               "the cluster), the AM's journal (journal.jsonl), the log of every AM process (am-<n>.log), "
               "and with --live the tasks' logs (tasks/) and outputs (output/). A work folder belongs to "
               "one job: running another job (or the same job with a changed spec or cluster) into it is "
               "refused. Running the same job into it again: when its run there finished, the job is not "
               "run again and its recorded outcome is reported; when the run was interrupted (Ctrl-C, "
               "--timeout, killed, the machine went down) it is resumed: its tasks ended with that run, so "
               "the attempts that were running end as interrupted and start again as new attempts (an "
               "interruption does not count against the retries), and the history of both runs is "
               "reported.\n\n"
               "The job ends SUCCEEDED or FAILED by its completion and retry policy; KILLED or FAILED when "
               "the ResourceManager ends it (a scenario's kill_app, AM attempts used up), with the RM's "
               "reason. A task that cannot be launched (e.g. a command too long to exec) fails its attempt. "
               "Without --live, a job that can make no progress (it waits for room that nothing still to "
               "happen on the cluster can free: no task will end, no scenario event is left) fails at once "
               "with why it waits.\n\n"
               "Exit status: 0 the job succeeded, 1 it failed, was killed or did not finish, 2 bad input "
               "(the message names the file and field) or a work folder of another job, 130 / 143 "
               "interrupted by Ctrl-C / SIGTERM (with --live, after every task's processes are stopped: "
               "nothing a run starts outlives it, see README: Processes).")
    parser.add_argument("job", nargs="+", help="job file(s); several run at once on the same cluster, "
                                               "each with its own AM")
    parser.add_argument("--cluster", help="cluster file (default: the embedded conf/clusters/default.yaml)")
    parser.add_argument("--live", action="store_true", help="run the commands as real local processes")
    parser.add_argument("--work-dir", help=f"folder for the journal and logs (default: "
                                           f"./{DEFAULT_RUNS_DIR}/<job>-<n>, a new one each run); a folder "
                                           f"holding an earlier run of the same job is resumed, or reported "
                                           f"when that run finished (see below)")
    parser.add_argument("--queues", help="queue file for the RM (see README: ResourceManager simulator; "
                                         "policy: reserve holds nodes for a waiting big gang); "
                                         "jobs go to the queues in order, cycling; default: one queue")
    parser.add_argument("--scenario", help="fault scenario YAML played on the RM's clock (lose_node, "
                                           "kill_am, fail_container, ...; virtual seconds, or seconds since "
                                           "the start with --live)")
    parser.add_argument("--rm", choices=("sim", "slurm", "yarn"), default="sim",
                        help="the ResourceManager: sim (the simulator, default), slurm (the Slurm cluster "
                             "SLURM_CONF points at: real processes as Slurm jobs, see README: Slurm; "
                             "--work-dir must be on a file system the nodes share) or yarn (the YARN cluster "
                             "--yarn-rm names: the AM runs in a YARN container, see README: YARN)")
    parser.add_argument("--partition", help="with --rm slurm: the Slurm partition to run in (default: the "
                                            "cluster's default partition; its nodes only)")
    parser.add_argument("--yarn-rm", metavar="URL|DIR",
                        help="with --rm yarn: the ResourceManager's web address (http://HOST:8088) or the folder of "
                             "a `gangmaster yarn local-cluster` (default: $YARN_RM, else ./gangmaster-yarn); with "
                             "it, --cluster names the nodes' labels, GPU types and ports by YARN's node names")
    parser.add_argument("--account", help="with --rm slurm: the Slurm account to charge (sbatch --account)")
    parser.add_argument("--qos", help="with --rm slurm: the Slurm quality of service (sbatch --qos)")
    parser.add_argument("--time", metavar="LIMIT", help="with --rm slurm: each Slurm job's time limit, as sbatch "
                                                        "takes it (minutes, H:M:S, D-H:M:S; not --timeout, the run's)")
    parser.add_argument("--dry-run", action="store_true",
                        help="with --rm slurm: print the sbatch commands (each gang one heterogeneous job, a "
                             "component per host) and the job script the run would use, and submit nothing; "
                             "it needs a reachable Slurm, whose nodes (sinfo) the gang is placed on")
    add_am_options(parser, metrics_port_note=" (several jobs: one endpoint, labelled job_name and app_id; with "
                                              "--rm yarn the AM serves it from its container, each job's its own, "
                                              "and gives YARN its address as the tracking URL)",
                   timeout_help="with --live: give up after this many seconds (default 3600)")
    parser.set_defaults(func=_run)
    return parser


def add_am_options(parser, metrics_port_note: str, timeout_help: str) -> None:
    """The options ``gangmaster run`` and ``gangmaster am`` share: the AM's settings
    (read back by :func:`am_and_selection_settings`), the time limit and how the report
    is printed."""
    parser.add_argument("--config", help="override file for conf/defaults.yaml (am:, selection:, barrier:)")
    parser.add_argument("--seed", type=int, help="selection seed (default: selection.seed)")
    parser.add_argument("--metrics-port", type=port_number, help="serve Prometheus metrics on this port (0: any "
                                                                 "free port); prints \"metrics: URL\""
                                                                 + metrics_port_note)
    parser.add_argument("--metrics-host", metavar="ADDR",
                        help="the address --metrics-port listens on (default: am.metrics_host, 127.0.0.1, this "
                             "machine only); 0.0.0.0 lets a Prometheus on another host scrape it, and shows "
                             "anyone who reaches the port the job names, roles and hosts of /why and the status "
                             "page: the endpoint has no authentication")
    parser.add_argument("--timeout", type=seconds, default=3600.0, help=timeout_help)
    parser.add_argument("--max-wait", type=seconds, metavar="S",
                        help="fail the job when a gang has waited S seconds for room, with its diagnosis as the "
                             "reason (default: am.max_wait_s, no limit; without --live a day of virtual time, "
                             "am.simulated_max_wait_s). A gang that waited am.explain_after_s (60) is diagnosed in "
                             "the log: per role needed, placeable, shortfall, reasons, whether waiting helps, the "
                             "jobs holding the capacity, a hint; /why serves it beside /metrics")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress lines, only the report")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def am_and_selection_settings(args):
    """The ``am:`` and ``selection:`` settings of ``--config``, with ``--metrics-port``, ``--metrics-host`` and
    ``--seed`` applied (the options :func:`add_am_options` adds)."""
    from dataclasses import replace

    from gangmaster.am.spec.am_settings import AMSettings
    from gangmaster.conf.settings import Settings
    from gangmaster.selectors.settings import SelectionSettings

    settings = Settings(args.config)
    am_settings = AMSettings.from_fields(settings.section("am"))
    if args.metrics_port is not None:
        am_settings = replace(am_settings, metrics_port=args.metrics_port)
    if args.metrics_host is not None:
        am_settings = replace(am_settings, metrics_host=args.metrics_host)
    if args.max_wait is not None:
        am_settings = replace(am_settings, max_wait_s=args.max_wait)
    selection = SelectionSettings.from_fields(settings.section("selection"))
    if args.seed is not None:
        selection = replace(selection, seed=args.seed)
    return am_settings, selection


def _run(args) -> int:
    from gangmaster.am.spec.jobspec import load_job
    from gangmaster.conf.settings import Settings
    from gangmaster.selectors.cluster_file import default_cluster_path, load_cluster_specs
    from gangmaster.selectors.selector import selector_classes
    from gangmaster.tools.rmsim.ledger import NodeLedger
    from gangmaster.tools.rmsim.queues import load_queues
    from gangmaster.tools.rmsim.rm_settings import RMSettings
    from gangmaster.tools.rmsim.scenario import Scenario

    am_settings, selection = am_and_selection_settings(args)
    rm_knobs = RMSettings.from_fields(Settings(args.config).section("rm"))
    jobs = [load_job(path, selectors=list(selector_classes())) for path in args.job]
    if args.rm == "yarn" or args.yarn_rm:
        from gangmaster.tools.yarn.cli_run import run_on_yarn
        return run_on_yarn(args, jobs, am_settings, None if args.quiet or args.json else print_line)
    if args.rm == "slurm" or args.partition or args.account or args.qos or args.time or args.dry_run:
        return _run_on_slurm(args, jobs, am_settings, selection)
    specs = load_cluster_specs(args.cluster or default_cluster_path())
    queues = load_queues(args.queues, NodeLedger(specs)) if args.queues else None
    queue_names = [q.name for q in queues] if queues else ["default"]
    scenario = Scenario.load(args.scenario, {s.host for s in specs}) if args.scenario else None
    echo = None if args.quiet or args.json else (lambda line: print(line, flush=True))
    base = Path(args.work_dir) if args.work_dir else new_work_dir(jobs[0].name)

    if args.live:
        from gangmaster.am.barrier.config import BarrierConfig
        from gangmaster.tools.job_runner import LiveRuns
        runs = LiveRuns(specs, base, am_settings, selection, queues, barrier_config=BarrierConfig.load(args.config),
                        rm_settings=rm_knobs, scenario=scenario, echo=echo)
    else:
        from gangmaster.tools.job_runner import SimulatedRuns
        runs = SimulatedRuns(specs, am_settings, selection, queues, scenario, echo=echo,
                             scheduling_interval_s=rm_knobs.scheduling_interval_s,
                             allocation_expiry_s=rm_knobs.allocation_expiry_s)
    if rm_knobs.preemption:
        runs.monitor_preemption(rm_knobs.preemption_grace_s)
    runs.prefix_lines = len(jobs) > 1
    interrupted = None
    runs.cluster_name = args.cluster or "default"
    try:
        work_dirs = [base if len(jobs) == 1 else base / f"{k}-{job.name}" for k, job in enumerate(jobs)]
        for job, work_dir in zip(jobs, work_dirs):   # refuse a folder of another job before running any
            runs.check_work_dir(job, work_dir)
        for k, (job, work_dir) in enumerate(zip(jobs, work_dirs)):
            runs.submit(job, work_dir, queue_names[k % len(queue_names)])
        print_metrics_url(runs, args.json)
        finished = runs.run(args.timeout) if args.live else runs.run()
    except KeyboardInterrupt:
        finished, interrupted = False, signal.SIGINT
    finally:
        if args.live:
            runs.shutdown()
            interrupted = interrupted or runs.interrupted
        else:
            runs.close()
    print_reports(runs, base, args.json)
    if interrupted is not None:
        stopped = f"; stopped the processes of {runs.stopped_tasks} running task(s)" if args.live else ""
        print(f"gangmaster run: interrupted by {interrupted.name}{stopped}", file=sys.stderr)
        return 128 + interrupted
    if args.live and runs.failure is not None:
        print(f"gangmaster run: {runs.failure}; the run was stopped and its tasks with it", file=sys.stderr)
        return 1
    if not finished:
        print("gangmaster run: stopped before every job finished "
              + ("(--timeout)" if args.live else f"(am.max_virtual_time_s = {am_settings.max_virtual_time_s:g})"),
              file=sys.stderr)
        return 1
    return 0 if all(r.outcome == "succeeded" for r in runs.runs) else 1


def _run_on_slurm(args, jobs, am_settings, selection) -> int:
    """``--rm slurm``: the same run on the Slurm cluster SLURM_CONF names (tools/slurm/)."""
    from gangmaster.tools.slurm.cli_run import run_on_slurm
    echo = None if args.quiet or args.json else (lambda line: print(line, flush=True))
    return run_on_slurm(args, jobs, am_settings, selection, echo)


def print_line(line: str) -> None:
    print(line, flush=True)


def new_work_dir(job_name: str) -> Path:
    """``./gangmaster-runs/<job>-<n>``, the first n not taken."""
    root = Path(DEFAULT_RUNS_DIR)
    n = 1
    while (root / f"{job_name}-{n}").exists():
        n += 1
    return root / f"{job_name}-{n}"


def print_metrics_url(runs, as_json: bool) -> None:
    if runs.metrics_url:
        print(f"metrics: {runs.metrics_url}", file=sys.stderr if as_json else sys.stdout, flush=True)


def print_reports(runs, base: Path, as_json: bool) -> None:
    """Every job's report (what ran where, each attempt, the outcome), as text or JSON."""
    from gangmaster.am.ops.run_report import format_report

    if as_json:
        print(json.dumps([_report_dict(r, runs.metrics_url_of(r)) for r in runs.runs], indent=2))
        return
    for run in runs.runs:
        print(format_report(run.result))
        if run.finished_earlier is not None:
            print("  (already finished in an earlier run into this work folder: nothing was run)")
    print(f"work folder: {base}")


def _report_dict(run, metrics_url: str) -> dict:
    result = run.result
    return {"job": run.job.name, "app_id": run.app_id, "outcome": result.outcome, "reason": result.reason,
            "work_dir": str(run.work_dir), "am_attempts": len(run.ams),
            "already_finished": run.finished_earlier is not None, "metrics_url": metrics_url or None,
            "attempts": [a.to_dict() for a in result.history()], "waiting": result.why_waiting(),
            "avoidance_dropped": [{"gang": g, "attempt": a, "role": r} for g, a, r in result.avoidance_drops()]}
