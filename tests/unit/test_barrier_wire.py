"""The pieces around the core: configuration, the task environment, errors on the wire."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gangmaster.am.barrier.coordinator import YEAR_S, TaskInfo
from gangmaster.am.barrier.config import BarrierConfig
from gangmaster.am.barrier.errors import (ERROR_CLASSES, BarrierError, BarrierId, BarrierTimeout,
                                          error_from_code)
from gangmaster.am.barrier.server import error_to_proto, server_options
from gangmaster.am.barrier.task_context import (ENV_ADDRESS, ENV_GRPC_EXPERIMENTS, ENV_PAI_ROLE_INDEX, ENV_TASK_INDEX,
                                                ENV_TOKEN, TASK_GRPC_EXPERIMENTS, BarrierTaskContext, error_from_proto,
                                                task_env)
from gangmaster.conf.fields import ConfigError, Fields


def test_defaults_file_barrier_section():
    cfg = BarrierConfig.load()
    assert cfg.timeout_s == YEAR_S
    assert cfg.max_pending_calls > 3000  # above gRPC's own hard limit
    assert not cfg.tls


@pytest.mark.parametrize("data, field", [
    ({"timeout_s": 0}, "barrier.timeout_s"),
    ({"timeout_s": "long"}, "barrier.timeout_s"),
    ({"max_pending_calls": 0}, "barrier.max_pending_calls"),
    ({"tls": {"cert_file": "a.pem"}}, "barrier.tls.key_file"),
    ({"tls": {"certfile": "a.pem"}}, "barrier.tls.certfile"),
    ({"timeout": 3}, "barrier.timeout"),
])
def test_config_errors_name_the_field(data, field):
    with pytest.raises(ConfigError) as info:
        BarrierConfig.from_fields(Fields(data, "job.yaml", "barrier"))
    assert info.value.field == field and "job.yaml" in str(info.value)


def test_pending_limits_raised_above_grpc_defaults():
    opts = dict(server_options(50_000))
    assert opts["grpc.server.max_pending_requests"] == 50_000
    assert opts["grpc.server.max_pending_requests_hard_limit"] == 50_000


def test_error_round_trip_keeps_class_text_and_fields():
    b = BarrierId("j", "g", 3)
    for code, cls in ERROR_CLASSES.items():
        err = cls(f"{code} happened", b, 4, 2, 5, (1, 3, 4))
        back = error_from_proto(error_to_proto(err), b)
        assert type(back) is cls
        assert str(back) == f"{code} happened"
        assert (back.epoch, back.arrived, back.total, back.missing) == (4, 2, 5, (1, 3, 4))
    bare = error_from_proto(error_to_proto(BarrierTimeout("t", b)), b)
    assert (bare.epoch, bare.arrived, bare.total) == (None, None, None)
    assert type(error_from_code("FROM_THE_FUTURE", "x")) is BarrierError


def test_task_env_round_trips_into_a_context():
    env = task_env("127.0.0.1:1", "j", "g", 2, "tok", TaskInfo(3, "h", {}, "worker", 1), 8,
                   log_interval_s=5)
    assert env[ENV_TASK_INDEX] == "3" and env[ENV_PAI_ROLE_INDEX] == "1"
    assert all(isinstance(v, str) for v in env.values())
    ctx = BarrierTaskContext.from_env(env)
    try:
        assert (ctx.task_index(), ctx.partition_id(), ctx.attempt_number(), ctx.num_tasks()) == (3, 3, 2, 8)
        assert ctx.log_interval_s == 5
    finally:
        ctx.close()


def test_tasks_start_on_grpcs_older_client_transport_which_the_installed_grpc_knows():
    """Every task's environment turns the EventEngine client off (its threads read each reply
    and wake the waiting thread: BENCHMARKS.md, session 17); gRPC reads the variable when it
    loads and only logs a name it does not know, so a grpcio that drops it is caught here."""
    env = task_env("127.0.0.1:1", "j", "g", 2, "tok", TaskInfo(0, "h"), 2)
    assert env[ENV_GRPC_EXPERIMENTS] == TASK_GRPC_EXPERIMENTS == "-event_engine_client"
    loaded = subprocess.run([sys.executable, "-c", "import grpc"], capture_output=True, text=True, timeout=60,
                            env={**os.environ, ENV_GRPC_EXPERIMENTS: TASK_GRPC_EXPERIMENTS})
    assert loaded.returncode == 0 and "Unknown experiment" not in loaded.stderr, loaded.stderr


def test_missing_environment_is_named():
    env = task_env("127.0.0.1:1", "j", "g", 2, "tok", TaskInfo(0, "h"), 2)
    del env[ENV_TOKEN], env[ENV_ADDRESS]
    with pytest.raises(RuntimeError, match="GANGMASTER_BARRIER_ADDRESS, GANGMASTER_BARRIER_TOKEN"):
        BarrierTaskContext.from_env(env)
    bad = task_env("127.0.0.1:1", "j", "g", 2, "tok", TaskInfo(0, "h"), 2)
    bad[ENV_TASK_INDEX] = "zero"
    with pytest.raises(ValueError, match="GANGMASTER_TASK_INDEX: expected an integer"):
        BarrierTaskContext.from_env(bad)


def test_a_task_calling_while_a_new_am_takes_over_waits_for_its_barrier_to_be_reopened():
    """YARN's next AM attempt (or a Slurm rerun) listens where the previous AM did before it
    has reopened the barriers it recovers: a task calling in between retries, not dies."""
    import threading

    from gangmaster.am.barrier.server import BarrierServer

    with BarrierServer(BarrierConfig()) as server:
        server.coordinator.taking_over()
        ctx = BarrierTaskContext(server.address, "tok", "j", "g", 1, 0, 1, retry_give_up_s=30, tree=False)
        outcome: list = []
        task = threading.Thread(target=lambda: outcome.append(_barrier_outcome(ctx)))
        task.start()
        while ctx.retries == 0 and task.is_alive():   # the task called and was told to come back
            task.join(0.01)
        server.open_attempt("j", "g", 1, [TaskInfo(0, "h")], token="tok")   # the AM reopened it
        task.join(30)
        ctx.close()
    assert outcome == ["released"]


def _barrier_outcome(ctx: BarrierTaskContext) -> str:
    try:
        ctx.barrier()
    except BarrierError as err:
        return f"{type(err).__name__}: {err}"
    return "released"
