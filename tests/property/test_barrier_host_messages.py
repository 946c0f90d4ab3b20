"""The tree (a host's leader reporting its tasks' calls in one message,
``BarrierCoordinator.arrive_host``) makes the same barrier as every task calling alone
(``arrive``), in the gRPC server's coordinator and in the simulation's in-process one:
for any hosts, any order of calls, re-sent calls, messages split or not, barrier or
all_gather, every task is told the same release (an all_gather's messages by rank), at
the same moment (the arrival that completes the epoch), and the counters of arrivals
and releases agree."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gangmaster.am.barrier.coordinator import (ALL_GATHER, BARRIER, Arrival, BarrierCoordinator, HostArrival, ManualClock,
                                   TaskInfo)
from gangmaster.am.barrier.in_process import InProcessBarrier
from gangmaster.tools.rmsim.clock import VirtualLoop


@st.composite
def gangs(draw):
    """N tasks on hosts, and per epoch: the operation, and the calls in the order they
    reach the coordinator, grouped into the messages their hosts' leaders send."""
    n = draw(st.integers(1, 10))
    hosts = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    epochs = []
    for _ in range(draw(st.integers(1, 3))):
        operation = draw(st.sampled_from([BARRIER, ALL_GATHER]))
        order = draw(st.permutations(range(n)))
        resent = draw(st.lists(st.integers(0, n - 1), max_size=3))
        # consecutive calls of one host may travel in one message (cut where the draw says)
        messages: list[list[int]] = []
        for task in list(order) + resent:
            if messages and hosts[messages[-1][0]] == hosts[task] and draw(st.booleans()):
                messages[-1].append(task)
            else:
                messages.append([task])
        epochs.append((operation, messages))
    return n, hosts, epochs


def _run(make, n: int, epochs, tree: bool):
    coord = make()
    token = coord.open_attempt("j", "g", 1, [TaskInfo(i, f"h{i}") for i in range(n)], token="t")
    told: list = []
    for epoch, (operation, messages) in enumerate(epochs):
        for step, tasks in enumerate(messages):
            if tree:
                arrivals = [HostArrival(t, operation, b"m%d" % t) for t in dict.fromkeys(tasks)]
                coord.arrive_host("j", "g", 1, token, tasks[0], epoch, arrivals,
                                  lambda r, tasks=tasks, step=step: told.extend((step, t, repr(r)) for t in tasks))
            else:
                for t in tasks:
                    coord.arrive(Arrival("j", "g", 1, token, t, epoch, operation, b"m%d" % t),
                                 lambda r, t=t, step=step: told.append((step, t, repr(r))))
    s = coord.statistics()
    return sorted(set(told)), s.releases, s.arrivals, s.calls_waiting


@settings(max_examples=200)
@given(gangs())
def test_host_messages_make_the_barrier_of_per_task_calls(case):
    n, _hosts, epochs = case
    makers = (lambda: BarrierCoordinator(clock=ManualClock()), lambda: InProcessBarrier(VirtualLoop()))
    runs = [_run(make, n, epochs, tree) for make in makers for tree in (False, True)]
    assert all(run == runs[0] for run in runs), runs
    told, releases, arrivals, waiting = runs[0]
    assert releases == len(epochs) and arrivals == n * len(epochs) and waiting == 0
    gathered = tuple(b"m%d" % t for t in range(n))
    for epoch, (operation, _) in enumerate(epochs):
        if operation == ALL_GATHER:   # every task got every message, by rank
            assert any(f"messages={gathered!r}" in r for _, _, r in told if f"Released(epoch={epoch}," in r)
