"""`gangmaster run --rm yarn` on a real YARN (one ResourceManager, three NodeManagers): the AM in
its YARN container over YarnRMClient places gangs on exact nodes with the GPUs it chose, holds
them to their barrier, restarts the whole gang when a task dies, places it elsewhere when a
node is lost, refuses what can never fit, never deadlocks two gangs, and survives its own
death (YARN's next AM attempt takes the tasks back). The cluster is the session's
(yarn_cluster.py); skipped, saying why, where Java or Maven is missing."""
from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from task_procs import killed_on_exit, wait_until
from yarn_cluster import REPO, YARN, Runner, job_yaml, records, reports

pytestmark = YARN

NM_HEARTBEAT_S = 1.0   # yarn.resourcemanager.nodemanagers.heartbeat-interval-ms: Hadoop's default


@pytest.fixture
def runner(yarn_session_cluster):
    runner = Runner(yarn_session_cluster)
    yield runner
    runner.clean_up()


def _node_ports(cluster) -> dict[str, int]:
    """gangmaster host -> its NodeManager's RPC port."""
    return {host: node["rpc_port"] for host, node in cluster.state()["nodes"].items()}


def _all_started(output: Path, attempt: int, count: int = 4):
    found = records(output, "started", attempt)
    return found if len(found) == count else None


def test_a_gang_on_exact_nodes_and_gpus_restarts_whole_when_a_task_dies(runner, yarn_cluster, tmp_path):
    job = tmp_path / "gang.yaml"
    job.write_text(job_yaml("yarn-gang"))
    code, [report], stderr = runner.run(job, work_dir=tmp_path / "run", GANG_TEST_KILL="1")
    assert code == 0, stderr
    first, second = report["attempts"]
    assert first["outcome"] == "failed" and "status 137" in first["reason"], first   # SIGKILL: 128 + 9
    assert second["outcome"] == "succeeded"
    output = tmp_path / "run" / "output"
    passed = records(output, "passed", 2)
    assert [p["rank"] for p in passed] == [0, 1, 2, 3]   # all four through the barrier
    ports = _node_ports(yarn_cluster)
    by_rank = {t["rank"]: t for t in second["tasks"]}
    for p in passed:
        task = by_rank[p["rank"]]
        assert int(p["nm_port"]) == ports[task["host"]], (p, task)        # YARN ran it on the node the AM chose
        assert p["cuda"] == ",".join(map(str, task["gpus"])) and p["cuda"], (p, task)   # with the GPUs it chose
        assert p["container"] == p["gm_container"] == task["container_id"]
    workers = [by_rank[r]["host"] for r in (1, 2, 3)]
    assert len(set(workers)) == 3                                          # maxInstancesPerNode 1: three NMs
    chief = by_rank[0]
    same_node = [t for t in second["tasks"] if t["host"] == chief["host"]]
    gpus = [g for t in same_node for g in t["gpus"]]
    assert len(gpus) == len(set(gpus)), same_node                          # no GPU given twice on a node


SHARE_JOB = """\
protocolVersion: 2
name: yarn-share
type: job
taskRoles:
  infer:
    instances: 2
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    commands: ["true"]
    gangmaster: {gpuMilli: 500}
"""


def test_asks_that_can_never_fit_fail_at_once_saying_why(runner, yarn_cluster, tmp_path):
    too_big = tmp_path / "too-big.yaml"
    too_big.write_text(job_yaml("yarn-too-big", worker_gpus=5))           # nodes have 4 GPUs
    share = tmp_path / "share.yaml"
    share.write_text(SHARE_JOB)
    started = time.monotonic()
    code, found, stderr = runner.run(too_big, share, work_dir=tmp_path / "run")
    assert code == 1, stderr
    big, shared = found
    assert big["outcome"] == "failed" and "can never run on this cluster" in big["reason"], big
    assert "5 GPU" in big["reason"] or "gpu" in big["reason"].lower(), big
    assert shared["outcome"] == "failed", shared
    assert "YARN counts whole GPUs" in shared["reason"], shared["reason"]   # refused by the client, not left pending
    assert time.monotonic() - started < 90


