"""Scanning segments on executors into Arrow record batches (DESIGN.md, data flow step 2).

The work is planned on the driver from metadata (`plan_scan`): segments are listed and pruned by
topic, partition and offset range (a segment whose offsets lie outside the range is never opened);
a segment larger than the task size is cut into byte ranges at offset-index entries, which are batch
starts, and the ranges are checked to tile the file. Work units are packed into tasks, and each task
is decoded on an executor (`read_task`) into Arrow record batches of one of three views:

* ``narrow``: the compaction view, one row per record, keys but no values (`NARROW_SCHEMA`);
* ``records``: the full view, the schema of Spark's Kafka source plus kafkalog's batch fields
  (`RECORDS_SCHEMA`);
* ``batches``: one row per batch, header fields only (`BATCHES_SCHEMA`).

Everything up to `read_task` is plain Python and pyarrow, testable without Spark; `narrow_scan`,
`read_records` and `read_batches` run it with `mapInArrow`, one Spark task per planned task.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..codec.batch import INT32_MAX, RecordBatch
from ..codec.control import ControlType, parse_control_type, parse_coordinator_epoch
from ..codec.scan import KeyColumns, scan_batches, scan_keys
from ..errors import CorruptBatchError, CorruptIndexError, KafkaLogError
from ..storage.fs import LogFileSystem
from ..storage.index import OffsetPosition
from ..storage.segment import SegmentReader, first_offset, locate
from .inventory import (CountingFileSystem, IOStats, SegmentInfo, list_segments, log_dir_uri, open_log_dir,
                        probe_segment, read_offset_index)

DEFAULT_MAX_BYTES_PER_TASK = 64 * 1024 * 1024  # half spark.sql.files.maxPartitionBytes: decoding is CPU-bound
DEFAULT_OPEN_COST = 4 * 1024 * 1024  # like spark.sql.files.openCostInBytes
MIN_SPLIT_BYTES = 1024 * 1024  # parallelism alone never cuts ranges smaller than this
SMALL_OPEN_COST = 64 * 1024  # what a partition or an output segment costs a task beyond its bytes
SEEK_MIN_BYTES = 1024 * 1024  # an offset range seeks with the index only in segments at least this big
DEFAULT_BATCH_ROWS = 64 * 1024  # rows per Arrow record batch

VIEWS = ("narrow", "records", "batches")

# -- schemas -----------------------------------------------------------------------------------------

HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

NARROW_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("segment_base_offset", pa.int64()),
    ("batch_base_offset", pa.int64()), ("batch_last_offset", pa.int64()), ("batch_position", pa.int64()),
    ("offset", pa.int64()), ("timestamp", pa.int64()), ("key", pa.binary()), ("value_is_null", pa.bool_()),
    ("value_size", pa.int32()), ("record_span_start", pa.int32()), ("record_span_size", pa.int32()),
    ("producer_id", pa.int64()), ("producer_epoch", pa.int16()), ("is_transactional", pa.bool_()),
    ("is_control", pa.bool_()), ("control_type", pa.int16()), ("delete_horizon_ms", pa.int64()),
    ("magic", pa.int8()), ("codec", pa.int8()),
])

RECORDS_SCHEMA = pa.schema([
    # Spark's Kafka source, in its order and types
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
    ("offset", pa.int64()), ("timestamp", TIMESTAMP_TYPE), ("timestampType", pa.int32()), ("headers", HEADERS_TYPE),
    # kafkalog's batch fields
    ("producer_id", pa.int64()), ("producer_epoch", pa.int16()), ("base_sequence", pa.int32()),
    ("is_transactional", pa.bool_()), ("is_control", pa.bool_()), ("leader_epoch", pa.int32()),
    ("codec", pa.int8()), ("segment_base_offset", pa.int64()), ("batch_base_offset", pa.int64()),
])

BATCHES_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("segment_base_offset", pa.int64()),
    ("batch_position", pa.int64()), ("batch_size", pa.int32()), ("base_offset", pa.int64()),
    ("last_offset", pa.int64()), ("record_count", pa.int32()), ("base_timestamp", pa.int64()),
    ("max_timestamp", pa.int64()), ("timestamp_type", pa.int32()), ("producer_id", pa.int64()),
    ("producer_epoch", pa.int16()), ("base_sequence", pa.int32()), ("last_sequence", pa.int32()),
    ("is_transactional", pa.bool_()), ("is_control", pa.bool_()), ("control_type", pa.int16()),
    ("coordinator_epoch", pa.int32()), ("delete_horizon_ms", pa.int64()), ("leader_epoch", pa.int32()),
    ("magic", pa.int8()), ("codec", pa.int8()), ("crc", pa.int64()),
])

SCHEMAS = {"narrow": NARROW_SCHEMA, "records": RECORDS_SCHEMA, "batches": BATCHES_SCHEMA}


def spark_schema(schema: pa.Schema):
    """The Spark StructType of an Arrow schema of this module (every field nullable)."""
    from pyspark.sql import types as T
    simple = {pa.string(): T.StringType(), pa.binary(): T.BinaryType(), pa.bool_(): T.BooleanType(),
              pa.int8(): T.ByteType(), pa.int16(): T.ShortType(), pa.int32(): T.IntegerType(),
              pa.int64(): T.LongType(), TIMESTAMP_TYPE: T.TimestampType()}

    def convert(t: pa.DataType):
        if t in simple:
            return simple[t]
        if pa.types.is_list(t):
            return T.ArrayType(convert(t.value_type), True)
        if pa.types.is_struct(t):
            return T.StructType([T.StructField(f.name, convert(f.type), True) for f in t])
        raise TypeError(f"no Spark type for {t}")
    return T.StructType([T.StructField(f.name, convert(f.type), True) for f in schema])


# -- what to read ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ScanFilter:
    """Which records to read: topics and partition numbers (None: all) and offsets in
    [start_offset, end_offset) (None: unbounded)."""
    topics: frozenset | None = None
    partitions: frozenset | None = None
    start_offset: int | None = None
    end_offset: int | None = None

    @classmethod
    def of(cls, topics=None, partitions=None, start_offset=None, end_offset=None) -> "ScanFilter":
        if isinstance(topics, str):
            topics = [topics]
        if isinstance(partitions, int):
            partitions = [partitions]
        return cls(None if topics is None else frozenset(topics),
                   None if partitions is None else frozenset(int(p) for p in partitions),
                   None if start_offset is None else int(start_offset),
                   None if end_offset is None else int(end_offset))

    def and_(self, other: "ScanFilter") -> "ScanFilter":
        """Both filters at once."""
        def meet(a, b):
            return b if a is None else a if b is None else a & b

        def bound(a, b, pick):
            return b if a is None else a if b is None else pick(a, b)
        return ScanFilter(meet(self.topics, other.topics), meet(self.partitions, other.partitions),
                          bound(self.start_offset, other.start_offset, max),
                          bound(self.end_offset, other.end_offset, min))

    @property
    def has_offsets(self) -> bool:
        return self.start_offset is not None or self.end_offset is not None

    @property
    def is_empty(self) -> bool:
        return ((self.start_offset is not None and self.end_offset is not None and self.start_offset >= self.end_offset)
                or self.topics == frozenset() or self.partitions == frozenset())

    def accepts_partition(self, topic: str, partition: int) -> bool:
        return ((self.topics is None or topic in self.topics)
                and (self.partitions is None or partition in self.partitions))

    def overlaps(self, low: int | None, high: int | None) -> bool:
        """Whether offsets in [low, high) (None: unbounded) can meet the filter's range."""
        if self.start_offset is not None and high is not None and high <= self.start_offset:
            return False
        if self.end_offset is not None and low is not None and low >= self.end_offset:
            return False
        return True


