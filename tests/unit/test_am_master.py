"""The ApplicationMaster on the RM simulator in virtual time: all-or-nothing
launch, completion, whole-gang restart, never-fits at submission, waiting,
re-selection after a conflict, and AM failover from the journal."""
from dataclasses import replace
from pathlib import Path

import pytest

from gangmaster.am.spec.am_settings import AMSettings
from gangmaster.am.spec.jobspec import load_job, parse_job
from gangmaster.am.core.lifecycle import RoleState, TaskState
from gangmaster.am.core.journal import read_records
from gangmaster.protocol.rm_protocol import (AllocateRequest, ApplicationSubmission, ContainerState, ExitStatus,
                                       LaunchContext, ResourceRequest)
from gangmaster.conf import conf_path
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.cluster_file import default_cluster_path, load_cluster_specs
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.tools.job_runner import SimulatedRuns
from gangmaster.tools.rmsim.scenario import Scenario
from gangmaster.tools.rmsim.workload import raw_task_env
from job_texts import one_role_job

PORTS = PortRanges.parse("20000-20099")


def gpu_nodes(n: int, gpus: int = 4, prefix: str = "n") -> list[NodeSpec]:
    return [NodeSpec(f"{prefix}{i}", f"rack-{i % 2}", frozenset(), "V100", None, 65536, 16, gpus, PORTS)
            for i in range(n)]


def job(name: str = "j", instances: int = 4, gpus: int = 1, duration: float = 60, fail: str = "", retry: int = 0,
        ports: str = "") -> str:
    """The tests' job, whose failures restart it whole; ``fail``: its role's failures to inject
    (the role's gangmaster keys)."""
    return one_role_job(name, instances, gpus=gpus, duration=duration, ports=ports, role_gangmaster=fail, retry=retry,
                        job_gangmaster="retryScope: job")


def run_jobs(specs, *texts, settings=None, scenario=None, queues=None, tmp_path=Path("."), queue_names=None):
    runs = SimulatedRuns(specs, settings or AMSettings(), queues=queues, scenario=scenario)
    for k, text in enumerate(texts):
        spec = parse_job(text)
        queue = queue_names[k] if queue_names else "default"
        runs.submit(spec, tmp_path / f"{k}-{spec.name}", queue)
    done = runs.run()
    runs.sim.core.check_invariants()
    return runs, done


def test_mpi_job_starts_whole_and_succeeds_on_the_default_cluster(tmp_path):
    spec = load_job(conf_path("jobs/mpi-allreduce.yaml"))
    runs = SimulatedRuns(load_cluster_specs(default_cluster_path()))
    run = runs.submit(spec, tmp_path)
    assert runs.run()
    am = run.am
    assert am.outcome == "succeeded"
    (attempt,) = am.history()
    assert attempt.outcome == "succeeded" and len(attempt.tasks) == 4
    assert len({t.started_at for t in attempt.tasks}) == 1           # all started in one heartbeat
    assert all(t.host.startswith("dgx1") for t in attempt.tasks)     # nodeLabel nvlink
    for host in {t.host for t in attempt.tasks}:
        gpus = [g for t in attempt.tasks if t.host == host for g in t.gpus]
        assert len(gpus) == len(set(gpus))                           # no GPU given twice
    assert all(t.ports.get("mpi") for t in attempt.tasks)
    assert attempt.ended_at - attempt.started_at == pytest.approx(120, abs=2)   # simulatedDurationSeconds
    assert am.role_states() == {"worker": RoleState.SUCCEEDED}


def test_pai_environment_names_every_peer(tmp_path):
    runs = SimulatedRuns(gpu_nodes(2))
    run = runs.submit(parse_job(job(instances=3, ports="{ssh: 1, nccl: 2}")), tmp_path)
    runs.sim.run_until(1.5)
    core = runs.sim.core
    started = [c for c in core.containers.values() if c.launch is not None]
    assert len(started) == 3
    envs = {c.container_id: c.launch.env_dict for c in started}
    env0 = next(e for e in envs.values() if e["PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"] == "0")
    hosts = env0["PAI_TASK_ROLE_worker_HOST_LIST"].split(",")
    assert len(hosts) == 3 and env0["PAI_TASK_ROLE_TASK_COUNT_worker"] == "3"
    for c in started:
        env = envs[c.container_id]
        i = env["PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"]
        assert env[f"PAI_HOST_IP_worker_{i}"] == core.ledger.hosts[c.node]
        assert len(env[f"PAI_PORT_LIST_worker_{i}_nccl"].split(",")) == 2
        assert env["PAI_TASK_ROLE_worker_HOST_LIST"] == env0["PAI_TASK_ROLE_worker_HOST_LIST"]
    runs.run()
    assert run.outcome == "succeeded"


