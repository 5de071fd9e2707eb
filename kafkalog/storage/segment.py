"""A log segment: its `.log` file and the index files beside it.

Batches are read in chunks, never the whole file at once, so a 1 GiB segment costs one chunk of
memory. Positions handed out are positions in the `.log` file.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from .. import tuning
from ..codec.batch import MAGIC, MAGIC_OFFSET, RECORD_BATCH_OVERHEAD, RecordBatch, RecordBatchHeader
from ..codec.compression import Codec
from ..codec.reader import Batch, BatchReader, TruncatedTail, header_first_offset
from ..errors import CorruptBatchError, KafkaLogError, TruncatedDataError
from ..rules.aborted_txn import AbortedTxn
from ..rules.segment_meta import SegmentMeta
from .fs import FileEntry, LogFileSystem
from .index import BatchSummary, OffsetIndex, OffsetPosition, TimeIndex
from .naming import INT64_MAX
from .txnindex import TransactionIndex

FIRST_HEADER_BYTES = 18  # a v2 header up to its magic byte, a legacy one up to its attributes


class SegmentTail(NamedTuple):
    """The batches after the last offset-index entry: the segment's last offset (None: no batch)
    and the largest timestamp among them (None: none >= 0)."""

    last_offset: int | None
    max_timestamp: int | None


@dataclass(eq=False)
class LogSegment:
    """One segment of a partition. `files` maps a suffix ('.log', '.index', '.timeindex',
    '.txnindex') to the file that is there; only '.log' is required. `next_base_offset`: the next
    segment's (None for the partition's last, the active segment; a lone file is taken as one).

    Everything read of a segment's metadata (index tails, the tail of batch headers, the first
    batch) is read once and kept: the cleaner, retention, purge, validation and the scan planner
    all ask the same object."""

    fs: LogFileSystem
    dir: str
    base_offset: int
    files: dict[str, FileEntry] = field(default_factory=dict)
    next_base_offset: int | None = None
    topic: str = ""
    partition: int = -1

    @property
    def is_active(self) -> bool:
        """The only segment that may end in a torn batch, and whose offsets have no upper bound."""
        return self.next_base_offset is None

    @property
    def log(self) -> FileEntry:
        return self.files[".log"]

    @property
    def log_path(self) -> str:
        return self.log.path

    @property
    def size(self) -> int:
        return self.log.size

    @property
    def mtime_ms(self) -> int:
        return self.log.mtime_ms

    def path(self, suffix: str) -> str:
        entry = self.files.get(suffix)
        if entry is not None:
            return entry.path
        return self.fs.join(self.dir, f"{self.base_offset:020d}{suffix}")

    def file_size(self, suffix: str) -> int:
        entry = self.files.get(suffix)
        return 0 if entry is None else entry.size

    def read(self, suffix: str) -> bytes | None:
        """The bytes of one of the segment's files, or None where it is absent."""
        entry = self.files.get(suffix)
        return None if entry is None else self.fs.read_bytes(entry.path)

    def aborted_txns(self) -> list[AbortedTxn]:
        """The entries of the segment's `.txnindex` (none without the file)."""
        data = self.read(".txnindex")
        return TransactionIndex.from_bytes(data, self.base_offset, file=self.path(".txnindex")).entries if data else []

    # -- metadata, each read once ----------------------------------------------------------------------

    def meta(self, *, with_last_offset: bool = True, with_first_batch: bool = True) -> SegmentMeta:
        """The segment's metadata record. The last offset (the batch headers after the last offset
        index entry) and the first batch's timestamp (its first batch) are read only when asked for."""
        largest = self.time_index_max_timestamp()
        from_index = largest is not None and largest >= 0
        return SegmentMeta(
            self.base_offset,
            self.size,
            largest if from_index and largest is not None else self.mtime_ms,
            self.last_offset() if with_last_offset else None,
            from_index,
            self.mtime_ms,
            self.first_batch_timestamp() if with_first_batch else INT64_MAX,
            self.file_size(".index"),
            self.file_size(".timeindex"),
        )

    @cached_property
    def offset_index_entries(self) -> list[OffsetPosition]:
        """The usable entries of the `.index` ([] without one): see `usable_offset_entries`."""
        data = self.read(".index")
        if not data:
            return []
        index = OffsetIndex.from_bytes(data, self.base_offset, file=self.path(".index"))
        return usable_offset_entries(index.entries, self.size)

    @cached_property
    def last_offset_index_entry(self) -> OffsetPosition | None:
        """The last usable offset-index entry: a batch boundary after which only a few batches
        follow. Only the index's last 8 bytes are read, unless they are a preallocated zero tail
        (an active segment after an unclean stop) or not usable, when the whole index is."""
        entry = self.files.get(".index")
        size = OffsetIndex.ENTRY.size
        if entry is None or entry.size < size:
            return None
        tail = self.fs.read_range(entry.path, entry.size - entry.size % size - size, size)
        relative, position = OffsetIndex.ENTRY.unpack(tail)
        if any(tail) and 0 < position < self.size and relative >= 0:
            return OffsetPosition(self.base_offset + relative, position)
        return self.offset_index_entries[-1] if self.offset_index_entries else None

    @cached_property
    def _time_index_max(self) -> int | None:
        entry = self.files.get(".timeindex")
        size = TimeIndex.ENTRY.size
        if entry is None or entry.size < size:
            return None
        whole = entry.size - entry.size % size
        tail = self.fs.read_range(entry.path, whole - size, size)
        if any(tail):
            return TimeIndex.ENTRY.unpack(tail)[0]
        entries = TimeIndex.from_bytes(self.fs.read_bytes(entry.path)[:whole], self.base_offset).entries
        return max((e.timestamp for e in entries), default=None)

    def time_index_max_timestamp(self) -> int | None:
        """The time index's last timestamp, or None without entries. A preallocated zero tail (an
        active segment after an unclean stop) is skipped by taking the largest entry."""
        return self._time_index_max

    def largest_timestamp(self) -> int:
        """Kafka's LogSegment.largestTimestamp: the time index's, else the `.log` file's mtime."""
        largest = self.time_index_max_timestamp()
        return largest if largest is not None and largest >= 0 else self.mtime_ms

    @cached_property
    def _first_batch_timestamp(self) -> int:
        for _, batch in self.reader(chunk_size=tuning.FIRST_BATCH_CHUNK_BYTES, headers_only=True):
            return batch.max_timestamp if batch.max_timestamp >= 0 else INT64_MAX
        return INT64_MAX

    def first_batch_timestamp(self) -> int:
        """Kafka's LogSegment.getFirstBatchTimestamp: the first batch's max timestamp, INT64_MAX for an
        empty segment or a first batch without a timestamp."""
        return self._first_batch_timestamp

    @cached_property
    def _first_offset(self) -> int | None:
        return (
            header_first_offset(self.fs.read_range(self.log_path, 0, min(self.size, FIRST_HEADER_BYTES)))
            if self.size
            else None
        )

    def first_offset(self) -> int | None:
        """The first batch's first offset from its header alone (None: no batch, or a legacy
        compressed wrapper, which names only its last offset)."""
        return self._first_offset

    @cached_property
    def tail(self) -> SegmentTail:
        """The batches after the last offset-index entry, read through the batch reader; the whole
        file is walked when there is no usable entry or the entry is not a batch boundary."""
        if self.size == 0:
            return SegmentTail(None, None)
        entry = self.last_offset_index_entry
        start = entry.position if entry is not None else 0
        for attempt in (start, 0) if start else (0,):
            last = max_ts = None
            try:
                # read whole: a tail is about one index interval, and a header-only read, which starts
                # small, would read a small batch's first bytes twice
                reader = SegmentReader(self.fs, self.log_path, self.size, attempt, tuning.TAIL_CHUNK_BYTES)
                for _, batch in reader:
                    last = batch.last_offset if last is None else max(last, batch.last_offset)
                    if batch.max_timestamp >= 0:
                        max_ts = batch.max_timestamp if max_ts is None else max(max_ts, batch.max_timestamp)
            except KafkaLogError:
                if attempt == 0:
                    raise
                continue  # an index entry that is not a batch boundary: walk the whole file
            if last is not None or attempt == 0:
                return SegmentTail(last, max_ts)
        return SegmentTail(None, None)

    @cached_property
    def _last_offset(self) -> int | None:
        return self.tail.last_offset

    def last_offset(self) -> int | None:
        """The last offset of the last batch (None: no batch): the tail's, unless `scanned` told it."""
        return self._last_offset

    def scanned(self, last_offset: int | None) -> None:
        """The last offset as a reader of the whole `.log` found it (a scan's executors, which read
        every batch: spark/scan.SEGMENT_END): `last_offset` and `next_offset` then read no tail."""
        self.__dict__["_last_offset"] = last_offset

    def next_offset(self) -> int:
        """Kafka's LogSegment.readNextOffset: the offset after the last batch, the base offset when the
        segment holds none."""
        last = self.last_offset()
        return self.base_offset if last is None else last + 1

    @property
    def offset_bounds(self) -> tuple[int, int | None]:
        """[low, high) holding every offset of the segment, from what has been read of it (high None:
        unbounded). Nothing is read here."""
        first = self.__dict__.get("_first_offset")
        low = self.base_offset if first is None else first
        tail = self.__dict__.get("tail")
        last = self.__dict__.get("_last_offset", None if tail is None else tail.last_offset)
        if last is not None:
            return low, last + 1
        return low, self.next_base_offset

    def reader(
        self, start: int = 0, end: int | None = None, chunk_size: int | None = None, *, headers_only: bool = False
    ) -> SegmentReader:
        end = self.size if end is None else end
        return SegmentReader(self.fs, self.log_path, end, start, chunk_size, headers_only=headers_only)

    def batches(
        self, start: int = 0, end: int | None = None, *, headers_only: bool = False
    ) -> Iterator[tuple[int, Batch]]:
        """(file position, batch) for each whole batch, checked as SegmentReader checks a segment
        that must read whole: offsets in order and within the segment's range, and no torn tail
        but in the active segment (Kafka's readers ignore one there). A batch's own `position`
        is in the chunk it was read from, not in the file. `headers_only`: see SegmentReader."""
        return iter(
            SegmentReader(
                self.fs,
                self.log_path,
                self.size if end is None else end,
                start,
                torn_tail_ok=self.is_active or end is not None,
                offset_range=(self.base_offset, self.next_base_offset),
                headers_only=headers_only,
            )
        )

    def batch_at(self, position: int) -> Batch:
        """The whole batch at `position` (a batch boundary: a scan's row, an index entry), read alone,
        checked as `batches()` checks it: a read of tuning.FIRST_BATCH_CHUNK_BYTES, a larger batch whole."""
        reader = SegmentReader(
            self.fs,
            self.log_path,
            self.size,
            position,
            tuning.FIRST_BATCH_CHUNK_BYTES,
            torn_tail_ok=self.is_active,
            offset_range=(self.base_offset, self.next_base_offset),
        )
        found = next(iter(reader), None)
        if found is None:
            raise CorruptBatchError("no whole batch starts here", file=self.log_path, position=position)
        return found[1]

    def position_of(self, offset: int) -> int:
        """Kafka's OffsetIndex.lookup: the byte of the last usable offset-index entry at or below
        `offset` (0 where none is), a batch boundary before every batch holding `offset` or later.
        At or past the last entry (a replay from a snapshot at the log end), the whole index is not read."""
        last = self.last_offset_index_entry
        if last is None or last.offset <= offset:
            return 0 if last is None else last.position
        at = bisect_right(self.offset_index_entries, offset, key=lambda entry: entry.offset)
        return self.offset_index_entries[at - 1].position if at else 0

    def batches_from(self, offset: int, *, headers_only: bool = False) -> Iterator[tuple[int, Batch]]:
        """`batches()` from where Kafka's LogSegment.read(offset) starts (`position_of`): the batches
        before it hold only offsets below `offset`. An index entry that does not lead to a batch
        holding an offset at or below `offset` (a damaged index) is not trusted: then every batch."""
        position = self.position_of(offset)
        if position:
            batches = self.batches(position, headers_only=headers_only)
            try:
                first = next(batches, None)
            except KafkaLogError:
                first = None  # not a batch boundary
            if first is not None and _lowest_offset(first[1]) <= offset:
                yield first
                yield from batches
                return
        yield from self.batches(headers_only=headers_only)

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> int | None:
        """Kafka's LogSegment.findOffsetByTimestamp: the first offset at or above `starting_offset`
        whose record's timestamp is at least `timestamp` (None: no such record here). The time index
        gives the offset to start from, the offset index its byte; only the batches from there are read."""
        data = self.read(".timeindex")
        # a preallocated zero tail reads as entries at the base offset: they only make the search start earlier
        index = TimeIndex.from_bytes(data or b"", self.base_offset, file=self.path(".timeindex"))
        position = self.position_of(max(index.lookup(timestamp).offset, starting_offset))
        for _, batch in self.batches(position):
            if batch.max_timestamp >= timestamp and batch.last_offset >= starting_offset:
                for record in batch.records():
                    if record.timestamp >= timestamp and record.offset >= starting_offset:
                        return record.offset
        return None

    def batch_summaries(self) -> Iterator[BatchSummary]:
        """What the index builder needs of each batch, with file positions (headers alone)."""
        for position, batch in self.reader(headers_only=True):
            yield BatchSummary(position, batch.size, batch.last_offset, batch.max_timestamp)


