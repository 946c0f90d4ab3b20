import numpy as np
import pytest
from hypothesis import given, strategies as st

from gangmaster.am.core.gang_placement import GangDoesNotFit, check_fits_empty, place_gang
from gangmaster.am.spec.jobspec_model import Completion, RetryPolicy, RoleSpec
from gangmaster.selectors.cluster_file import load_cluster
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.resources import ResourceDescriptor as R


def role(name, instances, cpu=2, memory=1024, gpus=0, cap=None, ratio=1.0):
    return RoleSpec(name=name, instances=instances, cpu=cpu, memory_mb=memory, gpus=gpus, ports={"p": 1},
                    commands=("true",), completion=Completion(), task_retry_count=0, retry=RetryPolicy(),
                    request_ratio=ratio, max_instances_per_node=cap)


def test_whole_gang_placed_with_caps_and_ratio():
    view = load_cluster()
    placement = place_gang(view, (role("server", 6, cpu=8, cap=1, ratio=0.5), role("worker", 8, gpus=2, cap=2)),
                           SelectionPipeline())
    assert len(placement.instances) == 14
    servers = [p.host for p in placement.instances if p.role == "server"]
    assert len(set(servers)) == 6                      # at most 1 per node
    workers = [p.host for p in placement.instances if p.role == "worker"]
    assert max(workers.count(h) for h in workers) <= 2
    assert all(p.resource.vcores == 4 for p in placement.instances if p.role == "server")
    assert view.memory_free.sum() == view.memory_capacity.sum()  # the view itself is untouched


def test_gang_that_does_not_fit_now_places_nothing_and_says_why():
    view = load_cluster()
    for host in view.hosts[:8]:  # the GPU machines are full
        view.allocate(host, R(gpu_mask=view.free_mask(view.index(host))))
    before = view.gpus_free.copy()
    with pytest.raises(GangDoesNotFit) as err:
        place_gang(view, (role("worker", 2, gpus=1),), SelectionPipeline())
    assert "0/2 instances placed; worker[0] found no node" in str(err.value)
    assert "8 gpus exhausted (need 1, most free 0)" in str(err.value)
    assert not err.value.never
    assert np.array_equal(view.gpus_free, before)
    check_fits_empty(view, (role("worker", 2, gpus=1),), SelectionPipeline())  # fits when empty: waits


def test_a_gangs_explanation_describes_the_cluster_when_it_did_not_fit_though_read_later():
    view = load_cluster()
    for host in view.hosts[:8]:  # the GPU machines are full
        view.allocate(host, R(gpu_mask=view.free_mask(view.index(host))))
    with pytest.raises(GangDoesNotFit) as err:   # one instance: picked on the view itself
        place_gang(view, (role("worker", 1, gpus=1),), SelectionPipeline())
    for host in view.hosts[:8]:   # then every GPU is free again, before anyone reads why
        view.release(host, R(gpu_mask=view.gpu_capacity_mask.item(view.index(host))))
    assert "8 gpus exhausted (need 1, most free 0)" in str(err.value)
    assert err.value.explanation.survivors == 0


def test_gang_that_can_never_fit_fails_at_submission_with_numbers():
    view = load_cluster()
    with pytest.raises(GangDoesNotFit) as err:
        check_fits_empty(view, (role("server", 13, cap=1),), SelectionPipeline())
    assert err.value.never
    assert "does not fit even on the empty cluster: 12/13 instances placed" in str(err.value)
    assert "12 at the cap of 1 instance(s) of the role per node" in str(err.value)


@given(st.lists(st.tuples(st.integers(1, 6), st.sampled_from([0, 1, 2, 4]), st.sampled_from([None, 1, 2])),
                min_size=1, max_size=3))
