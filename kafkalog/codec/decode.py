"""The full decode of a v2 records section with numpy: every record at once, exactly as
`records.decode_record` returns them one by one (the reference, which `RecordBatch.records` runs
wherever `decode_section` returns None). `columnar` has the machinery the vectorised readers share
and says why their result is always the scalar reader's.

Keys, values and headers are cut out last; header keys and values that repeat from record to
record, as they usually do, are decoded once and shared.
"""

from __future__ import annotations

import struct
from itertools import repeat
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from ..errors import KafkaLogError
from .columnar import SMALL_RECORD, GiveUp, SectionReader, attempt, count_nonzero, read_fields
from .records import Record
from .varint import read_varint

# Below these many records a batch is decoded by the scalar path: the vectorised path has a fixed
# cost of some 30 numpy calls per batch, the scalar one is linear. The scalar decoder is quickest
# on records under 64 bytes (one-byte lengths), so those batches switch later. Measured with
# `benchmarks/codec.py --thresholds` (crossover: 10-20 records).
DECODE_THRESHOLD = 14
DECODE_THRESHOLD_SMALL_RECORDS = 20

# Headers are read one header index at a time for every record that has that many ("rounds"); once
# fewer records than this remain in a round, their remaining headers are read one by one.
_MIN_ROUND = 8


def decode_section(
    section: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    *,
    force: bool = False,
) -> list[Record] | None:
    """Every record of the section, exactly as `decode_record` returns them one by one; None to
    let the scalar decoder decide (and raise), which it also does below the thresholds unless
    `force`."""
    if not force and count < (
        DECODE_THRESHOLD if len(section) >= SMALL_RECORD * count else DECODE_THRESHOLD_SMALL_RECORDS
    ):
        return None
    return attempt(_decode, section, count, base_offset, base_timestamp, log_append_time)


def decode_columns(
    section: bytes, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None
) -> RecordColumns | None:
    """`decode_section` as columns: the same records, their keys and values Arrow arrays cut out of
    the section with numpy rather than a bytes object each; None where `decode_section` is."""
    if count < (DECODE_THRESHOLD if len(section) >= SMALL_RECORD * count else DECODE_THRESHOLD_SMALL_RECORDS):
        return None
    return attempt(_decode_columns, section, count, base_offset, base_timestamp, log_append_time)


class RecordColumns(NamedTuple):
    """A batch's records as columns: offsets and timestamps (int64 numpy arrays), keys and values
    (Arrow binary arrays, null where the record has none) and each record's headers (a list of
    (key, value) pairs, None for none; None for the whole column where no record has any)."""

    offsets: np.ndarray
    timestamps: np.ndarray
    keys: pa.Array
    values: pa.Array
    headers: list | None


def _fields_and_headers(section, bounds, base_offset, base_timestamp, log_append_time, checked, as_list):
    """Each record's fields up to its value, and its headers: an iterable of tuples, one per record."""
    f = read_fields(section, bounds, base_offset, base_timestamp, log_append_time, checked, as_list)
    E = f.E
    headers = _same_headers(section, f.reader, f.value_end, E)
    if headers is None:
        header_count, pos = f.reader.read(f.value_end)
        if count_nonzero(header_count):
            headers = _headers(section, f.reader, header_count, pos, E)
        else:
            if pos.tobytes() != E.tobytes():  # the record size must be consumed exactly
                raise GiveUp
            headers = repeat(())
    return f, headers


def _decode(section, bounds, base_offset, base_timestamp, log_append_time, checked):
    f, headers = _fields_and_headers(section, bounds, base_offset, base_timestamp, log_append_time, checked, True)
    keys = _slices(f.reader, section, f.key_start, f.key_end, f.key_len)
    values = _slices(f.reader, section, f.value_start, f.value_end, f.value_len)
    return list(
        map(tuple.__new__, repeat(Record, len(f.E)), zip(f.offset.tolist(), f.timestamp, keys, values, headers))
    )


def _decode_columns(section, bounds, base_offset, base_timestamp, log_append_time, checked):
    f, headers = _fields_and_headers(section, bounds, base_offset, base_timestamp, log_append_time, checked, False)
    n = len(f.E)
    if isinstance(headers, repeat):
        first = next(headers)
        per_record = None if not first else [list(first)] * n
    else:
        per_record = [list(h) if h else None for h in headers]
    data = f.reader.bytes
    return RecordColumns(
        f.offset.astype(np.int64, copy=False),
        np.asarray(f.timestamp, np.int64),
        binary_column(section, data, f.key_start, f.key_len),
        binary_column(section, data, f.value_start, f.value_len),
        per_record,
    )


