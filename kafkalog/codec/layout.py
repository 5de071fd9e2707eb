"""The v2 record layout (spec §1.8), decoded for all the records of a section at once with numpy.

Only the record *starts* are inherently sequential: `_starts` finds them with a tight loop over the
length varints (one table lookup per record). Every other field is then read for all records at
once: a varint is gathered at every record's position, decoded through lookup tables (one and two
bytes, the usual case; longer ones byte by byte), and the positions advance together. What the
scalar decoder (`records.decode_record`, `scan._scan_v2`) checks record by record is checked here on
whole columns.

The vectorised reader never raises on bad data and never decides what an error is: whenever a
section is not plainly well-formed -- a length running past its record, a varint too long, a
non-minimal length varint, a value outside int64, invalid UTF-8 in a header key -- it gives up
(`decode_section` returns None, `scan_section` returns False) and the caller runs the scalar decoder,
which is the reference and raises the precise KafkaLogError. So for any section, the result is
exactly the scalar decoder's, only faster when the section is well-formed.

numpy's per-call overhead (about a microsecond) makes this a loss for a handful of records: below
`VECTOR_THRESHOLD` records the callers keep the scalar path.
"""
from __future__ import annotations

import struct
from itertools import repeat

import numpy as np

from ..errors import KafkaLogError
from .records import Record
from .varint import read_varint, varint_size

# Below this many records a batch is read by the scalar path (the vectorised path's fixed cost is a
# few dozen numpy calls per batch); measured with `benchmarks/codec.py --thresholds`.
DECODE_THRESHOLD = 16
SCAN_THRESHOLD = 16

# Headers are read one header index at a time for every record that has that many ("rounds"); once
# fewer records than this remain in a round, their remaining headers are read one by one.
_MIN_ROUND = 8

# Smallest record the scan accepts: length, attributes, timestampDelta, offsetDelta, keyLength,
# valueLength, one byte each (the full decode also needs headerCount, so this bound is safe for both).
_MIN_RECORD = 6

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_SHORT = 1 << 13  # a one- or two-byte varint decodes to |v| <= 8192


class _GiveUp(Exception):
    """The section is not plainly well-formed: let the scalar decoder decide."""


def _zigzag(z: int) -> int:
    return (z >> 1) ^ -(z & 1)


def _build_tables():
    # Indexed by the two bytes at a position, big-endian (b0 << 8 | b1).
    # ADVANCE: for a canonical, non-negative length varint of one or two bytes, the bytes from the
    #   varint to the end of its record (varint size + length); None otherwise (the loop's slow case).
    # VALUE / SIZE: the varint's value and byte count when it has one or two bytes; SIZE 0 otherwise.
    advance = [None] * 65536
    value = np.zeros(65536, np.int64)
    size = np.zeros(65536, np.int64)
    for b0 in range(256):
        for b1 in range(256):
            i = (b0 << 8) | b1
            if b0 < 0x80:
                z, nb, canonical = b0, 1, True
            elif b1 < 0x80:
                z, nb, canonical = (b0 & 0x7F) | (b1 << 7), 2, b1 != 0
            else:
                continue
            v = _zigzag(z)
            value[i] = v
            size[i] = nb
            if v >= 0 and canonical:
                advance[i] = nb + v
    return advance, value, size


_ADVANCE, _VALUE2, _SIZE2 = _build_tables()
_VALUE1 = _VALUE2[::256].copy()  # one-byte varints: only b0 matters
_U16 = struct.Struct(">H").unpack_from
# A record whose length varint and body together span `a` bytes has a length varint of
# 1 + searchsorted(_LENGTH_BOUNDS, a) bytes (lengths are canonical here, see _starts).
_LENGTH_BOUNDS = np.array([1 + 63, 2 + 8191, 3 + (1 << 20) - 1, 4 + (1 << 27) - 1], np.int64)


