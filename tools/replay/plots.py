"""The report's figures, drawn with matplotlib when it is installed (``pip install -e
.[plots]``). Without it :func:`draw` draws nothing and says which figures it skipped;
every other report file is written all the same.

Each figure is written twice: a PNG, which report.html embeds, and a PDF beside it for a
paper (LaTeX takes PDF as it is, where SVG needs a converter; fonts are embedded as
TrueType, ``pdf.fonttype`` 42, which venues that refuse Type 3 fonts accept). The figures:
JCT and queueing-delay CDFs per selector, allocation / queue length / head-of-line and FGD
fragmentation over time, mean JCT and queueing per queue, mean JCT against capacity when
the run swept it. In openb's fill mode, where pods never leave and none waits, those give
way to two figures against arrived GPU %: unallocated GPU % and the FGD measure.

What makes them publishable, and the tests hold them to:

- **No title in the image**: a paper sets its own caption. Each figure's title and what a
  reader needs to read it (the measurement window, the seeds, what is left out) is the
  caption under it in report.html and report.md (:attr:`Drawn.caption`).
- **The spread over seeds is drawn**: with several seeds a line is the median over them
  and the band around it the 25th-75th percentile (bars: whiskers).
- **Axes fit the data**: a logarithmic axis only where the values span a decade or more
  (:data:`LOG_FROM_DECADES`); the over-time figure spans the trace's submits, not the days
  the cluster then takes to drain.
- **A panel with nothing to show says so** in words, not with an empty frame.
- **Policies that coincide are named as one line** ("job-packing = locality
  (identical)"), not drawn on top of each other where one hides the other.
- **matplotlib's global state is left alone**: figures are ``matplotlib.figure.Figure``
  objects (no pyplot, so a notebook's figures and backend are not touched), styled under
  ``matplotlib.rc_context``, which puts every setting back.
"""
from __future__ import annotations

import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .comparison import Comparison
from .metrics import JobColumns

#: Points per line in the over-time figure: the step function is sampled on this grid
#: (a full Philly replay has ~10^5 steps; a plot cannot show more than its pixels).
TIME_GRID_POINTS = 2000
#: Points per CDF line (jobs beyond this are drawn at evenly spaced ranks).
CDF_POINTS = 2000
DPI = 100
#: An axis is logarithmic only where its values span at least this many decades: a
#: 190-480 s range on a log axis reads as flat.
LOG_FROM_DECADES = 1.0
#: The vector twin of each PNG (see the module's docstring for why PDF).
VECTOR_SUFFIX = ".pdf"
#: What the figures are drawn under (inside ``rc_context``: never the caller's settings).
#: ``svg.hashsalt`` and the metadata below keep the files the same byte for byte.
STYLE = {"font.size": 9, "axes.grid": True, "grid.alpha": 0.3, "path.simplify": True, "pdf.fonttype": 42,
         "svg.hashsalt": "gangmaster"}
PDF_METADATA = {"Creator": None, "Producer": None, "CreationDate": None}
#: The band's opacity around a median line.
BAND_ALPHA = 0.2


@dataclass(frozen=True)
class Figure:
    name: str        # the PNG's file name in the report folder
    title: str

    @property
    def vector(self) -> str:
        """The PDF's file name."""
        return self.name.rsplit(".", 1)[0] + VECTOR_SUFFIX

    @property
    def files(self) -> tuple[str, str]:
        return self.name, self.vector


@dataclass(frozen=True)
class Drawn:
    """A figure written, and its caption: the title and what a reader needs to read it."""
    figure: Figure
    caption: str

    @property
    def name(self) -> str:
        return self.figure.name


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
# decide alike are drawn as one line named for all of them (:func:`coinciding`), and a
# dashed line over a solid one still shows both where two differ only in part (only one
# dotted style, so two dotted lines cannot be told apart by colour alone).
LINE_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
LINE_STYLES = ("-", "--", ":", "-.", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (10, 3)), (0, (8, 2, 2, 2, 2, 2)))


