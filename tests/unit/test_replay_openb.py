"""openb: the node and pod readers (good and bad rows), fill mode's arrival sequence
(seeded, inflate reached, drawn again with replacement), the drop queue policy, and the
fill metric — on a hand-made curve and through the real AM + RM path — checked by hand.
The fixtures under tests/fixtures/replay/openb/ are synthetic (no row of the real trace)."""
from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np
import pytest

from gangmaster.conf import limits
from gangmaster.conf.fields import ConfigError
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.tools.replay.engine import ReplayOptions, replay
from gangmaster.tools.replay.metrics import FillCurve, fill_bucket, fill_curve, fill_groups, unallocated_at_arrived
from gangmaster.tools.replay.openb import (DEFAULT_NODE_FILE, Pods, default_nodes_file, fill_plan, read_openb_nodes,
                                           read_openb_pods, time_table)
from gangmaster.tools.replay.queue_policy import DropQueue, dropped, queue_for
from gangmaster.tools.replay.readers import detect_format, read_trace
from gangmaster.tools.replay.trace import JobTable, TraceJob, TraceRole
from gangmaster.tools.replay.trace_csv import BadRow, BadRows

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "replay" / "openb"
NODES = FIXTURES / DEFAULT_NODE_FILE
SMALL = FIXTURES / "pods_small.csv"
WHOLE = FIXTURES / "pods_whole.csv"


# ------------------------------------------------------------------ readers

def test_node_list_becomes_a_heterogeneous_cluster_in_one_rack():
    cluster = read_openb_nodes(NODES)
    assert cluster.specs == (
        NodeSpec("syn-node-0", rack="openb", gpu_type="V100", vcores=32.0, memory_mb=131072, gpus=4),
        NodeSpec("syn-node-1", rack="openb", gpu_type="T4", vcores=32.0, memory_mb=131072, gpus=2),
        NodeSpec("syn-node-2", rack="openb", gpu_type="T4", vcores=16.0, memory_mb=65536, gpus=2),
        NodeSpec("syn-node-3", rack="openb", gpu_type="P100", vcores=8.0, memory_mb=32768, gpus=1),
    )
    assert cluster.capacity_gpus == 9
    assert default_nodes_file(SMALL) == NODES


def test_pods_become_single_instance_jobs_with_whole_gpus_or_a_share():
    pods = read_openb_pods(SMALL)
    roles = {pod.name: pod.role for pod in pods.pods}
    assert roles == {
        "syn-pod-0": TraceRole("pod", 1, 1, 4.0, 8192),
        "syn-pod-1": TraceRole("pod", 1, 0, 2.0, 4096, ("T4", "P100"), gpu_milli=500),
        "syn-pod-2": TraceRole("pod", 1, 2, 8.0, 16384, ("V100",)),
        "syn-pod-3": TraceRole("pod", 1, 0, 1.0, 1024),
        "syn-pod-4": TraceRole("pod", 1, 4, 16.0, 32768),
        "syn-pod-5": TraceRole("pod", 1, 0, 3.0, 6144, gpu_milli=250),
    }
    assert [pod.gpu_milli for pod in pods.pods] == [1000, 500, 2000, 0, 4000, 250]


def test_time_mode_submits_at_creation_and_runs_until_deletion():
    table = read_trace(SMALL, "openb", None)
    assert table.format == "openb" and detect_format(SMALL) == "openb"
    assert [(j.job_id, j.submit_s, j.duration_s, j.gpus, j.gpu_milli) for j in table.jobs] == [
        ("syn-pod-0", 0.0, 600.0, 1, 1000), ("syn-pod-1", 10.0, 390.0, 0, 500), ("syn-pod-2", 20.0, 300.0, 2, 2000),
        ("syn-pod-3", 30.0, 0.0, 0, 0), ("syn-pod-4", 40.0, 860.0, 4, 4000), ("syn-pod-5", 45.0, 100.0, 0, 250)]


