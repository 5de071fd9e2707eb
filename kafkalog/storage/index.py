"""The offset index (.index) and time index (.timeindex) of a segment, and how Kafka builds them.

Kafka's OffsetIndex and TimeIndex, and building both for a finished segment as LogSegment.recover
does. Entries are held with absolute offsets; the files store offsets relative to the segment's base
offset. Parsing accepts whatever Kafka's reader accepts (it takes every whole entry in the file);
`sanity_check` reports what Kafka's sanityCheck reports, plus entries that do not increase.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

from ..errors import CorruptBatchError, CorruptIndexError
from .naming import INT32_MAX

DEFAULT_INDEX_INTERVAL_BYTES = 4096
NO_TIMESTAMP = -1


class LogSegmentOffsetOverflowError(CorruptBatchError):
    """A batch whose last offset is outside [base offset, base offset + 2^31-1] of its segment.

    Kafka splits such (legacy) segments instead of truncating them, so callers need to tell
    this apart from other corruption.
    """


class OffsetPosition(NamedTuple):
    """An offset-index entry: the batch starting at byte `position` has last offset `offset`."""

    offset: int
    position: int


class TimestampOffset(NamedTuple):
    """A time-index entry: the largest timestamp up to and including `offset` is `timestamp`."""

    timestamp: int
    offset: int


class BatchSummary(NamedTuple):
    """What index building needs to know about one batch of a `.log` file."""

    position: int
    size: int
    last_offset: int
    max_timestamp: int


def relative_offset(offset: int, base_offset: int, *, file: str | None = None, position: int | None = None) -> int:
    """`offset - base_offset`, refused unless it fits the index's int32 (Kafka: ensureOffsetInRange)."""
    relative = offset - base_offset
    if not 0 <= relative <= INT32_MAX:
        raise LogSegmentOffsetOverflowError(
            f"offset {offset} is not in [{base_offset}, {base_offset + INT32_MAX}], the range a segment "
            f"based at {base_offset} can index",
            file=file,
            position=position,
            offset=offset,
        )
    return relative


