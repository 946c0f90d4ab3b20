"""``--report DIR``: the report folder of one ``gangmaster replay``.

- ``metrics.json``: :func:`~.comparison.metrics_document`.
- ``jobs.csv``: one row per job, selector and seed: submit, start, end (s from the
  trace's origin; empty when the job never started or finished), duration, JCT,
  queueing delay, GPUs, instances, nodes and racks it used (counts, and the hosts),
  whether it was consolidated, its outcome.
- ``timeline.csv``: per selector and seed, the step function the replay recorded: each
  row holds from its ``t_s`` until the next row's.
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
from .metrics import consolidated

JOBS_COLUMNS = ("selector", "seed", "job_id", "queue", "submit_s", "start_s", "end_s", "duration_s", "jct_s",
                "queue_s", "gpus", "instances", "nodes", "racks", "consolidated", "outcome", "hosts")
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
    figures, skipped = plots.draw(comparison, folder, document)
    (folder / "report.html").write_text(pages.render_html(document, folder, figures, skipped), encoding="utf-8")
    (folder / "report.md").write_text(pages.render_markdown(document, figures, skipped), encoding="utf-8")
    written = ("metrics.json", "jobs.csv", "timeline.csv", *(f.name for f in figures), "report.html", "report.md")
    return ReportFiles(folder, written, tuple((f.name, why) for f, why in skipped))


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def write_jobs_csv(comparison: Comparison, path: Path) -> None:
    gpn = comparison.gpus_per_node
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(JOBS_COLUMNS)
        for name, by_seed in comparison.results.items():
            for seed in sorted(by_seed):
                out.writerows(_job_row(name, seed, job, gpn) for job in by_seed[seed].jobs)


def _job_row(selector: str, seed: int, job, gpus_per_node: int) -> tuple:
    started = job.start_s is not None
    finished = started and job.end_s is not None
    return (selector, seed, job.job_id, job.queue, _seconds(job.submit_s), _seconds(job.start_s),
            _seconds(job.end_s), _seconds(job.duration_s), _seconds(job.end_s - job.submit_s) if finished else "",
            _seconds(job.start_s - job.submit_s) if started else "", job.gpus, job.instances, len(job.hosts),
            len(job.racks), (1 if consolidated(job.gpus, len(job.hosts), gpus_per_node) else 0) if started else "",
            job.outcome, " ".join(job.hosts))


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