def test_a_failed_task_restarts_the_whole_gang_as_a_new_attempt(tmp_path):
    text = job(instances=4, retry=2, fail="failOnAttempts: [1], failInstance: 2, failExitCode: 3",
               duration=30)
    runs, done = run_jobs(gpu_nodes(2), text, tmp_path=tmp_path)
    am = runs.runs[0].am
    assert done and am.outcome == "succeeded"
    first, second = am.history()
    assert (first.attempt, first.outcome, second.attempt, second.outcome) == (1, "failed", 2, "succeeded")
    failed = first.failures()
    assert [(t.name, t.exit_status) for t in failed] == [("worker[2]", 3)]
    assert "worker[2] exited with status 3" in first.reason
    # every task of attempt 1 ended with it, none of attempt 1 runs on; attempt 2 is all new containers
    assert {t.container_id for t in first.tasks}.isdisjoint(t.container_id for t in second.tasks)
    core = runs.sim.core
    assert all(core.containers[t.container_id].state.finished for t in first.tasks)
    assert second.started_at >= first.ended_at
    assert all(t.state is TaskState.SUCCEEDED for t in second.tasks)


def test_last_attempt_fails_the_job_with_every_attempts_history(tmp_path):
    text = job(instances=2, retry=1, fail="failOnAttempts: [1, 2], failInstance: 1")
    runs, done = run_jobs(gpu_nodes(2), text, tmp_path=tmp_path)
    am = runs.runs[0].am
    assert done and am.outcome == "failed"
    assert [a.outcome for a in am.history()] == ["failed", "failed"]
    assert all(a.failures()[0].name == "worker[1]" for a in am.history())
    assert "attempt 2 of 2 failed" in am.reason
    assert runs.sim.client.application_report(runs.runs[0].app_id).final_status == "FAILED"


MIN_SUCCEEDED_JOB = """
protocolVersion: 2
name: chief-decides
type: job
taskRoles:
  chief:
    instances: 1
    resourcePerInstance: {cpu: 1, memoryMB: 1024, gpu: 0}
    commands: [chief]
    completion: {minSucceededInstances: 1}
    gangmaster: {simulatedDurationSeconds: 10}
  worker:
    instances: 3
    resourcePerInstance: {cpu: 1, memoryMB: 1024, gpu: 1}
    commands: [train]
    gangmaster: {simulatedDurationSeconds: 100}
"""


def test_min_succeeded_ends_the_job_and_stops_the_rest(tmp_path):
    runs, done = run_jobs(gpu_nodes(2), MIN_SUCCEEDED_JOB, tmp_path=tmp_path)
    am = runs.runs[0].am
    assert done and am.outcome == "succeeded" and "minSucceededInstances" in am.reason
    (attempt,) = am.history()
    assert attempt.ended_at - attempt.started_at == pytest.approx(10, abs=1.5)
    core = runs.sim.core
    workers = [t for t in attempt.tasks if t.role == "worker"]
    assert len(workers) == 3
    assert all(core.containers[t.container_id].exit_status == ExitStatus.KILLED_BY_APPMASTER for t in workers)
    assert all(t.state is TaskState.STOPPED for t in workers)


def test_a_gang_that_can_never_fit_fails_at_submission_with_numbers(tmp_path):
    runs, done = run_jobs(gpu_nodes(3, gpus=4), job(instances=4, gpus=4), tmp_path=tmp_path)
    am = runs.runs[0].am
    assert done and am.outcome == "failed"
    assert "even on the empty cluster" in am.reason and "3/4 instances placed" in am.reason
    assert am.history() == []                          # no attempt was ever begun
    assert not runs.sim.core.containers


def test_a_gang_bigger_than_its_queue_fails_at_submission(tmp_path):
    from gangmaster.tools.rmsim.queues import Queue
    queues = [Queue("small", max_gpus=8), Queue("big")]
    text = job(instances=3, gpus=4)                 # 12 GPUs: fits the cluster (3 x 4-GPU nodes), not queue small
    runs, done = run_jobs(gpu_nodes(3, gpus=4), text, text.replace("name: j", "name: k"), queues=queues,
                          queue_names=["small", "big"], tmp_path=tmp_path)
    small, big = (r.am for r in runs.runs)
    assert done and small.outcome == "failed" and big.outcome == "succeeded"
    assert small.reason == "gang worker can never run in queue small: 12 GPUs in all, the queue is limited to 8"
    assert not [c for c in runs.sim.core.containers.values() if c.app_id == runs.runs[0].app_id]


