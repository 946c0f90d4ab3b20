"""``replay --draws artifact`` (issue 32): fill mode draws what the FGD artifact's simulator
draws with the same seed, so that a port of one of its policies gives its figure seed by seed.

The cause of ``packing``'s gaps to GpuPacking (cpu200 +0.50, cpu250 +0.45, gpushare40 -0.54 pp
over seeds 42-51) was not its score: fed the artifact's own pod order and node renaming, a
port of the artifact's run gives all ten of its cpu200 figures exactly, and ``packing`` fed
our draws gives what that port gives on them. The gaps were the draws: ten of the artifact's
against ten of ours. The expected values below were printed by Go (``math/rand``'s
``rand.New(rand.NewSource(seed))``; the plans by the artifact's calls in its order)."""
from pathlib import Path

import pytest

from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.pipeline import GivenHostOrder, SelectionPipeline
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.settings import SelectionSettings
from gangmaster.selectors.workload import TaskShape, WorkloadShapes
from gangmaster.tools.replay import openb
from gangmaster.tools.replay.go_rand import GoRand

WORKLOAD = WorkloadShapes.weighted([(TaskShape(1000, 1024, gpus=1), 2), (TaskShape(1000, 1024, gpu_milli=300), 1)])


# ------------------------------------------------------------------ Go's math/rand

@pytest.mark.parametrize("seed, first_int, intn10, intn1213, float64, perm12, shuffled20, intn_2_20", [
    (42, 3440579354231278675, 7, 2, 0.20881870305465913, [6, 5, 0, 10, 2, 1, 3, 7, 9, 11, 8, 4],
     [6, 10, 19, 18, 11, 12, 8, 3, 15, 9, 0, 7, 2, 4, 5, 1, 17, 16, 13, 14], 720330),
    (0, 8717895732742165505, 4, 879, 0.054343839599700391, [5, 6, 8, 10, 2, 1, 11, 4, 9, 0, 7, 3],
     [9, 17, 8, 10, 1, 18, 12, 19, 11, 4, 16, 2, 3, 7, 6, 5, 13, 14, 0, 15], 667089),
    (-7, 747107023976529931, 8, 1090, 0.088320046942192809, [5, 10, 9, 8, 3, 6, 1, 7, 11, 4, 0, 2],
     [8, 11, 19, 9, 16, 15, 4, 13, 1, 5, 3, 7, 12, 17, 10, 0, 14, 18, 2, 6], 1024378),
    (1 << 40, 5470237361722394362, 0, 668, 0.16973636762229527, [8, 7, 9, 2, 1, 5, 4, 0, 3, 6, 10, 11],
     [19, 10, 1, 17, 2, 16, 4, 5, 7, 12, 0, 9, 14, 8, 3, 6, 11, 13, 15, 18], 704308),
])
def test_go_rand_draws_what_go_draws(seed, first_int, intn10, intn1213, float64, perm12, shuffled20, intn_2_20):
    rng = GoRand(seed)
    assert rng.int63() == first_int and rng.intn(10) == intn10 and rng.intn(1213) == intn1213
    assert rng.float64() == float64      # Go's %.17g: the same double
    assert rng.perm(12) == perm12
    items = list(range(20))

    def swap(i, j):
        items[i], items[j] = items[j], items[i]
    rng.shuffle(len(items), swap)
    assert items == shuffled20 and rng.intn(1 << 20) == intn_2_20


# ------------------------------------------------------------------ the artifact's plan

def _write_small_family(folder: Path, nodes: int) -> tuple[Path, Path]:
    """12 pods in four shapes (no GPU, a half GPU, one GPU, two GPUs) and ``nodes`` 2-GPU nodes."""
    shapes = ["4000,1024,0,0", "2000,1024,1,500", "8000,2048,1,1000", "8000,2048,2,1000"]
    pods = folder / "openb_pod_list_small.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
                    + "".join(f"p-{i:02d},{shapes[i % 4]},\n" for i in range(12)))
    node_list = folder / openb.DEFAULT_NODE_FILE
    node_list.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"n-{i},64000,262144,2,V100\n"
                                                                        for i in range(nodes)))
    return pods, node_list


@pytest.mark.parametrize("nodes, seed, order, prefix", [
    # 15 GPUs asked, 10 x 1.3 = 13 wanted: topped up (p-03, p-04, p-08 twice, p-09)
    (5, 42, [4, 8, 7, 10, 1, 9, 5, 3, 11, 2, 6, 0, 3, 4, 8, 9, 8], [4, 1, 3, 0, 2]),
    (5, 43, [2, 0, 8, 11, 10, 7, 1, 4, 9, 3, 5, 6, 11], [1, 0, 2, 4, 3]),
    # 6 x 1.3 = 7.8 wanted: pods taken out at random (p-03 and p-10) until at most that
    (3, 42, [4, 8, 7, 1, 9, 5, 11, 2, 6, 0], [0, 1, 2]),
])
def test_the_artifact_plan_is_the_artifacts_pod_order_and_renamed_nodes(tmp_path, nodes, seed, order, prefix):
    pods_file, nodes_file = _write_small_family(tmp_path, nodes)
    cluster = openb.read_openb_nodes(nodes_file)
    plan = openb.artifact_fill_plan(openb.read_openb_pods(pods_file, need_times=False), cluster, seed)
    assert [job.job_id.split(".r")[0] for job in plan.table.jobs] == [f"p-{k:02d}" for k in order]
    assert plan.drawn_again == max(0, len(order) - 12)
    assert plan.tie_hosts == tuple(f"n-{i}" for _, i in sorted(zip(prefix, range(nodes))))
    assert plan.requested_milli <= 1.3 * cluster.capacity_gpus * 1000   # the artifact stops at or below


