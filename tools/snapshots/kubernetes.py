"""Kubernetes: ``kubectl get nodes -o json`` and ``kubectl get pods -A -o json``.

Read per node (``items[]`` of kind ``Node``): ``metadata.name`` → host;
``status.allocatable`` (else ``status.capacity``) ``cpu``, ``memory`` and
``nvidia.com/gpu`` (or ``amd.com/gpu``, whole numbers as for every extended resource: a
fraction is refused) → capacity, as the scheduler counts it (what the
kubelet and system daemons reserve is not on offer); ``metadata.labels`` → labels, each as
``key=value`` (``key`` when the value is empty), so a job's ``nodeLabel:
nvidia.com/gpu.present=true`` matches; the rack from a label named ``rack`` (or ending in
``/rack``), else the zone (``topology.kubernetes.io/zone``); the GPU type from
``nvidia.com/gpu.product`` (GPU feature discovery) or ``cloud.google.com/gke-accelerator``;
the network domains above the rack (a job's ``networkDomain``) from the labels NVIDIA's
Topograph writes, ``network.topology.nvidia.com/<level>`` (``leaf``, ``spine``, ``core``;
``block``, ``datacenter`` in its first versions; the level is the key's last part), then the
zone and region (``topology.kubernetes.io/zone``, ``.../region``), innermost first.

A node takes no new pods — and is reported unavailable with this word — when its
``Ready`` condition (``status.conditions[]``) is ``False`` or ``Unknown`` or missing
("NotReady", the condition's message as the reason), when ``spec.unschedulable`` is true
("cordoned"), or when ``spec.taints[]`` holds a ``NoSchedule``/``NoExecute`` taint the
node lifecycle controller sets (keys under ``node.kubernetes.io/`` such as
``disk-pressure`` or ``unreachable``, and ``node.cloudprovider.kubernetes.io/uninitialized``):
the taint's key is the word. Other ``NoSchedule``/``NoExecute`` taints (``dedicated=...``,
``nvidia.com/gpu``) are for pods that tolerate them; a gangmaster job spec has no
tolerations, so they are counted as available and listed in the snapshot's notes.

Read per pod (``items[]`` of kind ``Pod``): a pod holds its requests on ``spec.nodeName``
unless ``status.phase`` is ``Succeeded`` or ``Failed`` (as the scheduler counts it, a
bound ``Pending`` pod included); a pod bound to no node among the nodes of a listing
(``kubectl get nodes,pods``, or a Node whose kind was changed) is left out, and noted. Its requests, as the scheduler computes them: the larger
of its containers' ``resources.requests`` summed (sidecar init containers, with
``restartPolicy: Always``, included) and each init container's with the sidecars started
before it, plus ``spec.overhead``; a resource with ``limits`` but no ``requests`` requests
its limit. Its job: the gang it belongs to (``scheduling.k8s.io/group-name`` annotation,
Volcano; ``scheduling.x-k8s.io/pod-group`` label, coscheduling), else a
``training.kubeflow.org/job-name`` or ``job-name`` label, else its controller
(``metadata.ownerReferences[]`` with ``controller: true``), else the pod — as
``namespace/name``. Its latest end: ``status.startTime`` plus
``spec.activeDeadlineSeconds``. Its priority, for preemption (:mod:`.preemption_rules`):
``spec.priority``, the value of its PriorityClass (a job's: its highest pod's).
"""
from __future__ import annotations

import math
import re
from datetime import datetime
from decimal import Decimal, InvalidOperation

from gangmaster.conf.fields import is_name
from gangmaster.conf.limits import MAX_MEMORY_MB, MAX_VCORES
from gangmaster.gpu_topology.masks import MAX_GPUS_PER_NODE
from gangmaster.selectors.cluster import NodeSpec

from .attribution import job_name
from .json_doc import Value
from . import preemption_rules
from .model import EngineRead, JobStanding, RunningAllocation, first_few, named_domains