@dataclass(frozen=True)
class WorkUnit:
    """A byte range [start, end) of one segment's `.log`, starting at a batch boundary.

    `low_offset`/`high_offset` bound the offsets of its batches as the offset index tells them
    (None: only the segment's own bounds); the reader checks them, and that every batch lies in
    [segment_base_offset, next_base_offset) after the one before it. Only the active segment (no
    `next_base_offset`) may end in a torn batch (see SegmentReader).
    """
    topic: str
    partition: int
    segment_base_offset: int
    path: str
    start: int
    end: int
    segment_size: int
    low_offset: int | None = None
    high_offset: int | None = None
    index_path: str | None = None
    next_base_offset: int | None = None

    @property
    def nbytes(self) -> int:
        return self.end - self.start

    @property
    def is_last_range(self) -> bool:
        return self.end == self.segment_size


@dataclass(frozen=True)
class ScanPlan:
    """Tasks (each a tuple of work units) over the filesystem of `root`."""
    root: str
    flt: ScanFilter
    tasks: tuple
    segments_listed: int = 0

    @property
    def units(self) -> list[WorkUnit]:
        return [u for task in self.tasks for u in task]


# -- planning (driver, pure) -----------------------------------------------------------------------

def prune_segments(segments: Iterable[SegmentInfo], flt: ScanFilter) -> list[SegmentInfo]:
    """The segments the filter can need: selected topic and partition, offsets overlapping the
    range (offsets of a segment are below the next segment's base offset), not empty."""
    if flt.is_empty:
        return []
    return [s for s in segments
            if s.size > 0 and flt.accepts_partition(s.topic, s.partition) and flt.overlaps(*s.offset_bounds)]


def lookup(entries: Sequence[OffsetPosition], base_offset: int, target: int) -> OffsetPosition:
    """Kafka's offset-index lookup: the greatest entry with offset <= target, else (base, 0)."""
    lo, hi = 0, len(entries)
    while lo < hi:
        mid = (lo + hi) // 2
        if entries[mid].offset <= target:
            lo = mid + 1
        else:
            hi = mid
    return entries[lo - 1] if lo else OffsetPosition(base_offset, 0)


