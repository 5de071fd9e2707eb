"""A log segment: its `.log` file and the index files beside it (spec §4.2-4.7).

Batches are read in chunks, never the whole file at once, so a 1 GiB segment costs one chunk of
memory. Positions handed out are positions in the `.log` file.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterator

from ..codec.batch import RecordBatch
from ..codec.compression import Codec
from ..codec.reader import Batch, BatchReader, TruncatedTail
from ..errors import CorruptBatchError, KafkaLogError, TruncatedDataError
from .fs import FileEntry, LogFileSystem
from .index import BatchSummary, OffsetIndex, TimeIndex
from .txnindex import AbortedTxn, TransactionIndex
from .naming import INT64_MAX

CHUNK_SIZE = 8 * 1024 * 1024
FIRST_BATCH_CHUNK = 64 * 1024  # enough for most first batches; a larger one is read whole
TAIL_CHUNK = 256 * 1024  # the batches after the last offset-index entry: about index.interval.bytes


@dataclass
class LogSegment:
    """One segment of a partition. `files` maps a suffix ('.log', '.index', '.timeindex',
    '.txnindex') to the file that is there; only '.log' is required. `next_base_offset`: the next
    segment's (None for the partition's last, the active segment; a lone file is taken as one)."""
    fs: LogFileSystem
    dir: str
    base_offset: int
    files: dict[str, FileEntry] = field(default_factory=dict)
    next_base_offset: int | None = None

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

    def read(self, suffix: str) -> bytes | None:
        """The bytes of one of the segment's files, or None where it is absent."""
        entry = self.files.get(suffix)
        return None if entry is None else self.fs.read_bytes(entry.path)

    def aborted_txns(self) -> list[AbortedTxn]:
        """The entries of the segment's `.txnindex` (none without the file)."""
        data = self.read(".txnindex")
        return TransactionIndex.from_bytes(data, self.base_offset, file=self.path(".txnindex")).entries if data else []

    def time_index_max_timestamp(self) -> int | None:
        """The time index's last timestamp, or None without entries. A preallocated zero tail (an
        active segment after an unclean stop) is skipped by taking the largest entry."""
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

    def largest_timestamp(self) -> int:
        """Kafka's LogSegment.largestTimestamp: the time index's, else the `.log` file's mtime."""
        largest = self.time_index_max_timestamp()
        return largest if largest is not None and largest >= 0 else self.mtime_ms

    def first_batch_timestamp(self) -> int:
        """Kafka's LogSegment.getFirstBatchTimestamp: the first batch's max timestamp, INT64_MAX for an
        empty segment or a first batch without a timestamp (spec §4.5)."""
        for _, batch in self.reader(chunk_size=FIRST_BATCH_CHUNK):
            return batch.max_timestamp if batch.max_timestamp >= 0 else INT64_MAX
        return INT64_MAX

    def last_offset(self) -> int | None:
        """The last offset of the last batch (None: no batch), from the batch headers after the last
        offset-index entry; the whole file is walked when there is no usable entry."""
        if self.size == 0:
            return None
        start = self._last_index_position()
        for attempt in (start, 0) if start else (0,):
            last = None
            try:
                for _, batch in SegmentReader(self.fs, self.log_path, self.size, attempt, TAIL_CHUNK):
                    last = batch.last_offset if last is None else max(last, batch.last_offset)
            except KafkaLogError:
                if attempt == 0:
                    raise
                continue  # an index entry that is not a batch boundary: walk the whole file
            if last is not None or attempt == 0:
                return last
        return None

    def _last_index_position(self) -> int:
        """The file position of the last usable offset-index entry (0 without one): a batch boundary
        after which only a few batches follow."""
        entry = self.files.get(".index")
        size = OffsetIndex.ENTRY.size
        if entry is None or entry.size < size:
            return 0
        whole = entry.size - entry.size % size
        tail = self.fs.read_range(entry.path, whole - size, size)
        if any(tail):
            position = struct.unpack(">ii", tail)[1]
        else:  # a zero tail: the last entry before it
            raw = self.fs.read_bytes(entry.path)[:whole]
            position = next((p for _, p in reversed(list(struct.iter_unpack(">ii", raw))) if p > 0), 0)
        return position if 0 <= position < self.size else 0

    def reader(self, start: int = 0, end: int | None = None, chunk_size: int = CHUNK_SIZE) -> "SegmentReader":
        return SegmentReader(self.fs, self.log_path, self.size if end is None else end, start, chunk_size)

    def batches(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, Batch]]:
        """(file position, batch) for each whole batch, checked as SegmentReader checks a segment
        that must read whole: offsets in order and within the segment's range, and no torn tail
        but in the active segment (Kafka's readers ignore one there). A batch's own `position`
        is in the chunk it was read from, not in the file."""
        return iter(SegmentReader(self.fs, self.log_path, self.size if end is None else end, start,
                                  torn_tail_ok=self.is_active or end is not None,
                                  offset_range=(self.base_offset, self.next_base_offset)))

    def batch_summaries(self) -> Iterator[BatchSummary]:
        """What the index builder needs of each batch, with file positions."""
        for position, batch in self.reader():
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
    catches one that was overwritten."""

    def __init__(self, fs: LogFileSystem, path: str, end: int, start: int = 0, chunk_size: int = CHUNK_SIZE, *,
                 torn_tail_ok: bool = True, offset_range: tuple[int, int | None] | None = None):
        self.fs, self.path, self.end, self.start, self.chunk_size = fs, path, end, start, chunk_size
        self.torn_tail_ok, self.offset_range = torn_tail_ok, offset_range
        self.truncated_tail: TruncatedTail | None = None
        self.end_position = start
        self.last_offset_read: int | None = None

    def __iter__(self) -> Iterator[tuple[int, Batch]]:
        with self.fs.open_input(self.path) as f:
            pos, want = self.start, self.chunk_size
            while pos < self.end:
                length = min(want, self.end - pos)
                buf = f.read_at(length, pos)
                reader = BatchReader(buf)
                try:
                    for batch in reader:
                        if self.offset_range is not None:
                            self._check_offsets(pos + batch.position, batch)
                        self.last_offset_read = batch.last_offset
                        yield pos + batch.position, batch
                except KafkaLogError as err:
                    raise err.located(file=self.path, base_position=pos) from None
                tail = reader.truncated_tail
                pos += reader.end_position
                self.end_position = pos
                if tail is None:
                    continue
                if pos + tail.length >= self.end:  # the bytes really end here
                    self.truncated_tail = TruncatedTail(pos, tail.length, tail.declared_size)
                    if not self.torn_tail_ok:
                        at = reader.end_position  # the torn batch's base offset, where its header has one
                        raise self._torn(self.truncated_tail, struct.unpack_from(">q", buf, at)[0]
                                         if tail.length >= 8 else None)
                    return
                want = max(self.chunk_size, tail.declared_size or 0)


    def _check_offsets(self, position: int, batch: Batch) -> None:
        low, high = self.offset_range
        last, first = batch.last_offset, first_offset(batch)
        previous = self.last_offset_read
        if first is not None and first > last:
            problem = f"its first offset {first} is after its last offset {last}"
        elif previous is not None and (last if first is None else first) <= previous:
            problem = f"its offsets do not come after the previous batch's last offset {previous}"
        elif (first if first is not None else last) < low or (high is not None and last >= high):
            problem = f"its offsets lie outside the segment's range [{low}, {'end' if high is None else high})"
        else:
            return
        raise CorruptBatchError(f"batch offsets {'?' if first is None else first}..{last} are out of order: {problem}",
                                file=self.path, position=position, offset=last)

    def _torn(self, tail: TruncatedTail, base_offset: int | None) -> TruncatedDataError:
        declared = f", where a batch declares {tail.declared_size} bytes" if tail.declared_size else ""
        if base_offset is None and self.last_offset_read is not None:
            base_offset = self.last_offset_read + 1
        return TruncatedDataError(f"{tail.length} bytes after the last whole batch{declared}, in a segment that "
                                  f"is not the active one: the segment is torn or a batch length is corrupt",
                                  file=self.path, position=tail.position, offset=base_offset)


def first_offset(batch: Batch) -> int | None:
    """A batch's first offset where its header tells it: a v2 batch's or a plain legacy message's
    (a legacy wrapper names only its last offset; the rest needs decompressing)."""
    return batch.base_offset if isinstance(batch, RecordBatch) or batch.codec == Codec.NONE else None


def locate(err: KafkaLogError, path: str, file_position: int, batch: Batch) -> KafkaLogError:
    """An error raised by a batch read from `path` at `file_position`, in the file's frame. An error
    that names no byte of its own (a control record's key, say) names the batch's first byte, and
    one that names no offset names the batch's last offset (read from its header)."""
    located = err.located(file=path, base_position=file_position - batch.position, offset=batch.last_offset)
    if located.position is None:
        located.position = file_position
    return located
