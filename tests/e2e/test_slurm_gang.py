"""Gangs on a real (local) Slurm cluster through `gangmaster run --rm slurm`: exact GPUs
and the barrier, a killed task restarting the gang, an impossible ask refused at
submission, two gangs that fit only one at a time. Skipped, saying why, where Slurm
cannot run (see slurm_cluster.require_slurm)."""
from __future__ import annotations

import socket

import pytest

from gangmaster.protocol.rm_protocol import AllocateRequest, ApplicationSubmission, ResourceRequest
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.tools.slurm.client import SlurmRMClient
from gangmaster.tools.slurm.listeners import listeners
from gangmaster.tools.slurm.local_cluster import loopback_address

from slurm_cluster import Runner, job_yaml, records, start_cluster
from task_procs import marked, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = start_cluster(tmp_path_factory.mktemp("slurm-gang"))
    yield cluster
    cluster.stop()


@pytest.fixture
def runner(cluster, tmp_path):
    runner = Runner(cluster, tmp_path)
    yield runner
    runner.clean_up()


def test_every_daemon_listens_on_the_loopback_address_only(cluster):
    """The daemons run any request as root, unauthenticated (auth/none): no other machine
    may reach them. Each listens on the address this machine's name resolves to, nothing
    on 0.0.0.0 or [::]."""
    address = loopback_address(socket.gethostname())
    if address is None:
        pytest.skip(f"{socket.gethostname()} does not resolve to 127.0.0.1: Slurm 22.05 cannot bind its "
                    f"daemons to one (start says so: test_slurm_restart)")
    daemons = cluster.daemons()
    found = listeners(d.port for d in daemons)
    assert {d.name: found.get(d.port) for d in daemons} == {d.name: [address] for d in daemons}
    assert len(daemons) == 6   # slurmctld and the five nodes' slurmd


def test_a_gang_of_four_over_three_nodes_gets_exact_gpus_and_meets_at_the_barrier(runner, tmp_path):
    job = tmp_path / "gang.yaml"
    job.write_text(job_yaml("slurm-gang"))
    code, [report], err = runner.run(job, work_dir=tmp_path / "run")
    assert code == 0, err
    assert report["outcome"] == "succeeded"
    [attempt] = report["attempts"]
    tasks = attempt["tasks"]
    assert len(tasks) == 4 and len({t["host"] for t in tasks}) == 3
    passed = records(tmp_path / "run" / "output", "passed", 1)
    assert [p["rank"] for p in passed] == [0, 1, 2, 3]          # every task passed the barrier
    for task, seen in zip(sorted(tasks, key=lambda t: t["rank"]), passed):
        # Slurm ran each task on the node the AM chose, with exactly the GPUs the AM chose
        assert seen["slurm_node"] == seen["host"] == task["host"]
        assert seen["cuda"] == ",".join(map(str, task["gpus"])) == seen["gpus"]
        assert len(task["gpus"]) == (1 if task["role"] == "chief" else 2)
    # nothing of the run outlives it: not a task, not a launcher, not an srun
    wait_until(lambda: not marked(runner.marker), 20, "every process of the run to end")


def test_a_killed_task_restarts_the_whole_gang(runner, tmp_path):
    job = tmp_path / "gang.yaml"
    job.write_text(job_yaml("slurm-kill"))
    code, [report], err = runner.run(job, work_dir=tmp_path / "run", GANG_TEST_KILL="1")
    assert code == 0, err
    first, second = report["attempts"]
    assert first["outcome"] == "failed" and "exited with status 137" in first["reason"]
    assert second["outcome"] == "succeeded"
    assert len(records(tmp_path / "run" / "output", "passed", 2)) == 4
    assert not records(tmp_path / "run" / "output", "passed", 1)   # nobody of attempt 1 got through
    wait_until(lambda: not marked(runner.marker), 20, "every process of the run to end")


def test_an_impossible_gang_is_refused_at_submission(runner, tmp_path):
    job = tmp_path / "huge.yaml"
    job.write_text(job_yaml("slurm-huge", worker_gpus=8))
    code, [report], _err = runner.run(job, work_dir=tmp_path / "run")
    assert code == 1
    assert report["outcome"] == "failed"
    assert "can never run on this cluster" in report["reason"] and "gpus too small" in report["reason"]


def test_slurm_itself_rejects_an_ask_no_node_can_hold(cluster, tmp_path):
    """The AM's own view refuses such a gang before it asks; an ask that gets through
    anyway (a GPU the node lacks) is refused by sbatch and comes back as a rejection."""
    client = SlurmRMClient(tmp_path / "state", env=cluster.env)
    app = client.submit(ApplicationSubmission("impossible"))
    client.register(app)
    ask = ResourceRequest(7, ResourceDescriptor(512, 1, 1, 1 << 7), host="gpu-000", relax_locality=False)
    response = client.allocate(AllocateRequest(app, 1, asks=(ask,)))
    [rejection] = response.rejected
    assert rejection.request_id == 7
    assert "Requested node configuration is not available" in str(rejection.reason)
    client.finish(app, 1)


def test_two_gangs_that_fit_only_one_at_a_time_both_finish(runner, tmp_path):
    jobs = []
    for name in ("slurm-first", "slurm-second"):   # each takes every GPU of three of the four nodes
        jobs.append(tmp_path / f"{name}.yaml")
        jobs[-1].write_text(job_yaml(name, chief_gpus=1, worker_gpus=3, workers=3))
    code, reports, err = runner.run(*jobs, work_dir=tmp_path / "run", GANG_TEST_HOLD_S="2")
    assert code == 0, err
    assert [r["outcome"] for r in reports] == ["succeeded", "succeeded"]
    spans = sorted((r["attempts"][-1]["started_at"], r["attempts"][-1]["ended_at"]) for r in reports)
    assert spans[0][1] <= spans[1][0] + 1.0   # one after the other: they never held the GPUs together