def test_the_python_draws_leave_the_ties_to_the_pipeline(tmp_path):
    pods_file, nodes_file = _write_small_family(tmp_path, 5)
    cluster = openb.read_openb_nodes(nodes_file)
    pods = openb.read_openb_pods(pods_file, need_times=False)
    assert openb.plan_for("python", pods, cluster, 42) == openb.fill_plan(pods, cluster.capacity_gpus, 42)
    assert openb.plan_for("python", pods, cluster, 42).tie_hosts == ()
    with pytest.raises(ValueError, match="draws: expected one of python, artifact"):
        openb.plan_for("numpy", pods, cluster, 42)


# ------------------------------------------------------------------ the ties

@pytest.mark.parametrize("selector", ["packing", "clustering", "fgd-k8s", "best-fit", "dot-product"])
def test_a_given_tie_order_decides_the_ties_of_the_artifacts_ports(selector):
    """Every node ties for a pod that asks no GPU, and every empty 2-GPU node for one GPU:
    the first host of the given order takes both, not the strategy's own first (the seed's,
    or under the host-name rule the smallest name: the artifact's is the smallest renamed one)."""
    hosts = [f"node-{i}" for i in range(6)]
    view = ClusterView([NodeSpec(host=h, memory_mb=65536, vcores=32, gpus=2) for h in hosts])
    seeded = SelectionPipeline(SelectionSettings(selector=selector, seed=1))
    own = seeded.tie_order.of(len(view), view.hosts)
    given = [hosts[i] for i in own.argsort()[::-1]]          # the seed's order backwards
    pipeline = SelectionPipeline(SelectionSettings(selector=selector, seed=1), tie_hosts=given)
    for each in (seeded, pipeline):
        each.selector.observe_workload(WORKLOAD)
    for gpus in (0, 1):
        request = SelectionRequest("w", ResourceDescriptor(1024, 1, gpus))
        assert pipeline.select_single_node(view, request).best.host == given[0]
        assert seeded.select_single_node(view, request).best.host == given[-1]


@pytest.mark.parametrize("selector", ["best-fit", "dot-product"])
def test_without_a_given_order_the_host_name_rule_takes_the_smallest_name(selector):
    view = ClusterView([NodeSpec(host=h, memory_mb=65536, vcores=32, gpus=2) for h in ("b", "a", "c")])
    pipeline = SelectionPipeline(SelectionSettings(selector=selector, seed=1))
    assert pipeline.select_single_node(view, SelectionRequest("w", ResourceDescriptor(1024, 1, 1))).best.host == "a"
    assert pipeline.select(view, SelectionRequest("w", ResourceDescriptor(1024, 1, 1))).best.host == "a"


def test_a_given_tie_order_must_rank_every_host_once():
    with pytest.raises(ValueError, match="names a host twice"):
        GivenHostOrder(["a", "a"])
    with pytest.raises(ValueError, match="no rank for host 'z'"):
        GivenHostOrder(["a", "b"]).of(2, ["a", "z"])


# ------------------------------------------------------------------ the command

def test_draws_go_with_fill_mode_only(capsys, tmp_path):
    from gangmaster.tools.cli import main
    pods_file, _ = _write_small_family(tmp_path, 5)
    code = main(["replay", str(pods_file), "--format", "openb", "--draws", "artifact"])
    err = capsys.readouterr().err
    assert code == 2 and "--draws goes with --mode fill" in err and len(err.strip().splitlines()) == 1, err


def test_a_family_with_the_artifacts_draws_says_so_and_replays_its_plan(tmp_path):
    from gangmaster.tools.replay import family
    _write_small_family(tmp_path, 5)
    options = family.FamilyOptions(seeds=(42,), selectors=("packing",), draws="artifact")
    ran = family.run_family(tmp_path, None, options)
    document = family.family_document(ran, None)
    assert document["run"]["draws"] == "artifact"
    assert ran.figures[0].pods == 17   # the artifact's plan: 12 pods and 5 drawn again


def test_a_replay_with_the_artifacts_order_says_so_whatever_the_tie_rule(tmp_path):
    from gangmaster.tools.replay.comparison import declared_tie_rule
    from gangmaster.tools.replay.engine import ReplayOptions, replay
    pods_file, nodes_file = _write_small_family(tmp_path, 5)
    cluster = openb.read_openb_nodes(nodes_file)
    plan = openb.artifact_fill_plan(openb.read_openb_pods(pods_file, need_times=False), cluster, 42)
    result = replay(plan.table, cluster, ReplayOptions(selector="best-fit", queue_policy="drop", seed=42,
                                                       tie_hosts=plan.tie_hosts))
    assert "the given order of the nodes (the FGD artifact's, renamed with seed 42)" in result.tie_rule
    assert declared_tie_rule("best-fit", result.tie_rule, given_order=True) == result.tie_rule