class SegmentReader:
    """Iterates (file position, batch) over a `.log` file in chunks. A batch that straddles a chunk
    boundary starts the next chunk; one larger than a chunk is read whole. After iteration,
    `truncated_tail` names bytes after the last whole batch (Kafka's readers ignore them).

    Without `torn_tail_ok` such bytes raise TruncatedDataError instead: only the active segment
    may end in a torn batch (a broker stopped uncleanly); in any other segment they are data lost
    from the middle of the log (a torn copy, or a batch length that was overwritten). With
    `offset_range` ([low, high), high None: unbounded), every batch's offsets must lie in it and
    come after the previous batch's: a base offset is not covered by the CRC, so this is what
    catches one that was overwritten.

    With `headers_only`, for a caller that reads nothing but batch headers, a local file's v2 data
    batches of at least tuning.SKIP_RECORDS_BYTES come as RecordBatchHeader: their header read, their
    records skipped by the batch's length (control and legacy batches, and every batch of an object
    store, still come whole). Every check above holds alike."""

    def __init__(
        self,
        fs: LogFileSystem,
        path: str,
        end: int,
        start: int = 0,
        chunk_size: int | None = None,
        *,
        torn_tail_ok: bool = True,
        offset_range: tuple[int, int | None] | None = None,
        headers_only: bool = False,
    ):
        self.fs, self.path, self.end, self.start = fs, path, end, start
        self.chunk_size = tuning.READ_CHUNK_BYTES if chunk_size is None else chunk_size
        self.torn_tail_ok, self.offset_range = torn_tail_ok, offset_range
        self.skip_from = tuning.SKIP_RECORDS_BYTES if headers_only and fs.is_local else None
        self.truncated_tail: TruncatedTail | None = None
        self.end_position = start
        self.last_offset_read: int | None = None
        self.previous_last_offset: int | None = None  # the last offset of the batch before the last one read

    def __iter__(self) -> Iterator[tuple[int, Batch]]:
        with self.fs.open_input(self.path) as f:
            pos = self.start
            want = self.chunk_size if self.skip_from is None else min(self.chunk_size, tuning.HEADER_READ_BYTES)
            while pos < self.end:
                length = min(want, self.end - pos)
                buf = f.read_at(length, pos)
                if len(buf) < length:
                    raise TruncatedDataError(
                        f"the file ends at byte {pos + len(buf)}, short of the {self.end} bytes it was listed "
                        f"with: it changed while it was read",
                        file=self.path,
                        position=pos + len(buf),
                        offset=None if self.last_offset_read is None else self.last_offset_read + 1,
                    )
                reader = BatchReader(buf)
                header = None
                try:
                    for batch in reader:
                        yield self._accepted(pos, batch)
                    tail = reader.truncated_tail
                    if tail is not None and pos + tail.length < self.end:
                        header = self._header(buf, reader.end_position, pos)
                        if header is not None:
                            yield self._accepted(pos, header)
                except KafkaLogError as err:
                    raise err.located(file=self.path, base_position=pos) from None
                pos += reader.end_position
                self.end_position = pos
                if header is not None:  # its records skipped: the next read starts small again
                    pos = self.end_position = pos + header.size
                    want = min(self.chunk_size, tuning.HEADER_READ_BYTES)
                    continue
                # a header-only read starts small and grows while it holds whole batches
                grown = self.chunk_size if self.skip_from is None else min(2 * want, self.chunk_size)
                if tail is None:
                    want = grown
                    continue
                if pos + tail.length >= self.end:  # the bytes really end here
                    self.truncated_tail = TruncatedTail(pos, tail.length, tail.declared_size)
                    if not self.torn_tail_ok:
                        at = reader.end_position  # the torn batch's base offset, where its header has one
                        raise self._torn(
                            self.truncated_tail, struct.unpack_from(">q", buf, at)[0] if tail.length >= 8 else None
                        )
                    return
                if self.skip_from is not None and tail.length < RECORD_BATCH_OVERHEAD <= want:
                    continue  # the next read, from this batch, holds its header
                want = max(grown, tail.declared_size or 0)

    def _accepted(self, pos: int, batch: Batch) -> tuple[int, Batch]:
        """(file position, batch) of a batch read at `pos`, once its offsets are checked (with
        `offset_range`; an error names the byte in the read, which the caller locates) and noted."""
        if self.offset_range is not None:
            self._check_offsets(batch.position, batch, batch_first_offset(batch), self.last_offset_read)
        self.previous_last_offset, self.last_offset_read = self.last_offset_read, batch.last_offset
        return pos + batch.position, batch

    def _header(self, buf, at: int, pos: int) -> RecordBatchHeader | None:
        """In a header-only read, the batch at `buf[at:]`, which runs past `buf`, as its header alone
        where its records may be skipped: a v2 data batch of at least `skip_from` bytes whose header
        is in `buf` and which ends within the file (a batch running past the end is a torn tail, which
        the whole read finds). None: the batch is read whole."""
        if self.skip_from is None or len(buf) - at < RECORD_BATCH_OVERHEAD or buf[at + MAGIC_OFFSET] != MAGIC:
            return None
        header = RecordBatchHeader(buf, at)
        if header.is_control or header.size < self.skip_from or pos + at + header.size > self.end:
            return None
        return header

    def check_decoded_first_offset(self, position: int, batch: Batch) -> None:
        """For a reader that decodes the batch it was just given: the first offset of a legacy
        wrapper, which only its decompressed messages tell, checked as a v2 batch's header is (a
        wrapper's offset is outside its CRC: lowered, its messages overlap the batch before). Call it
        after the CRC is verified, so that a damaged wrapper is named as such."""
        if self.offset_range is not None and batch_first_offset(batch) is None:
            self._check_offsets(position, batch, batch.base_offset, self.previous_last_offset)

    def _check_offsets(self, position: int, batch: Batch, first: int | None, previous: int | None) -> None:
        assert self.offset_range is not None  # only a reader given a range checks offsets
        low, high = self.offset_range
        last = batch.last_offset
        if first is not None and first > last:
            problem = f"its first offset {first} is after its last offset {last}"
        elif previous is not None and (last if first is None else first) <= previous:
            problem = f"its offsets do not come after the previous batch's last offset {previous}"
        elif (first if first is not None else last) < low or (high is not None and last >= high):
            problem = f"its offsets lie outside the segment's range [{low}, {'end' if high is None else high})"
        else:
            return
        raise CorruptBatchError(
            f"batch offsets {'?' if first is None else first}..{last} are out of order: {problem}",
            file=self.path,
            position=position,
            offset=last,
        )

    def _torn(self, tail: TruncatedTail, base_offset: int | None) -> TruncatedDataError:
        declared = f", where a batch declares {tail.declared_size} bytes" if tail.declared_size else ""
        if base_offset is None and self.last_offset_read is not None:
            base_offset = self.last_offset_read + 1
        elif base_offset is None and self.start == 0 and self.offset_range is not None:
            base_offset = self.offset_range[0]  # no whole batch: the lost data begins the segment
        return TruncatedDataError(
            f"{tail.length} bytes after the last whole batch{declared}, in a segment that "
            f"is not the active one: the segment is torn or a batch length is corrupt",
            file=self.path,
            position=tail.position,
            offset=base_offset,
        )


