"""A Hadoop IPC (RPC version 9) client: how a Python AM calls the RM's scheduler port
(ApplicationMasterProtocol) and each NodeManager (ContainerManagementProtocol).

The wire, as Hadoop's ``org.apache.hadoop.ipc.Client`` writes it:

1. The connection header, 7 bytes: ``hrpc``, version 9, service class 0, auth protocol
   0xDF (SASL).
2. Every message after it: a big-endian int32 length, then length-delimited protobufs
   (protobuf's varint lengths): an ``RpcRequestHeaderProto`` and the payload.
3. SASL (callId -33): the client sends NEGOTIATE; the server answers NEGOTIATE with its
   auths (for tokens: TOKEN / DIGEST-MD5 with the first challenge); the client INITIATEs
   with the chosen auth and its DIGEST-MD5 response; the server answers SUCCESS with
   ``rspauth`` (or CHALLENGE, answered with RESPONSE). QOP ``auth``: no wrapping after.
4. The connection context (callId -3): the protocol name the calls are for.
5. Calls (callId 0, 1, ...): the header, a ``RequestHeaderProto`` (method, protocol,
   version 1) and the request. The answer: a length, a delimited
   ``RpcResponseHeaderProto`` and, on SUCCESS, the delimited response; on ERROR/FATAL the
   header carries the server's exception class and message (raised as :class:`RemoteError`).

Blocking sockets, one call at a time, no threads: the AM heartbeats itself.
"""
from __future__ import annotations

import socket
import struct
import uuid
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from .credentials import Token
from .digest_md5 import DigestMD5Client, DigestMD5Error
from .proto import hadoop_common_pb2 as common
from .varints import decode_varint, encode_varint

CONNECTION_HEADER = b"hrpc" + bytes([9, 0, 0xDF])   # version 9, service class 0, SASL
SASL_CALL_ID = -33
CONNECTION_CONTEXT_CALL_ID = -3
#: ApplicationMasterProtocolPB's and ContainerManagementProtocolPB's @ProtocolInfo names
AM_PROTOCOL = "org.apache.hadoop.yarn.api.ApplicationMasterProtocolPB"
NM_PROTOCOL = "org.apache.hadoop.yarn.api.ContainerManagementProtocolPB"
PROTOCOL_VERSION = 1
#: a response larger than this is refused (Hadoop's own ipc.maximum.response.length is 128 MB)
MAX_FRAME_BYTES = 128 << 20

Sasl = common.RpcSaslProto
Status = common.RpcResponseHeaderProto
M = TypeVar("M", bound=Message)


class IpcError(RuntimeError):
    """The connection failed: refused, closed, a malformed frame, or SASL that did not complete."""


class RemoteError(IpcError):
    """The server answered a call (or the handshake) with an error: its Java exception
    class and message, as Hadoop's ``RemoteException`` carries them."""

    def __init__(self, class_name: str, message: str, fatal: bool = False, detail: int | None = None):
        self.class_name, self.message, self.fatal, self.detail = class_name, message, fatal, detail
        first_line = (message or "").strip().splitlines()[0] if (message or "").strip() else ""
        super().__init__(f"{class_name}: {first_line}" if first_line else class_name)

    @property
    def short_class(self) -> str:
        return self.class_name.rsplit(".", 1)[-1]


