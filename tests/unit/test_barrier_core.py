"""The coordinator core with a manual clock: no gRPC, no sleeping."""
from __future__ import annotations

import logging

import pytest

from gangmaster.am.barrier.coordinator import (ALL_GATHER, BARRIER, Arrival, BarrierCoordinator, ManualClock,
                                               NotOpenYet, Released, TaskInfo)
from gangmaster.am.barrier.errors import (AttemptFailed, BarrierAuthError, BarrierError,
                                          BarrierInvalid, BarrierMismatch, BarrierTimeout,
                                          StaleAttempt, StaleEpoch)

JOB, GANG = "job", "gang"


class Calls:
    """Records what each task's callbacks got."""

    def __init__(self):
        self.got: dict[int, list] = {}

    def cb(self, task: int):
        return lambda outcome: self.got.setdefault(task, []).append(outcome)


def make(n=3, timeout_s=None, attempt=1, token="secret"):
    clock = ManualClock()
    coord = BarrierCoordinator(clock=clock)
    coord.open_attempt(JOB, GANG, attempt, [TaskInfo(i, f"h{i}", {"ssh": 2200 + i}) for i in range(n)],
                       token=token, timeout_s=timeout_s)
    return coord, clock


def arrive(coord, calls, task, epoch, op=BARRIER, msg=b"", attempt=1, token="secret"):
    return coord.arrive(Arrival(JOB, GANG, attempt, token, task, epoch, op, msg), calls.cb(task))


def test_release_only_when_all_arrive_then_next_epoch():
    coord, _ = make(3)
    calls = Calls()
    arrive(coord, calls, 0, 0)
    arrive(coord, calls, 2, 0)
    assert calls.got == {}
    assert coord.statistics().calls_waiting == 2
    arrive(coord, calls, 1, 0)
    assert sorted(calls.got) == [0, 1, 2]
    assert all(v == [Released(0, BARRIER, ())] for v in calls.got.values())
    # epoch 1 works the same
    calls2 = Calls()
    for t in (1, 0, 2):
        arrive(coord, calls2, t, 1)
    assert all(v == [Released(1, BARRIER, ())] for v in calls2.got.values())
    s = coord.statistics()
    assert (s.releases, s.arrivals, s.calls_waiting) == (2, 6, 0)


def test_all_gather_orders_by_task_index():
    coord, _ = make(3)
    calls = Calls()
    for t in (2, 0, 1):
        arrive(coord, calls, t, 0, ALL_GATHER, f"m{t}".encode())
    assert calls.got[2] == [Released(0, ALL_GATHER, (b"m0", b"m1", b"m2"))]


def test_task_infos_by_index_and_checked():
    coord, _ = make(3)
    infos = coord.task_infos(JOB, GANG, 1, "secret", 1)
    assert [(t.index, t.host, dict(t.ports)) for t in infos] == [
        (0, "h0", {"ssh": 2200}), (1, "h1", {"ssh": 2201}), (2, "h2", {"ssh": 2202})]
    with pytest.raises(BarrierAuthError):
        coord.task_infos(JOB, GANG, 1, "wrong", 1)


def test_timeout_fails_every_waiter_naming_missing_tasks():
    coord, clock = make(5, timeout_s=10)
    calls = Calls()
    clock.advance(100)  # time before the first arrival does not count
    arrive(coord, calls, 3, 0)
    clock.advance(4)
    arrive(coord, calls, 0, 0)
    assert coord.next_deadline() == pytest.approx(110)
    clock.advance(5.9)
    assert coord.expire() == 0
    clock.advance(0.1)
    assert coord.expire() == 2
    for t in (0, 3):
        (err,) = calls.got[t]
        assert isinstance(err, BarrierTimeout)
        assert err.missing == (1, 2, 4) and (err.arrived, err.total, err.epoch) == (2, 5, 0)
        assert "job/gang attempt 1" in str(err) and "epoch 0" in str(err)
        assert "2/5" in str(err) and "never arrived: 1, 2, 4" in str(err)
    # the attempt stays broken: a late task gets the same error at once
    with pytest.raises(BarrierTimeout, match="never arrived: 1, 2, 4"):
        arrive(coord, calls, 1, 0)
    assert coord.statistics().timeouts == 1
    assert coord.next_deadline() is None


def test_default_timeout_is_a_year():
    coord, clock = make(2)
    calls = Calls()
    arrive(coord, calls, 0, 0)
    clock.advance(364 * 24 * 3600)
    assert coord.expire() == 0 and calls.got == {}