def matplotlib_missing() -> str | None:
    """Why no figure can be drawn, or None when matplotlib is there."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[plots]')"
    return None


def draw(comparison: Comparison, folder: Path, document: dict[str, Any]) -> tuple[list[Drawn], list[tuple[Figure, str]]]:
    """(figures written, (figure skipped, why)); ``document``: metrics.json's, whose
    figures the sweep and fill plots show (medians across seeds, as its tables)."""
    missing = matplotlib_missing()
    if missing:
        return [], [(figure, missing) for figure in FIGURES if _why_not(figure, comparison) != ""]
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    written, skipped = [], []
    for figure in FIGURES:
        why = _why_not(figure, comparison)
        if why is not None:
            if why:
                skipped.append((figure, why))
            continue
        with matplotlib.rc_context(STYLE):
            fig, notes = PAINTERS[figure.name](comparison, document)
            FigureCanvasAgg(fig)
            fig.savefig(folder / figure.name, metadata={"Software": None})
            fig.savefig(folder / figure.vector, metadata=PDF_METADATA)
        written.append(Drawn(figure, caption(figure.title, notes)))
    return written, skipped


def paint(name: str, comparison: Comparison, document: dict[str, Any]):
    """(the matplotlib figure, its caption's notes) of figure ``name``, unsaved: what
    :func:`draw` writes, for a test to read back."""
    import matplotlib
    with matplotlib.rc_context(STYLE):
        return PAINTERS[name](comparison, document)


def caption(title: str, notes: list[str]) -> str:
    return ". ".join([title, *notes]) + "."


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


# ------------------------------------------------------------------ shared rules

def _new_figure(width: float, height: float):
    from matplotlib.figure import Figure as MplFigure
    return MplFigure(figsize=(width, height), dpi=DPI)


def coinciding(series: dict[str, tuple[np.ndarray, ...]]) -> list[tuple[list[str], tuple[np.ndarray, ...]]]:
    """The selectors grouped by what a figure draws for them: those whose arrays are all
    equal (NaN equal to NaN) share one group, in the order they were given."""
    groups: list[tuple[list[str], tuple[np.ndarray, ...]]] = []
    for name, arrays in series.items():
        for names, drawn in groups:
            if len(drawn) == len(arrays) and all(np.array_equal(np.asarray(a, dtype=float), np.asarray(b, dtype=float),
                                                                equal_nan=True) for a, b in zip(drawn, arrays)):
                names.append(name)
                break
        else:
            groups.append(([name], arrays))
    return groups


def group_label(names: list[str]) -> str:
    return names[0] if len(names) == 1 else " = ".join(names) + " (identical)"


def _identical_note(groups) -> list[str]:
    return [f"Identical, drawn as one line: {' = '.join(names)}" for names, _ in groups if len(names) > 1]


def _look(comparison: Comparison, name: str) -> dict[str, Any]:
    """A selector's colour and line style (by its place on the command line)."""
    k = comparison.selectors.index(name) % len(LINE_COLOURS)
    return {"color": LINE_COLOURS[k], "linestyle": LINE_STYLES[k]}


def log_worthy(values) -> bool:
    """Whether positive ``values`` span :data:`LOG_FROM_DECADES` decades or more."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    return len(values) > 1 and np.log10(values.max() / values.min()) >= LOG_FROM_DECADES


def thousands(ax, axis: str = "y") -> None:
    """Plain numbers with separators on a linear axis (100,000, not 100000 or 1e5)."""
    from matplotlib.ticker import StrMethodFormatter
    getattr(ax, f"{axis}axis").set_major_formatter(StrMethodFormatter("{x:,.0f}"))


def say_empty(ax, text: str) -> None:
    """A panel with nothing to draw says so, in its middle, without ticks that measure nothing."""
    width = max(20, int(ax.get_position().width * ax.figure.get_figwidth() * 9))   # characters that fit
    ax.text(0.5, 0.5, textwrap.fill(text, width), transform=ax.transAxes, ha="center", va="center", fontsize=10,
            color="0.3")
    ax.set_yticks([])
    ax.grid(False)


def _seeds_note(comparison: Comparison, what: str = "A line is", spread: str = "shaded") -> str:
    seeds = comparison.seeds
    if len(seeds) == 1:
        return f"Seed {seeds[0]}"
    return f"{what} the median over {len(seeds)} seeds ({', '.join(map(str, seeds))}); {spread}: 25th-75th percentile"


def _window_note(comparison: Comparison) -> str:
    return f"Measurement window: {comparison.window.describe()}"


def _median_band(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median, 25th and 75th percentile down the seeds (rows)."""
    return tuple(np.percentile(rows, q, axis=0) for q in (50, 25, 75))   # type: ignore[return-value]


def _plot_band(ax, comparison, names, x, median, low, high, several: bool, step: bool = False, **kw):
    """One group's line (a step function when ``step``) in its first selector's look, named
    for all of them; with ``several`` seeds the band from ``low`` to ``high`` around it."""
    look = _look(comparison, names[0])
    where = {"where": "post"} if step else {}
    (ax.step if step else ax.plot)(x, median, label=group_label(names), **look, **where, **kw)
    if several:
        ax.fill_between(x, low, high, color=look["color"], alpha=BAND_ALPHA, lw=0, **({"step": "post"} if step else {}))


# ------------------------------------------------------------------ the figures

def _window_jobs(comparison: Comparison, name: str, seed: int | None = None) -> JobColumns:
    return comparison.columns(name, seed).rows(comparison.window.first, comparison.window.last)


#: Below this a CDF on a log axis draws a value at it (a queueing delay of 0 has no log).
CDF_LOG_FLOOR_S = 1.0
#: When at least this share of the jobs did not wait, the CDF's share axis starts near it.
ZOOM_FROM_SHARE = 0.5


def _cdf(comparison: Comparison, value, what: str, none: str, zero: str):
    """A CDF per selector of ``value`` (a job column) over the window's jobs; with several
    seeds the median share at each value and the band of the seeds' shares. ``none``: the
    panel's words when no job has a value, ``zero``: when every value is 0."""
    fig = _new_figure(7, 4)
    ax = fig.subplots()
    seeds = comparison.seeds
    values = {name: [np.sort(v[~np.isnan(v)]) for v in (value(_window_jobs(comparison, name, s)) for s in seeds
                                                       if s in comparison.results[name])]
              for name in comparison.selectors}
    pooled = np.concatenate([v for runs in values.values() for v in runs]) if values else np.array([])
    ax.set_ylabel("share of jobs")
    notes = [_window_note(comparison)]
    if not len(pooled) or not np.any(pooled > 0):
        say_empty(ax, none if not len(pooled) else zero)
        ax.set_xticks([])
        ax.set_xlabel(what)
        fig.tight_layout()
        said = none if not len(pooled) else zero
        return fig, notes + [said[0].upper() + said[1:]]
    log = log_worthy(pooled)
    floor = CDF_LOG_FLOOR_S if log else -np.inf
    series = {}
    for name, runs in values.items():
        runs = [np.maximum(v, floor) for v in runs if len(v)]
        if not runs:
            continue
        grid = np.unique(np.concatenate(runs))
        if len(grid) > CDF_POINTS:     # a plot cannot show more steps than its pixels
            grid = grid[np.unique(np.linspace(0, len(grid) - 1, CDF_POINTS).astype(int))]
        shares = np.array([np.searchsorted(v, grid, side="right") / len(v) for v in runs])
        series[name] = (grid, *_median_band(shares))
    groups = coinciding(series)
    for names, (grid, median, low, high) in groups:
        _plot_band(ax, comparison, names, grid, median, low, high, len(seeds) > 1, step=True)
    if log:
        ax.set_xscale("log")
        below = bool(np.any(pooled < CDF_LOG_FLOOR_S))
        ax.set_xlabel(f"{what} (log" + (f"; below {CDF_LOG_FLOOR_S:g} s drawn at {CDF_LOG_FLOOR_S:g} s)" if below else ")"))
    else:
        ax.set_xlabel(what)
        thousands(ax, "x")
    # Most jobs at 0 (no wait): the share axis starts near that share, or the rest is a sliver.
    at_zero = float(np.mean(pooled == 0))
    bottom = np.floor(at_zero * 20) / 20 if at_zero >= ZOOM_FROM_SHARE else 0.0
    ax.set_ylim(bottom, 1.0 + (1.0 - bottom) * 0.01)
    if bottom:
        notes.append(f"{100 * at_zero:.1f} % of the jobs (every policy and seed together) did not wait: "
                     f"the share axis starts at {100 * bottom:.0f} %")
    ax.legend(loc="lower right")
    fig.tight_layout()
    return fig, notes + [_seeds_note(comparison)] + _identical_note(groups)


def _jct_cdf(comparison, document):
    return _cdf(comparison, lambda c: c.jct, "JCT, s", "no job in the measurement window finished",
                "every JCT in the measurement window is 0 s, for every policy")


def _queueing_cdf(comparison, document):
    return _cdf(comparison, lambda c: c.queueing, "queueing delay, s", "no job in the measurement window started",
                "no job in the measurement window waited: every queueing delay is 0 s, for every policy")


def sample(t: np.ndarray, values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """A step function's value at each grid time (0 before its first step)."""
    index = np.searchsorted(t, grid, side="right") - 1
    return np.where(index >= 0, values[np.clip(index, 0, None)], 0)


#: The over-time panels: (label, what an all-zero panel says).
OVER_TIME_PANELS = (("allocated GPUs, % of capacity", "no GPU allocated at any time"),
                    ("jobs queued", "no job queued at any time, for any policy"),
                    ("HOL-blocked free GPUs, %", "no free GPU held back behind a queue's head, for any policy"),
                    ("fragmented GPU (FGD), %", "no fragmented GPU at any time, for any policy"))


def time_unit(span_s: float) -> tuple[str, float]:
    """The unit an axis of ``span_s`` seconds reads best in."""
    if span_s > 3 * 86400:
        return "days", 86400.0
    if span_s > 2 * 3600:
        return "hours", 3600.0
    return "minutes", 60.0


def _over_time(comparison, document):
    names, seeds = comparison.selectors, comparison.seeds
    measured = any(comparison.first_result(n).fragmentation is not None for n in names)
    panels = OVER_TIME_PANELS[:4 if measured else 3]
    # The x axis spans the submits (the trace's window), not the drain after the last one.
    last_submit = max((float(np.nanmax(c.submit)) for n in names if len((c := comparison.columns(n)).submit)),
                      default=0.0)
    drained = max((float(r.timeline.t[-1]) for n in names for r in comparison.results[n].values()
                   if len(r.timeline.t)), default=0.0)
    end = max(last_submit, comparison.window.end_s, 1.0)
    unit, per = time_unit(end)
    grid = np.linspace(0.0, end, TIME_GRID_POINTS)
    series = {}
    for name in names:
        per_seed = []
        for seed in sorted(comparison.results[name]):
            result = comparison.results[name][seed]
            line, frag = result.timeline, result.fragmentation
            capacity = line.capacity_gpus or 1
            rows = [100.0 * sample(line.t, line.allocated_gpus, grid) / capacity,
                    sample(line.t, line.queue_length, grid).astype(float),
                    100.0 * sample(line.t, line.hol_blocked_free_gpus, grid) / capacity]
            if measured:
                rows.append(100.0 * sample(frag.t, frag.frag_milli, grid) / frag.capacity_milli
                            if frag is not None and len(frag.t) else np.full(len(grid), np.nan))
            per_seed.append(rows)
        series[name] = _median_band(np.array(per_seed))     # each (panel, time), down the seeds
    groups = coinciding(series)
    fig = _new_figure(9, 9 if measured else 7)
    axes = fig.subplots(len(panels), 1, sharex=True)
    x = grid / per
    whole_span = comparison.window.start_s <= 0.01 * end and comparison.window.end_s >= 0.99 * end
    for k, (ax, (label, empty)) in enumerate(zip(axes, panels)):
        ax.set_ylabel(label)
        if not whole_span:
            ax.axvspan(comparison.window.start_s / per, comparison.window.end_s / per, color="0.9", zorder=0)
        highest = max((np.nanmax(high[k]) if np.any(np.isfinite(high[k])) else 0.0 for _, (_, _, high) in groups),
                      default=0.0)
        if highest <= 0:
            say_empty(ax, empty)
            continue
        for names_, (median, low, high) in groups:
            _plot_band(ax, comparison, names_, x, median[k], low[k], high[k], len(seeds) > 1, lw=1)
        ax.set_ylim(0, 105 if k == 0 else highest * 1.05)
    axes[0].set_xlim(0, end / per)
    axes[0].legend(loc="upper right")
    axes[-1].set_xlabel(f"{unit} since the first submit")
    fig.tight_layout()
    notes = [f"From the first submit to the last ({end / per:,.1f} {unit})"
             + (f"; the cluster then drains until {drained / per:,.1f} {unit}, not drawn" if drained > end * 1.01 else ""),
             f"Sampled at {TIME_GRID_POINTS:,} points; "
             + ("the measurement window is the whole span" if whole_span else "shaded grey: the measurement window")
             + f" ({comparison.window.describe()})", _seeds_note(comparison, spread="shaded in colour")]
    return fig, notes + _identical_note(groups)


def _queues(comparison, document):
    names, seeds = comparison.selectors, comparison.seeds
    queues = sorted(set(comparison.columns(names[0]).queue))
    series = {}
    for name in names:
        per_seed = []
        for seed in sorted(comparison.results[name]):
            c = _window_jobs(comparison, name, seed)
            jct, queueing = [], []
            for queue in queues:
                mine = c.queue == queue
                done, started = c.jct[mine & c.finished], c.queueing[mine & c.started]
                jct.append(float(np.mean(done)) if len(done) else np.nan)
                queueing.append(float(np.mean(started)) if len(started) else np.nan)
            per_seed.append([jct, queueing])
        with warnings.catch_warnings():   # a queue none of whose jobs finished in any seed: NaN, no bar
            warnings.simplefilter("ignore", RuntimeWarning)
            series[name] = tuple(np.nanpercentile(np.array(per_seed, dtype=float), q, axis=0) for q in (50, 25, 75))
    groups = coinciding(series)
    fig = _new_figure(min(16.0, max(7.0, 1.0 + 0.6 * len(queues) * len(groups))), 4)
    axes = fig.subplots(1, 2)
    width = 0.8 / len(groups)
    x = np.arange(len(queues))
    several = len(seeds) > 1
    for k, (ax, label, empty) in enumerate(zip(axes, ("mean JCT, s", "mean queueing delay, s"),
                                               ("no job in the window finished", "no job in the window waited, "
                                                "in any queue, for any policy"))):
        ax.set_ylabel(label)
        ax.set_xticks(x + 0.4 - width / 2, queues, rotation=45, ha="right")
        if not any(np.nanmax(median[k], initial=0.0) > 0 for _, (median, _, _) in groups):
            say_empty(ax, empty)
            ax.set_xticks([])
            continue
        for j, (names_, (median, low, high)) in enumerate(groups):
            heights = np.nan_to_num(median[k])
            errors = np.array([heights - np.nan_to_num(low[k]), np.nan_to_num(high[k]) - heights]) if several else None
            ax.bar(x + j * width, heights, width, yerr=errors, capsize=2, label=group_label(names_),
                   color=_look(comparison, names_[0])["color"], error_kw={"lw": 0.8})
        ax.set_ylim(bottom=0)
        thousands(ax)
    handles = [h for ax in axes for h in [ax.get_legend_handles_labels()] if h[0]]
    if handles:
        fig.legend(*handles[0], loc="lower center", ncol=len(groups), frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    notes = [_window_note(comparison), "A queue without a finished (started) job has no bar",
             _seeds_note(comparison, "A bar is", "whiskers")]
    return fig, notes + _identical_note(groups)


def _sweep(comparison, document):
    points = document["sweep"]["points"]
    several = len(comparison.seeds) > 1
    series = {}
    for name in comparison.selectors:
        kept = [p for p in points if p["selectors"][name]["jct_mean_s"] is not None]
        if not kept:
            continue
        spread = [p["selectors"][name].get("iqr", {}).get("jct_mean_s") or [p["selectors"][name]["jct_mean_s"]] * 2
                  for p in kept]
        series[name] = (np.array([p["nodes"] for p in kept], dtype=float),
                        np.array([p["selectors"][name]["jct_mean_s"] for p in kept], dtype=float),
                        np.array([s[0] for s in spread], dtype=float), np.array([s[1] for s in spread], dtype=float))
    fig = _new_figure(7, 4)
    ax = fig.subplots()
    ax.set_xlabel("nodes")
    ax.set_ylabel("mean JCT, s" + (" (median across seeds)" if several else ""))
    notes = [_window_note(comparison)]
    if not series:
        say_empty(ax, "no job finished at any capacity of the sweep")
        return fig, notes + ["No job finished at any capacity of the sweep"]
    groups = coinciding(series)
    for names, (nodes, median, low, high) in groups:
        _plot_band(ax, comparison, names, nodes, median, low, high, several, marker="o")
    every = [a for _, arrays in groups for a in arrays[1:]]
    if log_worthy(np.concatenate(every)):
        ax.set_yscale("log")
    else:
        thousands(ax)
    if log_worthy(np.concatenate([nodes for _, (nodes, *_) in groups])):
        ax.set_xscale("log")
    ax.legend()
    fig.tight_layout()
    return fig, notes + [_seeds_note(comparison, "A point is")] + _identical_note(groups)


#: Where the fill plot's right panel starts: the selectors differ only once the cluster is
#: nearly full, so that panel shows the tail at a scale the differences can be read at.
FILL_ZOOM_FROM_PCT = 80


def _fill(comparison, document):
    several = len(comparison.seeds) > 1
    series = {}
    for name in comparison.selectors:
        points = document["selectors"][name]["unallocated_gpu_pct_at_arrived"]
        arrived = np.array([int(p) for p in points], dtype=float)
        series[name] = (arrived, *(np.array([points[p][k] for p in points], dtype=float)
                                   for k in ("median", "p25", "p75")))
    groups = coinciding(series)
    fig = _new_figure(10, 4.5)
    whole, tail = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1]})
    tail_values, ends = [], []
    for names, (arrived, median, low, high) in groups:
        zoom = arrived >= FILL_ZOOM_FROM_PCT
        tail_values.extend((low[zoom] if several else median[zoom]).tolist())
        tail_values.extend((high[zoom] if several else median[zoom]).tolist())
        for ax in (whole, tail):
            _plot_band(ax, comparison, names, arrived, median, low, high, several, lw=1.2)
        if len(arrived):
            ends.append((median[-1], group_label(names), tail.get_lines()[-1], int(arrived[-1])))
    for ax in (whole, tail):
        ax.set_xlabel("GPUs arrived (asked by the pods so far), % of capacity")
    whole.set_ylabel("GPUs unallocated, % of capacity")
    whole.set_ylim(0, 101)
    last = max((end[3] for end in ends), default=None)   # the axes end at the last arrived %, not past it
    whole.set_xlim(0, last)
    tail.set_xlim(FILL_ZOOM_FROM_PCT, max(last, FILL_ZOOM_FROM_PCT + 1) if last else None)
    if tail_values:
        low_y, high_y = min(tail_values), max(tail_values)
        margin = max(0.5, (high_y - low_y) * 0.15)
        tail.set_ylim(max(0.0, low_y - margin), high_y + margin)
    if ends:   # the legend in the order the policies end, the fewest GPUs unallocated first
        ends.sort(key=lambda end: end[0])
        at = {at for *_, at in ends}
        tail.legend([line for _, _, line, _ in ends], [f"{label}  {value:.1f} %" for value, label, _, _ in ends],
                    loc="upper right", title_fontsize=8,
                    title=f"unallocated at {at.pop()} % arrived" if len(at) == 1 else "unallocated at the end")
    fig.tight_layout()
    notes = [f"{comparison.cluster.capacity_gpus:,} GPUs", _seeds_note(comparison),
             f"Right: from {FILL_ZOOM_FROM_PCT} % arrived, zoomed"]
    return fig, notes + _identical_note(groups)


