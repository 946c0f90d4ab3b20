"""One way, shared by the barrier coordinator, its tasks and the live RM, to read TLS
files (every check up front, a ConfigError naming the file and the setting), to bind
a port exclusively, to log refused calls, and to create secret files."""
from __future__ import annotations

import logging
import time
import os
import stat
from pathlib import Path

import grpc
import pytest

from gangmaster.am.barrier.coordinator import TaskInfo
from gangmaster.am.barrier.config import BarrierConfig
from gangmaster.am.barrier.server import BarrierServer
from gangmaster.am.barrier.task_context import BarrierTaskContext, task_env
from gangmaster.protocol.grpc_security import ServerSecurity
from gangmaster.protocol.private_files import open_private
from gangmaster.conf.fields import ConfigError
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.tools.rmsim.server import LiveRM, start_server

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rm"


def barrier_tls(cert, key) -> BarrierConfig:
    return BarrierConfig(tls_cert_file=str(cert), tls_key_file=str(key))


def rm_credentials(cert, key):
    """What `gangmaster rm serve --tls-cert CERT --tls-key KEY` reads before it starts."""
    return ServerSecurity(str(cert), str(key)).credentials("--tls-cert", "--tls-key")


# ------------------------------------------------------------------ TLS files
def test_both_servers_refuse_a_key_that_does_not_match_the_certificate(self_signed):
    cert, _ = self_signed("one")
    _, other_key = self_signed("other")
    with pytest.raises(ConfigError, match=f"{other_key}: --tls-key: expected a PEM private key matching "
                                          "--tls-cert"):
        rm_credentials(cert, other_key)
    server = BarrierServer(barrier_tls(cert, other_key))
    with pytest.raises(ConfigError, match="barrier.tls.key_file: expected a PEM private key matching "
                                          "barrier.tls.cert_file"):
        server.start()
    server.stop()


def test_a_key_with_a_passphrase_is_refused_not_prompted_for(self_signed):
    """gRPC cannot take a passphrase; OpenSSL would ask for one on the terminal."""
    cert, key = self_signed(passphrase="s3cret")
    with pytest.raises(ConfigError, match=f"{key}: --tls-key: expected a PEM private key without a passphrase"):
        rm_credentials(cert, key)
    with pytest.raises(ConfigError, match="barrier.tls.key_file: expected a PEM private key without a passphrase"):
        barrier_tls(cert, key).read_tls()


def test_a_certificate_that_is_a_key_is_refused_by_both_servers(self_signed):
    _, key = self_signed()
    with pytest.raises(ConfigError, match=f"{key}: --tls-cert: expected a PEM file \\(a PEM certificate"):
        rm_credentials(key, key)
    with pytest.raises(ConfigError, match="barrier.tls.cert_file: expected a PEM file \\(a PEM certificate"):
        barrier_tls(key, key).read_tls()


@pytest.mark.parametrize("content, expected", [
    (None, "expected an existing PEM file holding a certificate"),
    (b"hello", "expected a PEM file \\(a PEM certificate has a '-----BEGIN CERTIFICATE-----' line\\)"),
    (b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n", "expected a PEM certificate"),
])
def test_a_task_names_the_variable_of_a_ca_file_it_cannot_use(tmp_path, content, expected):
    ca = tmp_path / "ca.pem"
    if content is not None:
        ca.write_bytes(content)
    env = task_env("127.0.0.1:1", "job", "gang", 1, "token", TaskInfo(0, "127.0.0.1"), 1, tls_ca_file=str(ca))
    with pytest.raises(ConfigError, match=f"{ca}: environment variable GANGMASTER_BARRIER_TLS_CA: {expected}"):
        BarrierTaskContext.from_env(env)


# ------------------------------------------------------------------ listening
def test_a_barrier_host_this_machine_cannot_listen_on_names_barrier_host():
    server = BarrierServer(BarrierConfig(host="192.0.2.1", port=0))   # TEST-NET-1: never local
    with pytest.raises(ConfigError, match="barrier.host: expected an address this machine can listen on"):
        server.start()
    server.stop()


# ------------------------------------------------------------------ refusals
@pytest.fixture
def guess(tmp_path, caplog):
    """A live RM that wants a token, and ``guess(n)``: n calls with the wrong one, each
    refused UNAUTHENTICATED; logs at WARNING are captured. The server stops after the test."""
    live = LiveRM(load_cluster_specs(FIX / "cluster.yaml"), work_dir=tmp_path / "tasks", poll_s=0.05)
    server, port = start_server(live, security=ServerSecurity(token="s3cret"))
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    call = channel.unary_unary("/gangmaster.rm.ResourceManager/GetClusterNodes")

    def guess_n(n: int) -> None:
        for _ in range(n):
            with pytest.raises(grpc.RpcError) as err:
                call(b"", metadata=(("authorization", "Bearer guess"),), timeout=5)
            assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED

    with caplog.at_level(logging.WARNING):
        yield guess_n
    channel.close()
    server.stop(0)
    live.stop()


@pytest.fixture
def short_refusal_interval(monkeypatch):
    from gangmaster.conf import limits

    monkeypatch.setattr(limits, "REFUSAL_LOG_INTERVAL_S", 0.2)   # read when the server starts


def test_the_rm_logs_a_flood_of_refused_calls_once(guess, caplog):
    guess(50)
    refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == 1, refusals
    assert "refused a call to /gangmaster.rm.ResourceManager/GetClusterNodes" in refusals[0]


def test_a_burst_of_refused_calls_then_quiet_is_summarized(short_refusal_interval, guess, caplog):
    guess(5)
    deadline = time.monotonic() + 10            # no further call: the server's own tick logs it
    while time.monotonic() < deadline and not any("refused 4 more call(s)" in r.getMessage()
                                                  for r in caplog.records):
        time.sleep(0.05)
    assert any("refused 4 more call(s)" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------ secret files
def test_open_private_x_creates_a_new_private_file_only(tmp_path):
    path = tmp_path / "token"
    old = os.umask(0)
    try:
        with open_private(path, "x") as f:
            f.write("secret\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and path.read_text() == "secret\n"
    with pytest.raises(FileExistsError):
        open_private(path, "x")
    assert path.read_text() == "secret\n"

