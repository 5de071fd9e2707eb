"""The v2 record layout (spec §1.8), read for all the records of a section at once with numpy.

Only the record *starts* are inherently sequential: `_starts` finds them with a tight loop over
the length varints (one struct unpack and one table lookup per record). Every other field is then
read for all records at once: the two bytes at every record's position are gathered as one uint16
(a one-byte-stride view of the section), two lookup tables give each varint's value and size
(varints of three bytes or more are decoded byte by byte), and the positions advance together.
Keys, values and headers are cut out last; header keys and values that repeat from record to
record, as they usually do, are decoded once and shared. The key scan packs its keys into one
buffer instead (`PackedKeys`, ready to become an Arrow column), and `scan_sections` reads the
sections of several batches as one, paying the per-call cost below once for all of them.

What the scalar readers (`records.decode_record`, `scan._scan_v2`) check record by record is checked
here on whole columns -- varints too long, lengths past the record's end, the header count, the
record size consumed exactly -- but the vectorised reader never raises and never decides what an
error is: whenever a section is not plainly well-formed (or needs what int64 cannot hold, or a
non-minimal length varint, or a header key that is not UTF-8), `decode_section`, `scan_section`
and `scan_sections` return None and the caller runs its scalar reader, the reference, which raises
the precise KafkaLogError. For any section the result is therefore exactly the scalar reader's.

numpy's per-call overhead (about a microsecond, some 30 calls per batch) makes this a loss for a
handful of records, so below the thresholds below `decode_section` and `scan_section` return None
at once (`scan.scan_batches` applies the scan's to a window's records).
"""
from __future__ import annotations

import struct
from itertools import repeat
from typing import Sequence

import numpy as np

from ..errors import KafkaLogError
from .records import Record
from .varint import read_varint, varint_size

# Below these many records a batch is read by the scalar path: the vectorised path has a fixed
# cost of some 30 numpy calls per batch, the scalar one is linear. The scalar readers are quickest
# on records under 64 bytes (one-byte lengths), so those batches switch later. Measured with
# `benchmarks/codec.py --thresholds` (crossovers: full decode 10-20 records, scan 18-50).
DECODE_THRESHOLD = 14
DECODE_THRESHOLD_SMALL_RECORDS = 20
SCAN_THRESHOLD = 20
SCAN_THRESHOLD_SMALL_RECORDS = 48
_SMALL_RECORD = 64  # bytes

# Headers are read one header index at a time for every record that has that many ("rounds"); once
# fewer records than this remain in a round, their remaining headers are read one by one.
_MIN_ROUND = 8

# Smallest record the scan accepts: length, attributes, timestampDelta, offsetDelta, keyLength,
# valueLength, one byte each (the full decode also needs headerCount, so this bound is safe for both).
_MIN_RECORD = 6

try:  # the cheapest "any" numpy has, without np.count_nonzero's Python wrapper
    from numpy._core.multiarray import count_nonzero as _count  # numpy 2
except ImportError:  # pragma: no cover
    try:
        from numpy.core.multiarray import count_nonzero as _count  # numpy 1
    except ImportError:
        _count = np.count_nonzero
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_SHORT = 1 << 13  # a varint of one or two bytes decodes to |v| <= 8192


class _GiveUp(Exception):
    """The section is not plainly well-formed: let the scalar decoder decide."""


# A varint of three bytes or more has no entry in the two-byte tables: its SIZE is this sentinel,
# which throws every later position of its record far past the record's end, where the checks of
# an optimistic read (one without a check per varint) notice it.
_LONG = 1 << 40


def _build_tables():
    # Indexed by the two bytes at a position as a little-endian uint16 (b0 | b1 << 8).
    # VALUE / SIZE: the varint's value and byte count when it has one or two bytes; 0 / _LONG otherwise.
    # ADVANCE (a list, for the scalar loop): for a canonical, non-negative length varint of one or
    #   two bytes, the bytes from the varint to the end of its record (varint size + length);
    #   _LONG otherwise (three bytes or more, negative, non-minimal: the loop's slow case).
    i = np.arange(65536, dtype=np.int64)
    b0, b1 = i & 0xFF, i >> 8
    one, two = b0 < 0x80, (b0 >= 0x80) & (b1 < 0x80)
    z = np.where(one, b0, (b0 & 0x7F) | (b1 << 7))
    value = np.where(one | two, (z >> 1) ^ -(z & 1), 0)
    size = np.where(one, 1, np.where(two, 2, _LONG))
    canonical = one | (two & (b1 != 0))
    advance = np.where(canonical & (value >= 0), size + value, _LONG)
    return advance.tolist(), value, size


