"""The virtual loop's order: events by (time, scheduling order); an instant at a time
(run_instant: every event due at that instant, those scheduled for it meanwhile included);
a stream of calls (call_each) in the order call_at would give them."""
import pytest

from gangmaster.tools.rmsim.clock import VirtualLoop


def _instant_by_instant(loop, at_end) -> None:
    """Drive ``loop`` an instant at a time, calling ``at_end()`` after each."""
    while loop.run_instant():
        at_end()


@pytest.fixture(params=["run_instant", "run_instants"])
def by_instants(request):
    """Each way to drive a loop an instant at a time: ``run_instant`` in a loop, or
    ``run_instants`` (that loop written out, as a trace replay drives its clock)."""
    if request.param == "run_instant":
        return _instant_by_instant
    return lambda loop, at_end: loop.run_instants(at_end)


def test_run_instant_runs_every_event_of_the_next_instant_and_stops_before_the_next(by_instants):
    loop, seen = VirtualLoop(), []

    def first():
        seen.append(("first", loop.now()))
        loop.call_at(5.0, seen.append, ("scheduled for now", 5.0))

    loop.call_at(5.0, first)
    loop.call_at(5.0, seen.append, ("second", 5.0))
    loop.call_at(6.0, seen.append, ("later", 6.0))
    by_instants(loop, lambda: seen.append(("end", loop.now())))
    assert seen == [("first", 5.0), ("second", 5.0), ("scheduled for now", 5.0), ("end", 5.0), ("later", 6.0),
                    ("end", 6.0)]
    assert loop.events_run == 4   # the driver's work at an instant's end is not an event
    assert not loop.run_instant()   # none is left


def test_work_at_an_instant_end_may_schedule_more_for_now_which_the_next_call_runs_at_that_instant(by_instants):
    loop, seen = VirtualLoop(), []

    def end():
        seen.append(("end", loop.now()))
        if seen.count(("end", 1.0)) == 1:
            loop.call_at(loop.now(), seen.append, ("zero-length task", loop.now()))

    loop.call_at(1.0, seen.append, ("event", 1.0))
    loop.call_at(2.0, seen.append, ("next instant", 2.0))
    by_instants(loop, end)
    assert seen == [("event", 1.0), ("end", 1.0), ("zero-length task", 1.0), ("end", 1.0), ("next instant", 2.0),
                    ("end", 2.0)]


def test_cancelled_events_do_not_hold_an_instant_open():
    loop, seen = VirtualLoop(), []
    loop.call_at(1.0, seen.append, "first")
    loop.cancel(loop.call_at(1.0, seen.append, "never"))
    loop.call_at(3.0, seen.append, "later")
    assert loop.run_instant() and seen == ["first"] and loop.now() == 1.0
    assert loop.has_one_shot_calls()   # "later" is still to come
    assert loop.run_instant() and seen == ["first", "later"] and loop.now() == 3.0
    assert not loop.has_one_shot_calls()


def test_an_instant_whose_every_event_was_cancelled_has_no_end(by_instants):
    loop, seen = VirtualLoop(), []
    loop.call_at(1.0, seen.append, "first")
    loop.cancel(loop.call_at(2.0, seen.append, "never"))
    loop.call_at(3.0, seen.append, "later")
    by_instants(loop, lambda: seen.append(("end", loop.now())))
    assert seen == ["first", ("end", 1.0), "later", ("end", 3.0)] and loop.events_run == 2


def test_stepping_one_event_at_a_time_or_an_instant_at_a_time_keeps_the_same_order_as_run(by_instants):
    def scenario(drive):
        loop, seen = VirtualLoop(), []

        def first():
            seen.append("first")
            loop.call_at(loop.now(), seen.append, "scheduled for now")

        loop.call_at(5.0, first)
        loop.call_at(5.0, seen.append, "second")
        loop.call_at(6.0, seen.append, "later")
        drive(loop)
        return seen, loop.events_run

    def by_steps(loop):
        while loop.step():
            pass

    assert (scenario(by_steps) == scenario(lambda loop: loop.run()) == scenario(lambda loop: by_instants(loop, list))
            == (["first", "second", "scheduled for now", "later"], 4))


def _order_of(schedule) -> list:
    """What runs, and when, once ``schedule(loop, seen)`` has scheduled its calls."""
    loop, seen = VirtualLoop(), []
    schedule(loop, seen)
    loop.run()
    return seen


def test_call_each_runs_its_calls_in_the_order_call_at_made_now_would():
    def others(loop, seen):
        def exit_at(name):
            seen.append((name, loop.now()))
            loop.call_at(loop.now() + 1.0, seen.append, (f"after {name}", loop.now() + 1.0))
        loop.call_at(2.0, exit_at, "other at 2")
        loop.call_at(3.0, exit_at, "other at 3")

    arrivals = [(1.0, ("a1",)), (2.0, ("a2",)), (3.0, ("a3",)), (3.0, ("a3 again",))]

    def one_by_one(loop, seen):
        for when, args in arrivals:
            loop.call_at(when, lambda name: seen.append((name, loop.now())), *args)
        others(loop, seen)

    def each(loop, seen):
        loop.call_each(lambda name: seen.append((name, loop.now())), arrivals)
        others(loop, seen)

    assert _order_of(each) == _order_of(one_by_one)
    loop = VirtualLoop()
    loop.call_each(print, [(float(t), ()) for t in range(100)])
    assert loop.pending == 1   # only the next of them is on the heap


def test_call_each_refuses_calls_out_of_time_order():
    with pytest.raises(ValueError, match="time order"):
        VirtualLoop().call_each(print, [(2.0, ()), (1.0, ())])


def test_the_loop_cancels_a_call_and_a_periodic_one_and_a_tick_is_not_a_one_shot_call():
    loop, seen = VirtualLoop(), []
    ticks = loop.every(1.0, lambda: seen.append(("tick", loop.now())))
    assert not loop.has_one_shot_calls()
    call = loop.call_at(2.5, seen.append, "never")
    assert loop.has_one_shot_calls() and call[0] == 2.5
    loop.cancel(call)
    assert not loop.has_one_shot_calls()
    loop.call_at(2.5, loop.cancel, ticks)
    loop.run()
    assert seen == [("tick", 1.0), ("tick", 2.0)] and loop.pending == 0
