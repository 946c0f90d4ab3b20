"""Alibaba's 2023 GPU cluster trace, "openb" (``alibaba/clusterdata``,
``cluster-trace-gpu-v2023``): the workload of the FGD paper (Weng et al., "Beware of
Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent",
USENIX ATC'23).

**Nodes** (``openb_node_list_gpu_node.csv``: ``sn, cpu_milli, memory_mib, gpu, model``)
become the replay's cluster (:func:`read_openb_nodes`): ``cpu_milli`` / 1000 vcores,
``memory_mib`` MB of memory, ``gpu`` GPUs of type ``model``. The trace names no racks
and no GPU interconnect, so every node sits in one rack (:data:`RACK`) and has no
topology: nothing in the comparison depends on racks.

**Pods** (``openb_pod_list_*.csv``) become single-instance jobs (:func:`read_openb_pods`):
``cpu_milli`` / 1000 vcores, ``memory_mib`` MB, and ``num_gpu`` whole GPUs when
``gpu_milli`` is 1000, or a share of one GPU (``num_gpu`` 1, ``gpu_milli`` 1..999). A
pod's GPU request is ``num_gpu × gpu_milli / 1000`` GPUs. ``gpu_spec`` lists the GPU
models it accepts (``|``-separated; empty or no column: any). ``qos``, ``pod_phase``
and ``scheduled_time`` are read past: the replay decides where and when pods run.
Pods that ask for no GPU (1,088 of 8,152 in the default list) are replayed too: they
take CPU and memory on GPU nodes, as in the paper's artifact, and count for nothing in
the GPU figures; a pod that asks for nothing at all (no CPU, memory or GPU) is a bad
row. The artifact's ``openb_pod_list_multigpu*`` lists have only the five columns
``name, cpu_milli, memory_mib, num_gpu, gpu_milli``: fill mode, which needs no times,
reads them; time mode refuses them at the header.

Two ways to replay them (``--mode``):

- ``time`` (:func:`time_table`): a pod is submitted at ``creation_time`` and runs for
  ``deletion_time - creation_time``. The trace sets ``deletion_time`` even for pods
  that were still running when it was collected (alibaba/clusterdata#218): such a pod
  is read as ending then, so its duration is a lower bound of the real one.
- ``fill`` (:func:`fill_plan`): the paper's method. The pods are shuffled with the
  seed and, when they ask for less than ``inflate`` × the cluster's GPUs in all,
  topped up by drawing pods at random with replacement until they ask for at least
  that (or cut where they first do). They arrive one per second, each tried once
  at its arrival (a pod that cannot be placed then is dropped: the ``drop`` queue
  policy), and none ever leaves while pods still arrive.

  Whose draws (``--draws``, :data:`FILL_DRAWS`): ``python`` (:func:`fill_plan`, the
  default) draws with Python's ``random`` and leaves exact ties to the pipeline's seeded
  node order; ``artifact`` (:func:`artifact_fill_plan`) draws what the FGD artifact's
  simulator draws with the same seed (Go's ``math/rand``, :mod:`.go_rand`): the same
  pods in the same order, and its renamed nodes as the order of exact ties (whatever a
  strategy's tie rule: the artifact's scheduler takes the smallest renamed name), so that
  a port of one of its policies gives, seed by seed, the artifact's own figure.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from gangmaster.conf.fields import ConfigError
from gangmaster.conf.limits import (MAX_CLUSTER_NODES, MAX_FILL_INFLATE, MAX_GPUS_PER_NODE, MAX_MEMORY_MB,
                                    MAX_TRACE_JOBS, MAX_VCORES)
from gangmaster.selectors.cluster import NodeSpec

from .clusters import ReplayCluster
from .go_rand import GoRand
from .trace import JobTable, NodeShape, TraceJob, TraceRole, sorted_jobs
from .trace_csv import (BadRow, BadRows, Kept, Row, Submitted, TraceText, Window, csv_rows, duplicate, job_table,
                        read_trace_text)

#: The columns every pod list has (the multigpu lists have only these).
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
#: When each pod was created and deleted: --mode time needs them, --mode fill does not.
TIME_COLUMNS = ("creation_time", "deletion_time")
POD_OPTIONAL_COLUMNS = ("gpu_spec", "qos", "pod_phase", "scheduled_time")
#: Why --mode time refuses a pod list without TIME_COLUMNS (said after the missing columns).
TIMES_NEEDED = ("--mode time submits each pod at its creation_time and ends it at its deletion_time: "
                "replay a pod list without them with --mode fill")
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
#: The node list read when ``--nodes-file`` is not given: this file beside the pod list.
DEFAULT_NODE_FILE = "openb_node_list_gpu_node.csv"
#: The one rack of every openb node (the trace names none).
RACK = "openb"
#: Every pod goes to this RM queue (the trace names none).
QUEUE = "default"
#: ``gpu_spec``'s separator between acceptable GPU models.
GPU_SPEC_SEPARATOR = "|"
#: ``--inflate``'s default: the paper fills to 1.3 × the cluster's GPUs.
DEFAULT_INFLATE = 1.3
#: Seconds between two arrivals in fill mode (one pod per instant, tried at its arrival).
FILL_ARRIVAL_GAP_S = 1.0
#: The role name of a pod's one instance.
ROLE = "pod"
MILLI = 1000


@dataclass(frozen=True)
class Pod:
    """One pod of the trace: its job (submitted at ``creation_time``, lasting until
    ``deletion_time``; both None when read for fill mode from a list without them) and
    where in the file it was."""

    name: str
    role: TraceRole
    creation_s: float | None
    deletion_s: float | None
    line: int

    @property
    def gpu_milli(self) -> int:
        """The pod's GPU request in milli-GPU (num_gpu × gpu_milli)."""
        return self.role.gpu_milli_each


