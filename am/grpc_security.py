"""How a gangmaster gRPC server listens and who may call it: an exclusive bind,
optional TLS, and an optional bearer token.

* **Exclusive bind.** gRPC sets ``SO_REUSEPORT`` by default, so a second server on
  a taken port "listens" too and the kernel splits the clients between them.
  :func:`listen` binds with ``grpc.so_reuseport`` off and turns a refused bind
  into :class:`ListenError` ("port N is in use"), never gRPC's bare RuntimeError.
* **TLS**, as the barrier coordinator has it: the server is given a PEM
  certificate and key, a client trusts that certificate (or its CA). A file that
  is missing, unreadable or not PEM is a :class:`~gangmaster.conf.fields.ConfigError`
  naming the file and the setting.
* **Token.** A shared secret each call carries in its ``authorization`` metadata
  (``Bearer <token>``); :class:`TokenAuthInterceptor` refuses a call without it
  as UNAUTHENTICATED before the request is even decoded, compares in constant
  time, and logs refusals at most once a minute (a guessing client cannot flood
  the log). A token file this module creates is mode 0600.

The barrier coordinator does TLS the same way (``am/barrier_server.py``) and
could move onto this module; the RM (``gangmaster rm serve``) uses it now.
"""
from __future__ import annotations

import errno
import hmac
import logging
import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from gangmaster.conf.fields import ConfigError

log = logging.getLogger(__name__)

#: The metadata key a call's token travels in (lower case, as gRPC requires).
AUTH_METADATA_KEY = "authorization"
_BEARER = "Bearer "
#: gRPC server option that makes a bind exclusive.
EXCLUSIVE_BIND = ("grpc.so_reuseport", 0)


class ListenError(OSError):
    """A server could not listen where it was told to (the message says why)."""


