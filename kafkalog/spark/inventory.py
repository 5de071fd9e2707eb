"""The segments of a log directory, from metadata only (DESIGN.md, data flow step 1).

`list_segments` is plain Python (the scan planner and the data source share it); `segment_inventory`
turns its result into a small DataFrame. Neither reads a segment body: a listing gives names, sizes
and mtimes; the last entry of the `.index` and `.timeindex` files and a bounded walk over the batch
*headers* after that entry give the last offset and the largest timestamp. `IOStats` counts every
read, so a test can check that claim (and the scan reports what its tasks opened).
"""
from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass, field
from typing import Iterable

from ..codec.batch import HEADER, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD
from ..codec.legacy import COMPRESSION_MASK as LEGACY_COMPRESSION_MASK
from ..codec.reader import HEADER_SIZE_UP_TO_MAGIC, MIN_RECORD_OVERHEAD
from ..storage.fs import LogFileSystem
from ..storage.index import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset
from ..storage.logdir import LogDir
from ..storage.segment import LogSegment

# The tail walk reads at most PROBE_READS windows of PROBE_WINDOW bytes per segment; past that the
# last offset is reported as unknown (None) rather than read.
PROBE_WINDOW = 64 * 1024
PROBE_READS = 4
_OFFSET_AND_SIZE = struct.Struct(">qi")
_LEGACY_TIMESTAMP = struct.Struct(">q")


# -- counting reads --------------------------------------------------------------------------------

class IOStats:
    """Opens and bytes read per file path."""

    def __init__(self):
        self.by_path: dict[str, list[int]] = {}

    def record(self, path: str, opens: int = 0, nbytes: int = 0) -> None:
        entry = self.by_path.setdefault(path, [0, 0])
        entry[0] += opens
        entry[1] += nbytes

    def merge(self, other: dict[str, list[int]] | dict[str, tuple[int, int]]) -> None:
        for path, (opens, nbytes) in other.items():
            self.record(path, opens, nbytes)

    def files(self, suffix: str = "") -> set[str]:
        """Paths (ending with `suffix`) that were opened or read."""
        return {p for p in self.by_path if p.endswith(suffix)}

    def bytes_read(self, suffix: str = "") -> int:
        return sum(n for p, (_, n) in self.by_path.items() if p.endswith(suffix))

    def as_dict(self) -> dict[str, tuple[int, int]]:
        return {p: (o, n) for p, (o, n) in self.by_path.items()}


class _CountingFile:
    def __init__(self, f, path: str, stats: IOStats):
        self._f, self._path, self._stats = f, path, stats

    def read_at(self, nbytes: int, offset: int):
        data = self._f.read_at(nbytes, offset)
        self._stats.record(self._path, 0, len(data))
        return data

    def read(self, nbytes: int | None = None):
        data = self._f.read() if nbytes is None else self._f.read(nbytes)
        self._stats.record(self._path, 0, len(data))
        return data

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


class CountingFileSystem(LogFileSystem):
    """A `LogFileSystem` that records in `stats` every file it opens and every byte it reads."""

    def __init__(self, inner: LogFileSystem, stats: IOStats | None = None):
        super().__init__(inner.fs)
        self.stats = stats if stats is not None else IOStats()

    def read_bytes(self, path: str) -> bytes:
        data = super().read_bytes(path)
        self.stats.record(path, 1, len(data))
        return data

    def read_range(self, path: str, start: int, length: int) -> bytes:
        data = super().read_range(path, start, length)
        self.stats.record(path, 1, len(data))
        return data

    def open_input(self, path: str):
        self.stats.record(path, 1, 0)
        return _CountingFile(super().open_input(path), path, self.stats)


def open_log_dir(log_dir, stats: IOStats | None = None) -> LogDir:
    """A `LogDir` for a path, URI or `LogDir`; with `stats`, every read through it is counted."""
    opened = log_dir if isinstance(log_dir, LogDir) else LogDir.open(str(log_dir))
    if stats is not None:
        opened = LogDir(CountingFileSystem(opened.fs, stats), opened.path, dict(opened.partition_paths))
    return opened