@dataclass(frozen=True)
class Pods:
    """The pods of a pod list, in file order, and the file's identity."""

    pods: tuple[Pod, ...]
    source: str
    sha256: str


def read_openb_nodes(path: str | Path) -> ReplayCluster:
    """The cluster of an openb node list. Any bad row is an error of the whole file
    (a cluster with a node missing is another cluster), named by file, line and field."""
    trace = read_trace_text(path)
    specs: list[NodeSpec] = []
    seen: dict[str, int] = {}
    for row in csv_rows(trace, BadRows("stop"), NODE_COLUMNS):
        host = row.name("sn")
        again = duplicate(row, "sn", host, seen, "node name")
        if again:
            raise again
        gpus = row.integer("gpu", maximum=MAX_GPUS_PER_NODE, limit="MAX_GPUS_PER_NODE")
        model = row.values.get("model", "").strip()
        if gpus and not model:
            raise row.error("model", "the GPU model of a node with GPUs")
        specs.append(NodeSpec(host=host, rack=RACK, gpu_type=row.name("model") if model else None,
                              vcores=row.integer("cpu_milli", maximum=MAX_VCORES * MILLI, limit="MAX_VCORES")
                              / MILLI,
                              memory_mb=row.integer("memory_mib", maximum=MAX_MEMORY_MB, limit="MAX_MEMORY_MB"),
                              gpus=gpus))
        if len(specs) > MAX_CLUSTER_NODES:
            raise row.error("", f"at most {MAX_CLUSTER_NODES:,} nodes (MAX_CLUSTER_NODES)")
    if not any(spec.gpus for spec in specs):
        raise ConfigError(trace.source, "", "a node list with at least one GPU node (gpu >= 1)")
    return ReplayCluster(Path(path).stem, tuple(specs), source=f"openb node list {trace.source}")


def default_nodes_file(pods_path: str | Path) -> Path:
    """The node list read when none is given: :data:`DEFAULT_NODE_FILE` beside the pod list."""
    return Path(pods_path).resolve().parent / DEFAULT_NODE_FILE


def read_openb_pods(path: str | Path, bad_rows: BadRows | None = None, need_times: bool = True) -> Pods:
    """The pods of an openb pod list, in file order; bad rows go to ``bad_rows``. Without
    ``need_times`` (fill mode) a list without the TIME_COLUMNS is read too, its pods'
    times None; a list that has them has them checked either way. Every pod is held
    (fill mode draws from them all), at most MAX_TRACE_JOBS of them."""
    bad_rows = bad_rows or BadRows()
    trace = read_trace_text(path)
    seen: dict[str, int] = {}
    pods: list[Pod] = []
    required, optional = (POD_COLUMNS + TIME_COLUMNS, POD_OPTIONAL_COLUMNS) if need_times else \
        (POD_COLUMNS, POD_OPTIONAL_COLUMNS + TIME_COLUMNS)
    for row in csv_rows(trace, bad_rows, required, optional, why=dict.fromkeys(TIME_COLUMNS, TIMES_NEEDED)):
        try:
            pod = _pod(row, seen)
        except BadRow as error:
            bad_rows.add(error)
            continue
        if len(pods) >= MAX_TRACE_JOBS:
            raise row.error("", f"at most {MAX_TRACE_JOBS:,} pods (MAX_TRACE_JOBS in conf/limits.py); split the file")
        pods.append(pod)
    return Pods(tuple(pods), trace.source, trace.sha256)