# ------------------------------------------------------------------ files
def read_pem(path: str | Path, setting: str) -> bytes:
    """The bytes of a PEM file; a missing, unreadable or non-PEM file is a ConfigError
    naming the file and the setting it came from."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(str(path), setting, "an existing PEM file") from None
    except OSError as exc:
        raise ConfigError(str(path), setting, f"a readable PEM file ({exc.strerror})") from None
    if b"-----BEGIN " not in data:
        raise ConfigError(str(path), setting, "a PEM file (a '-----BEGIN ...' block)")
    return data


def read_token(path: str | Path, setting: str, max_chars: int) -> str:
    """The token in ``path`` (its first line, stripped); refused when missing, empty,
    longer than ``max_chars`` or not printable ASCII (it travels as gRPC metadata)."""
    try:
        text = Path(path).read_text(encoding="ascii", errors="strict")
    except FileNotFoundError:
        raise ConfigError(str(path), setting, "an existing token file") from None
    except OSError as exc:
        raise ConfigError(str(path), setting, f"a readable token file ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(str(path), setting, "a token of printable ASCII characters") from None
    lines = text.splitlines()
    token = lines[0].strip() if lines else ""
    if not token or len(token) > max_chars or not token.isprintable() or " " in token:
        raise ConfigError(str(path), setting, f"a token of 1..{max_chars} printable ASCII characters "
                                              "without spaces on the first line")
    return token


def create_token_file(path: str | Path) -> str:
    """Write a fresh random token to a new file only its owner can read (0600); returns it.
    Refuses to overwrite an existing file (``O_EXCL``)."""
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


def load_or_create_token(path: str | Path, setting: str, max_chars: int) -> tuple[str, bool]:
    """The token in ``path``, or a new one written there (mode 0600) when the file does not
    exist; returns ``(token, created)``."""
    try:
        return create_token_file(path), True
    except FileExistsError:
        return read_token(path, setting, max_chars), False
    except OSError as exc:
        raise ConfigError(str(path), setting, f"a token file that can be created ({exc.strerror})") from None


# ------------------------------------------------------------------ server side
@dataclass(frozen=True)
class ServerSecurity:
    """What a server demands of its callers: TLS (cert + key files) and/or a token."""

    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    token: str | None = None

    def __post_init__(self) -> None:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            missing = "tls_key_file" if self.tls_key_file is None else "tls_cert_file"
            raise ConfigError("TLS", missing, "a PEM file path (TLS needs both a certificate and a key)")

    @property
    def tls(self) -> bool:
        return self.tls_cert_file is not None

    def credentials(self, cert_setting: str = "tls_cert_file",
                    key_setting: str = "tls_key_file") -> grpc.ServerCredentials | None:
        """Server TLS credentials (None: plaintext); the files are read now, with clear errors."""
        if not self.tls:
            return None
        cert = read_pem(self.tls_cert_file, cert_setting)
        key = read_pem(self.tls_key_file, key_setting)
        return grpc.ssl_server_credentials([(key, cert)])

    def interceptors(self) -> list[grpc.ServerInterceptor]:
        return [TokenAuthInterceptor(self.token)] if self.token else []


class TokenAuthInterceptor(grpc.ServerInterceptor):
    """Refuse every call whose ``authorization`` metadata is not ``Bearer <token>``
    (UNAUTHENTICATED), before the method runs or its request is decoded."""

    def __init__(self, token: str, refusal_log_interval_s: float = 60.0):
        self._expected = (_BEARER + token).encode()
        self._log_interval_s = refusal_log_interval_s
        self._lock = threading.Lock()
        self._refused = 0
        self._logged_at: float | None = None

    def intercept_service(self, continuation, handler_call_details):
        for key, value in handler_call_details.invocation_metadata or ():
            if key == AUTH_METADATA_KEY:
                given = value.encode() if isinstance(value, str) else bytes(value)
                if hmac.compare_digest(given, self._expected):
                    return continuation(handler_call_details)
                break
        self._note_refusal(handler_call_details.method)
        return _refusing_handler(continuation(handler_call_details))

    def _note_refusal(self, method: str) -> None:
        """Count refusals; log the first, then at most once per interval with the count."""
        with self._lock:
            self._refused += 1
            now = time.monotonic()
            if self._logged_at is not None and now - self._logged_at < self._log_interval_s:
                return
            self._logged_at, count = now, self._refused
        log.warning("refused a call to %s without the right token (%d refused so far)", method, count)


def _refusing_handler(handler: grpc.RpcMethodHandler | None) -> grpc.RpcMethodHandler | None:
    """A handler of the same shape as ``handler`` that answers UNAUTHENTICATED."""
    if handler is None:
        return None

    def refuse(request_or_iterator: Any, context: grpc.ServicerContext):
        context.abort(grpc.StatusCode.UNAUTHENTICATED,
                      "this server needs a token: pass the server's token file (--token-file)")

    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(refuse)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(refuse)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(refuse)
    return grpc.unary_unary_rpc_method_handler(refuse)


def listen(server: grpc.Server, host: str, port: int,
           credentials: grpc.ServerCredentials | None = None) -> int:
    """Bind ``server`` (built with :data:`EXCLUSIVE_BIND` among its options) to
    ``host:port`` and return the port (``port=0``: a free one). Raises
    :class:`ListenError` saying why: "port N is in use", an unknown address, a
    port outside 0..65535."""
    if not 0 <= port <= 65535:
        raise ListenError(f"port {port} is not a port number (expected 0..65535)")
    address = f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"
    if port:
        check_bindable(host, port)   # the usual failure, said plainly before gRPC logs its own
    try:
        bound = (server.add_secure_port(address, credentials) if credentials is not None
                 else server.add_insecure_port(address))
    except RuntimeError:
        bound = 0
    if not bound:
        if port:
            check_bindable(host, port)
        raise ListenError(f"cannot listen on {address}")
    return bound


def check_bindable(host: str, port: int) -> None:
    """Raise ListenError when a plain socket cannot bind ``host:port`` (as gRPC would, with
    SO_REUSEADDR and without SO_REUSEPORT)."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise ListenError(f"cannot listen on {host}:{port}: unknown address ({exc})") from None
    for family, kind, proto, _, sockaddr in infos:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(sockaddr)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise ListenError(f"port {port} is in use (on {host}); is another server running?") from None
                raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


# ------------------------------------------------------------------ client side
@dataclass(frozen=True)
class ClientSecurity:
    """How a client reaches a secured server: the CA (or self-signed certificate) to
    trust for TLS, and the token to present."""

    tls_ca_file: str | None = None
    token: str | None = None

    def channel(self, address: str, options: list[tuple[str, Any]] | None = None,
                ca_setting: str = "tls_ca_file") -> grpc.Channel:
        if self.tls_ca_file is None:
            return grpc.insecure_channel(address, options=options)
        creds = grpc.ssl_channel_credentials(root_certificates=read_pem(self.tls_ca_file, ca_setting))
        return grpc.secure_channel(address, creds, options=options)

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """What every call sends (the token, when there is one)."""
        return ((AUTH_METADATA_KEY, _BEARER + self.token),) if self.token else ()
