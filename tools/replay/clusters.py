"""The cluster a trace is replayed on: a cluster file, a preset, ``--nodes N
--gpus-per-node G``, or one sized from the trace (``--infer peak|mean``).

GPU-only traces (Philly, Tiresias without its spec) say nothing of CPUs or memory, so
the clusters made here give every GPU node what a DGX-1 gives each of its 8 GPUs:
10 vcores (2 × 20 cores, 80 hardware threads) and 64 GiB (512 GiB in all). An instance
then asks for its GPUs' share of that (:class:`~.trace.NodeShape`), so only GPUs bind.
Nodes sit in racks of :data:`RACK_NODES`, in host order, unless a preset says otherwise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from gangmaster.conf.fields import ConfigError, decode_utf8, read_limited
from gangmaster.conf.limits import MAX_CLUSTER_NODES, MAX_GPUS_PER_NODE, MAX_TRACE_FILE_BYTES
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.cluster_file import load_cluster_specs

from .trace import JobTable, NodeShape

#: vcores and memory that come with each GPU of a generated node (a DGX-1's per-GPU share).
VCORES_PER_GPU = 10
MEMORY_MB_PER_GPU = 64 * 1024
#: Nodes per rack in generated clusters (a common top-of-rack switch size).
RACK_NODES = 32


@dataclass(frozen=True)
class ReplayCluster:
    """The nodes of a replay; ``queue_hosts``, when set, gives each queue its own nodes
    (isolated queues, as Helios replays each Philly VC on its own nodes): a job of queue
    Q may only use ``queue_hosts[Q]``. ``source`` cites where a preset's numbers come from."""

    name: str
    specs: tuple[NodeSpec, ...]
    queue_hosts: Mapping[str, tuple[str, ...]] | None = None
    source: str = ""

    @property
    def capacity_gpus(self) -> int:
        return sum(spec.gpus for spec in self.specs)

    def gpu_node_shape(self) -> NodeShape:
        """The largest GPU node (most GPUs; then most vcores and memory): a gang larger
        than its GPUs spans nodes, and an instance asks for its GPUs' share of it."""
        gpu_nodes = [spec for spec in self.specs if spec.gpus]
        if not gpu_nodes:
            raise ConfigError(self.name, "", "a cluster with at least one GPU node (a trace's jobs ask for GPUs)")
        node = max(gpu_nodes, key=lambda spec: (spec.gpus, spec.vcores, spec.memory_mb))
        return NodeShape(node.gpus, node.vcores, node.memory_mb)

    def queue_gpus(self, queue: str) -> int:
        """GPUs of an isolated queue's own nodes."""
        hosts = set(self.queue_hosts[queue])
        return sum(spec.gpus for spec in self.specs if spec.host in hosts)

    def describe(self) -> str:
        shapes: dict[int, int] = {}
        for spec in self.specs:
            shapes[spec.gpus] = shapes.get(spec.gpus, 0) + 1
        nodes = ", ".join(f"{count:,} × {gpus} GPUs" for gpus, count in sorted(shapes.items(), reverse=True))
        isolated = f", {len(self.queue_hosts)} isolated queues" if self.queue_hosts else ""
        return f"{self.name} ({nodes}; {self.capacity_gpus:,} GPUs{isolated})"


def homogeneous(nodes: int, gpus_per_node: int, name: str | None = None, prefix: str = "node",
                rack_prefix: str = "rack", one_rack: bool = False) -> tuple[NodeSpec, ...]:
    """``nodes`` nodes of ``gpus_per_node`` GPUs with the per-GPU vcores and memory above,
    in racks of RACK_NODES (``one_rack``: all in the rack ``rack_prefix``)."""
    if not 1 <= nodes <= MAX_CLUSTER_NODES:
        raise ConfigError(name or "--nodes", "", f"1..{MAX_CLUSTER_NODES:,} nodes (MAX_CLUSTER_NODES)", nodes)
    if not 1 <= gpus_per_node <= MAX_GPUS_PER_NODE:
        raise ConfigError(name or "--gpus-per-node", "", f"1..{MAX_GPUS_PER_NODE} GPUs per node "
                                                         "(MAX_GPUS_PER_NODE)", gpus_per_node)
    width = max(3, len(str(nodes - 1)))
    return tuple(NodeSpec(host=f"{prefix}-{i:0{width}d}",
                          rack=rack_prefix if one_rack else f"{rack_prefix}-{i // RACK_NODES:0{width}d}",
                          vcores=float(VCORES_PER_GPU * gpus_per_node),
                          memory_mb=MEMORY_MB_PER_GPU * gpus_per_node, gpus=gpus_per_node)
                 for i in range(nodes))


