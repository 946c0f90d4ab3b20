"""Properties of gang placement (am/gang_placement.py) on small random clusters.

The product places a role in rounds (rank once, fill nodes as the final pick
would); the reference here is the plain method it replaced — one
select_single_node per instance on a scratch copy — kept in this test only, to
compare against."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, note, settings, strategies as st

from gangmaster.am.gang_placement import GangDoesNotFit, GangPlacement, InstancePlacement, place_gang, role_request
from gangmaster.am.jobspec_model import Completion, RetryPolicy, RoleSpec
from gangmaster.gpu_topology.masks import popcount
from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.explanation import NotAvailable
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.selector import Selector, get_selector
from gangmaster.selectors.settings import SelectionSettings

TOPOLOGY = {8: "dgx1-v100", 4: "pcie-4gpu", 0: None}


class EmptiestFirst(Selector):
    """A plugin that promises nothing about its keys (both flags False), and whose
    key gets worse as a node fills: exercises the re-rank path."""

    name = "emptiest-first-test"

    def rank(self, view, candidates, request):
        return -np.rint(view.vcores_free[candidates] * 10).astype(np.int64)


STRATEGIES = ("job-packing", "locality", "topology", "random", "emptiest-first-test")


def make_pipeline(strategy: str, seed: int) -> SelectionPipeline:
    selector = EmptiestFirst() if strategy == EmptiestFirst.name else get_selector(strategy)
    return SelectionPipeline(SelectionSettings(seed=seed), selector)


def reference_place(view: ClusterView, roles, pipeline: SelectionPipeline, indices=None,
                    recent_hosts: int = 8) -> GangPlacement:
    """The old method: one select_single_node per instance, booked on a scratch copy."""
    scratch = view.copy()
    placement = GangPlacement()
    recent: list[str] = []
    total = sum(len(indices.get(r.name, ())) if indices is not None else r.instances for r in roles)
    for role in roles:
        todo = sorted(indices.get(role.name, ())) if indices is not None else range(role.instances)
        for index in todo:
            try:
                result = pipeline.select_single_node(scratch, role_request(role, 1, tuple(recent)))
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


@st.composite
def clusters(draw, scarce_ports: bool = False) -> ClusterView:
    """2..12 nodes of up to 3 racks, CPU and GPU nodes, some labelled, some unhealthy,
    some already partly used (by instances of the gang's own roles too)."""
    n = draw(st.integers(2, 12))
    distinct = draw(st.booleans())  # distinct memory sizes: no exact ties between nodes
    specs = []
    for i in range(n):
        gpus = draw(st.sampled_from([0, 4, 8]))
        ports = (PortRanges.of((20000, 20000 + draw(st.integers(0, 4)))) if scarce_ports
                 else PortRanges.of((20000, 29999)))
        specs.append(NodeSpec(host=f"n{i:02d}", rack=f"r{draw(st.integers(0, 2))}",
                              labels=frozenset(["fast"]) if draw(st.booleans()) else frozenset(),
                              gpu_type="V100" if gpus else None, topology=TOPOLOGY[gpus],
                              memory_mb=draw(st.sampled_from([8192, 16384, 65536])) + (i if distinct else 0),
                              vcores=draw(st.sampled_from([4.0, 16.0])), gpus=gpus, ports=ports))
    view = ClusterView(specs)
    for i in range(n):
        if draw(st.integers(0, 9)) == 0:
            view.set_health(view.hosts[i], False)
        if draw(st.integers(0, 3)) == 0:  # something already runs here
            gpus = min(draw(st.integers(0, 3)), int(view.gpus_free[i]))
            mask = 0
            if gpus:
                free = [b for b in range(int(view.gpu_capacity[i])) if view.free_mask(i) >> b & 1]
                mask = sum(1 << b for b in draw(st.permutations(free))[:gpus])
            role = draw(st.sampled_from([None, "r0", "r1"]))
            view.allocate(i, ResourceDescriptor(memory_mb=draw(st.integers(0, 4096)), vcores=draw(st.sampled_from([0.0, 1.0, 2.5])),
                                                gpu_mask=mask, port_ranges=PortRanges.of((20000, 20000))), role=role)
    return view


@st.composite
def uniform_clusters(draw) -> ClusterView:
    """3..8 identical machines over 1..3 racks: every pick is a tie, and a strategy
    whose key worsens as a node fills (topology with 2 GPUs, emptiest-first) moves
    between nodes often — where a ranking reused too long would show."""
    gpus = draw(st.sampled_from([0, 4, 8]))
    racks = draw(st.integers(1, 3))
    view = ClusterView([NodeSpec(host=f"n{i:02d}", rack=f"r{draw(st.integers(0, racks - 1))}",
                                 gpu_type="V100" if gpus else None, topology=TOPOLOGY[gpus], memory_mb=65536,
                                 vcores=16.0, gpus=gpus, ports=PortRanges.of((20000, 29999)))
                        for i in range(draw(st.integers(3, 8)))])
    if gpus and draw(st.booleans()):  # one GPU already taken here and there
        for i in range(len(view)):
            if draw(st.booleans()):
                view.allocate(i, ResourceDescriptor(gpu_mask=1 << draw(st.integers(0, gpus - 1))))
    return view


@st.composite
def gangs(draw, min_instances: int = 1) -> tuple[RoleSpec, ...]:
    roles = []
    for i in range(draw(st.integers(1, 3))):
        roles.append(RoleSpec(
            name=f"r{i}", instances=draw(st.integers(min_instances, 6)), cpu=draw(st.integers(1, 4)),
            memory_mb=draw(st.sampled_from([512, 2048, 4096])), gpus=draw(st.sampled_from([0, 0, 1, 2])),
            ports={"p": draw(st.integers(0, 2))}, commands=("true",), completion=Completion(), task_retry_count=0,
            retry=RetryPolicy(), request_ratio=draw(st.sampled_from([1.0, 0.5, 0.7])),
            max_instances_per_node=draw(st.sampled_from([None, 1, 2])),
            node_label=draw(st.sampled_from([None, None, "fast"])),
            rack_policy=draw(st.sampled_from(["none", "pack", "spread"]))))
    return tuple(roles)


@st.composite
def index_subsets(draw, roles):
    """None (all), or a mapping naming some roles with a subset of their indices."""
    if draw(st.booleans()):
        return None
    return {r.name: draw(st.lists(st.integers(0, r.instances - 1), unique=True))
            for r in roles if draw(st.booleans())}


def describe(view: ClusterView) -> str:
    """The cluster as a failing example should show it."""
    return "\n".join(f"{s.host} {s.rack} labels={sorted(s.labels)} healthy={bool(view.healthy[i])} "
                     f"free={view.free(i)} roles={ {r: int(c[i]) for r, c in view.role_count.items() if c[i]} }"
                     for i, s in enumerate(view.specs))


def snapshot(view: ClusterView):
    return (view.memory_free.tolist(), view.vcores_free.tolist(), view.gpus_free.tolist(),
            view.gpu_free_mask.tolist(), list(view.ports_free), view.healthy.tolist(),
            {r: c.tolist() for r, c in view.role_count.items() if c.any()})


def requested(roles, indices) -> set[tuple[str, int]]:
    if indices is None:
        return {(r.name, i) for r in roles for i in range(r.instances)}
    return {(r.name, i) for r in roles for i in indices.get(r.name, ())}


@given(clusters(scarce_ports=True), gangs(), st.sampled_from(STRATEGIES), st.integers(0, 3), st.data())
def test_placement_books_cleanly_respects_caps_and_places_exactly_the_indices(view, roles, strategy, seed, data):
    indices = data.draw(index_subsets(roles))
    before = snapshot(view)
    try:
        placement = place_gang(view, roles, make_pipeline(strategy, seed), indices=indices)
    except GangDoesNotFit as exc:
        assert snapshot(view) == before                        # all or nothing: the view is untouched
        assert exc.total == len(requested(roles, indices))
        assert (exc.role, exc.index) in requested(roles, indices)
        assert exc.placed < exc.total
        return
    assert snapshot(view) == before
    got = [(p.role, p.index) for p in placement.instances]
    assert len(got) == len(set(got)) and set(got) == requested(roles, indices)
    by_name = {r.name: r for r in roles}
    fresh = view.copy()
    for p in placement.instances:
        role = by_name[p.role]
        assert popcount(p.gpu_mask) == role.gpus and p.resource.gpu_mask == p.gpu_mask
        assert p.resource.ports == role.port_count and str(p.resource.port_ranges or "") == p.ports
        assert p.resource.vcores == role.ask_vcores and p.resource.memory_mb == role.memory_mb
        # booking everything on a copy of the view succeeds: no GPU, port, memory or
        # vcore is given twice or beyond what is free
        fresh.allocate(p.host, p.resource, role=p.role)
    for role in roles:
        if role.max_instances_per_node is not None:  # counting what already ran there
            assert fresh.instances_of(role.name).max() <= max(role.max_instances_per_node,
                                                              view.instances_of(role.name).max())


@settings(max_examples=300)
@given(clusters(), gangs(), st.sampled_from(STRATEGIES), st.integers(0, 3), st.data())
def test_same_hosts_and_gpus_as_one_select_per_instance(view, roles, strategy, seed, data):
    """With ports to spare (so select()'s common-ports rule never narrows its
    candidates), placing in rounds takes exactly the per-instance decisions: same
    hosts, same GPU masks, same failures — ties and RNG draws included."""
    indices = data.draw(index_subsets(roles))
    note(describe(view))
    try:
        expected = reference_place(view, roles, make_pipeline(strategy, seed), indices)
    except GangDoesNotFit as exc:
        expected = exc
    try:
        got = place_gang(view, roles, make_pipeline(strategy, seed), indices=indices)
    except GangDoesNotFit as exc:
        assert isinstance(expected, GangDoesNotFit), f"the reference placed it: {exc}"
        assert (exc.role, exc.index, exc.placed, exc.total) == (expected.role, expected.index, expected.placed,
                                                                expected.total)
        assert str(exc) == str(expected)
        return
    assert not isinstance(expected, GangDoesNotFit), f"the reference failed: {expected}"
    assert [(p.role, p.index, p.host, p.gpu_mask) for p in got.instances] == \
           [(p.role, p.index, p.host, p.gpu_mask) for p in expected.instances]


@given(uniform_clusters(), gangs(min_instances=2), st.sampled_from(STRATEGIES), st.integers(0, 3), st.data())
def test_same_hosts_and_gpus_as_one_select_per_instance_on_uniform_clusters(view, roles, strategy, seed, data):
    test_same_hosts_and_gpus_as_one_select_per_instance.hypothesis.inner_test(view, roles, strategy, seed, data)


@given(clusters(scarce_ports=True), gangs(), st.sampled_from(STRATEGIES), st.integers(0, 3))
def test_places_whenever_one_select_per_instance_could(view, roles, strategy, seed):
    """Ports are scarce here, so the two may choose differently; a single role's
    feasibility does not depend on the choices, so the product must place it
    whenever the reference did."""
    role = roles[0]
    try:
        reference_place(view, (role,), make_pipeline(strategy, seed))
    except GangDoesNotFit:
        return
    place_gang(view, (role,), make_pipeline(strategy, seed))


@given(clusters(scarce_ports=True), gangs(), st.sampled_from(STRATEGIES), st.integers(0, 3))
def test_deterministic_for_a_seed(view, roles, strategy, seed):
    def attempt():
        try:
            return [(p.role, p.index, p.host, p.gpu_mask, p.ports)
                    for p in place_gang(view, roles, make_pipeline(strategy, seed)).instances]
        except GangDoesNotFit as exc:
            return str(exc)
    assert attempt() == attempt()


@given(clusters(), gangs(), st.sampled_from(["job-packing", "topology"]))
def test_rack_policies_hold(view, roles, strategy):
    """``pack``: a role moves to a new rack only once the racks it holds have no node
    that fits, so it never goes back to a rack it left. (``spread`` is checked by the
    equivalence with the per-instance method above, whose filter implements it.)"""
    clean = ClusterView(view.specs)
    assume(all(r.rack_policy != "none" for r in roles))
    try:
        placement = place_gang(clean, roles, make_pipeline(strategy, 0))
    except GangDoesNotFit:
        return
    rack_of = {s.host: s.rack for s in clean.specs}
    for role in roles:
        racks = [rack_of[p.host] for p in placement.instances if p.role == role.name]
        if role.rack_policy == "pack":
            # racks are used one after another, never going back to an earlier one
            seen = []
            for rack in racks:
                if not seen or seen[-1] != rack:
                    assert rack not in seen, f"pack went back to {rack}: {racks}"
                    seen.append(rack)


@pytest.mark.parametrize("seed", range(3))
def test_locality_ranks_again_when_the_job_reaches_a_new_node(seed):
    """locality's keys follow the job's hosts: once a node is full the next pick must
    see the new host's rack-mates ranked first, as one select() per instance does."""
    racks = ["r0", "r1", "r1", "r0", "r1", "r0"]
    view = ClusterView([NodeSpec(f"n{i}", rack=rack, memory_mb=65536, vcores=16.0,
                                 ports=PortRanges.of((20000, 29999))) for i, rack in enumerate(racks)])
    roles = (RoleSpec(name="ps", instances=4, cpu=1, memory_mb=512, gpus=0, ports={}, commands=("true",),
                      completion=Completion(), task_retry_count=0, retry=RetryPolicy(), max_instances_per_node=1),)
    expected = reference_place(view, roles, make_pipeline("locality", seed))
    got = place_gang(view, roles, make_pipeline("locality", seed))
    assert got.hosts() == expected.hosts()
    rack_of = dict(zip(view.hosts, racks))
    assert len({rack_of[h] for h in got.hosts()[:3]}) == 1  # the first three share a rack


@pytest.mark.parametrize("seed", range(4))
def test_a_window_cut_short_by_the_ranking_ranks_again(seed):
    """job packing ranks only pending × factor nodes; when spread has served the
    ranked ones' racks, the next pick must see the nodes beyond them (here two
    tied ones, so the RNG draws between them) as one select() per instance does."""
    specs = [NodeSpec(f"full{i}", rack="r0", memory_mb=4096, vcores=4.0) for i in range(3)]
    specs += [NodeSpec("d", rack="r1", memory_mb=65536, vcores=16.0), NodeSpec("e", rack="r2", memory_mb=65536, vcores=16.0)]
    view = ClusterView(specs)
    roles = (RoleSpec(name="w", instances=2, cpu=1, memory_mb=512, gpus=0, ports={}, commands=("true",),
                      completion=Completion(), task_retry_count=0, retry=RetryPolicy(), rack_policy="spread"),)
    expected = reference_place(view, roles, make_pipeline("job-packing", seed))
    assert place_gang(view, roles, make_pipeline("job-packing", seed)).hosts() == expected.hosts()
