"""A small reference model of one pass of Kafka's log cleaner over one partition held in memory.

Written straight from the spec (`shared/spec/kafka-log-layer.md` §5 and §6) as a second,
independent implementation of the rules the product applies with Spark: it shares the product's
codec (reading and writing batch bytes) and nothing else. Each function names the spec section it
follows; the order of the steps is the order of Kafka's `Cleaner.doClean`.

The model takes a partition as a list of segments, each `(base_offset, [batch bytes], mtime_ms)`
(the last one is the active segment), and returns the segments after one cleaning pass, with the
surviving aborted-transaction index entries of each output segment, the new cleaner checkpoint and
per-reason record counts. By default the offset map is exact and unbounded (as the product's);
`CleanerConfig.map_capacity` bounds it to reproduce Kafka tests that rely on a full map.
"""
from __future__ import annotations

import heapq
import struct
from dataclasses import dataclass, field, replace
from typing import Iterable, NamedTuple, Sequence

from kafkalog.codec.batch import RecordBatch, TimestampType, build_batch, build_empty_batch
from kafkalog.codec.control import ControlType, control_record
from kafkalog.codec.legacy import LegacyBatch, build_legacy_batch

LONG_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
LOG_OVERHEAD = 12  # offset + size: the bytes a batch's size field does not count

# Why a record read by the pass did or did not make it into the output (one count per record).
REASONS = ("kept", "superseded", "tombstone_expired", "aborted_transaction", "marker_removed", "unkeyed")


# -- inputs and outputs ---------------------------------------------------------------------------
class AbortedTxn(NamedTuple):
    """A `.txnindex` entry (§4.7): the data of `producer_id`'s aborted transaction spans
    [first_offset, last_offset]; the ABORT marker is at last_offset."""
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(frozen=True)
class CleanerConfig:
    """The topic and broker settings one pass depends on (Kafka's defaults).

    `producer_id_expiration_ms=None` never expires a producer (what Kafka's own cleaner tests see,
    since their clock never runs the expiration task). `map_capacity` is the number of keys the
    offset map holds before it is full (Kafka: int(slots * load factor)); None = unbounded.
    """
    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 0
    segment_bytes: int = 1_073_741_824
    segment_index_bytes: int = 10_485_760
    index_interval_bytes: int = 4096
    producer_id_expiration_ms: int | None = 86_400_000
    map_capacity: int | None = None


class Segment(NamedTuple):
    """An input segment. `batches` is a sequence of bytes objects, each one or more whole batches."""
    base_offset: int
    batches: Sequence[bytes]
    mtime_ms: int = 0


class OutputSegment(NamedTuple):
    base_offset: int
    batches: list[bytes]  # one whole batch per item, in file order
    mtime_ms: int
    aborted_txns: list[AbortedTxn]  # the segment's .txnindex, in marker order


@dataclass
class ProducerEntry:
    """What producer-state replay (§6.1) knows of one producer."""
    producer_id: int
    epoch: int = -1
    last_data_offset: int = -1  # lastOffset of the newest data batch of the current epoch
    last_sequence: int = -1
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    txn_first_offset: int | None = None  # first offset of the open transaction


@dataclass
class ProducerState:
    """The result of replaying a partition's batches (§6.1, §6.4)."""
    producers: dict[int, ProducerEntry]
    aborted_txns: list[AbortedTxn]  # as Kafka would have indexed them, in marker order
    completed: list[tuple[int, int]]  # (first offset, marker offset) of every completed transaction


@dataclass
class CleanResult:
    segments: list[OutputSegment]
    checkpoint: int  # the new cleaner-offset-checkpoint value (Kafka's endOffset)
    first_dirty: int
    first_uncleanable: int  # segment aligned
    checkpoint_reset: bool  # the given checkpoint was out of range (§5.3 step 2)
    cleaned: bool  # False when the cleanable range was empty and nothing was rewritten
    last_stable_offset: int
    counts: dict[str, int]  # REASONS plus batch and byte totals of the rewritten part
    producers: dict[int, ProducerEntry]  # state the pass used, before expiration
    active_producers: dict[int, ProducerEntry]  # after expiration at `now`

    @property
    def aborted_txns(self) -> list[AbortedTxn]:
        return [txn for seg in self.segments for txn in seg.aborted_txns]

    def as_input(self) -> list[Segment]:
        """The output as the input of another pass."""
        return [Segment(s.base_offset, list(s.batches), s.mtime_ms) for s in self.segments]


