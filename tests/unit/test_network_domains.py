"""Network domains (issue 30, part 4): cluster files describe nested domains, a gang or a
role asks ``required`` or ``preferred``, and the gang placer chooses the domain for the
whole gang."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gangmaster.am.ops.diagnosis import diagnose
from gangmaster.am.core.gang_domains import DomainShort
from gangmaster.am.core.gang_placement import GangDoesNotFit, check_fits_empty, place_gang
from gangmaster.am.spec.jobspec_model import Completion, RetryPolicy, RoleSpec
from gangmaster.conf import conf_path
from gangmaster.conf.fields import ConfigError
from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.cluster_file import load_cluster, load_cluster_specs
from gangmaster.selectors.domains import DomainAsk, domain_of
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.selectors.selector import get_selector, selector_classes
from gangmaster.selectors.settings import SelectionSettings
from gangmaster.selectors.workload import TaskShape, WorkloadShapes
from gangmaster.tools.rmsim.nodes import Nodes
from gangmaster.tools.rmsim.simulation import Simulation

REQUIRED_RACK, PREFERRED_RACK = DomainAsk("rack", True), DomainAsk("rack", False)


def worker(instances=6, gpus=4, **changes) -> RoleSpec:
    role = RoleSpec(name="worker", instances=instances, cpu=4, memory_mb=8192, gpus=gpus, ports={},
                    commands=("true",), completion=Completion(), task_retry_count=0, retry=RetryPolicy(),
                    rack_policy="pack")
    return replace(role, **changes)


def issue_cluster() -> ClusterView:
    """The issue's cluster: rack-a's four 8-GPU machines half used (16 GPUs free over 4
    hosts), rack-b's three empty (24 free over 3)."""
    specs = [NodeSpec(f"a{i}", rack="rack-a", memory_mb=491520, vcores=64, gpus=8) for i in range(4)]
    specs += [NodeSpec(f"b{i}", rack="rack-b", memory_mb=491520, vcores=64, gpus=8) for i in range(3)]
    view = ClusterView(specs)
    for i in range(4):
        view.allocate(i, R(memory_mb=1024, vcores=1, gpu_mask=0b1111))
    return view


def pipeline(name: str) -> SelectionPipeline:
    selector = get_selector(name)
    selector.observe_workload(WorkloadShapes.weighted([(TaskShape(4000, 8192, gpus=4), 1)]))   # (fgd's)
    return SelectionPipeline(SelectionSettings(), selector)


def racks_of(view: ClusterView, hosts) -> set[str]:
    return {view.node(h).rack for h in hosts}


# ------------------------------------------------------------ the issue's example
#: the built-in strategies (a plugin another test registers is not one of "every selector")
BUILT_IN = [name for name, cls in selector_classes().items() if cls.__module__.startswith("gangmaster.")]


@pytest.mark.parametrize("name", BUILT_IN)
def test_the_issues_6x4_gang_lands_on_3_hosts_in_one_rack_under_every_selector(name):
    view = issue_cluster()
    for gang, role in (("gang", worker(gang_network_domain=REQUIRED_RACK)),
                       ("gang", worker(gang_network_domain=PREFERRED_RACK)),
                       ("role", worker(network_domain=REQUIRED_RACK))):
        hosts = place_gang(view, (role,), pipeline(name)).hosts()
        assert len(hosts) == 6 and sorted(set(hosts)) == ["b0", "b1", "b2"], (gang, role.network_domain)
    # without the ask, rack pack spreads it over both racks: the defect the issue reports
    assert racks_of(view, place_gang(view, (worker(),), pipeline(name)).hosts()) == {"rack-a", "rack-b"}


def test_a_required_gang_that_no_rack_holds_now_waits_with_the_best_racks_room():
    view = issue_cluster()
    view.allocate("b0", R(memory_mb=1, vcores=1, gpu_mask=0b1))   # rack-b: room for 5 of the 6 now
    before = view.gpus_free.copy()
    with pytest.raises(GangDoesNotFit) as err:
        place_gang(view, (worker(gang_network_domain=REQUIRED_RACK),), SelectionPipeline())
    assert "0/6 instances placed" in str(err.value)
    assert "no single rack has room for 6 × 4 GPUs (the best, rack-b, has room for 5 of the 6)" in str(err.value)
    assert isinstance(err.value.cause, DomainShort) and not err.value.never
    assert np.array_equal(view.gpus_free, before)   # nothing booked
    check_fits_empty(view, (worker(gang_network_domain=REQUIRED_RACK),), SelectionPipeline())   # empty: it fits
    # preferred places it anyway, over the fewest racks it can
    hosts = place_gang(view, (worker(gang_network_domain=PREFERRED_RACK),), SelectionPipeline()).hosts()
    assert len(hosts) == 6 and racks_of(view, hosts) == {"rack-a", "rack-b"}


