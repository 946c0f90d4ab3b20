"""Real task processes against a real coordinator on 127.0.0.1."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from task_procs import wait_until

from gangmaster.am.barrier.coordinator import TaskInfo
from gangmaster.am.barrier.config import BarrierConfig
from gangmaster.am.barrier.server import BarrierServer

pytestmark = pytest.mark.slow

EXAMPLE = "gangmaster.tools.examples.mpi_style_task"
JOB, GANG = "e2e", "ranks"


@pytest.fixture
def server():
    s = BarrierServer(BarrierConfig(log_interval_s=0.3, retry_give_up_s=10))
    s.start()
    yield s
    s.stop(grace=0)


def spawn(server, attempt, rank, out, extra_env=None, module=EXAMPLE, args=()):
    env = dict(os.environ)
    env.update(server.task_env(JOB, GANG, attempt, rank))
    env["GANGMASTER_OUTPUT_DIR"] = str(out)
    env.update(extra_env or {})
    return subprocess.Popen([sys.executable, "-m", module, *args], env=env, cwd=out.parent,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(procs, timeout=30):
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            results.append((p.returncode, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return results


def wait_for(predicate, timeout=15.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")


def open_gang(server, n, attempt=1, hosts=None, **kw):
    hosts = hosts or ["127.0.0.1"] * n
    server.open_attempt(JOB, GANG, attempt,
                        [TaskInfo(i, hosts[i], {"ssh": 22000 + i}) for i in range(n)], **kw)


def test_mpi_style_gang_runs_to_completion(server, tmp_path):
    out = tmp_path / "out"
    hosts = ["node-a", "node-b", "node-a"]
    open_gang(server, 3, hosts=hosts)
    results = finish([spawn(server, 1, r, out) for r in range(3)])
    assert [rc for rc, _ in results] == [0, 0, 0], results
    assert (out / "hostfile").read_text() == "node-a slots=2\nnode-b slots=1\n"
    seen = [json.loads((out / f"gather-{r}.json").read_text()) for r in range(3)]
    assert all(s == {"attempt": 1, "seen": ["0@node-a", "1@node-b", "2@node-a"]} for s in seen)
    stats = server.statistics()
    assert stats.releases == 3 and stats.auth_refusals == 0 and stats.calls_waiting == 0


def test_waiting_task_logs_progress_and_is_released_late(server, tmp_path):
    """A task waits longer than its hold time: it logs "waiting ..." and re-sends; the
    late task's arrival still releases it (arrivals are idempotent)."""
    out = tmp_path / "out"
    open_gang(server, 2)
    code = ("import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stderr);"
            "from gangmaster.am.task import BarrierTaskContext as C; C.get().barrier()")
    early = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **server.task_env(JOB, GANG, 1, 0)},
                             cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: server.statistics().arrivals == 1)
    # each hold of 0.3 s ends "still waiting": the task logs so and sends its arrival again
    wait_until(lambda: server.statistics().duplicate_arrivals >= 2, 15, "two re-sent arrivals of the early task")
    late = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **server.task_env(JOB, GANG, 1, 1)},
                            cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    (rc0, err0), (rc1, _) = finish([early, late])
    assert (rc0, rc1) == (0, 0)
    assert "waiting for barrier (epoch 0): 1/2 arrived after" in err0
    stats = server.statistics()
    assert stats.releases == 1 and stats.arrivals == 2 and stats.duplicate_arrivals >= 2


def test_fail_attempt_fails_waiting_processes_at_once(server, tmp_path):
    out = tmp_path / "out"
    open_gang(server, 3)
    zombie_env = server.task_env(JOB, GANG, 1, 2)
    procs = [spawn(server, 1, r, out) for r in (0, 1)]  # rank 2 never comes: they wait
    try:
        wait_for(lambda: server.statistics().calls_waiting == 2)
        failed_at = time.monotonic()
        assert server.fail_attempt(JOB, GANG, 1, "task 2 exited with code 137") == 2
        results = finish(procs, timeout=10)
        took = time.monotonic() - failed_at
    finally:
        finish(procs, timeout=1)
    assert [rc for rc, _ in results] == [1, 1]
    for _, err in results:
        assert "mpi_style_task: AttemptFailed: e2e/ranks attempt 1 was failed by the AM" in err
        assert "task 2 exited with code 137" in err
    assert took < 5  # at once, not after a timeout (processes only need to print and exit)

    # the restarted gang runs as attempt 2; a zombie of attempt 1 is refused as stale
    open_gang(server, 3, attempt=2)
    zombie = spawn(server, 2, 0, out, extra_env=zombie_env)  # attempt 1's rank 2, late
    results = finish([spawn(server, 2, r, out) for r in range(3)] + [zombie])
    assert [rc for rc, _ in results] == [0, 0, 0, 1], results
    assert "mpi_style_task: AttemptFailed: e2e/ranks attempt 1 was failed" in results[3][1]
    assert json.loads((out / "gather-0.json").read_text())["attempt"] == 2