def test_stale_epoch_names_attempt_and_epoch():
    coord, _ = make(2)
    calls = Calls()
    for epoch in range(3):
        arrive(coord, calls, 0, epoch)
        arrive(coord, calls, 1, epoch)
    with pytest.raises(StaleEpoch, match=r"job/gang attempt 1: task 0 called at epoch 0.*moved past.*epoch 3"):
        arrive(coord, calls, 0, 0)
    with pytest.raises(StaleEpoch, match="has not reached"):
        arrive(coord, calls, 0, 7)


def test_resend_of_released_epoch_is_released_again():
    coord, _ = make(2)
    calls = Calls()
    arrive(coord, calls, 0, 0, ALL_GATHER, b"a")
    arrive(coord, calls, 1, 0, ALL_GATHER, b"b")
    again = Calls()
    arrive(coord, again, 1, 0, ALL_GATHER, b"b")  # its reply was lost: re-sent
    assert again.got[1] == [Released(0, ALL_GATHER, (b"a", b"b"))]
    assert coord.statistics().releases == 1


def test_duplicate_arrival_not_counted_twice():
    coord, _ = make(3)
    calls = Calls()
    w = arrive(coord, calls, 0, 0)
    coord.withdraw(w)  # the call went away (e.g. answered "still waiting")
    arrive(coord, calls, 0, 0)
    arrive(coord, calls, 0, 0)
    arrive(coord, calls, 1, 0)
    assert calls.got == {}  # 2 of 3 distinct tasks: not released
    s = coord.statistics()
    assert (s.arrivals, s.duplicate_arrivals) == (2, 2)
    assert coord.progress(JOB, GANG, 1, "secret", 0).missing == (2,)
    arrive(coord, calls, 2, 0)
    assert len(calls.got[0]) == 2  # both attached calls of task 0 released, the withdrawn one not
    assert calls.got[2] == [Released(0, BARRIER, ())]


def test_mismatch_fails_all_waiters_with_clear_error():
    coord, _ = make(3)
    calls = Calls()
    arrive(coord, calls, 0, 0, BARRIER)
    arrive(coord, calls, 2, 0, BARRIER)
    arrive(coord, calls, 1, 0, ALL_GATHER, b"x")
    for t in (0, 1, 2):
        (err,) = calls.got[t]
        assert isinstance(err, BarrierMismatch)
        assert "task 1 called all_gather but task(s) 0, 2 called barrier" in str(err)
        assert "epoch 0" in str(err)
    with pytest.raises(BarrierMismatch):
        arrive(coord, calls, 0, 0)


def test_wrong_token_refused_and_counted(caplog):
    coord, _ = make(2)
    calls = Calls()
    with caplog.at_level(logging.WARNING, "gangmaster.barrier"):
        for _ in range(3):
            with pytest.raises(BarrierAuthError, match="token"):
                arrive(coord, calls, 0, 0, token="guess")
        with pytest.raises(BarrierAuthError):
            arrive(coord, calls, 0, 0, token="")
    assert coord.statistics().auth_refusals == 4
    assert "refused a call from job/gang attempt 1 task 0" in caplog.text
    assert len(caplog.records) == 1  # the rest are summarized later (test_barrier_hardening.py)
    assert coord.statistics().arrivals == 0  # a refused call is not an arrival


def test_fail_attempt_fails_waiters_at_once_and_later_calls():
    coord, _ = make(4)
    calls = Calls()
    for t in (0, 1, 3):
        arrive(coord, calls, t, 0)
    assert coord.fail_attempt(JOB, GANG, 1, "task 2 exited with code 137") == 3
    for t in (0, 1, 3):
        (err,) = calls.got[t]
        assert isinstance(err, AttemptFailed) and isinstance(err, StaleAttempt)
        assert "attempt 1" in str(err) and "task 2 exited with code 137" in str(err)
        assert err.missing == (2,)
    with pytest.raises(AttemptFailed, match="code 137"):
        arrive(coord, calls, 2, 0)
    assert coord.fail_attempt(JOB, GANG, 1, "again") == 0


def test_new_attempt_supersedes_and_old_attempt_is_stale():
    coord, _ = make(2)
    calls = Calls()
    arrive(coord, calls, 0, 0)
    coord.open_attempt(JOB, GANG, 2, [TaskInfo(0, "a"), TaskInfo(1, "b")], token="t2")
    (err,) = calls.got[0]
    assert isinstance(err, StaleAttempt) and "superseded by attempt 2" in str(err)
    with pytest.raises(StaleAttempt, match=r"attempt 1 is superseded; the open attempt is 2; task 1 called at epoch 0"):
        arrive(coord, calls, 1, 0)
    # the old token does not work for the new attempt
    with pytest.raises(BarrierAuthError):
        arrive(coord, calls, 0, 0, attempt=2, token="secret")
    new = Calls()
    arrive(coord, new, 0, 0, attempt=2, token="t2")
    arrive(coord, new, 1, 0, attempt=2, token="t2")
    assert len(new.got) == 2


