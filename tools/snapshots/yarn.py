"""Hadoop YARN: the ResourceManager's REST API, as JSON files.

What an operator dumps (``curl -s http://RM:8088/ws/v1/cluster/...``):

* ``/ws/v1/cluster/nodes`` (required): every NodeManager, in any state. Read per node:
  ``nodeHostName`` (else ``id`` up to the port) → host, except where several nodes of the
  listing share a host: each of them is then known by its ``id`` (``host:port``), as YARN
  itself names them with ``yarn.scheduler.include-port-in-node-name`` (several NodeManagers
  on one host, as the local cluster runs them; or a NodeManager restarted on a new port, the
  old id LOST beside the new); ``rack``; ``state`` (``RUNNING``
  takes work; ``NEW``, ``UNHEALTHY``, ``LOST``, ``DECOMMISSIONING``, ``DECOMMISSIONED``,
  ``REBOOTED``, ``SHUTDOWN`` and any state this reader does not know do not) and
  ``healthReport`` as the reason; ``nodeLabels`` → labels; capacity from
  ``totalResource`` (Hadoop 3.3+: ``memory``, ``vCores``, and ``yarn.io/gpu`` among
  ``resourceInformations.resourceInformation[]``), else used + available
  (``usedResource``/``availableResource``, or the older ``usedMemoryMB``/``availMemoryMB``/
  ``usedVirtualCores``/``availableVirtualCores``); in use from ``usedResource`` or
  ``usedMemoryMB``/``usedVirtualCores``.
* ``/ws/v1/cluster/apps`` (optional): ``apps.app[]``'s ``id``, ``name`` and ``state``, and
  the ``LIFETIME`` entry of ``timeouts.timeout[]`` (``remainingTimeInSeconds``, -1 when
  unlimited) as when the application ends at the latest; for preemption its ``priority``,
  ``queue`` and ``elapsedTime`` (:mod:`.preemption_rules`).
* ``/ws/v1/cluster/scheduler`` (optional): whether queue ``default`` preempts for priority
  (its ``intraQueuePreemptionDisabled``); nothing else of it is used (the simulated RM that
  ``diagnose --snapshot`` books the snapshot on has one unlimited queue).
* ``/ws/v1/cluster/apps/{app}/appattempts/{attempt}/containers`` (optional, one file per
  application attempt): ``container[]``'s ``containerId``, ``assignedNodeId`` (or
  ``nodeId``), ``containerState``, ``allocatedMB``, ``allocatedVCores`` and
  ``allocatedResources`` (``yarn.io/gpu``).

What cannot be known: the apps API does not say on which nodes an application's
containers run, so without containers files the usage each node reports is held by
"(unattributed)" — except when a single application is running, which then holds it
all. Resource types other than memory, vcores and ``yarn.io/gpu`` (a cluster's per-GPU
``gangmaster.io/gpu-<i>``) are not read. YARN does not report GPU models (``gpu_type`` stays unset; a job that asks for a GPU
type fits no YARN node), nor GPU indices.
"""
from __future__ import annotations

import re
from collections import Counter

from gangmaster.conf.fields import is_name
from gangmaster.conf.limits import MAX_MEMORY_MB, MAX_VCORES
from gangmaster.gpu_topology.masks import MAX_GPUS_PER_NODE
from gangmaster.selectors.cluster import NodeSpec

from .attribution import job_name
from .json_doc import Value
from . import preemption_rules
from .model import EngineRead, JobStanding, RunningAllocation, Usage

