"""The report's figures, drawn with matplotlib (Agg, no display) when it is installed
(``pip install -e .[plots]``). Without it :func:`draw` draws nothing and says which
figures it skipped; every other report file is written all the same.

Each figure is a PNG in the report folder: JCT and queueing-delay CDFs per selector,
allocation / queue length / head-of-line fragmentation over time, mean JCT and queueing
per queue, mean JCT against capacity when the run swept it. In openb's fill mode, where
pods never leave and none waits, those give way to two figures against arrived GPU %:
unallocated GPU % and the FGD fragmentation measure (medians over the seeds, the
interquartile range shaded). Other figures show each selector's lowest seed; their
shaded band is the measurement window.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .comparison import Comparison
from .metrics import JobColumns

#: Points per line in the over-time figure: the step function is sampled on this grid
#: (a full Philly replay has ~10^5 steps; a plot cannot show more than its pixels).
TIME_GRID_POINTS = 2000
#: Points per CDF line (jobs beyond this are drawn at evenly spaced ranks).
CDF_POINTS = 2000
DPI = 100


@dataclass(frozen=True)
class Figure:
    name: str        # file name in the report folder
    title: str


#: openb fill mode's headline plot (the report pages show it first in fill mode)
FILL_FIGURE = "fill.png"
#: fill mode's fragmentation plot, against GPUs arrived as the headline
FILL_FRAG_FIGURE = "fill_frag.png"

FIGURES = (
    Figure("jct_cdf.png", "JCT, cumulative share of jobs"),
    Figure("queueing_cdf.png", "Queueing delay, cumulative share of jobs"),
    Figure("over_time.png", "Allocation, queue length and fragmentation (head-of-line; FGD measure) over time"),
    Figure("queues.png", "Mean JCT and queueing by queue"),
    Figure("sweep.png", "Mean JCT against capacity"),
    Figure(FILL_FIGURE, "Unallocated GPUs against GPUs arrived (fill mode)"),
    Figure(FILL_FRAG_FIGURE, "Fragmentation (FGD measure) against GPUs arrived (fill mode)"),
)
#: Figures of fill mode only (elsewhere they are not "skipped": there is nothing to draw).
FILL_ONLY = (FILL_FIGURE, FILL_FRAG_FIGURE)
#: Figures over time, JCT or queueing, which say nothing in fill mode: pods never leave and
#: none waits (a pod that does not fit at its arrival is dropped).
NOT_IN_FILL_MODE = ("jct_cdf.png", "queueing_cdf.png", "over_time.png", "queues.png")


# One colour and one line style per selector, each distinct for up to eight: selectors that
# decide alike draw the same line, and a dashed line over a solid one still shows both
# (only one dotted style, so two dotted lines cannot be told apart by colour alone).
LINE_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
LINE_STYLES = ("-", "--", ":", "-.", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (10, 3)), (0, (8, 2, 2, 2, 2, 2)))


def matplotlib_missing() -> str | None:
    """Why no figure can be drawn, or None when matplotlib is there."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[plots]')"
    return None


def draw(comparison: Comparison, folder: Path, document: dict[str, Any]) -> tuple[list[Figure], list[tuple[Figure, str]]]:
    """(figures written, (figure skipped, why)); ``document``: metrics.json's, whose
    figures the sweep plot shows (medians across seeds, as its table)."""
    missing = matplotlib_missing()
    if missing:
        return [], [(figure, missing) for figure in FIGURES if _why_not(figure, comparison) != ""]
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from cycler import cycler   # matplotlib's own dependency
    plt.rcParams.update({"figure.dpi": DPI, "font.size": 9, "axes.grid": True, "grid.alpha": 0.3,
                         "path.simplify": True,
                         "axes.prop_cycle": cycler(color=list(LINE_COLOURS)) + cycler(linestyle=list(LINE_STYLES))})
    painters = {"jct_cdf.png": _jct_cdf, "queueing_cdf.png": _queueing_cdf, "over_time.png": _over_time,
                "queues.png": _queues, "sweep.png": _sweep, FILL_FIGURE: _fill, FILL_FRAG_FIGURE: _fill_frag}
    written, skipped = [], []
    for figure in FIGURES:
        why = _why_not(figure, comparison)
        if why is not None:
            if why:
                skipped.append((figure, why))
            continue
        fig = painters[figure.name](plt, comparison, figure.title, document)
        fig.savefig(folder / figure.name, metadata={"Software": None})
        plt.close(fig)
        written.append(figure)
    return written, skipped


