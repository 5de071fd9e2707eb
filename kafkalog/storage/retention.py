"""Retention offline, as Kafka's `UnifiedLog.deleteOldSegments` applies it (spec §7, §11.4), plus
deleteRecords (KIP-107) and consumed retention (KIP-68, never built in Kafka).

Three parts, lowest first:

* The rules: pure functions over `SegmentMeta` (base offset, size, largest timestamp, last offset).
  `deletable_segments` is Kafka's prefix scan (HW rule, never the empty last segment, stop at the
  first segment that may not go); `delete_old_segments` runs the scans in Kafka's order -- log start
  offset breach, then (only with `cleanup.policy` containing `delete`) size breach, consumed
  retention (when enabled), time breach -- rolling a new empty segment at the log end offset when
  every segment goes. `delete_records_offset` is `Partition.deleteRecordsOnLeader` with Kafka's errors.
* The plan of one partition (`plan_partition`): reads only metadata (listing, checkpoint files, the
  last entries of index files and the batch headers after the last offset-index entry), plus, with
  `truncate_below_start`, the batches of the one segment that holds the log start offset.
* The apply step, in place (`apply_in_place`: staged `.cleaned` files, checkpoints, then Kafka's swap
  with `.deleted` renames, see `swap.py`) or into a new log directory (`write_partition`: what is
  kept is copied with its mtime, what changes is written). `run_retention` does a whole log dir.

Order of the in-place steps, and what a crash leaves (after `recover_partition`, which the next run
does first): (1) new segments are staged as `.cleaned` (the rolled empty segment, the truncated
segment) and a producer snapshot at the log end offset is written when a roll needs one; (2)
producer snapshots below the new log start offset go (Kafka drops them on load anyway) -- a crash
up to here leaves the old log; (3) `log-start-offset-checkpoint` (and the cleaner, recovery point
and high watermark checkpoints where they fell below the new start), then `leader-epoch-checkpoint`
-- from here the log as Kafka reads it (from the log start offset) is the new one; (4)
`swap.replace_segments`. A crash after (3) leaves segments wholly below the log start offset, which
Kafka's next retention pass deletes and so does the next run: every intermediate directory
validates clean once recovered (`recover`: Kafka's swap recovery, and index files left without their
`.log` deleted, as Kafka's loader does), and a rerun ends in the same bytes as an uninterrupted run.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Mapping, NamedTuple, Sequence

from ..codec.filter import BatchRetention
from ..config import TopicConfig
from ..errors import KafkaLogError
from .checkpoint import EpochEntry, format_leader_epoch_checkpoint, parse_leader_epoch_checkpoint, \
    truncate_epochs_from_start
from .consumer_offsets import replay_committed_offsets
from .fs import FileEntry, LogFileSystem
from .log_writer import SegmentWriter
from .destination import destination
from .logdir import LOCK_FILE, LogDir
from .naming import (CLEANER_OFFSET_CHECKPOINT, KRAFT_METADATA_NOT_REWRITTEN, LEADER_EPOCH_CHECKPOINT,
                     LOG_START_OFFSET_CHECKPOINT, OFFSET_CHECKPOINT_FILES, RECOVERY_POINT_CHECKPOINT,
                     REPLICATION_OFFSET_CHECKPOINT, is_kraft_metadata, parse_partition_dir_name, segment_file_name)
from .partition import Partition
from .producer_state import replay_partition
from .rewrite import CLEANED, BatchPlan, rewrite_segments
from .segment import LogSegment, locate
from .swap import SEGMENT_KINDS, FaultHook, recover_partition, replace_segments

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
# Kafka creates its internal topics compacted; without a per-topic cleanup.policy for them, the
# broker-wide default (delete) must not apply.
INTERNAL_COMPACTED_TOPICS = (CONSUMER_OFFSETS_TOPIC, "__transaction_state")

# Why a segment went (the report's reasons).
LOG_START_OFFSET_BREACH = "log-start-offset"
SIZE_BREACH = "retention.bytes"
CONSUMED_BREACH = "retention.commitoffset.ms"
TIME_BREACH = "retention.ms"
REASONS = (LOG_START_OFFSET_BREACH, SIZE_BREACH, CONSUMED_BREACH, TIME_BREACH)
FORCED = (SIZE_BREACH, TIME_BREACH)  # deletions that do not wait for consumers

# Without a replication-offset-checkpoint entry: Kafka starts the high watermark at 0, clamped to
# the log start offset (nothing can be deleted); "log-end" trusts the log end offset instead.
MISSING_HW_LOG_START, MISSING_HW_LOG_END = "log-start", "log-end"

_CHECKPOINT_ORDER = (LOG_START_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
                     REPLICATION_OFFSET_CHECKPOINT)


def _no_fault(step: str, name: str) -> None:
    pass


# -- errors ------------------------------------------------------------------------------------------

class DeleteRecordsError(KafkaLogError):
    """A deleteRecords request Kafka refuses for one partition; `code` is Kafka's error name
    (OFFSET_OUT_OF_RANGE, POLICY_VIOLATION, UNKNOWN_TOPIC_OR_PARTITION) and the message its text."""

    def __init__(self, code: str, message: str, **kwargs):
        super().__init__(message, **kwargs)
        self.code = code

    def to_dict(self) -> dict:
        return {"code": self.code, "message": self.message}


# -- segment metadata ----------------------------------------------------------------------------------

class SegmentMeta(NamedTuple):
    """What retention needs of a segment, without reading its records.

    `largest_timestamp` is the time index's last entry (Kafka's LogSegment.largestTimestamp), or the
    `.log` file's mtime when the segment has no timestamp >= 0 (`timestamp_from_index` False).
    `last_offset` is the last offset of the last batch (None: the segment has no batch, or it was
    not read)."""
    base_offset: int
    size: int
    largest_timestamp: int
    last_offset: int | None = None
    timestamp_from_index: bool = True
    mtime_ms: int = 0

    def last_offset_or_below(self) -> int:
        """The last offset, or base - 1 for a segment without batches: everything in it is below."""
        return self.last_offset if self.last_offset is not None else self.base_offset - 1


def segment_meta(segment: LogSegment, *, with_last_offset: bool = True) -> SegmentMeta:
    """A segment's metadata: its size and mtime from the listing, the largest timestamp from the
    last time-index entry, and (`with_last_offset`) the last offset from the batch headers after the
    last offset-index entry."""
    largest = segment.time_index_max_timestamp()
    from_index = largest is not None and largest >= 0
    last = segment.last_offset() if with_last_offset else None
    return SegmentMeta(segment.base_offset, segment.size, largest if from_index else segment.mtime_ms, last,
                       from_index, segment.mtime_ms)


# -- the rules (pure) ------------------------------------------------------------------------------------

Predicate = Callable[[SegmentMeta, "SegmentMeta | None"], bool]


def deletable_segments(segments: Sequence[SegmentMeta], predicate: Predicate, *, high_watermark: int,
                       log_end_offset: int) -> list[SegmentMeta]:
    """UnifiedLog.deletableSegments (§7.2): the prefix of `segments` a scan may delete. A segment
    goes when the high watermark is at or above its upper bound (the next segment's base offset, or
    the log end offset for the last), `predicate(segment, next segment or None)` holds, and it is not
    the empty last segment; the scan stops at the first segment that may not go. The predicate is
    called in order, as Kafka calls it (only where the high watermark allows)."""
    out = []
    for i, segment in enumerate(segments):
        following = segments[i + 1] if i + 1 < len(segments) else None
        upper = following.base_offset if following is not None else log_end_offset
        last_and_empty = following is None and segment.size == 0
        if high_watermark >= upper and predicate(segment, following) and not last_and_empty:
            out.append(segment)
        else:
            break
    return out


def log_start_offset_breach(log_start_offset: int) -> Predicate:
    """(a) The segment lies wholly below the log start offset: the next segment starts at or below it."""
    return lambda segment, following: following is not None and following.base_offset <= log_start_offset


def size_breach(segments: Sequence[SegmentMeta], retention_bytes: int) -> Predicate | None:
    """(b) retention.bytes: None (no scan) when unlimited or the log is below the limit. Otherwise
    delete the oldest segments while the excess left is at least the segment's size."""
    total = sum(s.size for s in segments)
    if retention_bytes < 0 or total < retention_bytes:
        return None
    excess = [total - retention_bytes]

    def predicate(segment: SegmentMeta, following) -> bool:
        if excess[0] - segment.size >= 0:
            excess[0] -= segment.size
            return True
        return False
    return predicate


