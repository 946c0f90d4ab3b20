"""The gang task of the Slurm and YARN end-to-end tests (one script for both engines): it
records where it runs (gangmaster's host, the GPUs it was given, and what the engine says
of it: Slurm's node and job, YARN's NodeManager port and container), meets its gang at the
barrier, and records that it passed.

``GANG_TEST_KILL=RANK``: in attempt 1 that rank kills itself (SIGKILL) before the barrier.
``GANG_TEST_HOLD_S``: in attempt 1 every rank waits that long (or until the file ``release``
appears in the output folder) before the barrier.
"""
import json
import os
import signal
import sys
import time
from pathlib import Path

from gangmaster.am.task import BarrierError, BarrierTaskContext

#: what the record holds -> the variable each engine's task sees it in (absent: None)
ENGINE_VARIABLES = {"slurm_node": "SLURMD_NODENAME", "slurm_job": "SLURM_JOB_ID",
                    "nm_port": "NM_PORT", "container": "CONTAINER_ID", "gm_container": "GANGMASTER_CONTAINER_ID"}


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
              "pid": os.getpid(), **{key: os.environ.get(name) for key, name in ENGINE_VARIABLES.items()}}
    write(out / f"started-{attempt}-{rank}.json", record)
    if attempt == 1 and os.environ.get("GANG_TEST_KILL") == str(rank):
        os.kill(os.getpid(), signal.SIGKILL)
    if attempt == 1:
        deadline = time.monotonic() + float(os.environ.get("GANG_TEST_HOLD_S") or 0)
        while time.monotonic() < deadline and not (out / "release").exists():
            time.sleep(0.1)
    try:
        ctx.barrier()
    except BarrierError as err:
        print(f"gang_task: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        return 1
    write(out / f"passed-{attempt}-{rank}.json", record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
