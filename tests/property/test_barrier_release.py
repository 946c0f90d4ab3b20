"""Invariants of the coordinator core, for any arrival order."""
from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gangmaster.am.barrier.coordinator import (ALL_GATHER, BARRIER, Arrival, BarrierCoordinator, ManualClock,
                                   Released, TaskInfo)


def _coord(n: int) -> BarrierCoordinator:
    coord = BarrierCoordinator(clock=ManualClock())
    coord.open_attempt("j", "g", 1, [TaskInfo(i, f"h{i}") for i in range(n)], token="t")
    return coord


@st.composite
def arrival_orders(draw):
    """N, and an order of arrivals in which every task appears at least once, some twice
    (re-sent calls), with some calls withdrawn before the release."""
    n = draw(st.integers(1, 12))
    order = draw(st.permutations(range(n)))
    extra = draw(st.lists(st.integers(0, n - 1), max_size=n))
    seq = list(order)
    for task in extra:  # re-sends land after the task's first arrival
        first = seq.index(task)
        seq.insert(draw(st.integers(first + 1, len(seq))), task)
    withdraw = draw(st.lists(st.booleans(), min_size=len(seq), max_size=len(seq)))
    return n, seq, withdraw


@given(arrival_orders(), st.integers(1, 3))
def test_release_exactly_when_the_last_distinct_task_arrives(case, epochs):
    n, seq, withdraw = case
    coord = _coord(n)
    for epoch in range(epochs):
        got: list = []
        seen: set[int] = set()
        kept = 0
        for step, (task, drop) in enumerate(zip(seq, withdraw)):
            before = len(got)
            w = coord.arrive(Arrival("j", "g", 1, "t", task, epoch), got.append)
            seen.add(task)
            if len(seen) < n:
                assert len(got) == 0, "released before every task arrived"
                if drop:
                    coord.withdraw(w)
                else:
                    kept += 1
            elif before == 0 and got:
                # this arrival completed the barrier: every attached call released, once
                assert len(got) == kept + 1
                assert all(r == Released(epoch, BARRIER, ()) for r in got)
                # arrivals after the release are re-sends of a released epoch: released again
                for later in seq[step + 1:]:
                    again: list = []
                    coord.arrive(Arrival("j", "g", 1, "t", later, epoch), again.append)
                    assert again == [Released(epoch, BARRIER, ())]
                break
        else:
            raise AssertionError("never released")
    s = coord.statistics()
    assert s.releases == epochs and s.arrivals == n * epochs and s.calls_waiting == 0


@given(st.integers(1, 16).flatmap(lambda n: st.tuples(
    st.permutations(range(n)), st.lists(st.binary(max_size=8), min_size=n, max_size=n))))
def test_all_gather_returns_messages_by_task_index(case):
    order, messages = case
    n = len(order)
    coord = _coord(n)
    got: dict[int, Released] = {}
    for task in order:
        coord.arrive(Arrival("j", "g", 1, "t", task, 0, ALL_GATHER, messages[task]),
                     lambda r, task=task: got.__setitem__(task, r))
    assert sorted(got) == list(range(n))
    assert all(r.messages == tuple(messages) for r in got.values())


@given(st.integers(2, 10), st.data())
def test_timeout_names_exactly_the_missing_tasks(n, data):
    clock = ManualClock()
    coord = BarrierCoordinator(clock=clock)
    coord.open_attempt("j", "g", 1, [TaskInfo(i, "h") for i in range(n)], token="t", timeout_s=5)
    arrived = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n - 1, unique=True))
    got: list = []
    for task in arrived:
        coord.arrive(Arrival("j", "g", 1, "t", task, 0), got.append)
        clock.advance(data.draw(st.floats(0, 1)))
    clock.advance(5)
    assert coord.expire() == len(arrived)
    assert all(e.missing == tuple(sorted(set(range(n)) - set(arrived))) for e in got)
    assert all(e.arrived == len(arrived) and e.total == n for e in got)


#: a call: gang, attempt, token ("right": the attempt's), task, epoch (mostly one that can be released)
_calls = st.tuples(st.sampled_from(["g", "g", "h"]), st.sampled_from([1, 1, 1, 2, 3]),
                   st.sampled_from(["right", "right", "right", "right", "t1", "bad", "", "é"]),
                   st.sampled_from([0, 0, 0, 0, 1, 2, -1]), st.sampled_from([0, 0, 1, 1, 2, -1]))