FIELDS_READ = (
    "items[].kind", "items[].metadata.name", "items[].metadata.labels",
    "items[].status.allocatable{cpu,memory,nvidia.com/gpu}", "items[].status.capacity{...}",
    "items[].status.conditions[]{type Ready,status,reason,message}", "items[].spec.unschedulable",
    "items[].spec.taints[]{key,value,effect}",
    "items[].metadata.namespace", "items[].metadata.annotations[scheduling.k8s.io/group-name]",
    "items[].metadata.ownerReferences[]{name,controller}", "items[].spec.nodeName", "items[].status.phase",
    "items[].spec.containers[].resources{requests,limits}",
    "items[].spec.initContainers[]{resources,restartPolicy}", "items[].spec.overhead",
    "items[].spec.activeDeadlineSeconds", "items[].status.startTime", "items[].spec.priority",
)

NODE_LISTINGS = ("nodes",)
NODE_LISTING_COMMANDS = ("kubectl get nodes -o json",)
#: Where the node listing lists its nodes (named when it lists none).
NODES_FIELD = "items"

GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
GPU_TYPE_LABELS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator")
ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
#: Network domain levels from node labels: Topograph's prefix (the level is the rest of the key)
#: and the zone and region, innermost first (Topograph's own levels in this order, others after)
DOMAIN_LABEL_PREFIX = "network.topology.nvidia.com/"
DOMAIN_LEVEL_ORDER = ("accelerator", "leaf", "block", "spine", "core", "datacenter")
ZONE_REGION_LABELS = (("zone", "topology.kubernetes.io/zone"), ("region", "topology.kubernetes.io/region"))
#: Taints the node lifecycle controller sets on a node that should take no pods.
LIFECYCLE_TAINT_PREFIXES = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/uninitialized")
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
#: Pod phases that no longer hold their node's resources.
FINISHED_PHASES = ("Succeeded", "Failed")
#: Where a pod's gang or job is named, in order of preference: (annotations|labels, key).
JOB_KEYS = (("annotations", "scheduling.k8s.io/group-name"), ("labels", "scheduling.x-k8s.io/pod-group"),
            ("labels", "pod-group.scheduling.sigs.k8s.io"), ("labels", "training.kubeflow.org/job-name"),
            ("labels", "job-name"))

_QUANTITY = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?)"
                       r"(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?")
_SUFFIX = {None: Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
           "k": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9, "T": Decimal(10) ** 12,
           "P": Decimal(10) ** 15, "E": Decimal(10) ** 18, "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20,
           "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40, "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60}
_MIB = Decimal(2) ** 20


def kind_of(doc: Value) -> str | None:
    """"nodes" for a list holding Node objects (``kubectl get nodes,pods`` holds both),
    "pods" for one holding pods, "empty" for an empty list; None if not Kubernetes JSON."""
    kinds = {_kind(doc, item) for item in _items(doc)} if _is_kubernetes(doc) else None
    if kinds is None:
        return None
    return "nodes" if "Node" in kinds else "pods" if "Pod" in kinds else "empty"


def _is_kubernetes(doc: Value) -> bool:
    kind = doc.raw.get("kind") if doc.is_object() else None
    return ("apiVersion" in doc.keys() and isinstance(kind, str)
            and (kind in ("Node", "Pod") or kind.endswith("List")))


def _items(doc: Value) -> list[Value]:
    return [doc] if doc.text("kind", "") in ("Node", "Pod") else doc.objects("items")


def _kind(doc: Value, item: Value) -> str:
    """An item's kind; the items of a typed list (``NodeList``, as API clients write it) may
    leave it out."""
    listed = doc.text("kind", "")
    return item.text("kind", "") or (listed[:-len("List")] if listed.endswith("List") else "")


def document_time(docs: dict[str, list[Value]]) -> float | None:
    """``kubectl get -o json`` carries no time of its own."""
    return None