# -- reading batches ------------------------------------------------------------------------------
def split_batches(data: bytes) -> list:
    """The batches (v2 RecordBatch or legacy LegacyBatch) in `data`, which must hold whole batches."""
    out, pos = [], 0
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos + 8)
        end = pos + LOG_OVERHEAD + size
        chunk = bytes(data[pos:end])
        out.append(RecordBatch(chunk) if chunk[16] == 2 else LegacyBatch(chunk))
        pos = end
    return out


@dataclass
class _Seg:
    """A loaded input segment with the figures the cleaner reads from its files."""
    base_offset: int
    batches: list
    mtime_ms: int
    size: int = 0
    offset_index_bytes: int = 0
    time_index_bytes: int = 0
    max_timestamp: int = -1

    @property
    def read_next_offset(self) -> int:
        return self.batches[-1].next_offset if self.batches else self.base_offset

    @property
    def largest_timestamp(self) -> int:
        """LogSegment.largestTimestamp: the time index's last entry, else the file's mtime."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.mtime_ms


def load_segments(segments: Iterable, index_interval_bytes: int = 4096) -> list[_Seg]:
    """Parse `(base_offset, [batch bytes], mtime_ms)` segments, measuring sizes and index sizes."""
    segs = []
    for seg in segments:
        base, data, mtime = (tuple(seg) + (0,))[:3]
        batches = [b for chunk in data for b in split_batches(chunk)]
        s = _Seg(base, batches, mtime)
        _measure(s, index_interval_bytes)
        segs.append(s)
    if not segs:
        raise ValueError("a partition has at least one (the active) segment")
    for a, b in zip(segs, segs[1:]):
        if a.base_offset >= b.base_offset:
            raise ValueError(f"segment base offsets must increase: {a.base_offset} then {b.base_offset}")
    return segs


def _measure(seg: _Seg, interval: int) -> None:
    """Size and index sizes of a finished segment, its indexes built as LogSegment.recover does (§4.6)."""
    pos = last_indexed = 0
    offset_entries = time_entries = 0
    max_ts, last_time_entry = -1, -1
    for batch in seg.batches:
        if batch.max_timestamp > max_ts:
            max_ts = batch.max_timestamp
        if pos - last_indexed > interval:
            offset_entries += 1
            if max_ts > last_time_entry:
                time_entries += 1
                last_time_entry = max_ts
            last_indexed = pos
        pos += batch.size
    if max_ts > last_time_entry:  # the final entry written when the segment becomes inactive
        time_entries += 1
    seg.size, seg.max_timestamp = pos, max_ts
    seg.offset_index_bytes, seg.time_index_bytes = 8 * offset_entries, 12 * time_entries


# -- §6 producer state ----------------------------------------------------------------------------
def replay_producers(segments: Iterable, log_start_offset: int | None = None) -> ProducerState:
    """Producer-state replay of every v2 batch with a producer id, in offset order (§6.1), with the
    aborted transactions Kafka indexes on the way (§4.7: LSO = first offset of the earliest other
    open transaction, else marker + 1)."""
    segs = segments if segments and isinstance(segments[0], _Seg) else load_segments(segments)
    if log_start_offset is None:
        log_start_offset = segs[0].base_offset
    producers: dict[int, ProducerEntry] = {}
    aborted, completed = [], []
    for seg in segs:
        for batch in seg.batches:
            if batch.magic < 2 or not batch.has_producer_id or batch.last_offset < log_start_offset:
                continue
            entry = producers.setdefault(batch.producer_id, ProducerEntry(batch.producer_id))
            if not batch.is_control:
                if batch.producer_epoch != entry.epoch:  # a new epoch forgets the batch history
                    entry.epoch = batch.producer_epoch
                entry.last_data_offset = batch.last_offset
                entry.last_sequence = batch.last_sequence
                entry.last_timestamp = batch.max_timestamp
                if batch.is_transactional and entry.txn_first_offset is None:
                    entry.txn_first_offset = batch.base_offset
                continue
            marker = control_record(batch)
            if marker is None or marker.type not in (ControlType.ABORT, ControlType.COMMIT):
                continue  # an emptied control batch changes nothing
            if entry.txn_first_offset is not None:
                first = entry.txn_first_offset
                completed.append((first, batch.base_offset))
                if marker.type == ControlType.ABORT:
                    others = [p.txn_first_offset for p in producers.values()
                              if p is not entry and p.txn_first_offset is not None]
                    lso = min(others) if others else batch.base_offset + 1
                    aborted.append(AbortedTxn(batch.producer_id, first, batch.base_offset, lso))
            if batch.producer_epoch != entry.epoch:
                entry.epoch = batch.producer_epoch
                entry.last_data_offset = -1
                entry.last_sequence = -1
            entry.txn_first_offset = None
            entry.coordinator_epoch = marker.coordinator_epoch
            entry.last_timestamp = marker.timestamp
    return ProducerState(producers, aborted, completed)


def active_producers(producers: dict[int, ProducerEntry], now: int,
                     expiration_ms: int | None) -> dict[int, ProducerEntry]:
    """Producers the cleaner protects (§6.2): all but those expired at `now` (§6.3)."""
    if expiration_ms is None:
        return dict(producers)
    return {pid: e for pid, e in producers.items()
            if e.txn_first_offset is not None or now - e.last_timestamp < expiration_ms}


def last_stable_offset(state: ProducerState, high_watermark: int) -> int:
    """LSO (§6.4): the first offset of the earliest transaction still open or completed at or
    above the high watermark, capped by the high watermark."""
    unstable = [e.txn_first_offset for e in state.producers.values() if e.txn_first_offset is not None]
    unstable += [first for first, marker in state.completed if marker >= high_watermark]
    return min([high_watermark] + unstable)


# -- §5.3 cleanable range -------------------------------------------------------------------------
class CleanableRange(NamedTuple):
    first_dirty: int
    first_uncleanable: int  # rounded down to a segment boundary
    checkpoint_reset: bool


def _floor_base(segs: Sequence[_Seg], offset: int) -> int:
    base = segs[0].base_offset
    for s in segs:
        if s.base_offset <= offset:
            base = s.base_offset
    return base


def cleanable_range(segs: Sequence[_Seg], *, checkpoint: int | None, log_start_offset: int,
                    last_stable: int, min_compaction_lag_ms: int, now: int,
                    uncleanable_offset: int | None = None) -> CleanableRange:
    """LogCleanerManager.cleanableOffsets, then LogToClean's rounding to a segment base (§5.3, §5.2).
    `uncleanable_offset` replaces the computed first uncleanable offset, as Kafka's cleaner tests
    do when they build a LogToClean by hand."""
    log_end = segs[-1].read_next_offset
    first_dirty, reset = log_start_offset if checkpoint is None else checkpoint, False
    if checkpoint is not None and (checkpoint < log_start_offset or checkpoint > log_end):
        first_dirty, reset = log_start_offset, True
    active_base = segs[-1].base_offset
    if uncleanable_offset is None:
        limit = min(last_stable, active_base)
        if min_compaction_lag_ms > 0:
            dirty_floor = _floor_base(segs, first_dirty)
            for s in segs[:-1]:
                if s.base_offset >= dirty_floor and s.largest_timestamp > now - min_compaction_lag_ms:
                    limit = min(limit, s.base_offset)
                    break
        uncleanable = max(first_dirty, limit)
    else:
        uncleanable = uncleanable_offset
    return CleanableRange(first_dirty, min(_floor_base(segs, uncleanable), active_base), reset)


# -- §5.5 offset map ------------------------------------------------------------------------------
class OffsetMap:
    """Key bytes -> last offset. Exact (no hashing); `capacity` keys at most, like SkimpyOffsetMap's
    `size < slots * loadFactor` check, which refuses any put (even of a known key) once full."""

    def __init__(self, capacity: int | None):
        if capacity is not None and capacity < 1:
            raise ValueError("the offset map must hold at least one key")
        self.capacity = capacity
        self.offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    def put(self, key: bytes, offset: int) -> bool:
        if self.capacity is not None and len(self.offsets) >= self.capacity:
            return False
        self.offsets[key] = offset
        self.latest_offset = offset
        return True

    def get(self, key: bytes) -> int:
        return self.offsets.get(key, -1)


def _collect_aborted(segs: Sequence[_Seg], aborted: Sequence[AbortedTxn], start: int,
                     upper: int) -> list[AbortedTxn]:
    """UnifiedLog.collectAbortedTransactions (§6.5): from the segment holding `start` on, entries
    with lastOffset >= start and firstOffset < upper, until one has lastStableOffset >= upper."""
    floor = _floor_base(segs, start)
    out = []
    for txn in aborted:  # in marker order, i.e. segment after segment
        if txn.last_offset < floor:
            continue
        if txn.last_offset >= start and txn.first_offset < upper:
            out.append(txn)
        if txn.last_stable_offset >= upper:
            break
    return out


def build_offset_map(segs: Sequence[_Seg], start: int, end: int, aborted: Sequence[AbortedTxn],
                     capacity: int | None) -> OffsetMap:
    """Cleaner.buildOffsetMap (§5.5): the last offset of every key in [start, end), skipping the
    batches of aborted transactions; fast-forwarded over each fully read segment; stops when full."""
    omap = OffsetMap(capacity)
    tracker = TxnTracker()
    tracker.add_aborted(_collect_aborted(segs, aborted, start, end))
    dirty = [(i, s) for i, s in enumerate(segs)
             if s.base_offset < end and (i + 1 == len(segs) or segs[i + 1].base_offset > start)]
    for i, seg in dirty:
        next_start = segs[i + 1].base_offset if (i + 1 < len(segs) and segs[i + 1].base_offset < end) else end
        for batch in seg.batches:
            if batch.last_offset < start:
                continue  # before the dirty section: Kafka's index lookup starts at or before here
            if batch.is_control:
                tracker.on_control_batch(batch)
            elif not tracker.on_data_batch(batch):
                for record in batch.records():
                    if record.key is not None and record.offset >= start:
                        if not omap.put(record.key, record.offset):
                            return omap  # full: the pass ends at latest_offset + 1
            omap.latest_offset = batch.last_offset
        omap.latest_offset = next_start - 1
    return omap


# -- §5.6 grouping --------------------------------------------------------------------------------
def group_segments(segs: Sequence[_Seg], max_size: int, max_index_size: int,
                   first_uncleanable: int) -> list[list[_Seg]]:
    """Cleaner.groupSegmentsBySize: greedy groups within segment.bytes, segment.index.bytes (offset
    and time index alike) and a 2^31 offset range from the group's first base offset."""
    groups, i = [], 0
    while i < len(segs):
        group = [segs[i]]
        log_size, index_size, time_size = segs[i].size, segs[i].offset_index_bytes, segs[i].time_index_bytes
        i += 1
        while i < len(segs):
            s = segs[i]
            last_offset = segs[i + 1].base_offset - 1 if i + 1 < len(segs) else first_uncleanable - 1
            if not (log_size + s.size <= max_size and index_size + s.offset_index_bytes <= max_index_size
                    and time_size + s.time_index_bytes <= max_index_size
                    and (s.size == 0 or last_offset - group[0].base_offset <= INT32_MAX)):
                break
            group.append(s)
            log_size, index_size, time_size = (log_size + s.size, index_size + s.offset_index_bytes,
                                               time_size + s.time_index_bytes)
            i += 1
        groups.append(group)
    return groups


