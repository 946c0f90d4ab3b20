"""The report's figures as a researcher would publish them, read back from the figure
objects and the written files: a PDF beside each PNG, no title baked in (the caption is
under the figure in the pages), the spread over seeds drawn, axes that fit the data, a
panel with nothing to show saying so, coinciding policies named as one line, and
matplotlib's global settings left as they were."""
import re

import numpy as np
import pytest

from gangmaster.tools.replay.clusters import sized
from gangmaster.tools.replay.comparison import Comparison, SweepPoint, metrics_document
from gangmaster.tools.replay.metrics import measurement_window
from gangmaster.tools.replay.report import write_report
from gangmaster.tools.replay.trace import JobTable, NodeShape, TraceJob

from replay_results import outcome, result

matplotlib = pytest.importorskip("matplotlib")
from gangmaster.tools.replay import plots  # noqa: E402

DAY = 86400.0


def comparison(waits=None, seeds=(0, 1), submit_every=10.0, duration=100.0, drain_s=0.0, jct_growth=1.0,
               sweep_nodes=(), sweep_power=1) -> Comparison:
    """Ten jobs; ``waits``: selector -> the queueing delay of its jobs (seed s adds s; on
    n nodes of a sweep × (8 / n) ** ``sweep_power``); job k runs ``jct_growth ** k`` times
    as long; ``drain_s``: the last job runs that much longer (the cluster drains after the
    submits)."""
    waits = waits or {"job-packing": 0.0, "random": 5.0}
    shape = NodeShape(8, 80.0, 524288)
    trace = [TraceJob(f"j{k}", submit_every * k, duration, "q" if k % 2 else "r", shape.gang_roles(1 + k % 3))
             for k in range(10)]
    table = JobTable(tuple(trace), "trace.csv", "ab" * 32, "native")

    def results(scale=1.0):
        by_selector = {}
        for name, wait in waits.items():
            by_selector[name] = {}
            for seed in seeds:
                delay = (wait + seed if wait else 0.0) * scale
                jobs = [outcome(j.job_id, j.submit_s, j.submit_s + delay,
                                j.submit_s + delay + jct_growth ** k * (duration + (k if wait else 0))
                                + (drain_s if k == 9 else 0), duration, gpus=j.gpus, queue=j.queue)
                        for k, j in enumerate(trace)]
                end = jobs[-1].end_s
                queued = [0, int(wait), 0]
                by_selector[name][seed] = result(jobs, [0.0, trace[-1].submit_s / 2, end], [1, 3, 0],
                                                 queue_length=queued, capacity=16, selector=name, seed=seed)
        return by_selector

    points = [SweepPoint(n, sized(n, 8), results(scale=(8 / n) ** sweep_power)) for n in sweep_nodes]
    return Comparison(table, sized(2, 8), measurement_window([j.submit_s for j in trace]), results(),
                      sweep=points)


def paint(name, c):
    fig, notes = plots.paint(name, c, metrics_document(c))
    return fig, plots.caption(next(f.title for f in plots.FIGURES if f.name == name), notes)


def labels(ax):
    legend = ax.get_legend() or ax.figure.legends[0]
    return [t.get_text() for t in legend.get_texts()]


def test_each_figure_is_written_as_png_and_pdf_and_the_pages_caption_it(tmp_path):
    files = write_report(comparison(sweep_nodes=(2, 4)), tmp_path)
    page, markdown = (tmp_path / "report.html").read_text(), (tmp_path / "report.md").read_text()
    for figure in (f for f in plots.FIGURES if f.name not in plots.FILL_ONLY):
        png, pdf = figure.files
        assert {png, pdf} <= set(files.written)
        assert (tmp_path / pdf).read_bytes()[:5] == b"%PDF-" and (tmp_path / pdf).stat().st_size > 1000
        caption = re.search(rf"<figcaption>([^<]*) \({re.escape(png)} and {re.escape(pdf)}\)</figcaption>", page)
        assert caption and caption.group(1).startswith(figure.title + ". "), figure.name
        assert f"![{figure.title}]({png})\n\n*{figure.title}. " in markdown and f"([PDF]({pdf}))" in markdown


@pytest.mark.parametrize("name", ["jct_cdf.png", "queueing_cdf.png", "over_time.png", "queues.png", "sweep.png"])
def test_no_figure_has_a_title_baked_in(name):
    fig, caption = paint(name, comparison(sweep_nodes=(2, 4)))
    assert fig._suptitle is None and all(ax.get_title() == "" for ax in fig.axes)
    assert caption.count(".") >= 2          # the title and at least one note


@pytest.mark.parametrize("name, shaded", [("jct_cdf.png", True), ("queueing_cdf.png", True),
                                          ("over_time.png", True), ("sweep.png", True)])
def test_the_spread_over_seeds_is_drawn_as_a_band(name, shaded):
    several, _ = paint(name, comparison(seeds=(0, 1, 2), sweep_nodes=(2, 4)))
    one, one_caption = paint(name, comparison(seeds=(3,), sweep_nodes=(2, 4)))
    bands = [c for ax in several.axes for c in ax.collections if type(c).__name__ in ("PolyCollection", "FillBetweenPolyCollection")]
    assert bool(bands) == shaded
    assert not [c for ax in one.axes for c in ax.collections if "Poly" in type(c).__name__]
    assert "Seed 3" in one_caption


