"""Retention of one partition: the plan, decided from metadata, and carrying it out in place.

The plan (`plan_partition`) reads only metadata (listing, checkpoint files, the last entries of
index files and the batch headers after the last offset-index entry), plus, with
`truncate_below_start`, the batches of the one segment that holds the log start offset; the rules
are kafkalog/rules/retention.py.

Order of the in-place steps (`apply_in_place`), and what a crash leaves (after `recover`, which the
next run does first): (1) new segments are staged as `.cleaned` (the rolled empty segment, the
truncated segment) and a producer snapshot at the log end offset is written when a roll needs one;
(2) producer snapshots below the new log start offset go (Kafka drops them on load anyway) -- a
crash up to here leaves the old log; (3) `log-start-offset-checkpoint` (and the cleaner, recovery
point and high watermark checkpoints where they fell below the new start), then
`leader-epoch-checkpoint` -- from here the log as Kafka reads it (from the log start offset) is the
new one; (4) `swap.replace_segments`. A crash after (3) leaves segments wholly below the log start
offset, which Kafka's next retention pass deletes and so does the next run: every intermediate
directory validates clean once recovered (`recover`: Kafka's swap recovery, and index files left
without their `.log` deleted, as Kafka's loader does), and a rerun ends in the same bytes as an
uninterrupted run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..codec.consumer_offsets import replay_committed_offsets
from ..codec.coordinator_records import share_partition_start_offsets
from ..codec.filter import BatchRetention
from ..config import TopicConfig
from ..errors import KafkaLogError
from ..rules.partition_state import UNNAMED_AT_LOG_END, UNNAMED_AT_LOG_START, partition_state
from ..rules.retention import (
    FORCED,
    LOG_START_OFFSET_BREACH,
    CommittedOffsets,
    DeletedSegment,
    DeleteRecordsError,
    RemoteLog,
    RetentionOutcome,
    deletable_segments,
    delete_old_segments,
    delete_records_offset,
    local_retention_bytes,
    local_retention_ms,
    share_group_offsets,
    time_breach,
)
from ..rules.segment_meta import SegmentMeta
from ..storage.checkpoint import (
    EpochEntry,
    format_leader_epoch_checkpoint,
    parse_leader_epoch_checkpoint,
    truncate_epochs_from_start,
)
from ..storage.fs import LogFileSystem
from ..storage.log_writer import SegmentWriter
from ..storage.logdir import LogDir, OffsetCheckpoints
from ..storage.naming import (
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    segment_file_name,
)
from ..storage.partition import Partition
from ..storage.producer_state import replay_partition
from ..storage.remote_log import topic_id
from ..storage.rewrite import CLEANED, BatchPlan, rewrite_segments
from ..storage.segment import LogSegment, locate, log_end_offset
from ..storage.swap import FaultHook, no_fault, recover_partition, replace_segments
from ..topics import CONSUMER_OFFSETS_TOPIC, SHARE_GROUP_STATE_TOPIC
from .clock import stamp

# Without a replication-offset-checkpoint entry: Kafka starts the high watermark at 0, clamped to
# the log start offset (nothing can be deleted); "log-end" trusts the log end offset instead.
MISSING_HW_LOG_START, MISSING_HW_LOG_END = UNNAMED_AT_LOG_START, UNNAMED_AT_LOG_END

_CHECKPOINT_ORDER = (
    LOG_START_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)


def read_committed_offsets(log_dir: LogDir) -> CommittedOffsets:
    """The live committed offsets in the log dir's own `__consumer_offsets` partitions, as the group
    coordinator loads them (`consumer_offsets.replay_committed_offsets`), and the start offsets of the
    share groups in its `__share_group_state` partitions, as the share coordinator loads them
    (`coordinator_records.share_partition_start_offsets`; KIP-932: they hold retention back alike)."""
    offsets: dict[tuple[str, str, int], int | None] = {}
    share_starts: dict[tuple[str, str, int], int | None] = {}
    for topic, number in log_dir.topic_partitions:
        if topic == CONSUMER_OFFSETS_TOPIC:
            for key, value in replay_committed_offsets(log_dir.partition(topic, number).batches()).items():
                offsets[key] = value.offset
        elif topic == SHARE_GROUP_STATE_TOPIC:
            share_starts.update(share_partition_start_offsets(log_dir.partition(topic, number).batches()))
    if share_starts:  # share state names topics by id: the local partitions' partition.metadata map them
        ids = ((topic_id(log_dir.partition(t, n)), t) for t, n in log_dir.topic_partitions)
        offsets.update(share_group_offsets(share_starts, {id_: t for id_, t in ids if id_ is not None}))
    return CommittedOffsets(offsets, f"{CONSUMER_OFFSETS_TOPIC} and {SHARE_GROUP_STATE_TOPIC} in {log_dir.path}")


# -- the plan of one partition -------------------------------------------------------------------------------


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
        return {
            "segment": self.base_offset,
            "belowOffset": self.log_start_offset,
            "recordsRemoved": self.records_removed,
            "batchesDropped": self.batches_dropped,
            "batchesEmptied": self.batches_emptied,
            "batchesReencoded": self.batches_reencoded,
        }


def plan_truncation(segment: LogSegment, log_start_offset: int) -> TruncationPlan | None:
    """The batch plans that remove every record below `log_start_offset` from `segment`; None when
    nothing is below it (a second run finds nothing)."""
    plan = TruncationPlan(segment.base_offset, log_start_offset, {})
    for position, batch in segment.batches():
        try:  # what is decoded here (a legacy wrapper's first offset, the straddling batch) is named in the file
            if not _plan_batch(plan, segment.base_offset, position, batch, log_start_offset):
                break
        except KafkaLogError as err:
            raise locate(err, segment.log_path, position, batch) from None
    return plan if plan.plans else None


def _plan_batch(plan: TruncationPlan, base: int, position: int, batch, log_start_offset: int) -> bool:
    """Add the plan of one batch of the segment at `base` to `plan`; False at the first batch at or
    above `log_start_offset` (nothing from there on is truncated)."""
    if batch.base_offset >= log_start_offset:
        return False
    v2_producer = batch.has_producer_id
    if batch.last_offset < log_start_offset:
        if batch.is_control or (v2_producer and batch.records_count == 0):
            return True  # a marker, or already an empty producer batch: no record data
        count = batch.records_count
        if v2_producer:
            every = frozenset(range(batch.base_offset, batch.last_offset + 1))
            plan.plans[(base, position)] = BatchPlan(BatchRetention.RETAIN_EMPTY, every)
            plan.batches_emptied += 1
        else:
            plan.plans[(base, position)] = BatchPlan(BatchRetention.DELETE)
            plan.batches_dropped += 1
        plan.records_removed += count
        return True
    # straddles the log start offset: keep the records at or above it
    if batch.is_control:
        return True
    batch.verify()  # the one batch decoded whole here: its damage stops the run
    below = frozenset(r.offset for r in batch.records() if r.offset < log_start_offset)
    if below:
        retention = BatchRetention.RETAIN_EMPTY if v2_producer else BatchRetention.DELETE_EMPTY
        plan.plans[(base, position)] = BatchPlan(retention, below)
        plan.batches_reencoded += 1
        plan.records_removed += len(below)
    return True


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
        return {
            "group": self.group,
            "committedOffset": self.committed_offset,
            "fromOffset": self.from_offset,
            "toOffset": self.to_offset,
            "segments": self.segments,
            "bytes": self.bytes,
        }


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
        return {
            "enabled": self.enabled,
            "applied": self.applied,
            "reason": self.reason,
            "retentionCommitoffsetMs": self.consumed_ms,
            "minCommittedOffset": self.min_committed_offset,
            "groups": dict(sorted(self.groups.items())),
            "unknownGroups": self.unknown_groups,
            "holdingBack": [g.to_dict() for g in self.holding_back],
            "wouldLoseUnderForcedRetention": [g.to_dict() for g in self.would_lose],
        }


@dataclass
class DeleteRecordsOutcome:
    requested: int
    offset: int | None = None  # the log start offset asked for (-1 resolved)
    low_watermark: int | None = None  # the log start offset after the run
    error: DeleteRecordsError | None = None

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"requestedOffset": self.requested}
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
    remote: RemoteLog | None = None  # tiered storage: what is known of the remote log

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
    def deletes_all_data(self) -> bool:
        """Every segment that holds data goes (an empty one may be rolled): no record is left, and
        no remote copy either (without tiered storage). What an operator must see before it happens."""
        gone = {d.segment.base_offset for d in self.deleted}
        return (
            bool(gone) and self.remote is None and all(s.size == 0 for s in self.segments if s.base_offset not in gone)
        )

    def all_data_deleted_line(self, now_ms: int, dry_run: bool) -> str:
        """`orders-0: every segment (3 segments, 1234 bytes) would be deleted by retention.ms=..., now=...`"""
        causes = []
        for reason in dict.fromkeys(d.reason for d in self.deleted):
            causes.append(
                f"the log start offset {self.new_log_start_offset}"
                if reason == LOG_START_OFFSET_BREACH
                else f"{reason}={self.config.get(reason)}"
            )
        return (
            f"{self.topic}-{self.partition}: every segment ({len(self.deleted)} segments, "
            f"{sum(d.segment.size for d in self.deleted)} bytes) {'would be' if dry_run else 'is'} deleted by "
            f"{' and '.join(causes)}, now={stamp(now_ms)}"
        )

    @property
    def changed(self) -> bool:
        return (
            self.segments_change
            or bool(self.snapshots_to_delete)
            or self.snapshot_at_log_end
            or self.epochs_changed
            or bool(self.checkpoint_updates)
        )

    def to_dict(self) -> dict:
        by_reason: dict[str, int] = {}
        for d in self.deleted:
            by_reason[d.reason] = by_reason.get(d.reason, 0) + 1
        out = {
            "topic": self.topic,
            "partition": self.partition,
            "cleanupPolicy": ",".join(self.config.cleanup_policy),
            "changed": self.changed,
            "logStartOffset": {"before": self.log_start_offset, "after": self.new_log_start_offset},
            "logEndOffset": self.log_end_offset,
            "highWatermark": self.high_watermark,
            "highWatermarkSource": self.high_watermark_source,
            "segments": {"before": len(self.segments), "after": len(self.outcome.segments)},
            "deletedSegments": [
                {
                    "baseOffset": d.segment.base_offset,
                    "upperBound": d.upper_bound,
                    "lastOffset": d.segment.last_offset,
                    "bytes": d.segment.size,
                    "largestTimestamp": d.segment.largest_timestamp,
                    "timestampFrom": "timeindex" if d.segment.timestamp_from_index else "mtime",
                    "reason": d.reason,
                }
                for d in self.deleted
            ],
            "deletedByReason": by_reason,
            "bytesDeleted": sum(d.segment.size for d in self.deleted),
            "rolledAt": self.outcome.rolled_at,
            "truncation": self.truncation.to_dict() if self.truncation else None,
            "deleteRecords": self.delete_records.to_dict() if self.delete_records else None,
            "consumedRetention": self.consumed.to_dict() if self.consumed else None,
            "snapshotsDeleted": self.snapshots_to_delete,
            "snapshotWrittenAt": self.outcome.rolled_at if self.snapshot_at_log_end else None,
            "leaderEpochs": None
            if not self.epochs_changed
            else {
                "before": [list(e) for e in self.epochs_before or []],
                "after": [list(e) for e in self.epochs_after or []],
            },
            "checkpointUpdates": self.checkpoint_updates,
            "remoteLog": None
            if self.remote is None
            else {
                "highestOffset": self.remote.highest_offset,
                "copyEnabled": self.remote.copy_enabled,
                "localLogStartOffset": {
                    "before": self.segments[0].base_offset if self.segments else None,
                    "after": self.outcome.segments[0].base_offset if self.outcome.segments else None,
                },
            },
            "notes": self.notes,
        }
        if self.recovered:
            out["recovered"] = self.recovered
        if self.skipped:
            out["skipped"] = self.skipped
        return out


def plan_partition(
    part: Partition,
    *,
    config: TopicConfig,
    checkpoints: Mapping[str, Mapping],
    now_ms: int,
    delete_records: int | None = None,
    truncate_below_start: bool = False,
    committed: CommittedOffsets | None = None,
    missing_high_watermark: str = MISSING_HW_LOG_START,
    remote: RemoteLog | None = None,
) -> PartitionPlan:
    """Decide retention for one partition. `checkpoints` maps each log-dir checkpoint file
    name to its {(topic, partition): offset} entries; `delete_records` is a requested offset (-1:
    the high watermark); `committed` the committed offsets of consumer groups; `remote` the remote
    log of a topic with tiered storage (rules/retention.py). With tiered storage the log start
    offset is the global one: the checkpoint's entry as it is (Kafka's LogLoader; 0 without one),
    below the local segments where older offsets are in remote storage."""
    tp = (part.topic, part.partition)
    consumed_on = config.delete and config.retention_commitoffset_enable
    metas = []
    for i, segment in enumerate(part.segments):
        metas.append(segment.meta(with_last_offset=consumed_on or i == len(part.segments) - 1, with_first_batch=False))
    log_end = log_end_offset(part.segments)
    # the log end offset is the last segment's: no producer state is replayed unless a roll needs its snapshot
    state = partition_state(
        part,
        replay_partition,
        **OffsetCheckpoints.of_files(checkpoints).of(tp),
        tiered=remote is not None,
        log_end_offset=log_end,
        unnamed_high_watermark=missing_high_watermark,
    )
    log_start, high_watermark = state.log_start_offset, state.high_watermark
    if state.high_watermark_checkpointed:
        hw_source = "replication-offset-checkpoint"
    elif missing_high_watermark == MISSING_HW_LOG_END:
        hw_source = "log end offset (no replication-offset-checkpoint entry)"
    else:
        hw_source = "none in replication-offset-checkpoint: Kafka's 0, raised to the log start offset"
    plan = PartitionPlan(
        part.topic,
        part.partition,
        part.path,
        config,
        metas,
        log_start,
        log_end,
        high_watermark,
        hw_source,
        RetentionOutcome(list(metas), [], log_start),
        remote=remote,
    )
    if not metas:
        plan.skipped = "no segment (Kafka creates an empty one at the log start offset)"
        return plan
    if log_start > log_end:
        plan.skipped = (
            f"the log start offset {log_start} is above the log end offset {log_end}: Kafka deletes "
            "every segment on load; nothing done"
        )
        return plan
    # KIP-107: deleteRecords moves the log start offset first
    start = log_start
    if delete_records is not None:
        outcome = DeleteRecordsOutcome(delete_records)
        try:
            outcome.offset = delete_records_offset(
                delete_records, topic=part.topic, partition=part.partition, config=config, high_watermark=high_watermark
            )
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
            report.reason = (
                f"the committed offset of group(s) {', '.join(report.unknown_groups)} for partition "
                f"{part.topic}-{part.partition} is not known (KIP-68: min offset -1), so consumed "
                "retention does not apply"
            )
        else:
            min_committed = min(o for o in groups.values() if o is not None)  # none is None here
            report.min_committed_offset = min_committed
            report.applied = True
        plan.consumed = report
    elif groups:
        plan.consumed = ConsumedReport(
            False,
            reason="retention.commitoffset.enable is false" if config.delete else "cleanup.policy has no delete",
            groups=groups,
        )
    plan.outcome = delete_old_segments(
        metas,
        config=config,
        log_start_offset=start,
        log_end_offset=log_end,
        high_watermark=high_watermark,
        now_ms=now_ms,
        min_committed_offset=min_committed,
        remote=remote,
    )
    new_start = plan.outcome.log_start_offset
    if plan.delete_records is not None and plan.delete_records.error is None:
        plan.delete_records.low_watermark = new_start
    if plan.consumed is not None:
        _consumer_reports(plan, plan.consumed, high_watermark, now_ms)
    # --truncate-below-start
    remaining = plan.outcome.segments
    first = remaining[0]
    if (
        truncate_below_start
        and plan.outcome.rolled_at != first.base_offset
        and first.base_offset < new_start
        and first.size > 0
    ):
        source = next(s for s in part.segments if s.base_offset == first.base_offset)
        plan.truncation = plan_truncation(source, new_start)
    # producer snapshots, leader epochs, checkpoints; the local log start offset is above the global
    # one where older offsets are only in remote storage
    local_start = max(new_start, remaining[0].base_offset)
    plan.snapshots_to_delete = sorted(o for o in part.snapshots if o < local_start)
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
        if current is not None and current < local_start:
            plan.checkpoint_updates[name] = local_start
    if plan.outcome.rolled_at is not None:
        plan.notes.append(
            f"every segment was deletable: rolled a new empty segment at the log end offset {plan.outcome.rolled_at}"
        )
    if remote is not None:
        plan.notes.append(_tiered_note(remote, config, new_start))
    return plan


def _tiered_note(remote: RemoteLog, config: TopicConfig, log_start: int) -> str:
    if not remote.copy_enabled:
        return "tiered storage with remote.log.copy.disable: retention.ms and retention.bytes apply to local segments"
    settings = (
        f"local.retention.ms={local_retention_ms(config, remote)}, "
        f"local.retention.bytes={local_retention_bytes(config, remote)}"
    )
    if remote.highest_offset < 0:
        return (
            f"tiered storage ({settings}): no uploaded segment is known (no __remote_log_metadata in the log "
            "dir and no remote storage directory, or neither lists this partition), so time and size retention "
            "delete no local segment"
        )
    return (
        f"tiered storage ({settings}): only local segments uploaded to remote storage (offsets up to "
        f"{remote.highest_offset}) are deleted; the log start offset stays at {log_start}, where the remote log begins"
    )


def _consumer_reports(plan: PartitionPlan, report: ConsumedReport, high_watermark: int, now_ms: int) -> None:
    """Per group: what it holds back from consumed retention (`report`, the plan's), and what forced
    retention deleted before it had consumed it."""
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
    old = time_breach(now_ms, report.consumed_ms)  # None when consumed_ms is -1
    if not report.enabled or old is None:
        return
    candidates = deletable_segments(
        plan.outcome.segments, old, high_watermark=high_watermark, log_end_offset=plan.log_end_offset
    )
    if not candidates:
        return
    remaining = plan.outcome.segments
    upper = {
        s.base_offset: (remaining[i + 1].base_offset if i + 1 < len(remaining) else plan.log_end_offset)
        for i, s in enumerate(remaining)
    }
    held = []
    for group, committed in sorted(report.groups.items()):
        mine = [s for s in candidates if committed is None or committed < 0 or s.last_offset_or_below() >= committed]
        if mine:
            low = mine[0].base_offset if committed is None or committed < 0 else max(committed, mine[0].base_offset)
            held.append(
                GroupLoss(group, committed, low, upper[mine[-1].base_offset], len(mine), sum(s.size for s in mine))
            )
    report.holding_back = sorted(
        held, key=lambda g: (-1 if g.committed_offset is None else g.committed_offset, g.group)
    )


# -- applying a plan -----------------------------------------------------------------------------------------


def _index_interval(plan: PartitionPlan) -> int:
    return plan.config.index_interval_bytes


def _stage_new_segments(part: Partition, plan: PartitionPlan, now_ms: int) -> list[int]:
    """Write the truncated segment and the rolled empty segment beside the old ones, as `.cleaned`."""
    fs, dir_path, suffix = part.fs, part.path, CLEANED
    bases = []
    if plan.truncation is not None:
        source = next(s for s in part.segments if s.base_offset == plan.truncation.base_offset)
        rewrite_segments(
            fs,
            dir_path,
            [source],
            plan.truncation.plans,
            delete_horizon_ms=now_ms + plan.config.delete_retention_ms,
            index_interval_bytes=_index_interval(plan),
            aborted_txns=source.aborted_txns(),
            suffix=suffix,
        )
        bases.append(source.base_offset)
    if plan.outcome.rolled_at is not None:
        writer = SegmentWriter(
            fs, dir_path, plan.outcome.rolled_at, index_interval_bytes=_index_interval(plan), suffix=suffix
        )
        writer.close(mtime_ms=now_ms)
        bases.append(plan.outcome.rolled_at)
    return bases


def _snapshot_at_log_end(part: Partition, log_end: int) -> bytes:
    """Producer state at the log end offset, for the snapshot Kafka takes when it rolls."""
    manager, _ = replay_partition(part)
    manager.map_end_offset = log_end
    return manager.snapshot().to_bytes()


def ensure_changeable(part: Partition, plan: PartitionPlan, log_dir: LogDir) -> None:
    """Refuse (FileAccessError, naming it) a file or directory that `apply_in_place` would replace,
    rename or delete and cannot: checked for every partition before any is changed, so that a
    read-only or immutable file stops the run before it changes anything."""
    if not plan.changed:
        return
    fs = part.fs
    old = {d.segment.base_offset for d in plan.deleted} | ({plan.truncation.base_offset} if plan.truncation else set())
    paths = [log_dir.path, part.path]  # checkpoints are replaced in the first; segments staged, renamed in the second
    paths += [e.path for s in part.segments if s.base_offset in old for e in s.files.values()]
    paths += [part.snapshots[offset].path for offset in plan.snapshots_to_delete]
    paths += [fs.join(log_dir.path, name) for name in plan.checkpoint_updates]
    if plan.epochs_changed:
        paths.append(fs.join(part.path, LEADER_EPOCH_CHECKPOINT))
    for path in paths:
        fs.ensure_writable(path)


def apply_in_place(
    part: Partition, plan: PartitionPlan, log_dir: LogDir, *, now_ms: int, fault: FaultHook = no_fault
) -> None:
    """Carry out `plan` in the partition directory (module docstring: the order and what a crash
    leaves). `fault(step, name)` is called after each step (a test hook that may raise). A failure
    before the commit point (the first checkpoint written) removes what was staged: the old log
    stays whole, its snapshots below the new log start offset excepted."""
    if not plan.changed:
        return
    fs, path = part.fs, part.path
    committed = False
    try:
        new_bases = _stage_new_segments(part, plan, now_ms)
        if plan.snapshot_at_log_end:
            assert plan.outcome.rolled_at is not None  # the snapshot of a rolled segment
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
                committed = True
                fault("checkpoint-written", name)
    except BaseException:
        if not committed:
            _unstage(part, plan)
        raise
    if plan.epochs_changed and plan.epochs_after is not None:  # epochs_changed implies the latter
        epoch_path = fs.join(path, LEADER_EPOCH_CHECKPOINT)
        fs.write_atomic(epoch_path, format_leader_epoch_checkpoint(plan.epochs_after).encode("utf-8"))
        fault("checkpoint-written", LEADER_EPOCH_CHECKPOINT)
    old_bases = [d.segment.base_offset for d in plan.deleted]
    if plan.truncation is not None:
        old_bases.append(plan.truncation.base_offset)
    if new_bases or old_bases:
        replace_segments(fs, path, new_bases, old_bases, fault=fault)
    fs.sync_dir(path)


def _unstage(part: Partition, plan: PartitionPlan) -> None:
    """Remove what `apply_in_place` wrote before its commit point: the `.cleaned` segments and a
    producer snapshot at the log end offset it wrote (not one that was there before)."""
    fs = part.fs
    for entry in fs.list_dir(part.path):
        if entry.name.endswith(CLEANED):
            fs.delete(entry.path)
    if plan.snapshot_at_log_end and plan.outcome.rolled_at is not None:
        written = fs.join(part.path, segment_file_name(plan.outcome.rolled_at, ".snapshot"))
        if fs.exists(written):
            fs.delete(written)


def recover(fs: LogFileSystem, partition_dir: str) -> list[str]:
    """What Kafka's loader does before a partition is used, as far as files go: finish or roll back
    an interrupted swap (`swap.recover_partition`), then delete index files without a `.log` (a
    deletion interrupted between a segment's files leaves them). Returns what it did."""
    actions = recover_partition(fs, partition_dir)
    for entry in Partition.open(fs, partition_dir).orphan_indexes:
        fs.delete(entry.path)
        actions.append(f"deleted orphan {entry.name}")
    return actions