FIELDS_READ = (
    "nodes.node[].nodeHostName", "nodes.node[].id", "nodes.node[].rack", "nodes.node[].state",
    "nodes.node[].healthReport", "nodes.node[].nodeLabels",
    "nodes.node[].totalResource{memory,vCores,resourceInformations yarn.io/gpu}",
    "nodes.node[].usedResource{...}", "nodes.node[].availableResource{...}",
    "nodes.node[].usedMemoryMB", "nodes.node[].availMemoryMB", "nodes.node[].usedVirtualCores",
    "nodes.node[].availableVirtualCores",
    "apps.app[].id", "apps.app[].name", "apps.app[].state", "apps.app[].priority", "apps.app[].queue",
    "apps.app[].elapsedTime", "scheduler.schedulerInfo...queue[]{queueName,queuePath,intraQueuePreemptionDisabled}",
    "apps.app[].timeouts.timeout[]{type LIFETIME,remainingTimeInSeconds}",
    "container[].containerId", "container[].assignedNodeId", "container[].nodeId",
    "container[].containerState", "container[].allocatedMB", "container[].allocatedVCores",
    "container[].allocatedResources yarn.io/gpu",
)

#: The kinds of document that list nodes, and what to run for one.
NODE_LISTINGS = ("nodes",)
NODE_LISTING_COMMANDS = ("curl http://RM:8088/ws/v1/cluster/nodes",)
#: Where the node listing lists its nodes (named when it lists none).
NODES_FIELD = "nodes.node"

#: The one node state in which the RM places new containers.
SCHEDULABLE_STATE = "RUNNING"
#: Container states that hold resources on their node.
HOLDING_CONTAINER_STATES = {"NEW", "RESERVED", "ALLOCATED", "ACQUIRED", "RUNNING"}
GPU_RESOURCE = "yarn.io/gpu"

#: ``container_1326821518301_0005_01_000001`` or, with an RM epoch, ``container_e17_1410901177871_0001_01_000005``.
_CONTAINER_ID = re.compile(r"container_(?:e\d+_)?(\d+)_(\d+)_\d+_\d+")


def kind_of(doc: Value) -> str | None:
    """Which RM REST answer this is: "nodes", "apps", "scheduler", "containers", or None."""
    keys = doc.keys()
    if keys == {"scheduler"} and doc.need("scheduler").is_object():
        return "scheduler"
    if "nodes" in keys and (doc.get("nodes") is None or doc.need("nodes").is_object()):
        return "nodes"
    if "apps" in keys and (doc.get("apps") is None or doc.need("apps").is_object()):
        return "apps"
    if "containers" in keys or ("container" in keys and "meta" not in keys):
        return "containers"
    return None


def read(docs: dict[str, list[Value]], taken_at: float) -> EngineRead:
    """The nodes, their states and usage, and the containers of the files, by kind."""
    found = EngineRead(used={})
    listed = [node for doc in docs.get("nodes", []) for node in _listed(doc)]
    host_names = Counter(node.text("nodeHostName", "") for node in listed)
    shared = {name for name, count in host_names.items() if name and count > 1}
    for node in listed:
        spec, state, report, in_use = _node(node, shared)
        found.nodes.append((spec, f"{node.source}: {node.field()}"))
        found.used[spec.host] = in_use
        if state != SCHEDULABLE_STATE:
            found.unhealthy[spec.host] = state
            if report and report.lower() != "healthy":
                found.reasons[spec.host] = report
    apps = _apps(docs.get("apps", []))
    found.standing = {app.job: app.standing for app in apps.values()}
    found.preemption = preemption_rules.yarn(docs.get("scheduler", []))
    found.named = [alloc for doc in docs.get("containers", [])
                   for alloc in _containers(doc, apps, shared)]
    if not docs.get("containers"):
        running = [app for app in apps.values() if app.state == "RUNNING"]
        if len(running) == 1:
            found.named = [RunningAllocation(running[0].job, host, u.vcores, u.memory_mb, u.gpus, running[0].ends_in)
                           for host, u in found.used.items() if u != Usage()]
            found.notes.append(f"the one running application, {running[0].job}, holds all the usage the nodes "
                               "report")
        elif any(u != Usage() for u in found.used.values()):
            found.notes.append("YARN's apps API does not say where an application's containers run: add "
                               "/ws/v1/cluster/apps/{app}/appattempts/{attempt}/containers for each to name the jobs")
    if any(spec.gpus for spec, _ in found.nodes):
        found.notes.append("YARN does not report GPU models: a job that asks for a GPU type fits none of these nodes")
    return found