_ADVANCE, _VALUE, _SIZE = _build_tables()
_U16 = struct.Struct("<H").unpack_from
# A record whose length varint and body together span `a` bytes has a length varint of
# 1 + searchsorted(_LENGTH_BOUNDS, a) bytes (lengths are canonical here, see _starts).
_LENGTH_BOUNDS = np.array([1 + 63, 2 + 8191, 3 + (1 << 20) - 1, 4 + (1 << 27) - 1], np.int64)


def _starts(section: bytes, count: int):
    """int64 array of the positions of the `count` records and of the end of the last: strictly
    increasing from 0 to len(section). Gives up on a negative, non-minimal or overrunning length."""
    if count * _MIN_RECORD > len(section):
        raise _GiveUp
    out = [0]
    append = out.append
    advance = _ADVANCE
    u16 = _U16
    pos = 0
    try:
        for _ in repeat(None, count):
            pos += advance[u16(section, pos)[0]]
            append(pos)
    except struct.error:  # past the end, or a _LONG advance
        pos = -1
    if pos != len(section):
        out = _starts_careful(section, count)
    return np.fromiter(out, np.int64, count + 1)


def _starts_careful(section: bytes, count: int) -> list[int]:
    """`_starts` for sections with lengths of three bytes or more (records of 8 KiB and more)."""
    out = [0]
    append = out.append
    advance = _ADVANCE
    u16 = _U16
    pos = 0
    try:
        for _ in repeat(None, count):
            a = advance[u16(section, pos)[0]]
            if a == _LONG:
                length, body = read_varint(section, pos)
                if length < 0 or body - pos != varint_size(length):
                    raise _GiveUp  # negative or non-minimal
                a = body - pos + length
            pos += a
            append(pos)
    except (struct.error, KafkaLogError):  # a length varint at or past the end
        raise _GiveUp from None
    if pos != len(section):
        raise _GiveUp
    return out


class _Reader:
    """Varints at many positions of one section at once.

    `words` views the section as overlapping little-endian uint16s, one at every byte (strides of
    one byte; a zero byte pads the last), so one gather gives each position's first two bytes and
    two table lookups their value and size. A position past the end is an IndexError, which means
    the section is not well-formed (give up). A varint read inside the section but past its
    record's end moves its position past that end, and positions only grow, so the callers' checks
    (every record ends where its length says) reject it. An optimistic reader (`checked=False`)
    does not even look for varints of three bytes or more: their _LONG size does the same. A
    checked reader decodes those byte by byte with the scalar reader's limits.
    """

    __slots__ = ("bytes", "words", "checked", "short")

    def __init__(self, section: bytes, checked: bool):
        padded = section + b"\0"
        self.bytes = np.frombuffer(padded, np.uint8)
        self.words = np.ndarray((len(section),), "<u2", padded, 0, (1,))
        self.checked = checked
        self.short = True  # whether the last checked read found only varints of one or two bytes

    def read(self, pos, max_bytes: int = 5, checked: bool = False):
        """(values int64, positions after them) of the varints (max_bytes 5) or varlongs (10) at `pos`."""
        try:
            w = self.words[pos]
        except IndexError:
            raise _GiveUp from None
        size = _SIZE.take(w)
        if checked or self.checked:
            self.short = not _count(size == _LONG)
            if not self.short:
                return self._read_long(pos, max_bytes)
        return _VALUE.take(w), pos + size

    def _read_long(self, pos, max_bytes: int):
        take = self.bytes.take
        b = take(pos, mode="clip")
        raw = (b & 0x7F).astype(np.uint64)
        more = b >= 0x80
        after = pos + 1
        for j in range(1, max_bytes):
            if not more.any():
                break
            b = take(pos + j, mode="clip")
            group = (b & 0x7F).astype(np.uint64)
            if j == 9 and (group[more] > 1).any():
                raise _GiveUp  # more than 64 bits: Python's integers would keep them, int64 cannot
            raw |= (group << np.uint64(7 * j)) * more
            after += more
            more &= b >= 0x80
        else:
            if more.any():
                raise _GiveUp  # too long
        return (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64), after