def test_bad_pod_rows_are_named_by_file_line_and_field():
    with pytest.raises(BadRow) as caught:
        read_openb_pods(FIXTURES / "pods_bad.csv")
    assert (caught.value.line, caught.value.column) == (3, "gpu_milli")
    assert "a share is of one GPU" in str(caught.value)
    bad = BadRows("skip")
    pods = read_openb_pods(FIXTURES / "pods_bad.csv", bad)
    assert [pod.name for pod in pods.pods] == ["syn-pod-0", "syn-pod-10"]
    assert bad.count == 9
    assert [(e.line, e.column) for e in bad.first] == [(3, "gpu_milli"), (4, "gpu_milli"), (5, "gpu_milli"),
                                                      (6, "deletion_time"), (7, "gpu_spec")]


def test_bad_node_rows_stop_the_whole_file(tmp_path):
    bad = tmp_path / "nodes.csv"
    bad.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,8000,1024,2,\n")
    with pytest.raises(ConfigError, match="line 2: model: expected the GPU model of a node with GPUs"):
        read_openb_nodes(bad)
    bad.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,8000,1024,65,T4\n")
    with pytest.raises(ConfigError, match="line 2: gpu: expected an integer >= 0 and <= 64"):
        read_openb_nodes(bad)


# ------------------------------------------------------------------ fill mode's sequence

def pods_of(*asks: tuple[int, int]) -> Pods:
    """Pods of (whole GPUs, share) asks, named p0, p1, ..."""
    from gangmaster.tools.replay.openb import Pod
    return Pods(tuple(Pod(f"p{i}", TraceRole("pod", 1, g, 1.0, 1024, gpu_milli=m), 0.0, 1.0, i + 2)
                      for i, (g, m) in enumerate(asks)), "test", "0" * 64)


def test_fill_tops_up_with_replacement_until_inflate_is_reached():
    pods = pods_of((1, 0), (0, 500), (0, 0), (2, 0))           # 3,500 milli in all
    plan = fill_plan(pods, capacity_gpus=4, seed=7, inflate=1.3)  # target 5,200 milli
    jobs = plan.table.jobs
    asked = np.cumsum([job.gpu_milli for job in jobs])
    assert asked[-1] >= 5200 > asked[-2]                        # stops at the first pod reaching it
    originals = [job.job_id for job in jobs if "." not in job.job_id]
    assert sorted(originals) == ["p0", "p1", "p2", "p3"]         # every pod once, first, shuffled
    assert [job.job_id for job in jobs[:4]] == originals
    copies = [job.job_id for job in jobs[4:]]
    assert len(copies) == plan.drawn_again > 0
    for copy in copies:                                          # "<name>.r<k>": the k-th copy of a listed pod
        name, k = copy.split(".r")
        assert name in originals and int(k) >= 2
    by_name = {pod.name: pod.role for pod in pods.pods}
    assert all(job.roles == (by_name[job.job_id.split(".")[0]],) for job in jobs)
    assert [job.submit_s for job in jobs] == [float(k) for k in range(len(jobs))]
    assert all(job.duration_s > len(jobs) for job in jobs)      # none leaves before the last arrives


def test_fill_cuts_the_shuffled_pods_when_they_ask_more_than_inflate():
    pods = pods_of(*[(1, 0)] * 10)
    plan = fill_plan(pods, capacity_gpus=4, seed=1, inflate=1.0)
    assert len(plan.table) == 4 and plan.drawn_again == 0


def test_fill_is_seeded():
    pods = pods_of((1, 0), (0, 300), (0, 0), (2, 0), (0, 810))
    ids = lambda seed: [job.job_id for job in fill_plan(pods, 8, seed).table.jobs]   # noqa: E731
    assert ids(42) == ids(42)
    assert ids(42) != ids(43)


def test_fill_refuses_pods_that_ask_no_gpu_and_a_bad_inflate():
    with pytest.raises(ConfigError, match="pods that ask for GPUs"):
        fill_plan(pods_of((0, 0)), 4, 0)
    with pytest.raises(ConfigError, match="MAX_FILL_INFLATE"):
        fill_plan(pods_of((1, 0)), 4, 0, inflate=11)