def binary_column(section: bytes, data: np.ndarray, start: np.ndarray, length: np.ndarray) -> pa.Array:
    """An Arrow binary array of section[start:start + length] per row, null where length < 0 (`data`
    is the section as uint8), with no bytes object per row: short fields are gathered by one numpy
    index, longer ones copied by Arrow's `take` (an index per byte costs more past some 50 bytes a
    field; measured)."""
    valid = length >= 0
    lengths = np.where(valid, length, 0)
    nulls = len(valid) - int(count_nonzero(valid))
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    total = int(lengths.sum())
    if total > _GATHER_FIELD_BYTES * len(lengths):
        taken = _taken(section, start, lengths)
        if taken is not None:
            return pa.Array.from_buffers(pa.binary(), len(lengths), [validity, *taken.buffers()[1:]], nulls)
    offsets = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    if total <= _GATHER_FIELD_BYTES * len(lengths):
        index = np.repeat(start - offsets[:-1], lengths)
        index += np.arange(total)
        body = data.take(index).tobytes()
    else:
        view = memoryview(section)
        body = b"".join([view[a : a + n] for a, n in zip(start.tolist(), lengths.tolist())])
    buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(body)]
    return pa.Array.from_buffers(pa.binary(), len(lengths), buffers, nulls)


def _taken(section: bytes, start: np.ndarray, lengths: np.ndarray) -> pa.Array | None:
    """section[start:start + length] per row, where the fields follow one another in the section (as
    a record's fields do): the section seen without a copy as an Arrow array whose items are, in turn,
    a field and the gap to the next one, of which Arrow's `take` copies every other item. None where
    the fields are not in order, or the section is too large for 32-bit offsets."""
    n = len(lengths)
    if not n or len(section) >= 1 << 31:
        return None
    bounds = np.empty(2 * n, np.int64)
    bounds[0::2], bounds[1::2] = start, start + lengths
    if bounds[0] < 0 or bounds[-1] > len(section) or count_nonzero(bounds[1:] < bounds[:-1]):
        return None
    items = pa.Array.from_buffers(
        pa.binary(), 2 * n - 1, [None, pa.py_buffer(bounds.astype(np.int32)), pa.py_buffer(section)]
    )
    return items.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int32)))


_GATHER_FIELD_BYTES = 48  # fields this long on average, or shorter, are gathered by a numpy index


def _same_headers(section: bytes, reader: SectionReader, start, E):
    """When every record ends in the same bytes after its value -- header count and headers, often
    just a zero count -- those are decoded once, from the first record, and the resulting tuple
    serves every record (an iterable of them); else None."""
    if not _uniform(reader, start, E - start):
        return None
    headers = _header_tail(section, int(start[0]), int(E[0]), None)
    return repeat(tuple(headers))


def _headers(section: bytes, reader: SectionReader, header_count, pos, E) -> list:
    """Each record's headers tuple, checked as decode_record checks them: a count that is negative
    or larger than the bytes left, a negative key length, a key that is not UTF-8, anything past
    the record's end, and the record size consumed exactly."""
    if count_nonzero(header_count < 0) or count_nonzero(header_count > E - pos):
        raise GiveUp
    n = len(header_count)
    rows = None  # the records with headers (None: all of them)
    if count_nonzero(header_count) < n:
        none = header_count == 0
        if pos[none].tobytes() != E[none].tobytes():
            raise GiveUp
        rows = np.flatnonzero(~none)
        header_count, pos, E = header_count[rows], pos[rows], E[rows]
    m = len(header_count)
    high = int(header_count.max())
    # Round r reads header r of every record that has more than r headers. `live` indexes those
    # records among the m (ascending; None: all m), so each round's pairs line up with it.
    rounds: list[tuple[np.ndarray | None, list, bool]] = []  # (live, pairs, pairs are each record's rest)
    live: np.ndarray | None = None
    for r in range(high):
        key_len, key_start = reader.read(pos)
        if count_nonzero(key_len < 0):
            raise GiveUp
        key_end = key_start + key_len
        value_len, value_start = reader.read(key_end)
        pos = value_start + np.maximum(value_len, 0)
        if r + 1 == high:
            if pos.tobytes() != E.tobytes():  # the last header ends its record
                raise GiveUp
        elif count_nonzero(pos > E):
            raise GiveUp
        rounds.append((live, _pairs(section, reader, key_start, key_end, key_len, value_start, pos, value_len), False))
        if r + 1 == high:
            break
        more = header_count > r + 1
        if count_nonzero(more) < len(more):
            done = ~more
            if pos[done].tobytes() != E[done].tobytes():  # all its headers read: the record must end here
                raise GiveUp
            keep = np.flatnonzero(more)
            live = keep if live is None else live[keep]
            header_count, pos, E = header_count[keep], pos[keep], E[keep]
        if len(pos) < _MIN_ROUND:  # a few records with many headers: finish them one by one
            rest = [
                _header_tail(section, p, e, c - r - 1)
                for p, e, c in zip(pos.tolist(), E.tolist(), header_count.tolist())
            ]
            rounds.append((live, rest, True))
            break

    if len(rounds) == 1:  # one header each: the common case
        per_row = list(zip(rounds[0][1]))
    elif all(idx is None and not tail for idx, _, tail in rounds):  # the same count everywhere
        per_row = list(zip(*(pairs for _, pairs, _ in rounds)))
    else:
        lists: list[list] = [[] for _ in range(m)]
        for idx, pairs, tail in rounds:
            targets = lists if idx is None else [lists[i] for i in idx.tolist()]
            if tail:
                for target, extra in zip(targets, pairs):
                    target += extra
            else:
                for target, pair in zip(targets, pairs):
                    target.append(pair)
        per_row = list(map(tuple, lists))
    if rows is None:
        return per_row
    out = [()] * n
    for i, h in zip(rows.tolist(), per_row):
        out[i] = h
    return out


