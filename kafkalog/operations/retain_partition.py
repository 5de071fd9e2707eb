"""Retention of one partition: the plan, decided from metadata (`plan_partition`), which
retain_swap.py carries out in place.

The plan reads only metadata (listing, checkpoint files, the last entries of index files and the
batch headers after the last offset-index entry), plus, with `truncate_below_start`, the batches of
the one segment that holds the log start offset (retain_truncation.py); the rules are
kafkalog/rules/retention.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..codec.consumer_offsets import replay_committed_offsets
from ..codec.coordinator_records import share_partition_start_offsets
from ..config import TopicConfig
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
    parse_leader_epoch_checkpoint,
    truncate_epochs_from_start,
)
from ..storage.logdir import LogDir, OffsetCheckpoints
from ..storage.naming import (
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
from ..storage.partition import Partition
from ..storage.producer_state import replay_partition
from ..storage.remote_log import topic_id
from ..storage.segment import log_end_offset
from ..topics import CONSUMER_OFFSETS_TOPIC, SHARE_GROUP_STATE_TOPIC
from .clock import stamp
from .retain_truncation import TruncationPlan, plan_truncation

# Without a replication-offset-checkpoint entry: Kafka starts the high watermark at 0, clamped to
# the log start offset (nothing can be deleted); "log-end" trusts the log end offset instead.
MISSING_HW_LOG_START, MISSING_HW_LOG_END = UNNAMED_AT_LOG_START, UNNAMED_AT_LOG_END


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
