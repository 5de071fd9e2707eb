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
_SHORT = 1 << 13  # a varint of one or two bytes decodes to |v| <= 8192


class _GiveUp(Exception):
    """The section is not plainly well-formed: let the scalar decoder decide."""


def _zigzag(z: int) -> int:
    return (z >> 1) ^ -(z & 1)


# A varint of three bytes or more has no entry in the two-byte tables: its SIZE is this sentinel,
# which throws every later position of its record far past the record's end, where the checks of
# an optimistic read (one without a check per varint) notice it.
_LONG = 1 << 40


def _build_tables():
    # Indexed by the two bytes at a position, big-endian (b0 << 8 | b1).
    # ADVANCE (a list, for the scalar loop): for a canonical, non-negative length varint of one or
    #   two bytes, the bytes from the varint to the end of its record (varint size + length);
    #   _LONG otherwise (three bytes or more, negative, non-minimal: the loop's slow case).
    # VALUE / SIZE: the varint's value and byte count when it has one or two bytes; 0 / _LONG otherwise.
    advance = [_LONG] * 65536
    value = np.zeros(65536, np.int64)
    size = np.full(65536, _LONG, np.int64)
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


_ADVANCE, _VALUE, _SIZE = _build_tables()
_HIGH = np.arange(256, dtype=np.int64) << 8  # b0 -> b0 << 8, as a take
_U16 = struct.Struct(">H").unpack_from
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

    Reads are clipped to the section, never out of bounds: a varint read at or past the end gives
    garbage, but its position moves on past the end, and positions only grow, so the callers'
    checks (every record ends where its length says) reject it. An optimistic reader
    (`checked=False`) does not even look for varints of three bytes or more: their _LONG size does
    the same. A checked reader decodes those byte by byte with the scalar reader's limits.
    """

    __slots__ = ("b0", "b1", "checked", "short")

    def __init__(self, section: bytes, checked: bool):
        u = np.frombuffer(section, np.uint8)
        self.b0 = u.take
        self.b1 = u[1:].take
        self.checked = checked
        self.short = True  # whether the last checked read found only varints of one or two bytes

    def read(self, pos, max_bytes: int = 5, checked: bool = False):
        """(values int64, positions after them) of the varints (max_bytes 5) or varlongs (10) at `pos`."""
        w = _HIGH.take(self.b0(pos, mode="clip")) + self.b1(pos, mode="clip")
        size = _SIZE.take(w)
        if checked or self.checked:
            self.short = size.max() != _LONG
            if not self.short:
                return self._read_long(pos, max_bytes)
        return _VALUE.take(w), pos + size

    def _read_long(self, pos, max_bytes: int):
        b = self.b0(pos, mode="clip")
        raw = (b & 0x7F).astype(np.uint64)
        more = b >= 0x80
        after = pos + 1
        for j in range(1, max_bytes):
            if not more.any():
                break
            b = self.b0(pos + j, mode="clip")
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
    __slots__ = ("reader", "S", "E", "span", "offset", "timestamp", "key_start", "key_end", "key_len",
                 "value_start", "value_end", "value_len")


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
    pos = S + (np.searchsorted(_LENGTH_BOUNDS, span) + 2)
    # timestamps are checked even when optimistic: delete-horizon batches have long deltas throughout
    ts_delta, pos = read(pos, 10, checked=log_append_time is None)
    ts_short = reader.short
    offset_delta, pos = read(pos)
    f.key_len, f.key_start = read(pos)
    f.key_end = f.key_start + np.maximum(f.key_len, 0)
    f.value_len, f.value_start = read(f.key_end)
    f.value_end = f.value_start + np.maximum(f.value_len, 0)
    if (f.value_end > E).any():
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


def _slices(section: bytes, start, end, length) -> list:
    """section[start:end] per record, None where length < 0."""
    null = length < 0
    nulls = int(np.count_nonzero(null))
    if nulls == len(length):
        return [None] * nulls
    out = [section[a:b] for a, b in zip(start.tolist(), end.tolist())]
    if nulls:
        for i in np.flatnonzero(null).tolist():
            out[i] = None
    return out


def _attempt(read, section: bytes, count: int, *args):
    """read(section, bounds, *args, checked) optimistic first, then checked; None if both give up."""
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
                 log_append_time: int | None):
    """The key scan's columns for `count` records: (key list, offset, timestamp, value_size,
    span_start, span_size), the numeric ones int64 arrays; None to let the scalar scan decide."""
    return _attempt(_scan, section, count, base_offset, base_timestamp, log_append_time)


def _scan(section, bounds, base_offset, base_timestamp, log_append_time, checked):
    f = _fields(section, bounds, base_offset, base_timestamp, log_append_time, checked)
    keys = _slices(section, f.key_start, f.key_end, f.key_len)
    return keys, f.offset, f.timestamp, np.maximum(f.value_len, -1), f.S, f.span


# -- full decode ---------------------------------------------------------------------------------
def decode_section(section: bytes, count: int, base_offset: int, base_timestamp: int,
                   log_append_time: int | None) -> list[Record] | None:
    """Every record of the section, exactly as `decode_record` returns them one by one; None to
    let the scalar decoder decide (and raise)."""
    return _attempt(_decode, section, count, base_offset, base_timestamp, log_append_time)


def _decode(section, bounds, base_offset, base_timestamp, log_append_time, checked):
    f = _fields(section, bounds, base_offset, base_timestamp, log_append_time, checked, True)
    E = f.E
    header_count, pos = f.reader.read(f.value_end)
    if header_count.any():
        headers = _headers(section, f.reader, header_count, pos, E)
    else:
        if (pos != E).any():  # the record size must be consumed exactly
            raise _GiveUp
        headers = repeat(())
    keys = _slices(section, f.key_start, f.key_end, f.key_len)
    values = _slices(section, f.value_start, f.value_end, f.value_len)
    return list(map(tuple.__new__, repeat(Record, len(E)),
                    zip(f.offset.tolist(), f.timestamp, keys, values, headers)))


def _headers(section: bytes, reader: _Reader, header_count, pos, E) -> list:
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
        key_len, key_start = reader.read(pos)
        if key_len.min() < 0:
            raise _GiveUp
        key_end = key_start + key_len
        value_len, value_start = reader.read(key_end)
        pos = value_start + np.maximum(value_len, 0)
        if (pos > E).any():
            raise _GiveUp
        try:
            keys = [section[a:b].decode("utf-8") for a, b in zip(key_start.tolist(), key_end.tolist())]
        except UnicodeDecodeError:
            raise _GiveUp from None
        rounds.append((live, list(zip(keys, _slices(section, value_start, pos, value_len))), False))
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
