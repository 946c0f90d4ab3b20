"""Who may call the live RM and where it listens: an exclusive bind ("port N is in
use"), ports checked, TLS and a token like the barrier coordinator's, clear errors
for missing TLS and token files, and token files only their owner can read."""
import os
import stat
from pathlib import Path

import grpc
import pytest

from gangmaster.protocol.grpc_security import (
    ClientSecurity, ListenError, ServerSecurity, create_token_file, load_or_create_token, read_token,
)
from gangmaster.protocol.rm_client_grpc import GrpcRMClient
from gangmaster.protocol.rm_protocol import RMError, Unauthenticated
from gangmaster.conf.fields import ConfigError
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.tools.rmsim.server import LiveRM, start_server

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rm"
SPECS = load_cluster_specs(FIX / "cluster.yaml")


@pytest.fixture
def live(tmp_path):
    rm = LiveRM(SPECS, work_dir=tmp_path / "tasks", poll_s=0.05)
    yield rm
    rm.stop()


@pytest.fixture
def serve(live):
    """``serve(**start_server kwargs) -> port``; every server started is stopped."""
    servers = []

    def start(**kw):
        server, port = start_server(live, **kw)
        servers.append(server)
        return port

    yield start
    for server in servers:
        server.stop(0)


def test_a_second_server_on_a_taken_port_fails_plainly(serve):
    port = serve()
    with pytest.raises(ListenError, match=f"port {port} is in use"):
        serve(port=port)
    with GrpcRMClient(f"127.0.0.1:{port}", timeout_s=5) as rm:   # the first one still answers
        assert len(rm.cluster_nodes()) == len(SPECS)


def test_a_port_outside_the_port_range_is_refused(serve):
    with pytest.raises(ListenError, match="port 99999 is not a port number"):
        serve(port=99999)


@pytest.mark.parametrize("security, said", [
    (ClientSecurity(), "this server needs a token: pass the server's token file (--token-file)"),
    (ClientSecurity(token="guess"), "the token this call presented is not this server's"),
    (ClientSecurity(token="guess", token_file="BAD"), "the token in BAD is not this server's"),
])
def test_a_call_without_the_token_is_refused_saying_what_was_wrong(serve, security, said):
    port = serve(security=ServerSecurity(token="s3cret"))
    with GrpcRMClient(f"127.0.0.1:{port}", timeout_s=5, security=security) as rm, \
            pytest.raises(Unauthenticated) as refused:
        rm.cluster_nodes()
    assert refused.value.message == said


def test_calls_with_the_token_are_served(serve):
    port = serve(security=ServerSecurity(token="s3cret"))
    address = f"127.0.0.1:{port}"
    with GrpcRMClient(address, timeout_s=5, security=ClientSecurity(token="s3cret")) as rm:
        assert len(rm.cluster_nodes()) == len(SPECS)


def test_without_the_token_a_request_is_not_even_decoded(serve):
    port = serve(security=ServerSecurity(token="s3cret"))
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary("/gangmaster.rm.ResourceManager/Submit")
        with pytest.raises(grpc.RpcError) as err:
            call(b"\xff\xff not a message", timeout=5)
    assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED


def test_tls_and_token(serve, self_signed):
    cert, key = map(str, self_signed())
    port = serve(security=ServerSecurity(cert, key, token="s3cret"))
    address = f"127.0.0.1:{port}"
    with GrpcRMClient(address, timeout_s=5, security=ClientSecurity(tls_ca_file=cert, token="s3cret")) as rm:
        assert len(rm.cluster_nodes()) == len(SPECS)
    with GrpcRMClient(address, timeout_s=2, security=ClientSecurity(token="s3cret")) as rm, \
            pytest.raises(RMError):   # plaintext cannot talk to the TLS server
        rm.cluster_nodes()


def test_a_missing_or_wrong_tls_file_names_the_file_and_the_setting(serve, tmp_path, self_signed):
    missing = tmp_path / "nope.pem"
    with pytest.raises(ConfigError, match=f"{missing}: --tls-cert: expected an existing PEM file"):
        serve(security=ServerSecurity(str(missing), str(missing)))
    not_pem = tmp_path / "key.txt"
    not_pem.write_text("hello")
    cert = str(self_signed()[0])
    with pytest.raises(ConfigError, match=f"{not_pem}: --tls-key: expected a PEM file"):
        serve(security=ServerSecurity(cert, str(not_pem)))
    with pytest.raises(ConfigError, match="tls_key_file: expected a PEM file path"):
        ServerSecurity(tls_cert_file=cert)
    with pytest.raises(ConfigError, match=f"{missing}: --tls-ca: expected an existing PEM file"):
        GrpcRMClient("127.0.0.1:1", security=ClientSecurity(tls_ca_file=str(missing)))


def test_token_files_are_created_for_the_owner_only(tmp_path):
    path = tmp_path / "rm.token"
    token, created = load_or_create_token(path, "--token-file", 100)
    assert created and len(token) >= 32
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert load_or_create_token(path, "--token-file", 100) == (token, False)
    assert read_token(path, "--token-file", 100) == token
    with pytest.raises(FileExistsError):
        create_token_file(path)


@pytest.mark.parametrize("content, expected", [
    (b"", "expected a token of 1..100 printable ASCII characters"),
    (b"two words\n", "expected a token of 1..100 printable ASCII characters"),
    (b"x" * 101, "expected a token of 1..100"),
    ("caf\u00e9".encode(), "expected a token of printable ASCII characters"),
])
def test_a_bad_token_file_is_refused(tmp_path, content, expected):
    path = tmp_path / "rm.token"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=f"{path}: --token-file: {expected}"):
        read_token(path, "--token-file", 100)
    with pytest.raises(ConfigError, match=f"{tmp_path / 'none'}: --token-file: expected an existing token file"):
        read_token(tmp_path / "none", "--token-file", 100)
