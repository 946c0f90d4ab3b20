"""A simulated run freezes what existed before it for the collector (the cluster, the jobs,
their AMs) and hands it all back when it ends, however it ends."""
import gc

import pytest

from gangmaster.am.spec.jobspec import parse_job
from gangmaster.tools.job_runner import SimulatedRuns

from job_texts import one_role_job
from sim_cluster import nodes

JOB = one_role_job(instances=2, duration=5)


def runs():
    return SimulatedRuns(nodes(1))


def test_the_run_sees_the_world_frozen_and_unfreezes_it(tmp_path):
    sim = runs()
    run = sim.submit(parse_job(JOB), tmp_path)
    frozen = []
    sim.sim.loop.call_later(1.0, lambda: frozen.append(gc.get_freeze_count()))
    assert sim.run() and run.outcome == "succeeded"
    assert frozen and frozen[0] > 0
    assert gc.get_freeze_count() == 0


def test_a_run_that_raises_unfreezes_too(tmp_path):
    sim = runs()
    sim.submit(parse_job(JOB), tmp_path)

    def boom():
        raise RuntimeError("boom")

    sim.sim.loop.call_later(1.0, boom)
    with pytest.raises(RuntimeError, match="boom"):
        sim.run()
    assert gc.get_freeze_count() == 0


def test_tasks_that_exit_together_end_with_the_collector_paused_and_given_back(tmp_path):
    """The containers that exit at one instant are one burst (statuses, records): the
    simulated NodeManager reports them with the collector held off, then gives it back."""
    sim = runs()
    run = sim.submit(parse_job(JOB), tmp_path)
    core = sim.sim.core
    exited = core.container_exited
    seen = []

    def spying_exit(container_id, exit_code, diagnostics=""):
        seen.append(gc.isenabled())
        return exited(container_id, exit_code, diagnostics)

    core.container_exited = spying_exit
    was = gc.isenabled()
    gc.enable()
    try:
        assert sim.run() and run.outcome == "succeeded"
        assert seen == [False, False] and gc.isenabled()
    finally:
        if not was:
            gc.disable()
