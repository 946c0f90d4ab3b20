"""place_gang's API as the AM uses it: ``indices`` (select again only the instances
not granted yet) and a pipeline per role (roles can name their own strategy)."""
import numpy as np
import pytest

from gangmaster.am.core.gang_placement import GangDoesNotFit, check_fits_empty, place_gang, role_request
from gangmaster.am.spec.jobspec_model import Completion, RetryPolicy, RoleSpec
from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.explanation import NotAvailable
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.selector import Selector, get_selector
from gangmaster.selectors.settings import SelectionSettings


def role(name, instances, cpu=1, memory=1024, gpus=0, cap=None, ports=1):
    return RoleSpec(name=name, instances=instances, cpu=cpu, memory_mb=memory, gpus=gpus,
                    ports={"rpc": ports} if ports else {}, commands=("true",), completion=Completion(),
                    task_retry_count=0, retry=RetryPolicy(), max_instances_per_node=cap)


def cluster(nodes=4, gpus=4, vcores=8.0):
    return ClusterView([NodeSpec(f"h{i}", rack=f"r{i % 2}", memory_mb=16384, vcores=vcores, gpus=gpus,
                                 gpu_type="T4" if gpus else None, topology="pcie-4gpu" if gpus == 4 else None,
                                 ports=PortRanges.of((20000, 20099))) for i in range(nodes)])


class EmptiestFirst(Selector):
    """Spreads: most free vcores first, no preference for the job's hosts."""

    name = "emptiest-first-api-test"
    prefer_locality = False

    def rank(self, view, candidates, request):
        return -np.rint(view.vcores_free[candidates] * 10).astype(np.int64)


# ------------------------------------------------------------------ indices
def test_indices_place_only_the_named_instances_with_their_real_index():
    roles = (role("ps", 4), role("worker", 6, gpus=1))
    placement = place_gang(cluster(), roles, SelectionPipeline(), indices={"worker": [5, 1, 3]})
    assert [(p.role, p.index) for p in placement.instances] == [("worker", 1), ("worker", 3), ("worker", 5)]
    for p in placement.instances:
        assert p.resource.gpu_mask == p.gpu_mask and bin(p.gpu_mask).count("1") == 1
        assert p.ports and p.resource.port_ranges.count == 1


def test_a_role_missing_from_indices_places_nothing_and_an_empty_mapping_places_nothing():
    roles = (role("ps", 2), role("worker", 2))
    assert place_gang(cluster(), roles, SelectionPipeline(), indices={}).instances == []
    placement = place_gang(cluster(), roles, SelectionPipeline(), indices={"ps": range(2)})
    assert {p.role for p in placement.instances} == {"ps"}


def test_indices_count_instances_already_on_the_view_against_the_cap():
    view = cluster(nodes=3)
    granted = place_gang(view, (role("ps", 3, cap=1),), SelectionPipeline(), indices={"ps": [0, 2]})
    for p in granted.instances:  # the RM granted these: the AM books them on its view
        view.allocate(p.host, p.resource, role="ps")
    placement = place_gang(view, (role("ps", 3, cap=1),), SelectionPipeline(), indices={"ps": [1]})
    assert placement.instances[0].host not in granted.hosts()   # the cap counts the granted two
    with pytest.raises(GangDoesNotFit) as err:
        place_gang(view, (role("ps", 4, cap=1),), SelectionPipeline(), indices={"ps": [1, 3]})
    assert (err.value.role, err.value.index, err.value.placed, err.value.total) == ("ps", 3, 1, 2)
    assert "1/2 instances placed; ps[3] found no node" in str(err.value)
    assert "at the cap of 1 instance(s) of the role per node" in str(err.value)


@pytest.mark.parametrize("indices, message", [
    ({"nope": [0]}, "indices: unknown role(s) 'nope'; the gang's roles are 'ps'"),
    ({"ps": [0, 2]}, "indices['ps']: expected indices in 0..1, got [2]"),
    ({"ps": [-1]}, "indices['ps']: expected indices in 0..1, got [-1]"),
    ({"ps": [1, 1]}, "indices['ps']: index(es) [1] given more than once"),
    ({"ps": [0.5]}, "indices['ps']: expected integers, got [0.5]"),
])
def test_bad_indices_are_named(indices, message):
    with pytest.raises(ValueError) as err:
        place_gang(cluster(), (role("ps", 2),), SelectionPipeline(), indices=indices)
    assert str(err.value) == message


