"""The two variable-length integers on YARN's wire, side by side because they are easy to confuse.

* Hadoop's ``vint``/``vlong`` (``WritableUtils``), in Writable data such as the token
  storage file: a value in -112..127 is one byte; anything else is a first byte giving the
  sign and how many big-endian bytes follow (-113..-120: 1..8 bytes of a positive value,
  -121..-128: 1..8 bytes of a negative one's complement). 128 is ``8f 80``.
* protobuf's base-128 varint, for the lengths before delimited protobuf messages (Hadoop
  IPC frames, the PROTOBUF token file): 7 bits a byte, least significant first, the high
  bit set on every byte but the last. 128 is ``80 01``.

Reading one as the other only agrees below 128.
"""
from __future__ import annotations

import io


def read_exactly(stream: io.BufferedIOBase, n: int) -> bytes:
    """``n`` bytes of ``stream``, or EOFError saying where it ran out."""
    data = stream.read(n)
    if len(data) != n:
        raise EOFError(f"{n} byte(s) expected at offset {stream.tell() - len(data)}, {len(data)} left")
    return data


def read_vlong(stream: io.BufferedIOBase) -> int:
    """One Hadoop ``WritableUtils.readVLong`` value from ``stream``."""
    first = read_exactly(stream, 1)[0]
    first = first - 256 if first > 127 else first
    if first >= -112:
        return first
    size = (-119 - first) if first < -120 else (-111 - first)   # the bytes, the first one included
    value = int.from_bytes(read_exactly(stream, size - 1), "big")
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


def encode_varint(value: int) -> bytes:
    """A non-negative ``value`` as a protobuf varint."""
    if value < 0:
        raise ValueError(f"a length cannot be negative, got {value}")
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def decode_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The protobuf varint at ``data[pos:]`` (at most 64 bits) and the position after it."""
    value = shift = 0
    while True:
        if pos >= len(data):
            raise EOFError(f"a varint that runs past the end ({len(data)} bytes)")
        if shift > 63:
            raise ValueError(f"a varint longer than 10 bytes at byte {pos}")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        shift += 7
        if not byte & 0x80:
            return value, pos