def log_dir_uri(log_dir) -> str:
    """What executors pass to `LogFileSystem.for_path` to reach the same filesystem."""
    if isinstance(log_dir, LogDir):
        if log_dir.fs.is_local:
            return log_dir.path
        raise TypeError("pass an object-store log directory as its URI string, not as a LogDir")
    return str(log_dir)


# -- segments --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SegmentInfo:
    """One segment, as far as metadata tells. Offsets are absolute; None means not cheaply known.

    `next_base_offset` is the next segment's base offset: every offset in this segment is below it.
    `max_timestamp` is the largest of the time index's last entry and the batch headers the tail
    walk saw (epoch ms), or None.
    """
    topic: str
    partition: int
    base_offset: int
    size: int
    path: str
    mtime_ms: int
    is_active: bool
    next_base_offset: int | None = None
    index_path: str | None = None
    timeindex_path: str | None = None
    first_offset: int | None = None
    last_offset: int | None = None
    max_timestamp: int | None = None

    @property
    def offset_bounds(self) -> tuple[int, int | None]:
        """[low, high) holding every offset of the segment; high None is unbounded."""
        low = self.first_offset if self.first_offset is not None else self.base_offset
        if self.last_offset is not None:
            return low, self.last_offset + 1
        return low, self.next_base_offset


def _as_set(values, kind) -> frozenset | None:
    if values is None:
        return None
    if isinstance(values, (str, int)):
        values = [values]
    return frozenset(kind(v) for v in values)


def list_segments(log_dir, topics: Iterable[str] | str | None = None, partitions: Iterable[int] | int | None = None,
                  *, probe: bool = True, stats: IOStats | None = None) -> list[SegmentInfo]:
    """The segments of `log_dir` (a path, URI or `LogDir`), in topic, partition and offset order.

    `topics` and `partitions` (partition numbers, for every selected topic) narrow the listing.
    With `probe`, index files and a bounded tail of batch headers give first and last offsets and
    the largest timestamp; without it only the listing is used. `stats` counts every read.
    """
    opened = open_log_dir(log_dir, stats)
    topic_set, partition_set = _as_set(topics, str), _as_set(partitions, int)
    out = []
    for topic, number in opened.topic_partitions:
        if (topic_set is not None and topic not in topic_set) or (partition_set is not None
                                                                  and number not in partition_set):
            continue
        part = opened.partition(topic, number)
        for i, segment in enumerate(part.segments):
            nxt = part.segments[i + 1].base_offset if i + 1 < len(part.segments) else None
            info = SegmentInfo(topic, number, segment.base_offset, segment.size, segment.log_path,
                               segment.mtime_ms, is_active=nxt is None, next_base_offset=nxt,
                               index_path=_entry_path(segment, ".index"),
                               timeindex_path=_entry_path(segment, ".timeindex"))
            if probe:
                info = probe_segment(opened.fs, info)
            out.append(info)
    return out


def _entry_path(segment: LogSegment, suffix: str) -> str | None:
    entry = segment.files.get(suffix)
    return None if entry is None else entry.path


# -- reading index files -----------------------------------------------------------------------------

def usable_offset_entries(entries: list[OffsetPosition], log_size: int) -> list[OffsetPosition]:
    """The leading entries whose offsets and positions strictly increase and point into the file.

    This drops a preallocated zero tail (an active segment's index after an unclean stop) and
    entries past the end of a truncated `.log`; what is left is what a reader may seek with.
    """
    out: list[OffsetPosition] = []
    for entry in entries:
        if entry.position >= log_size or entry.position < 0:
            break
        if out and (entry.offset <= out[-1].offset or entry.position <= out[-1].position):
            break
        out.append(entry)
    return out


