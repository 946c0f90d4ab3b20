"""A strategy's declared tie rule: ``node-name`` breaks exact ties by the smallest host
name (the FGD paper's scheduler), in select(), one-node selection and gang placement;
``seeded`` (the default) keeps the seeded order of the nodes."""
import pytest

from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.job_packing import JobPacking
from gangmaster.selectors.pipeline import SelectionPipeline, tie_order_for
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.settings import SelectionSettings

HOSTS = ["node-c", "node-a", "node-d", "node-b"]   # declared out of name order


class PackingByName(JobPacking):
    name = "packing-by-name"
    tie_rule = "node-name"


def tied_cluster() -> ClusterView:
    return ClusterView([NodeSpec(host=h, memory_mb=65536, vcores=16, gpus=4) for h in HOSTS])


REQUEST = SelectionRequest("w", ResourceDescriptor(1024, 1, 1), pending_tasks=2)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_ties_go_to_the_smallest_host_name_whatever_the_seed(seed):
    pipeline = SelectionPipeline(SelectionSettings(seed=seed), PackingByName())
    view = tied_cluster()
    assert pipeline.select_single_node(view, REQUEST).best.host == "node-a"
    assert [c.host for c in pipeline.select(view, REQUEST).candidates] == sorted(HOSTS)


def test_a_gang_fills_the_tied_nodes_in_name_order():
    view = tied_cluster()
    pipeline = SelectionPipeline(SelectionSettings(), PackingByName())
    from gangmaster.selectors.placement import place
    request = SelectionRequest("w", ResourceDescriptor(1024, 1, 4), pending_tasks=2, max_instances_per_node=1)
    placed = place(pipeline, view, request, 2)
    assert [view.hosts[i] for i in placed.nodes] == ["node-a", "node-b"]


def test_the_seeded_rule_is_the_default_and_depends_on_the_seed():
    picks = {SelectionPipeline(SelectionSettings(seed=seed), JobPacking()).select_single_node(
        tied_cluster(), REQUEST).best.host for seed in range(12)}
    assert len(picks) > 1


def test_an_unknown_tie_rule_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown tie rule 'coin'.*seeded, node-name"):
        tie_order_for("coin", 0)
