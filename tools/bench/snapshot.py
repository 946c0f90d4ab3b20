"""``gangmaster bench snapshot``: time to read a story-3-sized snapshot of a real cluster
(``load_snapshot``, what ``gangmaster diagnose --snapshot`` and ``gangmaster snapshot`` do
first), per engine.

The snapshot is made from the nodes of ``conf/clusters/story3.yaml`` (3,040 machines),
each node and job written the way the shipped examples in ``conf/snapshots/`` are (the
Slurm 22.05 dump, the Kubernetes and YARN shapes): 32 machines unavailable, and one job
holding part of 90 machines (story 3's evening), plus one small job per remaining ten
machines. The floor, measured in the same run: reading and parsing the same files'
JSON (``json.loads``), which any reader has to do; the ratio is what turning the JSON
into nodes, states and allocations, and checking it, costs on top."""
from __future__ import annotations

import copy
import json
import tempfile
import time
from pathlib import Path

from gangmaster.conf import conf_path
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.tools.arg_types import count
from gangmaster.tools.bench.cli import add_bench_parser
from gangmaster.tools.snapshots import FORMATS, load_snapshot

EXAMPLES = conf_path("snapshots")
UNAVAILABLE = 32
HELD_BY_ONE_JOB = 90


def add_parser(sub):
    p = add_bench_parser(sub, "snapshot", "time reading a story-3-sized cluster snapshot, per engine", __doc__)
    p.add_argument("--cluster", default=str(conf_path("clusters/story3.yaml")))
    p.add_argument("--repeat", type=count(), default=3)
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    specs = load_cluster_specs(args.cluster)
    with tempfile.TemporaryDirectory(prefix="gangmaster-bench-snapshot-") as folder:
        for engine in FORMATS:
            files = WRITERS[engine](specs, Path(folder) / engine)
            read = _best(lambda: load_snapshot(files, taken_at=0), args.repeat)
            parse = _best(lambda: [json.loads(f.read_bytes()) for f in files], args.repeat)
            snap = load_snapshot(files, taken_at=0)
            size = sum(f.stat().st_size for f in files)
            print(f"{engine:10s} {len(snap.specs):,} nodes, {len(snap.unhealthy)} unavailable, "
                  f"{len(snap.running):,} allocations, {size / 2 ** 20:.1f} MiB: load_snapshot {read[0] * 1e3:.0f} ms "
                  f"wall, {read[1] * 1e3:.0f} ms CPU; floor json.loads {parse[0] * 1e3:.0f} ms wall, "
                  f"{parse[1] * 1e3:.0f} ms CPU; ratio {read[0] / parse[0]:.1f}x wall, {read[1] / parse[1]:.1f}x CPU "
                  f"(best of {args.repeat})")
    return 0


def _best(work, repeat: int) -> tuple[float, float]:
    """The best wall-clock and CPU (process) seconds of ``repeat`` runs; the CPU time leaves
    out the waits of a process on a machine shared with others."""
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        work()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), max(min(cpus), 1e-6)


def _example(engine: str, name: str) -> dict:
    return json.loads((EXAMPLES / engine / name).read_text())


def _held(i: int) -> bool:
    return UNAVAILABLE <= i < UNAVAILABLE + HELD_BY_ONE_JOB


def _write(folder: Path, docs: dict[str, dict]) -> list[Path]:
    folder.mkdir(parents=True)
    paths = []
    for name, doc in docs.items():
        path = folder / name
        path.write_text(json.dumps(doc))
        paths.append(path)
    return paths