def test_two_gangs_that_fit_only_one_at_a_time_both_finish(runner, yarn_cluster_alone, tmp_path):
    config = tmp_path / "fast-release.yaml"
    config.write_text("am:\n  hold_timeout_s: 4\n  release_backoff_s: 1\n  release_backoff_max_s: 4\n"
                      "  reselect_after_s: 2\n")
    jobs = []
    for name in ("yarn-first", "yarn-second"):   # each takes every GPU of the cluster
        path = tmp_path / f"{name}.yaml"
        path.write_text(job_yaml(name, chief_gpus=4, worker_gpus=4, workers=2))
        jobs.append(path)
    code, found, stderr = runner.run(*jobs, work_dir=tmp_path / "run", extra=("--config", str(config)))
    assert code == 0, stderr
    assert [r["outcome"] for r in found] == ["succeeded", "succeeded"], found
    first, second = ([a for a in r["attempts"] if a["outcome"] == "succeeded"][0] for r in found)
    assert first["ended_at"] is not None and second["ended_at"] is not None


def test_a_real_openpai_job_runs(runner, yarn_cluster, tmp_path):
    code, [report], stderr = runner.run(REPO / "conf" / "jobs" / "mpi-allreduce.yaml", work_dir=tmp_path / "run")
    assert code == 0, stderr
    [attempt] = report["attempts"]
    assert attempt["outcome"] == "succeeded" and len(attempt["tasks"]) == 4
    assert (tmp_path / "run" / "output" / "hostfile").is_file()


def _am_pid(work_dir: Path) -> int | None:
    log = work_dir / "yarn" / "am-container.log"
    match = re.search(r"\(pid (\d+)\)", log.read_text()) if log.is_file() else None
    return int(match[1]) if match else None


def test_a_killed_am_is_replaced_by_yarn_and_takes_the_tasks_back(runner, yarn_cluster, tmp_path):
    job = tmp_path / "gang.yaml"
    job.write_text(job_yaml("yarn-failover"))
    work = tmp_path / "run"
    output = work / "output"
    with killed_on_exit(runner.start(job, work_dir=work, GANG_TEST_HOLD_S="90")) as proc:
        started = wait_until(lambda: _all_started(output, 1), 60, "every task of attempt 1 to start")
        # YARN carries over to the next AM attempt only the containers its RM has heard are running
        # (from each NodeManager's next heartbeat, every second); one it still holds as merely
        # acquired is killed with the attempt. Its REST API says RUNNING for both, so the test gives
        # the NodeManagers three heartbeats after the last task started.
        time.sleep(3 * NM_HEARTBEAT_S)
        os.kill(_am_pid(work), signal.SIGKILL)
        # the tasks go to their barrier at once: they find no AM, then YARN's next AM attempt
        # taking them back (its coordinator listens before it has reopened their barrier)
        (output / "release").touch()
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    [report] = reports(stdout, stderr)
    [attempt] = report["attempts"]          # the same attempt carried on: nothing restarted
    assert attempt["outcome"] == "succeeded" and report["am_attempts"] == 2
    passed = records(output, "passed", 1)
    assert [p["pid"] for p in passed] == [s["pid"] for s in started]   # the very processes of AM attempt 1
    assert "the RM kept 4 running container(s)" in (work / "am-2.log").read_text()


def test_a_lost_node_restarts_the_gang_on_the_others(runner, yarn_cluster_alone, tmp_path):
    job = tmp_path / "gang.yaml"
    job.write_text(job_yaml("yarn-node-lost", worker_gpus=1, per_node=2))
    output = tmp_path / "run" / "output"
    with killed_on_exit(runner.start(job, work_dir=tmp_path / "run", GANG_TEST_HOLD_S="90")) as proc:
        started = wait_until(lambda: _all_started(output, 1), 60, "every task of attempt 1 to start")
        victim = next(r["host"] for r in started if r["rank"] == 1)
        try:
            assert yarn_cluster_alone.stop_daemon(f"nodemanager {victim}") is not None
            stdout, stderr = proc.communicate(timeout=150)
        finally:
            runner.clean_up()    # the lost node's tasks: nobody stops them (their NodeManager is gone)
            yarn_cluster_alone.restart_node(victim)
    assert proc.returncode == 0, stderr
    [report] = reports(stdout, stderr)
    first, second = report["attempts"][0], report["attempts"][-1]
    assert first["outcome"] == "failed" and f"status -110 on {victim}" in first["reason"], first   # NODE_LOST
    lost = [t for t in first["tasks"] if t["host"] == victim]
    assert lost and all(t["exit_status"] == -110 for t in lost), lost
    assert second["outcome"] == "succeeded"
    assert victim not in {t["host"] for t in second["tasks"]}
