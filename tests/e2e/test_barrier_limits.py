"""The coordinator's limits over real gRPC on 127.0.0.1: large all_gathers get through,
one over the limit fails at once on every task naming the size and the limit (never
retried as "unreachable"), and a fixed port is bound by one coordinator only."""
from __future__ import annotations

import socket
import threading

import pytest

from gangmaster.am.barrier.coordinator import TaskInfo
from gangmaster.am.barrier.config import BarrierConfig
from gangmaster.am.barrier.errors import BarrierError, MessageTooLarge
from gangmaster.am.barrier.server import BarrierServer, server_options
from gangmaster.am.barrier.task_context import BarrierTaskContext, channel_options
from gangmaster.conf.fields import ConfigError, Fields
from gangmaster.conf.limits import BARRIER_MAX_MESSAGE_BYTES, BARRIER_MAX_MESSAGE_BYTES_CEILING

pytestmark = pytest.mark.slow

JOB, GANG = "limits", "g"
MiB = 1024 * 1024


def contexts(server, n):
    server.open_attempt(JOB, GANG, 1, [TaskInfo(i, "127.0.0.1") for i in range(n)])
    return [BarrierTaskContext.from_env(server.task_env(JOB, GANG, 1, i)) for i in range(n)]


def gather_all(ctxs, messages):
    """Every task calls all_gather_bytes at once; returns each task's result or error."""
    got: dict[int, object] = {}

    def run(ctx, message):
        try:
            got[ctx.task_index()] = ctx.all_gather_bytes(message)
        except BarrierError as err:
            got[ctx.task_index()] = err

    threads = [threading.Thread(target=run, args=(c, m), daemon=True) for c, m in zip(ctxs, messages)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "an all_gather hung"
    return [got[i] for i in range(len(ctxs))]


def test_the_default_channel_limits_allow_what_spark_allows():
    assert BARRIER_MAX_MESSAGE_BYTES >= 128 * MiB
    for options in (dict(server_options(1000)), dict(channel_options())):
        assert options["grpc.max_receive_message_length"] >= 128 * MiB
        assert options["grpc.max_send_message_length"] >= 128 * MiB


def test_the_message_limit_is_a_checked_setting():
    assert BarrierConfig.load().max_message_bytes == BARRIER_MAX_MESSAGE_BYTES
    for bad in (0, BARRIER_MAX_MESSAGE_BYTES_CEILING + 1, "big"):
        with pytest.raises(ConfigError, match="barrier.max_message_bytes"):
            BarrierConfig.from_fields(Fields({"max_message_bytes": bad}, "job.yaml", "barrier"))


def test_a_gather_of_five_megabytes_gets_through():
    """Before: gRPC's default 4 MiB limit refused the reply; the tasks retried it as
    transient until retry_give_up_s and reported the coordinator unreachable."""
    with BarrierServer(BarrierConfig(retry_give_up_s=3)) as server:
        ctxs = contexts(server, 2)
        try:
            messages = [bytes([i]) * (5 * MiB // 2) for i in range(2)]
            assert gather_all(ctxs, messages) == [messages, messages]
            assert all(c.retries == 0 for c in ctxs)
        finally:
            for c in ctxs:
                c.close()


def test_a_gather_over_the_limit_fails_at_once_on_every_task():
    with BarrierServer(BarrierConfig(max_message_bytes=MiB, retry_give_up_s=300)) as server:
        ctxs = contexts(server, 3)
        try:
            results = gather_all(ctxs, [b"x" * 400_000] * 3)
            for err in results:
                assert isinstance(err, MessageTooLarge), err
                assert "1,048,576 bytes" in str(err) and "barrier.max_message_bytes" in str(err)
                assert "over the limit" in str(err)
            assert all(c.retries == 0 for c in ctxs)  # refused, not retried as transport trouble
            # the barrier stays failed: the gang must restart as a new attempt
            with pytest.raises(MessageTooLarge):
                ctxs[0].all_gather("small")
        finally:
            for c in ctxs:
                c.close()


def test_one_message_over_the_limit_fails_the_gather_on_every_task():
    """The task does not send a message the coordinator would refuse to receive; it
    tells the coordinator its size, and every task of the gang gets the error."""
    with BarrierServer(BarrierConfig(max_message_bytes=MiB, retry_give_up_s=300)) as server:
        ctxs = contexts(server, 2)
        try:
            small, huge = gather_all(ctxs, [b"s", b"h" * (3 * MiB)])
            for err in (small, huge):
                assert isinstance(err, MessageTooLarge), err
                assert f"{3 * MiB + 8:,} bytes" in str(err) and "1,048,576 bytes" in str(err)
            assert all(c.retries == 0 for c in ctxs)
        finally:
            for c in ctxs:
                c.close()


def test_a_task_with_a_larger_limit_than_its_coordinator_is_refused_at_once():
    """A task whose environment promises more than the coordinator receives (an older AM,
    a hand-made environment): gRPC refuses the message; the task must not retry that."""
    with BarrierServer(BarrierConfig(max_message_bytes=MiB, retry_give_up_s=300)) as server:
        server.open_attempt(JOB, GANG, 1, [TaskInfo(0, "127.0.0.1"), TaskInfo(1, "127.0.0.1")])
        env = server.task_env(JOB, GANG, 1, 0)
        env["GANGMASTER_BARRIER_MAX_MESSAGE_BYTES"] = str(64 * MiB)
        with BarrierTaskContext.from_env(env) as ctx:
            with pytest.raises(MessageTooLarge, match="larger than max"):
                ctx.all_gather_bytes(b"z" * (2 * MiB))
            assert ctx.retries == 0


def test_a_fixed_port_is_bound_by_one_coordinator_only():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with BarrierServer(BarrierConfig(port=port)):
        second = BarrierServer(BarrierConfig(port=port))
        with pytest.raises(ConfigError, match=f"barrier.port: .*port {port} is in use"):
            second.start()
        second.stop()