def _add_base(base: int, deltas):
    """base + deltas as int64, or give up where a sum would leave int64."""
    if deltas.size and (base + int(deltas.min()) < _INT64_MIN or base + int(deltas.max()) > _INT64_MAX):
        raise _GiveUp
    return deltas + base


class _Fields:
    """What every reader needs of each record, up to its value (positions index the section)."""
    __slots__ = ("reader", "S", "E", "span", "offset", "timestamp", "ts_start", "ts_delta", "ts_end", "offset_delta",
                 "key_len_start", "key_start", "key_end", "key_len", "value_start", "value_end", "value_len")


def _fields(section: bytes, bounds, base_offset: int, base_timestamp: int, log_append_time: int | None,
            checked: bool, timestamps_as_list: bool = False) -> _Fields:
    """Read every record up to its value and check that each value ends inside its record (with
    positions that only grow, so does everything before it)."""
    f = _Fields()
    f.reader = reader = _Reader(section, checked)
    read = reader.read
    f.S = S = bounds[:-1]
    f.E = E = bounds[1:]
    f.span = span = E - S
    # the attributes byte follows the length varint, whose size follows from the record's span
    f.ts_start = S + (_LENGTH_BOUNDS.searchsorted(span) + 2)
    # timestamps are checked even when optimistic: delete-horizon batches have long deltas throughout
    f.ts_delta, f.ts_end = read(f.ts_start, 10, checked=log_append_time is None)
    ts_delta, ts_short = f.ts_delta, reader.short
    f.offset_delta, f.key_len_start = read(f.ts_end)
    offset_delta = f.offset_delta
    f.key_len, f.key_start = read(f.key_len_start)
    f.key_end = f.key_start + np.maximum(f.key_len, 0)
    f.value_len, f.value_start = read(f.key_end)
    f.value_end = f.value_start + np.maximum(f.value_len, 0)
    if _count(f.value_end > E):
        raise _GiveUp
    if _INT64_MIN + (1 << 35) <= base_offset <= _INT64_MAX - (1 << 35):  # |offset delta| < 2**35
        f.offset = offset_delta + base_offset
    else:
        f.offset = _add_base(base_offset, offset_delta)
    count = len(S)
    if log_append_time is not None:
        f.timestamp = [log_append_time] * count if timestamps_as_list else np.full(count, log_append_time, np.int64)
    else:
        if ts_short and -_INT64_MAX + _SHORT <= base_timestamp <= _INT64_MAX - _SHORT:
            f.timestamp = ts_delta + base_timestamp
        else:
            f.timestamp = _add_base(base_timestamp, ts_delta)
        if timestamps_as_list:
            f.timestamp = f.timestamp.tolist()
    return f


def _slices(reader: _Reader, section: bytes, start, end, length) -> list:
    """section[start:end] per record, None where length < 0."""
    null = length < 0
    nulls = int(_count(null))
    m = len(length)
    if nulls == m:
        return [None] * nulls
    if not nulls:
        first = int(length[0])
        if 0 < first <= _GATHER_MAX and not _count(length != first):
            # the same length everywhere (fixed-size keys, say): gather the fields into one buffer
            # and cut it with one struct call, cheaper than a slice per record
            out = []
            for i in range(0, m, _CHUNK):
                part = start[i:i + _CHUNK]
                out += _cutter(first, len(part)).unpack(_gather(reader, part, first))
            return out
    out = [section[a:b] for a, b in zip(start.tolist(), end.tolist())]
    if nulls:
        for i in np.flatnonzero(null).tolist():
            out[i] = None
    return out


