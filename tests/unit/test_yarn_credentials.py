"""The token storage file reader (``HADOOP_TOKEN_FILE_LOCATION``) and Hadoop's vint/vlong."""
from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from gangmaster.tools.yarn.credentials import (AMRM_TOKEN_KIND, PROTOBUF, WRITABLE, Credentials, Token,
                                               TokenFileError, parse_credentials, read_credentials,
                                               serialize_credentials)
from gangmaster.tools.yarn.varints import decode_varint, encode_varint, read_vlong, write_vlong

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "yarn"

# value, the bytes of Hadoop's WritableUtils.writeVLong (one byte for -112..127; else a first
# byte -113..-120 (positive) or -121..-128 (negative, one's complement) giving how many
# big-endian bytes follow), as Hadoop 3.4.2's own WritableUtils wrote them
VLONGS = [
    (0, "00"),
    (1, "01"),
    (127, "7f"),
    (128, "8f80"),
    (255, "8fff"),
    (256, "8e0100"),
    (-1, "ff"),
    (-112, "90"),
    (-113, "8770"),
    (-256, "87ff"),
    (-257, "860100"),
    (65536, "8d010000"),
    (2**31 - 1, "8c7fffffff"),
    (2**63 - 1, "887fffffffffffffff"),
    (-(2**63), "807fffffffffffffff"),
]


@pytest.mark.parametrize("value,encoded", VLONGS)
def test_vlong_reads_hadoops_bytes(value, encoded):
    assert read_vlong(io.BytesIO(bytes.fromhex(encoded))) == value


@pytest.mark.parametrize("value,encoded", VLONGS)
def test_vlong_writes_hadoops_bytes(value, encoded):
    assert write_vlong(value).hex() == encoded


def test_vlong_is_not_a_protobuf_varint():
    # protobuf would write 128 as 80 01 and read 8f 80 as 15 (8f & 0x7f) with a continuation
    assert encode_varint(128).hex() == "8001" != write_vlong(128).hex()
    assert read_vlong(io.BytesIO(bytes.fromhex("8f80"))) == 128


@pytest.mark.parametrize("value,encoded", [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"),
                                           (2**32 - 33, "dfffffff0f"), (2**64 - 1, "ffffffffffffffffff01")])
def test_protobuf_varint(value, encoded):
    assert encode_varint(value).hex() == encoded
    assert decode_varint(b"\x00" + bytes.fromhex(encoded), 1) == (value, 1 + len(encoded) // 2)


@pytest.mark.parametrize("data,error", [(b"\x80", EOFError), (b"\xff" * 11, ValueError)])
def test_bad_varints(data, error):
    with pytest.raises(error):
        decode_varint(data, 0)


def test_truncated_vlong_is_an_error():
    with pytest.raises(EOFError):
        read_vlong(io.BytesIO(bytes.fromhex("8e01")))


def test_a_real_nodemanagers_token_file():
    """Written by a Hadoop 3.4.2 NodeManager for an AM container (format WRITABLE)."""
    creds = read_credentials(str(FIXTURES / "container-3.4.2.tokens"))
    token = creds.token_of_kind(AMRM_TOKEN_KIND)
    assert token is not None and list(creds.tokens) == [""]
    assert len(token.identifier) == 26 and len(token.password) == 20
    assert token.service == "" and creds.secrets == {}


# written by Hadoop 3.4.2's Credentials.writeTokenStorageToStream in both formats: one token
# (a 300-byte identifier 0, 1, ... 255, 0, ..., a 128-byte password) and one secret key
JAVA_CREDENTIALS = Credentials(
    {"amrm": Token(bytes(i % 256 for i in range(300)), (b"password-of-128-bytes" * 7)[:128], AMRM_TOKEN_KIND,
                   "127.0.0.1:8030")},
    {"key": b"\x01\x02\x03"})


@pytest.mark.parametrize("name", ["java-3.4.2-writable.tokens", "java-3.4.2-protobuf.tokens"])
def test_files_hadoop_wrote(name):
    assert read_credentials(str(FIXTURES / name)) == JAVA_CREDENTIALS


@pytest.mark.parametrize("fmt,name", [(WRITABLE, "java-3.4.2-writable.tokens"), (PROTOBUF, "java-3.4.2-protobuf.tokens")])
def test_written_as_hadoop_writes_them(fmt, name):
    assert serialize_credentials(JAVA_CREDENTIALS, fmt) == (FIXTURES / name).read_bytes()


def _creds(id_len: int, pw_len: int, secret_len: int) -> Credentials:
    return Credentials({"amrm": Token(bytes(range(256)) * (id_len // 256) + bytes(id_len % 256),
                                      b"p" * pw_len, AMRM_TOKEN_KIND, "127.0.0.1:8030"),
                        "other": Token(b"i", b"", "KIND", "")},
                       {"key": b"s" * secret_len})


@pytest.mark.parametrize("fmt", [WRITABLE, PROTOBUF])
@pytest.mark.parametrize("id_len,pw_len,secret_len", [(0, 0, 0), (127, 128, 255), (300, 20, 65536)])
def test_round_trip(fmt, id_len, pw_len, secret_len):
    creds = _creds(id_len, pw_len, secret_len)
    assert parse_credentials(serialize_credentials(creds, fmt)) == creds


def test_writable_layout_by_hand():
    data = (b"HDTS\x00" + b"\x01" + b"\x02al" + b"\x03abc" + b"\x8f\x80" + b"p" * 128 + b"\x01K" + b"\x01S"
            + b"\x01" + b"\x01s" + b"\x02xy")
    creds = parse_credentials(data)
    assert creds.tokens == {"al": Token(b"abc", b"p" * 128, "K", "S")}
    assert creds.secrets == {"s": b"xy"}


@pytest.mark.parametrize("data,expected", [
    (b"NOPE\x00\x00\x00", "expected the magic bytes HDTS"),
    (b"HDTS", "expected a format byte"),
    (b"HDTS\x07\x00", "expected format 0 (WRITABLE) or 1 (PROTOBUF), got 7"),
    (b"HDTS\x00\x01\x00\x05ab", "format 0: 5 byte(s) expected"),
    (b"HDTS\x00\xff", "format 0: token count: expected a length 0..1048576, got -1"),
    (b"HDTS\x01\x05\x0a", "format 1: a CredentialsProto of 5 bytes expected"),
])
def test_bad_files_say_where(data, expected):
    with pytest.raises(TokenFileError, match=re.escape(expected)) as info:
        parse_credentials(data, "tok.file")
    assert str(info.value).startswith("tok.file: ")


def test_unreadable_file_names_it(tmp_path):
    with pytest.raises(TokenFileError, match="missing.tokens: cannot read"):
        read_credentials(str(tmp_path / "missing.tokens"))