def test_a_gang_that_fits_only_an_empty_cluster_waits_then_runs(tmp_path):
    first = job("first", instances=2, gpus=4, duration=100)
    second = job("second", instances=2, gpus=4, duration=50)
    runs, done = run_jobs(gpu_nodes(2, gpus=4), first, second, tmp_path=tmp_path)
    a, b = (r.am for r in runs.runs)
    assert done and a.outcome == b.outcome == "succeeded"
    (att_b,) = b.history()
    assert att_b.started_at >= a.history()[0].ended_at       # it waited for the first to finish
    assert att_b.started_at - att_b.waiting_since >= 99
    log = (tmp_path / "1-second" / "am-1.log").read_text()
    assert "waiting" in log and "nodes fit role worker" in log   # the why, in numbers


def test_a_node_taken_by_another_am_triggers_reselection_not_a_hang(tmp_path):
    # Two other applications hold n0 (until t=50) and n1 (until t=100); a third, ahead of
    # ours in the queue, waits for any whole node. When n0 frees, our AM sees it free and
    # asks for it, but the RM gives it to the application ahead. Our ask can never be
    # granted now: the AM must notice, select again, and run on n1 when that frees.
    # The RM schedules on its own clock (as YARN does), so our AM hears of n0 free before
    # the pass that gives it to the application ahead.
    runs = SimulatedRuns(gpu_nodes(2, gpus=4), AMSettings(reselect_after_s=5), scheduling_interval_s=1)
    rm = runs.sim.client
    whole = R(1024, 1, gpus=4)
    for name, host, duration in (("d", "n0", 50), ("e", "n1", 100)):
        app = rm.submit(ApplicationSubmission(name))
        attempt = rm.register(app).attempt
        rm.allocate(AllocateRequest(app, attempt, asks=(ResourceRequest(1, whole, host=host, relax_locality=False),)))
        runs.core.schedule()
        (c,) = rm.allocate(AllocateRequest(app, attempt)).allocated
        rm.start_container(c.container_id, LaunchContext.of(env=raw_task_env(duration)))
    ahead = rm.submit(ApplicationSubmission("ahead"))
    rm.allocate(AllocateRequest(ahead, rm.register(ahead).attempt, asks=(ResourceRequest(1, whole),)))
    run = runs.submit(parse_job(job("ours", instances=1, gpus=4, duration=10)), tmp_path)
    assert runs.run()
    assert run.outcome == "succeeded"
    (attempt,) = run.am.history()
    assert attempt.reselections >= 1
    assert attempt.tasks[0].host == "n1" and 100 <= attempt.started_at <= 102
    assert "selecting again" in (tmp_path / "am-1.log").read_text()


def test_am_failover_recovers_the_attempt_and_keeps_the_tasks_running(tmp_path):
    scenario = Scenario.parse("events: [{at: 30, do: kill_am, app: app_0001}]")
    text = job(instances=4, duration=100)
    runs, done = run_jobs(gpu_nodes(2), text, scenario=scenario, tmp_path=tmp_path)
    run = runs.runs[0]
    assert done and run.outcome == "succeeded" and len(run.ams) == 2
    first_am, second_am = run.ams
    (attempt,) = second_am.history()                          # still attempt 1: nothing restarted
    assert attempt.attempt == 1 and attempt.outcome == "succeeded"
    core = runs.sim.core
    for task in attempt.tasks:                                # the same containers ran to completion
        rec = core.containers[task.container_id]
        assert rec.state is ContainerState.COMPLETED and rec.exit_status == 0
    assert {t.container_id for t in attempt.tasks} == {t.container_id for t in first_am.gangs[0].tasks}
    log1 = (tmp_path / "0-j" / "am-1.log").read_text()
    log2 = (tmp_path / "0-j" / "am-2.log").read_text()
    assert "started all 4 task(s)" in log1                    # the first AM's log is still there
    assert "recovered 4 task(s), 4 still running" in log2
    kinds = [r["kind"] for r in read_records(tmp_path / "0-j" / "journal.jsonl")]
    assert kinds.count("am_started") == 2 and kinds.count("launched") == 1