def time_breach(now_ms: int, retention_ms: int) -> Predicate | None:
    """(c) retention.ms: None when unlimited (-1); else the segment's largest timestamp is more
    than retention.ms before now (strictly)."""
    if retention_ms < 0:
        return None
    return lambda segment, following: now_ms - segment.largest_timestamp > retention_ms


def consumed_breach(now_ms: int, consumed_ms: int, min_committed_offset: int | None) -> Predicate | None:
    """KIP-68: older than retention.commitoffset.ms and wholly consumed: the last offset is below
    the minimum committed offset of every group. None when there is no minimum or no time (-1)."""
    if consumed_ms < 0 or min_committed_offset is None:
        return None
    return lambda segment, following: (now_ms - segment.largest_timestamp > consumed_ms
                                       and segment.last_offset_or_below() < min_committed_offset)


class DeletedSegment(NamedTuple):
    segment: SegmentMeta
    upper_bound: int  # every offset of the segment is below it (the next segment's base offset)
    reason: str


@dataclass
class RetentionOutcome:
    """What `delete_old_segments` decided: the segments that remain (a rolled one included), the
    deleted ones in order with their reasons, the new log start offset, where a roll happened."""
    segments: list[SegmentMeta]
    deleted: list[DeletedSegment]
    log_start_offset: int
    rolled_at: int | None = None


def delete_old_segments(segments: Sequence[SegmentMeta], *, config: TopicConfig, log_start_offset: int,
                        log_end_offset: int, high_watermark: int, now_ms: int,
                        min_committed_offset: int | None = None) -> RetentionOutcome:
    """UnifiedLog.deleteOldSegments (§7.1-7.4) with consumed retention before forced time retention.

    Scans: (a) log start offset breach, for every policy; with `delete` in cleanup.policy also (b)
    retention.bytes, then consumed retention when `retention.commitoffset.enable` is set and
    `min_committed_offset` is known, then (c) retention.ms. Each scan is a prefix scan over what the
    previous ones left. When a scan may delete every segment, a new empty segment is rolled at the
    log end offset first, so the log never has no segment. The log start offset moves to the base
    offset of the first segment left (it never decreases)."""
    state = RetentionOutcome(list(segments), [], log_start_offset)

    def scan(predicate: Predicate | None, reason: str) -> None:
        if predicate is None or not state.segments:
            return
        doomed = deletable_segments(state.segments, predicate, high_watermark=high_watermark,
                                    log_end_offset=log_end_offset)
        if not doomed:
            return
        if len(doomed) == len(state.segments):  # roll first: a log keeps at least one segment
            state.rolled_at = log_end_offset
            state.segments.append(SegmentMeta(log_end_offset, 0, now_ms, None, False, now_ms))
        for i, segment in enumerate(doomed):
            state.deleted.append(DeletedSegment(segment, state.segments[i + 1].base_offset, reason))
        state.segments = state.segments[len(doomed):]
        state.log_start_offset = max(state.log_start_offset, state.segments[0].base_offset)

    scan(log_start_offset_breach(state.log_start_offset), LOG_START_OFFSET_BREACH)
    if config.delete:
        scan(size_breach(state.segments, config.retention_bytes), SIZE_BREACH)
        if config.retention_commitoffset_enable:
            scan(consumed_breach(now_ms, config.retention_commitoffset_ms, min_committed_offset), CONSUMED_BREACH)
        scan(time_breach(now_ms, config.retention_ms), TIME_BREACH)
    return state


def delete_records_offset(requested: int, *, topic: str, partition: int, config: TopicConfig,
                          high_watermark: int) -> int:
    """The log start offset a deleteRecords request asks for (KIP-107, Partition.deleteRecordsOnLeader
    and UnifiedLog.maybeIncrementLogStartOffset), or DeleteRecordsError with Kafka's text. -1 means
    the high watermark."""
    tp = f"{topic}-{partition}"
    if not config.delete:
        raise DeleteRecordsError("POLICY_VIOLATION",
                                 f"Records of partition {tp} can not be deleted due to the configured policy")
    offset = high_watermark if requested == -1 else requested
    if offset < 0:
        raise DeleteRecordsError("OFFSET_OUT_OF_RANGE", f"The offset {offset} for partition {tp} is not valid")
    if offset > high_watermark:
        raise DeleteRecordsError("OFFSET_OUT_OF_RANGE",
                                 f"Cannot increment the log start offset to {offset} of partition {tp} since it "
                                 f"is larger than the high watermark {high_watermark}")
    return offset


