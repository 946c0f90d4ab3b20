"""What the Slurm client keeps of each application, in ``state_dir/apps/<app>/app.json``.

The file is the application's whole record (written whole at every change), so an AM
started again after its process died registers as the next attempt and finds the jobs
and containers of the previous one (:mod:`.client`). Slurm itself keeps no more than a
job's id, name and state for a few minutes after it ends.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from gangmaster.protocol.rm_protocol import AppState, Container, ContainerState, ContainerStatus, ResourceRequest
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor


def resource_to_dict(r: ResourceDescriptor) -> dict:
    return {"memory_mb": r.memory_mb, "vcores": r.vcores, "gpus": r.gpus, "gpu_mask": r.gpu_mask,
            "ports": r.ports, "port_ranges": str(r.port_ranges) if r.port_ranges.ranges else ""}


def resource_from_dict(d: dict) -> ResourceDescriptor:
    ranges = PortRanges.parse(d["port_ranges"]) if d.get("port_ranges") else PortRanges()
    return ResourceDescriptor(d["memory_mb"], d["vcores"], d["gpus"], d["gpu_mask"], d["ports"], ranges)


@dataclass
class SlurmJobRecord:
    """One heterogeneous job: the asks it serves, one component per host."""

    key: str                      # gm-<app>-<n>: the job's name and folder
    asks: list[ResourceRequest]
    hosts: list[str]              # the host of each ask; component k is the k-th host
    job_id: int = 0               # the leader's Slurm job id
    state: str = "pending"        # pending | granted | ended
    reason: str = ""

    def to_dict(self) -> dict:
        return {"key": self.key, "job_id": self.job_id, "state": self.state, "reason": self.reason,
                "hosts": self.hosts,
                "asks": [{"request_id": a.request_id, "resource": resource_to_dict(a.resource), "host": a.host,
                          "node_label": a.node_label} for a in self.asks]}

    @classmethod
    def from_dict(cls, d: dict) -> "SlurmJobRecord":
        asks = [ResourceRequest(a["request_id"], resource_from_dict(a["resource"]), 1, host=a["host"],
                                relax_locality=False, node_label=a.get("node_label")) for a in d["asks"]]
        return cls(d["key"], asks, d["hosts"], d["job_id"], d["state"], d["reason"])


@dataclass
class ContainerRecord:
    container: Container
    job_key: str
    het_group: int
    state: ContainerState = ContainerState.ALLOCATED
    exit_status: int | None = None
    diagnostics: str = ""

    def to_dict(self) -> dict:
        c = self.container
        return {"id": c.container_id, "attempt": c.attempt, "host": c.host, "rack": c.rack,
                "resource": resource_to_dict(c.resource), "request_id": c.request_id,
                "allocated_at": c.allocated_at, "job": self.job_key, "het_group": self.het_group,
                "state": self.state.value, "exit_status": self.exit_status, "diagnostics": self.diagnostics}

    @classmethod
    def from_dict(cls, app_id: str, d: dict) -> "ContainerRecord":
        c = Container(d["id"], app_id, d["attempt"], d["host"], d["rack"], resource_from_dict(d["resource"]),
                      d["request_id"], d["allocated_at"])
        return cls(c, d["job"], d["het_group"], ContainerState(d["state"]), d["exit_status"], d["diagnostics"])

    def status(self) -> ContainerStatus:
        return ContainerStatus(self.container.container_id, self.container.host, self.state, self.exit_status,
                               self.diagnostics, self.container.request_id)


@dataclass
class AppRecord:
    app_id: str
    name: str
    queue: str
    partition: str | None
    submitted_at: float
    attempt: int = 0
    state: AppState = AppState.ACCEPTED
    final_status: str = ""
    diagnostics: str = ""
    finished_at: float | None = None
    jobs_made: int = 0
    jobs: dict[str, SlurmJobRecord] = field(default_factory=dict)
    containers: dict[str, ContainerRecord] = field(default_factory=dict)
    held: list[ResourceRequest] = field(default_factory=list)   # asks of a cancelled job, not asked again yet

    def to_dict(self) -> dict:
        return {"app_id": self.app_id, "name": self.name, "queue": self.queue, "partition": self.partition,
                "submitted_at": self.submitted_at, "attempt": self.attempt, "state": self.state.value,
                "final_status": self.final_status, "diagnostics": self.diagnostics,
                "finished_at": self.finished_at, "jobs_made": self.jobs_made,
                "jobs": [j.to_dict() for j in self.jobs.values()],
                "containers": [c.to_dict() for c in self.containers.values()]}

    @classmethod
    def from_dict(cls, d: dict) -> "AppRecord":
        app = cls(d["app_id"], d["name"], d["queue"], d["partition"], d["submitted_at"], d["attempt"],
                  AppState(d["state"]), d["final_status"], d["diagnostics"], d["finished_at"], d["jobs_made"])
        app.jobs = {j["key"]: SlurmJobRecord.from_dict(j) for j in d["jobs"]}
        app.containers = {c["id"]: ContainerRecord.from_dict(app.app_id, c) for c in d["containers"]}
        return app