@dataclass
class _Index:
    """What the two fixed-size-entry indexes share: the file layout and its length rules."""

    base_offset: int
    entries: list = field(default_factory=list)
    # Capacity in entries (Kafka: segment.index.bytes // entry size); None for a finished index.
    max_entries: int | None = None
    file: str | None = field(default=None, compare=False)
    # Bytes after the last whole entry of the file this was read from. Kafka's reader ignores them
    # and its sanityCheck reports them; `to_bytes` drops them.
    trailing_bytes: int = 0

    ENTRY: ClassVar[struct.Struct]

    @staticmethod
    def _entry(base_offset: int, raw: tuple) -> Any:
        """An entry from its unpacked fields (each index defines it)."""
        raise NotImplementedError

    def _raw(self, entry: Any, at: int) -> bytes:
        """An entry's bytes, for entry slot `at` (each index defines it)."""
        raise NotImplementedError

    @classmethod
    def from_bytes(cls, data: bytes, base_offset: int, file: str | None = None):
        """Read every whole entry, as Kafka does when it opens an existing index file."""
        whole = len(data) - len(data) % cls.ENTRY.size
        entries = [cls._entry(base_offset, raw) for raw in cls.ENTRY.iter_unpack(memoryview(data)[:whole])]
        return cls(base_offset, entries, file=file, trailing_bytes=len(data) - whole)

    def to_bytes(self) -> bytes:
        """The file content, trimmed to exactly the entries (never a preallocated zero tail)."""
        return b"".join(self._raw(entry, i * self.ENTRY.size) for i, entry in enumerate(self.entries))

    @property
    def size_in_bytes(self) -> int:
        return len(self.entries) * self.ENTRY.size

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ≥ `offset`."""
        self.entries = [entry for entry in self.entries if entry.offset < offset]

    def _relative(self, offset: int, position: int) -> int:
        return relative_offset(offset, self.base_offset, file=self.file, position=position)

    def _error(self, message: str, index: int, offset: int | None = None) -> CorruptIndexError:
        return CorruptIndexError(message, file=self.file, position=index * self.ENTRY.size, offset=offset)

    def _check_length(self) -> None:
        if self.trailing_bytes:
            length = self.size_in_bytes + self.trailing_bytes
            raise self._error(
                f"index file is {length} bytes, not a multiple of the {self.ENTRY.size}-byte "
                f"entry size: {self.trailing_bytes} bytes of a partial entry follow the last "
                "whole entry",
                len(self.entries),
            )

    def _check_zero_tail(self) -> None:
        """Report a preallocated tail, which Kafka leaves only in the index of an active segment."""
        zero = self._entry(self.base_offset, (0, 0))
        first_zero = len(self.entries)
        while first_zero > 0 and self.entries[first_zero - 1] == zero:
            first_zero -= 1
        # A single zero-valued entry can be genuine; a run that breaks the ordering is a tail.
        if len(self.entries) - first_zero > 1 or 0 < first_zero < len(self.entries):
            raise self._error(
                f"preallocated zero tail: entries {first_zero}..{len(self.entries) - 1} are all zero bytes; "
                "Kafka trims an index file when its segment becomes inactive or on clean shutdown, so this "
                "file belongs to an active segment or a broker that stopped uncleanly",
                first_zero,
            )


@dataclass
class OffsetIndex(_Index):
    """A segment's `.index`: sparse `OffsetPosition` entries, increasing in offset and position."""

    entries: list[OffsetPosition] = field(default_factory=list)

    ENTRY: ClassVar[struct.Struct] = struct.Struct(">ii")  # relative offset, position

    @staticmethod
    def _entry(base_offset: int, raw: tuple) -> OffsetPosition:
        return OffsetPosition(base_offset + raw[0], raw[1])

    def _raw(self, entry: OffsetPosition, at: int) -> bytes:
        return self.ENTRY.pack(self._relative(entry.offset, at), entry.position)

    @property
    def last_offset(self) -> int:
        """The last entry's offset, or the base offset when empty (Kafka: OffsetIndex.lastOffset)."""
        return self.entries[-1].offset if self.entries else self.base_offset

    def is_full(self) -> bool:
        return self.max_entries is not None and len(self.entries) >= self.max_entries

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the greatest offset ≤ `target_offset`, else (base offset, position 0).

        The reader scans batches forward from the returned position.
        """
        i = bisect_right(self.entries, target_offset, key=lambda entry: entry.offset)
        return self.entries[i - 1] if i else OffsetPosition(self.base_offset, 0)

    def append(self, offset: int, position: int) -> None:
        at = len(self.entries)
        if self.is_full():
            raise self._error(
                f"cannot append ({offset}, {position}): the index is full at {self.max_entries} entries", at, offset
            )
        if self.entries and offset <= self.entries[-1].offset:
            raise self._error(
                f"cannot append offset {offset}: it is no larger than the last offset {self.entries[-1].offset}",
                at,
                offset,
            )
        if self.entries and position <= self.entries[-1].position:
            raise self._error(
                f"cannot append position {position}: it is no larger than the last position "
                f"{self.entries[-1].position}",
                at,
                offset,
            )
        if not 0 <= position <= INT32_MAX:
            raise self._error(f"position {position} does not fit an int32", at, offset)
        self._relative(offset, at * self.ENTRY.size)
        self.entries.append(OffsetPosition(offset, position))

    def sanity_check(self) -> None:
        """Raise CorruptIndexError where Kafka's OffsetIndex.sanityCheck would, or if entries do not increase."""
        self._check_zero_tail()
        if self.entries and self.last_offset < self.base_offset:
            raise self._error(
                f"last offset {self.last_offset} is less than the base offset {self.base_offset}",
                len(self.entries) - 1,
                self.last_offset,
            )
        self._check_length()
        for i in range(1, len(self.entries)):
            previous, entry = self.entries[i - 1], self.entries[i]
            if entry.offset <= previous.offset or entry.position <= previous.position:
                raise self._error(
                    f"entry {i} {tuple(entry)} does not follow entry {i - 1} {tuple(previous)}: "
                    "offsets and positions must both increase",
                    i,
                    entry.offset,
                )