def effective_config(config: TopicConfig, topic: str, explicit_policy: bool) -> TopicConfig:
    """Kafka's internal topics are compacted unless their own configuration says otherwise."""
    if topic in INTERNAL_COMPACTED_TOPICS and not explicit_policy:
        return replace(config, cleanup_policy=("compact",))
    return config


# -- committed offsets --------------------------------------------------------------------------------------

@dataclass
class CommittedOffsets:
    """Committed offsets by (group, topic, partition); None is an offset that is not known (the
    KIP-68 "min offset -1" case). A group counts for a topic when it has any entry for the topic."""
    offsets: dict[tuple[str, str, int], int | None] = field(default_factory=dict)
    source: str = ""

    def __post_init__(self):
        self._by_topic: dict[str, set[str]] = {}
        for group, topic, _ in self.offsets:
            self._by_topic.setdefault(topic, set()).add(group)

    def groups_of(self, topic: str) -> list[str]:
        return sorted(self._by_topic.get(topic, ()))

    def for_partition(self, topic: str, partition: int) -> dict[str, int | None]:
        """Every group of the topic with its offset for this partition (None: unknown)."""
        return {g: self.offsets.get((g, topic, partition)) for g in self.groups_of(topic)}

    def filtered(self, keep: Callable[[str], bool]) -> "CommittedOffsets":
        return CommittedOffsets({k: v for k, v in self.offsets.items() if keep(k[0])}, self.source)

    @property
    def groups(self) -> list[str]:
        return sorted({g for g, _, _ in self.offsets})

    def to_rows(self) -> list[dict]:
        return [{"group": g, "topic": t, "partition": p, "offset": o} for (g, t, p), o in sorted(
            self.offsets.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2]))]


def read_committed_offsets(log_dir: LogDir) -> CommittedOffsets:
    """The live committed offsets in the log dir's own `__consumer_offsets` partitions, as the group
    coordinator loads them (`consumer_offsets.replay_committed_offsets`)."""
    offsets: dict[tuple[str, str, int], int] = {}
    for topic, number in log_dir.topic_partitions:
        if topic == CONSUMER_OFFSETS_TOPIC:
            for key, value in replay_committed_offsets(log_dir.partition(topic, number)).items():
                offsets[key] = value.offset
    return CommittedOffsets(offsets, f"{CONSUMER_OFFSETS_TOPIC} in {log_dir.path}")


# -- the plan of one partition -------------------------------------------------------------------------------

class _OffsetsBelow:
    """The offsets below a log start offset, as a `BatchPlan.removed` set."""
    __slots__ = ("start",)

    def __init__(self, start: int):
        self.start = start

    def __contains__(self, offset: int) -> bool:
        return offset < self.start

    def __bool__(self) -> bool:
        return True


@dataclass
class TruncationPlan:
    """--truncate-below-start: the records below the log start offset leave the segment that holds
    the log start offset. Offsets are kept; batches of idempotent and transactional producers stay
    as empty batches (their producer state), markers stay, other batches below the start go. The
    batch that straddles the start is re-encoded with its own codec (a retained tombstone then gets
    the KIP-534 delete horizon, as Kafka's filterTo gives it)."""
    base_offset: int
    log_start_offset: int
    plans: dict[tuple[int, int], BatchPlan]
    records_removed: int = 0
    batches_dropped: int = 0
    batches_emptied: int = 0
    batches_reencoded: int = 0

    def to_dict(self) -> dict:
        return {"segment": self.base_offset, "belowOffset": self.log_start_offset,
                "recordsRemoved": self.records_removed, "batchesDropped": self.batches_dropped,
                "batchesEmptied": self.batches_emptied, "batchesReencoded": self.batches_reencoded}


def plan_truncation(segment: LogSegment, log_start_offset: int) -> TruncationPlan | None:
    """The batch plans that remove every record below `log_start_offset` from `segment`; None when
    nothing is below it (a second run finds nothing)."""
    below = _OffsetsBelow(log_start_offset)
    plan = TruncationPlan(segment.base_offset, log_start_offset, {})
    for position, batch in segment.batches():
        if batch.base_offset >= log_start_offset:
            break
        v2_producer = batch.has_producer_id
        if batch.last_offset < log_start_offset:
            if batch.is_control or (v2_producer and batch.records_count == 0):
                continue  # a marker, or already an empty producer batch: no record data
            count = batch.records_count
            if v2_producer:
                plan.plans[(segment.base_offset, position)] = BatchPlan(BatchRetention.RETAIN_EMPTY, below)
                plan.batches_emptied += 1
            else:
                plan.plans[(segment.base_offset, position)] = BatchPlan(BatchRetention.DELETE)
                plan.batches_dropped += 1
            plan.records_removed += count
            continue
        # straddles the log start offset: keep the records at or above it
        if batch.is_control:
            continue
        try:  # the one batch decoded here: its damage stops the run, named in the file
            batch.verify()
            removed = sum(1 for r in batch.records() if r.offset < log_start_offset)
        except KafkaLogError as err:
            raise locate(err, segment.log_path, position, batch) from None
        if removed:
            retention = BatchRetention.RETAIN_EMPTY if v2_producer else BatchRetention.DELETE_EMPTY
            plan.plans[(segment.base_offset, position)] = BatchPlan(retention, below)
            plan.batches_reencoded += 1
            plan.records_removed += removed
    return plan if plan.plans else None


@dataclass
class GroupLoss:
    """Offsets [from_offset, to_offset) of a group's partition that it had not consumed when they
    were deleted (or that it holds back from consumed retention)."""
    group: str
    committed_offset: int | None
    from_offset: int
    to_offset: int
    segments: int = 0
    bytes: int = 0

    def to_dict(self) -> dict:
        return {"group": self.group, "committedOffset": self.committed_offset, "fromOffset": self.from_offset,
                "toOffset": self.to_offset, "segments": self.segments, "bytes": self.bytes}


