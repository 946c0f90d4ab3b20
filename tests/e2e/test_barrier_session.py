"""The Session stream's failure semantics: a broken, silent or missing stream never
hangs a barrier — the task re-opens it and re-sends (arrivals are idempotent), or falls
back to unary calls."""
from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time

import grpc
import pytest

from gangmaster.am.barrier import server as barrier_server
from gangmaster.am.barrier.coordinator import BarrierCoordinator, TaskInfo
from gangmaster.am.barrier.config import BarrierConfig
from gangmaster.am.barrier.server import BarrierServer
from gangmaster.am.barrier.task_context import BarrierTaskContext, task_env

pytestmark = pytest.mark.slow

JOB, GANG = "sess", "g"


@pytest.fixture(autouse=True)
def each_task_calls_the_coordinator(monkeypatch):
    """These tests hold a task's own Session stream: the tree is off (as for a task alone on
    its host, or with GANGMASTER_BARRIER_TREE=0); tests/e2e/test_barrier_tree.py holds the tree."""
    from gangmaster.am.barrier import task_context as context

    monkeypatch.setattr(context.BarrierTaskContext, "_join_local", lambda self: None)


@pytest.fixture(params=["direct", "threaded"])
def session_kind(request, monkeypatch):
    """Both ways a task drives its stream: single-threaded (the default) and through
    grpc's public streaming API (the fallback when grpc's internals are missing)."""
    from gangmaster.am.barrier import task_context as context

    if request.param == "threaded":
        monkeypatch.setattr(context, "_open_session", context._ThreadedSession)
    return request.param


def session_of(ctx) -> str:
    from gangmaster.am.barrier import task_context as context

    return "direct" if isinstance(ctx._session, context._DirectSession) else "threaded"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")


def in_thread(fn):
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("result", fn()), daemon=True)
    t.start()
    return t, box


def contexts(server, n, **env_overrides):
    server.open_attempt(JOB, GANG, 1, [TaskInfo(i, "127.0.0.1") for i in range(n)])
    out = []
    for i in range(n):
        env = server.task_env(JOB, GANG, 1, i)
        env.update(env_overrides)
        out.append(BarrierTaskContext.from_env(env))
    return out


def test_barrier_survives_a_coordinator_restart_mid_wait(session_kind):
    """Task 0 waits on its stream; the server goes away and comes back on the same port
    (same coordinator state): task 0 re-opens its stream, re-sends, and is released."""
    port, coordinator = free_port(), BarrierCoordinator()
    tasks = [TaskInfo(0, "h0"), TaskInfo(1, "h1")]
    first = BarrierServer(BarrierConfig(port=port), coordinator)
    first.start()
    first.open_attempt(JOB, GANG, 1, tasks, token="tok")
    ctxs = [BarrierTaskContext.from_env(task_env(f"127.0.0.1:{port}", JOB, GANG, 1, "tok", t, 2,
                                                 retry_give_up_s=20)) for t in tasks]
    second = None
    try:
        waiting, got = in_thread(lambda: ctxs[0].all_gather("a"))
        wait_for(lambda: coordinator.statistics().calls_waiting == 1)
        first.stop(grace=0)
        wait_for(lambda: coordinator.statistics().calls_waiting == 0)  # the broken call withdrew
        assert waiting.is_alive()  # ... and the task did not give up: it retries
        second = BarrierServer(BarrierConfig(port=port), coordinator)
        second.start()
        assert ctxs[1].all_gather("b") == ["a", "b"]
        waiting.join(10)
        assert got["result"] == ["a", "b"]
        assert ctxs[0].retries > 0 and ctxs[0].epoch == 1
        assert session_of(ctxs[0]) == session_kind
        stats = coordinator.statistics()
        assert stats.releases == 1 and stats.arrivals == 2 and stats.duplicate_arrivals >= 1
    finally:
        for c in ctxs:
            c.close()
        if second is not None:
            second.stop(grace=0)


class _SwallowsFirstRequest(barrier_server._Servicer):
    """A coordinator whose first Session stream loses its reply: the arrival counts,
    the release is never sent."""

    swallowed = 0

    async def Session(self, requests, context):
        if type(self).swallowed == 0:
            async for request in requests:
                type(self).swallowed += 1
                await self.answer(request)
                await asyncio.Event().wait()  # the reply is lost: this stream stays silent
        async for request in requests:
            yield await self.answer(request)


