"""The virtual loop runs the same events in the same order at the same times however it is
driven: ``run()`` (its inlined loop), ``step()`` one event at a time, ``run_until`` in
slices, or ``run_instant`` an instant at a time (or ``run_instants``, its loop written out), for any mix of events that schedule more
(now or later), cancel others, and a stream of ``call_each`` calls. A driver that works at
each instant's end (work that schedules more events, for now too) sees with ``run_instant``
what it would stepping and asking whether an event is still due now."""
from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from gangmaster.tools.rmsim.clock import VirtualLoop


def drive(seed: int, how: str, ends: bool = False) -> tuple[list, int]:
    rng = random.Random(seed)
    loop = VirtualLoop()
    trace: list = []
    timers: list = []
    budget = [80]
    asked: list[str] = []   # the events that asked for work at their instant's end (``ends``)

    def event(name: str) -> None:
        trace.append(("event", name, loop.now()))
        if budget[0] <= 0:
            return
        budget[0] -= 1
        for _ in range(rng.randint(0, 2)):
            timers.append(loop.call_later(rng.choice([0.0, 0.0, 1.0, 2.5]), event, f"{name}.{len(timers)}"))
        if ends and rng.random() < 0.6:
            asked.append(name)
        if timers and rng.random() < 0.3:
            loop.cancel(rng.choice(timers))

    def end_of_instant() -> None:
        names = list(asked)
        asked.clear()
        for name in names:
            trace.append(("end", name, loop.now()))
            if budget[0] > 0 and rng.random() < 0.5:
                budget[0] -= 1
                timers.append(loop.call_later(rng.choice([0.0, 1.0]), event, f"end-of-{name}"))

    for i in range(rng.randint(1, 4)):
        timers.append(loop.call_at(float(rng.randint(0, 4)), event, f"start{i}"))
    loop.call_each(event, sorted((float(rng.randint(0, 6)), (f"arrival{i}",)) for i in range(rng.randint(0, 5))))
    if how == "run":
        loop.run()
    elif how == "instants":
        while loop.run_instant():
            end_of_instant()
    elif how == "run_instants":   # (the loop written out: a trace replay's driver)
        loop.run_instants(end_of_instant)
    elif how == "step":
        while loop.step():
            if ends and (loop.next_time() is None or loop.next_time() > loop.now()):   # the instant is over
                end_of_instant()
    else:
        t, slices = 0.0, random.Random(seed + 1)   # (not the events' own random numbers)
        while loop.next_time() is not None:
            loop.run_until(t)
            t += slices.choice([0.5, 1.0, 3.0])
        loop.run()
    return trace, loop.events_run


@settings(max_examples=300)
@given(st.integers(0, 2**32 - 1))
def test_every_way_of_driving_the_loop_runs_the_same(seed):
    ran = drive(seed, "run")
    assert drive(seed, "step") == ran
    assert drive(seed, "until") == ran
    assert drive(seed, "instants") == ran
    assert drive(seed, "run_instants") == ran


@settings(max_examples=300)
@given(st.integers(0, 2**32 - 1))
def test_work_at_each_instants_end_runs_as_stepping_would_run_it(seed):
    assert drive(seed, "instants", ends=True) == drive(seed, "step", ends=True) == drive(seed, "run_instants", ends=True)