_GATHER_MAX = 64  # longest fields gathered across records (_uniform, _slices)
_CHUNK = 256  # records gathered at once
_TILES: list = [None] * (_GATHER_MAX + 1)  # length -> 0, 1, .. length-1, _CHUNK times
_CUTTERS: dict[tuple[int, int], struct.Struct] = {}


def _gather(reader: _Reader, start, length: int) -> bytes:
    """The `length` bytes at each position of `start` (at most _CHUNK of them), concatenated."""
    tile = _TILES[length]
    if tile is None:
        tile = _TILES[length] = np.tile(np.arange(length, dtype=np.int64), _CHUNK)
    index = start.repeat(length)
    index += tile[:len(index)]
    return reader.bytes.take(index, mode="clip").tobytes()


def _cutter(length: int, m: int) -> struct.Struct:
    """A Struct that cuts m fields of `length` bytes out of a buffer."""
    cutter = _CUTTERS.get((length, m))
    if cutter is None:
        if len(_CUTTERS) >= 1024:
            _CUTTERS.clear()
        cutter = _CUTTERS[length, m] = struct.Struct(f"{length}s" * m)
    return cutter


def _attempt(read, section: bytes, count: int, *args):
    """read(section, bounds, *args, checked) optimistic first, then checked; None if both give up."""
    if count < 1:
        return None
    try:
        bounds = _starts(section, count)
        try:
            return read(section, bounds, *args, False)
        except _GiveUp:
            return read(section, bounds, *args, True)
    except _GiveUp:
        return None


# -- key scan ------------------------------------------------------------------------------------
def scan_section(section: bytes, count: int, base_offset: int, base_timestamp: int,
                 log_append_time: int | None, *, force: bool = False):
    """The key scan's columns for `count` records: (keys as PackedKeys, offset, timestamp, value_size,
    span_start, span_size), the numeric ones int64 arrays; None to let the scalar scan decide
    (and raise), which it also does below the thresholds unless `force`."""
    if not force and count < (SCAN_THRESHOLD if len(section) >= _SMALL_RECORD * count
                              else SCAN_THRESHOLD_SMALL_RECORDS):
        return None
    return _attempt(_scan, section, count, base_offset, base_timestamp, log_append_time)


def _scan(section, bounds, base_offset, base_timestamp, log_append_time, checked):
    f = _scan_fields(section, bounds, base_offset, base_timestamp, log_append_time, checked)
    return _packed(f.reader, f.key_start, f.key_len), f.offset, f.timestamp, np.maximum(f.value_len, -1), f.S, f.span


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


def _packed(reader: _Reader, start, length) -> PackedKeys:
    """The fields at `start` (lengths `length`, null where negative) packed into one buffer."""
    size = np.maximum(length, 0)
    offsets = np.zeros(len(size) + 1, np.int64)
    np.cumsum(size, out=offsets[1:])
    # the byte at k of the packed buffer is at its field's start + (k - where the field begins at)
    index = np.repeat(start - offsets[:-1], size)
    index += np.arange(len(index))
    return PackedKeys(reader.bytes.take(index), offsets, length < 0)


def scan_sections(sections: Sequence[bytes], counts: Sequence[int], base_offsets: Sequence[int],
                  base_timestamps: Sequence[int], log_append_times: Sequence[int | None]):
    """`scan_section`'s columns for the records of several v2 record sections (one per batch,
    `counts[i] > 0` records in `sections[i]`), read together so that numpy's cost per call is paid
    once for all of them; span starts are relative to each record's own section. None unless the
    records of every section are exactly its own (each section the per-batch scan would accept,
    with the same result); the caller then scans the sections one by one."""
    joined = _read_joined(_scan_base_zero_fields, sections, counts, base_offsets, base_timestamps, log_append_times)
    if joined is None:
        return None
    _, f, section_start, batch, offset, timestamp = joined
    keys = _packed(f.reader, f.key_start, f.key_len)
    return keys, offset, timestamp, np.maximum(f.value_len, -1), f.S - section_start[batch], f.span


def _base_zero_fields(section, bounds, checked) -> _Fields:
    """`_fields` with bases 0 (deltas) and timestamps read checked."""
    return _fields(section, bounds, 0, 0, None, checked)