def test_am_failover_while_acquiring_acquires_again(tmp_path):
    # The AM dies while its gang waits behind another job: the new AM picks the same
    # attempt up, waits, and runs it; nothing is started twice.
    scenario = Scenario.parse("events: [{at: 20, do: kill_am, app: app_0002}]")
    first = job("first", instances=2, gpus=4, duration=60)
    second = job("second", instances=2, gpus=4, duration=30)
    runs, done = run_jobs(gpu_nodes(2, gpus=4), first, second, scenario=scenario, tmp_path=tmp_path)
    run = runs.runs[1]
    assert done and run.outcome == "succeeded" and len(run.ams) == 2
    (attempt,) = run.am.history()
    assert attempt.attempt == 1 and len(attempt.tasks) == 2


def test_journal_ignores_a_line_cut_short_by_a_kill(tmp_path):
    path = tmp_path / "journal.jsonl"
    path.write_text('{"kind": "am_started", "am_attempt": 1, "t": 0}\n{"kind": "gang_att')
    assert [r["kind"] for r in read_records(path)] == ["am_started"]


def test_same_seed_same_run(tmp_path):
    def once(where):
        text = job(instances=5, retry=1, fail="failOnAttempts: [1], failInstance: 4")
        runs, _ = run_jobs(gpu_nodes(3), text, tmp_path=where)
        return [(a.attempt, a.outcome, [(t.name, t.host, t.gpus, t.started_at) for t in a.tasks])
                for a in runs.runs[0].am.history()]
    assert once(tmp_path / "a") == once(tmp_path / "b")


def deadlock_prone(hold_timeout_s: float, tmp_path):
    """Three 3-node gangs on a 5-node cluster, each in its own queue: each fits alone,
    no two fit together. The RM schedules on its own clock, so the asks the three AMs
    send in the same second compete in one pass and the grants interleave: at t=1 all
    three pick the same three nodes and get one each; the reselected rest splits the
    last two nodes. Everyone holds part of a gang and nobody can complete. The nodes'
    memory differs so that job packing orders them alike for every AM (each AM breaks
    exact ties with its own seed)."""
    from gangmaster.tools.rmsim.queues import Queue
    settings = AMSettings(hold_timeout_s=hold_timeout_s, release_backoff_s=10, max_virtual_time_s=3000)
    queues = [Queue("qa"), Queue("qb"), Queue("qc")]
    texts = [job(name, instances=3, gpus=4, duration=100) for name in ("a", "b", "c")]
    nodes = [replace(n, memory_mb=n.memory_mb - 1024 * i) for i, n in enumerate(gpu_nodes(5, gpus=4))]
    runs = SimulatedRuns(nodes, settings, queues=queues, scheduling_interval_s=1.0)
    for k, text in enumerate(texts):
        spec = parse_job(text)
        runs.submit(spec, tmp_path / spec.name, queues[k].name)
    done = runs.run()
    runs.sim.core.check_invariants()
    return runs, done


def test_gangs_that_fit_alone_but_not_together_all_finish(tmp_path):
    runs, done = deadlock_prone(60, tmp_path)
    assert done and [r.outcome for r in runs.runs] == ["succeeded"] * 3
    histories = [r.am.history() for r in runs.runs]
    assert sum(h[0].releases for h in histories) >= 2      # partial holds were given back
    spans = sorted((h[0].started_at, h[0].ended_at) for h in histories)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))   # one at a time
    assert any("released" in (tmp_path / r.job.name / "am-1.log").read_text() for r in runs.runs)


def test_without_releases_the_same_gangs_deadlock(tmp_path):
    # The control: with a hold timeout longer than the run, nobody gives anything back.
    runs, done = deadlock_prone(1e9, tmp_path)
    assert not done
    held = [len(r.am.gangs[0].acquisition.granted) for r in runs.runs]
    assert sum(held) == 5 and all(0 < h < 3 for h in held)


ROLE_SCOPE_JOB = """
protocolVersion: 2
name: two-gangs
type: job
taskRoles:
  ps:
    instances: 1
    taskRetryCount: 0
    resourcePerInstance: {cpu: 1, memoryMB: 1024, gpu: 0}
    commands: [serve]
    gangmaster: {simulatedDurationSeconds: 200}
  worker:
    instances: 2
    taskRetryCount: 2
    resourcePerInstance: {cpu: 1, memoryMB: 1024, gpu: 1}
    commands: [train]
    gangmaster: {simulatedDurationSeconds: 50, failOnAttempts: [1], failInstance: 1}
gangmaster:
  gangs: [[ps], [worker]]
  retryScope: role
"""


