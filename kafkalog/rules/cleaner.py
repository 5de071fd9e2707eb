"""The log cleaner's decisions, as Kafka's LogCleanerManager and Cleaner make them.

Pure functions and small state machines over segment and batch metadata: which offsets are
cleanable, how dirty a log is, how segments are grouped into output segments, and what happens to
each batch (its transaction's fate, whether it must stay as an empty batch). The Spark plans call
them per partition on executors; nothing here reads a record's value.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ..codec.control import ControlType
from ..codec.filter import BatchRetention
from .aborted_txn import AbortedTxn
from .compaction_strategy import OFFSET, CompactionStrategy
from .partition_state import PartitionState
from .segment_meta import SegmentMeta

INT32_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


class CleanableRange(NamedTuple):
    first_dirty: int
    first_uncleanable: int  # rounded down to a segment boundary
    checkpoint_reset: bool  # the checkpoint was out of range and must be rewritten


def cleanable_offsets(
    segments: Sequence[SegmentMeta],
    *,
    checkpoint: int | None,
    log_start_offset: int,
    log_end_offset: int,
    last_stable_offset: int,
    min_compaction_lag_ms: int,
    now: int,
) -> CleanableRange:
    """LogCleanerManager.cleanableOffsets, then LogToClean's rounding."""
    first_dirty = log_start_offset if checkpoint is None else checkpoint
    reset = False
    if first_dirty < log_start_offset or first_dirty > log_end_offset:
        first_dirty, reset = log_start_offset, checkpoint is not None
    active_base = segments[-1].base_offset
    limit = min(last_stable_offset, active_base)
    if min_compaction_lag_ms > 0:
        for i, seg in enumerate(segments[:-1]):
            next_base = segments[i + 1].base_offset
            if next_base <= first_dirty:  # before the segment that holds the first dirty offset
                continue
            if seg.largest_timestamp > now - min_compaction_lag_ms:
                limit = min(limit, seg.base_offset)
                break
    uncleanable = max(first_dirty, limit)
    return CleanableRange(first_dirty, _segment_floor(segments, uncleanable), reset)


def _segment_floor(segments: Sequence[SegmentMeta], offset: int) -> int:
    """The base offset of the segment that holds `offset`."""
    floor = segments[0].base_offset
    for seg in segments:
        if seg.base_offset > offset:
            break
        floor = seg.base_offset
    return floor


class DirtyStats(NamedTuple):
    clean_bytes: int
    cleanable_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def dirty_stats(segments: Sequence[SegmentMeta], first_dirty: int, first_uncleanable: int) -> DirtyStats:
    """LogToClean's byte counts: a segment holding a mid-segment first dirty offset counts in both."""
    clean = sum(s.size for s in segments if s.base_offset < first_dirty)
    start = _segment_floor(segments, min(first_dirty, first_uncleanable))
    cleanable = sum(s.size for s in segments if start <= s.base_offset < first_uncleanable)
    return DirtyStats(clean, cleanable)


def max_compaction_delay(
    segments: Sequence[SegmentMeta], first_dirty: int, max_compaction_lag_ms: int, now: int
) -> int:
    """KIP-354 as implemented: how long the oldest dirty non-active segment has waited past the max
    lag (0 when none has)."""
    candidates = [
        s.first_batch_timestamp
        for i, s in enumerate(segments[:-1])
        if segments[i + 1].base_offset > first_dirty and 0 < s.first_batch_timestamp < LONG_MAX
    ]
    if not candidates:
        return 0
    clean_until = now - max(max_compaction_lag_ms, 0)
    earliest = min(candidates)
    return clean_until - earliest if earliest < clean_until else 0


