"""The RM's preemption monitor in `gangmaster run` (``rm.preemption``): a higher-priority
job's gang that cannot start preempts the lower-priority gang in its way, whole, with the
configured grace; off (the default) nothing is preempted and the urgent job waits."""
from __future__ import annotations

import pytest

from gangmaster.am.spec.jobspec import parse_job
from gangmaster.protocol.rm_protocol import ExitStatus
from gangmaster.conf.fields import Fields
from gangmaster.conf.fields import ConfigError
from gangmaster.tools.job_runner import SimulatedRuns
from gangmaster.tools.rmsim.rm_settings import RMSettings
from job_texts import one_role_job
from sim_cluster import nodes


def job(name: str, priority: int, duration: float, instances: int = 2) -> str:
    """A gang of ``instances`` x 4 GPUs at ``priority``, one attempt."""
    return one_role_job(name, instances, gpus=4, duration=duration, job_gangmaster=f"priority: {priority}, attempts: 1")


def two_jobs(tmp_path, grace_s: float | None):
    """A low-priority 2-node gang running 1,000 s, then an urgent 2-node gang of 100 s on a
    2-node cluster; the monitor on with ``grace_s`` (None: off)."""
    runs = SimulatedRuns(nodes(2))
    if grace_s is not None:
        runs.monitor_preemption(grace_s)
    low = runs.submit(parse_job(job("low", 0, 1000)), tmp_path / "low")
    runs.sim.loop.run_until(5.0)          # low's gang holds both nodes
    urgent = runs.submit(parse_job(job("urgent", 5, 100)), tmp_path / "urgent")
    assert runs.run()
    return runs, low, urgent


@pytest.mark.parametrize("grace_s, urgent_before, low_attempts", [
    (None, False, 1),   # off: the urgent job waits for the low one to end
    (30.0, True, 2),    # on: low preempted whole (its attempt not counted), urgent runs first
    (0.0, True, 2),
])
def test_an_urgent_gang_preempts_the_lower_priority_gang_in_its_way(tmp_path, grace_s, urgent_before,
                                                                   low_attempts):
    runs, low, urgent = two_jobs(tmp_path, grace_s)
    assert (urgent.am.why.preemption is not None) == (grace_s is not None)   # its diagnosis says whom it will preempt
    assert (low.outcome, urgent.outcome) == ("succeeded", "succeeded")
    low_history, (urgent_attempt,) = low.am.history(), urgent.am.history()
    assert len(low_history) == low_attempts
    assert (urgent_attempt.ended_at < low_history[-1].ended_at) == urgent_before
    if grace_s is not None:
        first = low_history[0]
        assert first.outcome == "preempted"
        # the notice at the urgent gang's first look for room; the containers end grace_s later
        assert urgent_attempt.started_at == pytest.approx(first.ended_at, abs=2.0)
        statuses = [c for c in runs.core.granted.records.values() if c.app_id == low.app_id
                    and c.exit_status == ExitStatus.PREEMPTED]
        assert len(statuses) == 2   # whole gang


def test_equal_priorities_preempt_nothing(tmp_path):
    runs = SimulatedRuns(nodes(2))
    runs.monitor_preemption(0.0)
    low = runs.submit(parse_job(job("low", 0, 1000)), tmp_path / "low")
    runs.sim.loop.run_until(5.0)
    other = runs.submit(parse_job(job("other", 0, 100)), tmp_path / "other")
    assert runs.run()
    assert len(low.am.history()) == 1 and other.am.history()[0].started_at >= 1000


@pytest.mark.parametrize("knobs, error", [
    ({"preemption": "yes"}, "rm.preemption: expected true or false"),
    ({"preemption_grace_s": -1}, "rm.preemption_grace_s: expected a number >= 0"),
])
def test_bad_preemption_settings_are_refused_naming_the_knob(knobs, error):
    base = {"process_poll_s": 0.1, "kill_grace_s": 2.0, "state_save_interval_s": 0.2, "grpc_workers": 8,
            "allocation_expiry_s": 600, "scheduling_interval_s": None, "preemption": False,
            "preemption_grace_s": 30}
    with pytest.raises(ConfigError, match=error):
        RMSettings.from_fields(Fields({**base, **knobs}, "conf.yaml", "rm"))