def test_a_lost_reply_is_resent_on_a_new_stream(monkeypatch, session_kind):
    monkeypatch.setattr(barrier_server, "_Servicer", _SwallowsFirstRequest)
    monkeypatch.setattr(_SwallowsFirstRequest, "swallowed", 0)
    with BarrierServer(BarrierConfig(log_interval_s=0.2)) as server:
        ctxs = contexts(server, 2, GANGMASTER_BARRIER_LOG_INTERVAL_S="0.2")
        monkeypatch.setattr(BarrierTaskContext, "WATCH_PERIOD_S", 0.05)
        ctxs[0].reply_grace_s = 0.3
        try:
            waiting, _ = in_thread(ctxs[0].barrier)
            wait_for(lambda: _SwallowsFirstRequest.swallowed == 1)
            ctxs[1].barrier()  # releases epoch 0; task 0's release is lost on its stream
            waiting.join(10)
            assert not waiting.is_alive(), "a lost reply hung the barrier"
            assert [c.epoch for c in ctxs] == [1, 1]
            assert ctxs[0].retries >= 1  # the watchdog cancelled the silent stream
            stats = server.statistics()  # the re-send got the release again
            assert stats.releases == 1 and stats.arrivals == 2 and stats.duplicate_arrivals == 1
        finally:
            for c in ctxs:
                c.close()


class _NoSession(barrier_server._Servicer):
    """A coordinator from before Session: only unary Sync."""

    async def Session(self, requests, context):
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not implemented!")


def test_a_coordinator_without_session_is_called_unary(monkeypatch):
    monkeypatch.setattr(barrier_server, "_Servicer", _NoSession)
    with BarrierServer(BarrierConfig()) as server:
        ctxs = contexts(server, 2)
        try:
            waiting, got = in_thread(lambda: ctxs[0].all_gather("x"))
            assert ctxs[1].all_gather("y") == ["x", "y"]
            waiting.join(10)
            assert got["result"] == ["x", "y"]
            assert [c.transport for c in ctxs] == ["unary", "unary"]
            assert all(c.retries == 0 for c in ctxs)  # UNIMPLEMENTED is not a failure to retry
        finally:
            for c in ctxs:
                c.close()


def test_a_killed_task_withdraws_its_waiting_call_and_its_rerun_is_released():
    with BarrierServer(BarrierConfig()) as server:
        server.open_attempt(JOB, GANG, 1, [TaskInfo(i, "127.0.0.1") for i in range(2)])
        code = "from gangmaster.am.task import BarrierTaskContext as C; C.get().barrier()"
        env = {**os.environ, **server.task_env(JOB, GANG, 1, 0)}
        proc = subprocess.Popen([sys.executable, "-c", code], env=env)
        try:
            wait_for(lambda: server.statistics().calls_waiting == 1, timeout=30)
            proc.kill()
            proc.wait(10)
            wait_for(lambda: server.statistics().calls_waiting == 0)
            assert server.statistics().arrivals == 1  # the arrival stays recorded
            rerun = subprocess.Popen([sys.executable, "-c", code], env=env)
            ctx = BarrierTaskContext.from_env(server.task_env(JOB, GANG, 1, 1))
            try:
                ctx.barrier()
            finally:
                ctx.close()
            assert rerun.wait(20) == 0
            stats = server.statistics()
            assert stats.releases == 1 and stats.arrivals == 2
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_coordinator_errors_arrive_typed_on_the_stream_and_keep_it_open(session_kind):
    from gangmaster.am.barrier.errors import BarrierAuthError, BarrierMismatch
    from gangmaster.am.barrier.task_context import ENV_TOKEN

    def outcome(fn):
        try:
            return fn()
        except Exception as exc:  # handed to the test thread
            return exc

    with BarrierServer(BarrierConfig()) as server:
        ctxs = contexts(server, 2)
        bad = server.task_env(JOB, GANG, 1, 0)
        bad[ENV_TOKEN] = "guessed"
        with BarrierTaskContext.from_env(bad) as intruder:
            with pytest.raises(BarrierAuthError, match="refused: the call did not carry this attempt's token"):
                intruder.barrier()
            assert intruder.transport == "session" and intruder.retries == 0
        assert server.statistics().auth_refusals == 1
        try:
            waiting, got = in_thread(lambda: outcome(ctxs[0].barrier))
            wait_for(lambda: server.statistics().calls_waiting == 1)
            with pytest.raises(BarrierMismatch, match=r"epoch 0: task 1 called all_gather but task\(s\) 0 "
                                                      r"called barrier"):
                ctxs[1].all_gather("x")
            waiting.join(10)
            assert isinstance(got["result"], BarrierMismatch)
            assert all(c.retries == 0 and c.transport == "session" for c in ctxs)
            assert [session_of(c) for c in ctxs] == [session_kind] * 2
        finally:
            for c in ctxs:
                c.close()
