"""``gangmaster replay --workloads DIR`` (issue 32): the family runner on a tiny family (two
pod lists, one of them in the artifact's five-column multigpu form, on four nodes), its
document and report, the artifact's expected results read from a real excerpt, and the
command's refusals. The family's fixtures are synthetic; the excerpt is eight rows of the
artifact's analysis_allo_discrete.csv (default and cpu200, GpuPacking and FGD, seeds 42-43)."""
import csv
import json
import re
from pathlib import Path

import pytest

from gangmaster.conf.fields import ConfigError
from gangmaster.tools.replay import family
from gangmaster.tools.replay.artifact import PAPER_FGD, read_expected
from gangmaster.tools.replay.family_pages import CSV_COLUMNS, headline_rows, write_family_report

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "replay"
FAMILY = FIXTURES / "openb_family"
EXPECTED = FIXTURES / "fgd_artifact"
OPTIONS = family.FamilyOptions(seeds=(42, 43), selectors=("packing", "best-fit"))


@pytest.fixture(scope="module")
def ran():
    return family.run_family(FAMILY, None, OPTIONS)


# ------------------------------------------------------------------ the artifact's results

@pytest.mark.parametrize("workload, policy, seeds, median, used", [
    ("openb_pod_list_default", PAPER_FGD, [42, 43], 100 - (95.14 + 95.06) / 2, (42, 43)),
    ("openb_pod_list_default", PAPER_FGD, [43, 44], 100 - 95.06, (43,)),          # its seeds among ours
    ("openb_pod_list_cpu200", "04-GpuPacking", [1, 2], 100 - (90.15 + 90.41) / 2, (42, 43)),   # none: all its seeds
])
def test_the_artifact_figure_is_the_median_unallocated_over_the_seeds_it_shares(workload, policy, seeds, median, used):
    figure = read_expected(EXPECTED).figure(workload, policy, seeds)
    assert figure.median == pytest.approx(median) and figure.seeds == used


@pytest.mark.parametrize("workload, policy", [("openb_pod_list_gpushare40", PAPER_FGD),
                                              ("openb_pod_list_default", "05-BestFit")])
def test_the_artifact_has_no_figure_for_what_it_did_not_run(workload, policy):
    assert read_expected(EXPECTED / "analysis_allo_discrete.csv").figure(workload, policy, [42]) is None


@pytest.mark.parametrize("change, expected", [
    (lambda rows: rows[1].__setitem__(rows[0].index("100"), "100.5"), "line 2: 100: expected a finite number >= 0 "
                                                                      'and <= 100, got "100.5"'),
    (lambda rows: rows.append(list(rows[1])), "line 10: seed: expected one row per workload, policy and seed"),
    (lambda rows: rows[0].__setitem__(rows[0].index("100"), "hundred"), "line 1: expected a header with the columns"),
])
def test_a_bad_results_file_is_refused_naming_line_and_column(tmp_path, change, expected):
    rows = list(csv.reader((EXPECTED / "analysis_allo_discrete.csv").open()))
    change(rows)
    path = tmp_path / "analysis_allo_discrete.csv"
    with path.open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    with pytest.raises(ConfigError, match=re.escape(expected)):
        read_expected(tmp_path)


def test_a_folder_without_the_results_file_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="expected the artifact's analysis_allo_discrete.csv"):
        read_expected(tmp_path)


# ------------------------------------------------------------------ the runner

def test_every_pod_list_of_the_folder_runs_with_every_seed_and_policy(ran):
    assert [w.short for w in ran.workloads] == ["default", "multigpu50"]   # the five-column list too
    assert [(f.workload, f.seed, f.selector) for f in ran.figures] == [
        (w, seed, name) for w in ("openb_pod_list_default", "openb_pod_list_multigpu50")
        for seed in (42, 43) for name in ("packing", "best-fit")]
    assert all(f.unallocated_pct is not None and f.placed + f.dropped == f.pods and f.decisions for f in ran.figures)


