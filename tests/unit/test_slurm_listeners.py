"""Where this machine listens, as the local Slurm cluster checks its daemons: read from
/proc/net/tcp and tcp6 for sockets this test opens, on each kind of address."""
from __future__ import annotations

import socket

import pytest

from gangmaster.tools.slurm.listeners import is_loopback, listeners


def _ipv6() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.parametrize("family, bind, seen", [
    (socket.AF_INET, "127.0.0.1", "127.0.0.1"),
    (socket.AF_INET, "127.0.1.1", "127.0.1.1"),
    (socket.AF_INET, "0.0.0.0", "0.0.0.0"),
    (socket.AF_INET6, "::1", "::1"),
    (socket.AF_INET6, "::", "::"),
])
def test_a_listening_socket_is_found_on_its_address(family, bind, seen):
    if family == socket.AF_INET6 and not _ipv6():
        pytest.skip("no IPv6 on this machine")
    with socket.socket(family) as server, socket.socket(family) as idle:
        server.bind((bind, 0))
        server.listen()
        idle.bind((bind, 0))                        # bound, not listening: not a listener
        port, idle_port = server.getsockname()[1], idle.getsockname()[1]
        found = listeners([port, idle_port])
    assert found == {port: [seen]}
    assert not listeners([port])                    # closed: gone


@pytest.mark.parametrize("address, loopback", [
    ("127.0.0.1", True), ("127.0.1.1", True), ("::1", True), ("::ffff:127.0.0.1", True),
    ("0.0.0.0", False), ("::", False), ("192.0.2.7", False), ("::ffff:192.0.2.7", False),
])
def test_only_loopback_addresses_are_unreachable_from_other_machines(address, loopback):
    assert is_loopback(address) == loopback


def test_nothing_is_found_where_proc_net_cannot_be_read(tmp_path):
    assert listeners([22, 6820], proc_net=tmp_path / "missing") == {}
