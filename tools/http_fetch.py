"""One HTTP GET bounded as a whole: by a deadline and by the size of the answer.

``urlopen(url, timeout=T)`` bounds each socket operation, not the call: a server that
sends a byte every half second never lets one operation wait ``T``, so it holds the
caller as long as it trickles (``gangmaster why --timeout 2`` took 153 s), and a body
is read whole however large. Here every read waits at most what is left of one deadline,
and the body is read no further than the limit; whatever goes wrong is one
:class:`FetchError` saying what, for a one-line message.
"""
from __future__ import annotations

import http.client
import socket
import time


class FetchError(Exception):
    """The server did not give a whole answer: unreachable, too slow, too large, not HTTP,
    or not status 200 (or, said by its caller, not what it should have said). The message
    says which, in one line."""


def fetch(address: str, path: str, timeout_s: float, max_bytes: int, limit_name: str) -> bytes:
    """The body of ``GET path`` from ``address`` (``HOST:PORT``), all of it within ``timeout_s`` seconds
    (connecting included) and at most ``max_bytes`` bytes (``limit_name``: the constant
    of conf/limits.py it is, named when a body is larger)."""
    connection = _DeadlineConnection(address, time.monotonic() + timeout_s)
    try:
        connection.request("GET", path, headers={"Accept": "application/json"})
        response = connection.getresponse()
        if response.status != 200:
            raise FetchError(f"HTTP {response.status} {response.reason}".strip())
        declared = response.getheader("Content-Length", "")
        too_large = f"an answer of at most {max_bytes:,} bytes ({limit_name} in conf/limits.py)"
        if declared.isdigit() and int(declared) > max_bytes:
            raise FetchError(f"expected {too_large}, got one of {int(declared):,} bytes")
        body = response.read(max_bytes + 1)
        if len(body) > max_bytes:
            raise FetchError(f"expected {too_large}, got more")
        if declared.isdigit() and len(body) < int(declared):
            raise FetchError(f"the answer ended after {len(body):,} of its {int(declared):,} bytes")
        return body
    except TimeoutError:
        raise FetchError(f"no whole answer within {timeout_s:g}s (--timeout)") from None
    except http.client.HTTPException as exc:   # before OSError: a connection closed unanswered is both
        raise FetchError(f"expected an HTTP answer, got {_shown(exc)}") from None
    except OSError as exc:
        raise FetchError(_shown(exc)) from None
    finally:
        connection.close()


class _DeadlineConnection(http.client.HTTPConnection):
    """An HTTP connection whose socket reads and writes each wait only what is left
    until ``deadline`` (``time.monotonic()``), so the request as a whole ends by then."""

    def __init__(self, address: str, deadline: float):
        super().__init__(address)
        self._deadline = deadline

    def connect(self) -> None:
        self.timeout = _left(self._deadline)
        super().connect()
        self.sock = _DeadlineSocket(self.sock.detach(), self._deadline)


class _DeadlineSocket(socket.socket):
    """The connected socket, each send and receive given what is left of the deadline
    (``http.client`` reads through ``makefile``, whose reads come here)."""

    def __init__(self, fileno: int, deadline: float):
        super().__init__(fileno=fileno)
        self._deadline = deadline

    def sendall(self, data, *args) -> None:
        self.settimeout(_left(self._deadline))
        super().sendall(data, *args)

    def recv_into(self, buffer, *args) -> int:
        self.settimeout(_left(self._deadline))
        return super().recv_into(buffer, *args)


def _left(deadline: float) -> float:
    """Seconds left until ``deadline``; past it, a TimeoutError (as a socket's own)."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the deadline has passed")
    return left


def _shown(exc: Exception) -> str:
    """An exception in one short line: what a server sent (a status line of random bytes)
    with its control characters escaped and cut at 80 characters."""
    text = str(exc)
    text = ascii(text[:80])[1:-1] + ("..." if len(text) > 80 else "")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