def test_a_required_gang_no_rack_holds_even_empty_fails_at_submission():
    with pytest.raises(GangDoesNotFit) as err:
        check_fits_empty(issue_cluster(), (worker(instances=9, gang_network_domain=REQUIRED_RACK),),
                         SelectionPipeline())
    assert err.value.never   # empty, rack-a's 4 machines hold 8
    assert "no single rack has room for 9 × 4 GPUs (the best, rack-a, has room for 8 of the 9)" in str(err.value)


def test_preferred_spans_the_fewest_racks_when_none_holds_it():
    """Three racks of two 8-GPU machines; 5 × 8 GPUs needs three racks' worth of machines minus one:
    preferred takes the fewest racks that hold it, not one machine from each of three."""
    specs = [NodeSpec(f"{r}{i}", rack=r, memory_mb=100_000, vcores=64, gpus=8) for r in "xyz" for i in range(2)]
    gang = worker(instances=4, gpus=8, rack_policy=None)
    view = ClusterView(specs)
    view.allocate("x0", R(memory_mb=1, vcores=1, gpu_mask=0b1))   # x: room for 1, y and z: 2 each
    hosts = place_gang(view, (replace(gang, gang_network_domain=PREFERRED_RACK),), SelectionPipeline()).hosts()
    assert racks_of(view, hosts) == {"y", "z"}
    with pytest.raises(GangDoesNotFit, match="no single rack has room for 4 × 8 GPUs"):
        place_gang(view, (replace(gang, gang_network_domain=REQUIRED_RACK),), SelectionPipeline())


def test_a_role_asks_its_own_domain_and_the_other_roles_go_anywhere():
    view = issue_cluster()
    ps = replace(worker(instances=2, gpus=0), name="ps", rack_policy=None)
    placement = place_gang(view, (ps, worker(network_domain=REQUIRED_RACK)), SelectionPipeline())
    workers = [p.host for p in placement.instances if p.role == "worker"]
    assert len(placement.instances) == 8 and sorted(set(workers)) == ["b0", "b1", "b2"]


def test_the_tightest_rack_that_holds_it_is_chosen_with_the_fewest_hosts():
    """Two racks hold the gang: the smaller one is taken, the big one stays whole."""
    specs = [NodeSpec(f"big{i}", rack="big", memory_mb=100_000, vcores=64, gpus=8) for i in range(4)]
    specs += [NodeSpec(f"small{i}", rack="small", memory_mb=100_000, vcores=64, gpus=8) for i in range(2)]
    hosts = place_gang(ClusterView(specs), (worker(instances=4, gang_network_domain=REQUIRED_RACK),),
                       SelectionPipeline()).hosts()
    assert sorted(set(hosts)) == ["small0", "small1"]


@pytest.mark.parametrize("ask, outcome", [
    (DomainAsk("switch", True), "no single switch has room for 2 × 4 GPUs (the cluster describes no switch)"),
    (DomainAsk("switch", False), None),   # preferred: anywhere
])
def test_a_level_the_cluster_does_not_describe(ask, outcome):
    view = issue_cluster()
    role = worker(instances=2, gang_network_domain=ask)
    if outcome is None:
        assert len(place_gang(view, (role,), SelectionPipeline()).instances) == 2
    else:
        with pytest.raises(GangDoesNotFit, match=outcome.replace("(", r"\(").replace(")", r"\)")):
            place_gang(view, (role,), SelectionPipeline())