# -- §5.7.2 transaction tracker -------------------------------------------------------------------
class TxnTracker:
    """CleanedTransactionMetadata: which data batches belong to aborted transactions, and which
    markers no longer have data of their transaction behind them."""

    def __init__(self):
        self._heap: list[tuple[int, int, AbortedTxn]] = []
        self._seq = 0
        self.ongoing_aborted: dict[int, list] = {}  # pid -> [AbortedTxn, last observed batch offset]
        self.ongoing_committed: set[int] = set()
        self.cleaned_index: list[AbortedTxn] | None = None  # the output segment's .txnindex

    def add_aborted(self, txns: Iterable[AbortedTxn]) -> None:
        for txn in txns:
            heapq.heappush(self._heap, (txn.first_offset, self._seq, txn))
            self._seq += 1

    def _consume_up_to(self, offset: int) -> None:
        while self._heap and self._heap[0][0] <= offset:
            txn = heapq.heappop(self._heap)[2]
            self.ongoing_aborted.setdefault(txn.producer_id, [txn, None])

    def on_data_batch(self, batch) -> bool:
        """True when the batch is data of an aborted transaction."""
        self._consume_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        ongoing = self.ongoing_aborted.get(batch.producer_id)
        if ongoing is not None:
            ongoing[1] = batch.last_offset
            return True
        self.ongoing_committed.add(batch.producer_id)
        return False

    def on_control_batch(self, batch) -> bool:
        """True when the marker's transaction has no data left in this pass (discardable)."""
        self._consume_up_to(batch.last_offset)
        marker = control_record(batch)
        if marker is None:
            return True  # a control batch an earlier pass emptied
        if marker.type == ControlType.ABORT:
            ongoing = self.ongoing_aborted.pop(batch.producer_id, None)
            if ongoing is not None and ongoing[1] is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(ongoing[0])
                return False
            return True
        if marker.type == ControlType.COMMIT:
            if batch.producer_id in self.ongoing_committed:
                self.ongoing_committed.discard(batch.producer_id)
                return False
            return True
        return False