@dataclass
class ConsumedReport:
    enabled: bool
    applied: bool = False
    reason: str | None = None  # why consumed retention did not apply
    consumed_ms: int = -1
    min_committed_offset: int | None = None
    groups: dict[str, int | None] = field(default_factory=dict)
    unknown_groups: list[str] = field(default_factory=list)
    holding_back: list[GroupLoss] = field(default_factory=list)
    would_lose: list[GroupLoss] = field(default_factory=list)  # under forced retention

    def to_dict(self) -> dict:
        return {"enabled": self.enabled, "applied": self.applied, "reason": self.reason,
                "retentionCommitoffsetMs": self.consumed_ms, "minCommittedOffset": self.min_committed_offset,
                "groups": dict(sorted(self.groups.items())), "unknownGroups": self.unknown_groups,
                "holdingBack": [g.to_dict() for g in self.holding_back],
                "wouldLoseUnderForcedRetention": [g.to_dict() for g in self.would_lose]}


@dataclass
class DeleteRecordsOutcome:
    requested: int
    offset: int | None = None  # the log start offset asked for (-1 resolved)
    low_watermark: int | None = None  # the log start offset after the run
    error: DeleteRecordsError | None = None

    def to_dict(self) -> dict:
        out = {"requestedOffset": self.requested}
        if self.error is not None:
            out["error"] = self.error.to_dict()
        else:
            out.update(offset=self.offset, lowWatermark=self.low_watermark)
        return out


@dataclass
class PartitionPlan:
    """Everything retention does to one partition, decided from metadata; `apply_in_place` and
    `write_partition` carry it out."""
    topic: str
    partition: int
    path: str
    config: TopicConfig
    segments: list[SegmentMeta]
    log_start_offset: int  # before
    log_end_offset: int
    high_watermark: int
    high_watermark_source: str
    outcome: RetentionOutcome
    truncation: TruncationPlan | None = None
    delete_records: DeleteRecordsOutcome | None = None
    consumed: ConsumedReport | None = None
    snapshots_to_delete: list[int] = field(default_factory=list)
    snapshot_at_log_end: bool = False  # a roll needs a producer snapshot at the log end offset
    epochs_before: list[EpochEntry] | None = None
    epochs_after: list[EpochEntry] | None = None
    checkpoint_updates: dict[str, int | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)
    skipped: str | None = None

    @property
    def tp(self) -> tuple[str, int]:
        return self.topic, self.partition

    @property
    def deleted(self) -> list[DeletedSegment]:
        return self.outcome.deleted

    @property
    def new_log_start_offset(self) -> int:
        return self.outcome.log_start_offset

    @property
    def epochs_changed(self) -> bool:
        return self.epochs_after is not None and self.epochs_after != self.epochs_before

    @property
    def segments_change(self) -> bool:
        return bool(self.deleted or self.outcome.rolled_at is not None or self.truncation)

    @property
    def changed(self) -> bool:
        return (self.segments_change or bool(self.snapshots_to_delete) or self.snapshot_at_log_end
                or self.epochs_changed or bool(self.checkpoint_updates))

    def to_dict(self) -> dict:
        by_reason: dict[str, int] = {}
        for d in self.deleted:
            by_reason[d.reason] = by_reason.get(d.reason, 0) + 1
        out = {
            "topic": self.topic, "partition": self.partition,
            "cleanupPolicy": ",".join(self.config.cleanup_policy),
            "changed": self.changed,
            "logStartOffset": {"before": self.log_start_offset, "after": self.new_log_start_offset},
            "logEndOffset": self.log_end_offset,
            "highWatermark": self.high_watermark, "highWatermarkSource": self.high_watermark_source,
            "segments": {"before": len(self.segments), "after": len(self.outcome.segments)},
            "deletedSegments": [{"baseOffset": d.segment.base_offset, "upperBound": d.upper_bound,
                                 "lastOffset": d.segment.last_offset, "bytes": d.segment.size,
                                 "largestTimestamp": d.segment.largest_timestamp,
                                 "timestampFrom": "timeindex" if d.segment.timestamp_from_index else "mtime",
                                 "reason": d.reason} for d in self.deleted],
            "deletedByReason": by_reason,
            "bytesDeleted": sum(d.segment.size for d in self.deleted),
            "rolledAt": self.outcome.rolled_at,
            "truncation": self.truncation.to_dict() if self.truncation else None,
            "deleteRecords": self.delete_records.to_dict() if self.delete_records else None,
            "consumedRetention": self.consumed.to_dict() if self.consumed else None,
            "snapshotsDeleted": self.snapshots_to_delete,
            "snapshotWrittenAt": self.outcome.rolled_at if self.snapshot_at_log_end else None,
            "leaderEpochs": None if not self.epochs_changed else {
                "before": [list(e) for e in self.epochs_before or []],
                "after": [list(e) for e in self.epochs_after or []]},
            "checkpointUpdates": self.checkpoint_updates,
            "notes": self.notes,
        }
        if self.recovered:
            out["recovered"] = self.recovered
        if self.skipped:
            out["skipped"] = self.skipped
        return out