def test_a_switch_gang_on_the_shipped_domains_cluster_stays_under_one_switch():
    view = load_cluster(conf_path("clusters/domains.yaml"))
    for host in view.hosts[6:8]:   # two machines of leaf-2 (its racks: rack-c, rack-d) taken
        view.allocate(host, R(memory_mb=1, vcores=1, gpu_mask=0xFF))
    role = worker(instances=5, gpus=8, rack_policy=None, gang_network_domain=DomainAsk("switch", True))
    hosts = place_gang(view, (role,), SelectionPipeline()).hosts()
    assert {domain_of(view.specs[view.index(h)], "switch") for h in hosts} == {"leaf-1"} and len(hosts) == 5
    with pytest.raises(GangDoesNotFit, match=r"no single switch has room for 7 × 8 GPUs \(the best, leaf-1, "
                                             r"has room for 6 of the 7\)"):
        place_gang(view, (replace(role, instances=7),), SelectionPipeline())
    # the whole block holds it
    block = replace(role, instances=7, gang_network_domain=DomainAsk("block", True))
    assert len(place_gang(view, (block,), SelectionPipeline()).instances) == 7


# ------------------------------------------------------------------- cluster files
def write(tmp_path, text):
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return path


GROUP = "{name: g, count: 4, racks: [r1, r2], memoryMB: 10, vcores: 2"


def test_cluster_file_domains_nest_above_racks(tmp_path):
    specs = load_cluster_specs(write(tmp_path, f"""
domainLevels: [switch, block]
nodeGroups:
  - {GROUP}, domains: {{switch: [s1, s2], block: b0}}}}
  - {{name: h, hosts: [alpha], rack: r3, memoryMB: 10, vcores: 2, domains: {{switch: s3, block: b0}}}}
"""))
    assert [(s.rack, s.domains) for s in specs] == [
        ("r1", (("switch", "s1"), ("block", "b0"))), ("r1", (("switch", "s1"), ("block", "b0"))),
        ("r2", (("switch", "s2"), ("block", "b0"))), ("r2", (("switch", "s2"), ("block", "b0"))),
        ("r3", (("switch", "s3"), ("block", "b0")))]


