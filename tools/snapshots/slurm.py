"""Slurm: ``sinfo --json`` or ``scontrol show node --json``, and ``squeue --json``.

The JSON changes between Slurm versions; this reader takes both shapes seen so far:
22.05 (``"state": "mixed"`` with ``"state_flags": ["DRAIN"]``, plain numbers, features as
one comma-separated string, ``job_resources.allocated_nodes[]``) and the newer one, as 24.05 writes it
(``"state": ["MIXED", "DRAIN"]``, numbers as ``{"set": true, "infinite": false,
"number": N}``, features as lists, ``job_resources.nodes.allocation[]``). The
``sinfo --json`` of newer versions groups nodes like sinfo's table and loses per-node
usage: give ``scontrol show node --json`` instead (it is refused with that advice).

Read per node (``nodes[]``): ``name`` → host; ``cpus`` and ``real_memory`` (MB) →
capacity (either null or not set is taken as 0, and said in the notes: the node then fits
nothing that asks for it, while the rest of the cluster can still be read),
``alloc_cpus`` and ``alloc_memory`` → in use; ``gres`` (``gpu:v100:8(S:0-1)``,
``gpu:4``, one GRES type per GPU as ``gpu:v100_0:1,gpu:v100_1:1,...``) → GPUs and GPU
type (a ``_N`` suffix dropped), ``gres_used`` (``gpu:v100:2(IDX:0-1)``) → GPUs in use;
``active_features`` (else ``features``) and ``partitions`` → labels, the first feature
starting with ``rack`` → rack, ``net.<level>.<name>`` features → network domains above it (as
gangmaster's Slurm backend writes them; ``topology.conf``'s switches are not in the JSON:
:mod:`.slurm_topology` reads that file, ``--topology-conf``); ``state`` and ``state_flags`` → whether it takes jobs, and
``reason`` as the reason. A node takes jobs when every word of its state is one of IDLE,
MIXED, ALLOCATED, COMPLETING, PLANNED, CLOUD, POWERED_DOWN, POWERING_UP (Slurm powers a
cloud node up on demand); any other word — DOWN, DRAIN, FAIL, NOT_RESPONDING,
MAINTENANCE, RESERVED, ... or one this reader does not know — makes it unavailable, and
those words, joined by ``+``, are its state.

Read per job (``jobs[]``, only those whose ``job_state`` is RUNNING or COMPLETING): ``name``
(with ``job_id``, or ``het_job_id`` for a heterogeneous job, when names repeat) → job;
``end_time`` → its latest end; per node, from ``job_resources``: the CPUs (``cpus.count``,
or the cores marked allocated, scaled to the job's ``cpus``) and ``memory_allocated``;
the GPUs from ``gres_detail[]`` (one entry per node, in order), else ``tres_per_node``.
Without ``job_resources`` the job's ``nodes`` (a hostlist such as ``dgx[01-04,07]``) share
its ``cpus`` evenly, each with ``memory_per_node``. Its ``priority``, ``partition`` and
``start_time`` are kept (:mod:`.preemption_rules`), though Slurm does not preempt by a job's
priority: the diagnosis says its preemption is unknown.
"""
from __future__ import annotations

import itertools
import re

from gangmaster.conf.fields import is_name
from gangmaster.conf.limits import MAX_CLUSTER_NODES, MAX_MEMORY_MB, MAX_VCORES
from gangmaster.gpu_topology.masks import MAX_GPUS_PER_NODE
from gangmaster.selectors.cluster import NodeSpec

from ..slurm.names import read_domains, split_per_gpu_type
from ..slurm.values import GresError, gpu_entries, state_words, top_level_split
from . import preemption_rules
from .attribution import job_name
from .json_doc import Value
from .model import EngineRead, JobStanding, RunningAllocation, Usage, first_few, named_domains

FIELDS_READ = (
    "nodes[].name", "nodes[].state", "nodes[].state_flags", "nodes[].reason", "nodes[].cpus",
    "nodes[].alloc_cpus", "nodes[].real_memory", "nodes[].alloc_memory", "nodes[].gres", "nodes[].gres_used",
    "nodes[].active_features", "nodes[].features", "nodes[].partitions", "last_update",
    "jobs[].job_id", "jobs[].het_job_id", "jobs[].name", "jobs[].job_state", "jobs[].end_time", "jobs[].nodes",
    "jobs[].cpus", "jobs[].memory_per_node", "jobs[].gres_detail", "jobs[].tres_per_node",
    "jobs[].priority", "jobs[].partition", "jobs[].start_time",
    "jobs[].job_resources.allocated_nodes[]{nodename,memory_allocated,sockets}",
    "jobs[].job_resources.nodes.allocation[]{name,cpus.count,memory.allocated}",
)