def plan_partition(part: Partition, *, config: TopicConfig, checkpoints: Mapping[str, Mapping], now_ms: int,
                   delete_records: int | None = None, truncate_below_start: bool = False,
                   committed: CommittedOffsets | None = None,
                   missing_high_watermark: str = MISSING_HW_LOG_START) -> PartitionPlan:
    """Decide retention for one partition (§11.4). `checkpoints` maps each log-dir checkpoint file
    name to its {(topic, partition): offset} entries; `delete_records` is a requested offset (-1:
    the high watermark); `committed` the committed offsets of consumer groups."""
    tp = (part.topic, part.partition)
    consumed_on = config.delete and config.retention_commitoffset_enable
    metas = []
    for i, segment in enumerate(part.segments):
        metas.append(segment_meta(segment, with_last_offset=consumed_on or i == len(part.segments) - 1))
    first_base = metas[0].base_offset if metas else 0
    last_meta = metas[-1] if metas else None
    log_end = (last_meta.last_offset + 1 if last_meta and last_meta.last_offset is not None
               else last_meta.base_offset if last_meta else 0)
    cp = checkpoints.get(LOG_START_OFFSET_CHECKPOINT, {}).get(tp)
    log_start = max(cp if cp is not None else first_base, first_base)
    hw_cp = checkpoints.get(REPLICATION_OFFSET_CHECKPOINT, {}).get(tp)
    if hw_cp is not None:
        hw, hw_source = hw_cp, "replication-offset-checkpoint"
    elif missing_high_watermark == MISSING_HW_LOG_END:
        hw, hw_source = log_end, "log end offset (no replication-offset-checkpoint entry)"
    else:
        hw, hw_source = 0, "none in replication-offset-checkpoint: Kafka's 0, raised to the log start offset"
    high_watermark = min(max(hw, log_start), log_end)
    plan = PartitionPlan(part.topic, part.partition, part.path, config, metas, log_start, log_end, high_watermark,
                         hw_source, RetentionOutcome(list(metas), [], log_start))
    if not metas:
        plan.skipped = "no segment (Kafka creates an empty one at the log start offset)"
        return plan
    if log_start > log_end:
        plan.skipped = (f"the log start offset {log_start} is above the log end offset {log_end}: Kafka deletes "
                        "every segment on load; nothing done")
        return plan
    # KIP-107: deleteRecords moves the log start offset first
    start = log_start
    if delete_records is not None:
        outcome = DeleteRecordsOutcome(delete_records)
        try:
            outcome.offset = delete_records_offset(delete_records, topic=part.topic, partition=part.partition,
                                                   config=config, high_watermark=high_watermark)
            start = max(start, outcome.offset)
        except DeleteRecordsError as err:
            outcome.error = err
        plan.delete_records = outcome
    # KIP-68: the minimum committed offset of every group of the topic
    min_committed = None
    groups = committed.for_partition(part.topic, part.partition) if committed is not None else {}
    if consumed_on:
        report = ConsumedReport(True, consumed_ms=config.retention_commitoffset_ms, groups=groups)
        report.unknown_groups = sorted(g for g, o in groups.items() if o is None or o < 0)
        if config.retention_commitoffset_ms < 0:
            report.reason = "retention.commitoffset.ms is -1 (unlimited): no segment is old enough"
        elif committed is None:
            report.reason = "no committed offsets were read"
        elif not groups:
            report.reason = f"no consumer group has committed offsets for topic {part.topic}"
        elif report.unknown_groups:
            report.reason = (f"the committed offset of group(s) {', '.join(report.unknown_groups)} for partition "
                             f"{part.topic}-{part.partition} is not known (KIP-68: min offset -1), so consumed "
                             "retention does not apply")
        else:
            min_committed = min(groups.values())
            report.min_committed_offset = min_committed
            report.applied = True
        plan.consumed = report
    elif groups:
        plan.consumed = ConsumedReport(False, reason="retention.commitoffset.enable is false"
                                       if config.delete else "cleanup.policy has no delete", groups=groups)
    plan.outcome = delete_old_segments(metas, config=config, log_start_offset=start, log_end_offset=log_end,
                                       high_watermark=high_watermark, now_ms=now_ms,
                                       min_committed_offset=min_committed)
    new_start = plan.outcome.log_start_offset
    if plan.delete_records is not None and plan.delete_records.error is None:
        plan.delete_records.low_watermark = new_start
    if plan.consumed is not None:
        _consumer_reports(plan, high_watermark, now_ms)
    # --truncate-below-start
    remaining = plan.outcome.segments
    first = remaining[0]
    if truncate_below_start and plan.outcome.rolled_at != first.base_offset and first.base_offset < new_start \
            and first.size > 0:
        source = next(s for s in part.segments if s.base_offset == first.base_offset)
        plan.truncation = plan_truncation(source, new_start)
    # producer snapshots, leader epochs, checkpoints
    plan.snapshots_to_delete = sorted(o for o in part.snapshots if o < new_start)
    if plan.outcome.rolled_at is not None and plan.outcome.rolled_at not in part.snapshots:
        plan.snapshot_at_log_end = True
    entry = part.files.get(LEADER_EPOCH_CHECKPOINT)
    if entry is not None:
        text = part.fs.read_bytes(entry.path).decode("utf-8", "replace")
        plan.epochs_before = parse_leader_epoch_checkpoint(text, file=entry.path)
        plan.epochs_after = truncate_epochs_from_start(plan.epochs_before, new_start)
    # Kafka checkpoints a log start offset above the first segment's base offset. A moved log start
    # offset is always written: it is the commit point of the in-place steps, and harmless where it
    # equals the first base offset (the effective start is the larger of the two).
    current = checkpoints.get(LOG_START_OFFSET_CHECKPOINT, {}).get(tp)
    moved = new_start != log_start or new_start > remaining[0].base_offset
    if moved and current != new_start:
        plan.checkpoint_updates[LOG_START_OFFSET_CHECKPOINT] = new_start
    for name in (CLEANER_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT):
        current = checkpoints.get(name, {}).get(tp)
        if current is not None and current < new_start:
            plan.checkpoint_updates[name] = new_start
    if plan.outcome.rolled_at is not None:
        plan.notes.append(f"every segment was deletable: rolled a new empty segment at the log end offset "
                          f"{plan.outcome.rolled_at}")
    return plan


def _consumer_reports(plan: PartitionPlan, high_watermark: int, now_ms: int) -> None:
    """Per group: what it holds back from consumed retention, and what forced retention deleted
    before it had consumed it."""
    report = plan.consumed
    known = {g: o for g, o in report.groups.items() if o is not None and o >= 0}
    losses: dict[str, GroupLoss] = {}
    for d in plan.deleted:
        if d.reason not in FORCED:
            continue
        for group, offset in known.items():
            if offset < d.upper_bound:
                low = max(offset, d.segment.base_offset)
                loss = losses.setdefault(group, GroupLoss(group, offset, low, d.upper_bound))
                loss.from_offset = min(loss.from_offset, low)
                loss.to_offset = max(loss.to_offset, d.upper_bound)
                loss.segments += 1
                loss.bytes += d.segment.size
    report.would_lose = sorted(losses.values(), key=lambda g: (g.committed_offset, g.group))
    if not report.enabled or report.consumed_ms < 0:
        return
    old = time_breach(now_ms, report.consumed_ms)
    candidates = deletable_segments(plan.outcome.segments, old, high_watermark=high_watermark,
                                    log_end_offset=plan.log_end_offset)
    if not candidates:
        return
    remaining = plan.outcome.segments
    upper = {s.base_offset: (remaining[i + 1].base_offset if i + 1 < len(remaining) else plan.log_end_offset)
             for i, s in enumerate(remaining)}
    held = []
    for group, offset in sorted(report.groups.items()):
        mine = [s for s in candidates if offset is None or offset < 0 or s.last_offset_or_below() >= offset]
        if mine:
            low = mine[0].base_offset if offset is None or offset < 0 else max(offset, mine[0].base_offset)
            held.append(GroupLoss(group, offset, low, upper[mine[-1].base_offset], len(mine),
                                  sum(s.size for s in mine)))
    report.holding_back = sorted(held, key=lambda g: (-1 if g.committed_offset is None else g.committed_offset,
                                                      g.group))


# -- applying a plan -----------------------------------------------------------------------------------------