# ------------------------------------------------------------------ the drop policy

class Pod(NamedTuple):
    """A driver's record of a waiting job, as a queue policy reads it (order, shape)."""
    order: int
    shape: tuple
    job: str


def test_drop_queue_offers_each_job_once_and_hands_over_the_others():
    queue = queue_for("drop")
    assert isinstance(queue, DropQueue)
    for order in range(4):
        queue.add(Pod(order, (), f"job{order}"))
    offered = []
    started = queue.run_pass(lambda w: offered.append(w.job) or w.order % 2 == 0)
    assert started == 2 and offered == ["job0", "job1", "job2", "job3"] and len(queue) == 0
    assert [w.job for w in dropped(queue)] == ["job1", "job3"]
    assert dropped(queue) == [] and dropped(queue_for("fifo")) == []


# ------------------------------------------------------------------ the fill metric

def curve(asks, placed, capacity_gpus):
    asks = np.array(asks, dtype=np.int64) * 100
    return FillCurve(np.cumsum(asks), np.cumsum(asks * np.array(placed)), 1000 * capacity_gpus)


def test_unallocated_at_arrived_by_hand():
    """Capacity 2 GPUs. Seed a: pods of 1000, 500, 1000, 500 milli, the third dropped:
    arrived 50, 75, 125, 150 %; allocated 50, 75, 75, 100 %. Seed b: 1000, 1000, 1000,
    all but the last placed: arrived 50, 100, 150; allocated 50, 100, 100."""
    a = curve([1000, 500, 1000, 500], [1, 1, 0, 1], 2)
    b = curve([1000, 1000, 1000], [1, 1, 0], 2)
    table = unallocated_at_arrived([a, b])
    assert list(table) == [str(p) for p in range(1, 151)]
    # p < 50: nothing arrived yet in either; 50..74: a 50, b 50; 75..99: a 25, b 50;
    # 100..124: a 25, b 0; 125..149: a 25, b 0; 150: a 0, b 0.
    assert table["49"] == {"median": 100.0, "p25": 100.0, "p75": 100.0}
    assert table["50"] == {"median": 50.0, "p25": 50.0, "p75": 50.0}
    assert table["75"] == {"median": 37.5, "p25": 31.25, "p75": 43.75}
    assert table["100"] == {"median": 12.5, "p25": 6.25, "p75": 18.75}
    assert table["149"] == table["100"]
    assert table["150"] == {"median": 0.0, "p25": 0.0, "p75": 0.0}
    assert unallocated_at_arrived([a]) ["75"] == {"median": 25.0, "p25": 25.0, "p75": 25.0}


def test_fill_through_the_am_and_rm_drops_what_cannot_be_placed():
    """9 GPUs; 1-GPU pods and a CPU-only one, filled to 1.5 × 9 = 13.5 GPUs: 14 GPU pods
    arrive, the first 9 take every GPU, the 5 after them are dropped, CPU-only pods all fit.
    So after k GPU pods unallocated = 100 − 100·min(k, 9)/9, whatever the seed or strategy."""
    cluster = read_openb_nodes(NODES)
    pods = read_openb_pods(WHOLE)
    for selector, seed in (("random", 3), ("job-packing", 4)):
        plan = fill_plan(pods, cluster.capacity_gpus, seed, inflate=1.5)
        result = replay(plan.table, cluster, ReplayOptions(selector=selector, queue_policy="drop", seed=seed))
        gpu_pods = [o for job, o in zip(plan.table.jobs, result.jobs) if job.gpus]
        assert len(gpu_pods) == 14
        assert [o.outcome for o in gpu_pods] == ["succeeded"] * 9 + ["dropped"] * 5
        assert all(o.start_s == o.submit_s for o in gpu_pods[:9])
        assert all(o.outcome == "succeeded" for job, o in zip(plan.table.jobs, result.jobs) if not job.gpus)
        assert result.timeline.queue_length.max() == 0 and result.timeline.pending_gpus.max() == 0   # none waits
        table = unallocated_at_arrived([fill_curve(plan.table, result, 9000)])
        assert list(table) == [str(p) for p in range(1, 156)]
        for p, point in table.items():
            k = 9 * int(p) // 100
            assert point["median"] == round(100 - 100 * min(k, 9) / 9, 6), p