_steps = st.lists(st.one_of(
    st.tuples(st.just("open"), st.sampled_from(["g", "h"]), st.integers(1, 3), st.sampled_from([1, 1, 2])),
    st.tuples(st.just("call"), _calls), st.tuples(st.just("call"), _calls), st.tuples(st.just("call"), _calls),
    st.tuples(st.just("gather"), _calls, st.sampled_from([0, 0, 1 << 30])),
    st.tuples(st.just("withdraw"), st.integers(0, 20)),
    st.tuples(st.just("close"), st.sampled_from(["g", "h"]), st.integers(1, 3)),
    st.tuples(st.just("fail"), st.sampled_from(["g", "h"]), st.integers(1, 3)),
    st.tuples(st.just("expire"), st.floats(0, 20))), min_size=4, max_size=40)


@settings(max_examples=300)
@given(st.tuples(st.sampled_from([1, 1, 2]), st.sampled_from([1, 1, 3])), _steps)
@example((1, 1), [("gather", ("g", 1, "right", 0, 0), 1 << 30), ("call", ("g", 1, "right", 0, 0))])   # broken alone
@example((1, 1), [("call", ("g", 1, "right", 0, 0)), ("call", ("g", 1, "right", 0, 0)),   # a re-send, then the next
                  ("call", ("g", 1, "right", 0, 1)), ("close", "g", 1), ("call", ("g", 1, "right", 0, 2))])
def test_call_barrier_is_arrive_of_a_barrier_call(sizes, steps):
    """A task's barrier() call through call_barrier (the simulated NodeManager's, with its
    shortcut for a gang of one task) and through arrive: the same outcomes (an error raised,
    or the releases and errors each call is told, in order), the same waiters kept, the same
    counters, whatever the calls, tokens, attempts and ends of attempts."""
    runs = []
    for through_call in (False, True):
        clock = ManualClock()
        coord = BarrierCoordinator(clock=clock, history=2)
        for gang, n in zip("gh", sizes):   # attempt 1 of both gangs opens first
            coord.open_attempt("j", gang, 1, [TaskInfo(i, "h") for i in range(n)], token="t1", timeout_s=10)
        told: list = []
        waiters: list = []
        seen = []
        for step in steps:
            kind = step[0]
            if kind == "open":
                _, gang, attempt, n = step
                try:
                    coord.open_attempt("j", gang, attempt, [TaskInfo(i, "h") for i in range(n)],
                                       token=f"t{attempt}", timeout_s=10)
                    seen.append(("opened",))
                except ValueError as exc:
                    seen.append(("refused", str(exc)))
            elif kind in ("call", "gather"):
                gang, attempt, token, task, epoch = step[1]
                unsent = step[2] if kind == "gather" else 0   # a message over the limit breaks the attempt
                token = f"t{attempt}" if token == "right" else token
                number = len(waiters)
                tell = lambda outcome, number=number: told.append((number, repr(outcome)))   # noqa: E731
                try:
                    if kind == "gather":
                        got = coord.arrive(Arrival("j", gang, attempt, token, task, epoch, ALL_GATHER, b"m", unsent), tell)
                    elif through_call:
                        got = coord.call_barrier("j", gang, attempt, token, task, epoch, tell)
                    else:
                        got = coord.arrive(Arrival("j", gang, attempt, token, task, epoch), tell)
                except Exception as exc:   # noqa: BLE001 - compared below, type and message
                    seen.append(("raised", type(exc).__name__, str(exc)))
                    waiters.append(None)
                    continue
                if isinstance(got, Released):   # call_barrier's answer for a call released alone
                    tell(got)
                    waiters.append(None)
                else:
                    waiters.append(got if not got.done else None)
                seen.append(("called", number))
            elif kind == "withdraw":
                live = [w for w in waiters if w is not None]
                if live:
                    coord.withdraw(live[step[1] % len(live)])
            elif kind == "close":
                seen.append(("closed", coord.close_attempt("j", step[1], step[2])))
            elif kind == "fail":
                seen.append(("failed", coord.fail_attempt("j", step[1], step[2], "why")))
            else:
                clock.advance(step[1])
                seen.append(("expired", coord.expire()))
        runs.append((seen, told, coord.statistics()))
    assert runs[0] == runs[1]
