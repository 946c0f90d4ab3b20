"""The reservation planner: when and where a waiting gang starts earliest, from the running
work's expected ends (Slurm backfill's start time), and the diagnosis's line for it."""
from __future__ import annotations

import math

import pytest

from gangmaster.am.core.reservation_plan import (DECLARED, OBSERVED, UNKNOWN, Hold, Reservation, expected_start_line,
                                            plan_start)

INF = -math.inf


def running(host, gpus, end, owner="", known=DECLARED):
    return Hold(host, gpus, INF, end, owner, known)


# (case, free now, holds, instances, duration, expected start, expected GPUs by host, waits for)
CASES = [
    ("fits now: starts now on the least free nodes that hold it",
     {"a": 8, "b": 4}, [], [4], 10.0, 0.0, {"b": 4}, ()),
    ("waits for the earliest end that makes room",
     {"a": 0, "b": 0}, [running("a", 8, 50, "x"), running("b", 8, 30, "y")], [8], 10.0, 30.0, {"b": 8}, ("y",)),
    ("a gang of two nodes waits for both",
     {"a": 0, "b": 0}, [running("a", 8, 50, "x"), running("b", 8, 30, "y")], [8, 8], 10.0, 50.0,
     {"a": 8, "b": 8}, ("x",)),
    ("free GPUs spread over nodes do not hold an instance of 8",
     {"a": 4, "b": 4}, [running("a", 4, 20, "x"), running("b", 4, 90, "y")], [8], 5.0, 20.0, {"a": 8}, ("x",)),
    ("a reservation already planned is worked around: its window is taken",
     {"a": 8}, [Hold("a", 8, 5.0, 25.0, "older")], [8], 10.0, 25.0, {"a": 8}, ("older",)),
    ("a gang short enough to end before a planned reservation starts now",
     {"a": 8}, [Hold("a", 8, 20.0, 40.0, "older")], [8], 20.0, 0.0, {"a": 8}, ()),
    ("a reservation starting now is not running work: it gives back nothing at its end beyond what it took",
     {"a": 8}, [Hold("a", 8, 0.0, 5.0, "older")], [8, 8], 5.0, None, None, None),
]


@pytest.mark.parametrize("case, free, holds, instances, duration, start, gpus_by_host, waits_for", CASES,
                         ids=[c[0] for c in CASES])
def test_plan_start(case, free, holds, instances, duration, start, gpus_by_host, waits_for):
    planned = plan_start(0.0, free, holds, instances, duration, "me")
    if start is None:   # (8 GPUs in all: a gang of 16 never fits, counted twice it did at 5 s)
        assert planned is None
        return
    assert planned is not None
    assert (planned.start_s, dict(planned.gpus_by_host), planned.waits_for) == (start, gpus_by_host, waits_for)
    assert planned.end_s == start + duration


@pytest.mark.parametrize("free, holds, instances", [
    ({"a": 8}, [], [8, 8]),                                       # more than the cluster
    ({"a": 0}, [running("a", 8, math.inf, "x", UNKNOWN)], [8]),  # held by work whose end is unknown
])
def test_no_plan_when_the_gang_never_fits(free, holds, instances):
    assert plan_start(0.0, free, holds, instances, 10.0) is None


def test_the_least_sure_end_waited_for_says_how_sure_the_plan_is():
    holds = [running("a", 8, 30, "x", DECLARED), running("b", 8, 30, "y", OBSERVED)]
    assert plan_start(0.0, {"a": 0, "b": 0}, holds, [8, 8], 1.0).known == OBSERVED


def test_a_reservation_admits_only_gangs_that_end_by_its_start():
    reservation = Reservation("big", 100.0, 200.0, {"a": 8}, ("x",), DECLARED)
    assert reservation.admits(100.0) and not reservation.admits(100.5)


@pytest.mark.parametrize("reservation, line", [
    (Reservation("big", 7140.0, math.inf, {f"h{i}": 8 for i in range(90)}, ("xlibmpi",), DECLARED),
     "expected to start in ~1h 59m on 90 reserved machines when xlibmpi ends (from declared durations)"),
    (Reservation("big", 90.0, math.inf, {"a": 8, "b": 8}, ("x", "y"), OBSERVED),
     "expected to start in ~1m 30s on 2 reserved machines when x, y end (from observed durations of similar jobs)"),
    (None, "expected start: unknown (no expected end is known for the work holding the room it needs, "
           "or it needs more than the cluster)"),
])
def test_expected_start_line(reservation, line):
    assert expected_start_line(reservation, 0.0) == line


def test_a_roles_cap_per_node_is_kept():
    """Two 4-GPU instances at most one per node: an 8-GPU node alone does not hold them."""
    free = {"a": 8, "b": 0}
    holds = [running("b", 8, 40, "x")]
    assert dict(plan_start(0.0, free, holds, [4, 4], 1.0).gpus_by_host) == {"a": 8}
    capped = plan_start(0.0, free, holds, [(4, "w", 1), (4, "w", 1)], 1.0)
    assert (capped.start_s, dict(capped.gpus_by_host)) == (40.0, {"b": 4, "a": 4})
