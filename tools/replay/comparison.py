"""Everything one ``gangmaster replay`` ran, and its metrics.json document.

A :class:`Comparison` holds the job table, the cluster, the measurement window and every
replay's result, by selector and seed, plus the load sweep's points when one was asked
for. :func:`metrics_document` turns it into metrics.json's shape::

    {"selectors": {NAME: {"jobs", "jct_mean_s", "jct_p50_s", "jct_p95_s", "jct_p99_s",
                          "queue_mean_s", "queue_p95_s", "gpu_allocation_mean", "frag_hol_mean",
                          "frag_fgd_mean", "frag_fgd_idle_share", "consolidated_share", "by_queue": {Q: {"jobs", "jct_mean_s",
                          "queue_mean_s"}}, "by_gang_size": {...}, "wall_s", ...}},
     "run": {"input": {...sha256...}, "cluster", "window", "seeds", "tie_rules",
             "queue_policy", "heartbeat_s", "time_scale", "preemption" (with --preemption on),
             "version"},
     "sweep": {"kind": "capacity", "points": [...]}}     # only with --capacity-sweep; with several
                                                         # seeds each point's selector has "iqr" too

In openb's fill mode each selector's entry also has ``"fill"`` (pods, placed, dropped,
arrived and allocated GPU % at the end, and ``by_queue`` and ``by_gang_size`` of pods,
placed, dropped, GPUs asked and placed (:func:`~.metrics.fill_groups`); medians over
seeds, each seed's in ``by_seed``)
and the headline ``"unallocated_gpu_pct_at_arrived": {"1": {"median", "p25", "p75"},
..., "130": {...}}`` over the seeds (:func:`~.metrics.unallocated_at_arrived`), and
``run`` has ``"fill": {"inflate", "pods_by_seed", "capacity_gpus"}``.

Only ``wall_s`` and ``cost`` (measured wall time) differ between two runs of the same
inputs; :func:`~.metrics.without_timing` drops them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from gangmaster.selectors.selector import get_selector

from .clusters import ReplayCluster
from .engine import ReplayResult
from .metrics import (FillCurve, JobColumns, Window, across_seeds, fill_curve, fill_figures, selector_metrics,
                      unallocated_at_arrived)
from .trace import JobTable


@dataclass(frozen=True)
class SweepPoint:
    """One capacity of a load sweep: its cluster and each selector's results by seed."""

    nodes: int
    cluster: ReplayCluster
    results: dict[str, dict[int, ReplayResult]]


@dataclass
class Comparison:
    table: JobTable
    cluster: ReplayCluster
    window: Window
    results: dict[str, dict[int, ReplayResult]]      # selector -> seed -> result
    submit_window: str = ""                           # --window as given, or the preset's
    sweep: list[SweepPoint] = field(default_factory=list)
    #: openb fill mode: each seed's arrival sequence (what its replays replayed); empty otherwise
    fill_tables: dict[int, JobTable] = field(default_factory=dict)
    inflate: float | None = None
    reading: str = ""                                 # how the trace was read, when a reader must say (openb)
    _columns: dict[tuple[str, int], JobColumns] = field(default_factory=dict, repr=False, compare=False)

    def columns(self, selector: str, seed: int | None = None) -> JobColumns:
        """The jobs of one replay as columns (built once; the metrics, files and figures
        all read them). ``seed``: the lowest when not given."""
        seed = min(self.results[selector]) if seed is None else seed
        key = (selector, seed)
        if key not in self._columns:
            self._columns[key] = JobColumns.of(self.results[selector][seed].jobs)
        return self._columns[key]

    @property
    def selectors(self) -> list[str]:
        return list(self.results)

    @property
    def seeds(self) -> list[int]:
        return sorted({seed for by_seed in self.results.values() for seed in by_seed})

    @property
    def gpus_per_node(self) -> int:
        return self.cluster.gpu_node_shape().gpus

    @property
    def is_fill(self) -> bool:
        return bool(self.fill_tables)

    def fill_curve(self, selector: str, seed: int) -> FillCurve:
        return fill_curve(self.fill_tables[seed], self.results[selector][seed], 1000 * self.cluster.capacity_gpus)

    def first_result(self, selector: str) -> ReplayResult:
        """The result of the lowest seed: what the per-job files and plots show first."""
        by_seed = self.results[selector]
        return by_seed[min(by_seed)]

    def any_result(self) -> ReplayResult:
        return self.first_result(self.selectors[0])