@dataclass
class TimeIndex(_Index):
    """A segment's `.timeindex`: `TimestampOffset` entries, timestamps strictly increasing."""

    entries: list[TimestampOffset] = field(default_factory=list)

    ENTRY: ClassVar[struct.Struct] = struct.Struct(">qi")  # timestamp, relative offset

    @staticmethod
    def _entry(base_offset: int, raw: tuple) -> TimestampOffset:
        return TimestampOffset(raw[0], base_offset + raw[1])

    def _raw(self, entry: TimestampOffset, at: int) -> bytes:
        return self.ENTRY.pack(entry.timestamp, self._relative(entry.offset, at))

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or (-1, base offset) when empty (Kafka: TimeIndex.lastEntry)."""
        return self.entries[-1] if self.entries else TimestampOffset(NO_TIMESTAMP, self.base_offset)

    def is_full(self) -> bool:
        # The last slot is kept for the final entry written when the segment becomes inactive.
        return self.max_entries is not None and len(self.entries) >= self.max_entries - 1

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the greatest timestamp ≤ `target_timestamp`, else (-1, base offset)."""
        i = bisect_right(self.entries, target_timestamp, key=lambda entry: entry.timestamp)
        return self.entries[i - 1] if i else TimestampOffset(NO_TIMESTAMP, self.base_offset)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) if the timestamp is larger than the last entry's (Kafka's maybeAppend).

        An equal timestamp is ignored, so is any timestamp ≤ -1 on an empty index.
        """
        at = len(self.entries)
        if not skip_full_check and self.is_full():
            assert self.max_entries is not None  # is_full() says so
            raise self._error(
                f"cannot append ({timestamp}, {offset}): the time index is full at "
                f"{self.max_entries - 1} entries (the last slot is kept for the final entry)",
                at,
                offset,
            )
        last = self.last_entry
        if self.entries and offset < last.offset:
            raise self._error(
                f"cannot append offset {offset}: it is smaller than the last entry's offset {last.offset}", at, offset
            )
        if self.entries and timestamp < last.timestamp:
            raise self._error(
                f"cannot append timestamp {timestamp}: it is smaller than the last entry's timestamp {last.timestamp}",
                at,
                offset,
            )
        if timestamp > last.timestamp:
            self._relative(offset, at * self.ENTRY.size)
            self.entries.append(TimestampOffset(timestamp, offset))

    def sanity_check(self) -> None:
        """Raise CorruptIndexError where Kafka's TimeIndex.sanityCheck would, or if entries do not increase."""
        self._check_zero_tail()
        if self.entries:
            first, last = self.entries[0], self.entries[-1]
            if last.timestamp < first.timestamp:
                raise self._error(
                    f"last timestamp {last.timestamp} is less than the first timestamp {first.timestamp}",
                    len(self.entries) - 1,
                    last.offset,
                )
            if last.offset < self.base_offset:
                raise self._error(
                    f"last offset {last.offset} is less than the base offset {self.base_offset}",
                    len(self.entries) - 1,
                    last.offset,
                )
        self._check_length()
        for i in range(1, len(self.entries)):
            previous, entry = self.entries[i - 1], self.entries[i]
            if entry.timestamp <= previous.timestamp or entry.offset < previous.offset:
                raise self._error(
                    f"entry {i} {tuple(entry)} does not follow entry {i - 1} {tuple(previous)}: "
                    "timestamps must increase and offsets must not decrease",
                    i,
                    entry.offset,
                )


class IndexBuilder:
    """Builds a finished segment's .index and .timeindex batch by batch, exactly as Kafka's
    LogSegment.recover does, so the files are byte-identical to ones Kafka rebuilds.

    Batches are anything with `position`, `size`, `last_offset` and `max_timestamp` (a BatchSummary
    or a decoded batch), appended in file order starting at byte 0.
    """

    def __init__(
        self, base_offset: int, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES, file: str | None = None
    ):
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.file = file  # the .log file, named in errors
        self.offset_index = OffsetIndex(base_offset)
        self.time_index = TimeIndex(base_offset)
        self._last_indexed_position = 0
        self._next_position = 0
        self._last_offset: int | None = None
        self._max_timestamp = TimestampOffset(NO_TIMESTAMP, -1)  # Kafka's TimestampOffset.UNKNOWN

    def append(self, batch) -> None:
        if batch.position != self._next_position:
            raise ValueError(
                f"batch at byte {batch.position} does not start where the previous batch ended "
                f"(byte {self._next_position}); batches must cover the .log file in order"
            )
        relative_offset(batch.last_offset, self.base_offset, file=self.file, position=batch.position)
        if self._last_offset is not None and batch.last_offset <= self._last_offset:
            raise CorruptBatchError(
                f"batch last offset {batch.last_offset} is not above the previous batch's {self._last_offset}",
                file=self.file,
                position=batch.position,
                offset=batch.last_offset,
            )
        self._last_offset = batch.last_offset
        # Strict '>': among batches with the same max timestamp the earliest one is remembered.
        if batch.max_timestamp > self._max_timestamp.timestamp:
            self._max_timestamp = TimestampOffset(batch.max_timestamp, batch.last_offset)
        # Strict '>': a batch exactly index_interval_bytes after the last indexed one is not indexed,
        # and the batch at position 0 never is.
        if batch.position - self._last_indexed_position > self.index_interval_bytes:
            self.offset_index.append(batch.last_offset, batch.position)
            self.time_index.maybe_append(*self._max_timestamp)
            self._last_indexed_position = batch.position
        self._next_position = batch.position + batch.size

    def finish(self) -> tuple[OffsetIndex, TimeIndex]:
        """Add the final time-index entry (the segment's max timestamp) and return both indexes."""
        self.time_index.maybe_append(*self._max_timestamp, skip_full_check=True)
        return self.offset_index, self.time_index


def build_indexes(
    batches: Iterable,
    base_offset: int,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    file: str | None = None,
) -> tuple[OffsetIndex, TimeIndex]:
    """The .index and .timeindex Kafka's segment recovery builds for these batches (see IndexBuilder)."""
    builder = IndexBuilder(base_offset, index_interval_bytes, file)
    for batch in batches:
        builder.append(batch)
    return builder.finish()
