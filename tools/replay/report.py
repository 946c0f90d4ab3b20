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
- the figures (:mod:`.plots`, when matplotlib is installed), each a PNG and a PDF,
  ``report.html`` and ``report.md`` (:mod:`.pages`), which caption each figure.

Same inputs, same files, byte for byte, except the wall-time figures (``wall_s`` and
``cost`` in metrics.json, and the summary tables' "wall" column that shows them).

**One run's report, whole or recognisably not.** :func:`report_folder` checks the folder
(makes it, and makes and removes a folder in it) before anything is replayed, so a folder the
report cannot go to is refused before the work, not after. The files are written into a
hidden folder inside it (``.report-partial-*``: whatever a kill leaves there is plainly not
a report) and then moved into place one by one, :data:`INCOMPLETE` standing in the folder
from before the first move until after the last, with SIGINT held off for those moves and
the folder locked against another run's moves. The report's own files (:data:`REPORT_FILES`)
of an earlier run that this one does not write (a ``sweep.png`` of a run with
``--capacity-sweep``) are removed with them; the user's other files are left alone.

**What an earlier run left.** A hidden folder's name holds its writer's process id
(``.report-partial-PID-*``); one whose process is gone (a run killed with SIGKILL, or the
machine stopped) is removed by the next run, which says so (:attr:`ReportFiles.stale_removed`).
An :data:`INCOMPLETE` left by an earlier run is replaced like the rest, and the next run
says the report it replaced was incomplete (:attr:`ReportFiles.earlier_incomplete`).
"""
from __future__ import annotations

import csv
import fcntl
import json
import os
import shutil
import signal
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from gangmaster.conf.fields import ConfigError

from . import pages, plots
from .comparison import Comparison, metrics_document

JOBS_COLUMNS = ("selector", "seed", "job_id", "queue", "submit_s", "start_s", "end_s", "duration_s", "jct_s",
                "queue_s", "gpus", "instances", "nodes", "racks", "consolidated", "outcome", "hosts")
FRAGMENTATION_COLUMNS = ("selector", "seed", "t_s", "frag_milli", "idle_milli", "capacity_milli")
TIMELINE_COLUMNS = ("selector", "seed", "t_s", "allocated_gpus", "capacity_gpus", "queue_length", "pending_gpus",
                    "hol_blocked_free_gpus")

#: Stands in the report folder while its files are being replaced: what is there is then a
#: mix of two runs, or part of one.
INCOMPLETE = "INCOMPLETE"
#: Every file a report may hold; those of an earlier report that a run does not write are
#: removed when it writes its own.
REPORT_FILES = ("metrics.json", "jobs.csv", "timeline.csv", "fragmentation.csv",
                *(name for f in plots.FIGURES for name in f.files), "report.html", "report.md", INCOMPLETE)
#: The hidden folder inside the report folder that a report is written into first.
_PARTIAL_PREFIX = ".report-partial-"


@dataclass(frozen=True)
class ReportFiles:
    folder: Path
    written: tuple[str, ...]
    skipped_figures: tuple[tuple[str, str], ...]    # (file, why not)
    replaced: tuple[str, ...] = ()                  # files of an earlier report this one replaced
    removed: tuple[str, ...] = ()                   # files of an earlier report this one does not write
    earlier_incomplete: bool = False                # an earlier run's INCOMPLETE stood in the folder
    stale_removed: tuple[str, ...] = ()             # hidden folders of earlier runs whose process is gone


def report_folder(folder: str | Path) -> Path:
    """``folder``, made if need be, once a folder could be made in it: a ConfigError (exit 2)
    naming it otherwise. Called before the replay, so the work is not lost to a bad ``--report``."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(str(folder), "", "a folder for the report (it is a file)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(str(folder), "", f"a folder the report can be written to (cannot make it: "
                                           f"{exc.strerror})") from None
    try:
        os.rmdir(_partial_folder(folder))
    except OSError as exc:
        raise ConfigError(str(folder), "", f"a folder the report can be written to (cannot write in it: "
                                           f"{exc.strerror})") from None
    return folder


def _partial_folder(folder: Path) -> str:
    """A new hidden folder in ``folder``, named after this process (``.report-partial-PID-*``)."""
    return tempfile.mkdtemp(prefix=f"{_PARTIAL_PREFIX}{os.getpid()}-", dir=folder)


def _remove_stale_partials(folder: Path) -> tuple[str, ...]:
    """Remove the hidden folders of earlier runs whose process is gone; their names. One
    whose process is alive (another run writing now), or whose name holds no process id,
    is left alone."""
    removed = []
    for path in sorted(folder.glob(f"{_PARTIAL_PREFIX}*")):
        pid = path.name[len(_PARTIAL_PREFIX):].split("-")[0]
        if path.is_dir() and pid.isdigit() and int(pid) != os.getpid() and not _process_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path.name)
    return tuple(removed)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # alive, another user's
        return True
    return True