def _scan_fields(section, bounds, base_offset, base_timestamp, log_append_time, checked) -> _Fields:
    """`_fields`, and the headers after each value stepped over: the key scan reads no header, but
    a record whose headers do not fill it exactly is not one the scan may vouch for."""
    f = _fields(section, bounds, base_offset, base_timestamp, log_append_time, checked)
    if not _headers_fit(section, f.reader, f.value_end, f.E, as_kafka_writes=False):
        raise _GiveUp
    return f


def _scan_base_zero_fields(section, bounds, checked) -> _Fields:
    return _scan_fields(section, bounds, 0, 0, None, checked)


def _read_joined(read, sections: Sequence[bytes], counts: Sequence[int], base_offsets: Sequence[int],
                 base_timestamps: Sequence[int], log_append_times: Sequence[int | None]):
    """Read several sections joined as one with `read` (a `_fields` of bases 0, through `_attempt`):
    (the joined section, fields, where each section starts in it, each record's section, offsets,
    timestamps), or None where the pass gives up, a count does not fit its section, or a base and a
    delta come near int64's limits."""
    section = b"".join(sections)
    f = _attempt(read, section, sum(counts))
    if f is None:
        return None
    section_start = _section_starts(f, sections, counts)
    if section_start is None:
        return None
    batch = np.repeat(np.arange(len(counts)), counts)
    offset = _rebase(f.offset_delta, base_offsets, batch)
    timestamp = _timestamps(f.ts_delta, base_timestamps, log_append_times, batch)
    if offset is None or timestamp is None:
        return None
    return section, f, section_start, batch, offset, timestamp


# -- full decode ---------------------------------------------------------------------------------
def decode_section(section: bytes, count: int, base_offset: int, base_timestamp: int,
                   log_append_time: int | None, *, force: bool = False) -> list[Record] | None:
    """Every record of the section, exactly as `decode_record` returns them one by one; None to
    let the scalar decoder decide (and raise), which it also does below the thresholds unless
    `force`."""
    if not force and count < (DECODE_THRESHOLD if len(section) >= _SMALL_RECORD * count
                              else DECODE_THRESHOLD_SMALL_RECORDS):
        return None
    return _attempt(_decode, section, count, base_offset, base_timestamp, log_append_time)


def _decode(section, bounds, base_offset, base_timestamp, log_append_time, checked):
    f = _fields(section, bounds, base_offset, base_timestamp, log_append_time, checked, True)
    E = f.E
    headers = _same_headers(section, f.reader, f.value_end, E)
    if headers is None:
        header_count, pos = f.reader.read(f.value_end)
        if _count(header_count):
            headers = _headers(section, f.reader, header_count, pos, E)
        else:
            if pos.tobytes() != E.tobytes():  # the record size must be consumed exactly
                raise _GiveUp
            headers = repeat(())
    keys = _slices(f.reader, section, f.key_start, f.key_end, f.key_len)
    values = _slices(f.reader, section, f.value_start, f.value_end, f.value_len)
    return list(map(tuple.__new__, repeat(Record, len(E)),
                    zip(f.offset.tolist(), f.timestamp, keys, values, headers)))


def _same_headers(section: bytes, reader: _Reader, start, E):
    """When every record ends in the same bytes after its value -- header count and headers, often
    just a zero count -- those are decoded once, from the first record, and the resulting tuple
    serves every record (an iterable of them); else None."""
    if not _uniform(reader, start, E - start):
        return None
    headers = _header_tail(section, int(start[0]), int(E[0]), None)
    return repeat(tuple(headers))