def sized(nodes: int, gpus_per_node: int) -> ReplayCluster:
    """``--nodes N --gpus-per-node G``."""
    return ReplayCluster(f"{nodes}x{gpus_per_node}", homogeneous(nodes, gpus_per_node))


def from_cluster_file(path: str | Path) -> ReplayCluster:
    """A cluster file (``conf/clusters/*.yaml``, format in ``selectors/cluster_file.py``)."""
    return ReplayCluster(Path(path).stem, tuple(load_cluster_specs(path)), source=str(path))


TIRESIAS_SPEC_COLUMNS = ("num_switch", "num_node_p_switch", "num_gpu_p_node", "num_cpu_p_node", "mem_p_node")


def from_tiresias_spec(path: str | Path) -> ReplayCluster:
    """A Tiresias cluster spec: one header line, one row of ``num_switch,
    num_node_p_switch, num_gpu_p_node, num_cpu_p_node, mem_p_node`` (GB). Each switch is
    a rack; hosts are ``s<switch>-n<node>``."""
    source = str(path)
    lines = [line.strip() for line in decode_utf8(read_limited(path, MAX_TRACE_FILE_BYTES,
                                                               "MAX_TRACE_FILE_BYTES"), source).splitlines()]
    lines = [line for line in lines if line]
    if len(lines) != 2 or tuple(part.strip() for part in lines[0].split(",")) != TIRESIAS_SPEC_COLUMNS:
        raise ConfigError(source, "line 1", f"a header {','.join(TIRESIAS_SPEC_COLUMNS)} and one row of values")
    values = lines[1].split(",")
    if len(values) != len(TIRESIAS_SPEC_COLUMNS):
        raise ConfigError(source, "line 2", f"{len(TIRESIAS_SPEC_COLUMNS)} comma-separated integers", lines[1])
    numbers = {}
    for column, text in zip(TIRESIAS_SPEC_COLUMNS, values):
        try:
            numbers[column] = int(text)
        except ValueError:
            raise ConfigError(source, f"line 2: {column}", "an integer >= 1", text.strip()) from None
        if numbers[column] < 1:
            raise ConfigError(source, f"line 2: {column}", "an integer >= 1", numbers[column])
    switches, per_switch = numbers["num_switch"], numbers["num_node_p_switch"]
    if switches * per_switch > MAX_CLUSTER_NODES:
        raise ConfigError(source, "line 2", f"at most {MAX_CLUSTER_NODES:,} nodes (MAX_CLUSTER_NODES)",
                          switches * per_switch)
    gpus = numbers["num_gpu_p_node"]
    if gpus > MAX_GPUS_PER_NODE:
        raise ConfigError(source, "line 2: num_gpu_p_node", f"at most {MAX_GPUS_PER_NODE} (MAX_GPUS_PER_NODE)",
                          gpus)
    specs = tuple(NodeSpec(host=f"s{s}-n{n:03d}", rack=f"switch-{s}", gpus=gpus,
                           vcores=float(numbers["num_cpu_p_node"]), memory_mb=numbers["mem_p_node"] * 1024)
                  for s in range(switches) for n in range(per_switch))
    return ReplayCluster(Path(path).stem, specs, source=f"Tiresias cluster spec {source}")


def inferred(table: JobTable, how: str, gpus_per_node: int) -> ReplayCluster:
    """A homogeneous cluster sized from the trace: ``peak``, the most GPUs the jobs would
    hold at once if each started at its submit; ``mean``, their GPU-seconds over the
    submit span (offered load 1.0)."""
    load = offered_load(table)
    gpus = load.peak_gpus if how == "peak" else load.mean_gpus
    nodes = max(1, math.ceil(gpus / gpus_per_node))
    return ReplayCluster(f"inferred-{how}-{nodes}x{gpus_per_node}", homogeneous(nodes, gpus_per_node),
                         source=f"--infer {how}: {gpus:,.1f} GPUs needed")


@dataclass(frozen=True)
class OfferedLoad:
    """What the trace asks of a cluster, independent of any placement."""

    gpu_seconds: float
    span_s: float          # last submit - first submit
    peak_gpus: int          # most GPUs held at once if every job started at its submit
    mean_gpus: float        # gpu_seconds / span_s

    def on(self, capacity_gpus: int) -> float:
        """Offered load on ``capacity_gpus``: GPU-seconds asked / GPU-seconds offered over
        the submit span (> 1: the queue grows for as long as jobs keep arriving)."""
        return self.mean_gpus / capacity_gpus if capacity_gpus else math.inf