# ---------------------------------------------------------- pipeline per role
def test_each_role_is_placed_by_its_own_pipeline():
    spread = SelectionPipeline(SelectionSettings(), EmptiestFirst())
    pack = SelectionPipeline(SelectionSettings(), get_selector("job-packing"))
    asked = []

    def pipeline_for(r):
        asked.append(r.name)
        return spread if r.name == "spread" else pack

    roles = (role("spread", 4, cpu=2), role("pack", 4, cpu=2))
    placement = place_gang(cluster(nodes=4, gpus=0, vcores=16.0), roles, pipeline_for)
    assert asked == ["spread", "pack"]
    spread_hosts = [p.host for p in placement.instances if p.role == "spread"]
    pack_hosts = [p.host for p in placement.instances if p.role == "pack"]
    assert len(set(spread_hosts)) == 4          # most free vcores first: one per node
    assert len(set(pack_hosts)) == 1            # fullest first: all on one node


def test_check_fits_empty_takes_a_pipeline_per_role_too():
    pipeline_for = lambda r: SelectionPipeline(SelectionSettings(), EmptiestFirst())
    check_fits_empty(cluster(), (role("ps", 4, cap=1),), pipeline_for)
    with pytest.raises(GangDoesNotFit) as err:
        check_fits_empty(cluster(), (role("ps", 5, cap=1),), pipeline_for)
    assert err.value.never and (err.value.index, err.value.placed, err.value.total) == (4, 4, 5)


def test_a_pipeline_callable_that_returns_something_else_is_named():
    with pytest.raises(TypeError) as err:
        place_gang(cluster(), (role("ps", 1),), lambda r: "job-packing")
    assert str(err.value) == "the pipeline of role 'ps': expected a SelectionPipeline, got str"


def test_the_view_passed_in_is_not_changed():
    view = cluster()
    before = (view.memory_free.copy(), view.gpu_free_mask.copy(), list(view.ports_free))
    place_gang(view, (role("worker", 8, gpus=2),), SelectionPipeline())
    assert np.array_equal(view.memory_free, before[0]) and np.array_equal(view.gpu_free_mask, before[1])
    assert view.ports_free == before[2] and not view.role_count.get("worker", np.zeros(1)).any()


# ------------------------------------------------------- selection.rack_policy
def test_selection_rack_policy_is_the_default_of_a_role_that_sets_none():
    """selection.rack_policy reaches the roles that set no rackPolicy (the AM's
    pipelines carry the selection settings); a role's own policy, none included, wins."""
    view = ClusterView([NodeSpec(f"h{i}", rack=f"r{i % 3}", memory_mb=16384, vcores=8.0,
                                 ports=PortRanges.of((20000, 20099))) for i in range(6)])
    spread = SelectionPipeline(SelectionSettings(rack_policy="spread"))
    racks = lambda placement: sorted(view.node(p.host).rack for p in placement.instances)
    unset = RoleSpec(name="ps", instances=3, cpu=1, memory_mb=1024, gpus=0, ports={}, commands=("true",),
                     completion=Completion(), task_retry_count=0, retry=RetryPolicy())
    assert unset.rack_policy is None
    assert racks(place_gang(view, (unset,), spread)) == ["r0", "r1", "r2"]       # one per rack
    assert len(set(racks(place_gang(view, (unset,), SelectionPipeline())))) == 1  # none: packed together
    own = RoleSpec(name="ps", instances=3, cpu=1, memory_mb=1024, gpus=0, ports={}, commands=("true",),
                   completion=Completion(), task_retry_count=0, retry=RetryPolicy(), rack_policy="none")
    assert len(set(racks(place_gang(view, (own,), spread)))) == 1


def test_ports_free_only_below_port_min_fail_with_an_explanation_not_a_port_error():
    """The fit counts ports at or above selection.port_min, so the loop never picks a
    node whose free ports sit below it: NotAvailable / GangDoesNotFit naming ports."""
    view = ClusterView([NodeSpec(f"h{i}", memory_mb=16384, vcores=8.0, ports=PortRanges.of((1000, 1099)))
                        for i in range(2)])
    pipeline = SelectionPipeline(SelectionSettings(port_min=20000))
    with pytest.raises(GangDoesNotFit) as err:
        place_gang(view, (role("ps", 1),), pipeline)
    assert "2 ports exhausted" in str(err.value)
    with pytest.raises(NotAvailable, match="ports"):
        pipeline.select_single_node(view, role_request(role("ps", 1), 1, ()))
    with pytest.raises(NotAvailable, match="ports"):
        pipeline.select(view, role_request(role("ps", 1), 1, ()))