def split_ranges(size: int, entries: Sequence[OffsetPosition], max_bytes: int, base_offset: int,
                 forced: Iterable[int] = ()) -> list[tuple[int, int, int | None, int | None]]:
    """Cut [0, size) at offset-index entries into ranges of at most `max_bytes` where the entries
    allow it (a range never starts inside a batch: entry positions are batch starts).

    Returns (start, end, low_offset, high_offset) per range. Kafka's index entry (o, p) says every
    batch before byte p has last offset < o, and (as Kafka writes entries at the start of each
    append, with the append's largest offset) every batch from p on has offsets above the previous
    entry's o; so a range [p_i, p_j) holds offsets in [o_(i-1) + 1, o_j). `forced` are positions
    (entry positions) to cut at regardless of size, e.g. where an offset range starts.
    """
    index_of = {entry.position: i for i, entry in enumerate(entries)}
    forced_positions = sorted(p for p in set(forced) if p in index_of and 0 < p < size)
    bounds = [0] + forced_positions + [size]
    cuts: list[int] = []  # indexes into entries, in order
    for section_start, section_end in zip(bounds, bounds[1:]):
        inner = [i for i, entry in enumerate(entries) if section_start < entry.position < section_end]
        start, k = section_start, 0
        while section_end - start > max_bytes and k < len(inner):
            best = None  # the furthest entry that keeps the range within max_bytes
            while k < len(inner) and entries[inner[k]].position - start <= max_bytes:
                best, k = inner[k], k + 1
            if best is None:  # one batch run longer than max_bytes: cut right after it
                best, k = inner[k], k + 1
            cuts.append(best)
            start = entries[best].position
        if section_end != size:
            cuts.append(index_of[section_end])
    ranges = []
    prev = None  # index of the entry the current range starts at
    for cut in cuts + [None]:
        begin = 0 if prev is None else entries[prev].position
        end = size if cut is None else entries[cut].position
        low = base_offset if prev is None else (entries[prev - 1].offset + 1 if prev > 0 else base_offset)
        high = None if cut is None else entries[cut].offset
        ranges.append((begin, end, low, high))
        prev = cut
    check_tiling([(r[0], r[1]) for r in ranges], size)
    return ranges


def check_tiling(ranges: Sequence[tuple[int, int]], size: int) -> None:
    """Raise unless the ranges cover [0, size) in order, without gaps, overlaps or empty ranges."""
    position = 0
    for start, end in ranges:
        if start != position or end <= start:
            raise ValueError(f"ranges {list(ranges)} do not tile [0, {size})")
        position = end
    if position != size:
        raise ValueError(f"ranges {list(ranges)} do not tile [0, {size})")


def plan_units(segments: Iterable[SegmentInfo], flt: ScanFilter, *, unit_bytes: int,
               read_index: Callable[[SegmentInfo], list[OffsetPosition]],
               seek_min_bytes: int = SEEK_MIN_BYTES) -> list[WorkUnit]:
    """Work units for the pruned segments: whole segments, or index-cut ranges of segments larger
    than `unit_bytes`; with an offset range, index ranges wholly outside it are dropped."""
    units = []
    for seg in prune_segments(segments, flt):
        seeks = flt.has_offsets and seg.size >= seek_min_bytes
        entries = read_index(seg) if (seg.size > unit_bytes or seeks) and seg.index_path else []
        forced = []
        if entries and flt.start_offset is not None and flt.start_offset > seg.base_offset:
            forced.append(lookup(entries, seg.base_offset, flt.start_offset).position)
        ranges = split_ranges(seg.size, entries, unit_bytes, seg.base_offset, forced)
        seg_low, seg_high = seg.offset_bounds
        for start, end, low, high in ranges:
            low = seg_low if start == 0 else low
            high = seg_high if end == seg.size else high
            if not flt.overlaps(low, high):
                continue
            units.append(WorkUnit(seg.topic, seg.partition, seg.base_offset, seg.path, start, end, seg.size,
                                  low if start > 0 else None, high if end < seg.size else None, seg.index_path,
                                  seg.next_base_offset))
    return units


def task_bytes(total_bytes: int, max_bytes: int, min_tasks: int, open_cost: int = DEFAULT_OPEN_COST) -> int:
    """The size a task aims at: `max_bytes`, smaller when that leaves fewer than `min_tasks` tasks."""
    if min_tasks <= 1:
        return max_bytes
    return max(1, min(max_bytes, max(MIN_SPLIT_BYTES, math.ceil(total_bytes / min_tasks))))


def pack(items: Sequence, nbytes: Callable[[object], int], target_bytes: int,
         open_cost: int = DEFAULT_OPEN_COST) -> list[tuple]:
    """Pack items, in order, into groups of about `target_bytes`, counting `nbytes(item)` plus
    `open_cost` for each (as Spark packs small files); an item larger than the target is a group
    of its own. The tasks of a scan, a decision or a rewrite: cost follows bytes, not items."""
    groups, current, current_bytes = [], [], 0
    for item in items:
        cost = nbytes(item) + open_cost
        if current and current_bytes + cost > target_bytes:
            groups.append(tuple(current))
            current, current_bytes = [], 0
        current.append(item)
        current_bytes += cost
    if current:
        groups.append(tuple(current))
    return groups


def pack_units(units: Sequence[WorkUnit], target_bytes: int, open_cost: int = DEFAULT_OPEN_COST) -> list[tuple]:
    """Pack work units, in order, into tasks of about `target_bytes` (see `pack`)."""
    return pack(units, lambda unit: unit.nbytes, target_bytes, open_cost)


def pack_tasks(spark, items: Sequence, nbytes: Callable[[object], int]) -> list[tuple]:
    """Items (partitions to decide, segments to write) packed into tasks by bytes, at least twice
    the default parallelism of them where the bytes allow. Their fixed cost is a small Python call,
    not a file open on a cluster store: a small open cost."""
    total = sum(nbytes(i) + SMALL_OPEN_COST for i in items)
    return pack(items, nbytes, task_bytes(total, DEFAULT_MAX_BYTES_PER_TASK, default_min_tasks(spark)),
                SMALL_OPEN_COST)