def _headers(section: bytes, reader: _Reader, header_count, pos, E) -> list:
    """Each record's headers tuple, checked as decode_record checks them: a count that is negative
    or larger than the bytes left, a negative key length, a key that is not UTF-8, anything past
    the record's end, and the record size consumed exactly."""
    if _count(header_count < 0) or _count(header_count > E - pos):
        raise _GiveUp
    n = len(header_count)
    rows = None  # the records with headers (None: all of them)
    if _count(header_count) < n:
        none = header_count == 0
        if pos[none].tobytes() != E[none].tobytes():
            raise _GiveUp
        rows = np.flatnonzero(~none)
        header_count, pos, E = header_count[rows], pos[rows], E[rows]
    m = len(header_count)
    high = int(header_count.max())
    # Round r reads header r of every record that has more than r headers. `live` indexes those
    # records among the m (ascending; None: all m), so each round's pairs line up with it.
    rounds = []
    live = None
    for r in range(high):
        key_len, key_start = reader.read(pos)
        if _count(key_len < 0):
            raise _GiveUp
        key_end = key_start + key_len
        value_len, value_start = reader.read(key_end)
        pos = value_start + np.maximum(value_len, 0)
        if r + 1 == high:
            if pos.tobytes() != E.tobytes():  # the last header ends its record
                raise _GiveUp
        elif _count(pos > E):
            raise _GiveUp
        rounds.append((live, _pairs(section, reader, key_start, key_end, key_len, value_start, pos, value_len),
                       False))
        if r + 1 == high:
            break
        more = header_count > r + 1
        if _count(more) < len(more):
            done = ~more
            if pos[done].tobytes() != E[done].tobytes():  # all its headers read: the record must end here
                raise _GiveUp
            keep = np.flatnonzero(more)
            live = keep if live is None else live[keep]
            header_count, pos, E = header_count[keep], pos[keep], E[keep]
        if len(pos) < _MIN_ROUND:  # a few records with many headers: finish them one by one
            rest = [_header_tail(section, p, e, c - r - 1)
                    for p, e, c in zip(pos.tolist(), E.tolist(), header_count.tolist())]
            rounds.append((live, rest, True))
            break

    if len(rounds) == 1:  # one header each: the common case
        per_row = list(zip(rounds[0][1]))
    elif all(idx is None and not tail for idx, _, tail in rounds):  # the same count everywhere
        per_row = list(zip(*(pairs for _, pairs, _ in rounds)))
    else:
        lists = [[] for _ in range(m)]
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


def _uniform(reader: _Reader, start, length) -> bool:
    """Whether the fields at `start` (lengths `length`) are all the same bytes. Header keys (and
    often values) repeat from record to record: one decoded string or one bytes object then
    serves them all (they are immutable, so sharing them is invisible)."""
    first = int(length[0])
    if first > _GATHER_MAX or _count(length != first):
        return False
    if first <= 0:
        return True
    expected = None
    for i in range(0, len(start), _CHUNK):
        part = start[i:i + _CHUNK]
        fields = _gather(reader, part, first)
        if expected is None:
            expected = fields[:first] * len(part)
        if fields != (expected if len(fields) == len(expected) else expected[:len(fields)]):
            return False
    return True


def _pairs(section: bytes, reader: _Reader, key_start, key_end, key_len, value_start, value_end,
           value_len) -> list:
    """The (key, value) header pairs of one round."""
    m = len(key_start)
    same_key = _uniform(reader, key_start, key_len)
    try:
        if same_key:
            a = int(key_start[0])
            keys = [section[a:a + int(key_len[0])].decode("utf-8")] * m
        else:
            keys = [section[a:b].decode("utf-8") for a, b in zip(key_start.tolist(), key_end.tolist())]
    except UnicodeDecodeError:
        raise _GiveUp from None
    if _uniform(reader, value_start, value_len):
        a = int(value_start[0])
        v = None if value_len[0] < 0 else section[a:int(value_end[0])]
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
                raise _GiveUp
        for _ in range(count):
            key_len, pos = read_varint(section, pos)
            if key_len < 0 or pos + key_len > end:
                raise _GiveUp
            key = section[pos:pos + key_len].decode("utf-8")
            pos += key_len
            value_len, pos = read_varint(section, pos)
            if value_len < 0:
                value = None
            else:
                if pos + value_len > end:
                    raise _GiveUp
                value = section[pos:pos + value_len]
                pos += value_len
            out.append((key, value))
    except (KafkaLogError, UnicodeDecodeError):
        raise _GiveUp from None
    if pos != end:
        raise _GiveUp
    return out


# -- splice: the retained records' own bytes -----------------------------------------------------
# Kafka's cleaner writes every record it keeps again (attributes 0, minimal varints, timestamp delta
# against the new batch's base timestamp). A record already in that form is those bytes, but for
# its length and timestamp delta: `splice` writes those two again and reuses everything after the
# delta.

