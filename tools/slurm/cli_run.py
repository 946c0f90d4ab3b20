"""``gangmaster run JOB.yaml --rm slurm``: the run command's Slurm branch."""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path


def run_on_slurm(args, jobs, am_settings, selection, echo) -> int:
    from gangmaster.am.barrier_config import BarrierConfig
    from gangmaster.am.rm_protocol import RMError
    from gangmaster.tools.run_cmd import new_work_dir, print_metrics_url, print_reports

    from .client import SlurmError, SlurmRMClient
    from .runs import SlurmRuns

    if args.rm != "slurm":
        print("gangmaster run: --partition is a Slurm partition: it needs --rm slurm", file=sys.stderr)
        return 2
    unsupported = [f"--{name}" for name in ("cluster", "queues", "scenario") if getattr(args, name)]
    if args.live:
        unsupported.append("--live")
    if unsupported:
        print(f"gangmaster run: {', '.join(unsupported)} cannot be used with --rm slurm (Slurm's nodes are the "
              f"cluster, its partitions the queues, and every run is live)", file=sys.stderr)
        return 2
    if args.partition and any(not (c.isalnum() or c in "-_.") for c in args.partition):
        print(f"gangmaster run: --partition {args.partition!r}: expected a Slurm partition name", file=sys.stderr)
        return 2
    conf = os.environ.get("SLURM_CONF")
    if conf and not Path(conf).is_file():
        print(f"gangmaster run: SLURM_CONF={conf} is not a file: point it at the cluster's slurm.conf "
              f"(`gangmaster slurm local-cluster start` prints it)", file=sys.stderr)
        return 2
    base = Path(args.work_dir) if args.work_dir else new_work_dir(jobs[0].name)
    client = SlurmRMClient(base / "slurm", args.partition)
    try:   # before anything is written: a run Slurm cannot take leaves no folder behind
        client.ping()
    except SlurmError as exc:
        print(f"gangmaster run: cannot reach Slurm (is SLURM_CONF set? is slurmctld running?): {exc.message}",
              file=sys.stderr)
        return 2
    base.mkdir(parents=True, exist_ok=True)
    if echo is not None and not conf:
        echo("SLURM_CONF is not set: using the Slurm cluster of this machine's default configuration")
    runs = SlurmRuns(base, args.partition, am_settings, selection, BarrierConfig.load(args.config), echo=echo,
                     client=client)
    runs.prefix_lines = len(jobs) > 1
    interrupted = None
    try:
        work_dirs = [base if len(jobs) == 1 else base / f"{k}-{job.name}" for k, job in enumerate(jobs)]
        for job, work_dir in zip(jobs, work_dirs):
            runs.check_work_dir(job, work_dir)
        for job, work_dir in zip(jobs, work_dirs):
            runs.submit(job, work_dir, "default")
        print_metrics_url(runs, args.json)
        finished = runs.run(args.timeout)
    except KeyboardInterrupt:
        finished, interrupted = False, signal.SIGINT
    except RMError as exc:   # Slurm did not answer while the jobs were submitted
        print(f"gangmaster run: {exc.message}", file=sys.stderr)
        return 1
    finally:
        runs.shutdown()
        interrupted = interrupted or runs.interrupted
    print_reports(runs, base, args.json)
    if interrupted is not None:
        print(f"gangmaster run: interrupted by {interrupted.name}; its Slurm jobs were cancelled", file=sys.stderr)
        return 128 + interrupted
    if runs.failure is not None:   # an AM failed: run() ended early, --timeout had nothing to do with it
        print(f"gangmaster run: {runs.failure}; the run was stopped and its Slurm jobs were cancelled",
              file=sys.stderr)
        return 1
    if not finished:
        print("gangmaster run: stopped before every job finished (--timeout); its Slurm jobs were cancelled",
              file=sys.stderr)
        return 1
    return 0 if all(r.outcome == "succeeded" for r in runs.runs) else 1