def _starts(section: bytes, count: int) -> list[int]:
    """Positions of the `count` records and of the end of the last: strictly increasing from 0,
    and the last is len(section). Gives up on a negative, non-minimal or overrunning length."""
    if count * _MIN_RECORD > len(section):
        raise _GiveUp
    out = [0]
    append = out.append
    advance = _ADVANCE
    u16 = _U16
    pos = 0
    try:
        for _ in repeat(None, count):
            a = advance[u16(section, pos)[0]]
            if a is None:  # three bytes or more, negative, non-minimal: rare
                length, body = read_varint(section, pos)
                if length < 0 or body - pos != varint_size(length):
                    raise _GiveUp
                a = body - pos + length
            pos += a
            append(pos)
    except (struct.error, KafkaLogError):  # a length varint at or past the end
        raise _GiveUp from None
    if pos != len(section):
        raise _GiveUp
    return out


def _read(take, pos, max_bytes: int):
    """Decode the varint (max_bytes 5) or varlong (10) at every position of `pos`.

    Returns (values int64, positions after them, short) where short means every one had at most two
    bytes. Reads are clipped to the section, never out of bounds: a varint that runs past the end
    reads garbage, but leaves its position past the end, which the callers' checks reject.
    """
    b0 = take(pos, mode="clip")
    if b0.max() < 0x80:
        return _VALUE1[b0], pos + 1, True
    i = (b0.astype(np.intp) << 8) | take(pos + 1, mode="clip")
    size = _SIZE2[i]
    if size.min() == 0:
        return _read_long(take, pos, max_bytes) + (False,)
    return _VALUE2[i], pos + size, True


def _read_long(take, pos, max_bytes: int):
    """The general case of `_read`, byte by byte, with the scalar reader's limits."""
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


def _add_base(base: int, deltas, short: bool):
    """base + deltas as int64, or give up where a sum would leave int64."""
    if short and -_INT64_MAX + _SHORT <= base <= _INT64_MAX - _SHORT:
        return deltas + base
    if deltas.size and (base + int(deltas.min()) < _INT64_MIN or base + int(deltas.max()) > _INT64_MAX):
        raise _GiveUp
    return deltas + base


class _Fields:
    """The columns every reader needs. Positions index the section; E is each record's end."""
    __slots__ = ("S", "E", "take", "ts_delta", "ts_short", "offset_delta", "od_short", "key_start",
                 "key_len", "value_start", "value_len", "value_end")


def _fields(section: bytes, count: int) -> _Fields:
    """Read lengths up to the value of every record, and check that each value ends inside its
    record (with monotonic positions, so does everything before it)."""
    f = _Fields()
    S = np.array(_starts(section, count), np.int64)
    E = S[1:]
    S = S[:-1]
    take = np.frombuffer(section, np.uint8).take
    # the attributes byte follows the length varint, whose size follows from the record's span
    pos = S + np.searchsorted(_LENGTH_BOUNDS, E - S) + 2
    f.ts_delta, pos, f.ts_short = _read(take, pos, 10)
    f.offset_delta, pos, f.od_short = _read(take, pos, 5)
    key_len, key_start, _ = _read(take, pos, 5)
    key_end = key_start + np.maximum(key_len, 0)
    value_len, value_start, _ = _read(take, key_end, 5)
    value_end = value_start + np.maximum(value_len, 0)
    if (value_end > E).any():
        raise _GiveUp
    f.S, f.E, f.take = S, E, take
    f.key_start, f.key_len, f.value_start, f.value_len, f.value_end = (
        key_start, key_len, value_start, value_len, value_end)
    return f


def _slices(section: bytes, start, length) -> list:
    """section[start:start + length] per record, None where length < 0."""
    n = len(length)
    null = length < 0
    nulls = int(np.count_nonzero(null))
    if nulls == n:
        return [None] * n
    starts = start.tolist()
    out = [section[a:b] for a, b in zip(starts, (start + np.maximum(length, 0)).tolist())]
    if nulls:
        for i in np.flatnonzero(null).tolist():
            out[i] = None
    return out


