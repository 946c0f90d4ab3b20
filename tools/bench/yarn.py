"""``gangmaster bench yarn``: gang start on a real YARN cluster, beside the RM simulator and Slurm.

Gang start: the wall time from submitting a job to every task of its gang being through
its first barrier (each task writes the time it came out of ``barrier()``; the figure is
the latest of them minus the submit time). The job is ``gangmaster bench slurm``'s: 4
workers x 1 GPU on NVLink nodes, each task a small Python program that registers with the
barrier coordinator, meets the others and exits.

The runs use the same AM, settings and cluster file (``--cluster``, default the embedded
``yarn-local.yaml``: three 4-GPU nodes), one after the other, ``--repeat`` times each:

* **baseline**: ``gangmaster run --live``'s driver, the RM simulator in this process;
* **yarn**: ``gangmaster run --rm yarn``'s driver on a local YARN cluster the benchmark
  starts from the cluster file (one ResourceManager, one NodeManager per node, on free
  ports, in a temporary folder; Hadoop's jars resolved by Maven once) and stops at the
  end, or on the cluster ``--yarn-rm`` names: the submit goes over the RM's REST API, the
  AM runs in its YARN container, each task in a container it starts on its NodeManager;
* **slurm**: ``gangmaster run --rm slurm``'s driver on a local Slurm cluster of the same
  file (as ``gangmaster bench slurm``), where Slurm can run (root, slurm-wlm); else
  skipped with a note. ``--no-slurm`` skips it.

Printed: each run's gang start, the medians and the ratios to the baseline. Needs a JDK
and Maven (and Maven Central the first time); says so and exits 3 without them.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from gangmaster.tools.arg_types import count
from gangmaster.tools.bench.cli import add_bench_parser
from gangmaster.tools.bench.slurm import JOB, _free_ports, _gang_start


def add_parser(sub):
    p = add_bench_parser(sub, "yarn", "gang start on a local YARN cluster vs the RM simulator --live (and Slurm)",
                         __doc__)
    p.add_argument("--cluster", help="cluster file (default: the embedded conf/clusters/yarn-local.yaml)")
    p.add_argument("--repeat", type=count(1, 100), default=3)
    p.add_argument("--yarn-rm", metavar="URL|DIR", help="a running YARN cluster to use (as `gangmaster run "
                                                        "--yarn-rm`) instead of starting one")
    p.add_argument("--no-slurm", action="store_true", help="leave Slurm out")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from gangmaster.am.spec.am_settings import AMSettings
    from gangmaster.am.spec.jobspec import load_job
    from gangmaster.conf import conf_path
    from gangmaster.selectors.cluster_file import load_cluster_specs
    from gangmaster.tools.job_runner import LiveRuns
    from gangmaster.tools.yarn.local_cluster import LocalCluster, Ports, YarnUnavailable, ensure_jars
    from gangmaster.tools.yarn.runs import YarnRuns
    from gangmaster.tools.yarn.target import resolve

    path = args.cluster or str(conf_path("clusters/yarn-local.yaml"))
    specs = load_cluster_specs(path)
    with tempfile.TemporaryDirectory(prefix="gangmaster-bench-yarn-") as tmp:
        root = Path(tmp)
        (root / "job.yaml").write_text(JOB)
        job = load_job(root / "job.yaml")
        cluster = None
        if args.yarn_rm is None:
            try:
                lib = ensure_jars()
            except YarnUnavailable as exc:
                print(f"gangmaster bench yarn: {exc}", file=sys.stderr)
                return 3
            cluster = LocalCluster(root / "yarn")
            started = time.monotonic()
            cluster.start(specs, Ports(_free_ports(28530, 9), _free_ports(28600, 10 * len(specs))), lib=lib,
                          source=path)
            print(f"local YARN cluster of {len(specs)} NodeManager(s) up in {time.monotonic() - started:.1f} s")
        try:
            target = resolve(args.yarn_rm or str(cluster.work_dir))
            figures: dict[str, list[float]] = {"baseline (simulator --live)": [], "yarn": []}
            for i in range(args.repeat):
                figures["baseline (simulator --live)"].append(
                    _gang_start(lambda d: LiveRuns(specs, d), job, root / f"live-{i}"))
                figures["yarn"].append(_gang_start(lambda d: YarnRuns(target, AMSettings()), job,
                                                   root / f"yarn-{i}"))
        finally:
            if cluster is not None:
                cluster.stop()
        note = "" if args.no_slurm else _slurm(figures, specs, path, job, root, args.repeat)
    print(f"gang start (submit -> all 4 tasks through the first barrier), {args.repeat} run(s) each, "
          f"cluster {path}:")
    for name, values in figures.items():
        print(f"  {name:30} median {statistics.median(values):6.2f} s   runs: "
              + ", ".join(f"{v:.2f}" for v in values))
    base = statistics.median(figures["baseline (simulator --live)"])
    for name in ("yarn", "slurm"):
        if name in figures:
            print(f"  ratio {name} / baseline: {statistics.median(figures[name]) / base:.2f}")
    if note:
        print(f"  slurm: {note}")
    return 0


def _slurm(figures, specs, path, job, root: Path, repeat: int) -> str:
    """Slurm's figures into ``figures`` where Slurm can run here; else why not."""
    import os

    from gangmaster.tools.slurm.local_cluster import LocalCluster, Ports, missing_requirements
    from gangmaster.tools.slurm.runs import SlurmRuns

    why = missing_requirements()
    if why:
        return f"skipped ({why})"
    cluster = LocalCluster(root / "slurm-cluster")
    cluster.start(specs, Ports(_free_ports(6870, 1), _free_ports(17600, len(specs))), source=path)
    saved = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf_path)
    try:
        figures["slurm"] = [_gang_start(lambda d: SlurmRuns(d), job, root / f"slurm-{i}") for i in range(repeat)]
    finally:
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved
        cluster.stop()
    return ""
