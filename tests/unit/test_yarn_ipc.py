"""Hadoop IPC v9 framing and SASL TOKEN/DIGEST-MD5, round trips against a small fake Hadoop
RPC server written here from the wire format (not from the client's code): it checks the
connection header, the call ids as Hadoop 3 encodes them (sint32), the DIGEST-MD5 response
by its own arithmetic, the connection context, and answers calls or errors as Hadoop does."""
from __future__ import annotations

import base64
import hashlib
import socket
import struct
import threading

import pytest

from gangmaster.tools.yarn.credentials import Token
from gangmaster.tools.yarn.ipc import AM_PROTOCOL, IpcConnection, IpcError, RemoteError, frame, split_delimited
from gangmaster.tools.yarn.proto import hadoop_common_pb2 as common
from gangmaster.tools.yarn.proto import yarn_pb2 as yarn
from gangmaster.tools.yarn.varints import decode_varint, encode_varint

Sasl = common.RpcSaslProto
TOKEN = Token(b"\x0a\x0d\x0a\x09\x08\x04\x10\xa6identifier", b"sekrit-password", "YARN_AM_RM_TOKEN", "")
NONCE = "bm9uY2Utb2YtdGhlLWZha2Utc2VydmVy"
NOT_REGISTERED = "org.apache.hadoop.yarn.exceptions.ApplicationMasterNotRegisteredException"


