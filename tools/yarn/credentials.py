"""Hadoop's token storage file (``HADOOP_TOKEN_FILE_LOCATION``): how the AM gets its AMRMToken.

The NodeManager writes the container's credentials to a file and names it in the
environment. Layout (``org.apache.hadoop.security.Credentials``): the magic ``HDTS``, one
format byte, then the body:

* format 0, WRITABLE: ``vint nTokens``; per token a ``Text`` alias and a ``Token``
  (``vint`` length + identifier, ``vint`` length + password, ``Text`` kind, ``Text``
  service); then ``vint nSecrets``; per secret a ``Text`` alias, ``vint`` length + bytes.
  A ``Text`` is a ``vint`` length + UTF-8.
* format 1, PROTOBUF: one length-delimited ``CredentialsProto`` (protobuf's own varint).

Hadoop's ``vint``/``vlong`` (``WritableUtils``) is **not** protobuf's varint: a value in
-112..127 is one byte; anything else is a byte that gives the sign and the count of
big-endian bytes that follow (-113..-120 positive, -121..-128 negative, as the one's
complement). Reading it as a varint only works below 128, so it is done here by the rule.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field

from google.protobuf.internal.decoder import _DecodeVarint
from google.protobuf.message import DecodeError

from .proto import hadoop_common_pb2 as common

MAGIC = b"HDTS"
WRITABLE, PROTOBUF = 0, 1
#: the token kind of the AM's token to the RM's scheduler (AMRMTokenIdentifier.KIND_NAME)
AMRM_TOKEN_KIND = "YARN_AM_RM_TOKEN"
#: a token file is a few KB; refuse to read a count or a length beyond this
MAX_FIELD_BYTES = 1 << 20


class TokenFileError(ValueError):
    """A token storage file that cannot be read; the message names the file and the place."""


@dataclass(frozen=True)
class Token:
    """A Hadoop ``Token``: an opaque identifier and password, its kind and the service it is for."""

    identifier: bytes
    password: bytes
    kind: str
    service: str

    def to_proto(self) -> common.TokenProto:
        return common.TokenProto(identifier=self.identifier, password=self.password,
                                 kind=self.kind, service=self.service)

    @classmethod
    def from_proto(cls, proto: common.TokenProto) -> "Token":
        return cls(proto.identifier, proto.password, proto.kind, proto.service)


@dataclass
class Credentials:
    """The tokens (by alias) and secret keys (by alias) of a token storage file."""

    tokens: dict[str, Token] = field(default_factory=dict)
    secrets: dict[str, bytes] = field(default_factory=dict)

    def token_of_kind(self, kind: str) -> Token | None:
        """The first token of ``kind`` (a container's file holds one AMRMToken)."""
        return next((t for t in self.tokens.values() if t.kind == kind), None)


# ------------------------------------------------------------------ Hadoop vint / vlong
def read_vlong(stream: io.BufferedIOBase) -> int:
    """One Hadoop ``WritableUtils.readVLong`` value from ``stream``."""
    first = _byte(stream)
    first = first - 256 if first > 127 else first
    if first >= -112:
        return first
    size = (-119 - first) if first < -120 else (-111 - first)   # bytes after the first
    value = int.from_bytes(_exactly(stream, size - 1), "big")
    return ~value if first < -120 else value


def write_vlong(value: int) -> bytes:
    """``value`` as Hadoop's ``WritableUtils.writeVLong`` writes it (the inverse of :func:`read_vlong`)."""
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"{value} does not fit a Hadoop vlong (64 bits)")
    if -112 <= value <= 127:
        return bytes([value & 0xFF])
    negative = value < 0
    magnitude = ~value if negative else value
    size = (magnitude.bit_length() + 7) // 8
    first = (-120 if negative else -112) - size
    return bytes([first & 0xFF]) + magnitude.to_bytes(size, "big")


def _byte(stream) -> int:
    return _exactly(stream, 1)[0]


def _exactly(stream, n: int) -> bytes:
    data = stream.read(n)
    if len(data) != n:
        raise EOFError(f"{n} byte(s) expected at offset {stream.tell() - len(data)}, {len(data)} left")
    return data