def _why_not(figure: Figure, comparison: Comparison) -> str | None:
    """Why ``figure`` is not drawn for this run: None when it is; "" when it does not belong
    to this kind of run at all (not worth a line: :data:`FILL_ONLY` elsewhere, the sweep in
    fill mode)."""
    if figure.name in FILL_ONLY and not comparison.is_fill:
        return ""
    if comparison.is_fill and figure.name in NOT_IN_FILL_MODE:
        return "fill mode: pods never leave and none waits, so there is no completion time, wait or time course to plot"
    if figure.name == "sweep.png" and not comparison.sweep:
        return "" if comparison.is_fill else "no --capacity-sweep in this run"
    if figure.name == FILL_FRAG_FIGURE and all(comparison.first_result(n).fragmentation is None
                                               for n in comparison.selectors):
        return "the replays measured no fragmentation"
    return None


def _window_jobs(comparison: Comparison, name: str) -> JobColumns:
    return comparison.columns(name).rows(comparison.window.first, comparison.window.last)


def _cdf(plt, comparison: Comparison, title: str, value, xlabel: str):
    fig, ax = plt.subplots(figsize=(7, 4))
    for name in comparison.selectors:
        values = value(_window_jobs(comparison, name))
        values = np.sort(values[~np.isnan(values)])
        if len(values):
            shares = np.arange(1, len(values) + 1) / len(values)
            if len(values) > CDF_POINTS:     # a plot cannot show more steps than its pixels
                keep = np.unique(np.linspace(0, len(values) - 1, CDF_POINTS).astype(int))
                values, shares = values[keep], shares[keep]
            ax.step(np.maximum(values, 1.0), shares, where="post", label=name)
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("share of jobs")
    ax.set_ylim(0, 1.01)
    ax.set_title(f"{title}\n{comparison.window.describe()}", fontsize=9)
    ax.legend(loc="lower right")
    fig.tight_layout()
    return fig


def _jct_cdf(plt, comparison, title, document):
    return _cdf(plt, comparison, title, lambda c: c.jct, "JCT, s (log; below 1 s drawn at 1 s)")


def _queueing_cdf(plt, comparison, title, document):
    return _cdf(plt, comparison, title, lambda c: c.queueing,
                "queueing delay, s (log; below 1 s, including 0, drawn at 1 s)")