def read(docs: dict[str, list[Value]], taken_at: float) -> EngineRead:
    found = EngineRead(preemption=preemption_rules.KUBERNETES)
    tainted: dict[str, int] = {}
    other_kinds = 0
    unbound_among_nodes: list[str] = []
    for listing, doc in ((kind, d) for kind in ("nodes", "pods", "empty") for d in docs.get(kind, [])):
        for item in _items(doc):
            kind = _kind(doc, item)
            if kind == "Node":
                spec, state, reason, taints = _node(item)
                found.nodes.append((spec, f"{item.source}: {item.field()}"))
                if state:
                    found.unhealthy[spec.host] = state
                    if reason:
                        found.reasons[spec.host] = reason
                for taint in taints:
                    tainted[taint] = tainted.get(taint, 0) + 1
            elif kind == "Pod":
                allocation = _pod(item, taken_at)
                if allocation is not None:
                    found.named.append(allocation)
                    _stand(found.standing, allocation.job, item, taken_at)
                elif listing == "nodes" and not _bound(item):
                    unbound_among_nodes.append(f"{item.source}: {item.field()}")
            else:
                other_kinds += 1
    if tainted:
        shown = first_few([f"{taint} ({n})" for taint, n in sorted(tainted.items())])
        found.notes.append(f"nodes with taints a pod must tolerate are counted as available: {shown}")
    if unbound_among_nodes:
        shown = first_few(unbound_among_nodes)
        found.notes.append(f"{len(unbound_among_nodes)} item(s) of kind Pod among the nodes are bound to no node "
                           f"(no spec.nodeName), hold nothing and were left out: {shown}")
    if other_kinds:
        found.notes.append(f"{other_kinds} item(s) that are neither Node nor Pod were left out")
    return found


# ------------------------------------------------------------------ nodes
def _node(node: Value) -> tuple[NodeSpec, str, str, list[str]]:
    """The spec, the unavailable state ("" when the node takes pods) and its reason, and
    the taints it carries that only tolerating pods pass."""
    metadata = node.need("metadata")
    host = metadata.name("name")
    labels = _string_map(metadata, "labels")
    status = node.get("status")
    resources = None
    if status is not None:
        resources = status.get("allocatable") or status.get("capacity")
    if resources is None:
        raise node.error("status.allocatable or status.capacity (the node's resources)")
    vcores = float(_quantity(resources, "cpu", default=Decimal(0)))
    memory_mb = int(_quantity(resources, "memory", default=Decimal(0)) / _MIB)
    gpus = sum(int(_devices(resources, key)) for key in GPU_RESOURCES)
    if vcores > MAX_VCORES or memory_mb > MAX_MEMORY_MB or gpus > MAX_GPUS_PER_NODE:
        raise resources.error(f"a node of at most {MAX_VCORES:,} cpus (MAX_VCORES), {MAX_MEMORY_MB:,} MB "
                              f"(MAX_MEMORY_MB) and {MAX_GPUS_PER_NODE} GPUs (MAX_GPUS_PER_NODE in "
                              "conf/limits.py)", f"{vcores:g} cpus, {memory_mb:,} MB, {gpus} GPUs")
    gpu_type = next((labels[key] for key in GPU_TYPE_LABELS if is_name(labels.get(key, ""))), None)
    spec = NodeSpec(host=host, rack=_rack(labels), labels=frozenset(_label_names(labels)),
                    gpu_type=gpu_type if gpus else None, memory_mb=memory_mb, vcores=vcores, gpus=gpus,
                    domains=_domains(labels))
    state, reason = _availability(node, status)
    spec_part = node.get("spec")
    tolerable = []
    for taint in spec_part.objects("taints") if spec_part is not None else []:
        key, effect = taint.text("key", ""), taint.text("effect", "")
        if effect not in BLOCKING_EFFECTS:
            continue
        if key.startswith(LIFECYCLE_TAINT_PREFIXES):
            if not state:
                state, reason = key, f"taint {key}:{effect}"
        else:
            value = taint.text("value", "")
            tolerable.append(f"{key}={value}:{effect}" if value else f"{key}:{effect}")
    return spec, state, reason, tolerable


def _availability(node: Value, status: Value) -> tuple[str, str]:
    ready = next((c for c in status.objects("conditions") if c.text("type", "") == "Ready"), None)
    if ready is None:
        return "NotReady", "the node reports no Ready condition"
    if ready.text("status", "") != "True":
        message = ready.text("message", "") or ready.text("reason", "")
        return "NotReady", f"Ready={ready.text('status', '')}" + (f": {message}" if message else "")
    spec = node.get("spec")
    if spec is not None and spec.get("unschedulable") is not None:
        flag = spec.need("unschedulable")
        if not isinstance(flag.raw, bool):
            raise flag.error("true or false", flag.raw)
        if flag.raw:
            return "cordoned", "spec.unschedulable is true (kubectl cordon)"
    return "", ""