def test_wrong_token_is_refused_and_counted(server, tmp_path):
    out = tmp_path / "out"
    open_gang(server, 2)
    (rc, err), = finish([spawn(server, 1, 0, out, extra_env={"GANGMASTER_BARRIER_TOKEN": "guessed"})])
    assert rc == 1
    assert "mpi_style_task: BarrierAuthError: e2e/ranks attempt 1: refused" in err
    assert server.statistics().auth_refusals == 1


def test_timeout_reaches_the_task_naming_missing_ranks(server, tmp_path):
    out = tmp_path / "out"
    open_gang(server, 3, timeout_s=0.5)
    results = finish([spawn(server, 1, r, out) for r in (0, 2)])
    assert [rc for rc, _ in results] == [1, 1]
    for _, err in results:
        assert "BarrierTimeout: e2e/ranks attempt 1 barrier epoch 0 timed out after 0.5 s: " \
               "2/3 tasks arrived; never arrived: 1" in err


def _self_signed(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
    return cert, key


def test_tls_by_configuration(tmp_path):
    import shutil
    import threading

    from gangmaster.am.barrier.errors import CoordinatorUnavailable
    from gangmaster.am.barrier.task_context import BarrierTaskContext

    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a test certificate")
    cert, key = _self_signed(tmp_path)
    with BarrierServer(BarrierConfig(tls_cert_file=str(cert), tls_key_file=str(key),
                                     retry_give_up_s=0.5)) as server:
        open_gang(server, 2)
        envs = [server.task_env(JOB, GANG, 1, r) for r in range(2)]
        assert envs[0]["GANGMASTER_BARRIER_TLS_CA"] == str(cert)
        ctxs = [BarrierTaskContext.from_env(e) for e in envs]
        got = {}
        threads = [threading.Thread(target=lambda c=c: got.__setitem__(c.task_index(), c.all_gather(str(c.task_index()))))
                   for c in ctxs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert got == {0: ["0", "1"], 1: ["0", "1"]}
        # a plaintext client cannot talk to the TLS server
        plain = dict(envs[0])
        del plain["GANGMASTER_BARRIER_TLS_CA"]
        with BarrierTaskContext.from_env(plain) as ctx, pytest.raises(CoordinatorUnavailable):
            ctx.get_task_infos()
        for c in ctxs:
            c.close()


def test_task_retries_until_the_coordinator_listens(tmp_path):
    """UNAVAILABLE is retried: a task started before its coordinator still gets through."""
    import socket
    import threading

    from gangmaster.am.barrier.task_context import ENV_LOCAL_GROUP, BarrierTaskContext, task_env

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = BarrierServer(BarrierConfig(port=port))
    tasks = [TaskInfo(0, "h0"), TaskInfo(1, "h1")]
    server.open_attempt(JOB, GANG, 1, tasks, token="tok")  # before start: no race with the tasks
    # each task on its own host: each leads itself, and retries for it
    envs = [{**task_env(f"127.0.0.1:{port}", JOB, GANG, 1, "tok", t, 2, retry_give_up_s=20), ENV_LOCAL_GROUP: t.host}
            for t in tasks]
    ctxs = [BarrierTaskContext.from_env(e) for e in envs]
    got = {}
    threads = [threading.Thread(target=lambda c=c: got.__setitem__(c.task_index(), c.all_gather(str(c.task_index()))))
               for c in ctxs]
    for t in threads:
        t.start()
    try:
        # the tasks are calling a port nobody listens on, and retrying
        wait_until(lambda: all(c.retries > 0 for c in ctxs), 15, "both tasks to retry before the coordinator listens")
        server.start()
        for t in threads:
            t.join(20)
        assert got == {0: ["0", "1"], 1: ["0", "1"]}
        assert all(c.retries > 0 for c in ctxs)
    finally:
        server.stop(grace=0)
        for c in ctxs:
            c.close()


def test_huge_log_interval_still_works(server):
    """A log interval of a year must not overflow the wire's hold time."""
    import threading

    from gangmaster.am.barrier.task_context import BarrierTaskContext

    open_gang(server, 2)
    ctxs = []
    for r in range(2):
        env = server.task_env(JOB, GANG, 1, r)
        env["GANGMASTER_BARRIER_LOG_INTERVAL_S"] = str(365 * 24 * 3600)
        ctxs.append(BarrierTaskContext.from_env(env))
    threads = [threading.Thread(target=c.barrier) for c in ctxs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert [c.epoch for c in ctxs] == [1, 1]
    for c in ctxs:
        c.close()
