"""The key scan: the hot path of compaction, retention and purge (DESIGN.md, data flow step 2).

From a batch it appends, per record, only what a decision needs: offset, timestamp, key, value size
(-1 for a tombstone) and the record's byte span inside the records section. Values are skipped,
headers are stepped over by the record length, and nothing is built per record but the key.
"""
from __future__ import annotations

from ..errors import CorruptBatchError, KafkaLogError
from .batch import RecordBatch, TIMESTAMP_TYPE_MASK
from .compression import DEFAULT_DECOMPRESSION_LIMIT
from .varint import read_varint, read_varlong


class KeyColumns:
    """Column lists of the narrow record table; `span_start` is -1 for legacy records, which have
    no v2 record layout."""

    __slots__ = ("offset", "timestamp", "key", "value_size", "span_start", "span_size")

    def __init__(self):
        for name in self.__slots__:
            setattr(self, name, [])

    def __len__(self) -> int:
        return len(self.offset)

    def clear(self) -> None:
        for name in self.__slots__:
            getattr(self, name).clear()


def scan_keys(batch, out: KeyColumns, limit: int = DEFAULT_DECOMPRESSION_LIMIT) -> int:
    """Append the batch's records to `out`; returns how many were appended."""
    if not isinstance(batch, RecordBatch):
        return _scan_legacy(batch, out, limit)
    count = batch._checked_count()
    if count == 0:
        return 0
    section = batch.records_section(limit)
    log_append_time = batch.max_timestamp if batch.attributes & TIMESTAMP_TYPE_MASK else None
    try:
        pos = _scan_v2(section, count, batch.base_offset, batch.base_timestamp, log_append_time, out)
    except (KafkaLogError, IndexError) as err:
        raise batch._record_error(err, -1) from None
    if pos != len(section):
        raise CorruptBatchError(f"incorrect declared batch size: {len(section) - pos} bytes remain after "
                                f"{count} records", position=batch.position, offset=batch.base_offset)
    return count


def _scan_v2(section: bytes, count: int, base_offset: int, base_timestamp: int,
             log_append_time: int | None, out: KeyColumns) -> int:
    # Varints are inlined for their one-byte case, which holds for nearly every length and delta.
    add_offset, add_timestamp = out.offset.append, out.timestamp.append
    add_key, add_value_size = out.key.append, out.value_size.append
    add_span_start, add_span_size = out.span_start.append, out.span_size.append
    n = len(section)
    pos = 0
    for _ in range(count):
        b = section[pos]
        if b < 0x80:
            length, p = (b >> 1) ^ -(b & 1), pos + 1
        else:
            length, p = read_varint(section, pos)
        end = p + length
        if length < 0 or end > n:
            raise CorruptBatchError(f"record at byte {pos} declares {length} bytes, {n - p} remain")
        p += 1  # attributes
        b = section[p]
        if b < 0x80:
            ts_delta, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            ts_delta, p = read_varlong(section, p)
        b = section[p]
        if b < 0x80:
            offset_delta, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            offset_delta, p = read_varint(section, p)
        b = section[p]
        if b < 0x80:
            key_size, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            key_size, p = read_varint(section, p)
        if key_size >= 0:
            key = section[p:p + key_size]
            p += key_size
        else:
            key = None
        b = section[p] if p < end else 0x80
        if b < 0x80:
            value_size, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            value_size, p = read_varint(section, p)
        if p > end or value_size > end - p:
            raise CorruptBatchError(f"record at byte {pos}: key or value runs past the end of the record")
        add_offset(base_offset + offset_delta)
        add_timestamp(log_append_time if log_append_time is not None else base_timestamp + ts_delta)
        add_key(key)
        add_value_size(value_size if value_size >= 0 else -1)
        add_span_start(pos)
        add_span_size(end - pos)
        pos = end
    return pos


def _scan_legacy(batch, out: KeyColumns, limit: int) -> int:
    records = batch.records(limit)
    for record in records:
        out.offset.append(record.offset)
        out.timestamp.append(record.timestamp)
        out.key.append(record.key)
        out.value_size.append(-1 if record.value is None else len(record.value))
        out.span_start.append(-1)
        out.span_size.append(-1)
    return len(records)