def plan_scan(log_dir, flt: ScanFilter = ScanFilter(), *, max_bytes_per_task: int = DEFAULT_MAX_BYTES_PER_TASK,
              min_tasks: int = 1, open_cost: int | None = None, pack: bool = True,
              stats: IOStats | None = None) -> ScanPlan:
    """Plan a scan on the driver: list, prune, cut and pack. No `.log` is read, except the batch
    headers at the tail of an active segment when a start offset may lie past its end.

    `max_bytes_per_task` caps both a task's bytes and a unit's (larger segments are cut);
    `min_tasks` lowers the target so that at least that many tasks exist where the data allows.
    `open_cost` is what opening a unit's file costs, in bytes: by default a request's worth on an
    object store (DEFAULT_OPEN_COST), next to nothing on a local disk (SMALL_OPEN_COST).
    Without `pack`, every work unit is its own task.
    """
    opened = open_log_dir(log_dir, stats)
    if open_cost is None:
        open_cost = SMALL_OPEN_COST if opened.fs.is_local else DEFAULT_OPEN_COST
    root = log_dir_uri(log_dir)
    segments = list_segments(opened, flt.topics, flt.partitions, probe=False)
    if flt.start_offset is not None:
        # An active segment has no next base offset to bound it: its last offset, from the index
        # and a bounded walk over the batch headers of its tail, tells whether it is needed.
        segments = [probe_segment(opened.fs, s) if s.next_base_offset is None and s.base_offset < flt.start_offset
                    and s.size > 0 else s for s in segments]
    pruned = prune_segments(segments, flt)
    target = task_bytes(sum(s.size + open_cost for s in pruned), max_bytes_per_task, min_tasks, open_cost)
    units = plan_units(pruned, flt, unit_bytes=max(1, min(target, max_bytes_per_task)),
                       read_index=lambda seg: read_offset_index(opened.fs, seg))
    tasks = pack_units(units, target, open_cost) if pack else [(u,) for u in units]
    return ScanPlan(root, flt, tuple(tasks), len(segments))


# -- reading (executors, pure) -----------------------------------------------------------------------

_FILESYSTEMS: dict[str, tuple[LogFileSystem, str]] = {}


def filesystem(root: str) -> LogFileSystem:
    """The filesystem of a log-dir path or URI, created once per process."""
    return filesystem_and_path(root)[0]


def filesystem_and_path(root: str) -> tuple[LogFileSystem, str]:
    """The filesystem of a log-dir path or URI and the log dir's path in it, made once per process."""
    if root not in _FILESYSTEMS:
        _FILESYSTEMS[root] = LogFileSystem.for_path(root)
    return _FILESYSTEMS[root]


def _arrow(values, type_: pa.DataType) -> pa.Array:
    """An Arrow array from whatever sequence a column holds (list, array, numpy, Arrow)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        return values if values.type == type_ else values.cast(type_)
    return pa.array(values, type_)


def _constant(value, type_: pa.DataType, n: int) -> pa.Array:
    return pa.repeat(pa.scalar(value, type_), n)


class _BatchColumns:
    """Per-batch values and each batch's run of rows, expanded to per-row columns by run-end decoding."""

    def __init__(self, names: Sequence[str]):
        self.names = names
        self.values = {name: [] for name in names}
        self.run_ends: list[int] = []

    def add(self, rows_end: int, values: Sequence) -> None:
        self.run_ends.append(rows_end)
        for name, value in zip(self.names, values):
            self.values[name].append(value)

    def expand(self, name: str, type_: pa.DataType) -> pa.Array:
        values = pa.array(self.values[name], type_)
        if not self.run_ends:
            return values
        ree = pa.RunEndEncodedArray.from_arrays(pa.array(self.run_ends, pa.int32()), values)
        return pc.run_end_decode(ree)


class _ViewBuilder:
    """Collects decoded batches of one work unit and turns them into Arrow record batches."""
    schema: pa.Schema

    def __init__(self, unit: WorkUnit):
        self.unit = unit
        self.rows = 0

    def add(self, position: int, batch) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def settle(self) -> None:
        """Decode the batches `add` holds back, if any; errors name their batch's file and byte."""

    def flush(self) -> pa.RecordBatch:  # pragma: no cover - abstract
        raise NotImplementedError


_NARROW_BATCH_FIELDS = ("batch_base_offset", "batch_last_offset", "batch_position", "producer_id",
                        "producer_epoch", "is_transactional", "is_control", "delete_horizon_ms", "magic", "codec")


# A window of v2 batches is scanned in one vectorised pass (`scan_batches`) once it holds this many
# batches or decompressed bytes: enough to pay numpy's cost per call once for thousands of records,
# few enough to keep the held-back sections small.
WINDOW_BATCHES = 64
WINDOW_BYTES = 1 << 20