def _slurm(specs, folder: Path) -> list[Path]:
    nodes, jobs = _example("slurm", "sinfo.json"), _example("slurm", "squeue.json")
    node_template, job_template = nodes["nodes"][2], jobs["jobs"][0]      # dgx1, trainer
    nodes["nodes"], jobs["jobs"] = [], []
    for i, spec in enumerate(specs):
        node = copy.deepcopy(node_template)
        node.update(name=spec.host, cpus=int(spec.vcores), real_memory=spec.memory_mb,
                    gres=f"gpu:v100:{spec.gpus}" if spec.gpus else "", features=spec.rack, active_features=spec.rack,
                    state="down" if i < UNAVAILABLE else "mixed", alloc_cpus=0, alloc_memory=0, gres_used="gpu:0")
        if _held(i) or i % 10 == 0:
            node.update(alloc_cpus=1, alloc_memory=1024)
            job = copy.deepcopy(job_template)
            job.update(job_id=i + 1, name="xlibmpi" if _held(i) else f"small-{i}", nodes=spec.host,
                       cpus=1, gres_detail=[], tres_per_node="")
            job["job_resources"]["allocated_nodes"] = [{"nodename": spec.host, "memory_allocated": 1024,
                                                        "sockets": {"0": {"cores": {"0": "allocated"}}}}]
            jobs["jobs"].append(job)
        nodes["nodes"].append(node)
    return _write(folder, {"sinfo.json": nodes, "squeue.json": jobs})


def _kubernetes(specs, folder: Path) -> list[Path]:
    nodes, pods = _example("kubernetes", "nodes.json"), _example("kubernetes", "pods.json")
    node_template, pod_template = nodes["items"][0], pods["items"][0]
    nodes["items"], pods["items"] = [], []
    for i, spec in enumerate(specs):
        node = copy.deepcopy(node_template)
        node["metadata"]["name"] = spec.host
        node["metadata"]["labels"]["kubernetes.io/hostname"] = spec.host
        node["status"]["allocatable"].update({"cpu": f"{spec.vcores:g}", "memory": f"{spec.memory_mb}Mi",
                                              "nvidia.com/gpu": str(spec.gpus)})
        if i < UNAVAILABLE:
            node["spec"]["unschedulable"] = True
        nodes["items"].append(node)
        if _held(i) or i % 10 == 0:
            pod = copy.deepcopy(pod_template)
            pod["metadata"]["name"] = f"pod-{i}"
            pod["spec"]["nodeName"] = spec.host
            pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}}
            if not _held(i):
                pod["metadata"]["labels"]["training.kubeflow.org/job-name"] = f"small-{i}"
            pods["items"].append(pod)
    return _write(folder, {"nodes.json": nodes, "pods.json": pods})


def _yarn(specs, folder: Path) -> list[Path]:
    nodes, apps = _example("yarn", "nodes.json"), _example("yarn", "apps.json")
    containers = _example("yarn", "containers-resnet50-train.json")
    node_template, container_template = nodes["nodes"]["node"][0], containers["containers"]["container"][1]
    nodes["nodes"]["node"], containers["containers"]["container"] = [], []
    for i, spec in enumerate(specs):
        node = copy.deepcopy(node_template)
        node.update(nodeHostName=spec.host, id=f"{spec.host}:45454", rack=f"/{spec.rack}",
                    state="UNHEALTHY" if i < UNAVAILABLE else "RUNNING")
        for key, (memory, vcores) in (("totalResource", (spec.memory_mb, spec.vcores)),
                                      ("usedResource", (1024, 1) if _held(i) else (0, 0))):
            node[key].update(memory=memory, vCores=vcores)
            node[key]["resourceInformations"]["resourceInformation"][2]["value"] = spec.gpus if key[0] == "t" else 0
        nodes["nodes"]["node"].append(node)
        if _held(i):
            container = copy.deepcopy(container_template)
            container.update(containerId=f"container_e02_1795400000000_0007_01_{i:06d}", assignedNodeId=f"{spec.host}:1",
                             allocatedMB=1024, allocatedVCores=1)
            containers["containers"]["container"].append(container)
    return _write(folder, {"nodes.json": nodes, "apps.json": apps, "containers.json": containers})


WRITERS = {"slurm": _slurm, "kubernetes": _kubernetes, "yarn": _yarn}