def group_segments_by_size(
    segments: Sequence[SegmentMeta], max_size: int, max_index_size: int, first_uncleanable: int
) -> list[list[SegmentMeta]]:
    """Cleaner.groupSegmentsBySize: greedy groups bounded by segment.bytes, the index
    sizes, and offsets relative to the group's first base offset fitting in 31 bits."""
    groups = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_size, index_size, time_size = segments[i].size, segments[i].offset_index_bytes, segments[i].time_index_bytes
        i += 1
        while i < len(segments):
            s = segments[i]
            last_offset = (segments[i + 1].base_offset if i + 1 < len(segments) else first_uncleanable) - 1
            if (
                log_size + s.size > max_size
                or index_size + s.offset_index_bytes > max_index_size
                or time_size + s.time_index_bytes > max_index_size
                or (s.size > 0 and last_offset - group[0].base_offset > INT32_MAX)
            ):
                break
            group.append(s)
            log_size, index_size, time_size = (
                log_size + s.size,
                index_size + s.offset_index_bytes,
                time_size + s.time_index_bytes,
            )
            i += 1
        groups.append(group)
    return groups


class BatchMeta(NamedTuple):
    """The batch fields the transaction tracker reads."""

    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    is_transactional: bool
    is_control: bool
    control_type: int | None  # ControlType of the first record; None for a control batch with no records


@dataclass
class CleanedTransactionMetadata:
    """Kafka's transaction tracker for one cleaning pass: which data batches belong
    to aborted transactions, which markers may go, and which aborted transactions keep their
    `.txnindex` entry because data of theirs is still in the log."""

    aborted: list = field(default_factory=list)  # heap of (first_offset, AbortedTxn)
    ongoing_aborted: dict = field(default_factory=dict)  # producer id -> [AbortedTxn, observed: bool]
    ongoing_committed: set = field(default_factory=set)
    kept_aborted: list = field(default_factory=list)  # entries for the output .txnindex, in marker order

    def add_aborted(self, txns: Sequence[AbortedTxn]) -> None:
        for txn in txns:
            heapq.heappush(self.aborted, (txn.first_offset, txn.last_offset, txn))

    def _consume_up_to(self, offset: int) -> None:
        while self.aborted and self.aborted[0][0] <= offset:
            txn = heapq.heappop(self.aborted)[2]
            self.ongoing_aborted.setdefault(txn.producer_id, [txn, False])

    def on_batch_read(self, batch: BatchMeta) -> bool:
        """A data batch: True when it belongs to an aborted transaction (its records may go)."""
        self._consume_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        ongoing = self.ongoing_aborted.get(batch.producer_id)
        if ongoing is not None:
            ongoing[1] = True
            return True
        self.ongoing_committed.add(batch.producer_id)
        return False

    def on_control_batch_read(self, batch: BatchMeta) -> bool:
        """A control batch: True when its marker may be discarded (its transaction has no data left)."""
        self._consume_up_to(batch.last_offset)
        if batch.control_type is None:
            return True
        if batch.control_type == ControlType.ABORT:
            ongoing = self.ongoing_aborted.pop(batch.producer_id, None)
            if ongoing is not None and ongoing[1]:
                self.kept_aborted.append(ongoing[0])
                return False
            return True
        if batch.control_type == ControlType.COMMIT:
            if batch.producer_id in self.ongoing_committed:
                self.ongoing_committed.discard(batch.producer_id)
                return False
            return True
        return False


class BatchDecision(NamedTuple):
    retention: BatchRetention
    discard_records: bool  # every record goes (aborted data, or an expired empty-transaction marker)
    contains_marker_for_empty_txn: bool


def decide_batch(
    batch: BatchMeta,
    tracker: CleanedTransactionMetadata,
    *,
    delete_horizon_ms: int | None,
    active_producers: dict[int, tuple[int, int]],
    upper_bound: int,
    now: int,
) -> BatchDecision:
    """Cleaner.checkBatchRetention for one batch; `delete_horizon_ms` is the batch's
    own horizon (attribute bit 6), if it has one."""
    can_discard = tracker.on_control_batch_read(batch) if batch.is_control else tracker.on_batch_read(batch)
    if batch.is_control:
        discard_records = can_discard and delete_horizon_ms is not None and delete_horizon_ms <= now
    else:
        discard_records = can_discard
    if batch.producer_id >= 0 and _is_last_of_producer(batch, active_producers):
        retention = BatchRetention.RETAIN_EMPTY
    elif batch.last_offset + 1 == upper_bound:
        retention = BatchRetention.RETAIN_EMPTY
    elif discard_records:
        retention = BatchRetention.DELETE
    else:
        retention = BatchRetention.DELETE_EMPTY
    return BatchDecision(retention, discard_records, can_discard and batch.is_control)


