"""``gangmaster run JOB.yaml --rm yarn``: the run command's YARN branch."""
from __future__ import annotations

import signal
import sys
from pathlib import Path


def run_on_yarn(args, jobs, am_settings, echo) -> int:
    from gangmaster.protocol.rm_protocol import RMError
    from gangmaster.tools.run_cmd import new_work_dir, print_reports

    from .runs import YarnRuns
    from .target import TargetError, resolve

    if args.rm != "yarn":
        print("gangmaster run: --yarn-rm names a YARN cluster: it needs --rm yarn", file=sys.stderr)
        return 2
    unsupported = [f"--{name}" for name in ("queues", "scenario", "partition") if getattr(args, name, None) is not None]
    if args.live:
        unsupported.append("--live")
    if unsupported:
        print(f"gangmaster run: {', '.join(u.replace('_', '-') for u in unsupported)} cannot be used with --rm yarn "
              f"(YARN's nodes are the cluster, its queues the queues, and every run is live)", file=sys.stderr)
        return 2
    if len(jobs) > 1 and am_settings.metrics_port:
        print(f"gangmaster run: --metrics-port {am_settings.metrics_port} with several jobs on --rm yarn: each job's "
              f"AM serves its own endpoint from its YARN container, and two on one host cannot share a port; give "
              f"--metrics-port 0 (each any free port, printed)", file=sys.stderr)
        return 2
    try:
        target = resolve(args.yarn_rm, args.cluster)
    except TargetError as exc:
        print(f"gangmaster run: {exc}", file=sys.stderr)
        return 2
    am_options = []
    for flag, value in (("--config", args.config), ("--seed", args.seed), ("--max-wait", args.max_wait),
                        ("--metrics-port", args.metrics_port), ("--metrics-host", args.metrics_host)):
        if value is not None:
            am_options += [flag, str(Path(value).resolve()) if flag == "--config" else str(value)]
    runs = YarnRuns(target, am_settings, echo, am_options, args.cluster)
    try:   # before any folder is made: a cluster that does not answer is said so, nothing left behind
        runs.client.cluster_nodes()
    except RMError as exc:
        runs.shutdown()
        print(f"gangmaster run: YARN at {target.rest} does not answer ({exc.message}); is the cluster up?",
              file=sys.stderr)
        return 2
    base = Path(args.work_dir) if args.work_dir else new_work_dir(jobs[0].name)
    base.mkdir(parents=True, exist_ok=True)
    runs.prefix_lines = len(jobs) > 1
    runs.report_json = args.json
    try:
        work_dirs = [base if len(jobs) == 1 else base / f"{k}-{job.name}" for k, job in enumerate(jobs)]
        for job, work_dir in zip(jobs, work_dirs):
            runs.check_work_dir(job, work_dir)
        for job, work_dir in zip(jobs, work_dirs):
            runs.submit(job, work_dir, "default")
        finished = runs.run(args.timeout)
    except KeyboardInterrupt:
        finished = False
        runs.interrupted = runs.interrupted or signal.SIGINT
    except RMError as exc:   # YARN did not answer or refused while the jobs were submitted
        print(f"gangmaster run: {exc.message}", file=sys.stderr)
        return 1
    finally:
        runs.shutdown()
    print_reports(runs, base, args.json)
    if runs.interrupted is not None:
        print(f"gangmaster run: interrupted by {runs.interrupted.name}; its YARN applications were killed",
              file=sys.stderr)
        return 128 + runs.interrupted
    if not finished:
        print("gangmaster run: stopped before every job finished (--timeout); its YARN applications were killed",
              file=sys.stderr)
        return 1
    return 0 if all(r.outcome == "succeeded" for r in runs.runs) else 1