# -- key scan ------------------------------------------------------------------------------------
def scan_section(section: bytes, count: int, base_offset: int, base_timestamp: int,
                 log_append_time: int | None):
    """The key scan's columns for `count` records: (key list, offset, timestamp, value_size,
    span_start, span_size), the numeric ones int64 arrays; None to let the scalar scan decide."""
    try:
        f = _fields(section, count)
        offsets = _add_base(base_offset, f.offset_delta, f.od_short)
        if log_append_time is not None:
            timestamps = np.full(count, log_append_time, np.int64)
        else:
            timestamps = _add_base(base_timestamp, f.ts_delta, f.ts_short)
    except _GiveUp:
        return None
    keys = _slices(section, f.key_start, f.key_len)
    return keys, offsets, timestamps, np.maximum(f.value_len, -1), f.S, f.E - f.S


# -- full decode ---------------------------------------------------------------------------------
def decode_section(section: bytes, count: int, base_offset: int, base_timestamp: int,
                   log_append_time: int | None) -> list[Record] | None:
    """Every record of the section, exactly as `decode_record` would return them one by one;
    None to let the scalar decoder decide (and raise)."""
    try:
        f = _fields(section, count)
        take, E = f.take, f.E
        header_count, pos, _ = _read(take, f.value_end, 5)
        offsets = _add_base(base_offset, f.offset_delta, f.od_short)
        if log_append_time is not None:
            timestamps = [log_append_time] * count
        else:
            timestamps = _add_base(base_timestamp, f.ts_delta, f.ts_short).tolist()
        if header_count.any():
            headers = _headers(section, take, header_count, pos, E)
        else:
            if (pos != E).any():  # the record size must be consumed exactly
                raise _GiveUp
            headers = repeat((), count)
    except _GiveUp:
        return None
    keys = _slices(section, f.key_start, f.key_len)
    values = _slices(section, f.value_start, f.value_len)
    return list(map(tuple.__new__, repeat(Record, count), zip(offsets.tolist(), timestamps, keys, values, headers)))


def _headers(section: bytes, take, header_count, pos, E) -> list:
    """Each record's headers tuple, checked as decode_record checks them: a count that is negative
    or larger than the bytes left, a negative key length, a key that is not UTF-8, anything past
    the record's end, and the record size consumed exactly."""
    if header_count.min() < 0 or (header_count > E - pos).any():
        raise _GiveUp
    n = len(header_count)
    has = header_count > 0
    rows = None  # the records with headers (None: all of them)
    if not has.all():
        if (pos[~has] != E[~has]).any():
            raise _GiveUp
        rows = np.flatnonzero(has)
        header_count, pos, E = header_count[rows], pos[rows], E[rows]
    m = len(header_count)
    # Round r reads header r of every record that has more than r headers. `live` indexes those
    # records among the m (ascending; None: all m), so each round's pairs line up with it.
    rounds = []
    live = None
    r = 0
    while True:
        key_len, key_start, _ = _read(take, pos, 5)
        if key_len.min() < 0:
            raise _GiveUp
        key_end = key_start + key_len
        value_len, value_start, _ = _read(take, key_end, 5)
        pos = value_start + np.maximum(value_len, 0)
        if (pos > E).any():
            raise _GiveUp
        try:
            keys = [section[a:b].decode("utf-8") for a, b in zip(key_start.tolist(), key_end.tolist())]
        except UnicodeDecodeError:
            raise _GiveUp from None
        rounds.append((live, list(zip(keys, _slices(section, value_start, value_len))), False))
        r += 1
        more = header_count > r
        if not more.all():
            done = ~more
            if (pos[done] != E[done]).any():  # all its headers read: the record must end here
                raise _GiveUp
            keep = np.flatnonzero(more)
            if not len(keep):
                break
            live = keep if live is None else live[keep]
            header_count, pos, E = header_count[keep], pos[keep], E[keep]
        if len(pos) < _MIN_ROUND:  # a few records with many headers: finish them one by one
            stragglers = [_header_tail(section, p, e, c - r)
                          for p, e, c in zip(pos.tolist(), E.tolist(), header_count.tolist())]
            rounds.append((live, stragglers, True))
            break

    if len(rounds) == 1 and live is None:  # one header each: the common case
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


def _header_tail(section: bytes, pos: int, end: int, count: int) -> list:
    """The last `count` headers of one record, read one by one as decode_record reads them."""
    out = []
    try:
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
