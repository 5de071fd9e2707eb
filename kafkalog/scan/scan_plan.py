"""Planning a scan on the driver, from metadata: what to read (`ScanFilter`), the byte ranges of
segments that executors decode (`WorkUnit`), and how they are packed into tasks (`ScanPlan`).

Segments are pruned by topic, partition and offset range (a segment whose offsets lie outside the
range is never opened); a segment larger than the task size is cut into byte ranges at offset-index
entries, which are batch starts, and the ranges are checked to tile the file. Plain Python: no
Spark, no segment body read (but the tail of an active segment when a start offset may lie past it).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

from .. import tuning
from ..storage.index import OffsetPosition
from ..storage.logdir import LogDir
from ..storage.remote_log import RemoteStorage, with_remote_segments
from ..storage.segment import LogSegment
from .inventory import IOStats, list_segments, log_dir_uri, open_log_dir

# -- what to read ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScanFilter:
    """Which records to read: topics and partition numbers (None: all), (topic, partition) pairs
    (None: all) and offsets in [start_offset, end_offset) (None: unbounded).

    `offset_ranges` narrow the offsets of single partitions further: entries ((topic, partition),
    start, end), bounds None where unbounded. With `committed_only` (a read_committed consumer's
    view), control records and the records of the aborted transactions in `aborted` (entries
    ((topic, partition), ((producer id, first offset, last offset), ...))) are left out.
    `for_partition` gives the plain filter of one partition."""

    topics: frozenset | None = None
    partitions: frozenset | None = None
    start_offset: int | None = None
    end_offset: int | None = None
    topic_partitions: frozenset | None = None
    offset_ranges: tuple = ()
    committed_only: bool = False
    aborted: tuple = ()

    @classmethod
    def of(cls, topics=None, partitions=None, start_offset=None, end_offset=None) -> ScanFilter:
        if isinstance(topics, str):
            topics = [topics]
        if isinstance(partitions, int):
            partitions = [partitions]
        return cls(
            None if topics is None else frozenset(topics),
            None if partitions is None else frozenset(int(p) for p in partitions),
            None if start_offset is None else int(start_offset),
            None if end_offset is None else int(end_offset),
        )

    def and_(self, other: ScanFilter) -> ScanFilter:
        """Both filters at once."""

        def meet(a, b):
            return b if a is None else a if b is None else a & b

        def bound(a, b, pick):
            return b if a is None else a if b is None else pick(a, b)

        return ScanFilter(
            meet(self.topics, other.topics),
            meet(self.partitions, other.partitions),
            bound(self.start_offset, other.start_offset, max),
            bound(self.end_offset, other.end_offset, min),
            meet(self.topic_partitions, other.topic_partitions),
            self.offset_ranges + other.offset_ranges,
            self.committed_only or other.committed_only,
            self.aborted + other.aborted,
        )

    def for_partition(self, topic: str, partition: int) -> ScanFilter:
        """The filter of one partition: its own offset range and aborted transactions folded in."""
        if not self.offset_ranges and not self.aborted:
            return self
        start, end = self.start_offset, self.end_offset
        for low, high in self._by_partition[0].get((topic, partition), ()):
            start = low if start is None else start if low is None else max(start, low)
            end = high if end is None else end if high is None else min(end, high)
        aborted = tuple(self._by_partition[1].get((topic, partition), ()))
        return ScanFilter(
            self.topics,
            self.partitions,
            start,
            end,
            self.topic_partitions,
            (),
            self.committed_only,
            (((topic, partition), aborted),),
        )

    @cached_property
    def _by_partition(self) -> tuple[dict, dict]:
        """`offset_ranges` and `aborted` by partition: (low, high) bounds and aborted transactions."""
        ranges: dict = {}
        aborted: dict = {}
        for key, low, high in self.offset_ranges:
            ranges.setdefault(key, []).append((low, high))
        for key, txns in self.aborted:
            aborted.setdefault(key, []).extend(txns)
        return ranges, aborted

    @property
    def aborted_txns(self) -> tuple:
        """(producer id, first offset, last offset) of every aborted transaction of the filter's partitions."""
        return tuple(txn for _, txns in self.aborted for txn in txns)

    @property
    def has_offsets(self) -> bool:
        return self.start_offset is not None or self.end_offset is not None

    @property
    def is_empty(self) -> bool:
        return (
            (self.start_offset is not None and self.end_offset is not None and self.start_offset >= self.end_offset)
            or self.topics == frozenset()
            or self.partitions == frozenset()
            or self.topic_partitions == frozenset()
        )

    def accepts_partition(self, topic: str, partition: int) -> bool:
        return (
            (self.topics is None or topic in self.topics)
            and (self.partitions is None or partition in self.partitions)
            and (self.topic_partitions is None or (topic, partition) in self.topic_partitions)
        )

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

    @classmethod
    def of_segment(cls, seg: LogSegment, start: int, end: int, low: int | None = None, high: int | None = None):
        """Bytes [start, end) of `seg` (`low`, `high`: the offsets the index gives them, if any)."""
        index_path = seg.files[".index"].path if ".index" in seg.files else None
        return cls(
            seg.topic,
            seg.partition,
            seg.base_offset,
            seg.log_path,
            start,
            end,
            seg.size,
            low,
            high,
            index_path,
            seg.next_base_offset,
        )

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