# -- §5.7-§5.9 batch and record decisions ---------------------------------------------------------
RETAIN_EMPTY, DELETE, DELETE_EMPTY = "RETAIN_EMPTY", "DELETE", "DELETE_EMPTY"


@dataclass
class _Pass:
    """What every batch decision of one pass shares."""
    omap: OffsetMap
    tracker: TxnTracker
    active: dict[int, ProducerEntry]
    upper_bound: int  # firstUncleanableOffset
    now: int
    delete_retention_ms: int
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))

    def is_last_of_producer(self, batch) -> bool:
        entry = self.active.get(batch.producer_id)
        if entry is None:
            return False
        if entry.last_data_offset >= 0:
            return batch.last_offset == entry.last_data_offset
        return batch.is_control and batch.producer_epoch == entry.epoch

    def clean_batch(self, batch, retain_legacy_deletes: bool) -> bytes | None:
        """The bytes that replace `batch` in the cleaned segment, or None (§5.7, §5.8, §5.9)."""
        v2 = batch.magic >= 2
        can_discard = (self.tracker.on_control_batch(batch) if batch.is_control
                       else self.tracker.on_data_batch(batch))
        if batch.is_control:
            discard_records = (can_discard and batch.has_delete_horizon
                               and batch.delete_horizon_ms <= self.now)
        else:
            discard_records = can_discard
        if batch.has_producer_id and self.is_last_of_producer(batch):
            retention = RETAIN_EMPTY
        elif batch.next_offset == self.upper_bound:
            retention = RETAIN_EMPTY  # keep the last offset before the uncleanable part
        elif discard_records:
            retention = DELETE
        else:
            retention = DELETE_EMPTY
        marker_for_empty_txn = can_discard and batch.is_control

        records = batch.records()
        retained, removed, tombstones = [], False, False
        for record in records:
            reason = self._record_fate(batch, record, discard_records, retain_legacy_deletes)
            self.counts[reason] += 1
            if reason == "kept":
                retained.append(record)
                tombstones = tombstones or record.value is None
            else:
                removed = True
        if retention == DELETE:
            return None
        if retained:
            set_horizon = v2 and (tombstones or marker_for_empty_txn) and not batch.has_delete_horizon
            inconsistent = not v2 and batch.has_inconsistent_inner_magic  # KAFKA-4298
            if not removed and not inconsistent and not set_horizon:
                return batch.data
            return self._reencode(batch, retained, set_horizon)
        if retention == RETAIN_EMPTY:
            if not v2:
                raise IllegalStateError("Empty batches are only supported for magic v2 and above")
            self.counts["empty_batches"] = self.counts.get("empty_batches", 0) + 1
            return build_empty_batch(
                base_offset=batch.base_offset, last_offset_delta=batch.last_offset_delta,
                max_timestamp=batch.max_timestamp, partition_leader_epoch=batch.partition_leader_epoch,
                producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                base_sequence=batch.base_sequence, timestamp_type=batch.timestamp_type,
                is_transactional=batch.is_transactional, is_control=batch.is_control)
        return None

    def _record_fate(self, batch, record, discard_records: bool, retain_legacy_deletes: bool) -> str:
        """Cleaner.shouldRetainRecord (§5.8), naming the reason a record goes."""
        if discard_records:
            return "marker_removed" if batch.is_control else "aborted_transaction"
        if batch.is_control or record.offset > self.omap.latest_offset:
            return "kept"
        if record.key is None:
            return "unkeyed"
        if record.offset < self.omap.get(record.key):
            return "superseded"
        if record.value is None:
            if batch.magic >= 2:
                retain_deletes = not batch.has_delete_horizon or self.now < batch.delete_horizon_ms
            else:
                retain_deletes = retain_legacy_deletes
            if not retain_deletes:
                return "tombstone_expired"
        return "kept"

    def _reencode(self, batch, retained, set_horizon: bool) -> bytes:
        """buildRetainedRecordsInto (§5.9): same codec, producer fields and offset range."""
        log_append = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
        if batch.magic < 2:
            return build_legacy_batch(retained, magic=batch.magic, codec=batch.codec,
                                      timestamp_type=batch.timestamp_type,
                                      log_append_time=batch.max_timestamp if log_append else None)
        if set_horizon:
            horizon = self.now + self.delete_retention_ms
            if horizon > LONG_MAX:  # Java's long addition wraps, and the builder ignores a negative horizon
                horizon -= 2**64
            if horizon < 0:
                horizon = None
        else:
            horizon = batch.delete_horizon_ms  # kept when the batch already has one, else None
        return build_batch(retained, base_offset=batch.base_offset, codec=batch.codec,
                           last_offset_delta=batch.last_offset_delta, timestamp_type=batch.timestamp_type,
                           log_append_time=batch.max_timestamp if log_append else None,
                           partition_leader_epoch=batch.partition_leader_epoch,
                           producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                           base_sequence=batch.base_sequence, is_transactional=batch.is_transactional,
                           is_control=batch.is_control, delete_horizon_ms=horizon)