def document_time(docs: dict[str, list[Value]]) -> float | None:
    """The RM's answers carry no time of their own (what this reader needs of time is
    relative: an application's remaining lifetime)."""
    return None


# ------------------------------------------------------------------ nodes
def _listed(doc: Value) -> list[Value]:
    nodes = doc.get("nodes")
    return nodes.objects("node") if nodes is not None else []


def _node(node: Value, shared_hosts: set[str]) -> tuple[NodeSpec, str, str, Usage]:
    host = _host(node, shared_hosts)
    rack = node.name("rack") if node.has("rack") else "default-rack"
    labels = frozenset(_labels(node))
    total = node.get("totalResource")
    used_info, avail_info = node.get("usedResource"), node.get("availableResource")
    used = _amounts(used_info) if used_info is not None else Usage(
        float(node.number("usedVirtualCores", 0.0)), int(node.number("usedMemoryMB", 0)), 0)
    if total is not None:
        capacity = _amounts(total)
    elif avail_info is not None:
        free = _amounts(avail_info)
        capacity = Usage(used.vcores + free.vcores, used.memory_mb + free.memory_mb, used.gpus + free.gpus)
    else:
        capacity = Usage(used.vcores + float(node.number("availableVirtualCores", 0.0)),
                         used.memory_mb + int(node.number("availMemoryMB", 0)), used.gpus)
    where = node.field()
    if capacity.memory_mb > MAX_MEMORY_MB or capacity.vcores > MAX_VCORES or capacity.gpus > MAX_GPUS_PER_NODE:
        raise node.error(f"a node of at most {MAX_MEMORY_MB:,} MB (MAX_MEMORY_MB), {MAX_VCORES:,} vcores "
                         f"(MAX_VCORES) and {MAX_GPUS_PER_NODE} GPUs (MAX_GPUS_PER_NODE in conf/limits.py)",
                         f"{capacity.memory_mb:,} MB, {capacity.vcores:g} vcores, {capacity.gpus} GPUs at {where}")
    spec = NodeSpec(host=host, rack=rack, labels=labels, memory_mb=capacity.memory_mb, vcores=capacity.vcores,
                    gpus=capacity.gpus)
    state = node.text("state", "(no state)").strip() or "(no state)"
    return spec, state, node.text("healthReport", "").strip(), used


def _host(node: Value, shared_hosts: set[str]) -> str:
    """The node's host name, or its id (``host:port``) where its host runs several nodes."""
    if node.has("nodeHostName") and node.text("nodeHostName") not in shared_hosts:
        return node.name("nodeHostName")
    if node.has("nodeHostName"):
        node_id = node.text("id")
        if not is_name(node_id):
            raise node.error("a node id HOST:PORT that is a name", node_id, key="id")
        return node_id
    node_id = node.text("id")          # required when there is no host name: "host:port"
    host = node_id.rsplit(":", 1)[0] if ":" in node_id else node_id
    if not is_name(host):
        raise node.error("a host name before the port (nodeHostName is missing)", node_id, key="id")
    return host


def _labels(node: Value) -> list[str]:
    labels = node.words("nodeLabels")
    for label in labels:
        if not is_name(label):
            raise node.error("node labels that are names (no spaces or control characters)", label,
                             key="nodeLabels")
    return labels


def _amounts(info: Value) -> Usage:
    """A ResourceInfo (``{"memory", "vCores", "resourceInformations"}``) as amounts."""
    gpus = 0
    for entry in _resource_informations(info):
        if entry.text("name", "") == GPU_RESOURCE:
            gpus = entry.integer("value", 0, maximum=MAX_GPUS_PER_NODE, limit="MAX_GPUS_PER_NODE")
    return Usage(float(info.number("vCores", 0.0)), info.integer("memory", 0), gpus)


def _resource_informations(info: Value) -> list[Value]:
    infos = info.get("resourceInformations")
    if infos is None:
        return []
    if infos.is_object() and infos.has("resourceInformation"):
        return infos.objects("resourceInformation")
    return infos.objects()