class NarrowBuilder(_ViewBuilder):
    """The compaction view: the keys of a window of batches scanned at once (`scan_batches`),
    batch by batch (`scan_keys`) where that pass does not vouch for them all (values are never
    materialised). `add` holds the window's batches back until it is full, `settle` or `flush`;
    `rows` counts them already."""
    schema = NARROW_SCHEMA

    def __init__(self, unit: WorkUnit):
        super().__init__(unit)
        self._reset()

    def _reset(self) -> None:
        self.keys = KeyColumns()
        self.batch = _BatchColumns(_NARROW_BATCH_FIELDS)
        self.control_types: list[tuple[int, int]] = []  # (row, control type) of control records
        self.rows = 0
        self.window: list[tuple[int, RecordBatch, bytes]] = []  # (position, batch, records section)
        self.window_bytes = 0

    def add(self, position: int, batch) -> None:
        if not isinstance(batch, RecordBatch) or batch.records_count <= 0:
            self.settle()  # legacy, empty or with an invalid count: on its own, as before
            n = scan_keys(batch, self.keys)
            if n:
                self._count(position, batch, n)
            return
        section = batch.records_section()  # a decompression error is this batch's, raised now
        if batch.is_control:
            self._control_types(batch, section)
        self.window.append((position, batch, section))
        self.window_bytes += len(section)
        self._count(position, batch, batch.records_count)
        if len(self.window) >= WINDOW_BATCHES or self.window_bytes >= WINDOW_BYTES:
            self.settle()

    def _control_types(self, batch: RecordBatch, section: bytes) -> None:
        """Note the control type of each record of a control batch (rare and tiny: decoded)."""
        try:
            types = [int(parse_control_type(record.key)[1]) for record in batch.records()]
        except Exception:  # the batch's own scan error, if it has one, comes first (as without windows)
            self.settle()
            scan_keys(batch, KeyColumns(), section=section)
            raise
        self.control_types += [(self.rows + i, t) for i, t in enumerate(types)]

    def _count(self, position: int, batch, n: int) -> None:
        self.rows += n
        self.batch.add(self.rows, (batch.base_offset, batch.last_offset, position, batch.producer_id,
                                   batch.producer_epoch, batch.is_transactional, batch.is_control,
                                   batch.delete_horizon_ms, batch.magic, batch.codec))

    def settle(self) -> None:
        window = self.window
        self.window, self.window_bytes = [], 0
        if len(window) > 1 and scan_batches([b for _, b, _ in window], [s for _, _, s in window], self.keys):
            return
        for position, batch, section in window:  # the first failing batch raises its own error
            with _Decoding(self.unit, position, batch):
                scan_keys(batch, self.keys, section=section)

    def flush(self) -> pa.RecordBatch:
        self.settle()
        n, unit, b, k = self.rows, self.unit, self.batch, self.keys
        key = k.key_array()
        value_size = _arrow(k.value_size, pa.int32())
        columns = {
            "topic": _constant(unit.topic, pa.string(), n),
            "partition": _constant(unit.partition, pa.int32(), n),
            "segment_base_offset": _constant(unit.segment_base_offset, pa.int64(), n),
            "batch_base_offset": b.expand("batch_base_offset", pa.int64()),
            "batch_last_offset": b.expand("batch_last_offset", pa.int64()),
            "batch_position": b.expand("batch_position", pa.int64()),
            "offset": _arrow(k.offset, pa.int64()),
            "timestamp": _arrow(k.timestamp, pa.int64()),
            "key": key,
            "value_is_null": pc.less(value_size, 0),
            "value_size": value_size,
            "record_span_start": _arrow(k.span_start, pa.int32()),
            "record_span_size": _arrow(k.span_size, pa.int32()),
            "producer_id": b.expand("producer_id", pa.int64()),
            "producer_epoch": b.expand("producer_epoch", pa.int16()),
            "is_transactional": b.expand("is_transactional", pa.bool_()),
            "is_control": b.expand("is_control", pa.bool_()),
            "control_type": _sparse(self.control_types, n, pa.int16()),
            "delete_horizon_ms": b.expand("delete_horizon_ms", pa.int64()),
            "magic": b.expand("magic", pa.int8()),
            "codec": b.expand("codec", pa.int8()),
        }
        out = pa.RecordBatch.from_arrays([columns[f.name] for f in NARROW_SCHEMA], schema=NARROW_SCHEMA)
        self._reset()
        return out


def _sparse(values: list[tuple[int, int]], n: int, type_: pa.DataType) -> pa.Array:
    """A column of `n` nulls but for the (row, value) pairs given."""
    if not values:
        return pa.nulls(n, type_)
    column: list = [None] * n
    for row, value in values:
        column[row] = value
    return pa.array(column, type_)


_RECORD_BATCH_FIELDS = ("timestamp_type", "producer_id", "producer_epoch", "base_sequence", "is_transactional",
                        "is_control", "leader_epoch", "codec", "batch_base_offset")


