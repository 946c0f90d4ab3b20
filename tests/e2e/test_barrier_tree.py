"""The barrier tree over real gRPC on 127.0.0.1: the tasks of one host meet at their
leader, which sends the coordinator one message per epoch for all of them
(gangmaster.am.barrier.local). Hosts are stood for by GANGMASTER_BARRIER_LOCAL_GROUP."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from gangmaster.am.barrier.coordinator import TaskInfo
from gangmaster.am.barrier.config import BarrierConfig
from gangmaster.am.barrier.errors import AttemptFailed, BarrierError
from gangmaster.am.barrier.server import BarrierServer
from gangmaster.am.barrier.task_context import ENV_LOCAL_GROUP, ENV_TREE, BarrierTaskContext

pytestmark = pytest.mark.slow

JOB, GANG = "tree", "g"


@pytest.fixture
def server():
    # calls held a minute before a "pending" reply: under CI's load an epoch of these threads
    # can take longer than a few seconds, and a task's re-sent call would add to the counts
    with BarrierServer(BarrierConfig(log_interval_s=60)) as s:
        yield s


def env_of(server, rank, host, attempt=1):
    env = server.task_env(JOB, GANG, attempt, rank)
    if host is None:
        env[ENV_TREE] = "0"   # this task calls the coordinator itself
    else:
        env[ENV_LOCAL_GROUP] = host
    return env


def open_gang(server, hosts):
    """A gang whose task i runs on hosts[i] (None: a task with the tree off)."""
    server.open_attempt(JOB, GANG, 1, [TaskInfo(i, h or "direct") for i, h in enumerate(hosts)])
    return [BarrierTaskContext.from_env(env_of(server, i, h)) for i, h in enumerate(hosts)]


def all_at_once(ctxs, call):
    """``call(ctx)`` on every context at once, each in its own thread: results by rank."""
    got: dict[int, object] = {}

    def run(ctx):
        try:
            got[ctx.task_index()] = call(ctx)
        except BarrierError as err:
            got[ctx.task_index()] = err

    threads = [threading.Thread(target=run, args=(c,), daemon=True) for c in ctxs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a barrier hung"
    return [got[i] for i in range(len(ctxs))]


def test_many_tasks_of_one_host_reach_the_coordinator_as_one_message_per_epoch(server):
    ctxs = open_gang(server, ["h0"] * 8)
    try:
        all_at_once(ctxs, lambda c: c.barrier())   # epoch 0: the tasks find their leader
        before = server.statistics()
        all_at_once(ctxs, lambda c: [c.barrier() for _ in range(5)])
        after = server.statistics()
        assert after.calls - before.calls == 5 and after.host_calls - before.host_calls == 5
        assert after.arrivals - before.arrivals == 40 and after.releases - before.releases == 5
        assert [c.epoch for c in ctxs] == [6] * 8
    finally:
        for c in ctxs:
            c.close()


#: rank -> host: ranks interleaved over hosts, a host of one, and tasks that call alone (None)
MIXED = ["h0", "h1", "h0", "h2", "h1", None, "h0", "h1", None, "h0"]


def test_all_gather_across_mixed_hosts_returns_every_message_in_rank_order(server):
    ctxs = open_gang(server, MIXED)
    try:
        all_at_once(ctxs, lambda c: c.barrier())
        before = server.statistics()
        got = all_at_once(ctxs, lambda c: c.all_gather(f"rank {c.task_index()}"))
        expected = [f"rank {i}" for i in range(len(MIXED))]
        assert got == [expected] * len(MIXED)
        after = server.statistics()
        # one message per host (h0, h1, h2) and one per task that calls alone
        assert after.calls - before.calls == 3 + 2 and after.host_calls - before.host_calls == 3
        infos = ctxs[3].get_task_infos()
        assert [t.host for t in infos] == [h or "direct" for h in MIXED]
    finally:
        for c in ctxs:
            c.close()


def test_a_mismatch_through_the_tree_fails_every_task(server):
    ctxs = open_gang(server, ["h0", "h0", "h1"])
    try:
        got = all_at_once(ctxs, lambda c: c.all_gather("x") if c.task_index() == 1 else c.barrier())
        assert all(type(e).__name__ == "BarrierMismatch" for e in got), got
    finally:
        for c in ctxs:
            c.close()


TASK = "from gangmaster.am.task import BarrierTaskContext as C; C.get().barrier(); C.get().barrier()"


def spawn(server, rank, host):
    env = {**os.environ, **env_of(server, rank, host)}
    return subprocess.Popen([sys.executable, "-c", TASK], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for(predicate, timeout=20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")


def test_a_leader_that_dies_fails_the_attempt_naming_it(server):
    """Task 0 leads host h0; tasks 1 and 2 wait with it for task 3 (on h1, never
    started). Task 0's process is killed: its tasks tell the coordinator, which fails
    the attempt at once naming the leader, and every task (here task 3, coming late)
    hears it."""
    server.open_attempt(JOB, GANG, 1, [TaskInfo(i, h) for i, h in enumerate(["h0", "h0", "h0", "h1"])])
    late_env = env_of(server, 3, "h1")
    leader = spawn(server, 0, "h0")
    procs = []
    try:
        wait_for(lambda: server.statistics().calls_waiting == 1)   # the leader's own call, sent alone
        procs = [spawn(server, r, "h0") for r in (1, 2)]
        wait_for(lambda: server.statistics().arrivals == 3)
        leader.kill()
        leader.wait(10)
        outs = [p.communicate(timeout=20) for p in procs]
        assert [p.returncode for p in procs] == [1, 1]
        for _, err in outs:
            assert "AttemptFailed" in err and "task 0 (host h0), the barrier leader of its host, went away" in err
        assert server.statistics().leaders_lost >= 1
        late = BarrierTaskContext.from_env(late_env)
        with pytest.raises(AttemptFailed, match="task 0 .host h0., the barrier leader of its host"):
            late.barrier()
        late.close()
    finally:
        for p in [leader, *procs]:
            if p.poll() is None:
                p.kill()
                p.wait(5)