def _length(stream, what: str) -> int:
    n = read_vlong(stream)
    if not 0 <= n <= MAX_FIELD_BYTES:
        raise ValueError(f"{what}: expected a length 0..{MAX_FIELD_BYTES}, got {n}")
    return n


def _blob(stream, what: str) -> bytes:
    return _exactly(stream, _length(stream, what))


def _text(stream, what: str) -> str:
    return _blob(stream, what).decode("utf-8")


# ------------------------------------------------------------------ reading and writing
def parse_credentials(data: bytes, source: str = "token file") -> Credentials:
    """The credentials in ``data`` (a whole token storage file); TokenFileError names ``source``."""
    if data[:4] != MAGIC:
        raise TokenFileError(f"{source}: expected the magic bytes HDTS, got {data[:4]!r}")
    if len(data) < 5:
        raise TokenFileError(f"{source}: expected a format byte after HDTS, got the end of the file")
    stream = io.BytesIO(data[5:])
    try:
        if data[4] == WRITABLE:
            return _parse_writable(stream)
        if data[4] == PROTOBUF:
            return _parse_protobuf(data[5:])
    except (EOFError, ValueError, UnicodeDecodeError, DecodeError) as exc:
        raise TokenFileError(f"{source}: format {data[4]}: {exc}") from None
    raise TokenFileError(f"{source}: expected format 0 (WRITABLE) or 1 (PROTOBUF), got {data[4]}")


def read_credentials(path: str) -> Credentials:
    """The credentials in the token storage file at ``path``."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FIELD_BYTES + 1)
    except OSError as exc:
        raise TokenFileError(f"{path}: cannot read: {exc.strerror}") from None
    return parse_credentials(data, path)


def _parse_writable(stream) -> Credentials:
    creds = Credentials()
    for i in range(_length(stream, "token count")):
        alias = _text(stream, f"token[{i}].alias")
        creds.tokens[alias] = Token(_blob(stream, f"token[{i}].identifier"), _blob(stream, f"token[{i}].password"),
                                    _text(stream, f"token[{i}].kind"), _text(stream, f"token[{i}].service"))
    for i in range(_length(stream, "secret count")):
        alias = _text(stream, f"secret[{i}].alias")
        creds.secrets[alias] = _blob(stream, f"secret[{i}].value")
    return creds


def _parse_protobuf(body: bytes) -> Credentials:
    size, start = _DecodeVarint(body, 0)
    if start + size > len(body):
        raise EOFError(f"a CredentialsProto of {size} bytes expected, {len(body) - start} left")
    proto = common.CredentialsProto.FromString(body[start:start + size])
    return Credentials({kv.alias: Token.from_proto(kv.token) for kv in proto.tokens},
                       {kv.alias: kv.secret for kv in proto.secrets})


def serialize_credentials(creds: Credentials, fmt: int = WRITABLE) -> bytes:
    """``creds`` as a token storage file in format ``fmt`` (what a NodeManager writes)."""
    if fmt == PROTOBUF:
        proto = common.CredentialsProto(
            tokens=[common.CredentialsKVProto(alias=a, token=t.to_proto()) for a, t in creds.tokens.items()],
            secrets=[common.CredentialsKVProto(alias=a, secret=s) for a, s in creds.secrets.items()])
        body = proto.SerializeToString()
        return MAGIC + bytes([PROTOBUF]) + _varint(len(body)) + body
    out = [MAGIC, bytes([WRITABLE]), write_vlong(len(creds.tokens))]
    for alias, t in creds.tokens.items():
        out += [_w_text(alias), _w_blob(t.identifier), _w_blob(t.password), _w_text(t.kind), _w_text(t.service)]
    out.append(write_vlong(len(creds.secrets)))
    for alias, secret in creds.secrets.items():
        out += [_w_text(alias), _w_blob(secret)]
    return b"".join(out)


def _w_blob(data: bytes) -> bytes:
    return write_vlong(len(data)) + data


def _w_text(text: str) -> bytes:
    return _w_blob(text.encode("utf-8"))


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)
