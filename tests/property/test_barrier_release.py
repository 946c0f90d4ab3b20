"""Invariants of the coordinator core, for any arrival order."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gangmaster.am.barrier import (ALL_GATHER, BARRIER, Arrival, BarrierCoordinator, ManualClock,
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
