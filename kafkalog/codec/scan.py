"""The key scan: the hot path of compaction, retention and purge (the `narrow` view of
docs/architecture.md: one row per record, keys and value sizes, no values).

From a batch it appends, per record, only what a decision needs: offset, timestamp, key, value size
(-1 for a tombstone) and the record's byte span inside the records section. Values are skipped,
headers are stepped over (their count and lengths must fill the record exactly, as a full decode
requires), and nothing is built per record but the key.

Batches of `SCAN_THRESHOLD` records or more are read all at once with numpy (`scan_section`, on
the machinery of `columnar`), which packs their keys into one buffer (`PackedKeys`, ready to become
an Arrow column); smaller ones, and any batch the vectorised reader does not vouch for, by the
scalar loop `_scan_v2`, which decides what is an error. Both agree on every section.
`scan_batches` reads the records of several batches in one vectorised pass (`scan_sections`),
which pays numpy's cost per call once per window instead of once per batch; where it does not vouch
for every batch, the caller scans them one by one with `scan_keys`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import CorruptBatchError, KafkaLogError
from .batch import RecordBatch
from .columnar import (
    INT64_MAX,
    INT64_MIN,
    SMALL_RECORD,
    Fields,
    GiveUp,
    SectionReader,
    attempt,
    headers_fit,
    last_header,
    read_fields,
    read_joined,
)
from .compression import DEFAULT_DECOMPRESSION_LIMIT
from .varint import read_varint, read_varlong

_NUMERIC = ("offset", "timestamp", "value_size", "span_start", "span_size")
# with a header name (`KeyColumns(header=...)`): its last occurrence's value size and value, per record
_HEADER = ("header_size", "header_value")
ABSENT = -2  # `header_size` of a record without the header

# Below these many records a batch is scanned by the scalar path: the vectorised path has a fixed
# cost of some 30 numpy calls per batch, the scalar one is linear. The scalar scan is quickest on
# records under 64 bytes (one-byte lengths), so those batches switch later. Measured with
# `benchmarks/codec.py --thresholds` (crossover: 18-50 records).
SCAN_THRESHOLD = 20
SCAN_THRESHOLD_SMALL_RECORDS = 48


class KeyColumns:
    """The narrow record table the key scan fills, one row per record, batch after batch.

    Columns (all of the same length, `len(cols)`):

    * ``offset``, ``timestamp``: numpy ``int64`` arrays (the timestamp is the batch max timestamp
      for every record of a LogAppendTime batch);
    * ``key``: a list of ``bytes``, ``None`` for a null key;
    * ``value_size``: numpy ``int64`` array, -1 for a null value (a tombstone);
    * ``span_start``, ``span_size``: numpy ``int64`` arrays, the record's bytes inside its batch's
      (decompressed) records section; -1 for legacy records, which have no v2 record layout;
    * with `header` (a header key, UTF-8): ``header_size``, ``header_value``: numpy ``int64`` arrays,
      the size of the value of the record's last header of that key (`ABSENT` without one, -1 for a
      null value) and, where it is 8 bytes, that value as a big-endian signed long (else 0). Headers
      follow the value, so they are read only when asked for (KIP-280's `header` strategy).

    The columns are kept as the chunks the scan produced and joined on first access, so read them
    after the scan, not per batch. `to_arrow()` gives the table as a `pyarrow.RecordBatch` and
    `key_array()` the keys as a pyarrow array, without a bytes object per key where the vectorised
    scan packed them (`PackedKeys`) and without copying the numeric columns again.
    """

    __slots__ = ("_keys", "_chunks", "_pending", "header")

    def __init__(self, header: bytes | None = None) -> None:
        self.header = header
        columns = len(_NUMERIC) + (len(_HEADER) if header is not None else 0)
        self._keys: list = []  # lists of bytes (the scalar scan) and PackedKeys (the vectorised one)
        self._chunks: list[list] = [[] for _ in range(columns)]  # numpy arrays per column
        self._pending: list[list] = [[] for _ in range(columns)]  # Python ints not yet in a chunk

    def __len__(self) -> int:
        return sum(map(len, self._keys))

    def clear(self) -> None:
        self._keys.clear()
        for chunks, pending in zip(self._chunks, self._pending):
            chunks.clear()
            pending.clear()

    @property
    def key(self) -> list:
        """The keys: bytes, None for a null key."""
        chunks = self._keys
        if len(chunks) != 1 or not isinstance(chunks[0], list):
            joined: list = []
            for chunk in chunks:
                joined += chunk if isinstance(chunk, list) else chunk.tolist()
            chunks[:] = [joined]
        return chunks[0]

    def key_array(self):
        """The keys as a `pyarrow.BinaryArray`."""
        import pyarrow as pa

        arrays = [
            pa.array(chunk, pa.large_binary()) if isinstance(chunk, list) else _arrow_keys(chunk, pa)
            for chunk in self._keys
        ]
        return pa.concat_arrays(arrays).cast(pa.binary()) if arrays else pa.array([], pa.binary())

    def _column(self, i: int) -> np.ndarray:
        chunks = self._chunks[i]
        if self._pending[i]:
            chunks.append(np.array(self._pending[i], np.int64))
            self._pending[i].clear()
        if len(chunks) != 1:
            joined = np.concatenate(chunks) if chunks else np.empty(0, np.int64)
            chunks[:] = [joined]
        return chunks[0]

    def _extend_arrays(self, keys: PackedKeys, *arrays) -> None:
        """Append one batch's rows given as int64 arrays (the vectorised scan)."""
        self._keys.append(keys)
        for chunks, pending, array in zip(self._chunks, self._pending, arrays):
            if pending:  # keep the row order: rows from the scalar scan came first
                chunks.append(np.array(pending, np.int64))
                pending.clear()
            chunks.append(array)

    def _extend_lists(self, keys: list, *lists) -> None:
        """Append one batch's rows given as lists of ints (the scalar scan)."""
        if self._keys and isinstance(self._keys[-1], list):
            self._keys[-1] += keys
        else:
            self._keys.append(keys)
        for pending, values in zip(self._pending, lists):
            pending += values

    def to_arrow(self):
        """The table as a `pyarrow.RecordBatch` (columns int64 but `key`, which is binary)."""
        import pyarrow as pa

        return pa.record_batch(
            [
                pa.array(self.offset),
                pa.array(self.timestamp),
                self.key_array(),
                pa.array(self.value_size),
                pa.array(self.span_start),
                pa.array(self.span_size),
            ],
            names=["offset", "timestamp", "key", "value_size", "span_start", "span_size"],
        )

    offset = property(lambda self: self._column(0), doc="int64 array: the record offsets")
    timestamp = property(lambda self: self._column(1), doc="int64 array: the record timestamps")
    value_size = property(lambda self: self._column(2), doc="int64 array: value sizes, -1 for null")
    span_start = property(lambda self: self._column(3), doc="int64 array: record start in the section")
    span_size = property(lambda self: self._column(4), doc="int64 array: record size in bytes")
    header_size = property(lambda self: self._column(5), doc="int64 array: the header's value size, or ABSENT")
    header_value = property(lambda self: self._column(6), doc="int64 array: the header's 8-byte value, or 0")


def _arrow_keys(keys: PackedKeys, pa):
    """PackedKeys as a `pyarrow.LargeBinaryArray` over the same buffers."""
    validity = pa.py_buffer(np.packbits(~keys.null, bitorder="little")) if keys.null.any() else None
    return pa.Array.from_buffers(
        pa.large_binary(), len(keys), [validity, pa.py_buffer(keys.offsets), pa.py_buffer(keys.data)]
    )


def scan_keys(batch, out: KeyColumns, limit: int = DEFAULT_DECOMPRESSION_LIMIT, section: bytes | None = None) -> int:
    """Append the batch's records to `out`; returns how many were appended. `section`: the v2
    batch's records section, when the caller has decompressed it already.

    On an error nothing of the batch is appended. Offsets and timestamps that do not fit in int64
    (possible only in corrupt data) are a CorruptBatchError here, where `records()` would return them.
    """
    if not isinstance(batch, RecordBatch):
        return _scan_legacy(batch, out, limit)
    count = batch._checked_count()
    if count == 0:
        return 0
    if section is None:
        section = batch.records_section(limit)
    batch.check_count_fits(count, len(section))
    log_append_time = batch.log_append_time
    header = out.header
    columns = scan_section(section, count, batch.base_offset, batch.base_timestamp, log_append_time, header=header)
    if columns is not None:
        out._extend_arrays(*columns)
        return count
    rows: tuple[list, ...] = tuple([] for _ in range(1 + len(out._chunks)))  # key, then the numeric columns
    try:
        pos = _scan_v2(section, count, batch.base_offset, batch.base_timestamp, log_append_time, rows, header)
    except (KafkaLogError, IndexError) as err:
        raise batch._record_error(err, -1) from None
    if pos != len(section):
        raise CorruptBatchError(
            f"incorrect declared batch size: {len(section) - pos} bytes remain after {count} records",
            position=batch.position,
            offset=batch.base_offset,
        )
    _check_int64(batch, rows[1], rows[2])
    out._extend_lists(*rows)
    return count


def scan_batches(batches: Sequence[RecordBatch], sections: Sequence[bytes], out: KeyColumns) -> bool:
    """Append the records of v2 batches, each of at least one record and given with its records
    section, exactly as `scan_keys` one batch after the other would, but read in one vectorised
    pass. False, with nothing appended, where that pass does not vouch for every batch or the
    batches hold too few records for it to pay: then scan each batch with `scan_keys`, which
    also raises the error of a failing one."""
    counts = [batch.records_count for batch in batches]
    if sum(counts) < SCAN_THRESHOLD:
        return False
    columns = scan_sections(
        sections,
        counts,
        [batch.base_offset for batch in batches],
        [batch.base_timestamp for batch in batches],
        [batch.log_append_time for batch in batches],
        header=out.header,
    )
    if columns is None:
        return False
    out._extend_arrays(*columns)
    return True


def _check_int64(batch, offsets: list, timestamps: list) -> None:
    if offsets and (
        min(offsets) < INT64_MIN
        or max(offsets) > INT64_MAX
        or min(timestamps) < INT64_MIN
        or max(timestamps) > INT64_MAX
    ):
        raise CorruptBatchError(
            "a record offset or timestamp is outside the int64 range",
            position=getattr(batch, "position", None),
            offset=batch.base_offset,
        )


def _scan_v2(
    section: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    rows: tuple,
    header: bytes | None = None,
) -> int:
    # Varints are inlined for their one-byte case, which holds for nearly every length and delta.
    add_key, add_offset, add_timestamp = rows[0].append, rows[1].append, rows[2].append
    add_value_size, add_span_start, add_span_size = rows[3].append, rows[4].append, rows[5].append
    if header is not None:
        add_header_size, add_header_value = rows[6].append, rows[7].append
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
            key = section[p : p + key_size]
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
        p += max(value_size, 0)
        found = (ABSENT, 0)
        if p + 1 != end or section[p] != 0:  # not the common "no headers" ending
            found = _step_headers(section, p, end, pos, header)
        if header is not None:
            add_header_size(found[0])
            add_header_value(
                int.from_bytes(section[found[1] : found[1] + 8], "big", signed=True) if found[0] == 8 else 0
            )
        add_offset(base_offset + offset_delta)
        add_timestamp(log_append_time if log_append_time is not None else base_timestamp + ts_delta)
        add_key(key)
        add_value_size(value_size if value_size >= 0 else -1)
        add_span_start(pos)
        add_span_size(end - pos)
        pos = end
    return pos


def _step_headers(section: bytes, p: int, end: int, record: int, name: bytes | None = None) -> tuple[int, int]:
    """Step over a record's headers from `p`: they must end exactly at the record's `end`. Returns
    the value size (`ABSENT` without one) and position of the last header whose key is `name`."""
    found = (ABSENT, 0)
    count, p = read_varint(section, p) if p < end else (-1, p)
    if count < 0 or count > (end - p) // 2:  # a header takes two bytes at least
        raise CorruptBatchError(f"record at byte {record}: invalid header count {count}")
    for _ in range(count):
        key_size, p = read_varint(section, p)
        if key_size < 0 or p + key_size > end:
            raise CorruptBatchError(f"record at byte {record}: a header key runs past the end of the record")
        key_start = p
        value_size, p = read_varint(section, p + key_size)
        if value_size < -1 or p > end or p + max(value_size, 0) > end:
            raise CorruptBatchError(f"record at byte {record}: a header value runs past the end of the record")
        if name is not None and key_size == len(name) and section[key_start : key_start + key_size] == name:
            found = (value_size, p)
        p += max(value_size, 0)
    if p != end:
        raise CorruptBatchError(f"record at byte {record}: {end - p} bytes remain after its headers")
    return found


def _scan_legacy(batch, out: KeyColumns, limit: int) -> int:
    records = batch.records(limit)
    offsets = [record.offset for record in records]
    timestamps = [record.timestamp for record in records]
    _check_int64(batch, offsets, timestamps)
    no_header = [[ABSENT] * len(records), [0] * len(records)] if out.header is not None else []
    out._extend_lists(
        [record.key for record in records],
        offsets,
        timestamps,
        [-1 if record.value is None else len(record.value) for record in records],
        [-1] * len(records),
        [-1] * len(records),
        *no_header,
    )
    return len(records)


# -- all records of a section at once, with numpy -------------------------------------------------
def scan_section(
    section: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    *,
    force: bool = False,
    header: bytes | None = None,
):
    """The key scan's columns for `count` records: (keys as PackedKeys, offset, timestamp, value_size,
    span_start, span_size, and with `header` header_size, header_value), the numeric ones int64
    arrays; None to let the scalar scan decide (and raise), which it also does below the thresholds
    unless `force`."""
    if not force and count < (SCAN_THRESHOLD if len(section) >= SMALL_RECORD * count else SCAN_THRESHOLD_SMALL_RECORDS):
        return None
    return attempt(_scan, section, count, base_offset, base_timestamp, log_append_time, header)


def _scan(section, bounds, base_offset, base_timestamp, log_append_time, header, checked):
    f = _scan_fields(section, bounds, base_offset, base_timestamp, log_append_time, header, checked)
    found = f.last_header if header is not None else ()
    keys = _packed(f.reader, f.key_start, f.key_len)
    return keys, f.offset, f.timestamp, np.maximum(f.value_len, -1), f.S, f.span, *found


class PackedKeys:
    """Keys laid out as an Arrow binary column lays them out: every key's bytes back to back in
    `data` (uint8), `offsets` where each key starts there and where the last ends (int64), `null`
    where a key is null (bool; a null key has no bytes). Cut out with one gather, instead of one
    bytes object per record that Arrow would then copy again."""

    __slots__ = ("data", "offsets", "null")

    def __init__(self, data, offsets, null):
        self.data, self.offsets, self.null = data, offsets, null

    def __len__(self) -> int:
        return len(self.null)

    def tolist(self) -> list:
        """The keys as bytes, None for a null key."""
        data = self.data.tobytes()
        out = [data[a:b] for a, b in zip(self.offsets[:-1].tolist(), self.offsets[1:].tolist())]
        for i in np.flatnonzero(self.null).tolist():
            out[i] = None
        return out


def _packed(reader: SectionReader, start, length) -> PackedKeys:
    """The fields at `start` (lengths `length`, null where negative) packed into one buffer."""
    size = np.maximum(length, 0)
    offsets = np.zeros(len(size) + 1, np.int64)
    np.cumsum(size, out=offsets[1:])
    # the byte at k of the packed buffer is at its field's start + (k - where the field begins at)
    index = np.repeat(start - offsets[:-1], size)
    index += np.arange(len(index))
    return PackedKeys(reader.bytes.take(index), offsets, length < 0)


def scan_sections(
    sections: Sequence[bytes],
    counts: Sequence[int],
    base_offsets: Sequence[int],
    base_timestamps: Sequence[int],
    log_append_times: Sequence[int | None],
    *,
    header: bytes | None = None,
):
    """`scan_section`'s columns for the records of several v2 record sections (one per batch,
    `counts[i] > 0` records in `sections[i]`), read together so that numpy's cost per call is paid
    once for all of them; span starts are relative to each record's own section. None unless the
    records of every section are exactly its own (each section the per-batch scan would accept,
    with the same result); the caller then scans the sections one by one."""

    def read(section, bounds, checked) -> Fields:
        return _scan_fields(section, bounds, 0, 0, None, header, checked)

    joined = read_joined(read, sections, counts, base_offsets, base_timestamps, log_append_times)
    if joined is None:
        return None
    _, f, section_start, batch, offset, timestamp = joined
    keys = _packed(f.reader, f.key_start, f.key_len)
    found = f.last_header if header is not None else ()
    return keys, offset, timestamp, np.maximum(f.value_len, -1), f.S - section_start[batch], f.span, *found


def _scan_fields(section, bounds, base_offset, base_timestamp, log_append_time, header, checked) -> Fields:
    """`read_fields`, and the headers after each value stepped over, or with `header` read for that
    header's last value (`last_header`): a record whose headers do not fill it exactly is not one the
    scan may vouch for."""
    f = read_fields(section, bounds, base_offset, base_timestamp, log_append_time, checked)
    if header is None:
        if not headers_fit(section, f.reader, f.value_end, f.E, as_kafka_writes=False):
            raise GiveUp
        return f
    found = last_header(f.reader, f.value_end, f.E, header)
    if found is None:
        raise GiveUp
    f.last_header = found
    return f