def prune_segments(segments: Iterable[LogSegment], flt: ScanFilter) -> list[LogSegment]:
    """The segments the filter can need: selected topic and partition, offsets overlapping the
    range (offsets of a segment are below the next segment's base offset), not empty."""
    if flt.is_empty:
        return []
    return [
        s
        for s in segments
        if s.size > 0
        and flt.accepts_partition(s.topic, s.partition)
        and flt.for_partition(s.topic, s.partition).overlaps(*s.offset_bounds)
    ]


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


def split_ranges(
    size: int, entries: Sequence[OffsetPosition], max_bytes: int, base_offset: int, forced: Iterable[int] = ()
) -> list[tuple[int, int, int | None, int | None]]:
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
    ranges: list[tuple[int, int, int | None, int | None]] = []
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


def plan_units(
    segments: Iterable[LogSegment],
    flt: ScanFilter,
    *,
    unit_bytes: int,
    read_index: Callable[[LogSegment], list[OffsetPosition]] = lambda seg: seg.offset_index_entries,
    seek_min_bytes: int | None = None,
) -> list[WorkUnit]:
    """Work units for the pruned segments: whole segments, or index-cut ranges of segments larger
    than `unit_bytes`; with an offset range, index ranges wholly outside it are dropped."""
    seek_min_bytes = tuning.SEEK_MIN_BYTES if seek_min_bytes is None else seek_min_bytes
    units = []
    whole = flt
    for seg in prune_segments(segments, whole):
        flt = whole.for_partition(seg.topic, seg.partition)
        seeks = flt.has_offsets and seg.size >= seek_min_bytes
        has_index = ".index" in seg.files
        entries = read_index(seg) if (seg.size > unit_bytes or seeks) and has_index else []
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
            units.append(
                WorkUnit.of_segment(seg, start, end, low if start > 0 else None, high if end < seg.size else None)
            )
    return units


def unit_of_offsets(seg: LogSegment, low: int, high: int) -> WorkUnit:
    """The bytes of `seg` holding its batches with offsets in [low, high), cut at offset-index
    entries (see `split_ranges`): from the greatest entry at or below `low` (whose batch ends at or
    below it) to the entry after the first one at or past `high - 1` (every batch from there on
    starts at `high` or later); the segment's own ends where no entry says more."""
    entries = seg.offset_index_entries if ".index" in seg.files else []
    start = lookup(entries, seg.base_offset, low).position if low > seg.base_offset else 0
    past = bisect_left([e.offset for e in entries], high - 1) + 1  # the entry after the first >= high - 1
    end = entries[past].position if past < len(entries) and entries[past].position > start else seg.size
    return WorkUnit.of_segment(seg, start, end)


def task_bytes(total_bytes: int, max_bytes: int, min_tasks: int) -> int:
    """The size a task aims at: `max_bytes`, smaller when that leaves fewer than `min_tasks` tasks."""
    if min_tasks <= 1:
        return max_bytes
    return max(1, min(max_bytes, max(tuning.MIN_SPLIT_BYTES, math.ceil(total_bytes / min_tasks))))


T = TypeVar("T")


def pack(
    items: Iterable[T], nbytes: Callable[[T], int], target_bytes: int, open_cost: int | None = None
) -> list[tuple[T, ...]]:
    """Pack items, in order, into groups of about `target_bytes`, counting `nbytes(item)` plus
    `open_cost` for each (as Spark packs small files); an item larger than the target is a group
    of its own (`open_cost` None: tuning.OPEN_COST). The tasks of a scan, a decision or a rewrite:
    cost follows bytes, not items."""
    open_cost = tuning.OPEN_COST if open_cost is None else open_cost
    groups: list[tuple[T, ...]] = []
    current: list[T] = []
    current_bytes = 0
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


def pack_units(
    units: Sequence[WorkUnit], target_bytes: int, open_cost: int | None = None
) -> list[tuple[WorkUnit, ...]]:
    """Pack work units, in order, into tasks of about `target_bytes` (see `pack`)."""
    return pack(units, lambda unit: unit.nbytes, target_bytes, open_cost)


