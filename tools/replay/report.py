"""``--report DIR``: the report folder of one ``gangmaster replay``.

- ``metrics.json``: :func:`~.comparison.metrics_document`.
- ``jobs.csv``: one row per job, selector and seed: submit, start, end (s from the
  trace's origin; empty when the job never started or finished), duration, JCT,
  queueing delay, GPUs, instances, nodes and racks it used (counts, and the hosts),
  whether it was consolidated, its outcome.
- ``timeline.csv``: per selector and seed, the step function the replay recorded: each
  row holds from its ``t_s`` until the next row's.
- ``fragmentation.csv``: per selector and seed, the FGD paper's measure as sampled
  (:mod:`.workload`): idle milli-GPU the typical shapes cannot use, and idle milli-GPU
  (written when the replay measured it).
- the figures (:mod:`.plots`, when matplotlib is installed), ``report.html`` and
  ``report.md`` (:mod:`.pages`).

Same inputs, same files, byte for byte, except the wall-time figures (``wall_s`` and
``cost`` in metrics.json, and the summary tables' "wall" column that shows them).
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangmaster.conf.fields import ConfigError

from . import pages, plots
from .comparison import Comparison, metrics_document

JOBS_COLUMNS = ("selector", "seed", "job_id", "queue", "submit_s", "start_s", "end_s", "duration_s", "jct_s",
                "queue_s", "gpus", "instances", "nodes", "racks", "consolidated", "outcome", "hosts")
FRAGMENTATION_COLUMNS = ("selector", "seed", "t_s", "frag_milli", "idle_milli", "capacity_milli")
TIMELINE_COLUMNS = ("selector", "seed", "t_s", "allocated_gpus", "capacity_gpus", "queue_length", "pending_gpus",
                    "hol_blocked_free_gpus")


@dataclass(frozen=True)
class ReportFiles:
    folder: Path
    written: tuple[str, ...]
    skipped_figures: tuple[tuple[str, str], ...]    # (file, why not)


def write_report(comparison: Comparison, folder: str | Path, document: dict[str, Any] | None = None) -> ReportFiles:
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(str(folder), "", f"a folder the report can be written to ({exc.strerror})") from None
    if not folder.is_dir():
        raise ConfigError(str(folder), "", "a folder for the report")
    document = document or metrics_document(comparison)
    (folder / "metrics.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    write_jobs_csv(comparison, folder / "jobs.csv")
    write_timeline_csv(comparison, folder / "timeline.csv")
    measured = write_fragmentation_csv(comparison, folder / "fragmentation.csv")
    figures, skipped = plots.draw(comparison, folder, document)
    (folder / "report.html").write_text(pages.render_html(document, folder, figures, skipped), encoding="utf-8")
    (folder / "report.md").write_text(pages.render_markdown(document, figures, skipped), encoding="utf-8")
    written = ("metrics.json", "jobs.csv", "timeline.csv", *(("fragmentation.csv",) if measured else ()),
               *(f.name for f in figures), "report.html", "report.md")
    return ReportFiles(folder, written, tuple((f.name, why) for f, why in skipped))


def _seconds(values) -> list[str]:
    """Seconds with 3 decimals; empty for NaN (a job that never started or ended)."""
    return ["" if v != v else f"{v:.3f}" for v in values.tolist()]


def write_jobs_csv(comparison: Comparison, path: Path) -> None:
    gpn = comparison.gpus_per_node
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(JOBS_COLUMNS)
        for name, by_seed in comparison.results.items():
            for seed in sorted(by_seed):
                jobs = by_seed[seed].jobs
                c = comparison.columns(name, seed)
                together = c.consolidated(gpn)
                consolidated = ["" if not s else ("1" if k else "0") for s, k in zip(c.started.tolist(),
                                                                                     together.tolist())]
                out.writerows(zip([name] * len(jobs), [seed] * len(jobs), [j.job_id for j in jobs], c.queue,
                                  _seconds(c.submit), _seconds(c.start), _seconds(c.end), _seconds(c.duration),
                                  _seconds(c.jct), _seconds(c.queueing), c.gpus.tolist(),
                                  [j.instances for j in jobs], c.nodes.tolist(), c.racks.tolist(), consolidated,
                                  c.outcome, [" ".join(j.hosts) for j in jobs]))


def write_timeline_csv(comparison: Comparison, path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(TIMELINE_COLUMNS)
        for name, by_seed in comparison.results.items():
            for seed in sorted(by_seed):
                line = by_seed[seed].timeline
                capacity = line.capacity_gpus
                out.writerows((name, seed, f"{t:.3f}", a, capacity, q, p, h) for t, a, q, p, h in zip(
                    line.t.tolist(), line.allocated_gpus.tolist(), line.queue_length.tolist(),
                    line.pending_gpus.tolist(), line.hol_blocked_free_gpus.tolist()))


def write_fragmentation_csv(comparison: Comparison, path: Path) -> bool:
    """The sampled FGD measure of every replay that has one; False (nothing written) when none has."""
    rows = []
    for name, by_seed in comparison.results.items():
        for seed in sorted(by_seed):
            series = by_seed[seed].fragmentation
            if series is None:
                continue
            rows += [(name, seed, f"{t:.3f}", f"{f:.3f}", i, series.capacity_milli)
                     for t, f, i in zip(series.t.tolist(), series.frag_milli.tolist(), series.idle_milli.tolist())]
    if not rows:
        return False
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(FRAGMENTATION_COLUMNS)
        out.writerows(rows)
    return True
