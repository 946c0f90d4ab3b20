"""A replay's job state is kept in columns (tools/replay/job_state.py): the metrics' columns
made from them equal those made value by value from the same replay's JobOutcome values
(JobColumns.of of a plain tuple), field by field, NaN where a job never started or ended —
under every queue policy, with gangs, jobs that never fit, drops and preemption."""
from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

from gangmaster.tools.replay.engine import ReplayOptions, replay
from gangmaster.tools.replay.metrics import JobColumns

from replay_helpers import cluster, synthetic

CASES = {
    "fifo": ReplayOptions(),
    "backfill": ReplayOptions(queue_policy="backfill"),
    "reserve": ReplayOptions(queue_policy="reserve"),
    "drop": ReplayOptions(queue_policy="drop"),
    "preemption": ReplayOptions(preemption=True, queue_priorities=(("vc-b", 2, 0),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_columns_equal_those_of_the_outcome_values(name):
    result = replay(synthetic(120), cluster(3), CASES[name])
    kept, of_values = JobColumns.of(result.jobs), JobColumns.of(tuple(result.jobs))
    assert kept is result.jobs.columns
    for field in fields(JobColumns):
        mine, theirs = getattr(kept, field.name), getattr(of_values, field.name)
        assert mine.dtype == theirs.dtype, field.name
        assert np.array_equal(mine, theirs, equal_nan=mine.dtype.kind == "f"), field.name
    assert result.jobs == tuple(result.jobs) and len(result.jobs) == 120


def test_the_outcomes_read_one_by_one_are_the_values():
    result = replay(synthetic(40), cluster(1))
    assert result.jobs[3] == tuple(result.jobs)[3] and list(result.jobs[:2]) == list(result.jobs)[:2]
    assert [j.outcome for j in result.jobs] == list(result.jobs.columns.outcome)
    assert {"succeeded", "never-fits"} <= {j.outcome for j in result.jobs}   # (a 32-GPU gang on one node)
