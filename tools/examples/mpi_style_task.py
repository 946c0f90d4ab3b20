"""An MPI-style task of a gang: the program the example job runs under ``--live``.

Every task (rank) of the gang:

1. writes its part, ``part-<rank>.txt``, to the output directory;
2. ``barrier()`` — after it, every part of this attempt exists (rank 0 checks);
3. rank 0 writes an MPI host file (``hostfile``, OpenMPI's ``host slots=n`` form)
   from ``get_task_infos()``;
4. ``all_gather()`` its "rank@host" and checks that the list is every rank's, in rank
   order (each rank saves what it saw to ``gather-<rank>.json``);
5. ``barrier()`` again, and exits 0.

A coordinator error (the gang restarted: ``AttemptFailed``; a timeout ...) is printed
as ``mpi_style_task: <Class>: <message>`` and the task exits 1.

Run: ``python -m gangmaster.tools.examples.mpi_style_task --out DIR`` with the
GANGMASTER_* environment the AM sets (``gangmaster.am.barrier.task_context.task_env``).
``GANGMASTER_EXAMPLE_HOLD_S`` makes each rank pause that long before each step, so
a test can kill a task mid-run; ``GANGMASTER_EXAMPLE_STALL=RANK:SECONDS`` holds one
rank back before ``all_gather`` in attempt 1, so the others are surely waiting in it.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

from gangmaster.am.task import BarrierError, BarrierTaskContext

ENV_OUT = "GANGMASTER_OUTPUT_DIR"
ENV_HOLD = "GANGMASTER_EXAMPLE_HOLD_S"
#: "RANK:SECONDS": in attempt 1 only, that rank pauses this long before all_gather while
#: the others wait in it (a test kills the stalled rank and watches the waiters fail).
ENV_STALL = "GANGMASTER_EXAMPLE_STALL"


def hostfile_text(hosts: list[str]) -> str:
    """OpenMPI host file: one line per host, ``slots`` = ranks on it, in first-rank order."""
    counts = Counter(hosts)
    return "".join(f"{h} slots={counts[h]}\n" for h in dict.fromkeys(hosts))


def run(out: Path, hold_s: float) -> None:
    ctx = BarrierTaskContext.get()
    rank, n, attempt = ctx.task_index(), ctx.num_tasks(), ctx.attempt_number()
    out.mkdir(parents=True, exist_ok=True)
    infos = ctx.get_task_infos()
    me = f"{rank}@{infos[rank].host}"

    time.sleep(hold_s)
    _write(out / f"part-{rank}.txt", f"attempt {attempt} rank {me}\n")
    ctx.barrier()

    if rank == 0:
        for r in range(n):
            text = (out / f"part-{r}.txt").read_text()
            if not text.startswith(f"attempt {attempt} "):
                raise SystemExit(f"mpi_style_task: part-{r}.txt is not from attempt {attempt}: {text!r}")
        _write(out / "hostfile", hostfile_text([t.host for t in infos]))

    time.sleep(hold_s + _stall_s(rank, attempt))
    seen = ctx.all_gather(me)
    expected = [f"{t.index}@{t.host}" for t in infos]
    if seen != expected:
        raise SystemExit(f"mpi_style_task: rank {rank} gathered {seen}, expected {expected}")
    _write(out / f"gather-{rank}.json", json.dumps({"attempt": attempt, "seen": seen}))

    time.sleep(hold_s)
    ctx.barrier()


def _stall_s(rank: int, attempt: int) -> float:
    stall = os.environ.get(ENV_STALL, "")
    if not stall or attempt != 1:
        return 0.0
    stalled_rank, seconds = stall.split(":")
    return float(seconds) if int(stalled_rank) == rank else 0.0


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)  # atomic: another rank never reads half a file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gangmaster.tools.examples.mpi_style_task",
        description="An MPI-style gang task: write a part, barrier, rank 0 writes a host file, "
                    "all_gather and check, barrier, exit. Needs the GANGMASTER_* environment.")
    parser.add_argument("--out", default=os.environ.get(ENV_OUT),
                        help=f"output directory (default: ${ENV_OUT})")
    parser.add_argument("--hold-s", type=float, default=float(os.environ.get(ENV_HOLD) or 0),
                        help=f"pause before each step, seconds (default: ${ENV_HOLD} or 0)")
    args = parser.parse_args(argv)
    if not args.out:
        parser.error(f"no output directory: pass --out or set {ENV_OUT}")
    try:
        run(Path(args.out), args.hold_s)
    except BarrierError as err:
        print(f"mpi_style_task: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
