"""Hand-built replay results for the metrics and report tests: the engine's own types,
filled with numbers a reader can check by hand."""
from __future__ import annotations

import numpy as np

from gangmaster.tools.replay.engine import JobOutcome, ReplayOptions, ReplayResult, Timeline


def outcome(job_id, submit, start, end, duration, gpus=1, hosts=("n0",), racks=("r0",), queue="q",
            gang_wait=0.0, state="succeeded"):
    return JobOutcome(job_id, queue, float(submit), None if start is None else float(start),
                      None if end is None else float(end), float(duration), gpus, len(hosts) or 1,
                      tuple(hosts), tuple(racks), gang_wait, state)


def result(jobs, t, allocated, queue_length=None, pending=None, hol=None, capacity=16, selector="job-packing",
           seed=0, wall_s=1.5, select_calls=10, select_s=0.002):
    n = len(t)
    zeros = [0] * n
    timeline = Timeline(np.array(t, dtype=float), np.array(allocated, dtype=np.int64),
                        np.array(queue_length or zeros, dtype=np.int64), np.array(pending or zeros, dtype=np.int64),
                        np.array(hol or zeros, dtype=np.int64), capacity)
    return ReplayResult(tuple(jobs), timeline, wall_s, 100, select_calls, select_s,
                        f"{selector}: ties by seed {seed}", ReplayOptions(selector=selector, seed=seed))