def test_the_document_takes_medians_and_names_the_best_with_its_margins(ran):
    document = family.family_document(ran, read_expected(EXPECTED))
    default = document["workloads"]["default"]
    by_seed = {name: [f.unallocated_pct for f in ran.figures
                      if f.workload == "openb_pod_list_default" and f.selector == name] for name in OPTIONS.selectors}
    medians = {name: round(sum(values) / 2, 3) for name, values in by_seed.items()}   # two seeds: their mean
    assert {name: e["unallocated_pct"]["median"] for name, e in default["selectors"].items()} == medians
    best = min(medians, key=medians.get)
    assert default["best"]["selector"] == best
    assert default["paper_fgd"] == pytest.approx(100 - (95.14 + 95.06) / 2)
    assert default["best"]["margin_over_paper_fgd_pp"] == pytest.approx(default["paper_fgd"] - medians[best], abs=1e-3)
    assert default["selectors"]["packing"]["artifact"]["policy"] == "04-GpuPacking"
    assert default["best"]["margin_over_fgd_pp"] is None                       # no fgd ran
    assert document["workloads"]["multigpu50"]["paper_fgd"] is None            # not in the excerpt
    assert document["beat_paper_fgd_everywhere"] == []
    assert set(document["decision_us_per_pod"]) == {"packing", "best-fit"}


def test_processes_change_nothing_but_the_timings(ran):
    two = family.run_family(FAMILY, None, family.FamilyOptions(OPTIONS.seeds, OPTIONS.selectors, jobs=2))
    one_doc, two_doc = (family.without_timing(family.family_document(r)) for r in (ran, two))
    one_doc["run"].pop("processes"), two_doc["run"].pop("processes")
    assert one_doc == two_doc


def test_a_folder_without_pod_lists_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="a folder holding openb pod lists"):
        family.find_workloads(tmp_path)


# ------------------------------------------------------------------ the report

def test_the_report_has_a_row_per_workload_and_policy(ran, tmp_path):
    document = family.family_document(ran, read_expected(EXPECTED))
    files = write_family_report(document, tmp_path)
    assert files.written == ("family.json", "family.csv", "report.html", "report.md")
    rows = list(csv.DictReader((tmp_path / "family.csv").open()))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert [(r["workload"], r["selector"]) for r in rows] == [(w, s) for w in ("default", "multigpu50")
                                                              for s in ("packing", "best-fit")]
    assert json.loads((tmp_path / "family.json").read_text()) == document
    header, table = headline_rows(document)
    assert header[:3] == ["workload", "packing", "best-fit"] and [row[0] for row in table] == ["default", "multigpu50"]
    packing = document["workloads"]["default"]["selectors"]["packing"]
    assert table[0][1].strip("*") == f"{packing['unallocated_pct']['median']:.2f} / {packing['artifact']['median']:.2f}"
    page = (tmp_path / "report.html").read_text()
    assert "<td class=\"text\">multigpu50</td>" in page and "Decision time per pod" in page


# ------------------------------------------------------------------ the command