def _is_last_of_producer(batch: BatchMeta, active_producers: dict[int, tuple[int, int]]) -> bool:
    entry = active_producers.get(batch.producer_id)
    if entry is None:
        return False
    last_data_offset, epoch = entry
    if last_data_offset >= 0:
        return batch.last_offset == last_data_offset
    return batch.is_control and batch.producer_epoch == epoch


# -- a partition as the cleaner sees it (LogToClean) ------------------------------------------------


@dataclass
class LogToClean:
    """One compacted partition's cleaning inputs, read from metadata, index tails and producer state."""

    topic: str
    partition: int
    path: str
    segments: list
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    last_stable_offset: int
    checkpoint: int | None
    range: CleanableRange
    stats: DirtyStats
    max_compaction_delay_ms: int
    active_producers: dict
    aborted_txns: list
    legacy_delete_horizon_ms: int
    eligible: bool = False
    reason: str = ""
    strategy: CompactionStrategy = OFFSET  # KIP-280's: which record of a key the offset map keeps

    @property
    def upper_bound(self) -> int:
        return self.range.first_uncleanable

    def cleanable_segments(self) -> list:
        """Every segment below the first uncleanable offset: a pass rewrites the whole log prefix."""
        return [s for s in self.segments if s.base_offset < self.range.first_uncleanable]


def log_to_clean(
    topic: str,
    partition: int,
    path: str,
    segments: list[SegmentMeta],
    loaded: PartitionState,
    checkpoint: int | None,
    aborted: list[AbortedTxn],
    config,
    now: int,
    *,
    force: bool = False,
) -> LogToClean:
    """Decide whether to clean a partition from what its files say, read by the caller: its
    segments' metadata, its offsets and producer state as a broker loads them, its
    `cleaner-offset-checkpoint` entry and its aborted transactions."""
    manager = loaded.producers
    manager.remove_expired(now, config.producer_id_expiration_ms)  # expiry spares open transactions: the LSO holds
    log_start, log_end, high_watermark, lso = (
        loaded.log_start_offset,
        loaded.log_end_offset,
        loaded.high_watermark,
        loaded.last_stable_offset,
    )
    rng = cleanable_offsets(
        segments,
        checkpoint=checkpoint,
        log_start_offset=log_start,
        log_end_offset=log_end,
        last_stable_offset=lso,
        min_compaction_lag_ms=config.min_compaction_lag_ms,
        now=now,
    )
    stats = dirty_stats(segments, rng.first_dirty, rng.first_uncleanable)
    delay = max_compaction_delay(segments, rng.first_dirty, config.max_compaction_lag_ms, now)
    clean_before = [s for s in segments if s.base_offset < rng.first_dirty]
    legacy_horizon = clean_before[-1].mtime_ms - config.delete_retention_ms if clean_before else 0
    state = LogToClean(
        topic,
        partition,
        path,
        segments,
        log_start,
        log_end,
        high_watermark,
        lso,
        checkpoint,
        rng,
        stats,
        delay,
        manager.active_producers(),
        aborted,
        legacy_horizon,
        strategy=CompactionStrategy.of(config.compaction_strategy, config.compaction_strategy_header),
    )
    state.eligible, state.reason = _eligibility(state, config.min_cleanable_dirty_ratio, force)
    return state


def _eligibility(state: LogToClean, min_ratio: float, force: bool) -> tuple[bool, str]:
    ratio = state.stats.cleanable_ratio
    if not state.cleanable_segments():
        return (
            False,
            "no cleanable segment: the active segment, an open transaction or "
            "min.compaction.lag.ms holds the whole log",
        )
    if force:
        return True, f"forced (dirty ratio {ratio:.3f})"
    if state.max_compaction_delay_ms > 0 and state.stats.cleanable_bytes > 0:
        return True, f"max.compaction.lag.ms passed {state.max_compaction_delay_ms} ms ago"
    if ratio > min_ratio:
        return True, f"dirty ratio {ratio:.3f} > min.cleanable.dirty.ratio {min_ratio}"
    return False, f"dirty ratio {ratio:.3f} <= min.cleanable.dirty.ratio {min_ratio}"