def metrics_document(comparison: Comparison) -> dict[str, Any]:
    gpn = comparison.gpus_per_node
    selectors = {}
    for name, by_seed in comparison.results.items():
        figures = {seed: selector_metrics(result, comparison.window, gpn, comparison.columns(name, seed))
                   for seed, result in sorted(by_seed.items())}
        curves = []
        if comparison.is_fill:
            for seed, result in sorted(by_seed.items()):
                curves.append(comparison.fill_curve(name, seed))
                figures[seed]["fill"] = fill_figures(curves[-1], comparison.fill_tables[seed], result)
        selectors[name] = across_seeds(figures)
        if curves:
            selectors[name]["unallocated_gpu_pct_at_arrived"] = unallocated_at_arrived(curves)
    document: dict[str, Any] = {"selectors": selectors, "run": run_identity(comparison)}
    if comparison.sweep:
        document["sweep"] = {"kind": "capacity", "points": [_sweep_point(p, comparison.window) for p in comparison.sweep]}
    return document


def run_identity(comparison: Comparison) -> dict[str, Any]:
    table, cluster, options = comparison.table, comparison.cluster, comparison.any_result().options
    return {
        "input": {"source": table.source, "sha256": table.sha256, "format": table.format, "jobs": len(table),
                  "origin": table.origin.strftime("%Y-%m-%d %H:%M:%S") if table.origin else None,
                  "submit_window": comparison.submit_window or None,
                  **({"reading": comparison.reading} if comparison.reading else {})},
        "cluster": {"name": cluster.name, "nodes": len(cluster.specs), "gpus": cluster.capacity_gpus,
                    "gpus_per_node": comparison.gpus_per_node,
                    "isolated_queues": sorted(cluster.queue_hosts) if cluster.queue_hosts else None,
                    "source": cluster.source or None},
        "window": comparison.window.to_dict(),
        "seeds": comparison.seeds,
        "tie_rules": {name: declared_tie_rule(name, comparison.first_result(name).tie_rule,
                                              bool(comparison.first_result(name).options.tie_hosts))
                      for name in comparison.selectors},
        "queue_policy": options.queue_policy,
        **({"max_reservations": options.max_reservations, "cluster_reservations": options.cluster_reservations,
            "reserve_after_s": options.reserve_after_s} if options.queue_policy == "reserve" else {}),
        "heartbeat_s": options.heartbeat_s,
        "time_scale": options.time_scale,
        **({"preemption": {"grace_s": options.preemption_grace_s,
                           "queues": {name: {"priority": priority, "guaranteed_gpus": gpus}
                                      for name, priority, gpus in options.queue_priorities}}}
           if options.preemption else {}),
        "version": gangmaster_version(),
        **({"fill": {"inflate": comparison.inflate,
                     "pods_by_seed": {str(seed): len(t) for seed, t in sorted(comparison.fill_tables.items())},
                     "capacity_gpus": cluster.capacity_gpus}} if comparison.is_fill else {}),
    }


def declared_tie_rule(selector: str, replayed: str, given_order: bool = False) -> str:
    """The replay's tie rule, unless the strategy declares its own (``Selector.tie_rule``
    "node-name": exact ties to the smallest host name, as the FGD paper's scheduler) and
    the replay gave no order of its own (``given_order``: the FGD artifact's renamed nodes)."""
    if given_order or getattr(get_selector(selector), "tie_rule", "seeded") != "node-name":
        return replayed
    return (f"{selector}: equal keys to the smallest host name (the strategy's declared tie rule, as the FGD "
            "paper's scheduler); a gang's later instances prefer the job's hosts, then their racks")


def gangmaster_version() -> str:
    try:
        return metadata.version("gangmaster")
    except metadata.PackageNotFoundError:
        return "unknown"


def _sweep_point(point: SweepPoint, window: Window) -> dict[str, Any]:
    gpn = point.cluster.gpu_node_shape().gpus
    figures = {}
    for name, by_seed in point.results.items():
        merged = across_seeds({seed: selector_metrics(result, window, gpn) for seed, result in sorted(by_seed.items())})
        keys = ("jct_mean_s", "jct_p95_s", "queue_mean_s", "gpu_allocation_mean", "frag_hol_mean", "frag_fgd_mean",
                "unfinished")
        figures[name] = {key: merged[key] for key in keys}
        if "iqr" in merged:   # several seeds: the spread the sweep plot draws
            figures[name]["iqr"] = {key: merged["iqr"][key] for key in keys if key in merged["iqr"]}
    return {"nodes": point.nodes, "gpus": point.cluster.capacity_gpus, "selectors": figures}
