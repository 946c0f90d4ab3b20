"""``gangmaster bench slurm``: gang start on a real Slurm cluster against the RM simulator.

Gang start: the wall time from submitting a job to every task of its gang being
through its first barrier (each task writes the time it came out of ``barrier()``;
the figure is the latest of them minus the submit time). The job is the example
MPI-style gang (4 workers x 1 GPU, on NVLink nodes), each task a small Python
program that registers with the barrier coordinator, meets the others and exits.

Both runs use the same AM, settings and cluster file (``--cluster``, default the
embedded default cluster), one after the other, ``--repeat`` times each:

* **baseline**: ``gangmaster run --live``'s driver, the RM simulator in this process,
  tasks as local processes;
* **slurm**: ``gangmaster run --rm slurm``'s driver on a local Slurm cluster the
  benchmark starts from the same cluster file (one slurmctld, one slurmd per node,
  on free ports, in a temporary folder) and stops at the end: the gang is one
  heterogeneous job, each task a job step started by the job's launcher.

Printed: each run's gang start, the medians and their ratio (slurm / baseline). Needs
root and slurm-wlm (``apt-get install slurm-wlm``); says so and exits 3 without them.
"""
from __future__ import annotations

import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

from gangmaster.tools.arg_types import count
from gangmaster.tools.bench.cli import add_bench_parser

JOB = """\
protocolVersion: 2
name: bench-gang-start
type: job
taskRoles:
  worker:
    instances: 4
    resourcePerInstance: {cpu: 4, memoryMB: 16384, gpu: 1}
    commands: ["python -m gangmaster.tools.bench.slurm --task"]
    gangmaster: {nodeLabel: nvlink}
gangmaster:
  gangs: [[worker]]
  barrierTimeoutSeconds: 120
"""


def add_parser(sub):
    p = add_bench_parser(sub, "slurm", "gang start on a local Slurm cluster vs the RM simulator --live", __doc__)
    p.add_argument("--cluster", help="cluster file (default: the embedded conf/clusters/default.yaml)")
    p.add_argument("--repeat", type=count(1, 100), default=3)
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from gangmaster.am.spec.jobspec import load_job
    from gangmaster.selectors.cluster_file import default_cluster_path, load_cluster_specs
    from gangmaster.tools.job_runner import LiveRuns
    from gangmaster.tools.slurm.local_cluster import LocalCluster, Ports, missing_requirements
    from gangmaster.tools.slurm.runs import SlurmRuns

    why = missing_requirements()
    if why:
        print(f"gangmaster bench slurm: {why}", file=sys.stderr)
        return 3
    path = args.cluster or str(default_cluster_path())
    specs = load_cluster_specs(path)
    with tempfile.TemporaryDirectory(prefix="gangmaster-bench-slurm-") as tmp:
        root = Path(tmp)
        (root / "job.yaml").write_text(JOB)
        job = load_job(root / "job.yaml")
        cluster = LocalCluster(root / "cluster")
        cluster.start(specs, Ports(_free_ports(6870, 1), _free_ports(17600, len(specs))), source=path)
        saved = os.environ.get("SLURM_CONF")
        os.environ["SLURM_CONF"] = str(cluster.conf_path)   # the Slurm client, and the tasks, use it
        try:
            figures = {"baseline (simulator --live)": [], "slurm": []}
            for i in range(args.repeat):
                figures["baseline (simulator --live)"].append(
                    _gang_start(lambda d: LiveRuns(specs, d), job, root / f"live-{i}"))
                figures["slurm"].append(_gang_start(lambda d: SlurmRuns(d), job, root / f"slurm-{i}"))
        finally:
            if saved is None:
                os.environ.pop("SLURM_CONF", None)
            else:
                os.environ["SLURM_CONF"] = saved
            cluster.stop()
    print(f"gang start (submit -> all 4 tasks through the first barrier), {args.repeat} run(s) each, "
          f"cluster {path}:")
    for name, values in figures.items():
        print(f"  {name:30} median {statistics.median(values):6.2f} s   runs: "
              + ", ".join(f"{v:.2f}" for v in values))
    base, slurm = (statistics.median(v) for v in figures.values())
    print(f"  ratio slurm / baseline: {slurm / base:.2f}")
    return 0


def _gang_start(make_runs, job, work_dir: Path) -> float:
    work_dir.mkdir(parents=True)
    runs = make_runs(work_dir)
    started = time.time()
    try:
        runs.submit(job, work_dir)
        finished = runs.run(120.0)
    finally:
        runs.shutdown()
    [result] = runs.runs
    if not finished or result.outcome != "succeeded":
        raise RuntimeError(f"the benchmark job did not succeed in {work_dir}: {result.outcome}")
    stamps = [float(p.read_text()) for p in (work_dir / "output").glob("through-barrier-*")]
    if len(stamps) != 4:
        raise RuntimeError(f"{len(stamps)} of 4 tasks recorded their barrier in {work_dir / 'output'}")
    return max(stamps) - started


def _free_ports(start: int, count: int) -> int:
    """The first port p >= start with p..p+count-1 free on 127.0.0.1."""
    first = start
    while first + count < 65536:
        for port in range(first, first + count):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    first = port + 1
                    break
        else:
            return first
    raise RuntimeError(f"no {count} free ports from {start}")


def task() -> int:
    """The benchmark's task: through the first barrier, record when, exit."""
    from gangmaster.am.barrier.task_context import BarrierTaskContext

    ctx = BarrierTaskContext.get()
    ctx.barrier()
    through = time.time()
    out = Path(os.environ["GANGMASTER_OUTPUT_DIR"])
    out.mkdir(parents=True, exist_ok=True)
    (out / f"through-barrier-{ctx.task_index()}").write_text(repr(through))
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--task"]:
        sys.exit(task())
    print("usage: python -m gangmaster.tools.bench.slurm --task (the benchmark's task); "
          "the benchmark itself: gangmaster bench slurm", file=sys.stderr)
    sys.exit(2)