_VARLONG_BOUNDS = np.array([1 << (7 * k) for k in range(1, 10)], np.uint64)
_SHIFTS = np.arange(0, 70, 7, dtype=np.uint64)
_COLUMNS = np.arange(10)


def _zigzag(values):
    return ((values << 1) ^ (values >> 63)).view(np.uint64)


def _sizes(values):
    """Bytes of each int64 as a minimal zig-zag varlong (a varint's count for int32 values)."""
    return _VARLONG_BOUNDS.searchsorted(_zigzag(values), side="right") + 1


def _minimal(reader: _Reader, start, end) -> bool:
    """Whether the varints from `start` to `end` are all minimal: one byte, or a last byte that is not 0."""
    return not _count((end - start > 1) & (reader.bytes.take(end - 1) == 0))


class Spans:
    """The records of several sections read as one: per record its batch (an index into the
    sections), where its bytes are in `section`, and what a splice must know of it."""
    __slots__ = ("section", "starts", "batch", "S", "E", "ts_end", "offset", "timestamp", "null_value")


def read_spans(sections: Sequence[bytes], counts: Sequence[int], base_offsets: Sequence[int],
               base_timestamps: Sequence[int], log_append_times: Sequence[int | None]) -> Spans | None:
    """The records of v2 record sections (one per batch, `counts[i]` records in `sections[i]`), read
    together so that numpy's cost per call is paid once for all of them. None unless every section
    is well-formed and every record is written exactly as Kafka writes one (attributes 0, null
    lengths -1, every varint minimal, UTF-8 header keys): only then are its bytes what Kafka's
    re-encoding would give. Also None where a base and a delta come near int64's limits."""
    joined = _read_joined(_kafka_fields, sections, counts, base_offsets, base_timestamps, log_append_times)
    if joined is None:
        return None
    s = Spans()
    s.section, f, _, s.batch, s.offset, s.timestamp = joined
    s.starts = np.cumsum([0, *counts[:-1]])
    s.S, s.E, s.ts_end, s.null_value = f.S, f.E, f.ts_end, f.value_len < 0
    return s


def _kafka_fields(section, bounds, checked) -> _Fields:
    """The fields of every record (deltas: bases 0), if every record is as Kafka writes it."""
    f = _base_zero_fields(section, bounds, checked)
    starts = np.concatenate((f.ts_start, f.ts_end, f.key_len_start, f.key_end))
    ends = np.concatenate((f.ts_end, f.key_len_start, f.key_start, f.value_start))
    if (_count(f.reader.bytes.take(f.ts_start - 1))  # the attributes byte
            or _count(f.offset_delta != f.offset_delta.astype(np.int32))
            or _count(f.key_len < -1) or _count(f.value_len < -1) or not _minimal(f.reader, starts, ends)
            or not _headers_fit(section, f.reader, f.value_end, f.E, as_kafka_writes=True)):
        raise _GiveUp
    return f


_SAFE = 1 << 62  # a sum or difference of two values below this stays inside int64


def _safe(values) -> bool:
    return not _count((values <= -_SAFE) | (values >= _SAFE))


def _rebase(deltas, bases: Sequence[int], batch):
    """deltas + their batch's base, or None near int64's limits (the decoder handles those)."""
    bases = np.array(bases, np.int64)
    if not (_safe(bases) and _safe(deltas)):
        return None
    return deltas + bases[batch]


def _section_starts(f: _Fields, sections: Sequence[bytes], counts: Sequence[int]):
    """Where each section starts in the joined ones (int64 array), or None when a section's count
    does not fit it: a pass over joined sections only checks that all the records fill all the bytes,
    so a record one section lacks could be counted in the next."""
    first = np.cumsum([0, *counts[:-1]])  # each section's first record
    section_start = np.cumsum([0, *map(len, sections[:-1])])
    holds = np.asarray(counts) > 0
    if f.S[first[holds]].tobytes() != section_start[holds].tobytes():
        return None
    return section_start