#: A pod that asks for no CPU, memory or GPU would be placed anywhere and count for nothing.
ASKS_NOTHING = "cpu_milli, memory_mib or num_gpu > 0 (a pod that asks for nothing)"


def _pod(row: Row, seen: dict[str, int]) -> Pod:
    name = row.name("name")
    vcores = row.integer("cpu_milli", maximum=MAX_VCORES * MILLI, limit="MAX_VCORES") / MILLI
    memory = row.integer("memory_mib", maximum=MAX_MEMORY_MB, limit="MAX_MEMORY_MB")
    gpus = row.integer("num_gpu", maximum=MAX_GPUS_PER_NODE, limit="MAX_GPUS_PER_NODE")
    if not (vcores or memory or gpus):
        raise row.error("cpu_milli", ASKS_NOTHING)
    if gpus == 0:
        if row.integer("gpu_milli") != 0:
            raise row.error("gpu_milli", "0 for a pod of num_gpu 0", row.values["gpu_milli"])
        share = 0
    else:
        milli = row.integer("gpu_milli", minimum=1, maximum=MILLI)
        if milli < MILLI and gpus > 1:
            raise row.error("gpu_milli", f"{MILLI} for a pod of {gpus} GPUs (a share is of one GPU)", milli)
        gpus, share = (gpus, 0) if milli == MILLI else (0, milli)
    types = row.names("gpu_spec", GPU_SPEC_SEPARATOR)
    if types and not (gpus or share):
        raise row.error("gpu_spec", "empty for a pod that asks for no GPU", row.values["gpu_spec"])
    creation = deletion = None
    if "creation_time" in row.values:
        creation = row.seconds("creation_time")
        deletion = row.seconds("deletion_time")
        if deletion < creation:
            raise row.error("deletion_time", f"a time at or after creation_time ({creation:g})",
                            row.values["deletion_time"])
    again = duplicate(row, "name", name, seen)
    if again:
        raise again
    return Pod(name, TraceRole(ROLE, 1, gpus, vcores, memory, types, share), creation, deletion, row.line)


def read_openb(path: str | Path, shape: NodeShape, bad_rows: BadRows | None = None,
               window: Window | None = None) -> JobTable:
    """``--mode time``: the reader :func:`~.readers.read_trace` calls (``shape`` is not
    needed: a pod asks for its own CPU, memory and GPUs)."""
    return time_table(read_openb_pods(path, bad_rows, need_times=True), window)


#: How --mode time reads the pods, for the report.
TIME_MODE_READING = ("openb --mode time: each pod submitted at creation_time and running until deletion_time; "
                     "deletion_time is set even for pods still running when the trace was collected "
                     "(alibaba/clusterdata#218), so those durations are lower bounds")
#: How --mode fill reads them.
FILL_MODE_READING = ("openb --mode fill (the FGD paper's method): pods shuffled by seed, topped up by drawing again "
                     "with replacement to --inflate x the GPUs, one arrival per second, each tried once (dropped "
                     "when it cannot be placed), none leaving; creation and deletion times unused")


def time_table(pods: Pods, window: Window | None = None) -> JobTable:
    """Each pod submitted at its ``creation_time`` (within ``window``), running until its
    ``deletion_time`` (see the module docstring for pods that were still running). The
    pods must have been read with ``need_times``."""
    kept = Kept(pods.source, window)
    for pod in pods.pods:
        if pod.creation_s is None or pod.deletion_s is None:
            raise ValueError(f"time_table: pod {pod.name} has no times (read it with need_times)")
        kept.add(Submitted(pod.creation_s, pod.name, pod.deletion_s - pod.creation_s, QUEUE, (pod.role,)),
                 f"line {pod.line}")
    return job_table(kept, _identity(pods), "openb")


