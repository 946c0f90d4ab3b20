"""Hadoop's token storage file (``HADOOP_TOKEN_FILE_LOCATION``): how the AM gets its AMRMToken.

The NodeManager writes the container's credentials to a file and names it in the
environment. Layout (``org.apache.hadoop.security.Credentials``): the magic ``HDTS``, one
format byte, then the body:

* format 0, WRITABLE: ``vint nTokens``; per token a ``Text`` alias and a ``Token``
  (``vint`` length + identifier, ``vint`` length + password, ``Text`` kind, ``Text``
  service); then ``vint nSecrets``; per secret a ``Text`` alias, ``vint`` length + bytes.
  A ``Text`` is a ``vint`` length + UTF-8.
* format 1, PROTOBUF: one length-delimited ``CredentialsProto`` (protobuf's own varint).

The ``vint`` lengths are Hadoop's own, not protobuf's varints (:mod:`.varints`).
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError

from .proto import hadoop_common_pb2 as common
from .varints import decode_varint, encode_varint, read_exactly, read_vlong, write_vlong

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


def _length(stream, what: str) -> int:
    n = read_vlong(stream)
    if not 0 <= n <= MAX_FIELD_BYTES:
        raise ValueError(f"{what}: expected a length 0..{MAX_FIELD_BYTES}, got {n}")
    return n


def _blob(stream, what: str) -> bytes:
    return read_exactly(stream, _length(stream, what))


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
    size, start = decode_varint(body, 0)
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
        return MAGIC + bytes([PROTOBUF]) + encode_varint(len(body)) + body
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