NODE_LISTINGS = ("nodes",)
NODE_LISTING_COMMANDS = ("sinfo --json", "scontrol show node --json")
#: Where the node listing lists its nodes (named when it lists none).
NODES_FIELD = "nodes"

#: State words of a node that takes jobs; any other word makes it unavailable.
AVAILABLE_STATES = frozenset({"IDLE", "MIXED", "ALLOCATED", "COMPLETING", "PLANNED", "CLOUD", "POWERED_DOWN",
                              "POWERING_UP"})
#: Job states that hold their nodes' resources.
HOLDING_JOB_STATES = frozenset({"RUNNING", "COMPLETING"})


def kind_of(doc: Value) -> str | None:
    """"nodes" (sinfo 22.05, scontrol show node), "jobs" (squeue), or None."""
    raw = doc.raw
    if isinstance(raw.get("sinfo"), list):
        raise doc.error("`scontrol show node --json` (the `sinfo --json` of newer Slurm versions groups "
                        "nodes and does not say what each one has in use)", "sinfo's grouped JSON")
    for kind in ("nodes", "jobs"):
        if isinstance(raw.get(kind), list):
            return kind
        if kind in raw and is_signed(doc):   # Slurm's, of a wrong shape: refused as Slurm's
            raise doc.need(kind).error("a list (read as slurm JSON: its meta names Slurm)", raw[kind])
    return None


def is_signed(doc: Value) -> bool:
    """Whether the document carries Slurm's own marks: the ``meta`` object that sinfo,
    squeue and scontrol ``--json`` write, naming the data parser (``plugin``) and the
    Slurm version (``Slurm`` up to 23.02, ``slurm`` after). No other engine writes it."""
    meta = doc.raw.get("meta")
    return isinstance(meta, dict) and any(isinstance(meta.get(mark), dict) for mark in ("plugin", "Slurm", "slurm"))


def document_time(docs: dict[str, list[Value]]) -> float | None:
    """Newer Slurm stamps its answers with ``last_update`` (24.05 does); the latest is taken."""
    times = [doc.number("last_update", None) for kind in docs.values() for doc in kind]
    times = [t for t in times if t]
    return float(max(times)) if times else None


def read(docs: dict[str, list[Value]], taken_at: float) -> EngineRead:
    found = EngineRead(used={}, preemption=preemption_rules.SLURM)
    unreported: dict[str, list[str]] = {}
    for doc in docs.get("nodes", []):
        for node in doc.objects("nodes"):
            spec, unavailable, used, missing = _node(node)
            for key in missing:
                unreported.setdefault(key, []).append(spec.host)
            found.nodes.append((spec, f"{node.source}: {node.field()}"))
            found.used[spec.host] = used
            if unavailable:
                found.unhealthy[spec.host] = unavailable
                reason = node.get("reason")
                if reason is not None and isinstance(reason.raw, str) and reason.raw.strip():
                    found.reasons[spec.host] = reason.raw.strip()
    for key, hosts in unreported.items():
        shown = first_few(hosts)
        found.notes.append(f"{len(hosts)} node(s) report no {key} (null or not set), taken as 0: nothing that "
                           f"asks for {'vcores' if key == 'cpus' else 'memory'} fits them: {shown}")
    jobs = [job for doc in docs.get("jobs", []) for job in doc.objects("jobs") if _holds(job)]
    names = _job_names(jobs)
    for job in jobs:
        found.named.extend(_allocations(job, names[id(job)], taken_at))
        start = job.number("start_time", None)
        found.standing[names[id(job)]] = JobStanding(job.integer("priority", None, maximum=2 ** 32),
                                                     job.text("partition", ""),
                                                     max(0.0, taken_at - float(start)) if start else None)
    if not docs.get("jobs") and any(u != Usage() for u in found.used.values()):
        found.notes.append("no squeue --json among the files: what runs on the nodes is not attributed to jobs")
    return found