def pods_table(pods: Pods) -> JobTable:
    """The pod list as read, pod k at k s in file order: the input a fill replay names
    (its source, digest and pods; what each seed replays is its :class:`FillPlan`'s table)."""
    jobs = [TraceJob(pod.name, FILL_ARRIVAL_GAP_S * k, FILL_ARRIVAL_GAP_S, QUEUE, (pod.role,))
            for k, pod in enumerate(pods.pods)]
    trace = _identity(pods)
    return JobTable(sorted_jobs(jobs), trace.source, trace.sha256, "openb")


# ------------------------------------------------------------------------ fill mode

@dataclass(frozen=True)
class FillPlan:
    """One seed's arrival sequence in fill mode: ``table`` (pod k arrives at k s and
    holds what it gets until after the last arrival), how many of its pods were drawn
    again to top the sequence up, and the GPU capacity (milli) it fills."""

    table: JobTable
    seed: int
    inflate: float
    capacity_milli: int
    drawn_again: int
    #: the hosts in the order they win exact ties, when the draws give one (the artifact's
    #: renamed nodes); empty: the pipeline's own seeded order
    tie_hosts: tuple[str, ...] = ()

    @property
    def requested_milli(self) -> int:
        return sum(job.gpu_milli for job in self.table.jobs)


def fill_plan(pods: Pods, capacity_gpus: int, seed: int, inflate: float = DEFAULT_INFLATE) -> FillPlan:
    """The paper's arrival sequence for ``seed``: every pod once, in an order shuffled with
    the seed, cut where the GPUs asked first reach ``inflate`` × ``capacity_gpus``, or
    else topped up by pods drawn uniformly with replacement (from all pods, CPU-only
    ones included) until they do. A pod drawn again is named ``<name>.r<k>`` (its k-th
    copy). Same pods, capacity, seed and inflate → the same plan."""
    _check_fill(pods, inflate)
    target = inflate * capacity_gpus * MILLI
    rng = random.Random(f"openb-fill:{seed}")
    order = list(pods.pods)
    rng.shuffle(order)
    chosen: list[tuple[Pod, str]] = []
    asked = 0
    for pod in order:
        if asked >= target:
            break
        chosen.append((pod, pod.name))
        asked += pod.gpu_milli
    again = _Again(chosen, inflate)
    while asked < target:
        asked += again.add(order[rng.randrange(len(order))])
    return _plan(pods, chosen, seed, inflate, capacity_gpus, again.drawn)


#: ``--draws``: whose random draws order a fill replay's pods (and its exact ties)
FILL_DRAWS = ("python", "artifact")
#: ``rand.Float64`` calls the artifact's run makes between its top-up and its renaming of
#: the nodes (client-go's reflectors draw their watch timeouts when the scheduler's
#: informers start, in ``RunCluster``). Ten is the count that reproduces the artifact's
#: published figures seed by seed (BENCHMARKS.md, session 16); other counts give other
#: node orders.
ARTIFACT_DRAWS_BEFORE_RENAMING = 10