def _md5hex(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def server_digest(fields: dict, password: str, prefix: str) -> str:
    """RFC 2831 response-value, as the server side computes it."""
    secret = hashlib.md5(f"{fields['username']}:{fields['realm']}:{password}".encode()).digest()
    ha1 = _md5hex(secret + f":{fields['nonce']}:{fields['cnonce']}".encode())
    ha2 = _md5hex(f"{prefix}:{fields['digest-uri']}".encode())
    return _md5hex(f"{ha1}:{fields['nonce']}:{fields['nc']}:{fields['cnonce']}:{fields['qop']}:{ha2}".encode())


def split_fields(token: bytes) -> dict:
    out = {}
    for part in token.decode().split(","):
        key, _, value = part.partition("=")
        out[key] = value.strip('"')
    return out


class FakeHadoopServer:
    """One connection at a time; records what it saw."""

    def __init__(self, password: bytes = TOKEN.password, qop: str = "auth", auths=("TOKEN",)):
        self.password = base64.b64encode(password).decode()
        self.qop, self.auths = qop, auths
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.seen: dict = {"headers": [], "methods": []}
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _recv(self, conn, n):
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def _send(self, conn, call_id, *messages, status=0, exception="", error=""):
        header = common.RpcResponseHeaderProto(callId=call_id & 0xFFFFFFFF, status=status, serverIpcVersionNum=9)
        if status:
            header.exceptionClassName, header.errorMsg = exception, error
        conn.sendall(frame(header, *messages))

    def _serve(self):
        conn, _ = self.sock.accept()
        with conn:
            self.seen["connection_header"] = self._recv(conn, 7)
            try:
                while True:
                    (length,) = struct.unpack(">i", self._recv(conn, 4))
                    parts = split_delimited(self._recv(conn, length))
                    self.seen["headers"].append(parts[0])
                    header = common.RpcRequestHeaderProto.FromString(parts[0])
                    if not self._handle(conn, header, parts[1:]):
                        return
            except EOFError:
                return

    def _handle(self, conn, header, parts) -> bool:
        if header.callId == -33:
            message = Sasl.FromString(parts[0])
            if message.state == Sasl.NEGOTIATE:
                challenge = f'realm="default",nonce="{NONCE}",qop="{self.qop}",charset=utf-8,algorithm=md5-sess'
                auths = [Sasl.SaslAuth(method=m, mechanism="DIGEST-MD5" if m == "TOKEN" else "GSSAPI",
                                       protocol="", serverId="default", challenge=challenge.encode())
                         for m in self.auths]
                self._send(conn, -33, Sasl(state=Sasl.NEGOTIATE, auths=auths))
                return True
            fields = split_fields(message.token)
            self.seen["sasl"] = fields
            if fields.get("response") != server_digest(fields, self.password, "AUTHENTICATE"):
                self._send(conn, -33, status=2, exception="javax.security.sasl.SaslException",
                           error="DIGEST-MD5: digest response format violation. Mismatched response.")
                return False
            rspauth = server_digest(fields, self.password, "")
            self._send(conn, -33, Sasl(state=Sasl.SUCCESS, token=f"rspauth={rspauth}".encode()))
            return True
        if header.callId == -3:
            self.seen["context"] = common.IpcConnectionContextProto.FromString(parts[0])
            return True
        request_header = common.RequestHeaderProto.FromString(parts[0])
        self.seen["methods"].append((header.callId, request_header.methodName,
                                     request_header.declaringClassProtocolName,
                                     request_header.clientProtocolVersion))
        if request_header.methodName == "allocate":
            request = yarn.AllocateRequestProto.FromString(parts[1])
            self._send(conn, header.callId, yarn.AllocateResponseProto(response_id=request.response_id + 1,
                                                                       num_cluster_nodes=3))
        else:
            self._send(conn, header.callId, status=1, exception=NOT_REGISTERED,
                       error="Application Master is not registered\n\tat org.apache.hadoop...")
        return True


def test_handshake_and_calls():
    server = FakeHadoopServer()
    with IpcConnection("127.0.0.1", server.port, TOKEN, AM_PROTOCOL) as conn:
        first = conn.call("allocate", yarn.AllocateRequestProto(response_id=4), yarn.AllocateResponseProto)
        with pytest.raises(RemoteError) as info:
            conn.call("finishApplicationMaster", yarn.FinishApplicationMasterRequestProto(),
                      yarn.FinishApplicationMasterResponseProto)
        second = conn.call("allocate", yarn.AllocateRequestProto(response_id=5), yarn.AllocateResponseProto)
    assert (first.response_id, first.num_cluster_nodes, second.response_id) == (5, 3, 6)
    assert info.value.class_name == NOT_REGISTERED and not info.value.fatal
    assert info.value.short_class == "ApplicationMasterNotRegisteredException"
    assert str(info.value) == f"{NOT_REGISTERED}: Application Master is not registered"
    assert server.seen["connection_header"] == b"hrpc\x09\x00\xdf"
    assert server.seen["sasl"]["username"] == base64.b64encode(TOKEN.identifier).decode()
    assert server.seen["sasl"]["digest-uri"] == "/default" and server.seen["sasl"]["realm"] == "default"
    assert server.seen["context"].protocol == AM_PROTOCOL
    assert server.seen["methods"] == [(0, "allocate", AM_PROTOCOL, 1), (1, "finishApplicationMaster", AM_PROTOCOL, 1),
                                      (2, "allocate", AM_PROTOCOL, 1)]


def test_negative_call_ids_are_zigzag_encoded():
    """Hadoop 3's RpcRequestHeaderProto.callId is sint32: -33 is the one byte 0x41 (a uint32
    -33 is five bytes, which a 3.4 server reads as call -2147483632 and refuses)."""
    server = FakeHadoopServer()
    IpcConnection("127.0.0.1", server.port, TOKEN, AM_PROTOCOL).close()
    server.thread.join(5)
    sasl_header, context_header = server.seen["headers"][0], server.seen["headers"][-1]
    assert b"\x18\x41" in sasl_header            # field 3, varint zigzag(-33) = 65
    assert b"\x18\x05" in context_header         # zigzag(-3) = 5
    assert common.RpcRequestHeaderProto.FromString(sasl_header).retryCount == -1


def test_wrong_password_is_the_servers_fatal_error():
    server = FakeHadoopServer(password=b"another password")
    with pytest.raises(RemoteError) as info:
        IpcConnection("127.0.0.1", server.port, TOKEN, AM_PROTOCOL)
    assert info.value.fatal and info.value.class_name == "javax.security.sasl.SaslException"
    assert "Mismatched response" in str(info.value)


@pytest.mark.parametrize("server,expected", [
    (dict(qop="auth-conf"), "only 'auth' is spoken"),
    (dict(auths=("KERBEROS",)), "the server offers KERBEROS/GSSAPI; gangmaster speaks TOKEN/DIGEST-MD5"),
])
def test_unsupported_servers_are_refused_with_the_reason(server, expected):
    fake = FakeHadoopServer(**server)
    with pytest.raises(IpcError, match=expected):
        IpcConnection("127.0.0.1", fake.port, TOKEN, AM_PROTOCOL)


def test_refused_connection_names_the_address():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(IpcError, match=f"cannot connect to 127.0.0.1:{port}"):
        IpcConnection("127.0.0.1", port, TOKEN, AM_PROTOCOL)


def test_frames_are_length_prefixed_delimited_protobufs():
    header = common.RpcRequestHeaderProto(callId=7, clientId=b"c" * 16)
    body = yarn.AllocateRequestProto(response_id=300)
    data = frame(header, body)
    (length,) = struct.unpack(">i", data[:4])
    assert length == len(data) - 4
    size, pos = decode_varint(data, 4)
    assert data[4:pos] == encode_varint(header.ByteSize()) and size == header.ByteSize()
    assert split_delimited(data[4:]) == [header.SerializeToString(), body.SerializeToString()]


@pytest.mark.parametrize("body,expected", [
    (b"\x05ab", "a 5-byte message at byte 1 of a 3-byte frame"),
    (b"\x80", "a truncated length at byte 0"),
])
def test_malformed_frames(body, expected):
    with pytest.raises(IpcError, match=expected):
        split_delimited(body)