def test_placement_never_double_books_and_is_all_or_nothing(shape):
    """Checked against the placement itself, not through the view's booking (which
    refuses a double booking on its own): on each node the instances' GPU masks are
    disjoint and within its GPUs, their ports disjoint, their memory and vcores within
    its capacity and each role within its cap; every instance of every role is placed
    once. A gang that does not fit places nothing and says how far it got."""
    view = load_cluster()
    roles = tuple(role(f"r{i}", n, gpus=g, cap=c) for i, (n, g, c) in enumerate(shape))
    try:
        placement = place_gang(view, roles, SelectionPipeline())
    except GangDoesNotFit as err:
        assert 0 <= err.placed < err.total == sum(n for n, _, _ in shape)
        assert view.is_empty()
        return
    assert view.is_empty()
    assert sorted((p.role, p.index) for p in placement.instances) == \
           sorted((r.name, i) for r in roles for i in range(r.instances))
    by_role = {r.name: r for r in roles}
    for host in set(placement.hosts()):
        here = [p for p in placement.instances if p.host == host]
        i = view.index(host)
        gpus_given = 0
        for p in here:
            assert p.gpu_mask.bit_count() == by_role[p.role].gpus == p.resource.gpus
            assert p.gpu_mask & ~view.gpu_capacity_mask.item(i) == 0
            assert p.resource.gpu_mask == p.gpu_mask
            assert gpus_given & p.gpu_mask == 0, f"{host}: GPUs {p.gpu_mask:#x} given twice"
            gpus_given |= p.gpu_mask
        ports = [port for p in here for port in p.resource.port_ranges]
        assert len(ports) == len(set(ports)) == sum(p.resource.ports for p in here), f"{host}: a port given twice"
        assert sum(p.resource.memory_mb for p in here) <= view.memory_capacity.item(i)
        assert sum(p.resource.vcores for p in here) <= view.vcores_capacity.item(i)
        for name, spec in by_role.items():
            if spec.max_instances_per_node is not None:
                assert sum(p.role == name for p in here) <= spec.max_instances_per_node
    for p in placement.instances:   # and the view books it all as the placement says
        view.allocate(p.host, p.resource, role=p.role)
    assert view.gpus_used.sum() == sum(r.instances * r.gpus for r in roles)
    assert view.memory_used.sum() == sum(p.resource.memory_mb for p in placement.instances)


def test_the_never_fits_check_on_an_idle_cluster_is_the_gangs_placement_on_it():
    """On a view that is the empty cluster itself the check places the gang there and hands
    that placement back (what place_gang gives on the view); on any other view it only checks."""
    roles = (role("server", 6, cpu=8, cap=1, ratio=0.5), role("worker", 8, gpus=2, cap=2))
    view = load_cluster()
    assert view.is_empty()
    placed = check_fits_empty(view, roles, SelectionPipeline())
    again = place_gang(view, roles, SelectionPipeline())
    assert [(p.role, p.index, p.host, p.resource) for p in placed.instances] == \
           [(p.role, p.index, p.host, p.resource) for p in again.instances]
    assert view.is_empty()                                    # checked on a copy
    view.allocate(view.hosts[0], R(memory_mb=1))
    assert not view.is_empty()
    assert check_fits_empty(view, roles, SelectionPipeline()) is None


def test_a_view_is_empty_only_as_a_new_view_of_its_nodes_would_be():
    view = load_cluster()
    assert view.is_empty()
    for change in (lambda v: v.set_health(v.hosts[1], False), lambda v: v.instances_of("w").__setitem__(2, 1),
                   lambda v: v.mark_failed("w", v.hosts[3]), lambda v: v.outstanding.__setitem__(4, 1),
                   lambda v: v.allocate(v.hosts[5], R(ports=1, port_ranges=v.ports_free[5].take_sequential(1)))):
        changed = load_cluster()
        change(changed)
        assert not changed.is_empty()


def share_role(name, instances, milli, cap=None):
    from share_roles import ShareRole
    return ShareRole(name=name, instances=instances, cpu=1, memory_mb=1024, gpus=0, ports={}, commands=("true",),
                     completion=Completion(), task_retry_count=0, retry=RetryPolicy(), max_instances_per_node=cap,
                     gpu_milli=milli)