def fragmentation_at_arrived(comparison: Comparison, name: str, seed: int, points: np.ndarray) -> np.ndarray:
    """The FGD measure, % of capacity, at each arrived % in ``points``: as sampled (the last
    sample at or before it) after the last pod whose arrival kept arrived at or below it,
    the instant the headline's unallocated % is read at; NaN before the first pod."""
    curve, frag = comparison.fill_curve(name, seed), comparison.results[name][seed].fragmentation
    submits = np.array([job.submit_s for job in comparison.fill_tables[seed].jobs], dtype=float)
    index = np.searchsorted(curve.arrived, points.astype(np.int64) * curve.capacity_milli, side="right") - 1
    measured = 100.0 * sample(frag.t, frag.frag_milli, submits[np.clip(index, 0, None)]) / frag.capacity_milli
    return np.where(index >= 0, measured, np.nan)


def _fill_frag(comparison, document):
    several = len(comparison.seeds) > 1
    series = {}
    for name in comparison.selectors:
        by_seed = comparison.results[name]
        if any(result.fragmentation is None for result in by_seed.values()):
            continue
        points = np.array([int(p) for p in document["selectors"][name]["unallocated_gpu_pct_at_arrived"]])
        frag = np.array([fragmentation_at_arrived(comparison, name, seed, points) for seed in sorted(by_seed)])
        series[name] = (points, *_median_band(frag))
    groups = coinciding(series)
    fig = _new_figure(8, 4)
    ax = fig.subplots()
    for names, (points, median, low, high) in groups:
        _plot_band(ax, comparison, names, points, median, low, high, several, lw=1.2)
    ax.set_xlabel("GPUs arrived (asked by the pods so far), % of capacity")
    ax.set_ylabel("fragmented GPU (FGD measure), % of capacity")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.legend(loc="best")
    fig.tight_layout()
    notes = ["Idle GPU capacity that typical pod shapes cannot use", _seeds_note(comparison)]
    return fig, notes + _identical_note(groups)


PAINTERS: dict[str, Callable] = {"jct_cdf.png": _jct_cdf, "queueing_cdf.png": _queueing_cdf,
                                 "over_time.png": _over_time, "queues.png": _queues, "sweep.png": _sweep,
                                 FILL_FIGURE: _fill, FILL_FRAG_FIGURE: _fill_frag}
