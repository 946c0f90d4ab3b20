"""Which addresses of this machine listen on given TCP ports, read from Linux's
``/proc/net/tcp`` and ``/proc/net/tcp6``.

``local-cluster`` checks with it where Slurm's daemons really listen: Slurm 22.05 has
no option naming a daemon's address (see :func:`.local_cluster.loopback_address`), so
what the configuration asks for is confirmed on the machine, and a daemon reachable
from the network is said out loud."""
from __future__ import annotations

import ipaddress
import sys
from pathlib import Path

PROC_NET = Path("/proc/net")
TCP_LISTEN = "0A"   # the state column of a listening socket (the kernel's tcp_states.h)


def listeners(ports, proc_net: Path = PROC_NET) -> dict[int, list[str]]:
    """``{port: [address, ...]}``: the addresses listening on each of ``ports`` now (a port
    nothing listens on has no entry). Empty where ``/proc/net`` cannot be read."""
    wanted = set(ports)
    found: dict[int, list[str]] = {}
    for table in ("tcp", "tcp6"):
        try:
            rows = (proc_net / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 4 or fields[3] != TCP_LISTEN:
                continue
            address, _, port = fields[1].rpartition(":")
            if int(port, 16) in wanted:
                found.setdefault(int(port, 16), []).append(_address(address))
    return found


def is_loopback(address: str) -> bool:
    """Whether only this machine can reach ``address`` (127.0.0.0/8, ::1, ::ffff:127.x)."""
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def _address(hex_words: str) -> str:
    """An address as ``/proc/net/tcp*`` writes it: each 32-bit word in this machine's byte order."""
    raw = b"".join(int(hex_words[i:i + 8], 16).to_bytes(4, sys.byteorder) for i in range(0, len(hex_words), 8))
    return str(ipaddress.ip_address(raw))
