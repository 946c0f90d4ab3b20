"""A replay's ended AMs are freed by reference counting, not left to the cycle collector.

The engine keeps the collector off for the whole run; an AM in a reference cycle would
pile up until its end (tens of thousands of them). This pins that an AM leaves no cycle."""
from __future__ import annotations

import gc

from gangmaster.am.core.master import ApplicationMaster
from gangmaster.tools.replay.engine import ReplayOptions, replay

from replay_helpers import cluster, job, table


def _cyclic_garbage_after(run) -> list:
    """What only the cycle collector would free after ``run()``, with it off meanwhile."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        run()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        garbage = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()
    return garbage


def test_an_ended_am_leaves_no_reference_cycle():
    jobs = [job(f"j{i}", submit_s=i * 10.0, duration_s=25.0, gpus=1 + i % 4) for i in range(30)]
    result = {}
    garbage = _cyclic_garbage_after(lambda: result.update(r=replay(table(jobs), cluster(4), ReplayOptions())))
    assert [j.outcome for j in result["r"].jobs] == ["succeeded"] * len(jobs)
    assert not [o for o in garbage if isinstance(o, ApplicationMaster)]



def test_a_replay_leaves_nothing_of_its_run_to_the_collector():
    """A process that replays again and again (a family's workers) keeps only the outcomes:
    the run's cycles (the RM's callbacks hold the driver) are collected as the replay
    returns, not left in the oldest generation with every job they reach."""
    from gangmaster.tools.replay import engine

    jobs = [job(f"j{i}", submit_s=i * 10.0, duration_s=25.0, gpus=1 + i % 4) for i in range(30)]
    gc.collect()
    result = replay(table(jobs), cluster(4), ReplayOptions())
    left = [o for o in gc.get_objects() if isinstance(o, (engine._Replay, engine._Job, ApplicationMaster))]
    assert [j.outcome for j in result.jobs] == ["succeeded"] * len(jobs)
    assert not left, f"{len(left)} of the run's objects await the collector: {sorted({type(o).__name__ for o in left})}"


def test_replays_one_after_another_keep_a_bounded_number_of_views():
    """What a run cuts loose from what existed before it (the module's memo of idle views
    drops an earlier run's view, with its indexes) is collected too, not left to the
    oldest generation: a family's workers grew by 40-75 MB a replay."""
    from gangmaster.am.core import gang_placement
    from gangmaster.selectors.cluster import ClusterView

    jobs = [job(f"j{i}", submit_s=i * 10.0, duration_s=25.0, gpus=1 + i % 4) for i in range(6)]
    gc.collect()
    for _ in range(3 * gang_placement._idle_views.limit):
        replay(table(jobs), cluster(4), ReplayOptions())   # a new cluster each time: a new idle view
    views = [o for o in gc.get_objects() if isinstance(o, ClusterView)]
    assert len(views) <= gang_placement._idle_views.limit, f"{len(views)} views alive after the replays"