def test_role_scope_restarts_only_the_failed_roles_gang(tmp_path):
    runs, done = run_jobs(gpu_nodes(2), ROLE_SCOPE_JOB, tmp_path=tmp_path)
    am = runs.runs[0].am
    assert done and am.outcome == "succeeded"
    by_gang = {}
    for a in am.history():
        by_gang.setdefault(a.gang, []).append(a)
    (ps,) = by_gang["ps"]                                  # never restarted: one attempt, 200 s
    assert ps.outcome == "succeeded" and ps.ended_at - ps.started_at == pytest.approx(200, abs=2)
    first, second = by_gang["worker"]
    assert (first.outcome, second.outcome, second.attempt) == ("failed", "succeeded", 2)
    assert second.started_at < ps.ended_at                 # the worker gang restarted while ps ran on


@pytest.mark.parametrize("coordinator", ["outlives the AM", "dies with the AM"])
def test_failover_keeps_the_barrier_tokens_the_running_tasks_hold(tmp_path, coordinator):
    from gangmaster.am.barrier.config import BarrierConfig
    from gangmaster.am.barrier.server import BarrierServer

    servers: list[BarrierServer] = []

    class WithBarrier(SimulatedRuns):
        def _am_extras(self, run):
            if not servers or coordinator == "dies with the AM":
                servers.append(BarrierServer(BarrierConfig()))
                servers[-1].start()
            return {"barrier": servers[-1]}

    try:
        runs = WithBarrier(gpu_nodes(2))
        Scenario.parse("events: [{at: 30, do: kill_am, app: app_0001}]").schedule(runs.sim.core)
        run = runs.submit(parse_job(job(instances=2, duration=100)), tmp_path)
        runs.sim.run_until(20)
        token_before = servers[0].task_env(run.app_id, "worker", 1, 1)["GANGMASTER_BARRIER_TOKEN"]
        runs.sim.run_until(40)                                 # the AM died at 30 and a new one recovered
        assert len(run.ams) == 2
        assert len(servers) == (1 if coordinator == "outlives the AM" else 2)
        assert servers[-1].task_env(run.app_id, "worker", 1, 1)["GANGMASTER_BARRIER_TOKEN"] == token_before
        assert runs.run() and run.outcome == "succeeded"
    finally:
        for server in servers:
            server.stop(grace=0)


def test_failover_after_the_barrier_ended_an_attempt_the_journal_still_shows_running(tmp_path, coordinated_runs):
    """The AM failed the attempt's barrier and died before it journaled the restart: the
    coordinator (which outlived it) has ended the attempt, the journal says it runs. The
    new AM must come up and carry the job to its end, not crash reopening the barrier."""
    runs_class, server = coordinated_runs
    runs = runs_class(gpu_nodes(2))
    Scenario.parse("events: [{at: 30, do: kill_am, app: app_0001}]").schedule(runs.sim.core)
    run = runs.submit(parse_job(job(instances=2, duration=100)), tmp_path)
    runs.sim.run_until(25)
    server.fail_attempt(run.app_id, "worker", 1, "the AM is restarting the gang")
    assert runs.run(), "the job did not end"
    assert len(run.ams) == 2
    assert run.outcome == "succeeded"


def test_an_am_starting_on_an_idle_cluster_places_its_gang_once(tmp_path):
    """The never-fits check places the gang on the idle cluster itself: that placement is
    the gang's first (the same hosts as placing it afresh would give), not made twice."""
    from gangmaster.am.core import gang_placement

    placements = []
    place_roles = gang_placement._place_roles

    def counting(*args, **kwargs):
        placements.append(args[1])
        return place_roles(*args, **kwargs)

    gang_placement._place_roles = counting
    try:
        runs = SimulatedRuns(gpu_nodes(3))
        one = runs.submit(parse_job(job(instances=6)), tmp_path / "run")
        assert runs.run() and one.outcome == "succeeded"
    finally:
        gang_placement._place_roles = place_roles
    assert len(placements) == 1
    view = runs.sim.core.ledger
    fresh = gang_placement.place_gang(gang_placement.ClusterView(view.specs), one.am.job.gang_roles(0),
                                      one.am.placement.pipeline_for)
    assert sorted(t.host for t in one.am.history()[-1].tasks) == sorted(p.host for p in fresh.instances)
