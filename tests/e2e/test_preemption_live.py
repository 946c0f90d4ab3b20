"""Preemption's grace period in a live run: the RM preempts a running job's gang, its AM
tells the task (SIGUSR1 and ``BarrierTaskContext.preemption_notice()``), the task writes its
checkpoint before the deadline and is killed only then (ended PREEMPTED), and the gang
restarts without spending a failure retry (the job allows one attempt)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gangmaster.am.spec.am_settings import AMSettings
from gangmaster.am.spec.jobspec import parse_job
from gangmaster.protocol.rm_protocol import ContainerState, ExitStatus
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.ports import PortRanges
from gangmaster.tools.job_runner import LiveRuns
from job_texts import one_role_job

GRACE_S = 2.0

#: Attempt 1 waits for the notice, then takes half a second to write its checkpoint (well inside
#: the grace), then runs on until the deadline ends it; attempt 2 finds the checkpoint and ends.
TASK = """
import os, signal, sys, time
from gangmaster.am.context import BarrierTaskContext
signalled = []
signal.signal(signal.SIGUSR1, lambda *_: signalled.append(time.time()))
ctx = BarrierTaskContext.get()
ckpt = sys.argv[1]
if ctx.attempt_number() > 1:
    sys.exit(0 if os.path.exists(ckpt) else 3)
open(ckpt + ".started", "w").close()
while ctx.preemption_notice() is None:
    time.sleep(0.05)
deadline = ctx.preemption_notice()
time.sleep(0.5)                                   # the checkpoint takes a while to write
with open(ckpt + ".tmp", "w") as f:
    f.write(f"signalled={bool(signalled)} left={deadline - time.time():.2f}\\n")
os.replace(ckpt + ".tmp", ckpt)
time.sleep(60)                                    # runs on: the deadline ends it
"""


@pytest.mark.slow
def test_a_task_that_checkpoints_on_the_notice_finishes_writing_before_it_is_killed(tmp_path: Path):
    script = tmp_path / "task.py"
    script.write_text(TASK)
    ckpt = tmp_path / "ckpt"
    job = parse_job(one_role_job("checkpointer", 1, command=f"{sys.executable} {script} {ckpt}",
                                 job_gangmaster="attempts: 1"))
    specs = [NodeSpec("n-000", "rack-a", frozenset(), "V100", None, 16384, 4.0, 1, PortRanges.parse("30000-30999"))]
    runs = LiveRuns(specs, tmp_path / "run", AMSettings(heartbeat_s=0.1))
    preempted = []

    def preempt_once_started() -> None:   # on the RM clock's thread, under its lock
        if not preempted and (tmp_path / "ckpt.started").exists():
            preempted.append(runs.live.core.preempt(run.app_id, GRACE_S, "for the test"))

    try:
        run = runs.submit(job, tmp_path / "work")
        runs.clock.every(0.1, preempt_once_started)
        assert runs.run(timeout_s=60), runs.failure
    finally:
        runs.shutdown()
    (notice,) = preempted
    (cid,) = notice.containers
    rec = runs.live.core.containers[cid]
    assert (rec.state, rec.exit_status) == (ContainerState.KILLED, ExitStatus.PREEMPTED)
    assert rec.finished_at >= notice.deadline   # killed at the deadline, not before
    written = ckpt.read_text()
    assert written.startswith("signalled=True") and float(written.split("left=")[1]) > 0, written
    assert run.outcome == "succeeded"
    assert [a.outcome for a in run.am.history()] == ["preempted", "succeeded"]