class RecordsBuilder(_ViewBuilder):
    """The full view: every record decoded, with headers; Spark's Kafka source columns first."""
    schema = RECORDS_SCHEMA

    def __init__(self, unit: WorkUnit):
        super().__init__(unit)
        self._reset()

    def _reset(self) -> None:
        self.keys, self.values, self.offsets, self.timestamps, self.headers = [], [], [], [], []
        self.batch = _BatchColumns(_RECORD_BATCH_FIELDS)
        self.rows = 0

    def add(self, position: int, batch) -> None:
        records = batch.records()
        if not records:
            return
        for record in records:
            self.keys.append(record.key)
            self.values.append(record.value)
            self.offsets.append(record.offset)
            self.timestamps.append(record.timestamp)
            self.headers.append(list(record.headers) if record.headers else None)
        self.rows += len(records)
        self.batch.add(self.rows, (batch.timestamp_type, batch.producer_id, batch.producer_epoch,
                                   batch.base_sequence, batch.is_transactional, batch.is_control,
                                   batch.partition_leader_epoch, batch.codec, batch.base_offset))

    def flush(self) -> pa.RecordBatch:
        n, unit, b = self.rows, self.unit, self.batch
        offset = pa.array(self.offsets, pa.int64())
        millis = pa.array(self.timestamps, pa.int64())
        try:
            timestamp = pc.multiply_checked(millis, 1000).cast(TIMESTAMP_TYPE)
        except pa.ArrowInvalid:
            raise CorruptBatchError("a record timestamp is outside the range a Spark timestamp holds",
                                    file=unit.path, position=unit.start) from None
        batch_base = b.expand("batch_base_offset", pa.int64())
        columns = {
            "key": pa.array(self.keys, pa.binary()),
            "value": pa.array(self.values, pa.binary()),
            "topic": _constant(unit.topic, pa.string(), n),
            "partition": _constant(unit.partition, pa.int32(), n),
            "offset": offset,
            "timestamp": timestamp,
            "timestampType": b.expand("timestamp_type", pa.int32()),
            "headers": pa.array(self.headers, HEADERS_TYPE),
            "producer_id": b.expand("producer_id", pa.int64()),
            "producer_epoch": b.expand("producer_epoch", pa.int16()),
            "base_sequence": record_sequences(b.expand("base_sequence", pa.int64()), offset, batch_base),
            "is_transactional": b.expand("is_transactional", pa.bool_()),
            "is_control": b.expand("is_control", pa.bool_()),
            "leader_epoch": b.expand("leader_epoch", pa.int32()),
            "codec": b.expand("codec", pa.int8()),
            "segment_base_offset": _constant(unit.segment_base_offset, pa.int64(), n),
            "batch_base_offset": batch_base,
        }
        out = pa.RecordBatch.from_arrays([columns[f.name] for f in RECORDS_SCHEMA], schema=RECORDS_SCHEMA)
        self._reset()
        return out


def record_sequences(base_sequence: pa.Array, offset: pa.Array, batch_base_offset: pa.Array) -> pa.Array:
    """Each record's sequence: the batch's base sequence plus the record's offset delta, wrapping
    past 2^31-1 to 0 as Kafka's producer sequences do; -1 where the batch has none."""
    raw = pc.add(base_sequence, pc.subtract(offset, batch_base_offset))
    wrapped = pc.if_else(pc.greater(raw, INT32_MAX), pc.subtract(raw, INT32_MAX + 1), raw)
    return pc.if_else(pc.less(base_sequence, 0), -1, wrapped).cast(pa.int32())


class BatchesBuilder(_ViewBuilder):
    """One row per batch (legacy compressed wrappers are decompressed for their base offset and count)."""
    schema = BATCHES_SCHEMA

    def __init__(self, unit: WorkUnit):
        super().__init__(unit)
        self._reset()

    def _reset(self) -> None:
        self.columns = {f.name: [] for f in BATCHES_SCHEMA}
        self.rows = 0

    def add(self, position: int, batch) -> None:
        control_type = coordinator_epoch = None
        if batch.is_control:
            records = batch.records()
            if records:
                _, ctype = parse_control_type(records[0].key)
                control_type = int(ctype)
                if ctype in (ControlType.ABORT, ControlType.COMMIT):
                    coordinator_epoch = parse_coordinator_epoch(records[0].value)
        v2 = isinstance(batch, RecordBatch)
        values = {
            "topic": self.unit.topic, "partition": self.unit.partition,
            "segment_base_offset": self.unit.segment_base_offset, "batch_position": position,
            "batch_size": batch.size, "base_offset": batch.base_offset, "last_offset": batch.last_offset,
            "record_count": batch.records_count, "base_timestamp": batch.base_timestamp if v2 else batch.timestamp,
            "max_timestamp": batch.max_timestamp, "timestamp_type": batch.timestamp_type,
            "producer_id": batch.producer_id, "producer_epoch": batch.producer_epoch,
            "base_sequence": batch.base_sequence, "last_sequence": batch.last_sequence,
            "is_transactional": batch.is_transactional, "is_control": batch.is_control,
            "control_type": control_type, "coordinator_epoch": coordinator_epoch,
            "delete_horizon_ms": batch.delete_horizon_ms, "leader_epoch": batch.partition_leader_epoch,
            "magic": batch.magic, "codec": batch.codec, "crc": batch.crc,
        }
        for name, value in values.items():
            self.columns[name].append(value)
        self.rows += 1

    def flush(self) -> pa.RecordBatch:
        out = pa.RecordBatch.from_arrays([pa.array(self.columns[f.name], f.type) for f in BATCHES_SCHEMA],
                                         schema=BATCHES_SCHEMA)
        self._reset()
        return out


BUILDERS = {"narrow": NarrowBuilder, "records": RecordsBuilder, "batches": BatchesBuilder}