def _string_map(holder: Value, key: str) -> dict[str, str]:
    found = holder.get(key)
    if found is None:
        return {}
    if not found.is_object() or not all(isinstance(v, str) for v in found.raw.values()):
        raise found.error("an object of strings", found.raw)
    return dict(found.raw)


def _label_names(labels: dict[str, str]) -> list[str]:
    """Each label as a name (``key=value``, or ``key`` for an empty value); labels too long
    to be names (a 253-character prefix and a value) are left out."""
    names = (f"{key}={value}" if value else key for key, value in labels.items())
    return [name for name in names if is_name(name)]


def _rack(labels: dict[str, str]) -> str:
    racks = [value for key, value in labels.items() if key == "rack" or key.endswith("/rack")]
    racks += [labels[key] for key in ZONE_LABELS if key in labels]
    return next((rack for rack in racks if is_name(rack)), "default-rack")


def _domains(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The node's network domains above the rack (module docstring)."""
    fabric = [(key[len(DOMAIN_LABEL_PREFIX):], value) for key, value in labels.items()
              if key.startswith(DOMAIN_LABEL_PREFIX)]
    rank = {level: k for k, level in enumerate(DOMAIN_LEVEL_ORDER)}
    fabric.sort(key=lambda pair: rank.get(pair[0], len(rank)))
    fabric += [(level, labels[key]) for level, key in ZONE_REGION_LABELS if key in labels]
    return named_domains(fabric)


def _quantity(resources: Value, key: str, default: Decimal) -> Decimal:
    """A Kubernetes quantity ("16", "15500m", "64Gi", "65536Ki", "1.5e3") as a number of
    base units (cores, bytes, devices); ``default`` when missing."""
    found = resources.get(key)
    if found is None:
        return default
    raw = found.raw
    if isinstance(raw, (int, float)) and not isinstance(raw, bool) and math.isfinite(raw) and raw >= 0:
        return Decimal(str(raw))
    match = _QUANTITY.fullmatch(raw.strip()) if isinstance(raw, str) and len(raw) <= 64 else None
    if match is None:
        raise found.error('a Kubernetes quantity such as "16", "15500m", "64Gi" or "65536Ki"', raw)
    try:
        value = Decimal(match.group(1)) * _SUFFIX[match.group(2)]
    except InvalidOperation:
        raise found.error("a Kubernetes quantity", raw) from None
    if value < 0:
        raise found.error("a quantity >= 0", raw)
    return value


def _amount(resources: Value, key: str) -> Decimal:
    """The quantity of ``key`` (0 when missing), a whole one for a device."""
    return _devices(resources, key) if key in GPU_RESOURCES else _quantity(resources, key, default=Decimal(0))


def _devices(resources: Value, key: str) -> Decimal:
    """A count of devices (``nvidia.com/gpu``): an extended resource, which Kubernetes
    takes only in whole units ("1.5" or "500m" GPUs is refused, not rounded down)."""
    value = _quantity(resources, key, default=Decimal(0))
    if value != value.to_integral_value():
        found = resources.need(key)
        raise found.error(f"a whole number of devices (extended resources such as {key} are integers)", found.raw)
    return value


# ------------------------------------------------------------------ pods
def _pod(pod: Value, taken_at: float) -> RunningAllocation | None:
    spec, status = pod.get("spec"), pod.get("status")
    if not _bound(pod):
        return None
    phase = status.text("phase", "") if status is not None else ""
    if phase in FINISHED_PHASES:
        return None
    host = spec.name("nodeName")
    cpu, memory, gpus = _pod_requests(spec)
    if cpu > MAX_VCORES or memory > MAX_MEMORY_MB * _MIB or gpus > MAX_GPUS_PER_NODE:
        raise spec.error(f"pod requests of at most {MAX_VCORES:,} cpus (MAX_VCORES), {MAX_MEMORY_MB:,} MB "
                         f"(MAX_MEMORY_MB) and {MAX_GPUS_PER_NODE} GPUs (MAX_GPUS_PER_NODE in conf/limits.py)",
                         f"{float(cpu):g} cpus, {float(memory / _MIB):,.0f} MB, {float(gpus):g} GPUs")
    ends_in = None
    if spec.has("activeDeadlineSeconds") and status is not None and status.has("startTime"):
        deadline = spec.number("activeDeadlineSeconds")
        started = _timestamp(status, "startTime")
        ends_in = max(0.0, started + deadline - taken_at)
    return RunningAllocation(job_name(_job(pod)), host, float(cpu), math.ceil(memory / _MIB), int(gpus), ends_in)


def _stand(standing: dict[str, JobStanding], job: str, pod: Value, taken_at: float) -> None:
    """The job's priority, as preemption reads it, from its pod's ``spec.priority`` (its
    PriorityClass's value; 0 when none is set, as the scheduler takes it): a job is as
    preemptible as its highest pod. Its time run: since its earliest pod's ``status.startTime``."""
    spec, status = pod.need("spec"), pod.get("status")
    priority = spec.integer("priority", 0, minimum=-(2 ** 31), maximum=2 ** 31 - 1)
    ran = taken_at - _timestamp(status, "startTime") if status is not None and status.has("startTime") else None
    seen = standing.get(job)
    if seen is not None:
        priority = max(priority, seen.priority or 0)
        ran = None if ran is None or seen.ran_s is None else max(ran, seen.ran_s)
    standing[job] = JobStanding(priority, "", None if ran is None else max(0.0, ran))


def _bound(pod: Value) -> bool:
    """Whether the scheduler has placed the pod (``spec.nodeName``); one not placed holds nothing."""
    spec = pod.get("spec")
    return spec is not None and spec.has("nodeName")


def _pod_requests(spec: Value) -> tuple[Decimal, Decimal, Decimal]:
    """(cpu cores, memory bytes, GPUs) the scheduler reserves for the pod (module docstring)."""
    def requests(container: Value) -> list[Decimal]:
        resources = container.get("resources")
        asked = resources.get("requests") if resources is not None else None
        limits = resources.get("limits") if resources is not None else None
        amounts = []
        for keys in (("cpu",), ("memory",), GPU_RESOURCES):
            total = Decimal(0)
            for key in keys:
                if asked is not None and asked.has(key):
                    total += _amount(asked, key)
                elif limits is not None:
                    total += _amount(limits, key)
            amounts.append(total)
        return amounts

    def add(a: list[Decimal], b: list[Decimal]) -> list[Decimal]:
        return [x + y for x, y in zip(a, b)]

    zero = [Decimal(0)] * 3
    sidecars, init_peak = zero, zero
    for init in spec.objects("initContainers"):
        asked = requests(init)
        if init.text("restartPolicy", "") == "Always":
            sidecars = add(sidecars, asked)
        else:
            init_peak = [max(p, x) for p, x in zip(init_peak, add(sidecars, asked))]
    running = sidecars
    for container in spec.objects("containers"):
        running = add(running, requests(container))
    total = [max(a, b) for a, b in zip(running, init_peak)]
    overhead = spec.get("overhead")
    if overhead is not None:
        total = add(total, [_quantity(overhead, "cpu", Decimal(0)), _quantity(overhead, "memory", Decimal(0)),
                            Decimal(0)])
    return total[0], total[1], total[2]


def _job(pod: Value) -> str:
    metadata = pod.need("metadata")
    namespace = metadata.text("namespace", "default")
    for where, key in JOB_KEYS:
        value = _string_map(metadata, where).get(key)
        if value:
            return f"{namespace}/{value}"
    for owner in metadata.objects("ownerReferences"):
        if owner.get("controller") is not None and owner.need("controller").raw is True:
            return f"{namespace}/{owner.text('name')}"
    return f"{namespace}/{metadata.text('name')}"


def _timestamp(holder: Value, key: str) -> float:
    """An RFC 3339 time ("2024-05-01T10:00:00Z") as seconds since the epoch."""
    text = holder.text(key)
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise holder.error('an RFC 3339 time such as "2024-05-01T10:00:00Z"', text, key=key) from None