def sample(t: np.ndarray, values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """A step function's value at each grid time (0 before its first step)."""
    index = np.searchsorted(t, grid, side="right") - 1
    return np.where(index >= 0, values[np.clip(index, 0, None)], 0)


def _over_time(plt, comparison, title, document):
    measured = any(comparison.first_result(n).fragmentation is not None for n in comparison.selectors)
    fig, axes = plt.subplots(4 if measured else 3, 1, figsize=(9, 9 if measured else 7), sharex=True)
    end = max(float(comparison.first_result(n).timeline.t[-1]) if len(comparison.first_result(n).timeline.t) else 0.0
              for n in comparison.selectors)
    grid = np.linspace(0.0, max(end, 1.0), TIME_GRID_POINTS)
    unit, per = ("days", 86400.0) if end > 3 * 86400 else ("hours", 3600.0)
    hours = grid / per
    for name in comparison.selectors:
        line = comparison.first_result(name).timeline
        capacity = line.capacity_gpus or 1
        axes[0].plot(hours, 100.0 * sample(line.t, line.allocated_gpus, grid) / capacity, label=name, lw=1)
        axes[1].plot(hours, sample(line.t, line.queue_length, grid), label=name, lw=1)
        axes[2].plot(hours, 100.0 * sample(line.t, line.hol_blocked_free_gpus, grid) / capacity, label=name, lw=1)
        frag = comparison.first_result(name).fragmentation
        if measured and frag is not None and len(frag.t):
            axes[3].plot(hours, 100.0 * sample(frag.t, frag.frag_milli, grid) / frag.capacity_milli, label=name, lw=1)
    for ax, label in zip(axes, ("allocated GPUs, % of capacity", "jobs queued", "HOL-blocked free GPUs, %",
                                "fragmented GPU (FGD), %")):
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.axvspan(comparison.window.start_s / per, comparison.window.end_s / per, color="0.85", zorder=0)
    axes[0].set_ylim(0, 105)
    axes[1].set_ylim(top=max(1.0, axes[1].get_ylim()[1]))
    for ax in axes[2:]:
        ax.set_ylim(top=max(1.0, ax.get_ylim()[1]))
    axes[0].legend(loc="upper right")
    axes[0].set_title(f"{title}\nsampled at {TIME_GRID_POINTS:,} points; shaded: measurement window", fontsize=9)
    axes[-1].set_xlabel(f"{unit} since the first submit")
    fig.tight_layout()
    return fig


def _queues(plt, comparison, title, document):
    queues = sorted(set(comparison.columns(comparison.selectors[0]).queue))
    fig, axes = plt.subplots(1, 2, figsize=(min(16.0, max(7.0, 1.0 + 0.6 * len(queues) * len(comparison.selectors))), 4))
    width = 0.8 / len(comparison.selectors)
    x = np.arange(len(queues))
    for k, name in enumerate(comparison.selectors):
        c = _window_jobs(comparison, name)
        jct, queueing = [], []
        for queue in queues:
            mine = c.queue == queue
            done, started = c.jct[mine & c.finished], c.queueing[mine & c.started]
            jct.append(float(np.mean(done)) if len(done) else 0.0)
            queueing.append(float(np.mean(started)) if len(started) else 0.0)
        axes[0].bar(x + k * width, jct, width, label=name)
        axes[1].bar(x + k * width, queueing, width, label=name)
    for ax, label in zip(axes, ("mean JCT, s", "mean queueing delay, s")):
        ax.set_xticks(x + 0.4 - width / 2, queues, rotation=45, ha="right")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0, top=max(1.0, ax.get_ylim()[1]))
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=len(comparison.selectors),
               frameon=False)
    fig.suptitle(f"{title} ({comparison.window.describe()})", fontsize=9)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


def _sweep(plt, comparison, title, document):
    fig, ax = plt.subplots(figsize=(7, 4))
    points = document["sweep"]["points"]
    for name in comparison.selectors:
        line = [(p["nodes"], p["selectors"][name]["jct_mean_s"]) for p in points
                if p["selectors"][name]["jct_mean_s"] is not None]
        if line:
            ax.plot(*zip(*line), marker="o", label=name)
    ax.set_xlabel("nodes")
    ax.set_ylabel("mean JCT, s" + (" (median across seeds)" if len(comparison.seeds) > 1 else ""))
    ax.set_yscale("log")
    ax.set_title(f"{title}\n{comparison.window.describe()}", fontsize=9)
    ax.legend()
    fig.tight_layout()
    return fig


#: Where the fill plot's right panel starts: the selectors differ only once the cluster is
#: nearly full, so that panel shows the tail at a scale the differences can be read at.
FILL_ZOOM_FROM_PCT = 80