def read_offset_index(fs: LogFileSystem, info: SegmentInfo) -> list[OffsetPosition]:
    """The usable entries of the segment's `.index` ([] when it is absent)."""
    if info.index_path is None:
        return []
    index = OffsetIndex.from_bytes(fs.read_bytes(info.index_path), info.base_offset, file=info.index_path)
    return usable_offset_entries(index.entries, info.size)


def _last_entry(fs: LogFileSystem, path: str, entry_size: int, decode) -> object | None:
    """The last meaningful entry of an index file, reading only its last entry unless the file
    ends in a preallocated zero tail, which needs the whole file."""
    info = fs.info(path)
    if info is None or info.size < entry_size:
        return None
    whole = info.size - info.size % entry_size
    tail = fs.read_range(path, whole - entry_size, entry_size)
    if any(tail) or whole == entry_size:
        entries = decode(tail)
        return entries[-1] if entries else None
    entries = decode(fs.read_bytes(path)[:whole])
    return entries[-1] if entries else None


def _last_offset_entry(fs: LogFileSystem, info: SegmentInfo) -> OffsetPosition | None:
    if info.index_path is None:
        return None

    def decode(data: bytes):
        return usable_offset_entries(OffsetIndex.from_bytes(data, info.base_offset).entries, info.size)
    entry = _last_entry(fs, info.index_path, OffsetIndex.ENTRY.size, decode)
    if entry is not None and (entry.position >= info.size or entry.offset < info.base_offset):
        return None
    return entry


def _last_time_entry(fs: LogFileSystem, info: SegmentInfo) -> TimestampOffset | None:
    if info.timeindex_path is None:
        return None

    def decode(data: bytes):
        entries = TimeIndex.from_bytes(data, info.base_offset).entries
        out = []
        for entry in entries:  # strictly increasing timestamps; a zero tail breaks the run
            if out and entry.timestamp <= out[-1].timestamp:
                break
            out.append(entry)
        return out
    return _last_entry(fs, info.timeindex_path, TimeIndex.ENTRY.size, decode)


# -- the bounded header walk -------------------------------------------------------------------------

@dataclass
class HeaderProbe:
    """What a walk over batch headers found: first and last offset, largest timestamp, and
    whether it reached the end of the file (else `last_offset` is None)."""
    first_offset: int | None = None
    last_offset: int | None = None
    max_timestamp: int | None = None
    complete: bool = False
    reads: list = field(default_factory=list)


def walk_headers(fs: LogFileSystem, path: str, size: int, start: int, *, window: int = PROBE_WINDOW,
                 max_reads: int = PROBE_READS) -> HeaderProbe:
    """Walk batch headers from `start` (a batch boundary) to the end of the file, reading windows of
    `window` bytes and at most `max_reads` of them. Only headers are interpreted: legacy compressed
    wrappers are not decompressed, so their first offset is not known."""
    probe = HeaderProbe()
    pos = start
    buf, buf_start = b"", start
    while True:
        if size - pos < HEADER_SIZE_UP_TO_MAGIC:
            probe.complete = True  # what remains is a tail Kafka's readers ignore
            return probe
        need = RECORD_BATCH_OVERHEAD
        rel = pos - buf_start
        if rel < 0 or rel + min(need, size - pos) > len(buf):
            if len(probe.reads) >= max_reads:
                return probe
            buf_start = pos
            buf = fs.read_range(path, pos, min(window, size - pos))
            probe.reads.append((pos, len(buf)))
            rel = 0
        offset, batch_size = _OFFSET_AND_SIZE.unpack_from(buf, rel)
        if batch_size < MIN_RECORD_OVERHEAD or pos + LOG_OVERHEAD + batch_size > size:
            # corrupt, or a truncated last batch: the scan reports the one and ignores the other
            probe.complete = batch_size >= MIN_RECORD_OVERHEAD
            return probe
        magic = buf[rel + 16]
        if magic == 2 and rel + RECORD_BATCH_OVERHEAD <= len(buf):
            fields = HEADER.unpack_from(buf, rel)
            first, last, max_ts = fields[0], fields[0] + fields[6], fields[8]
        elif magic in (0, 1):
            compressed = buf[rel + 17] & LEGACY_COMPRESSION_MASK if rel + 18 <= len(buf) else 1
            first = None if compressed else offset
            last = offset
            max_ts = (_LEGACY_TIMESTAMP.unpack_from(buf, rel + 18)[0]
                      if magic == 1 and rel + 26 <= len(buf) else None)
        else:
            return probe  # an unknown magic: leave it to the scan to report
        if pos == start and start == 0:
            probe.first_offset = first
        probe.last_offset = last
        if max_ts is not None and max_ts >= 0:
            probe.max_timestamp = max_ts if probe.max_timestamp is None else max(probe.max_timestamp, max_ts)
        pos += LOG_OVERHEAD + batch_size