def log_end_offset(segments: list[LogSegment]) -> int:
    """A partition's log end offset as Kafka's LogLoader sets it: the active (last) segment's next
    offset, so an empty active segment ends the log at its base offset even where an earlier segment
    ends lower (0 without segments). The one place it is computed; the log start offset bounds it
    from below in rules/partition_state."""
    return segments[-1].next_offset() if segments else 0


def batch_first_offset(batch: Batch) -> int | None:
    """A batch's first offset where its header tells it: a v2 batch's or a plain legacy message's
    (a legacy wrapper names only its last offset; the rest needs decompressing)."""
    return batch.base_offset if isinstance(batch, RecordBatch) or batch.codec == Codec.NONE else None


def _lowest_offset(batch: Batch) -> int:
    """The lowest offset a batch's header tells it holds: its first, or a legacy wrapper's last."""
    first = batch_first_offset(batch)
    return batch.last_offset if first is None else first


def locate(err: KafkaLogError, path: str, file_position: int, batch: Batch) -> KafkaLogError:
    """An error raised by a batch read from `path` at `file_position`, in the file's frame. An error
    that names no byte of its own (a control record's key, say) names the batch's first byte, and
    one that names no offset names the batch's last offset (read from its header)."""
    located = err.located(file=path, base_position=file_position - batch.position, offset=batch.last_offset)
    if located.position is None:
        located.position = file_position
    return located


def usable_offset_entries(entries: list[OffsetPosition], log_size: int) -> list[OffsetPosition]:
    """The leading entries whose offsets and positions strictly increase and point into the file.

    This drops a preallocated zero tail (an active segment's index after an unclean stop) and
    entries past the end of a truncated `.log`; what is left is what a reader may seek with."""
    out: list[OffsetPosition] = []
    for entry in entries:
        if entry.position >= log_size or entry.position < 0:
            break
        if out and (entry.offset <= out[-1].offset or entry.position <= out[-1].position):
            break
        out.append(entry)
    return out
