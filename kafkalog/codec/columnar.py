"""The v2 record layout (Kafka's DefaultRecord) read for all the records of a section at once with numpy.

This module holds what the three vectorised readers share: the full decode (`decode.decode_section`),
the key scan (`scan.scan_section`, `scan.scan_sections`) and the splice (`splice.read_spans`).

Only the record *starts* are inherently sequential: `_starts` finds them with a tight loop over
the length varints (one struct unpack and one table lookup per record). Every other field is then
read for all records at once: the two bytes at every record's position are gathered as one uint16
(a one-byte-stride view of the section), two lookup tables give each varint's value and size
(varints of three bytes or more are decoded byte by byte), and the positions advance together
(`SectionReader`, `read_fields`). `read_joined` reads the sections of several batches as one,
paying numpy's per-call cost once for all of them.

What the scalar readers (`records.decode_record`, `scan._scan_v2`) check record by record is checked
here on whole columns -- varints too long, lengths past the record's end, the header count, the
record size consumed exactly -- but the vectorised readers never raise and never decide what an
error is: whenever a section is not plainly well-formed (or needs what int64 cannot hold, or a
non-minimal length varint, or a header key that is not UTF-8), they raise `GiveUp` inside and
return None, and the caller runs its scalar reader, the reference, which raises the precise
KafkaLogError. For any section the result is therefore exactly the scalar reader's.

numpy's per-call overhead (about a microsecond, some 30 calls per batch) makes this a loss for a
handful of records, so each reader has thresholds below which it returns None at once.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import KafkaLogError
from .varint import read_varint, varint_size

# The vectorised readers' thresholds (decode.DECODE_THRESHOLD, scan.SCAN_THRESHOLD) are higher for
# records under this many bytes (one-byte lengths), on which the scalar readers are quickest.
SMALL_RECORD = 64  # bytes

# Smallest record the scan accepts: length, attributes, timestampDelta, offsetDelta, keyLength,
# valueLength, one byte each (the full decode also needs headerCount, so this bound is safe for both).
_MIN_RECORD = 6

if TYPE_CHECKING:  # one definition for the type checker: what the imports below find
    count_nonzero = np.count_nonzero
else:
    try:  # the cheapest "any" numpy has, without np.count_nonzero's Python wrapper
        from numpy._core.multiarray import count_nonzero  # numpy 2
    except ImportError:  # pragma: no cover
        try:
            from numpy.core.multiarray import count_nonzero  # numpy 1
        except ImportError:
            count_nonzero = np.count_nonzero
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_SHORT = 1 << 13  # a varint of one or two bytes decodes to |v| <= 8192


class GiveUp(Exception):
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
    #   None otherwise (three bytes or more, negative, non-minimal: the loop's slow case).
    i = np.arange(65536, dtype=np.int64)
    b0, b1 = i & 0xFF, i >> 8
    one, two = b0 < 0x80, (b0 >= 0x80) & (b1 < 0x80)
    z = np.where(one, b0, (b0 & 0x7F) | (b1 << 7))
    value = np.where(one | two, (z >> 1) ^ -(z & 1), 0)
    size = np.where(one, 1, np.where(two, 2, _LONG))
    canonical = one | (two & (b1 != 0))
    advance = np.where(canonical & (value >= 0), size + value, -1)
    return [a if a >= 0 else None for a in advance.tolist()], value, size


_ADVANCE, _VALUE, _SIZE = _build_tables()
_U16 = struct.Struct("<H").unpack_from
# A record whose length varint and body together span `a` bytes has a length varint of
# 1 + searchsorted(_LENGTH_BOUNDS, a) bytes (lengths are canonical here, see _starts).
_LENGTH_BOUNDS = np.array([1 + 63, 2 + 8191, 3 + (1 << 20) - 1, 4 + (1 << 27) - 1], np.int64)


def _starts(section: bytes, count: int):
    """int64 array of the positions of the `count` records and of the end of the last: strictly
    increasing from 0 to len(section). Gives up on a negative, non-minimal or overrunning length."""
    if count * _MIN_RECORD > len(section):
        raise GiveUp
    out = [0]
    append = out.append
    advance = _ADVANCE
    u16 = _U16
    pos = 0
    try:
        try:
            for _ in repeat(None, count):
                pos += advance[u16(section, pos)[0]]
                append(pos)
        except TypeError:  # a None advance: lengths of three bytes or more (records of 8 KiB and more)
            for _ in repeat(None, count + 1 - len(out)):  # the rest, from that record on, with care
                a = advance[u16(section, pos)[0]]
                if a is None:
                    length, body = read_varint(section, pos)
                    if length < 0 or body - pos != varint_size(length):
                        raise GiveUp from None  # negative or non-minimal
                    a = body - pos + length
                pos += a
                append(pos)
    except (struct.error, KafkaLogError):  # a length varint at or past the end
        raise GiveUp from None
    if pos != len(section):
        raise GiveUp
    return np.fromiter(out, np.int64, count + 1)


def known_starts(section: bytes, count: int, spans) -> np.ndarray:
    """`_starts` from each record's span (int64 array) as an earlier read found it, without a Python
    step per record: what `_starts` would find, checked on all records at once (each length varint
    minimal, of one to three bytes, giving its record's span exactly); else it finds them itself."""
    bounds = np.zeros(len(spans) + 1, np.int64)
    np.cumsum(spans, out=bounds[1:])
    if len(spans) != count or bounds[-1] != len(section) or count_nonzero(spans < _MIN_RECORD):
        return _starts(section, count)
    reader = SectionReader(section, checked=True)
    start = bounds[:-1]
    try:
        length, body = reader.read(start, checked=True)
    except GiveUp:  # a varint too long where a record should start: not where the records start
        return _starts(section, count)
    if (
        count_nonzero(length != bounds[1:] - body)
        or count_nonzero(body - start != _LENGTH_BOUNDS.searchsorted(spans) + 1)
        or not minimal(reader, start, body)
    ):
        return _starts(section, count)
    return bounds


class SectionReader:
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
            raise GiveUp from None
        size = _SIZE.take(w)
        if checked or self.checked:
            self.short = not count_nonzero(size == _LONG)
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
                raise GiveUp  # more than 64 bits: Python's integers would keep them, int64 cannot
            raw |= (group << np.uint64(7 * j)) * more
            after += more
            more &= b >= 0x80
        else:
            if more.any():
                raise GiveUp  # too long
        return (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64), after


def _add_base(base: int, deltas):
    """base + deltas as int64, or give up where a sum would leave int64."""
    if deltas.size and (base + int(deltas.min()) < INT64_MIN or base + int(deltas.max()) > INT64_MAX):
        raise GiveUp
    return deltas + base


class Fields:
    """What every reader needs of each record, up to its value (positions index the section)."""

    __slots__ = (
        "reader",
        "S",
        "E",
        "span",
        "offset",
        "timestamp",
        "ts_start",
        "ts_delta",
        "ts_end",
        "offset_delta",
        "key_len_start",
        "key_start",
        "key_end",
        "key_len",
        "value_start",
        "value_end",
        "value_len",
        "last_header",
    )
    reader: SectionReader
    S: np.ndarray  # record starts
    E: np.ndarray  # record ends
    span: np.ndarray
    offset: np.ndarray
    timestamp: Any  # an int64 array, or a list with `timestamps_as_list`
    ts_start: np.ndarray
    ts_delta: np.ndarray
    ts_end: np.ndarray
    offset_delta: np.ndarray
    key_len_start: np.ndarray
    key_start: np.ndarray
    key_end: np.ndarray
    key_len: np.ndarray
    value_start: np.ndarray
    value_end: np.ndarray
    value_len: np.ndarray
    last_header: tuple  # the key scan's (size, value) of a named header (`last_header`), when asked for


def read_fields(
    section: bytes,
    bounds,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    checked: bool,
    timestamps_as_list: bool = False,
) -> Fields:
    """Read every record up to its value and check that each value ends inside its record (with
    positions that only grow, so does everything before it)."""
    f = Fields()
    f.reader = reader = SectionReader(section, checked)
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
    if count_nonzero(f.value_end > E):
        raise GiveUp
    if INT64_MIN + (1 << 35) <= base_offset <= INT64_MAX - (1 << 35):  # |offset delta| < 2**35
        f.offset = offset_delta + base_offset
    else:
        f.offset = _add_base(base_offset, offset_delta)
    count = len(S)
    if log_append_time is not None:
        f.timestamp = [log_append_time] * count if timestamps_as_list else np.full(count, log_append_time, np.int64)
    else:
        if ts_short and -INT64_MAX + _SHORT <= base_timestamp <= INT64_MAX - _SHORT:
            f.timestamp = ts_delta + base_timestamp
        else:
            f.timestamp = _add_base(base_timestamp, ts_delta)
        if timestamps_as_list:
            f.timestamp = f.timestamp.tolist()
    return f


def attempt(read, section: bytes, count: int, *args, spans=None):
    """read(section, bounds, *args, checked) optimistic first, then checked; None if both give up.
    `spans`: each record's span as an earlier read of the same bytes found it (`known_starts`), or None."""
    if count < 1:
        return None
    try:
        bounds = _starts(section, count) if spans is None else known_starts(section, count, spans)
        try:
            return read(section, bounds, *args, False)
        except GiveUp:
            return read(section, bounds, *args, True)
    except GiveUp:
        return None


def minimal(reader: SectionReader, start, end) -> bool:
    """Whether the varints from `start` to `end` are all minimal: one byte, or a last byte that is not 0."""
    return not count_nonzero((end - start > 1) & (reader.bytes.take(end - 1) == 0))


def headers_fit(section: bytes, reader: SectionReader, pos, E, *, as_kafka_writes: bool) -> bool:
    """Whether every record's headers, from `pos` on, end exactly at its end `E`; with
    `as_kafka_writes`, also whether they are written as Kafka writes them (minimal varints, UTF-8
    keys)."""
    strict = as_kafka_writes
    count, after = reader.read(pos, checked=True)
    if count_nonzero(count < 0) or count_nonzero(count > E - after) or (strict and not minimal(reader, pos, after)):
        return False
    pos = after
    while True:  # round r reads header r of every record that has more than r headers
        done = count == 0
        if pos[done].tobytes() != E[done].tobytes():
            return False
        if count_nonzero(done) == len(done):
            return True
        live = ~done
        count, pos, E = count[live] - 1, pos[live], E[live]
        key_len, key_start = reader.read(pos, checked=True)
        if count_nonzero(key_len < 0) or (strict and not minimal(reader, pos, key_start)):
            return False
        key_end = key_start + key_len
        if count_nonzero(key_end > E):
            return False
        value_len, value_start = reader.read(key_end, checked=True)
        if count_nonzero(value_len < -1) or (strict and not minimal(reader, key_end, value_start)):
            return False
        pos = value_start + np.maximum(value_len, 0)
        if count_nonzero(pos > E):
            return False
        if not strict:
            continue
        try:
            for a, b in zip(key_start.tolist(), key_end.tolist()):
                section[a:b].decode("utf-8")
        except UnicodeDecodeError:
            return False


def last_header(reader: SectionReader, pos, E, name: bytes):
    """Each record's last header named `name` (UTF-8), its headers read from `pos` on: (size, value),
    int64 arrays: the size of that header's value (-2 where the record has none, -1 for a null value)
    and, where the size is 8, the value as a big-endian signed long (0 elsewhere). Later headers
    overwrite earlier ones, as the rounds read them in order. None unless every record's headers end
    exactly at its end `E` (as `headers_fit` without `as_kafka_writes`)."""
    n = len(pos)
    size = np.full(n, -2, np.int64)
    start = np.zeros(n, np.int64)
    rows = np.arange(n)
    wanted = np.frombuffer(name, np.uint8)
    count, pos = reader.read(pos, checked=True)
    if count_nonzero(count < 0) or count_nonzero(count > E - pos):
        return None
    while True:  # round r reads header r of every record that has more than r headers
        done = count == 0
        if pos[done].tobytes() != E[done].tobytes():
            return None
        if count_nonzero(done) == len(done):
            break
        live = ~done
        count, pos, E, rows = count[live] - 1, pos[live], E[live], rows[live]
        key_len, key_start = reader.read(pos, checked=True)
        key_end = key_start + key_len
        if count_nonzero(key_len < 0) or count_nonzero(key_end > E):
            return None
        value_len, value_start = reader.read(key_end, checked=True)
        pos = value_start + np.maximum(value_len, 0)
        if count_nonzero(value_len < -1) or count_nonzero(pos > E):
            return None
        match = np.flatnonzero(key_len == len(wanted))
        if len(match) and len(wanted):
            key = reader.bytes.take(key_start[match, None] + np.arange(len(wanted)))
            match = match[(key == wanted).all(axis=1)]
        size[rows[match]] = value_len[match]
        start[rows[match]] = value_start[match]
    value = np.zeros(n, np.int64)
    eight = size == 8
    if count_nonzero(eight):
        value[eight] = reader.bytes.take(start[eight, None] + np.arange(8)).copy().view(">i8").ravel()
    return size, value


# -- several sections read as one ----------------------------------------------------------------
_SAFE = 1 << 62  # a sum or difference of two values below this stays inside int64


def far_from_int64_limits(values) -> bool:
    """Whether every value is below 2**62 in magnitude: a sum or difference of two stays inside int64."""
    return not count_nonzero((values <= -_SAFE) | (values >= _SAFE))


def read_joined(
    read,
    sections: Sequence[bytes],
    counts: Sequence[int],
    base_offsets: Sequence[int],
    base_timestamps: Sequence[int],
    log_append_times: Sequence[int | None],
    spans=None,
):
    """Read several sections joined as one with `read` (a `read_fields` of bases 0, through `attempt`):
    (the joined section, fields, where each section starts in it, each record's section, offsets,
    timestamps), or None where the pass gives up, a count does not fit its section, or a base and a
    delta come near int64's limits. `spans`: as `attempt` takes them, of all the sections' records."""
    section = b"".join(sections)
    f = attempt(read, section, sum(counts), spans=spans)
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


def _rebase(deltas, bases: Sequence[int], batch):
    """deltas + their batch's base, or None near int64's limits (the decoder handles those)."""
    base_array = np.array(bases, np.int64)
    if not (far_from_int64_limits(base_array) and far_from_int64_limits(deltas)):
        return None
    return deltas + base_array[batch]


def _section_starts(f: Fields, sections: Sequence[bytes], counts: Sequence[int]):
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