def offered_load(table: JobTable, queue: str | None = None) -> OfferedLoad:
    """What the table's jobs (of ``queue`` only, when given) ask, over the whole table's
    submit span."""
    deltas: list[tuple[float, int]] = []
    gpu_seconds = 0.0
    for job in table.jobs:
        if queue is not None and job.queue != queue:
            continue
        gpus = job.gpus
        gpu_seconds += gpus * job.duration_s
        deltas.append((job.submit_s, gpus))
        deltas.append((job.submit_s + job.duration_s, -gpus))
    deltas.sort(key=lambda d: (d[0], d[1]))     # ends before starts at the same instant
    held = peak = 0
    for _, delta in deltas:
        held += delta
        peak = max(peak, held)
    span = table.jobs[-1].submit_s - table.jobs[0].submit_s if table.jobs else 0.0
    mean = gpu_seconds / span if span > 0 else float(peak)
    return OfferedLoad(gpu_seconds, span, peak, mean)


# ------------------------------------------------------------------------ presets

HELIOS_VC_NODES = {   # VC -> nodes of 8 GPUs
    "6214e9": 64, "7f04ca": 32, "11cb48": 16, "b436b2": 64, "ee9e8c": 64, "e13805": 16,
    "6c71a0": 32, "2869ce": 16, "ed69ec": 8, "103959": 8, "0e4a51": 32,
}


@dataclass(frozen=True)
class Preset:
    """A named cluster with what a faithful replay on it needs besides its nodes: the
    submit window, queue policy and measurement of the setup it reproduces — a preset
    named after a study carries that study's methodology (a command-line ``--window``,
    ``--queue-policy`` or ``--measure-trim`` still wins)."""

    name: str
    description: str
    source: str
    build: Callable[[], ReplayCluster]
    window: tuple[str, str] | None = None
    queue_policy: str | None = None
    #: the share of jobs the study leaves out at each end of the submit order, and why
    measure_trim: float | None = None
    measure_trim_why: str = ""


def _helios() -> ReplayCluster:
    specs: list[NodeSpec] = []
    queue_hosts: dict[str, tuple[str, ...]] = {}
    for vc, nodes in HELIOS_VC_NODES.items():
        # One rack per VC: the Helios setup models no racks, and job packing's rack preference
        # must not pull a gang's remainder off the node with the fewest free GPUs that fit.
        vc_specs = homogeneous(nodes, 8, name="philly-helios-11vc", prefix=vc, rack_prefix=vc, one_rack=True)
        specs.extend(vc_specs)
        queue_hosts[vc] = tuple(spec.host for spec in vc_specs)
    return ReplayCluster("philly-helios-11vc", tuple(specs), queue_hosts, source=PRESETS_SOURCES["helios"])


PRESETS_SOURCES = {
    "helios": "Hu et al., Characterization and Prediction of Deep Learning Workloads in Large-Scale GPU "
              "Datacenters (SC'21), Helios simulator's Philly setup: 11 VCs on their own 8-GPU nodes; "
              "trace: Jeon et al., USENIX ATC'19 (CC-BY-4.0)",
    "tiresias": "Gu et al., Tiresias (NSDI'19) simulator, cluster spec n32g4.csv: 1 switch, 32 nodes of "
                "4 GPUs, 40 CPUs, 256 GB",
    "philly-1000x8": "issue 13's Philly benchmark: 1,000 nodes of 8 GPUs; trace: Jeon et al., USENIX ATC'19",
}

PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("philly-helios-11vc",
           "Philly's 11 largest VCs, each on its own nodes of 8 GPUs (352 nodes), "
           "jobs submitted 2017-10-01 .. 2017-11-30, strict FIFO per VC, every job measured (--measure-trim 0)",
           PRESETS_SOURCES["helios"], _helios,
           window=("2017-10-01 00:00:00", "2017-11-30 23:59:00"), queue_policy="fifo",
           measure_trim=0.0, measure_trim_why="the Helios simulator measures every job it replays"),
    Preset("tiresias-n32g4", "32 nodes of 4 GPUs, 40 vcores and 256 GB each, one rack",
           PRESETS_SOURCES["tiresias"],
           lambda: ReplayCluster("tiresias-n32g4", tuple(
               NodeSpec(host=f"s0-n{n:03d}", rack="switch-0", gpus=4, vcores=40.0, memory_mb=256 * 1024)
               for n in range(32)), source=PRESETS_SOURCES["tiresias"])),
    Preset("philly-1000x8", "1,000 nodes of 8 GPUs in racks of 32, one shared queue",
           PRESETS_SOURCES["philly-1000x8"],
           lambda: ReplayCluster("philly-1000x8", homogeneous(1000, 8), source=PRESETS_SOURCES["philly-1000x8"])),
)}


class UnknownPreset(ConfigError):
    def __init__(self, name: str):
        super().__init__("--preset", "", f"one of {', '.join(sorted(PRESETS))}", name)


def preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise UnknownPreset(name) from None