def run_cli(capsys, *args):
    from gangmaster.tools.cli import main
    code = main(["replay", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("args, message", [
    ((FAMILY / "openb_pod_list_default.csv", "--workloads", FAMILY), "give a TRACE or --workloads DIR, not both"),
    (("--workloads", FAMILY, "--mode", "time"), "--mode does not go with --workloads"),
    (("--workloads", FAMILY, "--nodes", "4"), "--nodes does not go with --workloads"),
    (("--workloads", FAMILY, "--selector", "nope"), "nope"),
    ((FAMILY / "openb_pod_list_default.csv", "--format", "openb", "--expected", EXPECTED),
     "--expected goes with --workloads"),
    ((), "give a TRACE, or --workloads DIR"),
])
def test_the_command_refuses_what_does_not_go_with_a_family(capsys, args, message):
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_the_command_refuses_a_folder_without_pod_lists_in_one_line(capsys, tmp_path):
    code, _, err = run_cli(capsys, "--workloads", tmp_path, "--selector", "packing")
    assert code == 2 and "a folder holding openb pod lists" in err and len(err.strip().splitlines()) == 1, err


def test_the_command_prints_a_line_per_workload_and_the_table(capsys, tmp_path):
    code, out, err = run_cli(capsys, "--workloads", FAMILY, "--seed", "42", "--selector", "packing",
                             "--expected", EXPECTED, "--report", tmp_path)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("family: 2 pod lists") and lines[1].startswith("  default: unallocated")
    assert any(line.startswith("default ") and " / " in line for line in lines)
    assert (tmp_path / "report.html").exists()


def test_the_command_reads_every_input_before_it_announces_the_run(capsys, tmp_path):
    (tmp_path / "openb_pod_list_default.csv").write_text((FAMILY / "openb_pod_list_default.csv").read_text())
    code, out, err = run_cli(capsys, "--workloads", tmp_path, "--selector", "packing")
    assert code == 2 and out == "" and "openb_node_list_gpu_node.csv: expected an existing file" in err, (out, err)


# ------------------------------------------------------------------ resuming a stopped run

def _log(folder, options=OPTIONS):
    workloads, _, nodes_path, _ = family.read_family(FAMILY, None, options)
    return family.ReplayLog.for_family(folder, workloads, nodes_path, options)


def test_a_resumed_run_runs_only_what_the_stopped_one_did_not_finish(ran, tmp_path, monkeypatch):
    first = _log(tmp_path)
    for figures in ran.figures[:3]:           # a run stopped after three replays
        first.add(figures)
    with (tmp_path / family.REPLAYS_FILE).open("a") as f:
        f.write('{"replay": {"workload": "openb_pod_l')   # the fourth cut short by the kill
    replayed = []
    real = family.replay_task
    monkeypatch.setattr(family, "replay_task", lambda task: replayed.append(task) or real(task))
    again = family.run_family(FAMILY, None, OPTIONS, log=_log(tmp_path))
    assert len(replayed) == len(ran.figures) - 3 and again.resumed == 3
    assert [(f.workload, f.seed, f.selector, f.unallocated_pct) for f in again.figures] == [
        (f.workload, f.seed, f.selector, f.unallocated_pct) for f in ran.figures]
    assert family.family_document(again)["run"]["resumed"] == 3
    assert len(_log(tmp_path).figures()) == len(ran.figures)   # the cut line dropped, the rest appended


def test_a_folder_holding_another_runs_replays_is_refused_naming_what_differs(tmp_path):
    _log(tmp_path)
    other = family.FamilyOptions(OPTIONS.seeds, OPTIONS.selectors, inflate=1.5)
    with pytest.raises(ConfigError, match="another run's: inflate differ"):
        _log(tmp_path, other)


def test_the_command_resumes_from_its_report_folder(capsys, tmp_path):
    args = ("--workloads", FAMILY, "--seed", "42", "--selector", "packing", "--report", tmp_path)
    code, out, err = run_cli(capsys, *args)
    assert code == 0 and "resuming" not in out, err
    code, out, err = run_cli(capsys, *args)
    assert code == 0 and "holds 2 finished replays; those of this run are not run again" in out, (out, err)
    assert "2 of the replays resumed" in (tmp_path / "report.md").read_text()


def test_decision_times_are_set_beside_the_papers_fgd_and_ours():
    from gangmaster.tools.replay.family_pages import decision_rows
    times = {"packing": 100.0, "fgd-k8s": 400.0, "fgd": 500.0}
    document = {"decision_us_per_pod": {name: {"us_per_decision": us, "decisions": 10, "replay_wall_s": 1.0}
                                        for name, us in times.items()}}
    header, rows = decision_rows(document)
    assert header[:4] == ["policy", "µs per decision", "× fgd-k8s", "× fgd"]
    assert rows[0][:4] == ["packing", "100", "0.25×", "0.20×"]
    del document["decision_us_per_pod"]["fgd-k8s"]
    assert decision_rows(document)[0][2] == "× fgd"


def test_the_line_per_workload_shows_the_tables_medians(capsys, tmp_path):
    code, out, err = run_cli(capsys, "--workloads", FAMILY, "--seed", "42", "43", "44", "--selector", "packing",
                             "--report", tmp_path)
    assert code == 0, err
    document = json.loads((tmp_path / "family.json").read_text())
    for workload, entry in document["workloads"].items():
        line = next(line for line in out.splitlines() if line.startswith(f"  {workload}: "))
        assert f"packing {entry['selectors']['packing']['unallocated_pct']['median']:.2f}" in line
