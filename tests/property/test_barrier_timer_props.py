"""The in-process barrier's one timer, for any mix of gangs opening, arriving, closing,
failing and timing out: after every call it is set at exactly the coordinator's next
epoch deadline (none while no epoch runs), although it looks for it again only when the
coordinator's deadlines moved (``BarrierCoordinator._deadlines_moved``)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gangmaster.am.barrier.coordinator import ALL_GATHER, BARRIER, Arrival, TaskInfo
from gangmaster.am.barrier.errors import BarrierError
from gangmaster.am.barrier.in_process import InProcessBarrier
from gangmaster.tools.rmsim.clock import VirtualLoop

GANGS = ("a", "b", "c")

steps = st.lists(st.one_of(
    st.tuples(st.just("open"), st.sampled_from(GANGS), st.integers(1, 3), st.sampled_from([5.0, 20.0, 60.0])),
    st.tuples(st.just("arrive"), st.sampled_from(GANGS), st.integers(0, 2), st.sampled_from([BARRIER, ALL_GATHER])),
    st.tuples(st.just("close"), st.sampled_from(GANGS)),
    st.tuples(st.just("fail"), st.sampled_from(GANGS)),
    st.tuples(st.just("advance"), st.sampled_from([1.0, 10.0, 30.0])),
), max_size=40)


@settings(max_examples=150)
@given(steps)
def test_the_timer_is_always_at_the_next_deadline(script):
    loop = VirtualLoop()
    barrier = InProcessBarrier(loop)
    attempts: dict[str, list] = {}   # gang -> [attempt, token, tasks, epoch of each task]
    for step in script:
        kind, *args = step
        if kind == "open":
            gang, tasks, timeout = args
            attempt = attempts[gang][0] + 1 if gang in attempts else 1
            token = barrier.open_attempt("j", gang, attempt, [TaskInfo(i, f"h{i}") for i in range(tasks)],
                                         timeout_s=timeout)
            attempts[gang] = [attempt, token, tasks, [0] * tasks]
        elif kind == "arrive" and args[0] in attempts:
            gang, task, operation = args
            attempt, token, tasks, epochs = attempts[gang]
            task %= tasks
            try:
                barrier.arrive(Arrival("j", gang, attempt, token, task, epochs[task], operation), lambda _: None)
                epochs[task] += 1
            except BarrierError:
                pass
        elif kind == "close" and args[0] in attempts:
            barrier.close_attempt("j", args[0], attempts[args[0]][0])
        elif kind == "fail" and args[0] in attempts:
            barrier.fail_attempt("j", args[0], attempts[args[0]][0], "failed by the test")
        elif kind == "advance":
            loop.run_until(loop.now() + args[0])
        assert barrier._timer_at == barrier.next_deadline(), step
        assert (barrier._timer is None) == (barrier._timer_at is None)