# ------------------------------------------------------------------ nodes
def _node(node: Value) -> tuple[NodeSpec, str, Usage, list[str]]:
    """The node's spec, its unavailable state ("" when it takes jobs), what it has in use,
    and which of its capacities it does not report (taken as 0)."""
    host = node.name("name")
    vcores = node.number("cpus", None, maximum=MAX_VCORES, limit="MAX_VCORES")
    memory = node.integer("real_memory", None, maximum=MAX_MEMORY_MB, limit="MAX_MEMORY_MB")
    unreported = [key for key, value in (("cpus", vcores), ("real_memory", memory)) if value is None]
    vcores, memory = vcores or 0, memory or 0
    gpus, gpu_type = _gres(node, "gres")
    gpus_used, _ = _gres(node, "gres_used")
    features = node.words("active_features") or node.words("features")
    racks = [f for f in features if f.lower().startswith("rack") and is_name(f)]
    labels = frozenset(label for label in features + node.words("partitions") if is_name(label))
    spec = NodeSpec(host=host, rack=racks[0] if racks else "default-rack", labels=labels,
                    gpu_type=gpu_type if gpus else None, memory_mb=memory, vcores=float(vcores), gpus=gpus,
                    domains=named_domains(read_domains(features)))
    states = state_words(node.words("state"), node.words("state_flags"))
    unavailable = "+".join(w for w in states if w not in AVAILABLE_STATES)
    if not states:
        unavailable = "(no state)"
    used = Usage(float(node.number("alloc_cpus", 0, maximum=MAX_VCORES, limit="MAX_VCORES")),
                 node.integer("alloc_memory", 0, maximum=MAX_MEMORY_MB, limit="MAX_MEMORY_MB"), gpus_used)
    return spec, unavailable, used, unreported


def _gres(holder: Value, key: str) -> tuple[int, str | None]:
    """The GPU count and type of a GRES string (``gpu:v100:8(S:0-1),gpu:v100:2``): the sum
    over its ``gpu`` entries, and their type when they share one (per-GPU types such as
    ``v100_3`` counted as ``v100``)."""
    text = holder.text(key, "") if not isinstance(holder.raw.get(key), list) else ",".join(holder.words(key))
    try:
        entries = gpu_entries(text, strict=True)
    except GresError:
        raise holder.error('GRES like "gpu:v100:8(S:0-1)" or "gpu:4"', text, key=key) from None
    count = sum(entry.count for entry in entries)
    if count > MAX_GPUS_PER_NODE:
        raise holder.error(f"at most {MAX_GPUS_PER_NODE} GPUs on a node (MAX_GPUS_PER_NODE in conf/limits.py)",
                           text, key=key)
    types = {_gpu_model(entry.type) for entry in entries if entry.type}
    gpu_type = types.pop() if len(types) == 1 else None
    return count, gpu_type if gpu_type and is_name(gpu_type) else None


def _gpu_model(gres_type: str) -> str:
    """``v100`` of a per-GPU GRES type ``v100_3``; any other type as it is."""
    per_gpu = split_per_gpu_type(gres_type)
    return per_gpu[0] if per_gpu else gres_type


def expand_hostlist(text: str, holder: Value, key: str) -> list[str]:
    """A Slurm hostlist (``dgx[01-04,07],cpu1``; several bracket groups multiply) as host
    names, refused past MAX_CLUSTER_NODES hosts before any is made."""
    hosts: list[str] = []
    for item in top_level_split(text):
        pieces = re.split(r"(\[[^\[\]]*\])", item.strip())
        choices = []
        size = 1
        for piece in pieces:
            if piece.startswith("["):
                choices.append(_range_values(piece[1:-1], holder, key, text))
            else:
                if "[" in piece or "]" in piece:
                    raise holder.error("a hostlist such as dgx[01-04,07]", text, key=key)
                choices.append([piece])
            size *= len(choices[-1])
        if len(hosts) + size > MAX_CLUSTER_NODES:
            raise holder.error(f"a hostlist of at most {MAX_CLUSTER_NODES:,} hosts (MAX_CLUSTER_NODES in "
                               "conf/limits.py)", text, key=key)
        hosts.extend("".join(combo) for combo in itertools.product(*choices))
    return hosts


def _range_values(body: str, holder: Value, key: str, text: str) -> list[str]:
    values = []
    for part in body.split(","):
        low, sep, high = part.partition("-")
        if not low.isdigit() or (sep and not high.isdigit()) or (sep and int(high) < int(low)):
            raise holder.error("a hostlist such as dgx[01-04,07]", text, key=key)
        end = int(high) if sep else int(low)
        if end - int(low) >= MAX_CLUSTER_NODES:
            raise holder.error(f"a hostlist of at most {MAX_CLUSTER_NODES:,} hosts (MAX_CLUSTER_NODES in "
                               "conf/limits.py)", text, key=key)
        values.extend(f"{n:0{len(low)}d}" for n in range(int(low), end + 1))
    return values


# ------------------------------------------------------------------ jobs
def _holds(job: Value) -> bool:
    return any(state.upper() in HOLDING_JOB_STATES for state in job.words("job_state"))


