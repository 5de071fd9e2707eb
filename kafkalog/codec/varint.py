"""Zig-zag varints and varlongs as in Kafka's ByteUtils.

A varint may use at most 5 bytes and a varlong at most 10; a longer encoding is corrupt.
Readers take (buffer, position) and return (value, next position); writers append to a bytearray.
"""

from __future__ import annotations

from ..errors import CorruptBatchError, TruncatedDataError

VARINT_MAX_BYTES = 5
VARLONG_MAX_BYTES = 10


def _read(buf, pos: int, max_bytes: int, what: str) -> tuple[int, int]:
    raw = 0
    shift = 0
    end = len(buf)
    for _ in range(max_bytes):
        if pos >= end:
            raise TruncatedDataError(f"{what} runs past the end of the data", position=pos)
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise CorruptBatchError(f"{what} is too long: more than {max_bytes} bytes", position=pos - max_bytes)


def read_varint(buf, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint (int32) at `pos`."""
    b = buf[pos] if pos < len(buf) else 0x80
    if b < 0x80:  # one byte: the common case for lengths and deltas
        return (b >> 1) ^ -(b & 1), pos + 1
    return _read(buf, pos, VARINT_MAX_BYTES, "varint")


def read_varlong(buf, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varlong (int64) at `pos`."""
    b = buf[pos] if pos < len(buf) else 0x80
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    return _read(buf, pos, VARLONG_MAX_BYTES, "varlong")


def write_varint(out: bytearray, value: int) -> None:
    """Append `value` (int32) as a zig-zag varint."""
    _write(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(out: bytearray, value: int) -> None:
    """Append `value` (int64) as a zig-zag varlong."""
    _write(out, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def write_uvarint(out: bytearray, value: int) -> None:
    """Append `value` (>= 0) as an unsigned varint, as the message format writes lengths and tags."""
    _write(out, value)


def _write(out: bytearray, z: int) -> None:
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def varint_size(value: int) -> int:
    """Bytes that `value` takes as a zig-zag varlong (the same count as a varint for int32 values)."""
    z = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size
