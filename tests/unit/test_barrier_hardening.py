"""The coordinator core under hostile or long-running use (issue 10): it authenticates
before it says anything, keeps its refusal log short, forgets finished attempts within
a bounded history, and refuses an all_gather too large to send — all with a manual
clock, no gRPC, no sleeping."""
from __future__ import annotations

import logging

import pytest

from gangmaster.am.barrier.coordinator import ALL_GATHER, BARRIER, Arrival, BarrierCoordinator, ManualClock, TaskInfo
from gangmaster.am.barrier.errors import (AttemptFailed, BarrierAuthError, BarrierError, MessageTooLarge,
                                          StaleAttempt)
from gangmaster.conf.limits import BARRIER_ENDED_ATTEMPTS_KEPT, REFUSAL_LOG_INTERVAL_S

JOB, GANG = "job", "gang"


def tasks(n):
    return [TaskInfo(i, f"h{i}") for i in range(n)]


def call(coord, task, epoch=0, op=BARRIER, msg=b"", attempt=1, token="secret", gang=GANG, unsent=0):
    """One arrival; returns the list its callback fills."""
    got: list = []
    coord.arrive(Arrival(JOB, gang, attempt, token, task, epoch, op, msg, unsent), got.append)
    return got


def outcome(fn):
    try:
        return fn()
    except BarrierError as err:
        return err


# ------------------------------------------------------------ authenticate first
def test_a_call_for_an_unknown_attempt_learns_nothing_but_refusal():
    """Before: "attempt 9 is not known (the open attempt is 1)" — an answer, unauthenticated."""
    coord = BarrierCoordinator(clock=ManualClock())
    coord.open_attempt(JOB, GANG, 1, tasks(2), token="secret")
    err = outcome(lambda: call(coord, 0, attempt=9, token="guess"))
    assert isinstance(err, BarrierAuthError)
    assert "open attempt" not in str(err) and "attempt 1" not in str(err)
    assert coord.statistics().auth_refusals == 1


@pytest.mark.parametrize("bad", [dict(task=7), dict(epoch=5), dict(op="reduce"), dict(task=2**32 - 1, epoch=2**64 - 1)])
def test_a_bad_token_is_refused_before_the_content_is_looked_at(bad):
    coord = BarrierCoordinator(clock=ManualClock())
    coord.open_attempt(JOB, GANG, 1, tasks(2), token="secret")
    args = dict(task=0, epoch=0, op=BARRIER) | bad
    assert isinstance(outcome(lambda: call(coord, args["task"], args["epoch"], args["op"], token="guess")),
                      BarrierAuthError)
    # the same content with the right token gets the content's own error
    assert not isinstance(outcome(lambda: call(coord, args["task"], args["epoch"], args["op"])),
                          BarrierAuthError)


def test_refusals_are_logged_once_then_summarized_per_interval(caplog):
    """A token-guessing client must not flood the log: the first refusal is logged, the
    rest are counted into at most one summary line per interval."""
    clock = ManualClock()
    coord = BarrierCoordinator(clock=clock)
    coord.open_attempt(JOB, GANG, 1, tasks(2), token="secret")
    with caplog.at_level(logging.WARNING, "gangmaster.barrier"):
        for i in range(500):
            outcome(lambda: call(coord, 0, token=f"guess{i}"))
            outcome(lambda: call(coord, 0, attempt=1000 + i, token="guess"))
        assert len(caplog.records) == 1
        assert "refused" in caplog.records[0].getMessage()
        clock.advance(REFUSAL_LOG_INTERVAL_S)
        outcome(lambda: call(coord, 1, token="again"))
        assert len(caplog.records) == 2
        assert "1000 more call(s)" in caplog.records[1].getMessage()
        # a quiet interval's refusals are summarized by the periodic log, not lost
        outcome(lambda: call(coord, 1, token="late"))
        clock.advance(REFUSAL_LOG_INTERVAL_S)
        coord.log_refusals()
        assert len(caplog.records) == 3 and "1 more call(s)" in caplog.records[2].getMessage()
        coord.log_refusals()
        assert len(caplog.records) == 3
    assert coord.statistics().auth_refusals == 1002


