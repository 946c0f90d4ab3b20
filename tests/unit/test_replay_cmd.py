"""``gangmaster replay`` end to end on the shipped fixtures, through the real engine:
a golden run (checked by hand, see below), byte-identical output, and exit 2 with the
file, line and field for bad input."""
import json
from pathlib import Path

import pytest

from gangmaster.tools.cli import main
from gangmaster.tools.replay.metrics import without_timing

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "replay"
TRACE = str(FIXTURES / "tiresias_small.csv")
SPEC = str(FIXTURES / "tiresias_n4g4.csv")


def replay_json(capsys, *args) -> dict:
    assert main(["replay", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.usefixtures("without_figures")
def test_golden_run_on_the_tiresias_fixture(tmp_path, capsys):
    """12 jobs on 4 nodes of 4 GPUs in 2 racks, FIFO, job packing. Checked by hand: a gang
    of 8 GPUs takes two whole nodes; job 2 (2 GPUs) and 3 (1) go to the node with the
    fewest free GPUs that fit (s1-n000, next to job 0); job 5 (8 GPUs) waits for two whole
    nodes until job 1 ends at 177 and job 6 queues behind it (FIFO); job 9 (4 GPUs) waits
    until 315; job 10 (6 = 4 + 2) then takes a whole node and one of the two nodes with 2
    free GPUs (both in the other rack); job 11 the only node left with a free GPU."""
    assert main(["replay", TRACE, "--cluster", SPEC, "--measure-trim", "0", "--report", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "window: jobs 1..12 of 12 by submit (all; --measure-trim 0), t 0..300 s" in out
    golden = (FIXTURES / "golden_tiresias_small_job_packing.csv").read_text()
    assert (tmp_path / "jobs.csv").read_text() == golden
    figures = json.loads((tmp_path / "metrics.json").read_text())["selectors"]["job-packing"]
    assert figures["jobs"] == 12 and figures["finished"] == 12
    assert figures["jct_mean_s"] == round(1949 / 12, 6)
    assert figures["queue_mean_s"] == round((45 + 1 + 65 + 55 + 15) / 12, 6)
    assert figures["consolidated_share"] == 1.0 and figures["one_rack_share"] == 0.875   # 7 of 8: job 10 spans racks


@pytest.mark.usefixtures("without_figures")
def test_same_inputs_give_byte_identical_files(tmp_path, capsys):
    args = [TRACE, "--cluster", SPEC, "--selector", "job-packing", "random", "--seed", "3", "4"]
    for name in ("a", "b"):
        assert main(["replay", *args, "--report", str(tmp_path / name)]) == 0
    for name in ("jobs.csv", "timeline.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    a, b = (json.loads((tmp_path / n / "metrics.json").read_text()) for n in "ab")
    assert without_timing(a) == without_timing(b)
    assert a["run"]["seeds"] == [3, 4] and set(a["selectors"]["random"]["by_seed"]) == {"3", "4"}


def test_json_has_the_issues_shape(capsys):
    document = replay_json(capsys, TRACE, "--nodes", "8", "--gpus-per-node", "4")
    figures = document["selectors"]["job-packing"]
    for key in ("jobs", "jct_mean_s", "jct_p50_s", "jct_p95_s", "jct_p99_s", "queue_mean_s", "queue_p95_s",
                "gpu_allocation_mean", "frag_hol_mean", "consolidated_share", "by_queue", "by_gang_size", "wall_s"):
        assert key in figures, key
    assert set(document["run"]) >= {"input", "cluster", "window", "seeds", "tie_rules", "queue_policy", "version"}
    assert len(document["run"]["input"]["sha256"]) == 64 and document["run"]["cluster"]["gpus"] == 32


def test_capacity_sweep_adds_a_point_per_node_count(tmp_path, capsys):
    document = replay_json(capsys, TRACE, "--nodes", "4", "--gpus-per-node", "4", "--capacity-sweep", "3,8",
                           "--report", str(tmp_path))
    points = document["sweep"]["points"]
    assert [p["nodes"] for p in points] == [3, 8] and [p["gpus"] for p in points] == [12, 32]
    assert points[0]["selectors"]["job-packing"]["jct_mean_s"] > points[1]["selectors"]["job-packing"]["jct_mean_s"]
    markdown = (tmp_path / "report.md").read_text()
    assert "## Load sweep" in markdown and "| 8 | 32 | job-packing |" in markdown
    try:
        import matplotlib  # noqa: F401  (the figures are an optional extra)
    except ImportError:
        assert not (tmp_path / "sweep.png").exists()
    else:
        assert (tmp_path / "sweep.png").exists()


def test_infer_prints_the_offered_load(capsys):
    assert main(["replay", TRACE, "--infer", "peak", "--gpus-per-node", "4"]) == 0
    out = capsys.readouterr().out
    assert "cluster: inferred-peak-6x4 (6 × 4 GPUs; 24 GPUs); offered load" in out


def test_a_preset_with_isolated_queues_leaves_out_jobs_of_other_queues(tmp_path, capsys):
    trace = tmp_path / "philly.csv"
    trace.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                     "2017-10-01 00:00:00,60.0,8,480.0,ed69ec\n2017-10-01 00:01:00,60.0,16,960.0,103959\n"
                     "2017-10-01 00:02:00,60.0,1,60.0,23dbec\n2017-09-30 23:59:59,60.0,1,60.0,ed69ec\n")
    assert main(["replay", str(trace), "--preset", "philly-helios-11vc", "--measure-trim", "0"]) == 0
    out = capsys.readouterr().out
    assert "left out 1 jobs of queues philly-helios-11vc has no nodes for: 23dbec" in out
    assert "jobs 1..2 of 2" in out            # the one before the preset's window is not read at all
    # ed69ec: 480 GPU-s on 8 nodes of 8 GPUs over the 60 s submit span; 103959: 960 GPU-s on 8 nodes too
    assert "offered load by isolated queue: 0e4a51 0.00, 103959 0.25, 11cb48 0.00" in out
    assert "ed69ec 0.12" in out


HELIOS_WHY = "the Helios simulator measures every job it replays"


@pytest.mark.parametrize("given, trim, window", [
    ([], 0.0, f"jobs 1..10 of 10 by submit (all; --measure-trim 0 of the preset philly-helios-11vc: {HELIOS_WHY})"),
    (["--measure-trim", "0.2"], 0.2, "jobs 3..8 of 10 by submit (middle 60 %; --measure-trim 0.2)"),
])
@pytest.mark.usefixtures("without_figures")
def test_the_helios_preset_measures_every_job_unless_measure_trim_is_given(tmp_path, capsys, given, trim, window):
    """A preset named after a study carries its methodology: Helios measures every job (the
    default trim would leave out the first and last 10 %); the table, metrics.json and the
    pages say what was left out and what chose it."""
    trace = tmp_path / "philly.csv"
    trace.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n" + "".join(
        f"2017-10-01 00:0{k}:00,60.0,1,60.0,ed69ec\n" for k in range(10)))
    assert main(["replay", str(trace), "--preset", "philly-helios-11vc", *given, "--report", str(tmp_path / "r")]) == 0
    assert f"window: {window}, t " in capsys.readouterr().out
    run = json.loads((tmp_path / "r" / "metrics.json").read_text())["run"]["window"]
    assert run["trim"] == trim and run["text"].startswith(window)
    for page in ("report.md", "report.html"):
        assert window in (tmp_path / "r" / page).read_text(), page


def test_without_a_preset_the_window_says_the_trim_is_the_default(capsys):
    document = replay_json(capsys, TRACE, "--nodes", "4", "--gpus-per-node", "4")
    assert document["run"]["window"]["trim"] == 0.1
    assert document["run"]["window"]["trim_set_by"] == "--measure-trim 0.1, the default"


@pytest.mark.parametrize("args, message", [
    ([TRACE, "--selector", "nope"], "unknown selector: 'nope'; known selectors:"),
    ([str(FIXTURES / "philly_bad_rows.csv"), "--nodes", "2"], "philly_bad_rows.csv: line 3: num_gpus: expected an integer"),
    ([str(FIXTURES / "missing.csv")], "missing.csv: expected an existing file"),
    ([TRACE, "--preset", "philly-helios-11vc", "--capacity-sweep", "4"], "does not go with --cluster or --preset"),
    ([TRACE, "--preset", "nope"], "--preset: expected one of philly-1000x8, philly-helios-11vc, tiresias-n32g4"),
    ([TRACE, "--window", "10", "5"], "--window: END: expected a time at or after START"),
    ([TRACE, "--window", "900", "1000"], "no jobs to replay in the window"),
    ([TRACE, "--gpus-per-node", "4"], "--gpus-per-node goes with --nodes, --infer or --capacity-sweep"),
    ([TRACE, "--queue-priority", "x=1"], "--queue-priority goes with --preemption on"),
    ([TRACE, "--cluster-reservations", "2"], "--cluster-reservations goes with --queue-policy reserve"),
    ([TRACE, "--reserve-after", "60"], "--reserve-after goes with --queue-policy reserve"),
    ([TRACE, "--preemption", "on", "--queue-priority", "x=1"], "--queue-priority: queue 'x' is not one of the replay's"),
])
def test_bad_input_exits_2_naming_what_is_wrong(capsys, args, message):
    assert main(["replay", *args]) == 2
    assert message in capsys.readouterr().err


def test_skip_bad_rows_says_how_many_and_replays_the_rest(capsys):
    assert main(["replay", str(FIXTURES / "philly_bad_rows.csv"), "--nodes", "2", "--on-bad-row", "skip"]) == 0
    captured = capsys.readouterr()
    assert "skipped 6 bad rows; first:" in captured.err and "(philly, 2 jobs" in captured.out


@pytest.mark.parametrize("argv", [["--heartbeat", "-1"], ["--time-scale", "0"], ["--seed", "-1"],
                                  ["--format", "slurm"], ["--measure-trim", "0.5"], ["--capacity-sweep", "0"],
                                  ["--preemption-grace", "-1"], ["--queue-priority", "q"],
                                  ["--queue-priority", "q=1:-2"], ["--cluster-reservations", "0"],
                                  ["--cluster-reservations", "65"], ["--reserve-after", "-1"],
                                  ["--reserve-after", "nan"]])
def test_bad_option_values_exit_2_at_parse_time(capsys, argv):
    with pytest.raises(SystemExit) as caught:
        main(["replay", TRACE, *argv])
    assert caught.value.code == 2


@pytest.mark.parametrize("argv, message", [
    (["--nodes", "0"], "argument --nodes: expected an integer 1..1,000,000 (MAX_CLUSTER_NODES), got 0"),
    (["--nodes", "4", "--capacity-sweep", "10000000"],
     "argument --capacity-sweep: expected an integer 1..1,000,000 (MAX_CLUSTER_NODES), got 10000000"),
    (["--nodes", "4", "--capacity-sweep", "0,4"],
     "argument --capacity-sweep: expected an integer 1..1,000,000 (MAX_CLUSTER_NODES), got 0 in '0,4'"),
    (["--nodes", "4", "--capacity-sweep", "-3,4"],
     "argument --capacity-sweep: expected an integer 1..1,000,000 (MAX_CLUSTER_NODES), got -3 in '-3,4'"),
    (["--nodes", "4", "--capacity-sweep", "4,-3"],
     "argument --capacity-sweep: expected an integer 1..1,000,000 (MAX_CLUSTER_NODES), got -3 in '4,-3'"),
])
def test_a_node_count_out_of_range_names_the_flag_given_and_the_real_limit(capsys, argv, message):
    with pytest.raises(SystemExit) as caught:
        main(["replay", TRACE, *argv])
    assert caught.value.code == 2 and message in capsys.readouterr().err


def test_help_explains_every_figure(capsys):
    with pytest.raises(SystemExit):
        main(["replay", "--help"])
    out = capsys.readouterr().out
    for phrase in ("JCT mean:", "frag (HOL):", "consolidated:", "philly-helios-11vc:", "--capacity-sweep",
                   "byte for byte"):
        assert phrase in " ".join(out.split()), phrase
