"""What select() is asked and what it answers."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

import numpy as np

from .explanation import Explanation
from .fit import Demand
from .ports import NO_PORTS, PortRanges
from .resources import ResourceDescriptor
from .values import value

RACK_POLICIES = ("none", "pack", "spread")


@dataclass(frozen=True)
class SelectionRequest:
    """One container request of a task role.

    ``pending_tasks`` is how many instances of the role still wait for a node
    (qizhi's startStatesTaskCount); strategies keep ``pending_tasks ×
    candidate_nodes_factor`` candidates. ``placed_hosts`` are hosts that already
    hold tasks of the job, in placement order: the final pick prefers them, then
    their racks. ``job_gpus`` is the GPU total of the whole job, used by the
    "non-GPU job off GPU nodes" filter.
    """

    role: str
    resource: ResourceDescriptor
    node_label: str | None = None
    gpu_types: tuple[str, ...] = ()
    pending_tasks: int = 1
    reuse_ports: PortRanges = NO_PORTS
    placed_hosts: tuple[str, ...] = ()
    job_gpus: int | None = None
    max_instances_per_node: int | None = None
    rack_policy: str = "none"

    def __post_init__(self) -> None:
        if self.rack_policy not in RACK_POLICIES:
            raise ValueError(f"rack_policy: expected one of {', '.join(RACK_POLICIES)}, got {self.rack_policy!r}")
        if self.pending_tasks < 1:
            raise ValueError(f"pending_tasks: expected an integer >= 1, got {self.pending_tasks}")
        if self.max_instances_per_node is not None and self.max_instances_per_node < 1:
            raise ValueError(f"max_instances_per_node: expected an integer >= 1, got {self.max_instances_per_node}")

    @cached_property
    def demand(self) -> Demand:
        """One instance's ask in the fit model's units, made once per request (gang
        placement asks the same request of a role, made once, again and again)."""
        return Demand.of(self.resource)


@value
class Candidate:
    """A node select() offers: its host and the GPUs it would give (a value: one is made
    per select())."""

    host: str
    gpu_mask: int


@dataclass
class SelectionResult:
    """Candidate hosts, best first, each with the GPUs it would give; the ports common
    to all of them; the resource as it should be asked of the RM (ports filled in);
    and the explanation of what the filters removed (computed by ``explain`` when
    first read: a selection that succeeded rarely needs it)."""

    request: SelectionRequest
    candidates: list[Candidate]
    resource: ResourceDescriptor
    explain: Callable[[], Explanation]
    ports: PortRanges = field(default=NO_PORTS)
    #: the strategy's sort keys, aligned with ``candidates`` (lower is better)
    keys: np.ndarray | None = None

    @cached_property
    def explanation(self) -> Explanation:
        return self.explain()

    @property
    def hosts(self) -> list[str]:
        return [c.host for c in self.candidates]

    @property
    def best(self) -> Candidate:
        return self.candidates[0]