def _timestamps(deltas, base_timestamps: Sequence[int], log_append_times: Sequence[int | None], batch):
    """Each record's timestamp from its delta and its batch (see _rebase: None near int64's limits)."""
    timestamp = _rebase(deltas, base_timestamps, batch)
    appended = np.array([t is not None for t in log_append_times])
    if timestamp is not None and appended.any():  # LogAppendTime: every record has the batch's max timestamp
        times = np.array([-1 if t is None else t for t in log_append_times], np.int64)
        timestamp = np.where(appended[batch], times[batch], timestamp)
    return timestamp


def _headers_fit(section: bytes, reader: _Reader, pos, E, *, as_kafka_writes: bool) -> bool:
    """Whether every record's headers, from `pos` on, end exactly at its end `E`; with
    `as_kafka_writes`, also whether they are written as Kafka writes them (minimal varints, UTF-8
    keys)."""
    strict = as_kafka_writes
    count, after = reader.read(pos, checked=True)
    if _count(count < 0) or _count(count > E - after) or (strict and not _minimal(reader, pos, after)):
        return False
    pos = after
    while True:  # round r reads header r of every record that has more than r headers
        done = count == 0
        if pos[done].tobytes() != E[done].tobytes():
            return False
        if _count(done) == len(done):
            return True
        live = ~done
        count, pos, E = count[live] - 1, pos[live], E[live]
        key_len, key_start = reader.read(pos, checked=True)
        if _count(key_len < 0) or (strict and not _minimal(reader, pos, key_start)):
            return False
        key_end = key_start + key_len
        if _count(key_end > E):
            return False
        value_len, value_start = reader.read(key_end, checked=True)
        if _count(value_len < -1) or (strict and not _minimal(reader, key_end, value_start)):
            return False
        pos = value_start + np.maximum(value_len, 0)
        if _count(pos > E):
            return False
        if not strict:
            continue
        try:
            for a, b in zip(key_start.tolist(), key_end.tolist()):
                section[a:b].decode("utf-8")
        except UnicodeDecodeError:
            return False


def splice(spans: Spans, keep, base_timestamps) -> list[bytes] | None:
    """Per section, its records where `keep` (a mask over all records) is set, re-based on the
    section's new base timestamp (`base_timestamps`, int64 per section), as Kafka's re-encoding
    writes them: each keeps its bytes after the timestamp delta, and gets its length, attributes and
    delta written again. None where a delta would come near int64's limits."""
    kept = np.flatnonzero(keep)
    ts, base = spans.timestamp[kept], base_timestamps[spans.batch[kept]]
    if not (_safe(ts) and _safe(base)):
        return None
    delta = ts - base
    rest_start, rest_end = spans.ts_end[kept], spans.E[kept]
    delta_size = _sizes(delta)
    length = 1 + delta_size + (rest_end - rest_start)  # attributes, delta, the rest
    length_size = _sizes(length)
    n = len(kept)
    prefixes = _varint_matrix(length, length_size, 5), np.zeros((n, 1), np.uint8), _varint_matrix(delta, delta_size, 10)
    present = _COLUMNS[:5] < length_size[:, None], np.ones((n, 1), bool), _COLUMNS < delta_size[:, None]
    packed = np.concatenate(prefixes, axis=1)[np.concatenate(present, axis=1)].tobytes()
    cuts = np.concatenate(([0], np.cumsum(length_size + 1 + delta_size))).tolist()
    section = spans.section
    parts = []
    for a, b, c, d in zip(cuts, cuts[1:], rest_start.tolist(), rest_end.tolist()):
        parts += (packed[a:b], section[c:d])
    bounds = (2 * np.searchsorted(kept, np.append(spans.starts, len(spans.offset)))).tolist()
    return [b"".join(parts[a:b]) for a, b in zip(bounds, bounds[1:])]


def _varint_matrix(values, sizes, width: int):
    """Row i: the zig-zag varint of values[i] in its first sizes[i] bytes (the rest is padding)."""
    groups = ((_zigzag(values)[:, None] >> _SHIFTS[:width]) & np.uint64(0x7F)).astype(np.uint8)
    groups[_COLUMNS[:width] < (sizes - 1)[:, None]] |= 0x80
    return groups
