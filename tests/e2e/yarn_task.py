"""A gang task for the YARN end-to-end tests: it records where it runs (gangmaster's host,
the GPUs it was given, and the NodeManager YARN ran it on: ``NM_PORT``, ``CONTAINER_ID``),
meets its gang at the barrier, and records that it passed.

``YARN_TEST_KILL=RANK``: in attempt 1 that rank kills itself (SIGKILL) before the barrier.
``YARN_TEST_HOLD_S``: in attempt 1 every rank waits that long (or until the file ``release``
appears in the output folder) before the barrier.
"""
import json
import os
import signal
import sys
import time
from pathlib import Path

from gangmaster.am.task import BarrierError, BarrierTaskContext


def write(path: Path, record: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    tmp.replace(path)


def main() -> int:
    out = Path(os.environ["GANGMASTER_OUTPUT_DIR"])
    out.mkdir(parents=True, exist_ok=True)
    ctx = BarrierTaskContext.get()
    rank, attempt = ctx.task_index(), ctx.attempt_number()
    record = {"rank": rank, "attempt": attempt, "host": os.environ.get("GANGMASTER_HOST"),
              "cuda": os.environ.get("CUDA_VISIBLE_DEVICES", ""), "gpus": os.environ.get("GANGMASTER_GPU_INDICES", ""),
              "nm_port": os.environ.get("NM_PORT"), "container": os.environ.get("CONTAINER_ID"),
              "gm_container": os.environ.get("GANGMASTER_CONTAINER_ID"), "pid": os.getpid()}
    write(out / f"started-{attempt}-{rank}.json", record)
    if attempt == 1 and os.environ.get("YARN_TEST_KILL") == str(rank):
        os.kill(os.getpid(), signal.SIGKILL)
    if attempt == 1:
        deadline = time.monotonic() + float(os.environ.get("YARN_TEST_HOLD_S") or 0)
        while time.monotonic() < deadline and not (out / "release").exists():
            time.sleep(0.1)
    try:
        ctx.barrier()
    except BarrierError as err:
        print(f"yarn_task: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        return 1
    write(out / f"passed-{attempt}-{rank}.json", record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
