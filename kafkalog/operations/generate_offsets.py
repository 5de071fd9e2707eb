"""`__consumer_offsets` of a generated log directory: each group's offset commits (OffsetCommitKey v1 /
OffsetCommitValue v3) and group metadata, written to the partition Kafka's GroupCoordinator would use
(`partition_for_group`), at offsets a consumer could have read by then (`Timeline`)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import NamedTuple

from ..codec.consumer_offsets import (
    OffsetCommitValue,
    consumer_assignment,
    consumer_subscription,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
)
from ..codec.records import Record
from ..storage.fs import LogFileSystem
from ..storage.log_writer import PartitionWriter, WrittenPartition, derive_topic_id
from ..storage.naming import TopicPartition
from .generate_spec import (
    CONSUMER_OFFSETS_TOPIC,
    ConsumerOffsetsSpec,
    GenerateSummary,
    GeneratorSpec,
    generated_uuid,
)


class Timeline:
    """(broker clock, log end offset) after each append: what a consumer could have read by when."""

    def __init__(self, start_offset: int):
        self.start_offset = start_offset
        self.clocks: list[int] = []
        self.ends: list[int] = []

    def add(self, clock_ms: int, log_end_offset: int) -> None:
        self.clocks.append(clock_ms)
        self.ends.append(log_end_offset)

    def log_end_at(self, time_ms: int) -> int:
        i = bisect.bisect_right(self.clocks, time_ms)
        return self.ends[i - 1] if i else self.start_offset

    @property
    def span(self) -> tuple[int, int] | None:
        return (self.clocks[0], self.clocks[-1]) if self.clocks else None


# -- __consumer_offsets -----------------------------------------------------------------------------------


def java_string_hashcode(text: str) -> int:
    """Java's String.hashCode: 31-polynomial over UTF-16 code units, as a signed int32."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_group(group: str, partitions: int) -> int:
    """The `__consumer_offsets` partition of a group: Utils.abs(hashCode) % partitions, where
    Kafka's Utils.abs maps Integer.MIN_VALUE to 0."""
    h = java_string_hashcode(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class _CoordinatorBatch(NamedTuple):
    """One write of the group coordinator: an OffsetCommit request, a rebalance, a group deletion."""

    timestamp: int
    group_index: int  # orders writes of the same millisecond
    records: list  # of (key, value or None)


def write_consumer_offsets(
    fs: LogFileSystem,
    root: str,
    spec: GeneratorSpec,
    co: ConsumerOffsetsSpec,
    summary: GenerateSummary,
    timelines: dict[TopicPartition, Timeline],
) -> None:
    consumed = sorted(tp for tp in timelines if co.topics is None or tp.topic in co.topics)
    spans = [t.span for t in timelines.values() if t.span is not None]
    begin = min((s[0] for s in spans), default=summary.start_ms)
    end = max((s[1] for s in spans), default=summary.start_ms)
    writes: dict[int, list[_CoordinatorBatch]] = {p: [] for p in range(co.partitions)}
    for g, group in enumerate(co.groups):
        writes[partition_for_group(group, co.partitions)] += _group_writes(
            co, g, group, consumed, timelines, summary, begin, end
        )
    topic_id = derive_topic_id(CONSUMER_OFFSETS_TOPIC, spec.seed)
    summary.topic_configs[CONSUMER_OFFSETS_TOPIC] = {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": str(co.segment_bytes),
        "segment.ms": str(co.segment_ms),
        "index.interval.bytes": str(co.index_interval_bytes),
    }
    for p in range(co.partitions):
        writer = PartitionWriter(
            fs,
            root,
            CONSUMER_OFFSETS_TOPIC,
            p,
            segment_bytes=co.segment_bytes,
            segment_ms=co.segment_ms,
            index_interval_bytes=co.index_interval_bytes,
            topic_id=topic_id,
            now_ms=summary.start_ms,
        )
        count = 0
        for write in sorted(writes[p], key=lambda w: (w.timestamp, w.group_index)):
            # The coordinator appends each request's records as one uncompressed, non-transactional batch.
            writer.append_records([Record(-1, write.timestamp, k, v) for k, v in write.records], now_ms=write.timestamp)
            count += len(write.records)
        tp = TopicPartition(CONSUMER_OFFSETS_TOPIC, p)
        summary.partitions[tp], summary.records[tp] = writer.close(), count


def _group_writes(
    co: ConsumerOffsetsSpec,
    g: int,
    group: str,
    consumed: list[TopicPartition],
    timelines: dict[TopicPartition, Timeline],
    summary: GenerateSummary,
    begin: int,
    end: int,
) -> list[_CoordinatorBatch]:
    """A group's life: it forms, commits every round what it had consumed by then, rebalances half
    way, and (if it is one of the deleted groups) is deleted at the end. Records the final commits
    in `summary.commits`."""
    writes = []
    lag = (end - begin) * g // (2 * co.commit_rounds)  # the first group keeps up, later ones lag more
    for r in range(1, co.commit_rounds + 1):
        when = begin + (end - begin) * r // co.commit_rounds
        commit_ts = when + 10 * g + 1
        if co.group_metadata and (r == 1 or (co.commit_rounds >= 3 and r == co.commit_rounds // 2 + 1)):
            generation = 1 if r == 1 else 2
            metadata = _group_metadata(group, generation, consumed, commit_ts - 1)
            writes.append(_CoordinatorBatch(commit_ts - 1, g, [(group_metadata_key(group), metadata)]))
        records = []
        for tp in consumed:
            offset = timelines[tp].log_end_at(when - lag)
            value = OffsetCommitValue(3, offset, _leader_epoch_at(summary.partitions[tp], offset), "", commit_ts, -1)
            records.append(
                (
                    offset_commit_key(group, tp.topic, tp.partition),
                    offset_commit_value(value.offset, value.leader_epoch, value.metadata, commit_ts),
                )
            )
            summary.commits[(group, tp.topic, tp.partition)] = value
        if records:
            writes.append(_CoordinatorBatch(commit_ts, g, records))
    if group in co.deleted_groups:
        # Deleting a group writes tombstones for its offsets and its metadata.
        tombstones = [(offset_commit_key(group, tp.topic, tp.partition), None) for tp in consumed]
        if co.group_metadata:
            tombstones.append((group_metadata_key(group), None))
        if tombstones:
            writes.append(_CoordinatorBatch(end + 1000 + g, g, tombstones))
        for tp in consumed:
            del summary.commits[(group, tp.topic, tp.partition)]
    return writes


def _group_metadata(group: str, generation: int, consumed: Sequence[TopicPartition], timestamp: int) -> bytes:
    """A stable group of two consumers splitting the partitions round-robin."""
    topics = sorted({tp.topic for tp in consumed})
    members = []
    for m in range(2):
        client = f"{group}-client-{m + 1}"
        member_id = f"{client}-" + generated_uuid("\0".join(("member", group, str(generation), str(m))))
        members.append(
            (
                member_id,
                client,
                f"/10.0.{generation}.{m + 10}",
                consumer_subscription(topics),
                consumer_assignment(consumed[m::2]),
            )
        )
    return group_metadata_value(
        generation=generation, protocol="range", leader=members[0][0], state_timestamp=timestamp, members=members
    )


def _leader_epoch_at(partition: WrittenPartition, offset: int) -> int:
    """The leader epoch of the record before a committed offset, as a consumer reports it (-1: none)."""
    epoch = -1
    for entry in partition.leader_epochs:
        if entry.start_offset <= offset - 1:
            epoch = entry.epoch
    return epoch