# ------------------------------------------------------------------ applications
class _App:
    __slots__ = ("job", "state", "ends_in", "standing")

    def __init__(self, job: str, state: str, ends_in: float | None, standing: JobStanding):
        self.job, self.state, self.ends_in, self.standing = job, state, ends_in, standing


def _apps(docs: list[Value]) -> dict[str, _App]:
    """Application id → its job name ("name (id)" when names repeat), state, latest end, and
    its priority, queue and time run (``priority``, ``queue``, ``elapsedTime``)."""
    found: list[tuple[str, str, str, float | None, JobStanding]] = []
    for doc in docs:
        apps = doc.get("apps")
        for app in apps.objects("app") if apps is not None else []:
            elapsed_ms = app.number("elapsedTime", None)
            standing = JobStanding(app.integer("priority", None, minimum=-(2 ** 31), maximum=2 ** 31 - 1),
                                   app.text("queue", ""), None if elapsed_ms is None else elapsed_ms / 1000.0)
            found.append((app.text("id"), app.text("name", ""), app.text("state", ""), _lifetime_left(app), standing))
    names = [name for _, name, _, _, _ in found]
    return {app_id: _App(job_name(name if name and names.count(name) == 1 else
                                  f"{name} ({app_id})" if name else app_id), state, ends_in, standing)
            for app_id, name, state, ends_in, standing in found}


def _lifetime_left(app: Value) -> float | None:
    timeouts = app.get("timeouts")
    for timeout in (timeouts.objects("timeout") if timeouts is not None else []):
        if timeout.text("type", "") == "LIFETIME":
            left = timeout.number("remainingTimeInSeconds", None, minimum=None)
            return None if left is None or left < 0 else float(left)
    return None


def _containers(doc: Value, apps: dict[str, _App], shared_hosts: set[str]) -> list[RunningAllocation]:
    holder = doc.get("containers") if doc.has("containers") else doc
    allocations = []
    for container in holder.objects("container") if holder is not None else []:
        if container.text("containerState", "RUNNING").upper() not in HOLDING_CONTAINER_STATES:
            continue
        container_id = container.text("containerId")
        match = _CONTAINER_ID.fullmatch(container_id)
        if match is None:
            raise container.error("a YARN container id like container_1326821518301_0005_01_000001",
                                  container_id, key="containerId")
        app_id = f"application_{match.group(1)}_{match.group(2)}"
        app = apps.get(app_id)
        node_id = container.text("assignedNodeId", "") or container.text("nodeId")
        host = node_id.rsplit(":", 1)[0]
        host = node_id if host in shared_hosts else host      # as its node is named (_host)
        if not is_name(host):
            raise container.error("a node id HOST:PORT whose host is a name", node_id, key="assignedNodeId")
        gpus = _container_gpus(container)
        allocations.append(RunningAllocation(app.job if app else app_id, host,
                                             float(container.number("allocatedVCores", 0.0)),
                                             int(container.integer("allocatedMB", 0)), gpus,
                                             app.ends_in if app else None))
    return allocations


def _container_gpus(container: Value) -> int:
    """``allocatedResources``' ``yarn.io/gpu``: JAXB writes the map as ``{"entry": [{"key",
    "value"}]}`` with the value as a string ("2"); a plain object is read as well."""
    resources = container.get("allocatedResources")
    if resources is None:
        return 0
    if resources.has("entry"):
        for entry in resources.objects("entry"):
            if entry.text("key", "") == GPU_RESOURCE:
                return _gpu_count(entry, "value")
        return 0
    return _gpu_count(resources, GPU_RESOURCE)


def _gpu_count(holder: Value, key: str) -> int:
    found = holder.get(key)
    if found is not None and isinstance(found.raw, str):
        text = found.raw.strip()
        if not text.isdigit() or int(text) > MAX_GPUS_PER_NODE:
            raise found.error(f"a GPU count 0..{MAX_GPUS_PER_NODE} (MAX_GPUS_PER_NODE in conf/limits.py)",
                              found.raw)
        return int(text)
    return holder.integer(key, 0, maximum=MAX_GPUS_PER_NODE, limit="MAX_GPUS_PER_NODE")