def _job_key(job: Value) -> int:
    """A heterogeneous job's components are one job (its ``het_job_id``)."""
    return job.integer("het_job_id", 0) or job.integer("job_id", 0)


def _job_names(jobs: list[Value]) -> dict[int, str]:
    """By ``id(job)``: the job's name, with its id where two jobs share a name."""
    keys_by_name: dict[str, set[int]] = {}
    for job in jobs:
        keys_by_name.setdefault(job.text("name", ""), set()).add(_job_key(job))
    names = {}
    for job in jobs:
        name, key = job.text("name", ""), _job_key(job)
        unique = name and len(keys_by_name[name]) == 1
        names[id(job)] = job_name(name if unique else f"{name} ({key})" if name else f"job {key}")
    return names


def _allocations(job: Value, name: str, taken_at: float) -> list[RunningAllocation]:
    end = job.number("end_time", None)
    ends_in = max(0.0, float(end) - taken_at) if end else None
    per_node = _per_node(job)
    gres_detail = job.words("gres_detail") if not isinstance(job.raw.get("gres_detail"), str) else []
    default_gpus = _tres_per_node_gpus(job)
    allocations = []
    for i, (host, cpus, memory) in enumerate(per_node):
        gpus = _gres_counts(gres_detail[i], job) if i < len(gres_detail) else default_gpus
        allocations.append(RunningAllocation(name, host, cpus, memory, gpus, ends_in))
    return allocations


def _per_node(job: Value) -> list[tuple[str, float, int]]:
    """(host, CPUs, memory MB) per node of a running job (module docstring)."""
    resources = job.get("job_resources")
    nodes = resources.get("nodes") if resources is not None else None
    if nodes is not None and nodes.is_object():                    # newer Slurm: CPUs counted
        result = []
        for entry in nodes.objects("allocation"):
            cpus, memory = entry.get("cpus"), entry.get("memory")
            result.append((entry.name("name"), float(cpus.number("count", 0)) if cpus is not None else 0.0,
                           memory.integer("allocated", 0) if memory is not None else 0))
        if result:
            return result
    total_cpus = float(job.number("cpus", 0, maximum=MAX_VCORES * MAX_CLUSTER_NODES))
    allocated = resources.get("allocated_nodes") if resources is not None else None
    if allocated is not None:                                      # 22.05: a list, or an object by index
        items = allocated.objects() if isinstance(allocated.raw, list) else [
            allocated.need(k) for k in sorted(allocated.keys(), key=lambda k: (len(k), k))]
        entries = [(entry.name("nodename"), _allocated_cores(entry), entry.integer("memory_allocated", 0))
                   for entry in items]
        if entries:
            # cores, not CPUs: scaled so that they add up to the job's CPUs (threads per core)
            counted = sum(cores for _, cores, _ in entries)
            scale = total_cpus / counted if counted and total_cpus else 1.0
            return [(host, cores * scale, memory) for host, cores, memory in entries]
    hosts = expand_hostlist(job.text("nodes", ""), job, "nodes")
    memory = job.integer("memory_per_node", 0, maximum=MAX_MEMORY_MB, limit="MAX_MEMORY_MB")
    return [(host, total_cpus / len(hosts), memory) for host in hosts]


def _allocated_cores(entry: Value) -> int:
    """22.05's ``sockets: {"0": {"cores": {"0": "allocated"}}}``: the cores marked allocated."""
    sockets = entry.get("sockets")
    if sockets is None or not sockets.is_object():
        return 0
    count = 0
    for socket in sockets.raw.values():
        cores = socket.get("cores") if isinstance(socket, dict) else None
        if isinstance(cores, dict):
            count += sum(1 for state in cores.values() if isinstance(state, str) and "allocated" in state.lower())
    return count


def _tres_per_node_gpus(job: Value) -> int:
    """``tres_per_node`` ("gres:gpu:v100:2", "gres/gpu:2", "gres/gpu=2"): GPUs on each node."""
    text = job.text("tres_per_node", "") if isinstance(job.raw.get("tres_per_node"), (str, type(None))) else ""
    total = 0
    for entry in top_level_split(text):
        entry = entry.replace("gres/", "gres:").replace("=", ":")
        if entry.startswith("gres:"):
            total += sum(gpu.count for gpu in gpu_entries(entry[len("gres:"):]))
    return min(total, MAX_GPUS_PER_NODE)


def _gres_counts(text: str, job: Value) -> int:
    return _gres(Value({"gres_detail": text}, job.source, job.field()), "gres_detail")[0]