def _segment_file_names(base: int) -> list[str]:
    return [segment_file_name(base, kind) for kind in SEGMENT_KINDS]


def _index_interval(plan: PartitionPlan) -> int:
    return plan.config.index_interval_bytes


def _stage_new_segments(part: Partition, plan: PartitionPlan, fs: LogFileSystem, dir_path: str, suffix: str,
                        now_ms: int) -> list[int]:
    """Write the truncated segment and the rolled empty segment into `dir_path` with `suffix`."""
    bases = []
    if plan.truncation is not None:
        source = next(s for s in part.segments if s.base_offset == plan.truncation.base_offset)
        rewrite_segments(fs, dir_path, [source], plan.truncation.plans,
                         delete_horizon_ms=now_ms + plan.config.delete_retention_ms,
                         index_interval_bytes=_index_interval(plan), aborted_txns=source.aborted_txns(),
                         suffix=suffix)
        bases.append(source.base_offset)
    if plan.outcome.rolled_at is not None:
        writer = SegmentWriter(fs, dir_path, plan.outcome.rolled_at, index_interval_bytes=_index_interval(plan),
                               suffix=suffix)
        writer.close(mtime_ms=now_ms)
        bases.append(plan.outcome.rolled_at)
    return bases


def _snapshot_at_log_end(part: Partition, log_end: int) -> bytes:
    """Producer state at the log end offset, for the snapshot Kafka takes when it rolls."""
    manager, _ = replay_partition(part)
    manager.map_end_offset = log_end
    return manager.snapshot().to_bytes()


def apply_in_place(part: Partition, plan: PartitionPlan, log_dir: LogDir, *, now_ms: int,
                   fault: FaultHook = _no_fault) -> None:
    """Carry out `plan` in the partition directory (module docstring: the order and what a crash
    leaves). `fault(step, name)` is called after each step (a test hook that may raise)."""
    if not plan.changed:
        return
    fs, path = part.fs, part.path
    try:
        new_bases = _stage_new_segments(part, plan, fs, path, CLEANED, now_ms)
    except BaseException:
        for entry in fs.list_dir(path):
            if entry.name.endswith(CLEANED):
                fs.delete(entry.path)
        raise
    if plan.snapshot_at_log_end:
        name = segment_file_name(plan.outcome.rolled_at, ".snapshot")
        fs.write_atomic(fs.join(path, name), _snapshot_at_log_end(part, plan.log_end_offset))
        fs.set_mtime(fs.join(path, name), now_ms)
    fault("staged", "")
    for offset in plan.snapshots_to_delete:
        entry = part.snapshots[offset]
        fs.delete(entry.path)
        fault("snapshot-deleted", entry.name)
    for name in _CHECKPOINT_ORDER:  # the log start offset first: it is the commit point
        if name in plan.checkpoint_updates:
            log_dir.update_checkpoint(name, {plan.tp: plan.checkpoint_updates[name]})
            fault("checkpoint-written", name)
    if plan.epochs_changed:
        epoch_path = fs.join(path, LEADER_EPOCH_CHECKPOINT)
        fs.write_atomic(epoch_path, format_leader_epoch_checkpoint(plan.epochs_after).encode("utf-8"))
        fault("checkpoint-written", LEADER_EPOCH_CHECKPOINT)
    old_bases = [d.segment.base_offset for d in plan.deleted]
    if plan.truncation is not None:
        old_bases.append(plan.truncation.base_offset)
    if new_bases or old_bases:
        replace_segments(fs, path, new_bases, old_bases, fault=fault)
    fs.sync_dir(path)


def copy_file(src_fs: LogFileSystem, src: str, dst_fs: LogFileSystem, dst: str, mtime_ms: int | None = None,
              chunk_size: int = 8 * 1024 * 1024) -> None:
    """Stream a file between filesystems, keeping its modification time (time retention falls
    back to a `.log` file's mtime)."""
    with src_fs.open_input(src) as f, dst_fs.open_output(dst) as out:
        while True:
            chunk = f.read(chunk_size)
            if not chunk:
                break
            out.write(chunk)
    dst_fs.fsync(dst)
    if mtime_ms is not None:
        dst_fs.set_mtime(dst, mtime_ms)


def copy_tree(src_fs: LogFileSystem, src: str, dst_fs: LogFileSystem, dst: str,
              skip: Callable[[FileEntry], bool] = lambda e: False) -> None:
    dst_fs.make_dirs(dst)
    for entry in src_fs.list_dir(src):
        if skip(entry):
            continue
        target = dst_fs.join(dst, entry.name)
        if entry.is_dir:
            copy_tree(src_fs, entry.path, dst_fs, target)
        else:
            copy_file(src_fs, entry.path, dst_fs, target, entry.mtime_ms)


def write_partition(part: Partition, plan: PartitionPlan, out_fs: LogFileSystem, out_path: str, *,
                    now_ms: int) -> None:
    """Write the partition as `plan` leaves it into `out_path` (a new directory): kept files are
    copied, changed ones written. Log-dir checkpoints are the caller's."""
    dropped = set()
    for d in plan.deleted:
        dropped.update(_segment_file_names(d.segment.base_offset))
    if plan.truncation is not None:
        dropped.update(_segment_file_names(plan.truncation.base_offset))
    dropped.update(segment_file_name(o, ".snapshot") for o in plan.snapshots_to_delete)
    if plan.epochs_changed:
        dropped.add(LEADER_EPOCH_CHECKPOINT)
    copy_tree(part.fs, part.path, out_fs, out_path, skip=lambda e: e.name in dropped)
    _stage_new_segments(part, plan, out_fs, out_path, "", now_ms)
    if plan.snapshot_at_log_end:
        name = out_fs.join(out_path, segment_file_name(plan.outcome.rolled_at, ".snapshot"))
        out_fs.write_bytes(name, _snapshot_at_log_end(part, plan.log_end_offset))
        out_fs.set_mtime(name, now_ms)
    if plan.epochs_changed:
        epoch_path = out_fs.join(out_path, LEADER_EPOCH_CHECKPOINT)
        out_fs.write_atomic(epoch_path, format_leader_epoch_checkpoint(plan.epochs_after).encode("utf-8"))
    out_fs.sync_dir(out_path)