def test_unknown_attempts_are_refused_and_closed_attempts_are_stale():
    coord, _ = make(2)
    calls = Calls()
    # a call for an attempt the coordinator does not know cannot be authenticated
    with pytest.raises(BarrierAuthError, match="attempt 9: refused"):
        arrive(coord, calls, 0, 0, attempt=9)
    coord.close_attempt(JOB, GANG, 1)
    with pytest.raises(StaleAttempt, match="attempt 1 is finished"):
        arrive(coord, calls, 0, 0)
    with pytest.raises(ValueError, match="already opened"):
        coord.open_attempt(JOB, GANG, 1, [TaskInfo(0, "a")])


def test_invalid_requests():
    coord, _ = make(2)
    calls = Calls()
    with pytest.raises(BarrierInvalid, match="task index 5 is outside 0..1"):
        arrive(coord, calls, 5, 0)
    with pytest.raises(BarrierInvalid, match="unknown operation"):
        arrive(coord, calls, 0, 0, op="reduce")
    with pytest.raises(ValueError, match="index"):
        coord.open_attempt(JOB, "other", 1, [TaskInfo(1, "a")])
    with pytest.raises(ValueError, match=r"tasks\[1\] has index 0"):
        coord.open_attempt(JOB, "other", 1, [TaskInfo(0, "a"), TaskInfo(0, "b")])
    with pytest.raises(ValueError, match="at least one task"):
        coord.open_attempt(JOB, "other", 1, [])


def test_arrival_logging(caplog):
    coord, _ = make(3)
    calls = Calls()
    with caplog.at_level(logging.INFO, "gangmaster.barrier"):
        arrive(coord, calls, 2, 0)
        arrive(coord, calls, 0, 0)
    assert "barrier epoch 0: task 2 arrived (1/3)" in caplog.text
    assert "barrier epoch 0: task 0 arrived (2/3)" in caplog.text


def test_callbacks_run_outside_the_lock():
    """A callback may call back into the coordinator (the server does) without deadlock."""
    coord, _ = make(1)
    seen = []

    def cb(outcome):
        seen.append(coord.statistics().releases)

    coord.arrive(Arrival(JOB, GANG, 1, "secret", 0, 0), cb)
    assert seen == [1]


def test_errors_are_barrier_errors():
    for cls in (BarrierTimeout, StaleAttempt, AttemptFailed, StaleEpoch, BarrierMismatch,
                BarrierAuthError, BarrierInvalid):
        assert issubclass(cls, BarrierError)


def test_task_infos_of_a_stale_attempt_is_refused():
    coord, _ = make(2)
    coord.open_attempt(JOB, GANG, 2, [TaskInfo(0, "a"), TaskInfo(1, "b")], token="t2")
    with pytest.raises(StaleAttempt, match=r"attempt 1 is superseded; the open attempt is 2; task 1 asked$"):
        coord.task_infos(JOB, GANG, 1, "secret", 1)


@pytest.mark.parametrize("taking_over, attempt, token, expected", [
    (True, 2, "secret", NotOpenYet),          # not reopened yet: come back
    (True, 1, "guess", BarrierAuthError),     # open, wrong token: refused all the same
    (True, 0, "old", StaleAttempt),           # ended here, its token: told how it ended
    (False, 2, "secret", BarrierAuthError),   # the take-over is over: refused
])
def test_while_the_am_takes_over_only_calls_naming_attempts_not_known_come_back(taking_over, attempt, token,
                                                                                 expected):
    coord = BarrierCoordinator(clock=ManualClock())
    coord.open_attempt(JOB, GANG, 0, [TaskInfo(0, "h0")], token="old")
    coord.close_attempt(JOB, GANG, 0)
    coord.open_attempt(JOB, GANG, 1, [TaskInfo(0, "h0"), TaskInfo(1, "h1")], token="secret")
    coord.taking_over(taking_over)
    with pytest.raises(expected):
        arrive(coord, Calls(), 0, 0, attempt=attempt, token=token)
    assert coord.statistics().auth_refusals == (expected is BarrierAuthError)