def plan_scan(
    log_dir,
    flt: ScanFilter = ScanFilter(),
    *,
    max_bytes_per_task: int | None = None,
    min_tasks: int = 1,
    open_cost: int | None = None,
    pack: bool = True,
    stats: IOStats | None = None,
    remote_storage: str | None = None,
    resolve: Callable[[LogDir], ScanFilter] | None = None,
) -> ScanPlan:
    """Plan a scan on the driver: list, prune, cut and pack. No `.log` is read, except the batch
    headers at the tail of an active segment when a start offset may lie past its end.

    `remote_storage` (tiered storage): a LocalTieredStorage directory on the log dir's filesystem
    whose remote segments are read before each partition's local ones (`remote_log.tiered_segments`).

    `max_bytes_per_task` caps both a task's bytes and a unit's (larger segments are cut);
    `min_tasks` lowers the target so that at least that many tasks exist where the data allows.
    `open_cost` is what opening a unit's file costs, in bytes: by default a request's worth on an
    object store (tuning.OPEN_COST), next to nothing on a local disk (tuning.SMALL_OPEN_COST).
    Without `pack`, every work unit is its own task. `resolve` narrows `flt` with what only the
    opened log dir can tell (the data source's options: which topics a pattern names, offsets of
    timestamps, transactions).
    """
    opened = open_log_dir(log_dir, stats)
    if resolve is not None:
        flt = flt.and_(resolve(opened))
    segments = list_segments(opened, flt.topics, flt.partitions)
    if remote_storage is not None:
        segments = with_remote_segments(opened, segments, RemoteStorage.open(remote_storage))
    read_active_tails(segments, flt)
    return plan_segments(
        log_dir_uri(log_dir),
        segments,
        flt,
        is_local=opened.fs.is_local,
        max_bytes_per_task=max_bytes_per_task,
        min_tasks=min_tasks,
        open_cost=open_cost,
        pack=pack,
    )


def read_active_tails(segments: Iterable[LogSegment], flt: ScanFilter) -> None:
    """Read the last offset of each active segment that a start offset of `flt` may lie past: no next
    base offset bounds it, and its last offset (the batches after the last offset-index entry) tells,
    through `offset_bounds`, whether it is needed."""
    for s in segments:
        start = flt.for_partition(s.topic, s.partition).start_offset
        if start is not None and s.is_active and s.base_offset < start and s.size > 0:
            s.last_offset()


def plan_segments(
    root: str,
    segments: Sequence[LogSegment],
    flt: ScanFilter,
    *,
    is_local: bool,
    max_bytes_per_task: int | None = None,
    min_tasks: int = 1,
    open_cost: int | None = None,
    pack: bool = True,
    whole_partitions: bool = False,
) -> ScanPlan:
    """`plan_scan` over segments a caller has listed already (a compaction plan's): prune, cut at
    offset-index entries (each index read once per segment object) and pack. With
    `whole_partitions`, a partition whose units fit in a task is never spread over two tasks (a
    compaction decides such a partition's keys inside its task). `max_bytes_per_task` None:
    tuning.MAX_BYTES_PER_TASK, read when the plan is made (so that a run can set it)."""
    if max_bytes_per_task is None:
        max_bytes_per_task = tuning.MAX_BYTES_PER_TASK
    if open_cost is None:
        open_cost = tuning.SMALL_OPEN_COST if is_local else tuning.OPEN_COST
    pruned = prune_segments(segments, flt)
    target = task_bytes(sum(s.size + open_cost for s in pruned), max_bytes_per_task, min_tasks)
    units = plan_units(pruned, flt, unit_bytes=max(1, min(target, max_bytes_per_task)))
    tasks: list[tuple[WorkUnit, ...]]
    if not pack:
        tasks = [(u,) for u in units]
    elif whole_partitions:
        tasks = pack_partitions(units, target, open_cost)
    else:
        tasks = pack_units(units, target, open_cost)
    return ScanPlan(root, flt, tuple(tasks), len(segments))


def pack_partitions(
    units: Sequence[WorkUnit], target_bytes: int, open_cost: int | None = None
) -> list[tuple[WorkUnit, ...]]:
    """`pack_units`, but a partition whose units fit in `target_bytes` (open costs counted) is never
    spread over two tasks; a larger one is packed unit by unit."""
    open_cost = tuning.OPEN_COST if open_cost is None else open_cost
    by_partition: dict = {}
    for unit in units:
        by_partition.setdefault((unit.topic, unit.partition), []).append(unit)
    groups: list[tuple[WorkUnit, ...]] = []
    for run in by_partition.values():
        cost = sum(u.nbytes + open_cost for u in run)
        groups += [tuple(run)] if cost <= target_bytes else [(u,) for u in run]
    tasks = pack(groups, lambda g: sum(u.nbytes + open_cost for u in g) - open_cost, target_bytes, open_cost)
    return [tuple(u for group in task for u in group) for task in tasks]