def recover(fs: LogFileSystem, partition_dir: str) -> list[str]:
    """What Kafka's loader does before a partition is used, as far as files go: finish or roll back
    an interrupted swap (`swap.recover_partition`), then delete index files without a `.log` (a
    deletion interrupted between a segment's files leaves them). Returns what it did."""
    actions = recover_partition(fs, partition_dir)
    for entry in Partition.open(fs, partition_dir).orphan_indexes:
        fs.delete(entry.path)
        actions.append(f"deleted orphan {entry.name}")
    return actions


# -- a whole log directory -----------------------------------------------------------------------------------

@dataclass
class RetentionReport:
    log_dir: str
    output: str | None
    dry_run: bool
    now_ms: int
    partitions: list[PartitionPlan] = field(default_factory=list)
    committed_offsets: CommittedOffsets | None = None
    delete_records_unknown: list[tuple[str, int, int]] = field(default_factory=list)
    delete_records_unselected: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def delete_records_results(self) -> list[dict]:
        """One line per requested partition, as kafka-delete-records.sh reports them."""
        out = []
        for plan in self.partitions:
            if plan.delete_records is not None:
                out.append({"topic": plan.topic, "partition": plan.partition, **plan.delete_records.to_dict()})
        for topic, partition, offset in self.delete_records_unknown:
            out.append({"topic": topic, "partition": partition, "requestedOffset": offset, "error": {
                "code": "UNKNOWN_TOPIC_OR_PARTITION",
                "message": "This server does not host this topic-partition."}})
        for topic, partition, offset in self.delete_records_unselected:
            out.append({"topic": topic, "partition": partition, "requestedOffset": offset, "error": {
                "code": "NOT_SELECTED", "message": f"topic {topic} is not among the selected topics"}})
        return sorted(out, key=lambda r: (r["topic"], r["partition"]))

    @property
    def delete_records_failed(self) -> bool:
        return any("error" in r for r in self.delete_records_results)

    def totals(self) -> dict:
        by_reason: dict[str, int] = {}
        for plan in self.partitions:
            for d in plan.deleted:
                by_reason[d.reason] = by_reason.get(d.reason, 0) + 1
        return {
            "partitions": len(self.partitions),
            "partitionsChanged": sum(p.changed for p in self.partitions),
            "segmentsDeleted": sum(len(p.deleted) for p in self.partitions),
            "bytesDeleted": sum(d.segment.size for p in self.partitions for d in p.deleted),
            "segmentsRolled": sum(p.outcome.rolled_at is not None for p in self.partitions),
            "segmentsTruncated": sum(p.truncation is not None for p in self.partitions),
            "recordsTruncated": sum(p.truncation.records_removed for p in self.partitions if p.truncation),
            "snapshotsDeleted": sum(len(p.snapshots_to_delete) for p in self.partitions),
            "deletedByReason": by_reason,
        }

    def to_dict(self) -> dict:
        co = self.committed_offsets
        return {
            "version": 1, "logDir": self.log_dir, "output": self.output, "dryRun": self.dry_run,
            "nowMs": self.now_ms,
            "committedOffsets": None if co is None else {"source": co.source, "groups": co.groups,
                                                         "entries": len(co.offsets)},
            "totals": self.totals(),
            "deleteRecords": self.delete_records_results,
            "partitions": [p.to_dict() for p in self.partitions],
        }

    def summary(self, max_partitions: int = 40) -> str:
        t = self.totals()
        mode = "dry run" if self.dry_run else (f"written to {self.output}" if self.output else "in place")
        lines = [f"retain {self.log_dir} ({mode}, now={self.now_ms}): {t['partitionsChanged']} of {t['partitions']} "
                 f"partitions change, {t['segmentsDeleted']} segments ({t['bytesDeleted']} bytes) deleted"
                 + (f", {t['segmentsRolled']} rolled" if t["segmentsRolled"] else "")
                 + (f", {t['recordsTruncated']} records truncated below the log start offset"
                    if t["segmentsTruncated"] else "")]
        shown = [p for p in self.partitions
                 if p.changed or p.skipped or (p.consumed and p.consumed.enabled and p.consumed.reason)]
        for plan in shown[:max_partitions]:
            reasons = ", ".join(f"{n} by {r}" for r, n in plan.to_dict()["deletedByReason"].items())
            line = (f"  {plan.topic}-{plan.partition}: log start {plan.log_start_offset} -> "
                    f"{plan.new_log_start_offset}, {len(plan.deleted)} of {len(plan.segments)} segments deleted"
                    + (f" ({reasons})" if reasons else ""))
            if plan.skipped:
                line = f"  {plan.topic}-{plan.partition}: skipped: {plan.skipped}"
            lines.append(line)
            c = plan.consumed
            if c is not None and c.enabled and c.reason:
                lines.append(f"    consumed retention: {c.reason}")
            if c is not None:
                for g in c.holding_back:
                    lines.append(f"    group {g.group} (offset {g.committed_offset}) holds back offsets "
                                 f"[{g.from_offset}, {g.to_offset}) in {g.segments} segment(s)")
                for g in c.would_lose:
                    lines.append(f"    group {g.group} (offset {g.committed_offset}) loses unconsumed offsets "
                                 f"[{g.from_offset}, {g.to_offset}) to forced retention")
        if len(shown) > max_partitions:
            lines.append(f"  ... {len(shown) - max_partitions} more partitions (the JSON report lists all)")
        if self.delete_records_results:
            lines.append("Records delete operation completed:")
            for r in self.delete_records_results:
                if "error" in r:
                    lines.append(f"partition: {r['topic']}-{r['partition']}\terror: {r['error']['message']}")
                else:
                    lines.append(f"partition: {r['topic']}-{r['partition']}\tlow_watermark: {r['lowWatermark']}")
        return "\n".join(lines)


ConfigFor = Callable[[str], TopicConfig]


def run_retention(log_dir_path: str, *, config_for: ConfigFor, now_ms: int, topics: Iterable[str] | None = None,
                  delete_records: Mapping[tuple[str, int], int] | None = None, truncate_below_start: bool = False,
                  committed: CommittedOffsets | Callable[[LogDir], CommittedOffsets] | None = None,
                  output: str | None = None, dry_run: bool = False,
                  missing_high_watermark: str = MISSING_HW_LOG_START,
                  fault: FaultHook = _no_fault) -> RetentionReport:
    """Retention over a log directory: plan every selected partition, then apply in place, or write
    a complete new log directory at `output` (the input untouched), or (`dry_run`) only report.

    `config_for(topic)` gives a topic's effective configuration. `committed` is the committed
    offsets, or a function that reads them from the log dir (called only when some selected topic
    has consumed retention enabled). Unless it is a dry run, a log dir locked by a running broker is
    refused; interrupted swaps are recovered first (in the output's copy with `output`). Every
    partition is planned before any is changed, so unreadable input changes nothing; an output is
    staged and appears under its name only when whole (storage/destination.py)."""
    with destination(log_dir_path, output, dry_run=dry_run, copy=False) as staged:
        out_fs = None if output is None else LogFileSystem.for_path(output)[0]
        return _retain(LogDir.open(log_dir_path), config_for=config_for, now_ms=now_ms, topics=topics,
                       delete_records=delete_records, truncate_below_start=truncate_below_start, committed=committed,
                       output=output, out_fs=out_fs, out_path=None if output is None or dry_run else staged.path,
                       dry_run=dry_run, missing_high_watermark=missing_high_watermark, fault=fault)


