"""Splicing: a batch's retained records written again from their own bytes, as Kafka's cleaner
re-encodes them, without decoding a record (`filter.splice_batches` calls this).

Kafka's cleaner writes every record it keeps again (attributes 0, minimal varints, timestamp delta
against the new batch's base timestamp). A record already in that form is those bytes, but for
its length and timestamp delta: `splice` writes those two again and reuses everything after the
delta. `read_spans` reads the records of several sections at once with numpy (see `columnar`) and
vouches that every record is in that form.

A repartition moves records into new batches the same way (`record_bodies`: each record's bytes after
its offset delta, which no new batch changes; `join_records` writes the length and deltas before them).
`encode_records` writes records from their fields, as bodies joined to those prefixes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .columnar import (
    Fields,
    GiveUp,
    count_nonzero,
    far_from_int64_limits,
    headers_fit,
    minimal,
    read_fields,
    read_joined,
)
from .decode import binary_column

_VARLONG_BOUNDS = np.array([1 << (7 * k) for k in range(1, 10)], np.uint64)
_SHIFTS = np.arange(0, 70, 7, dtype=np.uint64)
_COLUMNS = np.arange(10)


def _zigzag(values):
    return ((values << 1) ^ (values >> 63)).view(np.uint64)


def _sizes(values):
    """Bytes of each int64 as a minimal zig-zag varlong (a varint's count for int32 values)."""
    return _VARLONG_BOUNDS.searchsorted(_zigzag(values), side="right") + 1


class Spans:
    """The records of several sections read as one: per record its batch (an index into the
    sections), where its bytes are in `section`, and what a splice must know of it."""

    __slots__ = (
        "section",
        "starts",
        "batch",
        "S",
        "E",
        "ts_end",
        "offset",
        "timestamp",
        "null_value",
        "body_start",
        "key_start",
        "key_len",
    )
    section: bytes
    starts: np.ndarray  # each section's first record
    batch: np.ndarray
    S: np.ndarray
    E: np.ndarray
    ts_end: np.ndarray
    offset: np.ndarray
    timestamp: np.ndarray
    null_value: np.ndarray
    body_start: np.ndarray  # where the bytes after the offset delta start: the key's length
    key_start: np.ndarray
    key_len: np.ndarray


def read_spans(
    sections: Sequence[bytes],
    counts: Sequence[int],
    base_offsets: Sequence[int],
    base_timestamps: Sequence[int],
    log_append_times: Sequence[int | None],
    spans=None,
) -> Spans | None:
    """The records of v2 record sections (one per batch, `counts[i]` records in `sections[i]`), read
    together so that numpy's cost per call is paid once for all of them. None unless every section
    is well-formed and every record is written exactly as Kafka writes one (attributes 0, null
    lengths -1, every varint minimal, UTF-8 header keys): only then are its bytes what Kafka's
    re-encoding would give. Also None where a base and a delta come near int64's limits. `spans`: every
    record's span as an earlier read found it (columnar.known_starts), or None."""
    joined = read_joined(_kafka_fields, sections, counts, base_offsets, base_timestamps, log_append_times, spans)
    if joined is None:
        return None
    s = Spans()
    s.section, f, _, s.batch, s.offset, s.timestamp = joined
    s.starts = np.cumsum([0, *counts[:-1]])
    s.S, s.E, s.ts_end, s.null_value = f.S, f.E, f.ts_end, f.value_len < 0
    s.body_start, s.key_start, s.key_len = f.key_len_start, f.key_start, f.key_len
    return s


def record_bodies(spans: Spans) -> tuple[pa.Array, pa.Array]:
    """Each record's key (null for none) and body (its bytes after the offset delta: key, value and
    headers with their lengths, as Kafka wrote them), as Arrow binary arrays."""
    data = np.frombuffer(spans.section, np.uint8)
    keys = binary_column(spans.section, data, spans.key_start, spans.key_len)
    return keys, binary_column(spans.section, data, spans.body_start, spans.E - spans.body_start)


def read_batch_spans(batches: Sequence, sections: Sequence[bytes]) -> Spans | None:
    """`read_spans` of v2 batches (`batch.RecordBatch`) and their records sections."""
    return read_spans(
        sections,
        [b.records_count for b in batches],
        [b.base_offset for b in batches],
        [b.base_timestamp for b in batches],
        [b.log_append_time for b in batches],
    )


def _kafka_fields(section, bounds, checked) -> Fields:
    """The fields of every record (deltas: bases 0), if every record is as Kafka writes it."""
    f = read_fields(section, bounds, 0, 0, None, checked)  # deltas; timestamps read checked
    starts = np.concatenate((f.ts_start, f.ts_end, f.key_len_start, f.key_end))
    ends = np.concatenate((f.ts_end, f.key_len_start, f.key_start, f.value_start))
    if (
        count_nonzero(f.reader.bytes.take(f.ts_start - 1))  # the attributes byte
        or count_nonzero(f.offset_delta != f.offset_delta.astype(np.int32))
        or count_nonzero(f.key_len < -1)
        or count_nonzero(f.value_len < -1)
        or not minimal(f.reader, starts, ends)
        or not headers_fit(section, f.reader, f.value_end, f.E, as_kafka_writes=True)
    ):
        raise GiveUp
    return f


def splice(spans: Spans, keep, base_timestamps) -> list[bytes] | None:
    """Per section, its records where `keep` (a mask over all records) is set, re-based on the
    section's new base timestamp (`base_timestamps`, int64 per section), as Kafka's re-encoding
    writes them: each keeps its bytes after the timestamp delta, and gets its length, attributes and
    delta written again. None where a delta would come near int64's limits."""
    kept = np.flatnonzero(keep)
    ts, base = spans.timestamp[kept], base_timestamps[spans.batch[kept]]
    if not (far_from_int64_limits(ts) and far_from_int64_limits(base)):
        return None
    delta = ts - base
    rest_start, rest_end = spans.ts_end[kept], spans.E[kept]
    delta_size = _sizes(delta)
    length = 1 + delta_size + (rest_end - rest_start)  # attributes, delta, the rest
    length_size = _sizes(length)
    n = len(kept)
    prefixes = _varint_matrix(length, length_size, 5), np.zeros((n, 1), np.uint8), _varint_matrix(delta, delta_size, 10)
    present = _COLUMNS[:5] < length_size[:, None], np.ones((n, 1), bool), _COLUMNS < delta_size[:, None]
    packed = np.concatenate(prefixes, axis=1)[np.concatenate(present, axis=1)]
    # every record's bytes before and after its delta, in turn, as Arrow views of the section (the
    # records fill it end to end): the kept ones' rests taken and joined to their new prefixes in C++
    cuts = np.empty(2 * len(spans.S) + 1, np.int64)
    cuts[0:-1:2], cuts[1::2], cuts[-1] = spans.S, spans.ts_end, spans.E[-1] if len(spans.E) else 0
    pieces = pa.Array.from_buffers(
        pa.large_binary(), len(cuts) - 1, [None, pa.py_buffer(cuts), pa.py_buffer(spans.section)]
    )
    records = pc.binary_join_element_wise(
        _pieces(packed, length_size + 1 + delta_size),
        pieces.take(pa.array(2 * kept + 1)),
        pa.scalar(b"", pa.large_binary()),
    )
    ends = np.frombuffer(records.buffers()[1], np.int64)[records.offset : records.offset + n + 1]
    data = records.buffers()[2]
    bounds = ends[np.searchsorted(kept, np.append(spans.starts, len(spans.offset)))].tolist()
    return [data[a:b].to_pybytes() for a, b in zip(bounds, bounds[1:])]


def _varint_matrix(values, sizes, width: int):
    """Row i: the zig-zag varint of values[i] in its first sizes[i] bytes (the rest is padding)."""
    groups = ((_zigzag(values)[:, None] >> _SHIFTS[:width]) & np.uint64(0x7F)).astype(np.uint8)
    groups[_COLUMNS[:width] < (sizes - 1)[:, None]] |= 0x80
    return groups


def encode_records(offset_deltas, timestamp_deltas, keys: pa.Array, values: pa.Array, headers: Sequence) -> bytes:
    """Records in the v2 layout (`records.encode_record`'s bytes), many at once and with no Python step
    per record (`encode_bodies`, then `join_records`)."""
    return join_records(offset_deltas, timestamp_deltas, encode_bodies(keys, values, headers))


def encode_bodies(keys: pa.Array, values: pa.Array, headers: Sequence) -> pa.Array:
    """Each record's body (what follows its offset delta: key and value with their lengths, then its
    headers), by columns: the varints computed with numpy and each record's pieces joined end to end
    by Arrow. `keys` and `values` are Arrow binary arrays; `headers` holds each record's headers
    already encoded (`records.encode_headers`), or None for none."""
    n = len(keys)
    if not n:
        return pa.array([], pa.large_binary())
    key_len = pc.fill_null(pc.binary_length(keys), -1).to_numpy().astype(np.int64)
    value_len = pc.fill_null(pc.binary_length(values), -1).to_numpy().astype(np.int64)
    if any(h is not None for h in headers):
        tail = pa.array([b"\x00" if h is None else h for h in headers], pa.large_binary())
    else:  # no headers: each record ends with a header count of 0
        tail = _pieces(np.zeros(n, np.uint8), np.ones(n, np.int64))
    key_size, value_size = _sizes(key_len), _sizes(value_len)
    pieces = [
        _pieces(_varints([key_len], [key_size]), key_size),
        pc.fill_null(keys.cast(pa.large_binary()), b""),
        _pieces(_varints([value_len], [value_size]), value_size),
        pc.fill_null(values.cast(pa.large_binary()), b""),
        tail,
    ]
    return pc.binary_join_element_wise(*pieces, pa.scalar(b"", pa.large_binary()))  # one pass in C++


def join_records(offset_deltas, timestamp_deltas, bodies: pa.Array) -> bytes:
    """Records in the v2 layout from their bodies (`encode_bodies`, `record_bodies`): each gets its
    length, attributes 0 and deltas written before its body, all at once."""
    if not len(bodies):
        return b""
    data, bounds = joined_records(offset_deltas, timestamp_deltas, bodies)
    return data[: bounds[-1]].tobytes()  # one copy


def joined_records(offset_deltas, timestamp_deltas, bodies: pa.Array) -> tuple[memoryview, np.ndarray]:
    """`join_records` left in Arrow's buffer: its bytes (a memoryview) and where each record starts in
    them (n + 1 int64 positions from 0), so that the records of many batches are joined in one pass and
    each batch's section is a slice of it (spark/repartition.py)."""
    n = len(bodies)
    ts, off = np.asarray(timestamp_deltas, np.int64), np.asarray(offset_deltas, np.int64)
    body_len = pc.binary_length(bodies).to_numpy().astype(np.int64)
    head = (np.zeros(n, np.int64), ts, off)  # attributes (written as a 1-byte 0), deltas
    head_sizes = (np.ones(n, np.int64), _sizes(ts), _sizes(off))
    length = sum(head_sizes) + body_len
    length_size = _sizes(length)
    prefix = _pieces(_varints([length, *head], [length_size, *head_sizes]), length_size + sum(head_sizes))
    joined = pc.binary_join_element_wise(prefix, bodies.cast(pa.large_binary()), pa.scalar(b"", pa.large_binary()))
    offsets = np.frombuffer(joined.buffers()[1], np.int64)[joined.offset : joined.offset + n + 1]
    data = memoryview(joined.buffers()[2])[offsets[0] :] if n else memoryview(b"")
    return data, offsets - offsets[0]


def _varints(columns: Sequence[np.ndarray], sizes: Sequence[np.ndarray]) -> np.ndarray:
    """Each row's zig-zag varints of `columns`, in order, end to end (`sizes`: their byte counts),
    each matrix only as wide as its largest varint."""
    widths = [int(z.max()) for z in sizes]
    matrices = [_varint_matrix(v, z, w) for v, z, w in zip(columns, sizes, widths)]
    present = [_COLUMNS[:w] < z[:, None] for z, w in zip(sizes, widths)]
    return np.concatenate(matrices, axis=1)[np.concatenate(present, axis=1)]


def _pieces(data: np.ndarray, sizes: np.ndarray) -> pa.Array:
    """`data` cut into consecutive values of `sizes` bytes, as an Arrow array."""
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    return pa.Array.from_buffers(pa.large_binary(), len(sizes), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
