"""Kafka's retention rules, as `UnifiedLog.deleteOldSegments` applies them, plus
deleteRecords (KIP-107) and consumed retention (KIP-68, never built in Kafka). Pure functions over
`SegmentMeta` (base offset, size, largest timestamp, last offset); nothing here opens a file.

`deletable_segments` is Kafka's prefix scan (HW rule, never the empty last segment, stop at the
first segment that may not go); `delete_old_segments` runs the scans in Kafka's order -- log start
offset breach, then (only with `cleanup.policy` containing `delete`) size breach, consumed retention
(when enabled), time breach -- rolling a new empty segment at the log end offset when every segment
goes. `delete_records_offset` is `Partition.deleteRecordsOnLeader` with Kafka's errors.

Tiered storage (KIP-405): for a topic whose remote log is enabled (`remote_log_enabled`), the size
and time scans apply `local.retention.bytes` / `local.retention.ms`, a segment goes only once it is
wholly uploaded (below `RemoteLog.highest_offset`) or below the log start offset, and deleting local
segments moves only the local log start offset: the global one stays where the remote log starts.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from ..config import TopicConfig
from ..errors import KafkaLogError
from ..topics import (
    CONSUMER_OFFSETS_TOPIC,
    KRAFT_METADATA_TOPIC,
    REMOTE_LOG_METADATA_TOPIC,
    SHARE_GROUP_STATE_TOPIC,
    TRANSACTION_STATE_TOPIC,
)
from .segment_meta import SegmentMeta

# Kafka creates its internal topics compacted; without a per-topic cleanup.policy for them, the
# broker-wide default (delete) must not apply.
INTERNAL_COMPACTED_TOPICS = (CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)
# UnifiedLog.isRemoteLogEnabled: never for Kafka's internal topics, its metadata log and the remote
# log metadata topic, whatever their remote.storage.enable says.
NEVER_TIERED_TOPICS = (
    *INTERNAL_COMPACTED_TOPICS,
    SHARE_GROUP_STATE_TOPIC,
    REMOTE_LOG_METADATA_TOPIC,
    KRAFT_METADATA_TOPIC,
)

# Why a segment went (the report's reasons).
LOG_START_OFFSET_BREACH = "log-start-offset"
SIZE_BREACH = "retention.bytes"
CONSUMED_BREACH = "retention.commitoffset.ms"
TIME_BREACH = "retention.ms"
# tiered storage: an uploaded local segment went; its offsets are still read from remote storage
LOCAL_SIZE_BREACH = "local.retention.bytes"
LOCAL_TIME_BREACH = "local.retention.ms"
REASONS = (LOG_START_OFFSET_BREACH, SIZE_BREACH, CONSUMED_BREACH, TIME_BREACH, LOCAL_SIZE_BREACH, LOCAL_TIME_BREACH)
FORCED = (SIZE_BREACH, TIME_BREACH)  # deletions that do not wait for consumers


# -- errors ------------------------------------------------------------------------------------------


class DeleteRecordsError(KafkaLogError):
    """A deleteRecords request Kafka refuses for one partition; `code` is Kafka's error name
    (OFFSET_OUT_OF_RANGE, POLICY_VIOLATION, UNKNOWN_TOPIC_OR_PARTITION) and the message its text."""

    def __init__(self, code: str, message: str, **kwargs):
        super().__init__(message, **kwargs)
        self.code = code

    def to_dict(self) -> dict:
        return {"code": self.code, "message": self.message}


# -- the rules (pure) ------------------------------------------------------------------------------------

Predicate = Callable[[SegmentMeta, "SegmentMeta | None"], bool]


def deletable_segments(
    segments: Sequence[SegmentMeta],
    predicate: Predicate,
    *,
    high_watermark: int,
    log_end_offset: int,
    eligible: Callable[[int, SegmentMeta | None], bool] | None = None,
) -> list[SegmentMeta]:
    """UnifiedLog.deletableSegments: the prefix of `segments` a scan may delete. A segment
    goes when the high watermark is at or above its upper bound (the next segment's base offset, or
    the log end offset for the last), `predicate(segment, next segment or None)` holds, it is not
    the empty last segment and (tiered storage) `eligible(upper bound, next segment or None)`; the
    scan stops at the first segment that may not go. The predicate is called in order, as Kafka
    calls it (only where the high watermark allows)."""
    out = []
    for i, segment in enumerate(segments):
        following = segments[i + 1] if i + 1 < len(segments) else None
        upper = following.base_offset if following is not None else log_end_offset
        last_and_empty = following is None and segment.size == 0
        if (
            high_watermark >= upper
            and predicate(segment, following)
            and not last_and_empty
            and (eligible is None or eligible(upper, following))
        ):
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
    return lambda segment, following: (
        now_ms - segment.largest_timestamp > consumed_ms and segment.last_offset_or_below() < min_committed_offset
    )


class RemoteLog(NamedTuple):
    """What UnifiedLog knows of a tiered partition's remote log: `highest_offset`, the offset up to
    which (inclusive) segments are uploaded (-1: none known, as at a broker's start), and whether
    copying is on (`remote.log.copy.disable` false)."""

    highest_offset: int = -1
    copy_enabled: bool = True


def remote_log_enabled(config: TopicConfig, topic: str) -> bool:
    """UnifiedLog.isRemoteLogEnabled, taking the broker's remote.log.storage.system.enable as on:
    remote.storage.enable on a topic that is neither compacted nor one of Kafka's own."""
    return config.remote_storage_enable and not config.compact and topic not in NEVER_TIERED_TOPICS


def local_retention_ms(config: TopicConfig, remote: RemoteLog | None) -> int:
    """UnifiedLog.localRetentionMs: local.retention.ms while segments are copied to remote storage,
    its -2 meaning retention.ms (LogConfig.localRetentionMs); otherwise retention.ms."""
    if remote is None or not remote.copy_enabled or config.local_retention_ms == -2:
        return config.retention_ms
    return config.local_retention_ms


def local_retention_bytes(config: TopicConfig, remote: RemoteLog | None) -> int:
    """UnifiedLog.localRetentionSize, as `local_retention_ms` for local.retention.bytes."""
    if remote is None or not remote.copy_enabled or config.local_retention_bytes == -2:
        return config.retention_bytes
    return config.local_retention_bytes


def uploaded_or_below_start(remote: RemoteLog, log_start_offset: int) -> Callable[[int, SegmentMeta | None], bool]:
    """UnifiedLog.isSegmentEligibleForDeletion with remote copy on: the segment's last offset
    (below its upper bound) is uploaded, or the log start offset has passed the segment."""
    return lambda upper, following: (
        (0 < upper and upper - 1 <= remote.highest_offset)
        or (following is not None and log_start_offset >= following.base_offset)
    )


class DeletedSegment(NamedTuple):
    segment: SegmentMeta
    upper_bound: int  # every offset of the segment is below it (the next segment's base offset)
    reason: str


@dataclass
class RetentionOutcome:
    """What `delete_old_segments` decided: the segments that remain (a rolled one included), the
    deleted ones in order with their reasons, the new log start offset, where a roll happened. With
    tiered storage the log start offset is the global one (remote and local); the local log start
    offset is the base offset of the first segment left."""

    segments: list[SegmentMeta]
    deleted: list[DeletedSegment]
    log_start_offset: int
    rolled_at: int | None = None


def delete_old_segments(
    segments: Sequence[SegmentMeta],
    *,
    config: TopicConfig,
    log_start_offset: int,
    log_end_offset: int,
    high_watermark: int,
    now_ms: int,
    min_committed_offset: int | None = None,
    remote: RemoteLog | None = None,
) -> RetentionOutcome:
    """UnifiedLog.deleteOldSegments with consumed retention before forced time retention.

    Scans: (a) log start offset breach, for every policy; with `delete` in cleanup.policy also (b)
    retention.bytes, then consumed retention when `retention.commitoffset.enable` is set and
    `min_committed_offset` is known, then (c) retention.ms. Each scan is a prefix scan over what the
    previous ones left. When a scan may delete every segment, a new empty segment is rolled at the
    log end offset first, so the log never has no segment. The log start offset moves to the base
    offset of the first segment left (it never decreases).

    `remote`: the partition's remote log when its topic has it enabled (`remote_log_enabled`). While
    copying is on, size and time use the local retention settings, a segment goes only when
    `uploaded_or_below_start`, and only the local log start offset moves (UnifiedLog.incrementStartOffset)."""
    state = RetentionOutcome(list(segments), [], log_start_offset)
    eligible = uploaded_or_below_start(remote, log_start_offset) if remote is not None and remote.copy_enabled else None
    tiered = eligible is not None

    def scan(predicate: Predicate | None, reason: str) -> None:
        if predicate is None or not state.segments:
            return
        doomed = deletable_segments(
            state.segments, predicate, high_watermark=high_watermark, log_end_offset=log_end_offset, eligible=eligible
        )
        if not doomed:
            return
        if len(doomed) == len(state.segments):  # roll first: a log keeps at least one segment
            state.rolled_at = log_end_offset
            state.segments.append(SegmentMeta(log_end_offset, 0, now_ms, None, False, now_ms))
        for i, segment in enumerate(doomed):
            state.deleted.append(DeletedSegment(segment, state.segments[i + 1].base_offset, reason))
        state.segments = state.segments[len(doomed) :]
        if not tiered:
            state.log_start_offset = max(state.log_start_offset, state.segments[0].base_offset)

    scan(log_start_offset_breach(state.log_start_offset), LOG_START_OFFSET_BREACH)
    if config.delete:
        scan(
            size_breach(state.segments, local_retention_bytes(config, remote)),
            LOCAL_SIZE_BREACH if tiered else SIZE_BREACH,
        )
        if config.retention_commitoffset_enable:
            scan(consumed_breach(now_ms, config.retention_commitoffset_ms, min_committed_offset), CONSUMED_BREACH)
        scan(time_breach(now_ms, local_retention_ms(config, remote)), LOCAL_TIME_BREACH if tiered else TIME_BREACH)
    return state


def delete_records_offset(
    requested: int, *, topic: str, partition: int, config: TopicConfig, high_watermark: int
) -> int:
    """The log start offset a deleteRecords request asks for (KIP-107, Partition.deleteRecordsOnLeader
    and UnifiedLog.maybeIncrementLogStartOffset), or DeleteRecordsError with Kafka's text. -1 means
    the high watermark."""
    tp = f"{topic}-{partition}"
    if not config.delete:
        raise DeleteRecordsError(
            "POLICY_VIOLATION", f"Records of partition {tp} can not be deleted due to the configured policy"
        )
    offset = high_watermark if requested == -1 else requested
    if offset < 0:
        raise DeleteRecordsError("OFFSET_OUT_OF_RANGE", f"The offset {offset} for partition {tp} is not valid")
    if offset > high_watermark:
        raise DeleteRecordsError(
            "OFFSET_OUT_OF_RANGE",
            f"Cannot increment the log start offset to {offset} of partition {tp} since it "
            f"is larger than the high watermark {high_watermark}",
        )
    return offset


def effective_config(config: TopicConfig, topic: str, explicit: Collection[str]) -> TopicConfig:
    """Kafka's internal topics are compacted, and its remote log metadata topic is kept forever,
    unless their own configuration (the names in `explicit`) says otherwise."""
    if topic in INTERNAL_COMPACTED_TOPICS and "cleanup.policy" not in explicit:
        return replace(config, cleanup_policy=("compact",))
    # TopicBasedRemoteLogMetadataManager creates its topic with retention.ms=-1 (its
    # remote.log.metadata.topic.retention.ms default): the broker-wide 7 days must not apply
    if topic == REMOTE_LOG_METADATA_TOPIC and "retention.ms" not in explicit:
        return replace(config, retention_ms=-1)
    return config


# -- committed offsets --------------------------------------------------------------------------------------


def share_group_offsets(
    start_offsets: Mapping[tuple[str, str, int], int | None], topic_names: Mapping[str, str]
) -> dict[tuple[str, str, int], int | None]:
    """KIP-932 in consumed retention: a share partition's start offset (the lowest offset its share
    group has not yet acknowledged) holds retention back exactly as a consumer group's committed
    offset does, so it becomes a committed offset of the group: (group, topic, partition) -> offset,
    None where it is not known. `start_offsets` is keyed by topic id; `topic_names` maps the ids of
    the topics at hand to their names, and share partitions of other topics are left out."""
    return {
        (group, topic_names[topic_id], partition): offset
        for (group, topic_id, partition), offset in start_offsets.items()
        if topic_id in topic_names
    }


@dataclass
class CommittedOffsets:
    """Committed offsets by (group, topic, partition); None is an offset that is not known (the
    KIP-68 "min offset -1" case). A group counts for a topic when it has any entry for the topic."""

    offsets: dict[tuple[str, str, int], int | None] = field(default_factory=dict)
    source: str = ""

    def __post_init__(self) -> None:
        self._by_topic: dict[str, set[str]] = {}
        for group, topic, _ in self.offsets:
            self._by_topic.setdefault(topic, set()).add(group)

    def groups_of(self, topic: str) -> list[str]:
        return sorted(self._by_topic.get(topic, ()))

    def for_partition(self, topic: str, partition: int) -> dict[str, int | None]:
        """Every group of the topic with its offset for this partition (None: unknown)."""
        return {g: self.offsets.get((g, topic, partition)) for g in self.groups_of(topic)}

    def filtered(self, keep: Callable[[str], bool]) -> CommittedOffsets:
        return CommittedOffsets({k: v for k, v in self.offsets.items() if keep(k[0])}, self.source)

    @property
    def groups(self) -> list[str]:
        return sorted({g for g, _, _ in self.offsets})

    def to_rows(self) -> list[dict]:
        return [
            {"group": g, "topic": t, "partition": p, "offset": o}
            for (g, t, p), o in sorted(self.offsets.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2]))
        ]