def _fill(plt, comparison, title, document):
    fig, (whole, tail) = plt.subplots(1, 2, figsize=(10, 4.5), gridspec_kw={"width_ratios": [1, 1]})
    tail_values, ends = [], []
    for name in comparison.selectors:
        points = document["selectors"][name]["unallocated_gpu_pct_at_arrived"]
        arrived = np.array([int(p) for p in points], dtype=float)
        median, low, high = (np.array([points[p][k] for p in points], dtype=float) for k in ("median", "p25", "p75"))
        zoom = arrived >= FILL_ZOOM_FROM_PCT
        tail_values.extend((low[zoom] if len(comparison.seeds) > 1 else median[zoom]).tolist())
        tail_values.extend((high[zoom] if len(comparison.seeds) > 1 else median[zoom]).tolist())
        for ax in (whole, tail):
            line, = ax.plot(arrived, median, label=name, lw=1.2)
            if len(comparison.seeds) > 1:
                ax.fill_between(arrived, low, high, color=line.get_color(), alpha=0.2, lw=0)
        if len(arrived):
            ends.append((median[-1], name, line, int(arrived[-1])))
    for ax in (whole, tail):
        ax.set_xlabel("GPUs arrived (asked by the pods so far), % of capacity")
        ax.grid(alpha=0.3)
    whole.set_ylabel("GPUs unallocated, % of capacity")
    whole.set_ylim(0, 101)
    last = max((end[3] for end in ends), default=None)   # the axes end at the last arrived %, not past it
    whole.set_xlim(0, last)
    tail.set_xlim(FILL_ZOOM_FROM_PCT, max(last, FILL_ZOOM_FROM_PCT + 1) if last else None)
    if tail_values:
        low_y, high_y = min(tail_values), max(tail_values)
        margin = max(0.5, (high_y - low_y) * 0.15)
        tail.set_ylim(max(0.0, low_y - margin), high_y + margin)
    tail.set_title(f"from {FILL_ZOOM_FROM_PCT} % arrived (zoomed)", fontsize=9)
    seeds = comparison.seeds
    band = f"median over {len(seeds)} seeds, 25th-75th percentile shaded" if len(seeds) > 1 else f"seed {seeds[0]}"
    whole.set_title(f"{title}\n{comparison.cluster.capacity_gpus:,} GPUs; {band}", fontsize=9)
    if ends:   # the legend in the order the policies end, the fewest GPUs unallocated first
        ends.sort(key=lambda end: end[0])
        last = {at for *_, at in ends}
        tail.legend([line for _, _, line, _ in ends], [f"{name}  {value:.1f} %" for value, name, _, _ in ends],
                    loc="upper right", title_fontsize=8,
                    title=f"unallocated at {last.pop()} % arrived" if len(last) == 1 else "unallocated at the end")
    fig.tight_layout()
    return fig


def fragmentation_at_arrived(comparison: Comparison, name: str, seed: int, points: np.ndarray) -> np.ndarray:
    """The FGD measure, % of capacity, at each arrived % in ``points``: as sampled (the last
    sample at or before it) after the last pod whose arrival kept arrived at or below it,
    the instant the headline's unallocated % is read at; NaN before the first pod."""
    curve, frag = comparison.fill_curve(name, seed), comparison.results[name][seed].fragmentation
    submits = np.array([job.submit_s for job in comparison.fill_tables[seed].jobs], dtype=float)
    index = np.searchsorted(curve.arrived, points.astype(np.int64) * curve.capacity_milli, side="right") - 1
    measured = 100.0 * sample(frag.t, frag.frag_milli, submits[np.clip(index, 0, None)]) / frag.capacity_milli
    return np.where(index >= 0, measured, np.nan)


def _fill_frag(plt, comparison, title, document):
    fig, ax = plt.subplots(figsize=(8, 4))
    several = len(comparison.seeds) > 1
    for name in comparison.selectors:
        by_seed = comparison.results[name]
        if any(result.fragmentation is None for result in by_seed.values()):
            continue
        points = np.array([int(p) for p in document["selectors"][name]["unallocated_gpu_pct_at_arrived"]])
        frag = np.array([fragmentation_at_arrived(comparison, name, seed, points) for seed in sorted(by_seed)])
        line, = ax.plot(points, np.median(frag, axis=0), label=name, lw=1.2)
        if several:
            ax.fill_between(points, *np.percentile(frag, [25, 75], axis=0), color=line.get_color(), alpha=0.2, lw=0)
    ax.set_xlabel("GPUs arrived (asked by the pods so far), % of capacity")
    ax.set_ylabel("fragmented GPU (FGD measure), % of capacity")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    seeds = comparison.seeds
    band = f"median over {len(seeds)} seeds, 25th-75th percentile shaded" if several else f"seed {seeds[0]}"
    ax.set_title(f"{title}\nidle GPU capacity that typical pod shapes cannot use; {band}", fontsize=9)
    ax.legend(loc="best")
    fig.tight_layout()
    return fig