def test_the_queue_bars_carry_the_spread_as_whiskers():
    fig, caption = paint("queues.png", comparison(seeds=(0, 1, 2)))
    assert any(c for ax in fig.axes for c in ax.containers if getattr(c, "errorbar", None) is not None)
    assert "whiskers: 25th-75th percentile" in caption


@pytest.mark.parametrize("power, log", [(1, False),      # 100-150 s: under a decade, linear
                                        (3, True)])      # 100 s to hours: log
def test_the_sweep_axis_is_logarithmic_only_where_the_values_span_a_decade(power, log):
    c = comparison(waits={"job-packing": 0.0, "random": 5.0}, sweep_nodes=(1, 2, 4, 8), sweep_power=power)
    values = [s["jct_mean_s"] for p in metrics_document(c)["sweep"]["points"] for s in p["selectors"].values()]
    fig, _ = paint("sweep.png", c)
    ax = fig.axes[0]
    assert (ax.get_yscale() == "log") == log, (min(values), max(values))
    assert ax.get_xscale() == "linear"            # 1-8 nodes: under a decade
    low, high = ax.get_ylim()
    assert low <= min(values) and high >= max(values) and (log or high < 2 * max(values))


def test_the_over_time_figure_spans_the_submits_not_the_drain():
    """Submits over 3 days, the last job running 22 days more: the axis ends at 3 days."""
    c = comparison(submit_every=3 * DAY / 9, drain_s=22 * DAY)
    fig, caption = paint("over_time.png", c)
    assert fig.axes[-1].get_xlabel() == "hours since the first submit"
    assert fig.axes[0].get_xlim() == pytest.approx((0, 72))
    assert "From the first submit to the last (72.0 hours); the cluster then drains until 600.0 hours, not drawn" \
        in caption


def test_a_cdf_is_linear_under_a_decade_and_logarithmic_over_it():
    narrow, _ = paint("jct_cdf.png", comparison())                    # JCT 100-109 s
    wide, _ = paint("jct_cdf.png", comparison(jct_growth=2.0))       # 200-25,600 s
    assert narrow.axes[0].get_xscale() == "linear" and wide.axes[0].get_xscale() == "log"


@pytest.mark.parametrize("name, says", [
    ("queueing_cdf.png", "no job in the measurement window waited"),
    ("over_time.png", "no job queued at any time, for any policy"),
    ("queues.png", "no job in the window waited, in any queue, for any policy"),
])
def test_a_panel_with_nothing_to_show_says_so(name, says):
    fig, caption = paint(name, comparison(waits={"job-packing": 0.0, "locality": 0.0}))
    texts = [t.get_text().replace("\n", " ") for ax in fig.axes for t in ax.texts]
    empty = [ax for ax in fig.axes if any(says in t.get_text().replace("\n", " ") for t in ax.texts)]
    assert len(empty) == 1, texts
    assert not empty[0].lines and not empty[0].collections and list(empty[0].get_yticks()) == []
    assert not empty[0].containers                      # no bars


def test_policies_that_coincide_are_named_as_one_line():
    c = comparison(waits={"job-packing": 5.0, "locality": 5.0, "random": 9.0}, sweep_nodes=(2, 4))
    for name in ("jct_cdf.png", "queueing_cdf.png", "over_time.png", "queues.png", "sweep.png"):
        fig, caption = paint(name, c)
        assert labels(fig.axes[0]) == ["job-packing = locality (identical)", "random"], name
        assert "Identical, drawn as one line: job-packing = locality" in caption
        assert len(fig.axes[0].lines) <= 2 or name == "queues.png"


def test_writing_a_report_leaves_matplotlibs_settings_and_backend_alone(tmp_path):
    before_backend = matplotlib.get_backend()
    matplotlib.use("svg")                      # a notebook's or a script's own choice
    try:
        before = dict(matplotlib.rcParams)
        write_report(comparison(sweep_nodes=(2, 4)), tmp_path)
        after = dict(matplotlib.rcParams)
        assert matplotlib.get_backend() == "svg"
        assert {k: (before[k], after[k]) for k in before if before[k] != after[k]} == {}
    finally:
        matplotlib.use(before_backend)


def test_no_figure_is_left_open_in_pyplot(tmp_path):
    import matplotlib.pyplot as plt
    open_before = plt.get_fignums()
    write_report(comparison(), tmp_path)
    assert plt.get_fignums() == open_before


def test_the_identical_grouping_compares_every_array():
    a, b = np.array([1.0, np.nan]), np.array([1.0, 2.0])
    groups = plots.coinciding({"x": (a, b), "y": (a.copy(), b.copy()), "z": (a, b + 1)})
    assert [names for names, _ in groups] == [["x", "y"], ["z"]]


def test_a_queueing_cdf_of_mostly_unqueued_jobs_starts_its_share_axis_near_their_share():
    c = comparison(waits={"job-packing": 0.0, "locality": 0.0, "best-fit": 0.0, "random": 7.0})
    fig, caption = paint("queueing_cdf.png", c)
    assert fig.axes[0].get_ylim()[0] == 0.75
    assert "75.0 % of the jobs (every policy and seed together) did not wait: the share axis starts at 75 %" in caption
    jct, _ = paint("jct_cdf.png", c)
    assert jct.axes[0].get_ylim()[0] == 0