def _offset_mask(batch: pa.RecordBatch, view: str, flt: ScanFilter) -> pa.Array | None:
    if view == "batches":
        low, high = batch.column("base_offset"), batch.column("last_offset")
    else:
        low = high = batch.column("offset")
    mask = None
    if flt.start_offset is not None:
        mask = pc.greater_equal(high, flt.start_offset)
    if flt.end_offset is not None:
        below = pc.less(low, flt.end_offset)
        mask = below if mask is None else pc.and_(mask, below)
    return mask


def read_unit(unit: WorkUnit, fs: LogFileSystem, view: str = "narrow", flt: ScanFilter = ScanFilter(), *,
              verify_crc: bool = True, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Decode one work unit into Arrow record batches of `view`, keeping offsets the filter selects.

    Errors name the `.log` file and the byte position: any failure while decoding a batch is a
    `KafkaLogError` (the codec's, located in the file, or a CorruptBatchError wrapping the rest).
    """
    builder = BUILDERS[view](unit)
    try:
        yield from _read_unit(unit, fs, builder, view, flt, verify_crc, batch_rows)
    except Exception:
        builder.settle()  # the batches it holds back come first: the first of them to fail raises
        raise


def _read_unit(unit: WorkUnit, fs: LogFileSystem, builder: _ViewBuilder, view: str, flt: ScanFilter,
               verify_crc: bool, batch_rows: int) -> Iterator[pa.RecordBatch]:
    reader = SegmentReader(fs, unit.path, unit.end, unit.start,
                           torn_tail_ok=unit.next_base_offset is None or not unit.is_last_range,
                           offset_range=(unit.segment_base_offset, unit.next_base_offset))
    start, end = flt.start_offset, flt.end_offset
    low, high = unit.low_offset, unit.high_offset
    completed = True
    iterator = iter(reader)
    while True:
        try:
            item = next(iterator, None)
        except KafkaLogError:
            raise
        except Exception as err:  # an I/O failure: name the file and where the reader was
            raise KafkaLogError(f"cannot read: {type(err).__name__}: {err}", file=unit.path,
                                position=reader.end_position) from err
        if item is None:
            break
        position, batch = item
        with _Decoding(unit, position, batch):
            last, first = batch.last_offset, first_offset(batch)
            if (high is not None and last >= high) or (low is not None and first is not None and first < low):
                raise CorruptIndexError(
                    f"the offset index of the segment disagrees with the log: the batch at byte {position} "
                    f"holds offsets up to {last}{'' if first is None else f' from {first}'}, outside the "
                    f"range [{low}, {high}) that the index gives bytes [{unit.start}, {unit.end})",
                    file=unit.index_path or unit.path, position=position, offset=last)
            if end is not None and first is not None and first >= end:
                completed = False  # offsets only grow within a segment: nothing further is wanted
                break
            if start is not None and last < start:
                continue
            if verify_crc:
                batch.verify()
            builder.add(position, batch)
        if builder.rows >= batch_rows:
            yield _filtered(builder.flush(), view, flt)
    if completed and not unit.is_last_range and (reader.truncated_tail is not None or reader.end_position != unit.end):
        raise CorruptIndexError(
            f"the range [{unit.start}, {unit.end}) cut at an offset-index entry does not end at a batch "
            f"boundary: the last whole batch ends at byte {reader.end_position}",
            file=unit.index_path or unit.path, position=unit.end)
    if builder.rows:
        yield _filtered(builder.flush(), view, flt)


class _Decoding:
    """A block decoding the batch at `position` of the unit's file: what it raises leaves as a
    KafkaLogError naming the file and byte (the codec's, located, or a CorruptBatchError wrapping
    anything else)."""
    __slots__ = ("unit", "position", "batch")

    def __init__(self, unit: WorkUnit, position: int, batch):
        self.unit, self.position, self.batch = unit, position, batch

    def __enter__(self) -> None:
        pass

    def __exit__(self, kind, err, traceback) -> None:
        if not isinstance(err, Exception) or isinstance(err, KafkaLogError) and err.file is not None:
            return
        if isinstance(err, KafkaLogError):
            raise locate(err, self.unit.path, self.position, self.batch) from None
        raise CorruptBatchError(f"cannot decode the batch: {type(err).__name__}: {err}", file=self.unit.path,
                                position=self.position, offset=getattr(self.batch, "last_offset", None)) from err


def _filtered(batch: pa.RecordBatch, view: str, flt: ScanFilter) -> pa.RecordBatch:
    mask = _offset_mask(batch, view, flt) if flt.has_offsets else None
    return batch if mask is None else batch.filter(mask)


def read_task(root: str, units: Sequence[WorkUnit], view: str = "narrow", flt: ScanFilter = ScanFilter(), *,
              verify_crc: bool = True, batch_rows: int = DEFAULT_BATCH_ROWS,
              stats: IOStats | None = None) -> Iterator[pa.RecordBatch]:
    """Decode the units of one task, in order; every read is counted in `stats`."""
    fs = filesystem(root)
    if stats is not None:
        fs = CountingFileSystem(fs, stats)
    for unit in units:
        for batch in read_unit(unit, fs, view, flt, verify_crc=verify_crc, batch_rows=batch_rows):
            if batch.num_rows:
                yield batch


# -- Spark -----------------------------------------------------------------------------------------

class ScanMetrics:
    """What a scan's tasks read, gathered with a Spark accumulator (classic sessions), plus what
    planning read on the driver: `executor` and `driver` are `IOStats` (opens and bytes per file)."""

    def __init__(self, spark):
        from pyspark.accumulators import AccumulatorParam

        class _Param(AccumulatorParam):
            def zero(self, value):
                return {}

            def addInPlace(self, a, b):
                for path, (opens, nbytes) in b.items():
                    o, n = a.get(path, (0, 0))
                    a[path] = (o + opens, n + nbytes)
                return a
        self._accumulator = spark.sparkContext.accumulator({}, _Param())
        self.driver = IOStats()

    @property
    def executor(self) -> IOStats:
        stats = IOStats()
        stats.merge(self._accumulator.value)
        return stats


def default_min_tasks(spark) -> int:
    """Twice the default parallelism (so both halves of a skewed plan keep every core busy)."""
    try:
        return 2 * int(spark.sparkContext.defaultParallelism)
    except Exception:  # Spark Connect has no SparkContext
        return 4


def scan_dataframe(spark, plan: ScanPlan, view: str, *, verify_crc: bool = True,
                   batch_rows: int = DEFAULT_BATCH_ROWS, metrics: ScanMetrics | None = None,
                   columns: Sequence[str] | None = None):
    """Run a plan with `mapInArrow`: one Spark partition (task) per planned task. `columns` projects
    the view on the executors, before Spark converts it: a column the caller does not read then
    costs the JVM nothing."""
    arrow_schema = SCHEMAS[view] if columns is None else pa.schema([SCHEMAS[view].field(c) for c in columns])
    schema = spark_schema(arrow_schema)
    tasks = plan.tasks
    if not tasks:
        return spark.createDataFrame([], schema)
    root, flt = plan.root, plan.flt
    accumulator = metrics._accumulator if metrics is not None else None

    def run(iterator):
        for ids in iterator:
            for task_id in ids.column(0).to_pylist():
                stats = IOStats()
                for batch in read_task(root, tasks[task_id], view, flt, verify_crc=verify_crc,
                                       batch_rows=batch_rows, stats=stats):
                    yield batch if columns is None else batch.select(columns)
                if accumulator is not None:
                    accumulator.add(stats.as_dict())
    return spark.range(0, len(tasks), 1, len(tasks)).mapInArrow(run, schema)


def _scan(spark, view, log_dir, topics, partitions, start_offset, end_offset, max_bytes_per_task, min_tasks,
          verify_crc, metrics, columns=None):
    flt = ScanFilter.of(topics, partitions, start_offset, end_offset)
    plan = plan_scan(log_dir, flt, max_bytes_per_task=max_bytes_per_task,
                     min_tasks=default_min_tasks(spark) if min_tasks is None else min_tasks,
                     stats=metrics.driver if metrics is not None else None)
    return scan_dataframe(spark, plan, view, verify_crc=verify_crc, metrics=metrics, columns=columns)


def narrow_scan(spark, log_dir, topics=None, partitions=None, start_offset: int | None = None,
                end_offset: int | None = None, *, max_bytes_per_task: int = DEFAULT_MAX_BYTES_PER_TASK,
                min_tasks: int | None = None, verify_crc: bool = True, metrics: ScanMetrics | None = None,
                columns: Sequence[str] | None = None):
    """The compaction view of `log_dir` (`NARROW_SCHEMA`): one row per record with its key, value
    size and byte span, and its batch's header fields; values are not read. Offsets are selected in
    [start_offset, end_offset); segments and index ranges outside the selection are not opened.
    `columns` keeps only those columns, projected on the executors."""
    return _scan(spark, "narrow", log_dir, topics, partitions, start_offset, end_offset, max_bytes_per_task,
                 min_tasks, verify_crc, metrics, columns)


def read_records(spark, log_dir, topics=None, partitions=None, start_offset: int | None = None,
                 end_offset: int | None = None, *, max_bytes_per_task: int = DEFAULT_MAX_BYTES_PER_TASK,
                 min_tasks: int | None = None, verify_crc: bool = True, metrics: ScanMetrics | None = None):
    """The records of `log_dir` (`RECORDS_SCHEMA`): Spark's Kafka source columns (key, value, topic,
    partition, offset, timestamp, timestampType, headers; headers null when a record has none) plus
    producer_id, producer_epoch, base_sequence (the record's), is_transactional, is_control,
    leader_epoch, codec, segment_base_offset and batch_base_offset. Control records are included."""
    return _scan(spark, "records", log_dir, topics, partitions, start_offset, end_offset, max_bytes_per_task,
                 min_tasks, verify_crc, metrics)


def read_batches(spark, log_dir, topics=None, partitions=None, start_offset: int | None = None,
                 end_offset: int | None = None, *, max_bytes_per_task: int = DEFAULT_MAX_BYTES_PER_TASK,
                 min_tasks: int | None = None, verify_crc: bool = True, metrics: ScanMetrics | None = None):
    """One row per batch (`BATCHES_SCHEMA`), batches overlapping [start_offset, end_offset)."""
    return _scan(spark, "batches", log_dir, topics, partitions, start_offset, end_offset, max_bytes_per_task,
                 min_tasks, verify_crc, metrics)
