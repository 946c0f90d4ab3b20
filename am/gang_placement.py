"""All-or-nothing placement of a gang against the AM's view.

Every instance of every role of the gang is placed with the same select()
pipeline as a single request, against a scratch copy of the view; the placement
is returned only if every instance found a node, so nothing is ever half-placed.
The first instance that finds no node stops the attempt with the pipeline's
explanation, in numbers.

:func:`check_fits_empty` applies Spark 2.4's rule: a gang that could not be placed
even on the empty cluster (labels, GPU types, per-node caps, capacity) fails at
submission instead of waiting forever.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from gangmaster.selectors.cluster import ClusterView
from gangmaster.selectors.explanation import NotAvailable
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.request import SelectionRequest

from .jobspec_model import RoleSpec


@dataclass(frozen=True)
class InstancePlacement:
    role: str
    index: int
    host: str
    gpu_mask: int
    ports: str
    resource: object  # the ResourceDescriptor booked (asked of the RM)


@dataclass
class GangPlacement:
    instances: list[InstancePlacement] = field(default_factory=list)

    def hosts(self) -> list[str]:
        return [p.host for p in self.instances]


class GangDoesNotFit(Exception):
    """No placement for the whole gang now; ``role``/``index`` is the instance that
    found no node, ``explanation`` says why."""

    def __init__(self, role: str, index: int, placed: int, total: int, cause: NotAvailable,
                 never: bool = False):
        self.role, self.index, self.placed, self.total = role, index, placed, total
        self.cause, self.explanation, self.never = cause, cause.explanation, never
        when = "even on the empty cluster" if never else "now"
        super().__init__(f"the gang does not fit {when}: {placed}/{total} instances placed; "
                         f"{role}[{index}] found no node: {cause}")


def role_request(role: RoleSpec, pending: int, placed_hosts: tuple[str, ...]) -> SelectionRequest:
    return SelectionRequest(
        role=role.name, resource=role.ask_resource(), node_label=role.node_label,
        gpu_types=role.gpu_types, pending_tasks=max(1, pending), placed_hosts=placed_hosts,
        max_instances_per_node=role.max_instances_per_node, rack_policy=role.rack_policy)


def place_gang(view: ClusterView, roles: tuple[RoleSpec, ...], pipeline: SelectionPipeline,
               recent_hosts: int = 8) -> GangPlacement:
    """Place every instance of ``roles`` on a scratch copy of ``view``.

    ``recent_hosts``: how many of the most recently used distinct hosts are passed
    as the job's placed hosts (locality); bounded so placing thousands of
    instances stays linear."""
    scratch = view.copy()
    placement = GangPlacement()
    total = sum(r.instances for r in roles)
    recent: list[str] = []
    for role in roles:
        for index in range(role.instances):
            # One instance at a time: each select() sees the previous bookings.
            request = role_request(role, 1, tuple(recent))
            try:
                result = pipeline.select_single_node(scratch, request)
            except NotAvailable as exc:
                raise GangDoesNotFit(role.name, index, len(placement.instances), total, exc) from None
            choice = result.best
            booked = result.resource.with_(gpus=0, gpu_mask=choice.gpu_mask) if choice.gpu_mask else result.resource
            scratch.allocate(choice.host, booked, role=role.name)
            placement.instances.append(InstancePlacement(role.name, index, choice.host, choice.gpu_mask,
                                                         str(result.ports) if result.ports else "", booked))
            if choice.host not in recent:
                recent.append(choice.host)
                del recent[:-recent_hosts]
    return placement


def empty_view(view: ClusterView) -> ClusterView:
    """The same nodes, all healthy and unused."""
    return ClusterView(view.specs)


def check_fits_empty(view: ClusterView, roles: tuple[RoleSpec, ...], pipeline: SelectionPipeline) -> None:
    """Raise :class:`GangDoesNotFit` (``never=True``) if the gang cannot be placed
    even on the empty cluster."""
    try:
        place_gang(empty_view(view), roles, pipeline)
    except GangDoesNotFit as exc:
        raise GangDoesNotFit(exc.role, exc.index, exc.placed, exc.total, exc.cause, never=True) from None
