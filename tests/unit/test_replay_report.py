"""The report folder from hand-built replay results: every file, with and without
matplotlib, and the same files for the same results."""
import csv
import json
import sys

import pytest

from gangmaster.tools.replay.clusters import sized
from gangmaster.tools.replay.comparison import Comparison, metrics_document
from gangmaster.tools.replay.metrics import measurement_window
from gangmaster.tools.replay.report import JOBS_COLUMNS, write_report
from gangmaster.tools.replay.trace import JobTable, NodeShape, TraceJob

from replay_results import outcome, result


def comparison() -> Comparison:
    shape = NodeShape(8, 80.0, 524288)
    trace = [TraceJob(f"j{k}", 10.0 * k, 100.0, "q" if k % 2 else "r", shape.gang_roles(1 + k % 3)) for k in range(10)]
    table = JobTable(tuple(trace), "trace.csv", "ab" * 32, "native")
    results = {}
    for name, delay in (("job-packing", 0), ("random", 5)):
        results[name] = {}
        for seed in (0, 1):
            jobs = [outcome(j.job_id, j.submit_s, j.submit_s + delay + seed, j.submit_s + delay + seed + 100, 100,
                            gpus=j.gpus, queue=j.queue, hosts=("node-000",), racks=("rack-000",)) for j in trace]
            results[name][seed] = result(jobs, [0.0, 10.0, 95.0], [1, 3, 0], queue_length=[0, 1, 0],
                                         capacity=16, selector=name, seed=seed)
    return Comparison(table, sized(2, 8), measurement_window([j.submit_s for j in trace]), results)


def test_the_report_folder_holds_every_file(tmp_path):
    pytest.importorskip("matplotlib")
    files = write_report(comparison(), tmp_path / "out")
    folder = tmp_path / "out"
    assert files.written == ("metrics.json", "jobs.csv", "timeline.csv", "jct_cdf.png", "jct_cdf.pdf",
                             "queueing_cdf.png", "queueing_cdf.pdf", "over_time.png", "over_time.pdf", "queues.png",
                             "queues.pdf", "report.html", "report.md")
    assert files.skipped_figures == (("sweep.png", "no --capacity-sweep in this run"),)
    for name in files.written:
        assert (folder / name).stat().st_size > 0, name
    assert (folder / "jct_cdf.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (folder / "jct_cdf.pdf").read_bytes()[:5] == b"%PDF-"
    page = (folder / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 4 and "<script" not in page.lower()
    assert "src=\"http" not in page and "href=" not in page          # self-contained
    assert "jobs 2..9 of 10 by submit (middle 80 %)" in page
    assert "sweep.png: no --capacity-sweep in this run" in page
    markdown = (folder / "report.md").read_text()
    assert "![JCT, cumulative share of jobs](jct_cdf.png)\n\n*JCT, cumulative share of jobs. Measurement window: jobs 2..9" in markdown
    assert "([PDF](jct_cdf.pdf))" in markdown
    assert "| JCT mean (s) | 100 | 106 |" in markdown       # medians over seeds 0, 1: 100.5 and 105.5, to 0 decimals (half to even)


def test_metrics_json_is_the_document_and_jobs_csv_a_row_per_job_selector_and_seed(tmp_path):
    c = comparison()
    write_report(c, tmp_path)
    document = json.loads((tmp_path / "metrics.json").read_text())
    assert document == json.loads(json.dumps(metrics_document(c)))
    jp = document["selectors"]["job-packing"]
    assert jp["queue_mean_s"] == 0.5 and jp["iqr"]["queue_mean_s"] == [0.25, 0.75]
    assert document["run"]["input"]["sha256"] == "ab" * 32 and document["run"]["seeds"] == [0, 1]
    assert document["run"]["window"]["first_job"] == 2 and document["run"]["cluster"]["gpus"] == 16
    rows = list(csv.DictReader((tmp_path / "jobs.csv").open()))
    assert len(rows) == 10 * 2 * 2 and tuple(rows[0]) == JOBS_COLUMNS
    assert rows[0] == {"selector": "job-packing", "seed": "0", "job_id": "j0", "queue": "r", "submit_s": "0.000",
                       "start_s": "0.000", "end_s": "100.000", "duration_s": "100.000", "jct_s": "100.000",
                       "queue_s": "0.000", "gpus": "1", "instances": "1", "nodes": "1", "racks": "1",
                       "consolidated": "1", "outcome": "succeeded", "hosts": "node-000"}
    timeline = list(csv.reader((tmp_path / "timeline.csv").open()))
    assert timeline[1] == ["job-packing", "0", "0.000", "1", "16", "0", "0", "0"] and len(timeline) == 1 + 4 * 3


def test_without_matplotlib_every_other_file_is_written_and_the_figures_are_named(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)      # import matplotlib now raises ImportError
    files = write_report(comparison(), tmp_path)
    assert files.written == ("metrics.json", "jobs.csv", "timeline.csv", "report.html", "report.md")
    assert [name for name, _ in files.skipped_figures] == ["jct_cdf.png", "queueing_cdf.png", "over_time.png",
                                                           "queues.png", "sweep.png"]
    assert all("pip install -e '.[plots]'" in why for _, why in files.skipped_figures)
    page = (tmp_path / "report.html").read_text()
    assert "data:image/png" not in page
    assert "jct_cdf.png, queueing_cdf.png, over_time.png, queues.png, sweep.png: matplotlib is not installed" in page
    assert not list(tmp_path.glob("*.png"))


def test_the_same_results_give_the_same_files(tmp_path):
    c = comparison()
    write_report(c, tmp_path / "a")
    write_report(c, tmp_path / "b")
    for name in ("metrics.json", "jobs.csv", "timeline.csv", "report.md", "report.html", "jct_cdf.pdf", "over_time.pdf"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_a_report_folder_that_cannot_be_made_is_bad_input(tmp_path):
    (tmp_path / "file").write_text("x")
    from gangmaster.conf.fields import ConfigError
    with pytest.raises(ConfigError, match="a folder"):
        write_report(comparison(), tmp_path / "file")


@pytest.mark.parametrize("key, value, shown", [
    ("jobs", 8680.0, "8,680"),        # a median over seeds of a count: a float
    ("jobs", 8680.5, "8,680.5"),
    ("dropped", 14.5, "14.5"),
    ("jobs", 10818, "10,818"),
    ("dropped", None, "–"),
    ("jct_mean_s", 3750.0, "3,750"),
    ("gpu_allocation_mean", 0.485, "48.5 %"),
])
def test_the_pages_print_counts_as_whole_numbers_not_exponents(key, value, shown):
    from gangmaster.tools.replay.pages import cell
    assert cell(key, value) == shown


def test_up_to_eight_selectors_each_draw_a_line_of_their_own():
    from gangmaster.tools.replay.plots import LINE_COLOURS, LINE_STYLES
    assert len(LINE_COLOURS) == len(LINE_STYLES) >= 8
    assert len(set(LINE_COLOURS)) == len(LINE_COLOURS)
    assert len(set(map(str, LINE_STYLES))) == len(LINE_STYLES)
    def is_dotted(style):   # every dash one point long
        return style == ":" or isinstance(style, tuple) and set(style[1][::2]) == {1}
    dotted = [style for style in LINE_STYLES if is_dotted(style)]
    assert len(dotted) <= 1, f"two dotted styles cannot be told apart: {dotted}"
