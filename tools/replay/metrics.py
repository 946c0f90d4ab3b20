"""REPLAY.md's metrics, from a :class:`~.engine.ReplayResult` and a measurement window.

**The measurement window.** A trace starts on an empty cluster and ends with the queue
draining, so neither end says how the policy behaves under the trace's load. By default
the first and last 10 % of jobs by submit order are dropped (``trim``); per-job figures
are over the jobs left, time-averaged figures over the time from the first to the last
of their submits. Every figure is printed beside its window (:meth:`Window.describe`).

Per job j (submit s, first start a, end e, trace duration d, gang size g GPUs):

- **JCT** e − s, over the window's jobs that finished; **queueing delay** a − s, over
  those that started; ``queued_share``: jobs with a > s.
- **slowdown** JCT / d; **bounded slowdown** JCT / max(d, 10 s).
- **gang wait**: last task start − first task start (0 when all start together).
- **GPU allocation**: allocated GPUs / capacity, time-averaged (a trace has no
  utilisation, so it is called allocation). **frag_hol**: free GPUs held back while a
  queue's head gang cannot be placed although its queue's free GPUs are at least its
  size, time-averaged, as a share of capacity.
- **frag_fgd_mean** (Weng et al.'s measure, :mod:`.workload`): the idle milli-GPU the
  workload's typical shapes cannot use, in expectation, sampled over the run and
  time-averaged, as a share of capacity; **frag_fgd_idle_share**: its time average over
  the idle milli-GPU's (the share of idle GPU capacity that is fragmented).
- **consolidated_share**: of the multi-GPU jobs that started, those on the fewest nodes
  possible (one node when g ≤ G, ⌈g/G⌉ otherwise; G: GPUs of the cluster's GPU nodes);
  ``one_rack_share``: of the same jobs, those within one rack.
- **wait by gang size** (``by_gang_size``: mean and longest queueing delay per size
  class), so that a class that starves shows; **reservation hold** (queue policy
  ``reserve``): the GPU-hours reserved nodes held free and idle for the gang they wait
  for, over the whole run, and how many reservations were planned (each pass plans its
  queue's again).
- **preempted** (only with ``--preemption on``): the gangs preempted over the whole run
  and the GPU-hours of work they lost (each victim's GPUs × the time from its start to its
  preemption's deadline: a simulated task does not checkpoint).
- Jobs that never started are counted (``unfinished``, ``never_fits``, ``failed``),
  never given a JCT.

With several seeds each number is the median across seeds, ``iqr`` gives the 25th and
75th percentiles of the top-level numbers, and ``by_seed`` each seed's own figures.

**Fill mode** (openb, the FGD paper's method; :func:`fill_curve`): pods arrive one at a
time, never leave, and a pod that cannot be placed at its arrival is dropped. After
pod k, *arrived* is the GPUs asked by pods 1..k and *allocated* the GPUs of those placed
(whole GPUs + milli/1000), both as % of the cluster's GPUs. The headline,
``unallocated_gpu_pct_at_arrived`` (:func:`unallocated_at_arrived`), is 100 − allocated %
at each integer arrived % p: the state after the last pod whose arrival kept arrived at
or below p % — its median and quartiles over the seeds. Per queue and gang size a fill
replay counts pods placed and dropped and GPUs asked and placed (:func:`fill_groups`).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, fields
from typing import Any, Sequence

import numpy as np

#: Share of jobs dropped at each end of the submit order by default.
DEFAULT_TRIM = 0.1
#: The floor of the bounded slowdown's denominator, seconds.
BOUNDED_SLOWDOWN_FLOOR_S = 10.0
#: Gang-size buckets (whole GPUs), as REPLAY.md reports them; "<1": a share of a GPU, or none (openb).
GANG_BUCKETS = (("<1", 0, 0), ("1", 1, 1), ("2-4", 2, 4), ("5-8", 5, 8), (">8", 9, math.inf))
#: Decimals kept in metrics.json: below a microsecond or a millionth is noise.
DECIMALS = 6


@dataclass(frozen=True)
class Window:
    """Jobs ``first`` .. ``last - 1`` of ``total`` in submit order, and the time from the
    first to the last of their submits."""

    first: int
    last: int
    total: int
    start_s: float
    end_s: float
    trim: float
    #: what chose ``trim`` ("--measure-trim 0.1, the default"; a preset's methodology), said
    #: beside the window wherever it is shown, since the figures differ with it
    set_by: str = ""

    @property
    def jobs(self) -> int:
        return self.last - self.first

    def describe(self) -> str:
        share = f"middle {100 * (1 - 2 * self.trim):g} %" if self.trim else "all"
        return (f"jobs {self.first + 1:,}..{self.last:,} of {self.total:,} by submit ({share}"
                + (f"; {self.set_by}" if self.set_by else "") + f"), t {self.start_s:,.0f}..{self.end_s:,.0f} s")

    def to_dict(self) -> dict[str, Any]:
        return {"trim": self.trim, "trim_set_by": self.set_by or None, "first_job": self.first + 1,
                "last_job": self.last, "jobs": self.jobs, "of": self.total, "start_s": _num(self.start_s),
                "end_s": _num(self.end_s), "text": self.describe()}


def measurement_window(submits: Sequence[float], trim: float = DEFAULT_TRIM, set_by: str = "") -> Window:
    """Drop ⌊n × trim⌋ jobs at each end of ``submits`` (sorted, as a job table is);
    ``set_by``: what chose the trim (:attr:`Window.set_by`)."""
    if not 0 <= trim < 0.5:
        raise ValueError(f"trim: expected a share 0 <= trim < 0.5, got {trim}")
    n = len(submits)
    cut = int(n * trim)
    first, last = cut, n - cut
    if first >= last:
        return Window(0, 0, n, 0.0, 0.0, trim, set_by)
    return Window(first, last, n, float(submits[first]), float(submits[last - 1]), trim, set_by)


# --------------------------------------------------------------------- per job

def consolidated(gpus: int, nodes: int, gpus_per_node: int) -> bool:
    """On the fewest nodes a gang of ``gpus`` GPUs can use."""
    return nodes == max(1, math.ceil(gpus / gpus_per_node))


def gang_bucket(gpus: int) -> str:
    return next(name for name, low, high in GANG_BUCKETS if low <= gpus <= high)


# --------------------------------------------------------------------- per run

@dataclass(frozen=True)
class JobColumns:
    """A replay's jobs as numpy columns (NaN where a job never started or ended), so that
    figures over 10^5 jobs are vector expressions, not Python loops."""

    submit: np.ndarray
    start: np.ndarray
    end: np.ndarray
    duration: np.ndarray
    gpus: np.ndarray
    nodes: np.ndarray
    racks: np.ndarray
    gang_wait: np.ndarray
    queue: np.ndarray          # str
    outcome: np.ndarray        # str

    @classmethod
    def of(cls, jobs) -> "JobColumns":
        """The columns of ``jobs``, JobOutcome values: a replay's own sequence of them carries
        its columns already (:class:`~.job_state.JobOutcomes`, made from the driver's), any
        other is read value by value."""
        columns = getattr(jobs, "columns", None)
        if columns is not None:
            return columns
        if not jobs:
            empty = np.array([], dtype=float)
            return cls(empty, empty, empty, empty, empty.astype(np.int64), empty.astype(np.int64),
                       empty.astype(np.int64), empty, empty.astype(object), empty.astype(object))
        nan = math.nan
        rows = [(j.submit_s, nan if j.start_s is None else j.start_s,
                 nan if j.end_s is None or j.start_s is None else j.end_s, j.duration_s, j.gpus, len(j.hosts),
                 len(j.racks), j.gang_wait_s, j.queue, j.outcome) for j in jobs]
        columns = list(zip(*rows))
        floats = [np.array(columns[i], dtype=float) for i in (0, 1, 2, 3)]
        ints = [np.array(columns[i], dtype=np.int64) for i in (4, 5, 6)]
        return cls(*floats, *ints, np.array(columns[7], dtype=float), np.array(columns[8], dtype=object),
                   np.array(columns[9], dtype=object))

    def rows(self, first: int, last: int) -> "JobColumns":
        """Jobs ``first`` .. ``last - 1`` (views, not copies)."""
        return JobColumns(*(getattr(self, f.name)[first:last] for f in fields(self)))

    @property
    def started(self) -> np.ndarray:
        return ~np.isnan(self.start)

    @property
    def finished(self) -> np.ndarray:
        return ~np.isnan(self.end)

    @property
    def jct(self) -> np.ndarray:
        """end - submit (NaN for jobs that did not finish)."""
        return self.end - self.submit

    @property
    def queueing(self) -> np.ndarray:
        """first start - submit (NaN for jobs that never started)."""
        return self.start - self.submit

    def consolidated(self, gpus_per_node: int) -> np.ndarray:
        """On the fewest nodes a gang of its GPUs can use (see :func:`consolidated`)."""
        return self.nodes == np.maximum(1, -(-self.gpus // gpus_per_node))


def selector_metrics(result, window: Window, gpus_per_node: int, columns: JobColumns | None = None) -> dict[str, Any]:
    """One replay's figures (the per-selector entry of metrics.json); ``columns``: its
    jobs' :class:`JobColumns` when the caller has them already."""
    c = (columns or JobColumns.of(result.jobs)).rows(window.first, window.last)
    done, started = c.finished, c.started
    jct, queueing = c.jct[done], c.queueing[started]
    durations = c.duration[done]
    multi = started & (c.gpus > 1)
    timeline = result.timeline
    capacity = timeline.capacity_gpus or 1
    outcomes = list(c.outcome)
    figures: dict[str, Any] = {
        "jobs": len(c.submit),
        "jct_mean_s": _mean(jct),
        "jct_p50_s": _percentile(jct, 50),
        "jct_p95_s": _percentile(jct, 95),
        "jct_p99_s": _percentile(jct, 99),
        "queue_mean_s": _mean(queueing),
        "queue_p95_s": _percentile(queueing, 95),
        "gpu_allocation_mean": _num(time_average(timeline.t, timeline.allocated_gpus, window) / capacity),
        "frag_hol_mean": _num(time_average(timeline.t, timeline.hol_blocked_free_gpus, window) / capacity),
        **fgd_fragmentation(result.fragmentation, window),
        "consolidated_share": _share(int(np.count_nonzero(c.consolidated(gpus_per_node)[multi])),
                                     int(np.count_nonzero(multi))),
        "by_queue": _groups(c, c.queue),
        "by_gang_size": _groups(c, np.array([gang_bucket(g) for g in c.gpus], dtype=object),
                                order=[name for name, *_ in GANG_BUCKETS]),
        "wall_s": round(result.wall_s, 3),
        "finished": int(np.count_nonzero(done)),
        "unfinished": outcomes.count("unfinished"),
        "never_fits": outcomes.count("never-fits"),
        "dropped": outcomes.count("dropped"),
        "failed": outcomes.count("failed"),
        "queued_share": _share(int(np.count_nonzero(queueing > 0)), len(queueing)),
        "gang_wait_mean_s": _mean(c.gang_wait[started]),
        "slowdown_mean": _mean(jct / durations) if len(jct) else None,
        "bounded_slowdown_mean": _mean(jct / np.maximum(durations, BOUNDED_SLOWDOWN_FLOOR_S)) if len(jct) else None,
        "makespan_s": _num(float(np.max(c.end[done])) - float(np.min(c.submit))) if len(jct) else None,
        "one_rack_share": _share(int(np.count_nonzero(c.racks[multi] == 1)), int(np.count_nonzero(multi))),
        "reservation_hold_gpu_h": _num(getattr(result, "reservation_hold_gpu_s", 0.0) / 3600),
        "reservation_plans": getattr(result, "reservations_planned", 0),
        "queue_length_mean": _num(time_average(timeline.t, timeline.queue_length, window)),
        "pending_gpus_mean": _num(time_average(timeline.t, timeline.pending_gpus, window)),
        **preemption_figures(result),
        "events": result.events,
        "select_calls": result.select_calls,
        "cost": {"select_s": round(result.select_s, 3),
                 "select_us_mean": round(1e6 * result.select_s / result.select_calls, 1)
                 if result.select_calls else None},
    }
    return figures


def preemption_figures(result) -> dict[str, Any]:
    """``preempted``: the gangs preempted and the GPU-hours they lost, over the whole run;
    nothing when the replay ran without preemption (its figures stay as they were)."""
    if not result.options.preemption:
        return {}
    return {"preempted": {"gangs": len(result.preemptions),
                          "lost_gpu_hours": round(sum(p.lost_gpu_hours for p in result.preemptions), DECIMALS)}}


#: Keys whose values are measured wall time: they differ from run to run, everything else
#: in metrics.json is the same for the same inputs.
TIMING_KEYS = ("wall_s", "cost")


def without_timing(figures: Any) -> Any:
    """``figures`` (any part of metrics.json) without the wall-time keys, for comparing runs."""
    if isinstance(figures, dict):
        return {k: without_timing(v) for k, v in figures.items() if k not in TIMING_KEYS}
    if isinstance(figures, list):
        return [without_timing(v) for v in figures]
    return figures


def fgd_fragmentation(series, window: Window) -> dict[str, float | None]:
    """The FGD measure's figures over the window (None when the replay measured none)."""
    if series is None or not len(series.t):
        return {"frag_fgd_mean": None, "frag_fgd_idle_share": None}
    frag = time_average(series.t, series.frag_milli, window)
    idle = time_average(series.t, series.idle_milli, window)
    return {"frag_fgd_mean": _num(frag / series.capacity_milli) if series.capacity_milli else None,
            "frag_fgd_idle_share": _num(frag / idle) if idle > 0 else None}


def time_average(t: np.ndarray, values: np.ndarray, window: Window) -> float:
    """The mean of a step function (``values[i]`` from ``t[i]`` to ``t[i+1]``, the last
    held on; 0 before ``t[0]``) over [window.start_s, window.end_s]; over an empty
    interval, its value at that instant."""
    t0, t1 = window.start_s, window.end_s
    if len(t) == 0:
        return 0.0
    if t1 <= t0:
        i = int(np.searchsorted(t, t0, side="right")) - 1
        return float(values[i]) if i >= 0 else 0.0
    ends = np.append(t[1:], np.inf)
    overlap = np.clip(np.minimum(ends, t1) - np.maximum(t, t0), 0.0, None)
    return float(np.dot(overlap, values.astype(float)) / (t1 - t0))


def _groups(c: JobColumns, keys: np.ndarray, order: list[str] | None = None) -> dict[str, dict[str, Any]]:
    names = [name for name in order if name in set(keys)] if order else sorted(set(keys))
    out = {}
    jct, queueing = c.jct, c.queueing
    for name in names:
        mine = keys == name
        out[name] = {"jobs": int(np.count_nonzero(mine)),
                     "jct_mean_s": _mean(jct[mine & c.finished]),
                     "queue_mean_s": _mean(queueing[mine & c.started]),
                     "queue_max_s": _num(float(np.max(queueing[mine & c.started])))
                     if np.any(mine & c.started) else None}
    return out


def _num(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    rounded = round(float(value), DECIMALS)
    return rounded + 0.0   # no "-0.0" in the output


def _mean(values: np.ndarray) -> float | None:
    return _num(float(np.mean(values))) if len(values) else None


def _percentile(values: np.ndarray, q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default)."""
    return _num(float(np.percentile(values, q))) if len(values) else None


def _share(count: int, of: int) -> float | None:
    return _num(count / of) if of else None


# --------------------------------------------------------------------- fill mode

@dataclass(frozen=True)
class FillCurve:
    """One fill-mode replay, after each pod in arrival order: GPUs asked by the pods
    arrived so far and GPUs of those placed, in milli-GPU × 100 (so that "p % of
    capacity" is the exact integer comparison ``value >= p × capacity_milli``)."""

    arrived: np.ndarray      # int64, cumulative
    allocated: np.ndarray    # int64, cumulative
    capacity_milli: int

    def percent(self, values: np.ndarray) -> np.ndarray:
        return values / self.capacity_milli

    def at(self, percents: np.ndarray) -> np.ndarray:
        """Allocated % of capacity when ``percents`` % had arrived: after the last pod whose
        arrival kept arrived at or below each (0 before the first pod)."""
        index = np.searchsorted(self.arrived, np.asarray(percents, dtype=np.int64) * self.capacity_milli,
                                side="right") - 1
        return np.where(index >= 0, self.percent(self.allocated[np.clip(index, 0, None)]), 0.0)


def fill_curve(table, result, capacity_milli: int) -> FillCurve:
    """The curve of one fill replay: ``table`` its arrival sequence, ``result`` the replay
    of it (jobs in table order; a job placed at its arrival has a start)."""
    if len(table.jobs) != len(result.jobs):
        raise ValueError(f"fill_curve: {len(table.jobs)} pods in the table, {len(result.jobs)} in the result")
    asked = np.fromiter((job.gpu_milli for job in table.jobs), dtype=np.int64, count=len(table.jobs))
    placed = JobColumns.of(result.jobs).started
    return FillCurve(np.cumsum(asked * 100), np.cumsum(asked * 100 * placed), capacity_milli)


def fill_figures(curve: FillCurve, table, result) -> dict[str, Any]:
    """One fill replay's own figures: pods placed and dropped, GPUs arrived and allocated at
    the end, and :func:`fill_groups` by queue and by gang size."""
    jobs = JobColumns.of(result.jobs)
    return {"pods": len(jobs.outcome), "placed": int(np.count_nonzero(jobs.started)),
            "dropped": int(np.count_nonzero(jobs.outcome == "dropped")),
            "arrived_gpu_pct": _num(float(curve.percent(curve.arrived[-1]))) if len(curve.arrived) else 0.0,
            "allocated_gpu_pct": _num(float(curve.percent(curve.allocated[-1]))) if len(curve.allocated) else 0.0,
            **fill_groups(table, result)}


def fill_bucket(gpu_milli: int) -> str:
    """A pod's gang-size bucket in fill mode: "0" (no GPU) and "<1" (a share) apart, then
    :data:`GANG_BUCKETS` by whole GPUs."""
    if gpu_milli == 0:
        return "0"
    return gang_bucket(gpu_milli // 1000)


def fill_groups(table, result) -> dict[str, dict[str, dict[str, Any]]]:
    """What a fill replay measures per queue and per gang size (:func:`fill_bucket`), over
    every pod (pods never leave, so there is no JCT): ``pods``, ``placed``, ``dropped``,
    ``gpus_asked`` and ``gpus_placed`` (GPUs, shares as milli/1000) and
    ``gpus_placed_share`` (placed / asked; None when the group asks none)."""
    asked = np.fromiter((job.gpu_milli for job in table.jobs), dtype=np.int64, count=len(table.jobs))
    jobs = JobColumns.of(result.jobs)
    placed, dropped = jobs.started, jobs.outcome == "dropped"
    queues = np.array([job.queue for job in table.jobs], dtype=object)
    buckets = np.array([fill_bucket(int(m)) for m in asked], dtype=object)
    order = ["0"] + [name for name, *_ in GANG_BUCKETS]

    def groups(keys: np.ndarray, names: list[str]) -> dict[str, dict[str, Any]]:
        out = {}
        for name in (n for n in names if n in set(keys)):
            mine = keys == name
            gpus_asked, gpus_placed = int(asked[mine].sum()), int(asked[mine & placed].sum())
            out[name] = {"pods": int(np.count_nonzero(mine)), "placed": int(np.count_nonzero(mine & placed)),
                         "dropped": int(np.count_nonzero(mine & dropped)), "gpus_asked": _num(gpus_asked / 1000),
                         "gpus_placed": _num(gpus_placed / 1000), "gpus_placed_share": _share(gpus_placed, gpus_asked)}
        return out

    return {"by_queue": groups(queues, sorted(set(queues))), "by_gang_size": groups(buckets, order)}


def unallocated_at_arrived(curves: Sequence[FillCurve]) -> dict[str, dict[str, float | None]]:
    """``{"p": {"median", "p25", "p75"}}`` of the unallocated GPU % (100 − allocated %) at
    each integer arrived % p from 1 to the most every curve reached, over the curves
    (one per seed; numpy's linear-interpolation percentiles)."""
    if not curves:
        return {}
    top = min(int(c.arrived[-1] // c.capacity_milli) if len(c.arrived) else 0 for c in curves)
    points = np.arange(1, top + 1)
    unallocated = np.array([100.0 - c.at(points) for c in curves]).reshape(len(curves), len(points))
    median, low, high = (np.percentile(unallocated, q, axis=0) for q in (50, 25, 75))
    return {str(p): {"median": _num(float(m)), "p25": _num(float(a)), "p75": _num(float(b))}
            for p, m, a, b in zip(points.tolist(), median, low, high)}


# --------------------------------------------------------------------- seeds

def across_seeds(by_seed: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """One selector's figures over several seeds: medians (nested too), the
    interquartile range of the top-level numbers, and each seed's own figures. One seed:
    its figures as they are."""
    if len(by_seed) == 1:
        return next(iter(by_seed.values()))
    runs = [by_seed[seed] for seed in sorted(by_seed)]
    merged = _median(runs)
    merged["iqr"] = {key: [_num(float(np.percentile(vals, 25))), _num(float(np.percentile(vals, 75)))]
                     for key in runs[0]
                     if (vals := [r[key] for r in runs if isinstance(r.get(key), (int, float))])
                     and not isinstance(runs[0][key], bool)}
    merged["by_seed"] = {str(seed): by_seed[seed] for seed in sorted(by_seed)}
    return merged


def _median(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    if not present:
        return None
    if isinstance(present[0], dict):
        keys = list(dict.fromkeys(k for v in present for k in v))
        return {k: _median([v.get(k) for v in present]) for k in keys}
    if isinstance(present[0], (int, float)) and not isinstance(present[0], bool):
        middle = statistics.median(present)
        return middle if isinstance(middle, int) else _num(middle)
    return present[0]


#: What each headline figure means, in a line: the CLI's --help, the report pages and the
#: README say the same. (key, heading, unit, meaning)
METRIC_HELP = (
    ("jobs", "jobs", "", "jobs in the measurement window"),
    ("jct_mean_s", "JCT mean", "s", "job completion time, end - submit, mean over finished jobs"),
    ("jct_p50_s", "JCT p50", "s", "median JCT"),
    ("jct_p95_s", "JCT p95", "s", "95th percentile of JCT"),
    ("jct_p99_s", "JCT p99", "s", "99th percentile of JCT"),
    ("queue_mean_s", "queue mean", "s", "queueing delay, first start - submit, mean over started jobs"),
    ("queue_p95_s", "queue p95", "s", "95th percentile of the queueing delay"),
    ("gpu_allocation_mean", "allocation", "%", "allocated GPUs / capacity, time-averaged over the window"),
    ("frag_hol_mean", "frag (HOL)", "%", "free GPUs idle while a queue's head gang could not be placed "
                                         "although its queue had that many free, time-averaged, / capacity"),
    ("frag_fgd_mean", "frag (FGD)", "%", "idle GPU capacity the workload's typical shapes cannot use (Weng et al., "
                                         "ATC'23), sampled, time-averaged, / capacity"),
    ("frag_fgd_idle_share", "frag (FGD) / idle", "%", "the same, time-averaged, / idle GPU capacity time-averaged"),
    ("consolidated_share", "consolidated", "%", "multi-GPU jobs on the fewest nodes possible "
                                                "(one node when g <= G, else ceil(g/G))"),
    ("one_rack_share", "one rack", "%", "multi-GPU jobs within one rack"),
    ("slowdown_mean", "slowdown", "x", "JCT / trace duration, mean"),
    ("bounded_slowdown_mean", "bounded slowdown", "x", "JCT / max(duration, 10 s), mean"),
    ("queued_share", "queued", "%", "jobs that waited at all (start > submit)"),
    ("unfinished", "unfinished", "", "jobs in the window that never finished (still queued or running at the end)"),
    ("never_fits", "never fits", "", "jobs refused at submission: more than the cluster (or its queue) can ever hold"),
    ("dropped", "dropped", "", "jobs dropped by the drop queue policy: no room at their arrival (openb fill mode)"),
    ("reservation_hold_gpu_h", "reservation hold", "GPU-h", "reserved GPUs held free and idle for the gang they "
                                                           "wait for (queue policy reserve), whole run"),
    ("preempted.gangs", "preempted gangs", "", "whole gangs preempted for higher-priority work "
                                               "(--preemption on), whole run"),
    ("preempted.lost_gpu_hours", "preempted work", "GPU-h", "GPU-hours the preempted gangs had run when "
                                                           "preempted: work lost, whole run"),
    ("wall_s", "wall", "s", "wall time of the replay (varies run to run)"),
)