def artifact_fill_plan(pods: Pods, cluster: ReplayCluster, seed: int, inflate: float = DEFAULT_INFLATE) -> FillPlan:
    """The FGD artifact's arrival sequence for ``seed`` on ``cluster``, drawn as its
    simulator draws it (``pkg/simulator``): Go's ``math/rand`` seeded with ``seed`` draws one
    ``Int``, shuffles the pods sorted by name, then removes pods at random while they ask
    for more than ``inflate`` × the GPUs, or else appends pods drawn from all of them
    (sorted by name) until the next draw's GPUs *per device* would pass that (so it stops
    at or below the target, where :func:`fill_plan` stops at or above it). After
    :data:`ARTIFACT_DRAWS_BEFORE_RENAMING` draws of other code it renames the nodes, sorted
    by name, ``"%04d-" % Perm(n)[i] + name``, and its scheduler gives an exact tie to the
    smallest name: ``tie_hosts`` is the hosts by their new prefix."""
    _check_fill(pods, inflate)
    target = inflate * cluster.capacity_gpus * MILLI
    rng = GoRand(seed)
    rng.int63()   # rand.Int(), its debug line's argument
    by_name = sorted(pods.pods, key=lambda pod: pod.name)
    order = list(by_name)
    rng.shuffle(len(order), lambda i, j: _swap(order, i, j))
    chosen = [(pod, pod.name) for pod in order]
    asked = sum(pod.gpu_milli for pod in order)
    again = _Again(chosen, inflate)
    if asked > target:
        while asked > target:
            asked -= chosen.pop(rng.intn(len(chosen)))[0].gpu_milli
    elif asked < target:
        while True:
            pod = by_name[rng.intn(len(by_name))]
            if asked + (MILLI if pod.role.gpus else pod.role.gpu_milli) > target:   # per device
                break
            asked += again.add(pod)
    for _ in range(ARTIFACT_DRAWS_BEFORE_RENAMING):
        rng.float64()
    hosts = sorted(spec.host for spec in cluster.specs)
    prefix = rng.perm(len(hosts))
    tie_hosts = tuple(host for _, host in sorted(zip(prefix, hosts)))
    return _plan(pods, chosen, seed, inflate, cluster.capacity_gpus, again.drawn, tie_hosts)


def plan_for(draws: str, pods: Pods, cluster: ReplayCluster, seed: int, inflate: float = DEFAULT_INFLATE) -> FillPlan:
    """One seed's plan on ``cluster`` with ``draws`` (one of :data:`FILL_DRAWS`)."""
    if draws == "python":
        return fill_plan(pods, cluster.capacity_gpus, seed, inflate)
    if draws == "artifact":
        return artifact_fill_plan(pods, cluster, seed, inflate)
    raise ValueError(f"draws: expected one of {', '.join(FILL_DRAWS)}, got {draws!r}")


def _check_fill(pods: Pods, inflate: float) -> None:
    if not 0 < inflate <= MAX_FILL_INFLATE:
        raise ConfigError("--inflate", "", f"a factor > 0 and <= {MAX_FILL_INFLATE} (MAX_FILL_INFLATE)", inflate)
    if not pods.pods:
        raise ConfigError(pods.source, "", "at least one pod to fill the cluster with")
    if not any(pod.gpu_milli for pod in pods.pods):
        raise ConfigError(pods.source, "", "pods that ask for GPUs (fill mode fills the cluster's GPUs)")


class _Again:
    """Pods drawn again to top a plan up, appended to ``chosen`` as ``<name>.r<k>``."""

    def __init__(self, chosen: list[tuple[Pod, str]], inflate: float):
        self.chosen = chosen
        self.inflate = inflate
        self.copies: dict[str, int] = {}
        self.drawn = 0

    def add(self, pod: Pod) -> int:
        """Appends ``pod`` once more; its GPUs (milli)."""
        self.drawn += 1
        self.copies[pod.name] = self.copies.get(pod.name, 1) + 1
        self.chosen.append((pod, f"{pod.name}.r{self.copies[pod.name]}"))
        if len(self.chosen) > MAX_TRACE_JOBS:
            raise ConfigError("--inflate", "", f"a fill of at most {MAX_TRACE_JOBS:,} pods (MAX_TRACE_JOBS)",
                              self.inflate)
        return pod.gpu_milli


def _swap(items: list, i: int, j: int) -> None:
    items[i], items[j] = items[j], items[i]


def _plan(pods: Pods, chosen: list[tuple[Pod, str]], seed: int, inflate: float, capacity_gpus: int, drawn: int,
          tie_hosts: tuple[str, ...] = ()) -> FillPlan:
    """The plan of the pods ``chosen`` (each with its job name), pod k arriving at k s."""
    hold = FILL_ARRIVAL_GAP_S * (len(chosen) + 1)   # every pod still holds when the last one arrives
    jobs = [TraceJob(name, FILL_ARRIVAL_GAP_S * k, hold, QUEUE, (pod.role,)) for k, (pod, name) in enumerate(chosen)]
    trace = _identity(pods)
    table = JobTable(sorted_jobs(jobs), trace.source, trace.sha256, "openb")
    return FillPlan(table, seed, inflate, capacity_gpus * MILLI, drawn, tie_hosts)


def _identity(pods: Pods) -> TraceText:
    """The pod list's name and digest (its text is not kept)."""
    return TraceText(pods.source, "", pods.sha256)
