"""YARN's preemption contract in the RM simulator and the AM (tools/rmsim/preemption.py,
ApplicationMaster.on_preemption): the victim's AM is told first (which containers, by
when), its tasks are told, at the deadline every container of the gang ends PREEMPTED
(never some of them), and the gang starts again without spending a failure retry."""
import pytest

from gangmaster.protocol.rm_protocol import AllocateRequest, ContainerState, ExitStatus, WrongState
from gangmaster.tools.rmsim.simulation import Simulation

from test_am_events import gpu_nodes, job, start_am


def _preempted_once(tmp_path, attempts: int):
    sim = Simulation(gpu_nodes(2))
    text = job(instances=2, gpus=4, duration=100) + f"gangmaster: {{attempts: {attempts}}}\n"
    am = start_am(sim, text, tmp_path)
    sim.run_until(20)
    running = sorted(am.dispatch.running)
    assert len(running) == 2
    return sim, am, running


def test_the_am_is_told_first_and_the_whole_gang_ends_preempted_at_the_deadline(tmp_path):
    sim, am, running = _preempted_once(tmp_path, attempts=1)
    notice = sim.core.preempt(am.app_id, grace_s=30.0, reason="for a gang of priority 5")
    assert notice.containers == tuple(running) and notice.deadline == 50.0
    sim.run_until(49)   # told, not yet taken back: the tasks run on and know their deadline
    assert am.dispatch.preempted_until == 50.0
    assert sim.core.node_manager.notices == dict.fromkeys(running, 50.0)
    assert all(sim.core.containers[c].state is ContainerState.RUNNING for c in running)
    sim.run_until(51)
    assert [(sim.core.containers[c].state, sim.core.containers[c].exit_status) for c in running] == \
        [(ContainerState.KILLED, ExitStatus.PREEMPTED)] * 2
    sim.core.check_invariants()   # free + used = capacity


def test_a_preempted_gang_restarts_without_spending_a_failure_retry(tmp_path):
    # one attempt allowed: a preemption counted as a failure would fail the job
    sim, am, _ = _preempted_once(tmp_path, attempts=1)
    checked = []   # free + used = capacity at every container's grant and end, through the preemption
    sim.core.subscribe(lambda event: checked.append(sim.core.check_invariants()),
                       kinds=("container_allocated", "container_finished"))
    sim.core.preempt(am.app_id, grace_s=5.0)
    sim.run_until(400)
    assert am.outcome == "succeeded", am.reason
    history = am.history()
    assert [a.outcome for a in history] == ["preempted", "succeeded"]
    assert "preempted" in history[0].reason
    assert len(checked) == 6   # two preempted, two granted again, two ended


def test_a_task_that_ends_under_the_notice_ends_preempted_and_the_rest_keep_their_grace(tmp_path):
    sim, am, running = _preempted_once(tmp_path, attempts=1)
    sim.core.preempt(am.app_id, grace_s=30.0)
    sim.run_until(25)
    sim.core.container_exited(running[0], 0)   # it checkpointed and exited
    sim.run_until(30)
    first, second = (sim.core.containers[c] for c in running)
    assert (first.state, first.exit_status) == (ContainerState.KILLED, ExitStatus.PREEMPTED)
    assert second.state is ContainerState.RUNNING   # not stopped by its gang's restart: still in its grace
    sim.run_until(400)
    assert am.outcome == "succeeded"


def test_a_gang_already_under_notice_or_a_negative_grace_is_refused(tmp_path):
    sim, am, _ = _preempted_once(tmp_path, attempts=1)
    with pytest.raises(ValueError, match="grace_s"):
        sim.core.preempt(am.app_id, grace_s=-1.0)
    sim.core.preempt(am.app_id, grace_s=10.0)
    with pytest.raises(WrongState, match="holds no container"):
        sim.core.preempt(am.app_id, grace_s=1.0)


def test_a_waiting_gang_names_the_higher_priority_application_it_waits_behind(tmp_path):
    from gangmaster.protocol.rm_protocol import ApplicationSubmission, ResourceRequest
    from gangmaster.selectors.resources import ResourceDescriptor as R
    from gangmaster.tools.occupancy import simulated_occupants

    sim = Simulation(gpu_nodes(1))
    other = sim.client.submit(ApplicationSubmission("vip", priority=5))
    sim.client.register(other)
    sim.client.allocate(AllocateRequest(other, 1, asks=(ResourceRequest(1, R(1024, 1, gpus=4), host="n0",
                                                                        relax_locality=False),)))
    am = start_am(sim, job(instances=1, gpus=4), tmp_path, occupants=lambda: simulated_occupants(sim, am.app_id))
    sim.run_until(5)
    diagnosis = am.why.diagnose(am.gangs[0])
    assert "waits behind higher-priority work: vip" in diagnosis.summary()
