"""How a gangmaster gRPC server listens and who may call it: an exclusive bind,
optional TLS, and an optional bearer token. Both servers use it: the barrier
coordinator (``am/barrier/server.py``) and the live RM (``gangmaster rm serve``).

* **Exclusive bind.** gRPC sets ``SO_REUSEPORT`` by default, so a second server on
  a taken port "listens" too and the kernel splits the clients between them.
  :func:`listen` binds with ``grpc.so_reuseport`` off (:data:`EXCLUSIVE_BIND`) and
  turns a refused bind into :class:`ListenError` — :class:`PortInUse` ("port N is
  in use") for the usual case — never gRPC's bare RuntimeError. It takes a
  ``grpc.Server`` or a ``grpc.aio.Server`` alike (both bind synchronously).
* **TLS**: the server is given a PEM certificate and key, a client trusts that
  certificate (or its CA). :func:`read_key_pair` and :func:`read_certificates` read
  them with every check done up front — the file exists, is readable, holds PEM of
  the right kind that parses, and the key matches the certificate — and a failed
  check is a :class:`~gangmaster.conf.fields.ConfigError` naming the file and the
  setting it came from.
* **Token.** A shared secret each call carries in its ``authorization`` metadata
  (``Bearer <token>``); :class:`TokenAuthInterceptor` refuses a call without it
  as UNAUTHENTICATED before the request is even decoded and compares in constant
  time; a client reads the refusal by what it sent (:meth:`ClientSecurity.refused`:
  no token, or not this server's). A token file this module creates is mode 0600
  (:func:`~gangmaster.protocol.private_files.open_private`).
* **Refusals** are logged through a :class:`~gangmaster.protocol.refusal_log.RefusalLog`
  (the barrier coordinator's too): the first one, then at most one summary per
  interval, so a token-guessing client cannot flood the log.
"""
from __future__ import annotations

import errno
import hmac
import logging
import re
import secrets
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from gangmaster.protocol.private_files import open_private
from gangmaster.protocol.refusal_log import RefusalLog
from gangmaster.conf import limits
from gangmaster.conf.fields import ConfigError

log = logging.getLogger(__name__)

#: The metadata key a call's token travels in (lower case, as gRPC requires).
AUTH_METADATA_KEY = "authorization"
_BEARER = "Bearer "
#: gRPC server option that makes a bind exclusive.
EXCLUSIVE_BIND = ("grpc.so_reuseport", 0)


class ListenError(OSError):
    """A server could not listen where it was told to (the message says why): an
    address that does not resolve or cannot be bound, or a port out of range."""


class PortInUse(ListenError):
    """Another process listens on the port (``host``, ``port`` say which)."""

    def __init__(self, host: str, port: int):
        super().__init__(f"port {port} is in use (on {host}); is another server running?")
        self.host, self.port = host, port


# ------------------------------------------------------------------ files
@dataclass(frozen=True)
class _PemKind:
    """What a PEM file must hold: named for messages, recognised by its BEGIN line."""

    noun: str
    begin: re.Pattern
    shown: str

    @property
    def name(self) -> str:
        return f"a PEM {self.noun}"


_CERTIFICATE = _PemKind("certificate", re.compile(rb"-----BEGIN CERTIFICATE-----"), "-----BEGIN CERTIFICATE-----")
_PRIVATE_KEY = _PemKind("private key", re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
                        "-----BEGIN ... PRIVATE KEY-----")


def read_certificates(path: str | Path, setting: str) -> bytes:
    """The PEM certificate(s) in ``path`` — a server's certificate chain, or the
    certificate or CA a client trusts — checked to parse. A file that is missing,
    unreadable, not PEM or not a certificate is a ConfigError naming the file and
    ``setting`` (where the path came from: a flag, a field, an environment variable)."""
    data = _read_pem(path, setting, _CERTIFICATE)
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=data.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(str(path), setting, f"{_CERTIFICATE.name} ({_why(exc)})") from None
    return data


def read_key_pair(cert_file: str | Path, key_file: str | Path, cert_setting: str,
                  key_setting: str) -> tuple[bytes, bytes]:
    """The PEM certificate chain and private key a server serves TLS with, checked as
    :func:`read_certificates` checks a certificate, and the key checked to match the
    certificate (and not to need a passphrase, which gRPC has no way to take)."""
    cert = read_certificates(cert_file, cert_setting)
    key = _read_pem(key_file, key_setting, _PRIVATE_KEY)
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert_file, key_file, password=_no_passphrase)
    except _EncryptedKey:
        raise ConfigError(str(key_file), key_setting,
                          f"{_PRIVATE_KEY.name} without a passphrase (gRPC cannot use an encrypted key)") from None
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(str(key_file), key_setting,
                          f"{_PRIVATE_KEY.name} matching {cert_setting} ({_why(exc)})") from None
    return cert, key


def _read_pem(path: str | Path, setting: str, kind: _PemKind) -> bytes:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(str(path), setting, f"an existing PEM file holding a {kind.noun}") from None
    except OSError as exc:
        raise ConfigError(str(path), setting, f"a readable file holding {kind.name} ({exc.strerror})") from None
    if not kind.begin.search(data):
        raise ConfigError(str(path), setting, f"a PEM file ({kind.name} has a '{kind.shown}' line)")
    return data