def _uniform(reader: SectionReader, start, length) -> bool:
    """Whether the fields at `start` (lengths `length`) are all the same bytes. Header keys (and
    often values) repeat from record to record: one decoded string or one bytes object then
    serves them all (they are immutable, so sharing them is invisible)."""
    first = int(length[0])
    if first > _GATHER_MAX or count_nonzero(length != first):
        return False
    if first <= 0:
        return True
    expected = None
    for i in range(0, len(start), _CHUNK):
        part = start[i : i + _CHUNK]
        fields = _gather(reader, part, first)
        if expected is None:
            expected = fields[:first] * len(part)
        if fields != (expected if len(fields) == len(expected) else expected[: len(fields)]):
            return False
    return True


def _pairs(
    section: bytes, reader: SectionReader, key_start, key_end, key_len, value_start, value_end, value_len
) -> list:
    """The (key, value) header pairs of one round."""
    m = len(key_start)
    same_key = _uniform(reader, key_start, key_len)
    try:
        if same_key:
            a = int(key_start[0])
            keys = [section[a : a + int(key_len[0])].decode("utf-8")] * m
        else:
            keys = [section[a:b].decode("utf-8") for a, b in zip(key_start.tolist(), key_end.tolist())]
    except UnicodeDecodeError:
        raise GiveUp from None
    if _uniform(reader, value_start, value_len):
        a = int(value_start[0])
        v = None if value_len[0] < 0 else section[a : int(value_end[0])]
        if same_key:
            return [(keys[0], v)] * m
        values = [v] * m
    else:
        values = _slices(reader, section, value_start, value_end, value_len)
    return list(zip(keys, values))


def _header_tail(section: bytes, pos: int, end: int, count: int | None) -> list:
    """The last `count` headers of one record, read one by one as decode_record reads them, or
    with count None the header count and all the headers; the record must end after them."""
    out = []
    try:
        if count is None:
            count, pos = read_varint(section, pos)
            if count < 0 or count > end - pos:
                raise GiveUp
        for _ in range(count):
            key_len, pos = read_varint(section, pos)
            if key_len < 0 or pos + key_len > end:
                raise GiveUp
            key = section[pos : pos + key_len].decode("utf-8")
            pos += key_len
            value_len, pos = read_varint(section, pos)
            if value_len < 0:
                value = None
            else:
                if pos + value_len > end:
                    raise GiveUp
                value = section[pos : pos + value_len]
                pos += value_len
            out.append((key, value))
    except (KafkaLogError, UnicodeDecodeError):
        raise GiveUp from None
    if pos != end:
        raise GiveUp
    return out


# -- fields gathered across records ---------------------------------------------------------------
_GATHER_MAX = 64  # longest fields gathered across records (_uniform, _slices)
_CHUNK = 256  # records gathered at once
_TILES: list = [None] * (_GATHER_MAX + 1)  # length -> 0, 1, .. length-1, _CHUNK times
_CUTTERS: dict[tuple[int, int], struct.Struct] = {}


def _gather(reader: SectionReader, start, length: int) -> bytes:
    """The `length` bytes at each position of `start` (at most _CHUNK of them), concatenated."""
    tile = _TILES[length]
    if tile is None:
        tile = _TILES[length] = np.tile(np.arange(length, dtype=np.int64), _CHUNK)
    index = start.repeat(length)
    index += tile[: len(index)]
    return reader.bytes.take(index, mode="clip").tobytes()


def _cutter(length: int, m: int) -> struct.Struct:
    """A Struct that cuts m fields of `length` bytes out of a buffer."""
    cutter = _CUTTERS.get((length, m))
    if cutter is None:
        if len(_CUTTERS) >= 1024:
            _CUTTERS.clear()
        cutter = _CUTTERS[length, m] = struct.Struct(f"{length}s" * m)
    return cutter


def _slices(reader: SectionReader, section: bytes, start, end, length) -> list:
    """section[start:end] per record, None where length < 0."""
    null = length < 0
    nulls = int(count_nonzero(null))
    m = len(length)
    if nulls == m:
        return [None] * nulls
    if not nulls:
        first = int(length[0])
        if 0 < first <= _GATHER_MAX and not count_nonzero(length != first):
            # the same length everywhere (fixed-size keys, say): gather the fields into one buffer
            # and cut it with one struct call, cheaper than a slice per record
            out: list[bytes | None] = []
            for i in range(0, m, _CHUNK):
                part = start[i : i + _CHUNK]
                out += _cutter(first, len(part)).unpack(_gather(reader, part, first))
            return out
    out = [section[a:b] for a, b in zip(start.tolist(), end.tolist())]
    if nulls:
        for i in np.flatnonzero(null).tolist():
            out[i] = None
    return out
