"""What select() is asked and what it answers."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Sequence

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


class SelectionResult:
    """Candidate hosts, best first, each with the GPUs it would give; the ports common
    to all of them; the resource as it should be asked of the RM (ports filled in);
    and the explanation of what the filters removed (computed by ``explain`` when
    first read: a selection that succeeded rarely needs it).

    A plain slotted class, not a dataclass: one is made per select(), and what a caller
    rarely reads is made when first read — the resource with the ports named (from the
    request's and the ports), the keys as an array (from the values given), the
    explanation."""

    __slots__ = ("request", "candidates", "explain", "ports", "_resource", "_keys", "_explanation")

    def __init__(self, request: SelectionRequest, candidates: list[Candidate],
                 resource: ResourceDescriptor | None, explain: Callable[[], Explanation],
                 ports: PortRanges = NO_PORTS, keys: np.ndarray | Sequence[int] | None = None):
        self.request, self.candidates, self.explain, self.ports = request, candidates, explain, ports
        #: None: the request's resource, naming ``ports`` when there are any (made when read)
        self._resource = resource
        self._keys = keys
        self._explanation: Explanation | None = None

    @property
    def resource(self) -> ResourceDescriptor:
        """The resource to ask of the RM: the request's, naming the ports chosen."""
        resource = self._resource
        if resource is None:
            resource = self._resource = (self.request.resource.with_ports(self.ports) if self.ports
                                         else self.request.resource)
        return resource

    @property
    def keys(self) -> np.ndarray | None:
        """The strategy's sort keys, aligned with ``candidates`` (lower is better)."""
        keys = self._keys
        if keys is not None and not isinstance(keys, np.ndarray):
            keys = self._keys = np.array(keys)
        return keys

    @property
    def explanation(self) -> Explanation:
        explanation = self._explanation
        if explanation is None:
            explanation = self._explanation = self.explain()
        return explanation

    @property
    def hosts(self) -> list[str]:
        return [c.host for c in self.candidates]

    @property
    def best(self) -> Candidate:
        return self.candidates[0]

    def __repr__(self) -> str:
        return (f"SelectionResult(request={self.request!r}, candidates={self.candidates!r}, "
                f"resource={self.resource!r}, ports={self.ports!r}, keys={self.keys!r})")
