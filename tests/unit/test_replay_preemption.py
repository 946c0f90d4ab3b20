"""``replay --preemption``: a waiting job preempts lower-priority jobs, whole gangs, through
the RM and the victims' AMs; the victims wait in their queue again and finish later; what
was preempted is tallied; free + used = capacity throughout (tools/replay/preempting.py)."""
import dataclasses

import pytest

from gangmaster.tools.replay.engine import ReplayOptions, replay
from gangmaster.tools.replay.metrics import measurement_window, selector_metrics
from gangmaster.tools.replay.pages import summary_rows

from replay_helpers import cluster, job, table


def _prioritized(job_id, submit_s, duration_s, gpus, priority):
    return dataclasses.replace(job(job_id, submit_s, duration_s, gpus), priority=priority)


#: one 8-GPU node... two: a low-priority job on each, then an urgent whole-node job
JOBS = [_prioritized("low-old", 0, 10_000, 8, 0), _prioritized("low-new", 100, 10_000, 8, 0),
        _prioritized("urgent", 200, 1_000, 8, 5)]

CASES = [
    # (options, urgent's start, the victims, the victims' outcomes)
    (ReplayOptions(), 10_000.0, (), "succeeded"),
    (ReplayOptions(preemption=True, preemption_grace_s=30.0), 230.0, ("low-new",), "succeeded"),
    (ReplayOptions(preemption=True, preemption_grace_s=0.0), 200.0, ("low-new",), "succeeded"),
]


@pytest.mark.parametrize("options, urgent_start, victims, outcome", CASES)
def test_an_urgent_job_preempts_the_gang_that_lost_least(options, urgent_start, victims, outcome):
    result = replay(table(JOBS), cluster(2), options)
    by_id = {j.job_id: j for j in result.jobs}
    assert by_id["urgent"].start_s == urgent_start
    assert tuple(p.victim for p in result.preemptions) == victims
    assert all(j.outcome == outcome for j in result.jobs)
    if victims:
        (p,) = result.preemptions
        assert p.by == "urgent" and p.gpus == 8
        assert p.lost_gpu_hours == pytest.approx(8 * (200 + options.preemption_grace_s - 100) / 3600)
        # the victim started again once the urgent job ended, and ran its whole duration
        assert by_id["low-new"].start_s == urgent_start + 1_000 and by_id["low-new"].end_s == urgent_start + 11_000
    # free + used = capacity throughout: never more GPUs allocated than the cluster has
    assert max(result.timeline.allocated_gpus) <= 16 and result.timeline.allocated_gpus[-1] == 0


def test_equal_priorities_preempt_nothing():
    jobs = [dataclasses.replace(j, priority=0) for j in JOBS]
    result = replay(table(jobs), cluster(2), ReplayOptions(preemption=True))
    assert result.preemptions == () and {j.job_id: j.start_s for j in result.jobs}["urgent"] == 10_000.0


def test_the_metrics_count_preempted_gangs_and_lost_gpu_hours_only_with_preemption_on():
    for options, expected in ((ReplayOptions(), None),
                              (ReplayOptions(preemption=True, preemption_grace_s=30.0),
                               {"gangs": 1, "lost_gpu_hours": round(8 * 130 / 3600, 6)})):
        result = replay(table(JOBS), cluster(2), options)
        figures = selector_metrics(result, measurement_window([j.submit_s for j in result.jobs], trim=0.0), 8)
        assert figures.get("preempted") == expected


@pytest.mark.parametrize("preempted, rows", [
    (None, None),   # a replay without preemption: no such rows, the table as it was
    ({"gangs": 1, "lost_gpu_hours": 0.288889}, [["preempted gangs", "1"], ["preempted work", "0.289"]]),
])
def test_the_summary_table_shows_the_preempted_figure_with_preemption_on(preempted, rows):
    figures = {"jobs": 3, "wall_s": 0.5, **({"preempted": preempted} if preempted else {})}
    header, table_rows = summary_rows({"selectors": {"gandiva": figures}, "run": {}})
    by_heading = {row[0]: row for row in table_rows}
    assert header == ["figure", "gandiva"] and table_rows[-1][0] == "wall (s)"
    assert [by_heading.get(r[0]) for r in rows or []] == (rows or [])
    assert ("preempted gangs" in by_heading) == (preempted is not None)


def test_a_negative_grace_is_refused():
    with pytest.raises(ValueError, match="preemption_grace_s: expected a number >= 0, got -1"):
        ReplayOptions(preemption=True, preemption_grace_s=-1)


def test_a_queue_under_its_guaranteed_share_reclaims_it_from_a_queue_over_its_own():
    """prod is guaranteed 8 GPUs and holds none; batch holds the whole cluster: prod's job
    preempts batch's newer job although the priorities are equal."""
    jobs = [dataclasses.replace(job("b1", 0, 10_000, 8), queue="batch"),
            dataclasses.replace(job("b2", 10, 10_000, 8), queue="batch"),
            dataclasses.replace(job("p1", 100, 1_000, 8), queue="prod")]
    for guarantees, victims in (((), ()), ((("prod", 0, 8),), ("b2",)), ((("batch", 0, 16), ("prod", 0, 8)), ())):
        result = replay(table(jobs), cluster(2), ReplayOptions(preemption=True, queue_priorities=guarantees))
        assert tuple(p.victim for p in result.preemptions) == victims, guarantees
