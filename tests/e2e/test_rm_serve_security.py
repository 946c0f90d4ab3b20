"""`gangmaster rm serve` as a real process, where it listens and whom it serves: one
server per port ("port N is in use", exit 2), ports checked when the flags are
read, 127.0.0.1 by default, a token file created 0600 and required of `rm nodes` (a wrong
one named as such),
and missing TLS files named — never a traceback."""
import os
import stat
import subprocess

import pytest

from rm_serve_helpers import FIX, RM_CLI, start_rm_serve, stop_rm_serve

pytestmark = pytest.mark.slow


def run_serve(tmp_path, *extra):
    """`rm serve` expected to refuse to start: (returncode, stderr)."""
    try:
        done = subprocess.run(RM_CLI + ["serve", "--cluster", str(FIX / "cluster.yaml"), *extra],
                              capture_output=True, text=True, timeout=60, cwd=tmp_path)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"rm serve {' '.join(extra)} did not refuse to start") from exc
    return done.returncode, done.stderr


def test_default_address_is_loopback_and_a_second_server_on_its_port_is_refused(tmp_path):
    first, address = start_rm_serve(tmp_path, "--state", str(tmp_path / "state.json"))
    try:
        host, port = address.rsplit(":", 1)
        assert host == "127.0.0.1"
        rc, err = run_serve(tmp_path, "--port", port, "--state", str(tmp_path / "state.json"))
        assert rc == 2 and f"port {port} is in use" in err and "Traceback" not in err, err
        listing = subprocess.run(RM_CLI + ["nodes", "--address", address], capture_output=True, text=True, timeout=30)
        assert listing.returncode == 0 and "dgx-000" in listing.stdout
    finally:
        stop_rm_serve(first)


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_a_port_outside_the_range_is_refused_when_the_flags_are_read(tmp_path, port):
    rc, err = run_serve(tmp_path, "--port", port)
    assert rc == 2 and "--port: expected a port number 0..65535" in err and "Traceback" not in err, err


def test_token_file_is_created_private_and_required(tmp_path):
    token = tmp_path / "rm.token"
    server, address = start_rm_serve(tmp_path, "--token-file", str(token))
    try:
        assert stat.S_IMODE(os.stat(token).st_mode) == 0o600
        refused = subprocess.run(RM_CLI + ["nodes", "--address", address], capture_output=True, text=True, timeout=30)
        assert refused.returncode == 1 and "needs a token" in refused.stderr and "Traceback" not in refused.stderr
        wrong = tmp_path / "wrong.token"
        wrong.write_text("not-the-servers\n")
        refused = subprocess.run(RM_CLI + ["nodes", "--address", address, "--token-file", str(wrong)],
                                 capture_output=True, text=True, timeout=30)
        assert refused.returncode == 1 and refused.stderr.strip() == (
            f"gangmaster rm nodes: the token in {wrong} is not this server's"), refused.stderr
        ok = subprocess.run(RM_CLI + ["nodes", "--address", address, "--token-file", str(token)],
                            capture_output=True, text=True, timeout=30)
        assert ok.returncode == 0 and "dgx-000" in ok.stdout, ok.stderr
    finally:
        stop_rm_serve(server)


def test_a_missing_tls_file_is_named(tmp_path):
    missing = tmp_path / "missing.pem"
    rc, err = run_serve(tmp_path, "--tls-cert", str(missing), "--tls-key", str(missing))
    assert rc == 2 and f"{missing}: --tls-cert: expected an existing PEM file" in err and "Traceback" not in err, err
    rc, err = run_serve(tmp_path, "--tls-cert", str(missing))
    assert rc == 2 and "--tls-key: expected a PEM file (TLS needs both --tls-cert and --tls-key)" in err, err


def test_listening_beyond_this_machine_without_a_token_warns(tmp_path):
    server, _ = start_rm_serve(tmp_path, "--host", "0.0.0.0")
    stop_rm_serve(server)
    assert "without --token-file: anyone who can reach this port can run any command" in \
        (tmp_path / "server.err").read_text()