class _EncryptedKey(Exception):
    """Raised by :func:`_no_passphrase`: the key asked for a passphrase."""


def _no_passphrase() -> bytes:
    """ssl's passphrase callback: without one, OpenSSL would prompt on the terminal."""
    raise _EncryptedKey()


def _why(exc: Exception) -> str:
    return getattr(exc, "reason", None) or str(exc)


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
    Refuses to overwrite an existing file (FileExistsError)."""
    token = secrets.token_urlsafe(32)
    with open_private(path, "x", encoding="ascii") as f:
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
        """Server TLS credentials (None: plaintext); the files are read and checked now
        (:func:`read_key_pair`), with clear errors."""
        if not self.tls:
            return None
        cert, key = read_key_pair(self.tls_cert_file, self.tls_key_file, cert_setting, key_setting)
        return grpc.ssl_server_credentials([(key, cert)])

    def interceptors(self) -> list[grpc.ServerInterceptor]:
        return [TokenAuthInterceptor(self.token)] if self.token else []


class TokenAuthInterceptor(grpc.ServerInterceptor):
    """Refuse every call whose ``authorization`` metadata is not ``Bearer <token>``
    (UNAUTHENTICATED), before the method runs or its request is decoded."""

    def __init__(self, token: str, refusal_log_interval_s: float | None = None):
        self._expected = (_BEARER + token).encode()
        self.refusals = RefusalLog(log, "no token, or not the right one",
                                   refusal_log_interval_s or limits.REFUSAL_LOG_INTERVAL_S)

    def intercept_service(self, continuation, handler_call_details):
        why = NO_TOKEN
        for key, value in handler_call_details.invocation_metadata or ():
            if key == AUTH_METADATA_KEY:
                given = value.encode() if isinstance(value, str) else bytes(value)
                if hmac.compare_digest(given, self._expected):
                    return continuation(handler_call_details)
                why = NOT_THIS_TOKEN
                break
        self.refusals.refused(f"to {handler_call_details.method}")
        return _refusing_handler(continuation(handler_call_details), why)


#: What a server says to a call that presented no token, and to one whose token is not its own.
NO_TOKEN = "this server needs a token: pass the server's token file (--token-file)"
NOT_THIS_TOKEN = "the token this call presented is not this server's"


def _refusing_handler(handler: grpc.RpcMethodHandler | None, why: str) -> grpc.RpcMethodHandler | None:
    """A handler of the same shape as ``handler`` that answers UNAUTHENTICATED, saying ``why``."""
    if handler is None:
        return None

    def refuse(request_or_iterator: Any, context: grpc.ServicerContext):
        context.abort(grpc.StatusCode.UNAUTHENTICATED, why)

    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(refuse)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(refuse)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(refuse)
    return grpc.unary_unary_rpc_method_handler(refuse)


def listen(server: grpc.Server | grpc.aio.Server, host: str, port: int,
           credentials: grpc.ServerCredentials | None = None) -> int:
    """Bind ``server`` (built with :data:`EXCLUSIVE_BIND` among its options) to
    ``host:port`` and return the port (``port=0``: a free one). Raises
    :class:`PortInUse` ("port N is in use"), or :class:`ListenError` saying why
    otherwise: an unknown address, a port outside 0..65535."""
    if not 0 <= port <= 65535:
        raise ListenError(f"port {port} is not a port number (expected 0..65535)")
    address = f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"
    if port:
        check_bindable(host, port)   # the usual failure, said plainly before gRPC logs its own
    try:
        bound = (server.add_secure_port(address, credentials) if credentials is not None
                 else server.add_insecure_port(address))
    except RuntimeError:   # grpc: "Failed to bind to address ..."
        bound = 0
    if not bound:
        if port:
            check_bindable(host, port)
        raise ListenError(f"cannot listen on {address}")
    return bound


def check_bindable(host: str, port: int) -> None:
    """Raise PortInUse or ListenError when a plain socket cannot bind ``host:port`` (as
    gRPC would, with SO_REUSEADDR and without SO_REUSEPORT)."""
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
                    raise PortInUse(host, port) from None
                raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


# ------------------------------------------------------------------ client side
@dataclass(frozen=True)
class ClientSecurity:
    """How a client reaches a secured server: the CA (or self-signed certificate) to
    trust for TLS, and the token to present."""

    tls_ca_file: str | None = None
    token: str | None = None
    #: where :attr:`token` was read (``--token-file``), to name it when the server refuses it
    token_file: str | None = None

    def channel(self, address: str, options: list[tuple[str, Any]] | None = None,
                ca_setting: str = "tls_ca_file") -> grpc.Channel:
        if self.tls_ca_file is None:
            return grpc.insecure_channel(address, options=options)
        creds = grpc.ssl_channel_credentials(root_certificates=read_certificates(self.tls_ca_file, ca_setting))
        return grpc.secure_channel(address, creds, options=options)

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """What every call sends (the token, when there is one)."""
        return ((AUTH_METADATA_KEY, _BEARER + self.token),) if self.token else ()

    def refused(self) -> str:
        """What a server's UNAUTHENTICATED means for this client: it sent no token, or the
        one it sent (from :attr:`token_file`) is not the server's."""
        if self.token is None:
            return NO_TOKEN
        return f"the token in {self.token_file} is not this server's" if self.token_file else NOT_THIS_TOKEN