@pytest.mark.parametrize("text, message", [
    (f"domainLevels: [switch]\nnodeGroups:\n  - {GROUP}, domains: {{switch: [s1, s2, s3, s4]}}}}",
     "nodeGroups: expected each rack inside one switch; rack 'r1' is in switch 's1' and switch 's2'"),
    (f"nodeGroups:\n  - {GROUP}, domains: {{switch: s1}}}}",
     "nodeGroups[0].domains: expected domainLevels at the top of the file, naming the levels (e.g. [switch])"),
    (f"domainLevels: [switch]\nnodeGroups:\n  - {GROUP}}}",
     "nodeGroups[0].domains: expected a domain name for each level of domainLevels (switch)"),
    (f"domainLevels: [switch, block]\nnodeGroups:\n  - {GROUP}, domains: {{switch: s1}}}}",
     "nodeGroups[0].domains.block: expected a block name or a list of them"),
    (f"domainLevels: [switch]\nnodeGroups:\n  - {GROUP}, domains: {{spine: s1, switch: s1}}}}",
     "nodeGroups[0].domains.spine: expected no such field here; known fields: switch"),
    (f"domainLevels: [rack]\nnodeGroups:\n  - {GROUP}}}",
     "domainLevels: expected distinct level names of letters, digits, _ and - above the rack (not 'rack'), "
     "innermost first, got \"rack\""),
    (f"domainLevels: [leaf.switch]\nnodeGroups:\n  - {GROUP}}}",
     "domainLevels: expected distinct level names of letters, digits, _ and - above the rack (not 'rack'), "
     "innermost first, got \"leaf.switch\""),
    (f"domainLevels: [switch]\nnodeGroups:\n  - {GROUP}, domains: {{switch: []}}}}",
     "nodeGroups[0].domains.switch: expected at least one switch name, got a list"),
])
def test_bad_domains_name_file_and_field(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_cluster(path)
    assert str(err.value).startswith(f"{path}: {message}"), str(err.value)


# ---------------------------------------------------------------------- diagnosis
def test_the_diagnosis_counts_no_single_rack_with_room_as_a_reason_of_its_own():
    view = issue_cluster()
    view.allocate("b0", R(memory_mb=1, vcores=1, gpu_mask=0b1))
    diagnosis = diagnose(view, (worker(gang_network_domain=REQUIRED_RACK),), SelectionPipeline(), job="dj")
    role = diagnosis.roles["worker"]
    assert not diagnosis.gang_can_start and (role.needed, role.placeable) == (6, 5)
    assert [r.to_dict() for r in role.reasons] == [{
        "code": "network-domain", "count": 2, "waiting_helps": True,
        "detail": "no single rack has room for 6 × 4 GPUs (the best, rack-b, has room for 5 of the 6)"}]
    assert diagnosis.hint == ("1 more machine(s) like a0; or networkDomain {preferred: rack} instead of "   # checked:
                              "{required: rack}: it starts now over 2 rack(s)")   # rack-a then holds it; both racks do
    # never: no rack holds 9 × 4 GPUs even when empty
    never = diagnose(view, (worker(instances=9, gang_network_domain=REQUIRED_RACK),), SelectionPipeline(), job="dj")
    assert [(r.code, r.waiting_helps) for r in never.roles["worker"].reasons] == [("network-domain-too-small", False)]
    assert not never.fits_empty_cluster and never.hint.startswith("none: the gang can never start")
    assert never.hint.endswith("; or networkDomain {preferred: rack} instead of {required: rack}: it starts now "
                               "over 2 rack(s)")
    # the same gang without the ask can start: the reason is the domain's alone
    assert diagnose(view, (worker(),), SelectionPipeline(), job="dj").gang_can_start


# ------------------------------------------------ through the RM to the AM's view
def test_the_rms_node_reports_carry_the_domains_to_the_ams_view():
    """The AM builds its view from the RM's node reports: the levels above the rack travel
    with them (and through the gRPC codec: tests/property/test_rm_codec.py)."""
    sim = Simulation.from_files(conf_path("clusters/domains.yaml"))
    specs = [report.spec for report in sim.client.cluster_nodes()]
    assert specs == load_cluster_specs(conf_path("clusters/domains.yaml"))
    assert domain_of(specs[0], "switch") == "leaf-1" and domain_of(specs[-1], "block") == "block-0"
    assert Nodes.specs_from(sim.core.nodes.snapshot()) == specs   # and the RM's state file keeps them


def test_the_instances_placed_again_join_the_domain_of_those_the_gang_holds():
    """The AM places again only the instances not granted yet, on a view that counts the
    granted ones: those go where the granted ones are, though another rack would take them
    on fewer hosts."""
    specs = [NodeSpec(f"x{i}", rack="x", memory_mb=100_000, vcores=64, gpus=8) for i in range(5)]
    specs += [NodeSpec(f"y{i}", rack="y", memory_mb=100_000, vcores=64, gpus=8) for i in range(2)]
    view = ClusterView(specs)
    for host in ("x1", "x2", "x3", "x4"):
        view.allocate(host, R(memory_mb=1, vcores=1, gpu_mask=0x0F))
    role = worker(gang_network_domain=REQUIRED_RACK, rack_policy=None)
    fresh = place_gang(view, (replace(role, instances=4),), SelectionPipeline()).hosts()
    assert set(fresh) == {"y0", "y1"}                                 # alone: the fewest hosts
    for mask in (0x0F, 0xF0):                                        # two instances granted on x0
        view.allocate("x0", R(memory_mb=8192, vcores=4, gpu_mask=mask), role="worker")
    again = place_gang(view, (role,), SelectionPipeline(), indices={"worker": [2, 3, 4, 5]}).hosts()
    assert set(again) == {"x1", "x2", "x3", "x4"}
    view.allocate("x1", R(memory_mb=1, vcores=1, gpu_mask=0xF0))       # rack x can no longer take the rest
    with pytest.raises(GangDoesNotFit, match=r"no single rack has room for 4 × 4 GPUs \(the best, x, has room "
                                             r"for 3 of the 4\)"):
        place_gang(view, (role,), SelectionPipeline(), indices={"worker": [2, 3, 4, 5]})


def test_a_gang_of_one_instance_asks_a_node_in_a_domain_of_the_level():
    view = issue_cluster()
    lone = worker(instances=1, gang_network_domain=DomainAsk("switch", True))
    with pytest.raises(GangDoesNotFit, match=r"\(the cluster describes no switch\)"):
        place_gang(view, (lone,), SelectionPipeline())
    assert len(place_gang(view, (replace(lone, gang_network_domain=REQUIRED_RACK),), SelectionPipeline()).hosts()) == 1


def test_nothing_to_place_needs_no_domain():
    role = worker(gang_network_domain=DomainAsk("switch", True))
    assert place_gang(issue_cluster(), (role,), SelectionPipeline(), indices={"worker": []}).instances == []