def _retain(log_dir: LogDir, *, config_for: ConfigFor, now_ms: int, topics, delete_records, truncate_below_start: bool,
            committed, output: str | None, out_fs: LogFileSystem | None, out_path: str | None, dry_run: bool,
            missing_high_watermark: str, fault: FaultHook) -> RetentionReport:
    """run_retention's work; `out_path` is where the output is staged (None: in place or a dry run)."""
    fs = log_dir.fs
    wanted = None if topics is None else set(topics)
    selected = {tp for tp in log_dir.topic_partitions if wanted is None or tp[0] in wanted}
    requests = dict(delete_records or {})
    report = RetentionReport(log_dir.path, output, dry_run, now_ms)
    report.delete_records_unknown = sorted((t, p, o) for (t, p), o in requests.items()  # a broker: not a topic
                                           if (t, p) not in log_dir.partition_paths or is_kraft_metadata(t))
    report.delete_records_unselected = sorted((t, p, o) for (t, p), o in requests.items()
                                              if (t, p) in log_dir.partition_paths and (t, p) not in selected
                                              and not is_kraft_metadata(t))
    configs = {topic: config_for(topic) for topic in sorted({t for t, _ in selected})}
    if callable(committed):
        wants = any(c.delete and c.retention_commitoffset_enable for c in configs.values())
        committed = committed(log_dir) if wants else None
    report.committed_offsets = committed
    checkpoints = {name: log_dir.read_checkpoint(name) for name in OFFSET_CHECKPOINT_FILES}
    writing_output = out_path is not None
    if writing_output:
        _start_output(log_dir, out_fs, out_path)
    # 1. recover and plan every selected partition
    work = []
    for tp in log_dir.topic_partitions:
        part = log_dir.partition(*tp)
        target = out_fs.join(out_path, fs.name(part.path)) if out_path is not None else None
        if tp in selected and is_kraft_metadata(tp[0]):  # reported, and copied to an output as it is
            plan = PartitionPlan(tp[0], tp[1], part.path, configs[tp[0]], [], 0, 0, 0, "",
                                 RetentionOutcome([], [], 0), skipped=KRAFT_METADATA_NOT_REWRITTEN)
            report.partitions.append(plan)
        if tp not in selected or is_kraft_metadata(tp[0]):
            work.append((part, None, target))
            continue
        recovered = []
        if part.in_flight or part.orphan_indexes:
            if dry_run:
                plan = PartitionPlan(tp[0], tp[1], part.path, configs[tp[0]], [], 0, 0, 0, "",
                                     RetentionOutcome([], [], 0))
                plan.skipped = ("an interrupted rewrite left .cleaned/.swap/.deleted files or index files "
                                "without a .log; a run without --dry-run recovers them first")
                report.partitions.append(plan)
                continue
            if target is not None:  # recover a copy: the input stays untouched
                copy_tree(fs, part.path, out_fs, target)
                recovered = recover(out_fs, target)
                part = Partition.open(out_fs, target)
            else:
                recovered = recover(fs, part.path)
                part = log_dir.partition(*tp)
        plan = plan_partition(part, config=configs[tp[0]], checkpoints=checkpoints, now_ms=now_ms,
                              delete_records=requests.get(tp), truncate_below_start=truncate_below_start,
                              committed=committed, missing_high_watermark=missing_high_watermark)
        plan.recovered = recovered
        report.partitions.append(plan)
        work.append((part, plan, target))
    if dry_run:
        return report
    # 2. apply
    out_updates: dict[str, dict] = {}
    for part, plan, target in work:
        if target is None:
            if plan is not None:  # a partition of a topic not selected stays as it is
                apply_in_place(part, plan, log_dir, now_ms=now_ms, fault=fault)
        elif plan is not None and part.path == target:  # recovered in the output, which is the partition now
            _apply_to_copy(part, plan, out_updates, now_ms, fault)
        elif plan is not None and plan.changed:
            write_partition(part, plan, out_fs, target, now_ms=now_ms)
            _collect(out_updates, plan)
        else:
            copy_tree(fs, part.path, out_fs, target)
    if writing_output:
        out_log_dir = LogDir(out_fs, out_path)
        for name, updates in out_updates.items():
            if updates:
                out_log_dir.update_checkpoint(name, updates)
                out_fs.set_mtime(out_fs.join(out_path, name), now_ms)
    return report


def _start_output(log_dir: LogDir, out_fs: LogFileSystem, out_path: str) -> None:
    """The output log dir's own files: everything at the top level but the partition directories
    (which follow) and the input broker's lock."""
    fs = log_dir.fs
    out_fs.make_dirs(out_path)
    for entry in fs.list_dir(log_dir.path):
        if entry.name == LOCK_FILE:
            continue
        if not entry.is_dir:
            copy_file(fs, entry.path, out_fs, out_fs.join(out_path, entry.name), entry.mtime_ms)
        elif parse_partition_dir_name(entry.name) is None:
            copy_tree(fs, entry.path, out_fs, out_fs.join(out_path, entry.name))


def _collect(updates: dict[str, dict], plan: PartitionPlan) -> None:
    for name, value in plan.checkpoint_updates.items():
        updates.setdefault(name, {})[plan.tp] = value


def _apply_to_copy(part: Partition, plan: PartitionPlan, updates: dict[str, dict], now_ms: int,
                   fault: FaultHook) -> None:
    """Retain a partition that was copied into the output (and recovered there) in place, leaving
    its log-dir checkpoint entries to the output's final write."""

    class _Deferred:
        def update_checkpoint(self, name, entries):
            updates.setdefault(name, {}).update(entries)

    apply_in_place(part, plan, _Deferred(), now_ms=now_ms, fault=fault)
