"""Kafka's retention rules, as `UnifiedLog.deleteOldSegments` applies them, plus
deleteRecords (KIP-107) and consumed retention (KIP-68, never built in Kafka). Pure functions over
`SegmentMeta` (base offset, size, largest timestamp, last offset); nothing here opens a file.

`deletable_segments` is Kafka's prefix scan (HW rule, never the empty last segment, stop at the
first segment that may not go); `delete_old_segments` runs the scans in Kafka's order -- log start
offset breach, then (only with `cleanup.policy` containing `delete`) size breach, consumed retention
(when enabled), time breach -- rolling a new empty segment at the log end offset when every segment
goes. `delete_records_offset` is `Partition.deleteRecordsOnLeader` with Kafka's errors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from ..config import TopicConfig
from ..errors import KafkaLogError
from ..storage.segment import SegmentMeta

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
    segments: Sequence[SegmentMeta], predicate: Predicate, *, high_watermark: int, log_end_offset: int
) -> list[SegmentMeta]:
    """UnifiedLog.deletableSegments: the prefix of `segments` a scan may delete. A segment
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
    return lambda segment, following: (
        now_ms - segment.largest_timestamp > consumed_ms and segment.last_offset_or_below() < min_committed_offset
    )


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


def delete_old_segments(
    segments: Sequence[SegmentMeta],
    *,
    config: TopicConfig,
    log_start_offset: int,
    log_end_offset: int,
    high_watermark: int,
    now_ms: int,
    min_committed_offset: int | None = None,
) -> RetentionOutcome:
    """UnifiedLog.deleteOldSegments with consumed retention before forced time retention.

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
        doomed = deletable_segments(
            state.segments, predicate, high_watermark=high_watermark, log_end_offset=log_end_offset
        )
        if not doomed:
            return
        if len(doomed) == len(state.segments):  # roll first: a log keeps at least one segment
            state.rolled_at = log_end_offset
            state.segments.append(SegmentMeta(log_end_offset, 0, now_ms, None, False, now_ms))
        for i, segment in enumerate(doomed):
            state.deleted.append(DeletedSegment(segment, state.segments[i + 1].base_offset, reason))
        state.segments = state.segments[len(doomed) :]
        state.log_start_offset = max(state.log_start_offset, state.segments[0].base_offset)

    scan(log_start_offset_breach(state.log_start_offset), LOG_START_OFFSET_BREACH)
    if config.delete:
        scan(size_breach(state.segments, config.retention_bytes), SIZE_BREACH)
        if config.retention_commitoffset_enable:
            scan(consumed_breach(now_ms, config.retention_commitoffset_ms, min_committed_offset), CONSUMED_BREACH)
        scan(time_breach(now_ms, config.retention_ms), TIME_BREACH)
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
