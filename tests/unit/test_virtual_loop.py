"""The virtual loop's order: events by (time, scheduling order); an instant's end calls
after every event due at that instant, those it scheduled for it included."""
from gangmaster.tools.rmsim.clock import VirtualLoop


def test_an_instant_end_call_runs_after_every_event_of_its_instant_and_before_the_next():
    loop, seen = VirtualLoop(), []

    def first():
        seen.append(("first", loop.now()))
        loop.at_instant_end(lambda: seen.append(("end", loop.now())))
        loop.call_at(5.0, seen.append, ("scheduled for now", 5.0))

    loop.call_at(5.0, first)
    loop.call_at(5.0, seen.append, ("second", 5.0))
    loop.call_at(6.0, seen.append, ("later", 6.0))
    loop.run()
    assert seen == [("first", 5.0), ("second", 5.0), ("scheduled for now", 5.0), ("end", 5.0), ("later", 6.0)]
    assert loop.events_run == 4   # the end call is not an event


def test_an_instant_end_call_may_schedule_more_for_now_and_ask_for_another_end():
    loop, seen = VirtualLoop(), []

    def end():
        seen.append("end")
        if seen.count("end") == 1:
            loop.call_at(loop.now(), seen.append, "zero-length task")
            loop.at_instant_end(end)

    loop.call_at(1.0, loop.at_instant_end, end)
    loop.call_at(1.0, loop.at_instant_end, lambda: seen.append("end of another"))
    loop.call_at(2.0, seen.append, "next instant")
    loop.run()
    assert seen == ["end", "end of another", "zero-length task", "end", "next instant"]


def test_cancelled_events_do_not_hold_an_instant_open():
    loop, seen = VirtualLoop(), []
    loop.call_at(1.0, loop.at_instant_end, lambda: seen.append("end"))
    loop.call_at(1.0, seen.append, "never").cancel()
    loop.call_at(3.0, seen.append, "later")
    loop.run_until(2.0)
    assert seen == ["end"] and loop.now() == 2.0
    assert loop.has_one_shot_calls()   # "later" is still to come
    loop.run()
    assert seen == ["end", "later"]


def test_an_instant_end_call_pending_counts_as_work_to_come():
    loop = VirtualLoop()
    loop.at_instant_end(lambda: None)
    assert loop.has_one_shot_calls()
    loop.run()
    assert not loop.has_one_shot_calls()


def test_stepping_one_event_at_a_time_keeps_the_same_order_as_run():
    def scenario(drive):
        loop, seen = VirtualLoop(), []

        def first():
            seen.append("first")
            loop.at_instant_end(lambda: seen.append("end"))
            loop.call_at(loop.now(), seen.append, "scheduled for now")

        loop.call_at(5.0, first)
        loop.call_at(5.0, seen.append, "second")
        loop.call_at(6.0, seen.append, "later")
        drive(loop)
        return seen, loop.events_run

    def by_steps(loop):
        while loop.step():
            pass

    assert scenario(by_steps) == scenario(lambda loop: loop.run()) == (
        ["first", "second", "scheduled for now", "end", "later"], 4)