class IllegalStateError(Exception):
    """Kafka's IllegalStateException: the pass fails (a legacy batch must be kept empty)."""


# -- §5.4 one pass --------------------------------------------------------------------------------
def clean(segments: Iterable, *, now: int, config: CleanerConfig = CleanerConfig(),
          log_start_offset: int | None = None, checkpoint: int | None = None,
          high_watermark: int | None = None, aborted_txns: Sequence[AbortedTxn] | None = None,
          producers: dict[int, ProducerEntry] | None = None,
          uncleanable_offset: int | None = None) -> CleanResult:
    """One pass of Kafka's cleaner (Cleaner.doClean) over a partition, at time `now`.

    segments: `(base_offset, [batch bytes], mtime_ms)` in offset order; the last is the active one.
    log_start_offset: default the first segment's base offset.
    checkpoint: the partition's cleaner-offset-checkpoint entry (None = absent).
    high_watermark: default the log end offset; the LSO is computed from the open transactions.
    aborted_txns: the partition's .txnindex entries; default derived by replaying the markers.
    producers: producer state to use instead of replaying the input (e.g. the state before an
        earlier pass, as a live broker would have it); expiration at `now` still applies.
    uncleanable_offset: overrides the computed first uncleanable offset (it is still rounded down
        to a segment boundary), like a hand-built LogToClean in Kafka's tests.
    """
    segs = load_segments(segments, config.index_interval_bytes)
    if log_start_offset is None:
        log_start_offset = segs[0].base_offset
    replayed = replay_producers(segs, log_start_offset)
    state = producers if producers is not None else replayed.producers
    aborted = list(aborted_txns) if aborted_txns is not None else replayed.aborted_txns
    log_end = segs[-1].read_next_offset
    lso = last_stable_offset(replayed, log_end if high_watermark is None else min(high_watermark, log_end))
    rng = cleanable_range(segs, checkpoint=checkpoint, log_start_offset=log_start_offset, last_stable=lso,
                          min_compaction_lag_ms=config.min_compaction_lag_ms, now=now,
                          uncleanable_offset=uncleanable_offset)
    active = active_producers(state, now, config.producer_id_expiration_ms)

    def untouched(seg: _Seg) -> OutputSegment:
        return OutputSegment(seg.base_offset, [b.data for b in seg.batches], seg.mtime_ms,
                             [t for t in aborted if _segment_of(segs, t.last_offset) is seg])

    if rng.first_uncleanable <= rng.first_dirty:  # nothing cleanable: Kafka would not pick this log
        return CleanResult([untouched(s) for s in segs], rng.first_dirty, rng.first_dirty, rng.first_uncleanable,
                           rng.checkpoint_reset, False, lso, _totals({}), state, active)

    omap = build_offset_map(segs, rng.first_dirty, rng.first_uncleanable, aborted, config.map_capacity)
    end_offset = omap.latest_offset + 1
    before_dirty = [s for s in segs if s.base_offset < rng.first_dirty]
    legacy_horizon = before_dirty[-1].mtime_ms - config.delete_retention_ms if before_dirty else 0
    to_clean = [s for s in segs if s.base_offset < end_offset]
    ctx = _Pass(omap, TxnTracker(), active, rng.first_uncleanable, now, config.delete_retention_ms)
    out: list[OutputSegment] = []
    for group in group_segments(to_clean, config.segment_bytes, config.segment_index_bytes,
                                rng.first_uncleanable):
        batches: list[bytes] = []
        ctx.tracker.cleaned_index = index = []
        for j, seg in enumerate(group):
            upper = group[j + 1].base_offset if j + 1 < len(group) else seg.read_next_offset
            ctx.tracker.add_aborted(_collect_aborted(segs, aborted, seg.base_offset, upper))
            retain_legacy = seg.mtime_ms > legacy_horizon
            for batch in seg.batches:
                ctx.counts["batches_read"] = ctx.counts.get("batches_read", 0) + 1
                ctx.counts["bytes_read"] = ctx.counts.get("bytes_read", 0) + batch.size
                kept = ctx.clean_batch(batch, retain_legacy)
                if kept is not None:
                    batches.append(kept)
        ctx.counts["batches_written"] = ctx.counts.get("batches_written", 0) + len(batches)
        ctx.counts["bytes_written"] = ctx.counts.get("bytes_written", 0) + sum(map(len, batches))
        out.append(OutputSegment(group[0].base_offset, batches, group[-1].mtime_ms, index))
    out += [untouched(s) for s in segs if s.base_offset >= end_offset]
    return CleanResult(out, end_offset, rng.first_dirty, rng.first_uncleanable, rng.checkpoint_reset, True, lso,
                       _totals(ctx.counts), state, active)