# --------------------------------------------------------------- bounded memory
def test_finished_attempts_are_forgotten_within_a_bounded_history():
    kept = 8
    coord = BarrierCoordinator(clock=ManualClock(), history=kept)
    for g in range(20):
        gang = f"g{g}"
        for attempt in (1, 2, 3):  # 1 superseded, 2 failed, 3 closed
            coord.open_attempt(JOB, gang, attempt, tasks(2), token=f"t{g}.{attempt}")
            call(coord, 0, attempt=attempt, token=f"t{g}.{attempt}", gang=gang)
        coord.fail_attempt(JOB, gang, 2, "n/a")  # attempt 2 is already superseded: a no-op
        coord.close_attempt(JOB, gang, 3)
        s = coord.statistics()
        assert s.attempts_open == 0 and s.calls_waiting == 0
        assert s.attempts_remembered <= kept and s.gangs_known <= kept
    # the most recent ended attempts still get a clear, typed "ended"
    err = outcome(lambda: call(coord, 0, attempt=3, token="t19.3", gang="g19"))
    assert isinstance(err, StaleAttempt) and "is finished" in str(err)
    err = outcome(lambda: call(coord, 0, attempt=2, token="t19.2", gang="g19"))
    assert isinstance(err, StaleAttempt) and "superseded" in str(err)
    # one forgotten long ago is refused, typed, without a word about the gang
    assert isinstance(outcome(lambda: call(coord, 0, attempt=3, token="t0.3", gang="g0")), BarrierAuthError)


def test_a_zombie_of_a_failed_attempt_is_told_it_failed():
    coord = BarrierCoordinator(clock=ManualClock())
    coord.open_attempt(JOB, GANG, 1, tasks(3), token="secret")
    waiting = call(coord, 0)
    coord.fail_attempt(JOB, GANG, 1, "task 2 exited with code 137")
    assert isinstance(waiting[0], AttemptFailed)
    err = outcome(lambda: call(coord, 1))
    assert isinstance(err, AttemptFailed) and "code 137" in str(err)
    assert coord.statistics().attempts_remembered == 1 and coord.statistics().attempts_open == 0


def test_history_default_is_documented():
    assert BarrierCoordinator().history == BARRIER_ENDED_ATTEMPTS_KEPT >= 1000


# ------------------------------------------------------------ all_gather size
def test_a_gather_over_the_limit_fails_at_once_for_every_task():
    coord = BarrierCoordinator(clock=ManualClock(), max_message_bytes=1000)
    coord.open_attempt(JOB, GANG, 1, tasks(3), token="secret")
    first = call(coord, 0, op=ALL_GATHER, msg=b"a" * 400)
    assert first == []
    second = call(coord, 1, op=ALL_GATHER, msg=b"b" * 700)  # 400 + 700 > 1000: no need to wait for task 2
    for got in (first, second):
        (err,) = got
        assert isinstance(err, MessageTooLarge)
        assert "1,000 bytes" in str(err) and "1,116 bytes" in str(err) and "barrier.max_message_bytes" in str(err)
    late = outcome(lambda: call(coord, 2, op=ALL_GATHER, msg=b"c"))
    assert isinstance(late, MessageTooLarge)


def test_a_message_too_large_to_send_fails_the_gather_by_its_size():
    coord = BarrierCoordinator(clock=ManualClock(), max_message_bytes=1000)
    coord.open_attempt(JOB, GANG, 1, tasks(2), token="secret")
    waiting = call(coord, 0, op=ALL_GATHER, msg=b"a")
    (err,) = call(coord, 1, op=ALL_GATHER, unsent=5_000_000)
    assert isinstance(err, MessageTooLarge) and "5,000,008 bytes" in str(err) and "task 1" in str(err)
    assert isinstance(waiting[0], MessageTooLarge)


def test_a_gather_at_the_limit_is_released():
    coord = BarrierCoordinator(clock=ManualClock(), max_message_bytes=1000)
    coord.open_attempt(JOB, GANG, 1, tasks(2), token="secret")
    a = call(coord, 0, op=ALL_GATHER, msg=b"a" * 492)   # 492 + 8 framing
    b = call(coord, 1, op=ALL_GATHER, msg=b"b" * 492)
    assert a[0].messages == b[0].messages == (b"a" * 492, b"b" * 492)
    # the limit counts per epoch: the next gather starts from zero
    a = call(coord, 0, 1, op=ALL_GATHER, msg=b"a" * 492)
    b = call(coord, 1, 1, op=ALL_GATHER, msg=b"b" * 492)
    assert a[0].epoch == 1 and len(b[0].messages) == 2


def test_barrier_calls_do_not_keep_their_payload():
    coord = BarrierCoordinator(clock=ManualClock(), max_message_bytes=1000)
    coord.open_attempt(JOB, GANG, 1, tasks(2), token="secret")
    call(coord, 0, op=BARRIER, msg=b"x" * 5000)  # a payload on barrier() means nothing
    (released,) = call(coord, 1, op=BARRIER)
    assert released.messages == ()
