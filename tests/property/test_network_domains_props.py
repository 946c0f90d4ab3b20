"""Properties of gangs that ask a network domain (am/gang_domains.py) on small random
clusters of racks, some GPUs already taken: a gang that asks ``required`` rack and is
placed is inside one rack, whole, with no GPU given twice; a gang that is not placed
could not have been placed in any one rack (each rack tried alone, the others marked
unhealthy, with the ordinary placement); the view is never changed; ``preferred``
places whenever the gang fits somewhere."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given, settings, strategies as st

from gangmaster.am.core.gang_placement import GangDoesNotFit, place_gang
from gangmaster.am.spec.jobspec_model import Completion, RetryPolicy, RoleSpec
from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.domains import DomainAsk
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.selectors.selector import get_selector
from gangmaster.selectors.settings import SelectionSettings

STRATEGIES = ("job-packing", "best-fit", "random", "topology", "locality")


@st.composite
def clusters(draw) -> ClusterView:
    specs = []
    for rack in range(draw(st.integers(2, 4))):
        for k in range(draw(st.integers(1, 4))):
            specs.append(NodeSpec(f"n{rack}-{k}", rack=f"r{rack}", memory_mb=65536, vcores=32,
                                  gpus=draw(st.sampled_from([4, 8]))))
    view = ClusterView(specs)
    for i, spec in enumerate(specs):
        taken = draw(st.integers(0, (1 << spec.gpus) - 1))
        if taken:
            view.allocate(i, R(memory_mb=1024, vcores=1, gpu_mask=taken))
    return view


@st.composite
def gangs(draw) -> tuple[RoleSpec, ...]:
    def role(name: str, gpus: int) -> RoleSpec:
        return RoleSpec(name=name, instances=draw(st.integers(1, 6)), cpu=2, memory_mb=4096, gpus=gpus, ports={},
                        commands=("true",), completion=Completion(), task_retry_count=0, retry=RetryPolicy(),
                        rack_policy=draw(st.sampled_from([None, "pack", "spread"])))
    roles = [role("worker", draw(st.integers(1, 4)))]
    if draw(st.booleans()):
        roles.insert(0, role("ps", draw(st.integers(0, 2))))
    return tuple(roles)


def pipeline(name: str, seed: int) -> SelectionPipeline:
    return SelectionPipeline(SelectionSettings(seed=seed), get_selector(name))


def racks(view: ClusterView, hosts) -> set[str]:
    return {view.node(h).rack for h in hosts}


def fits_in_rack_alone(view: ClusterView, roles, name: str, seed: int, rack: str) -> bool:
    alone = view.copy()
    for spec in view.specs:
        if spec.rack != rack:
            alone.set_health(spec.host, False)
    try:
        place_gang(alone, roles, pipeline(name, seed))
    except GangDoesNotFit:
        return False
    return True


@settings(max_examples=30)
@given(view=clusters(), roles=gangs(), name=st.sampled_from(STRATEGIES), seed=st.integers(0, 3))
def test_a_required_rack_gang_is_placed_whole_in_one_rack_or_no_rack_could_hold_it(view, roles, name, seed):
    asking = tuple(replace(role, gang_network_domain=DomainAsk("rack", True)) for role in roles)
    before = (view.gpu_free_mask.copy(), view.memory_free.copy())
    try:
        placement = place_gang(view, asking, pipeline(name, seed))
    except GangDoesNotFit:
        assert not any(fits_in_rack_alone(view, roles, name, seed, rack) for rack in view.racks)
    else:
        assert len(racks(view, placement.hosts())) == 1
        assert sorted((p.role, p.index) for p in placement.instances) == sorted(
            (role.name, k) for role in roles for k in range(role.instances))
        booked = view.copy()
        for p in placement.instances:   # raises on a GPU given twice (or one not free)
            booked.allocate(p.host, p.resource, role=p.role)
    assert np.array_equal(view.gpu_free_mask, before[0]) and np.array_equal(view.memory_free, before[1])


@settings(max_examples=20)
@given(view=clusters(), roles=gangs(), name=st.sampled_from(STRATEGIES), seed=st.integers(0, 3))
def test_a_preferred_rack_gang_places_when_the_gang_fits_anywhere(view, roles, name, seed):
    asking = tuple(replace(role, gang_network_domain=DomainAsk("rack", False)) for role in roles)
    try:
        plain = place_gang(view, roles, pipeline(name, seed))
    except GangDoesNotFit:
        return
    placement = place_gang(view, asking, pipeline(name, seed))
    assert len(placement.instances) == len(plain.instances)
    booked = view.copy()
    for p in placement.instances:
        booked.allocate(p.host, p.resource, role=p.role)


@settings(max_examples=20)
@given(view=clusters(), roles=gangs(), name=st.sampled_from(STRATEGIES), seed=st.integers(0, 3))
def test_a_role_that_asks_its_own_rack_is_placed_inside_one_with_the_rest_of_the_gang(view, roles, name, seed):
    asking = roles[:-1] + (replace(roles[-1], network_domain=DomainAsk("rack", True)),)
    try:
        placement = place_gang(view, asking, pipeline(name, seed))
    except GangDoesNotFit:
        return
    workers = [p.host for p in placement.instances if p.role == "worker"]
    assert len(racks(view, workers)) == 1
    assert len(placement.instances) == sum(role.instances for role in roles)
    booked = view.copy()
    for p in placement.instances:
        booked.allocate(p.host, p.resource, role=p.role)