def test_fill_keeps_every_pod_placed_past_the_rms_limit_on_running_applications(monkeypatch):
    """Fill mode never ends a pod, so each placed pod's application runs to the end: the
    replay's RM takes as many applications as the table has jobs, whatever
    RM_MAX_RUNNING_APPS holds other clients to (here 4, under the 9 GPU pods placed)."""
    monkeypatch.setattr(limits, "RM_MAX_RUNNING_APPS", 4)
    cluster = read_openb_nodes(NODES)
    plan = fill_plan(read_openb_pods(WHOLE), cluster.capacity_gpus, 3, inflate=1.5)
    result = replay(plan.table, cluster, ReplayOptions(selector="random", queue_policy="drop", seed=3))
    assert sum(o.outcome == "succeeded" for job, o in zip(plan.table.jobs, result.jobs) if job.gpus) == 9


def test_fill_groups_count_pods_and_gpus_placed_and_dropped_by_gang_size():
    """The run above, by group: 14 one-GPU pods, 9 placed, 5 dropped; the CPU-only pods
    (gang size 0) all placed, asking no GPU; a share of a GPU is a group of its own."""
    cluster = read_openb_nodes(NODES)
    plan = fill_plan(read_openb_pods(WHOLE), cluster.capacity_gpus, 3, inflate=1.5)
    result = replay(plan.table, cluster, ReplayOptions(selector="random", queue_policy="drop", seed=3))
    groups = fill_groups(plan.table, result)
    cpu_only = sum(not job.gpu_milli for job in plan.table.jobs)
    assert list(groups["by_gang_size"]) == ["0", "1"]
    assert groups["by_gang_size"]["1"] == {"pods": 14, "placed": 9, "dropped": 5, "gpus_asked": 14.0,
                                           "gpus_placed": 9.0, "gpus_placed_share": round(9 / 14, 6)}
    assert groups["by_gang_size"]["0"] == {"pods": cpu_only, "placed": cpu_only, "dropped": 0, "gpus_asked": 0.0,
                                           "gpus_placed": 0.0, "gpus_placed_share": None}
    assert groups["by_queue"]["default"]["pods"] == 14 + cpu_only
    assert [fill_bucket(m) for m in (0, 1, 999, 1000, 2000, 8000, 16000)] == ["0", "<1", "<1", "1", "2-4", "5-8", ">8"]


def test_fragmentation_at_arrived_reads_the_sample_where_the_headline_reads_unallocated():
    """Capacity 2 GPUs; 1-GPU pods arrive at 0, 1, 2 s (arrived 50, 100, 150 %); the FGD
    measure sampled at 0 s (500 milli) and 2 s (1000 milli): before the first pod there is
    nothing to read; at 50..99 % the state after pod 1 (0 s), at 100..149 % after pod 2
    (1 s: still the 0 s sample), at 150 % after pod 3 (2 s)."""
    from gangmaster.tools.replay.plots import fragmentation_at_arrived
    from gangmaster.tools.replay.workload import FragmentationSeries
    frag = FragmentationSeries(np.array([0.0, 2.0]), np.array([500.0, 1000.0]), np.array([2000, 1000]), 2000)
    comparison = SimpleNamespace(fill_curve=lambda name, seed: curve([1000, 1000, 1000], [1, 1, 0], 2),
                                 results={"x": {7: SimpleNamespace(fragmentation=frag)}},
                                 fill_tables={7: SimpleNamespace(jobs=[SimpleNamespace(submit_s=float(k))
                                                                       for k in range(3)])})
    got = fragmentation_at_arrived(comparison, "x", 7, np.array([1, 49, 50, 99, 100, 149, 150]))
    np.testing.assert_array_equal(got, [np.nan, np.nan, 25.0, 25.0, 25.0, 25.0, 50.0])