def _int32(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value


def delimited(*messages: Message) -> bytes:
    return b"".join(encode_varint(m.ByteSize()) + m.SerializeToString() for m in messages)


def frame(*messages: Message) -> bytes:
    """One message on the wire: the int32 length, then each protobuf length-delimited."""
    body = delimited(*messages)
    return struct.pack(">i", len(body)) + body


def split_delimited(body: bytes) -> list[bytes]:
    """The length-delimited protobufs in one frame's body, as raw bytes."""
    parts, pos = [], 0
    while pos < len(body):
        try:
            size, pos = decode_varint(body, pos)
        except (EOFError, ValueError):
            raise IpcError(f"a truncated length at byte {pos} of a {len(body)}-byte frame") from None
        if pos + size > len(body):
            raise IpcError(f"a {size}-byte message at byte {pos} of a {len(body)}-byte frame")
        parts.append(body[pos:pos + size])
        pos += size
    return parts


def read_frame(sock: socket.socket) -> bytes:
    (length,) = struct.unpack(">i", _recv_exactly(sock, 4))
    if not 0 <= length <= MAX_FRAME_BYTES:
        raise IpcError(f"a frame of {length} bytes announced (at most {MAX_FRAME_BYTES})")
    return _recv_exactly(sock, length)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise IpcError(f"the server closed the connection ({n - left} of {n} bytes read)")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _parse(cls: type[M], data: bytes, what: str) -> M:
    try:
        return cls.FromString(data)
    except DecodeError as exc:
        raise IpcError(f"an unreadable {what}: {exc}") from None


class IpcConnection:
    """An authenticated connection to one Hadoop RPC server for one protocol, with one token."""

    def __init__(self, host: str, port: int, token: Token, protocol: str, timeout_s: float = 30.0,
                 user: str | None = None):
        self.address = f"{host}:{port}"
        self.protocol = protocol
        self.client_id = uuid.uuid4().bytes
        self._next_call = 0
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise IpcError(f"cannot connect to {self.address}: {exc.strerror or exc}") from None
        try:
            self._sock.sendall(CONNECTION_HEADER)
            self._authenticate(token)
            context = common.IpcConnectionContextProto(protocol=protocol)
            if user:
                context.userInfo.effectiveUser = user
            self._sock.sendall(frame(self._header(CONNECTION_CONTEXT_CALL_ID), context))
        except (OSError, IpcError):
            self._sock.close()
            raise

    # -------------------------------------------------------------- framing
    def _header(self, call_id: int) -> common.RpcRequestHeaderProto:
        return common.RpcRequestHeaderProto(
            rpcKind=common.RPC_PROTOCOL_BUFFER, rpcOp=common.RpcRequestHeaderProto.RPC_FINAL_PACKET,
            callId=call_id, clientId=self.client_id if call_id != SASL_CALL_ID else b"", retryCount=-1)

    def _read_response(self) -> tuple[common.RpcResponseHeaderProto, list[bytes]]:
        try:
            parts = split_delimited(read_frame(self._sock))
        except OSError as exc:
            raise IpcError(f"{self.address}: {exc.strerror or exc}") from None
        if not parts:
            raise IpcError(f"{self.address}: an empty response frame")
        header = _parse(common.RpcResponseHeaderProto, parts[0], "response header")
        if header.status != Status.SUCCESS:
            raise RemoteError(header.exceptionClassName, header.errorMsg, fatal=header.status == Status.FATAL,
                              detail=header.errorDetail if header.HasField("errorDetail") else None)
        return header, parts[1:]

    # -------------------------------------------------------------- SASL
    def _sasl_exchange(self, message: Sasl) -> Sasl:
        self._sock.sendall(frame(self._header(SASL_CALL_ID), message))
        header, rest = self._read_response()
        if _int32(header.callId) != SASL_CALL_ID or not rest:
            raise IpcError(f"{self.address}: expected a SASL answer (callId -33), got callId "
                           f"{_int32(header.callId)}")
        return _parse(Sasl, rest[0], "SASL message")

    def _authenticate(self, token: Token) -> None:
        answer = self._sasl_exchange(Sasl(state=Sasl.NEGOTIATE))
        if answer.state == Sasl.SUCCESS:       # a server with authentication off
            return
        if answer.state != Sasl.NEGOTIATE:
            raise IpcError(f"{self.address}: expected SASL NEGOTIATE, got {Sasl.SaslState.Name(answer.state)}")
        auth = next((a for a in answer.auths if a.method == "TOKEN" and a.mechanism == "DIGEST-MD5"), None)
        if auth is None:
            offered = ", ".join(f"{a.method}/{a.mechanism}" for a in answer.auths) or "nothing"
            raise IpcError(f"{self.address}: the server offers {offered}; gangmaster speaks TOKEN/DIGEST-MD5")
        client = DigestMD5Client.for_token(token.identifier, token.password, auth.protocol, auth.serverId)
        chosen = Sasl.SaslAuth(method=auth.method, mechanism=auth.mechanism, protocol=auth.protocol,
                               serverId=auth.serverId)
        try:
            if auth.HasField("challenge"):
                reply = Sasl(state=Sasl.INITIATE, token=client.respond(auth.challenge), auths=[chosen])
            else:   # no challenge in NEGOTIATE: initiate empty, the challenge comes next
                reply = Sasl(state=Sasl.INITIATE, auths=[chosen])
            while True:
                answer = self._sasl_exchange(reply)
                if answer.state == Sasl.SUCCESS:
                    if answer.HasField("token"):
                        client.verify(answer.token)
                    return
                if answer.state != Sasl.CHALLENGE:
                    raise IpcError(f"{self.address}: expected SASL CHALLENGE or SUCCESS, got "
                                   f"{Sasl.SaslState.Name(answer.state)}")
                reply = Sasl(state=Sasl.RESPONSE, token=client.respond(answer.token))
        except DigestMD5Error as exc:
            raise IpcError(f"{self.address}: SASL DIGEST-MD5: {exc}") from None

    # -------------------------------------------------------------- calls
    def call(self, method: str, request: Message, response_type: type[M]) -> M:
        """Call ``method`` with ``request``; the server's answer as ``response_type``."""
        call_id = self._next_call
        self._next_call += 1
        header = common.RequestHeaderProto(methodName=method, declaringClassProtocolName=self.protocol,
                                           clientProtocolVersion=PROTOCOL_VERSION)
        try:
            self._sock.sendall(frame(self._header(call_id), header, request))
        except OSError as exc:
            raise IpcError(f"{self.address}: {method}: {exc.strerror or exc}") from None
        response, rest = self._read_response()
        if response.callId != call_id:
            raise IpcError(f"{self.address}: {method}: expected the answer to call {call_id}, got {response.callId}")
        return _parse(response_type, rest[0] if rest else b"", f"{method} response")

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> "IpcConnection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
