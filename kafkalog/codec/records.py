"""Records: the values a batch holds, and the v2 record layout inside a records section (Kafka's DefaultRecord)."""

from __future__ import annotations

from typing import NamedTuple

from ..errors import CorruptBatchError, TruncatedDataError
from .varint import read_varint, read_varlong, write_varint, write_varlong


class Record(NamedTuple):
    """One record as a consumer sees it. `headers` is a tuple of (str key, bytes-or-None value)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple = ()


def _read_bytes(buf, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, pos = read_varint(buf, pos)
    if length < 0:  # any negative length reads as null, as Kafka's Utils.readBytes does
        return None, pos
    stop = pos + length
    if stop > end:
        raise TruncatedDataError(f"{what} of {length} bytes runs past the end of its record", position=pos)
    return bytes(buf[pos:stop]), stop


def decode_record(
    buf, pos: int, base_offset: int, base_timestamp: int, log_append_time: int | None
) -> tuple[Record, int]:
    """Decode the v2 record at `pos`; returns it and the position after it.

    `log_append_time` is the batch max timestamp for LogAppendTime batches (it replaces every
    record's timestamp), else None.
    """
    length, body = read_varint(buf, pos)
    end = body + length
    if length < 0 or end > len(buf):
        raise TruncatedDataError(f"record declares {length} bytes but {len(buf) - body} remain", position=pos)
    p = body + 1  # the attributes byte is unused
    ts_delta, p = read_varlong(buf, p)
    offset_delta, p = read_varint(buf, p)
    key, p = _read_bytes(buf, p, end, "key")
    value, p = _read_bytes(buf, p, end, "value")
    count, p = read_varint(buf, p)
    if count < 0 or count > end - p:
        raise CorruptBatchError(f"invalid header count {count}", position=pos)
    headers = []
    for _ in range(count):
        hkey_len, p = read_varint(buf, p)
        if hkey_len < 0:
            raise CorruptBatchError(f"invalid negative header key size {hkey_len}", position=pos)
        if p + hkey_len > end:
            raise TruncatedDataError("header key runs past the end of its record", position=pos)
        try:
            hkey = bytes(buf[p : p + hkey_len]).decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptBatchError("header key is not valid UTF-8", position=pos) from None
        p += hkey_len
        hvalue, p = _read_bytes(buf, p, end, "header value")
        headers.append((hkey, hvalue))
    if p != end:
        raise CorruptBatchError(f"invalid record size: declared {length} bytes, used {p - body}", position=pos)
    timestamp = log_append_time if log_append_time is not None else base_timestamp + ts_delta
    return Record(base_offset + offset_delta, timestamp, key, value, tuple(headers)), end


def encode_record(out: bytearray, record: Record, base_offset: int, base_timestamp: int) -> None:
    """Append `record` in the v2 layout, with deltas against the batch's base offset and timestamp."""
    body = bytearray(b"\x00")  # attributes: unused, written as 0
    write_varlong(body, record.timestamp - base_timestamp)
    write_varint(body, record.offset - base_offset)
    _write_bytes(body, record.key)
    _write_bytes(body, record.value)
    body += encode_headers(record.headers)
    write_varint(out, len(body))
    out += body


def encode_headers(headers) -> bytes:
    """A record's headers in the v2 layout: their count, then each key (UTF-8) and value."""
    out = bytearray()
    write_varint(out, len(headers))
    for hkey, hvalue in headers:
        _write_bytes(out, hkey.encode("utf-8"))
        _write_bytes(out, hvalue)
    return bytes(out)


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(data))
        out += data