def test_a_share_role_stacks_on_the_tightest_gpus_of_a_node_and_a_whole_gpu_role_keeps_off_them():
    from gangmaster.selectors.cluster import ClusterView, NodeSpec
    from gangmaster.selectors.ports import PortRanges
    view = ClusterView([NodeSpec(f"n{i}", "r", frozenset(), "V100", None, 65536, 16, 2, PortRanges.of((20000, 20009)))
                        for i in range(2)])
    view.allocate("n1", R(gpu_milli=500, gpu_mask=0b10))
    roles = (share_role("infer", 5, 300), role("train", 1, gpus=1))
    placement = place_gang(view, roles, SelectionPipeline())
    shares = [(p.host, p.gpu_mask, p.resource.gpu_milli) for p in placement.instances if p.role == "infer"]
    # job packing takes n1 (fuller) first: its GPU 1 (500 free) takes one share, GPU 0 three more; n0 the last
    assert shares == [("n1", 0b10, 300), ("n1", 0b01, 300), ("n1", 0b01, 300), ("n1", 0b01, 300), ("n0", 0b01, 300)]
    assert all(str(p.resource).endswith(f"gpu_milli=300@gpu{p.gpu_mask.bit_length() - 1}")
               for p in placement.instances if p.role == "infer")
    train = [p for p in placement.instances if p.role == "train"]
    assert [(p.host, p.gpu_mask, p.resource.gpu_milli) for p in train] == [("n0", 0b10, 0)]   # a wholly free GPU
    assert view.gpu_milli_free.tolist() == [[1000, 1000], [1000, 500]]   # the view itself is untouched


def test_a_share_gang_that_does_not_fit_places_nothing_and_says_why_in_milli():
    from gangmaster.selectors.cluster import ClusterView, NodeSpec
    view = ClusterView([NodeSpec(f"n{i}", "r", frozenset(), "V100", None, 65536, 16, 1) for i in range(2)])
    view.allocate("n0", R(gpu_milli=700, gpu_mask=0b1))
    before = view.gpu_milli_free.copy()
    with pytest.raises(GangDoesNotFit) as err:
        place_gang(view, (share_role("infer", 3, 400),), SelectionPipeline())
    assert "2/3 instances placed; infer[2] found no node" in str(err.value)
    assert "2 no GPU with 400 milli free, most free 300" in str(err.value)
    assert np.array_equal(view.gpu_milli_free, before)


def test_a_strategy_that_gives_a_share_no_gpu_is_named():
    from gangmaster.selectors.cluster import ClusterView, NodeSpec
    from gangmaster.selectors.selector import Selector
    from gangmaster.selectors.settings import SelectionSettings

    class NoGpuForShares(Selector):
        name = "no-gpu-for-shares-test"

        def rank(self, view, candidates, request):
            return np.zeros(len(candidates), dtype=np.int64)

        def choose_gpus(self, view, node, request):
            return 0

    view = ClusterView([NodeSpec("n0", "r", frozenset(), "V100", None, 65536, 16, 2)])
    with pytest.raises(ValueError, match="NoGpuForShares.choose_gpus gave 0x0 for a share of 300 milli on n0"):
        place_gang(view, (share_role("infer", 2, 300),), SelectionPipeline(SelectionSettings(), NoGpuForShares()))
    assert view.gpu_milli_free.tolist() == [[1000, 1000]]


def test_hosts_read_from_the_columns_match_the_instances():
    """hosts() is read from each role's columns before any instance is made; it says what
    the instances, made when first read, say."""
    placement = place_gang(load_cluster(), (role("server", 6, cpu=8, cap=1), role("worker", 8, gpus=2, cap=2)),
                           SelectionPipeline())
    hosts = placement.hosts()
    assert hosts == [p.host for p in placement.instances] and len(hosts) == 14
    assert [(p.role, p.index) for p in placement.instances] == (
        [("server", i) for i in range(6)] + [("worker", i) for i in range(8)])