def _first_offset(fs: LogFileSystem, info: SegmentInfo) -> int | None:
    """The first batch's base offset from its header alone (None for a legacy compressed wrapper)."""
    head = fs.read_range(info.path, 0, min(info.size, RECORD_BATCH_OVERHEAD))
    if len(head) < HEADER_SIZE_UP_TO_MAGIC:
        return None
    offset = _OFFSET_AND_SIZE.unpack_from(head, 0)[0]
    magic = head[16]
    if magic == 2:
        return offset
    if magic in (0, 1) and len(head) > 17 and not head[17] & LEGACY_COMPRESSION_MASK:
        return offset
    return None


def probe_segment(fs: LogFileSystem, info: SegmentInfo, *, window: int = PROBE_WINDOW,
                  max_reads: int = PROBE_READS) -> SegmentInfo:
    """`info` with first/last offset and largest timestamp from the index files' last entries, the
    first batch header and a bounded walk over the headers after the last offset-index entry."""
    if info.size == 0:
        return info
    last_index = _last_offset_entry(fs, info)
    last_time = _last_time_entry(fs, info)
    start = last_index.position if last_index is not None else 0
    tail = walk_headers(fs, info.path, info.size, start, window=window, max_reads=max_reads)
    first = tail.first_offset if start == 0 else _first_offset(fs, info)
    timestamps = [t for t in (tail.max_timestamp, last_time.timestamp if last_time else None)
                  if t is not None and t >= 0]
    return dataclasses.replace(info, first_offset=first, last_offset=tail.last_offset if tail.complete else None,
                               max_timestamp=max(timestamps) if timestamps else None)


# -- the DataFrame ---------------------------------------------------------------------------------

INVENTORY_COLUMNS = ("topic", "partition", "base_offset", "size", "path", "first_offset", "last_offset",
                     "max_timestamp", "is_active", "mtime")


def inventory_rows(segments: list[SegmentInfo]) -> list[tuple]:
    return [(s.topic, s.partition, s.base_offset, s.size, s.path, s.first_offset, s.last_offset,
             s.max_timestamp, s.is_active, s.mtime_ms) for s in segments]


def segment_inventory(spark, log_dir, topics=None, partitions=None, *, stats: IOStats | None = None):
    """A DataFrame of the segments of `log_dir`, one row each, built on the driver from metadata:
    topic, partition, base_offset, size (bytes), path (of the `.log`), first_offset, last_offset
    (None where not cheaply known), max_timestamp (epoch ms, None if unknown), is_active (the last
    segment of its partition) and mtime (the `.log` file's modification time, epoch ms)."""
    from pyspark.sql.types import (BooleanType, IntegerType, LongType, StringType, StructField,
                                   StructType)
    schema = StructType([
        StructField("topic", StringType(), False), StructField("partition", IntegerType(), False),
        StructField("base_offset", LongType(), False), StructField("size", LongType(), False),
        StructField("path", StringType(), False), StructField("first_offset", LongType(), True),
        StructField("last_offset", LongType(), True), StructField("max_timestamp", LongType(), True),
        StructField("is_active", BooleanType(), False), StructField("mtime", LongType(), False),
    ])
    rows = inventory_rows(list_segments(log_dir, topics, partitions, stats=stats))
    return spark.createDataFrame(rows, schema)