def _segment_of(segs: Sequence[_Seg], offset: int) -> _Seg:
    found = segs[0]
    for s in segs:
        if s.base_offset <= offset:
            found = s
    return found


def _totals(counts: dict[str, int]) -> dict[str, int]:
    out = dict.fromkeys(REASONS, 0)
    out.update(dict.fromkeys(("records_read", "batches_read", "batches_written", "empty_batches",
                              "bytes_read", "bytes_written"), 0))
    out.update(counts)
    out["records_read"] = sum(out[r] for r in REASONS)
    return out


def clean_twice(segments: Iterable, *, now: int, config: CleanerConfig = CleanerConfig(),
                carry_producers: bool = True, **kwargs) -> tuple[CleanResult, CleanResult]:
    """Kafka's runTwoPassClean: a pass at `now` (which stamps delete horizons), then a pass over its
    output at now + delete.retention.ms + 1 with the same checkpoint (which removes what expired).
    The second pass reads the first one's .txnindex entries and, with `carry_producers`, the
    producer state of the first (a broker's producer state is not changed by cleaning)."""
    first = clean(segments, now=now, config=config, **kwargs)
    kwargs["aborted_txns"] = first.aborted_txns
    if carry_producers:
        kwargs["producers"] = first.producers
    second = clean(first.as_input(), now=now + config.delete_retention_ms + 1, config=config, **kwargs)
    return first, second


def with_config(config: CleanerConfig, **changes) -> CleanerConfig:
    return replace(config, **changes)


__all__ = ["AbortedTxn", "CleanResult", "CleanableRange", "CleanerConfig", "IllegalStateError", "OffsetMap",
           "OutputSegment", "ProducerEntry", "ProducerState", "REASONS", "Segment", "TxnTracker",
           "active_producers", "build_offset_map", "clean", "clean_twice", "cleanable_range",
           "group_segments", "last_stable_offset", "load_segments", "replay_producers", "split_batches", "with_config"]