def test_fill_curve_needs_the_result_of_its_table():
    table = JobTable((TraceJob("a", 0.0, 1.0, "q", (TraceRole("pod", 1, 1, 1.0, 1),)),), "t", "0" * 64, "openb")
    with pytest.raises(ValueError, match="1 pods in the table, 0 in the result"):
        fill_curve(table, SimpleNamespace(jobs=()), 1000)


# ------------------------------------------------------------------ the command

def run_cli(capsys, *args):
    from gangmaster.tools.cli import main
    code = main(["replay", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_fill_mode_writes_the_headline_table_plot_and_metrics(tmp_path, capsys):
    import json
    code, out, err = run_cli(capsys, WHOLE, "--format", "openb", "--mode", "fill", "--inflate", "1.5",
                             "--seed", "1", "2", "3", "--selector", "random", "job-packing", "--report", tmp_path)
    assert code == 0, err
    assert f"from {NODES} (the node list beside the pods" in out
    assert "fill, seed 2:" in out and "unallocated GPU % against GPUs arrived" in out
    row = next(line for line in out.splitlines() if line.startswith("50 %"))
    assert row.split() == ["50", "%", "55.6", "(55.6–55.6)", "55.6", "(55.6–55.6)"]
    document = json.loads((tmp_path / "metrics.json").read_text())
    for name in ("random", "job-packing"):
        curve = document["selectors"][name]["unallocated_gpu_pct_at_arrived"]
        assert curve["50"] == {"median": 55.555556, "p25": 55.555556, "p75": 55.555556}
        assert document["selectors"][name]["fill"]["dropped"] == 5
        assert set(document["selectors"][name]["by_seed"]) == {"1", "2", "3"}
    assert document["run"]["fill"]["inflate"] == 1.5 and document["run"]["queue_policy"] == "drop"
    page = (tmp_path / "report.md").read_text()
    assert "## Unallocated GPUs against GPUs arrived (fill mode)" in page
    assert "the fill plots, the tables and the pods placed and dropped count every pod" in page.split("## ")[0]
    # the summary shows what fill mode measures, not JCT or queueing (pods never leave)
    summary = page.split("## Summary\n")[1].split("\n## ")[0]
    assert "| pods dropped | 5 | 5 |" in summary and "| pods placed |" in summary and "frag (FGD)" in summary
    assert "unallocated GPU % at 100 % arrived" in summary and "JCT" not in summary and "queue" not in summary
    printed = out.split("window:")[1]
    assert next(line for line in printed.splitlines() if line.startswith("pods dropped")).split() == [
        "pods", "dropped", "5", "5"] and "JCT" not in printed
    html_summary = (tmp_path / "report.html").read_text().split("<h2>Summary</h2>")[1].split("<h2>")[0]
    assert "pods dropped" in html_summary and "JCT" not in html_summary
    # by queue and gang size too: pods placed and dropped, GPUs asked and placed (medians over seeds), no JCT
    by_size = page.split("## By gang size (GPUs)\n")[1].split("\n## ")[0]
    assert "| gang size | selector | pods | placed | dropped | GPUs asked | GPUs placed | GPUs placed, % of asked |" \
        in by_size and "| 1 | random | 14 | 9 | 5 | 14 | 9 | 64.3 % |" in by_size
    assert "JCT" not in page.split("## By queue\n")[1].split("## What")[0]
    html_groups = (tmp_path / "report.html").read_text().split("<h2>By queue</h2>")[1].split("<h2>What")[0]
    assert "<th>GPUs placed, % of asked</th>" in html_groups and "JCT" not in html_groups
    # the trace line: the pods in the file and those each seed replayed (topped up to 1.5 x 9 GPUs)
    replayed = sorted(document["run"]["fill"]["pods_by_seed"].values())
    assert replayed[0] > 4 and document["run"]["input"]["jobs"] == 4
    trace = next(line for line in page.splitlines() if line.startswith("- **trace**"))
    assert f"4 pods in the file; {replayed[0]}–{replayed[-1]} pods replayed per seed" in trace, trace
    assert "JCT" not in page.split("## What each figure means")[1] and "**pods dropped**" in page
    from gangmaster.tools.replay.plots import matplotlib_missing
    assert (tmp_path / "fill.png").exists() == (matplotlib_missing() is None)
    # JCT, queueing and time-course plots say nothing here: left out, in one line saying why
    assert not any((tmp_path / name).exists() for name in ("jct_cdf.png", "queueing_cdf.png", "over_time.png",
                                                           "queues.png", "sweep.png"))
    assert ("not drawn: jct_cdf.png, queueing_cdf.png, over_time.png, queues.png: fill mode: pods never leave"
            in err + out) and "sweep.png" not in err + out
    if matplotlib_missing() is None:   # the headline plot opens its section, above its table, and only there
        fill_section, figures = page.split("## Unallocated GPUs")[1].split("## Figures")
        assert "(fill.png)" in fill_section.split("| GPUs arrived")[0] and "(fill.png)" not in figures
        html_page = (tmp_path / "report.html").read_text()
        assert html_page.count("(fill.png and fill.pdf)</figcaption>") == 1
        assert html_page.index("(fill.png and fill.pdf)</figcaption>") < html_page.index("<th>GPUs arrived</th>")


def test_cli_fill_mode_is_deterministic(tmp_path, capsys):
    import json
    from gangmaster.tools.replay.metrics import without_timing
    for name in "ab":
        assert run_cli(capsys, WHOLE, "--format", "openb", "--mode", "fill", "--seed", "5", "--selector", "random",
                       "--report", tmp_path / name)[0] == 0
    a, b = (json.loads((tmp_path / n / "metrics.json").read_text()) for n in "ab")
    assert without_timing(a) == without_timing(b)
    assert (tmp_path / "a" / "jobs.csv").read_bytes() == (tmp_path / "b" / "jobs.csv").read_bytes()
    page = (tmp_path / "a" / "report.md").read_text()   # one seed: no median or quartiles to speak of
    assert "Cells: unallocated GPU %; in bold" in page and "median over the seeds" not in page


def test_cli_time_mode_with_a_nodes_file(tmp_path, capsys):
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nx0,64000,262144,8,V100\n")
    code, out, err = run_cli(capsys, WHOLE, "--format", "openb", "--nodes-file", nodes, "--measure-trim", "0",
                             "--report", tmp_path / "r")
    assert code == 0, err
    assert f"from {nodes}" in out and "beside" not in out
    assert "deletion_time read as each pod's end" in out
    import json
    reading = json.loads((tmp_path / "r" / "metrics.json").read_text())["run"]["input"]["reading"]
    assert "alibaba/clusterdata#218" in reading and "lower bounds" in reading
    assert "alibaba/clusterdata#218" in (tmp_path / "r" / "report.md").read_text()


@pytest.mark.parametrize("args, message", [
    (["--mode", "fill", "--window", "0", "10"], "--window does not go with --mode fill"),
    (["--mode", "fill", "--queue-policy", "fifo"], "--queue-policy does not go with --mode fill"),
    (["--inflate", "1.2"], "--inflate goes with --mode fill"),
    (["--nodes", "4"], "--nodes does not go with --format openb"),
])
def test_cli_refuses_what_does_not_go_with_openb(capsys, args, message):
    code, _, err = run_cli(capsys, WHOLE, "--format", "openb", *args)
    assert code == 2 and message in err


def test_cli_refuses_openb_flags_with_other_formats(capsys):
    trace = FIXTURES.parent / "tiresias_small.csv"
    code, _, err = run_cli(capsys, trace, "--nodes", "4", "--mode", "fill")
    assert code == 2 and "--mode goes with --format openb" in err


def test_cli_bad_pod_row_exits_2_naming_it(capsys):
    code, _, err = run_cli(capsys, FIXTURES / "pods_bad.csv", "--format", "openb")
    assert code == 2 and "pods_bad.csv: line 3: gpu_milli:" in err


def test_a_strategy_that_declares_ties_by_node_name_is_reported_so(monkeypatch):
    from gangmaster.selectors.selector import get_selector
    from gangmaster.tools.replay.comparison import declared_tie_rule
    assert declared_tie_rule("random", "the replay's rule") == "the replay's rule"
    monkeypatch.setattr(type(get_selector("random")), "tie_rule", "node-name", raising=False)
    assert declared_tie_rule("random", "the replay's rule").startswith("random: equal keys to the smallest host name")
    assert declared_tie_rule("random", "the replay's rule", given_order=True) == "the replay's rule"


def test_the_pages_give_one_tie_rule_line_per_rule_naming_its_selectors():
    from gangmaster.tools.replay.pages import tie_rule_groups
    rules = {"random": "random: seeded from 42", "fgd": "fgd: by host name", "random-fit": "random-fit: seeded from 42",
             "packing": "packing: by host name"}
    assert tie_rule_groups(rules) == {"seeded from 42": ["random", "random-fit"], "by host name": ["fgd", "packing"]}


def test_the_fill_table_marks_the_lowest_median_of_a_row_where_one_selector_alone_has_it():
    from gangmaster.tools.replay.pages import html_table, fill_rows

    def point(median):
        return {"median": median, "p25": median - 1, "p75": median + 1}
    curves = {"a": {"5": point(95.0), "10": point(7.04), "11": point(6.0)},
              "b": {"5": point(95.0), "10": point(6.96), "11": point(5.0)},
              "c": {"5": point(95.0), "10": point(9.0), "11": point(8.0)}}
    document = {"selectors": {name: {"unallocated_gpu_pct_at_arrived": c} for name, c in curves.items()},
                "run": {"seeds": [1, 2]}}
    header, rows = fill_rows(document, mark_lowest=True)
    assert rows == [["5 %", "95.0 (94.0–96.0)", "95.0 (94.0–96.0)", "95.0 (94.0–96.0)"],     # all equal
                    ["10 %", "7.0 (6.0–8.0)", "7.0 (6.0–8.0)", "9.0 (8.0–10.0)"],          # two equal as shown
                    ["11 %", "6.0 (5.0–7.0)", "**5.0 (4.0–6.0)**", "8.0 (7.0–9.0)"]]       # one alone
    assert "**" not in str(fill_rows(document)[1])     # the CLI's table: plain
    page = html_table(header, rows)
    assert "<td><strong>5.0 (4.0–6.0)</strong></td>" in page and "<td>8.0 (7.0–9.0)</td>" in page


def test_the_fill_plot_legend_ranks_the_policies_by_where_they_end():
    pytest.importorskip("matplotlib")
    from gangmaster.tools.replay.plots import paint

    def curve_of(end):
        return {str(p): {"median": max(end, 100.0 - p), "p25": 0.0, "p75": 100.0} for p in range(1, 131)}
    ends = {"random": 6.1, "best-fit": 7.0, "fgd": 5.5}
    document = {"selectors": {name: {"unallocated_gpu_pct_at_arrived": curve_of(end)} for name, end in ends.items()}}
    comparison = SimpleNamespace(selectors=list(ends), seeds=[1, 2], cluster=SimpleNamespace(capacity_gpus=100))
    fig, _ = paint("fill.png", comparison, document)
    legend = fig.axes[1].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["fgd  5.5 %", "random  6.1 %", "best-fit  7.0 %"]
    assert legend.get_title().get_text() == "unallocated at 130 % arrived"
    assert [ax.get_xlim() for ax in fig.axes] == [(0, 130), (80, 130)]   # no margin past the last point