def write_report(comparison: Comparison, folder: str | Path, document: dict[str, Any] | None = None) -> ReportFiles:
    """Write the report into ``folder``: whole, or with :data:`INCOMPLETE` beside what a
    kill left (see the module's docstring)."""
    document = document or metrics_document(comparison)
    return write_folder(folder, lambda partial: _write_files(comparison, partial, document), REPORT_FILES)


def write_folder(folder: str | Path, write: Callable[[Path], tuple[tuple[str, ...], list]],
                 known_files: tuple[str, ...]) -> ReportFiles:
    """The one way a report folder is written (this one's and ``--workloads``' family report):
    ``write(partial)`` writes the files into a hidden folder and returns (their names, the
    figures not drawn with why), and they are moved in; ``known_files``: every file a report
    of this kind may hold, those of an earlier one it does not write removed."""
    folder = report_folder(folder)
    stale = _remove_stale_partials(folder)
    partial = Path(_partial_folder(folder))
    try:
        written, skipped = write(partial)
        replaced, removed, incomplete = _move_into_place(partial, folder, written, known_files)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return ReportFiles(folder, written, tuple((f.name, why) for f, why in skipped), replaced, removed,
                       incomplete, stale)


def _write_files(comparison: Comparison, folder: Path, document: dict[str, Any]):
    (folder / "metrics.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    write_jobs_csv(comparison, folder / "jobs.csv")
    write_timeline_csv(comparison, folder / "timeline.csv")
    measured = write_fragmentation_csv(comparison, folder / "fragmentation.csv")
    figures, skipped = plots.draw(comparison, folder, document)
    (folder / "report.html").write_text(pages.render_html(document, folder, figures, skipped), encoding="utf-8")
    (folder / "report.md").write_text(pages.render_markdown(document, figures, skipped), encoding="utf-8")
    written = ("metrics.json", "jobs.csv", "timeline.csv", *(("fragmentation.csv",) if measured else ()),
               *(name for f in figures for name in f.figure.files), "report.html", "report.md")
    return written, skipped


def _move_into_place(partial: Path, folder: Path, written: tuple[str, ...],
                     known_files: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    """Move the written files from ``partial`` into ``folder`` and remove the earlier
    report's files this one does not write; (files replaced, files removed, whether an
    earlier run's INCOMPLETE stood there)."""
    with _locked(folder), _sigint_held():
        earlier = tuple(name for name in known_files if name != INCOMPLETE and (folder / name).exists())
        marker = folder / INCOMPLETE
        incomplete = marker.exists()
        marker.write_text("gangmaster replay stopped while it moved a report's files into this folder: "
                          "they are part of one run, or a mix of two. Run it again.\n", encoding="utf-8")
        for name in written:
            os.replace(partial / name, folder / name)
        removed = tuple(name for name in earlier if name not in written)
        for name in removed:
            (folder / name).unlink()
        marker.unlink()
    return earlier, removed, incomplete


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Hold ``folder`` against another run's moves (an advisory lock on the folder itself)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@contextmanager
def _sigint_held() -> Iterator[None]:
    """SIGINT (Ctrl-C) held off until the block is done, then raised as KeyboardInterrupt:
    the moves take milliseconds, and one cut short would leave a mixed folder."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    before = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
    if caught:
        raise KeyboardInterrupt


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
