"""The broker's append path, offline: segments, their indexes, producer snapshots and the partition's
checkpoint files, written as a Kafka broker leaves them after a clean shutdown.

One segment is segment_writer.py's `SegmentWriter`.

`PartitionWriter` is `UnifiedLog.append` for one partition: it rolls segments by Kafka's rules,
replays every batch into producer state (snapshots at every roll and at close), indexes aborted
transactions in the segment that holds their marker (not those without data: as in Kafka, a marker
of an empty transaction completes no transaction), and tracks the leader-epoch cache.
Timestamps come from the data (or from the `now_ms` the caller gives), never from the wall clock,
so the same appends give byte-identical files with identical mtimes.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ..codec.batch import (
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RecordBatch,
    TimestampType,
    build_batch,
)
from ..codec.compression import Codec
from ..codec.control import build_end_txn_marker
from ..codec.legacy import build_legacy_batch
from ..codec.reader import Batch
from ..codec.records import Record
from ..config import TopicConfig
from ..errors import LogDirError
from ..rules.aborted_txn import AbortedTxn
from .checkpoint import EpochEntry, format_leader_epoch_checkpoint, format_partition_metadata
from .fs import LogFileSystem
from .index import DEFAULT_INDEX_INTERVAL_BYTES, OffsetIndex, TimeIndex
from .naming import INT32_MAX, LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA, segment_file_name
from .producer_state import CompletedTxn, ProducerStateManager
from .segment_writer import SegmentWriter, UnexpectedAppendOffsetError, WrittenSegment, parse_record_set

# Kafka's defaults
DEFAULT_SEGMENT_BYTES = TopicConfig.segment_bytes
DEFAULT_SEGMENT_MS = TopicConfig.segment_ms
DEFAULT_SEGMENT_INDEX_BYTES = TopicConfig.segment_index_bytes


# -- one partition ----------------------------------------------------------------------------------


class AppendInfo(NamedTuple):
    """Where an append went and what it completed."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    segment_base_offset: int
    position: int  # byte position of the record set in the segment's .log
    size: int
    completed_txns: tuple  # CompletedTxn of the markers in the set (none for an empty transaction)


@dataclass
class WrittenPartition:
    """What `PartitionWriter.close` left on disk, and the offsets the broker checkpoints need."""

    topic: str
    partition: int
    path: str
    topic_id: str
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    recovery_point: int
    last_stable_offset: int
    segments: list[WrittenSegment] = field(default_factory=list)
    snapshots: list[int] = field(default_factory=list)
    leader_epochs: list[EpochEntry] = field(default_factory=list)
    aborted_txns: list[AbortedTxn] = field(default_factory=list)
    mtime_ms: int | None = None


def _mtime(clock_ms: int) -> int | None:
    """An mtime to set, or None while the clock has seen no time at all (v0 data and no `now_ms`)."""
    return clock_ms if clock_ms >= 0 else None


def derive_topic_id(topic: str, seed: int | str = 0) -> str:
    """A deterministic topic id for `topic`: what a random UUID v4 looks like, never all-zero and never
    starting with '-', as Kafka's Uuid.randomUuid guarantees."""
    counter = 0
    while True:
        raw = bytearray(hashlib.sha256(f"kafkalog-topic-id\0{seed}\0{topic}\0{counter}".encode()).digest()[:16])
        raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
        raw[8] = (raw[8] & 0x3F) | 0x80  # IETF variant
        text = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode("ascii")
        if not text.startswith("-"):
            return text
        counter += 1


class PartitionWriter:
    """Writes a new log for partition `topic-partition` under `log_dir_path` (the directory must not
    hold anything yet), appending as a broker's UnifiedLog does.

    Batches appended with `append` already carry their offsets (a follower's or the cleaner's view);
    `append_records`, `append_legacy_records` and `append_end_txn_marker` assign them at the log end
    offset (a leader's view). `now_ms` is the broker clock at an append; it defaults to the batch
    timestamps, and it is what roll-by-time falls back on and what the files' mtimes are set to.

    `segment_ms` is the effective roll time: for a compacted topic with max.compaction.lag.ms, pass
    min(segment.ms, max.compaction.lag.ms) as Kafka does. No roll jitter is applied.
    """

    def __init__(
        self,
        fs: LogFileSystem,
        log_dir_path: str,
        topic: str,
        partition: int,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        segment_ms: int = DEFAULT_SEGMENT_MS,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES,
        log_start_offset: int = 0,
        leader_epoch: int | None = 0,
        leader_epoch_cache: bool = True,
        topic_id: str | None = None,
        seed: int | str = 0,
        producer_state: ProducerStateManager | None = None,
        now_ms: int = NO_TIMESTAMP,
    ):
        self.fs = fs
        self.topic = topic
        self.partition = partition
        self.path = fs.join(log_dir_path, f"{topic}-{partition}")
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        self.index_interval_bytes = index_interval_bytes
        # Capacities of a preallocated index: the time index keeps its last slot for the
        # final entry, so it is full one entry earlier.
        self.max_offset_index_entries = segment_index_bytes // OffsetIndex.ENTRY.size
        self.max_time_index_entries = segment_index_bytes // TimeIndex.ENTRY.size
        self.topic_id = topic_id if topic_id is not None else derive_topic_id(topic, seed)
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_start_offset
        self.producer_state = producer_state if producer_state is not None else ProducerStateManager(log_start_offset)
        self.leader_epoch_cache = leader_epoch_cache
        self.leader_epochs: list[EpochEntry] = []
        self.clock_ms = now_ms
        self.segments: list[WrittenSegment] = []
        self.snapshots: list[int] = []
        self.aborted_txns: list[AbortedTxn] = []
        # Kafka only snapshots when the map end offset moved past the last snapshot.
        self._last_snapshot_offset = self.producer_state.map_end_offset
        self._closed = False
        if fs.exists(self.path) and fs.list_dir(self.path):
            raise LogDirError(
                "refusing to write a new log into a partition directory that is not empty", file=self.path
            )
        fs.make_dirs(self.path)
        self._write_partition_metadata()
        self.partition_leader_epoch = NO_PARTITION_LEADER_EPOCH
        if leader_epoch is not None:
            self.become_leader(leader_epoch)
        self._segment = self._new_segment(log_start_offset)

    # -- offsets the broker checkpoints ----------------------------------------------------------------
    @property
    def high_watermark(self) -> int:
        """Every replica has everything: the high watermark is the log end offset."""
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self.producer_state.first_unstable_offset()
        return self.high_watermark if first_unstable is None else min(first_unstable, self.high_watermark)

    @property
    def active_segment(self) -> SegmentWriter:
        return self._segment

    # -- leadership ---------------------------------------------------------------------------------------
    def become_leader(self, epoch: int) -> None:
        """Start leader epoch `epoch` at the log end offset, as Partition.makeLeader does; later
        batches built by this writer carry it."""
        self.partition_leader_epoch = epoch
        self._assign_epoch(epoch, self.log_end_offset)

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        if not self.leader_epoch_cache or epoch < 0:
            return
        if self.leader_epochs and epoch <= self.leader_epochs[-1].epoch:
            return
        # Kafka's assign drops entries that the new epoch's start offset makes obsolete: an epoch
        # that began at this offset and never wrote anything.
        while self.leader_epochs and self.leader_epochs[-1].start_offset >= start_offset:
            self.leader_epochs.pop()
        self.leader_epochs.append(EpochEntry(epoch, start_offset))

    # -- appending ----------------------------------------------------------------------------------------
    def append(self, data: bytes | bytearray, *, now_ms: int | None = None) -> AppendInfo:
        """Append a record set whose offsets are assigned and at or above the log end offset."""
        self._check_open()
        batches = parse_record_set(data, file=self._segment.log_path)
        self._check_offsets(batches)
        first, last = batches[0].base_offset, batches[-1].last_offset
        max_timestamp = max(batch.max_timestamp for batch in batches)
        now = max(self.clock_ms, max_timestamp, NO_TIMESTAMP if now_ms is None else now_ms)
        if self._should_roll(len(data), max_timestamp, last, now):
            self.roll(first, now_ms=now)
        self.clock_ms = now
        segment = self._segment
        position = segment.size
        segment.append(data, batches)
        completed = []
        for batch in batches:
            if isinstance(batch, RecordBatch):
                self._assign_epoch(batch.partition_leader_epoch, batch.base_offset)
            txn = self.producer_state.append(batch)
            if txn is not None:
                completed.append(txn)
                if txn.is_aborted:
                    self._index_abort(txn)
        self.log_end_offset = last + 1
        self._segment_modified_ms = now
        return AppendInfo(first, last, max_timestamp, segment.base_offset, position, len(data), tuple(completed))

    def _check_offsets(self, batches: Sequence[Batch]) -> None:
        """Refuse a set that does not fit after the log end offset, before anything rolls."""
        previous = self.log_end_offset - 1
        for batch in batches:
            if batch.base_offset <= previous or batch.last_offset < batch.base_offset:
                raise UnexpectedAppendOffsetError(
                    f"batch offsets {batch.base_offset}..{batch.last_offset} do not follow offset {previous} "
                    f"(log end offset {self.log_end_offset})",
                    file=self._segment.log_path,
                    offset=batch.base_offset,
                )
            previous = batch.last_offset
        span = batches[-1].last_offset - batches[0].base_offset
        if span > INT32_MAX:
            raise UnexpectedAppendOffsetError(
                f"record set spans {span + 1} offsets, more than one segment can index",
                file=self._segment.log_path,
                offset=batches[0].base_offset,
            )

    def _index_abort(self, txn: CompletedTxn) -> None:
        aborted = self.producer_state.aborted_txn(txn)
        self._segment.append_aborted_txn(aborted)
        self.aborted_txns.append(aborted)

    def append_records(
        self,
        records: Sequence[Record],
        *,
        codec: int = Codec.NONE,
        timestamp_type: int = TimestampType.CREATE_TIME,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        now_ms: int | None = None,
    ) -> AppendInfo:
        """Build a v2 batch of `records` at the log end offset (their own offsets are ignored) and
        append it. For LogAppendTime the append time is the broker clock."""
        records = self._at_log_end(records)
        append_time = self._append_time(now_ms, records)
        data = build_batch(
            records,
            codec=codec,
            timestamp_type=timestamp_type,
            log_append_time=append_time if timestamp_type == TimestampType.LOG_APPEND_TIME else None,
            partition_leader_epoch=self.partition_leader_epoch,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            is_transactional=is_transactional,
        )
        return self.append(data, now_ms=append_time)

    def append_legacy_records(
        self,
        records: Sequence[Record],
        *,
        magic: int,
        codec: int = Codec.NONE,
        timestamp_type: int = TimestampType.CREATE_TIME,
        now_ms: int | None = None,
    ) -> AppendInfo:
        """Build v0/v1 messages of `records` at the log end offset (one wrapper when compressed)."""
        records = self._at_log_end(records)
        append_time = self._append_time(now_ms, records)
        log_append = magic == 1 and timestamp_type == TimestampType.LOG_APPEND_TIME
        data = build_legacy_batch(
            records,
            magic=magic,
            codec=codec,
            timestamp_type=timestamp_type,
            log_append_time=append_time if log_append else None,
        )
        return self.append(data, now_ms=append_time)

    def append_end_txn_marker(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        timestamp: int | None = None,
        coordinator_epoch: int = 0,
        timestamp_type: int = TimestampType.CREATE_TIME,
    ) -> AppendInfo:
        """Write a COMMIT or ABORT marker at the log end offset, as the transaction coordinator has the
        leader do. In a LogAppendTime topic the broker stamps the marker with its append time too."""
        timestamp = self.clock_ms if timestamp is None else timestamp
        data = build_end_txn_marker(
            offset=self.log_end_offset,
            timestamp=timestamp,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            commit=commit,
            coordinator_epoch=coordinator_epoch,
            partition_leader_epoch=self.partition_leader_epoch,
            timestamp_type=timestamp_type,
        )
        return self.append(data, now_ms=timestamp)

    def _at_log_end(self, records: Sequence[Record]) -> list[Record]:
        if not records:
            raise ValueError("a batch needs at least one record")
        return [Record(self.log_end_offset + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)]

    def _append_time(self, now_ms: int | None, records: Sequence[Record]) -> int:
        """The broker clock at this append: never earlier than before, nor than the records it gets."""
        return max(self.clock_ms, max(r.timestamp for r in records), NO_TIMESTAMP if now_ms is None else now_ms)

    # -- rolling --------------------------------------------------------------------------------------------
    def _should_roll(self, set_size: int, max_timestamp: int, last_offset: int, now_ms: int) -> bool:
        """LogSegment.shouldRoll, evaluated before the record set is appended."""
        segment = self._segment
        if segment.is_empty:
            # An empty segment never rolls on size or time; it only moves when the offsets cannot fit.
            return not 0 <= last_offset - segment.base_offset <= INT32_MAX
        first_ts = segment.first_batch_max_timestamp
        waited = (
            max_timestamp - first_ts if first_ts is not None and first_ts >= 0 else now_ms - self._segment_created_ms
        )
        return (
            segment.size > self.segment_bytes - set_size
            or waited > self.segment_ms
            or segment.offset_index_entries >= self.max_offset_index_entries
            or segment.time_index_entries >= self.max_time_index_entries - 1
            or not 0 <= last_offset - segment.base_offset <= INT32_MAX
        )

    def roll(self, new_base_offset: int | None = None, *, now_ms: int | None = None) -> None:
        """Finish the active segment and start one at `new_base_offset` (default: the log end offset),
        snapshotting producer state there. An empty active segment is replaced instead."""
        self._check_open()
        new_base = self.log_end_offset if new_base_offset is None else new_base_offset
        if new_base < self.log_end_offset:
            raise UnexpectedAppendOffsetError(
                f"cannot roll at {new_base}, below the log end offset {self.log_end_offset}", offset=new_base
            )
        # The finished segment keeps the mtime of its last write; the roll itself happens now.
        self.clock_ms = max(self.clock_ms, NO_TIMESTAMP if now_ms is None else now_ms)
        if self._segment.is_empty:
            self._segment.abort()
        else:
            self.segments.append(self._segment.close(_mtime(self._segment_modified_ms)))
        self.producer_state.map_end_offset = max(self.producer_state.map_end_offset, new_base)
        self._take_snapshot()
        self._segment = self._new_segment(new_base)

    def _new_segment(self, base_offset: int) -> SegmentWriter:
        self._segment_created_ms = self._segment_modified_ms = self.clock_ms
        return SegmentWriter(self.fs, self.path, base_offset, index_interval_bytes=self.index_interval_bytes)

    def _take_snapshot(self) -> None:
        snapshot = self.producer_state.snapshot()
        if snapshot.offset <= self._last_snapshot_offset:
            return
        path = self.fs.join(self.path, segment_file_name(snapshot.offset, ".snapshot"))
        self.fs.write_bytes(path, snapshot.to_bytes())
        self._set_mtime(path)
        self.snapshots.append(snapshot.offset)
        self._last_snapshot_offset = snapshot.offset

    # -- closing --------------------------------------------------------------------------------------------
    def close(self) -> WrittenPartition:
        """A clean shutdown: finish the active segment, snapshot producer state at the log end offset,
        write the leader-epoch checkpoint."""
        self._check_open()
        self.segments.append(self._segment.close(_mtime(self._segment_modified_ms)))
        self._take_snapshot()
        if self.leader_epoch_cache:
            path = self.fs.join(self.path, LEADER_EPOCH_CHECKPOINT)
            self.fs.write_atomic(path, format_leader_epoch_checkpoint(self.leader_epochs).encode("utf-8"))
            self._set_mtime(path)
        self._set_mtime(self.path)
        self._closed = True
        return WrittenPartition(
            topic=self.topic,
            partition=self.partition,
            path=self.path,
            topic_id=self.topic_id,
            log_start_offset=self.log_start_offset,
            log_end_offset=self.log_end_offset,
            high_watermark=self.high_watermark,
            recovery_point=self.log_end_offset,
            last_stable_offset=self.last_stable_offset,
            segments=list(self.segments),
            snapshots=list(self.snapshots),
            leader_epochs=list(self.leader_epochs),
            aborted_txns=list(self.aborted_txns),
            mtime_ms=self.clock_ms if self.clock_ms >= 0 else None,
        )

    def _write_partition_metadata(self) -> None:
        path = self.fs.join(self.path, PARTITION_METADATA)
        self.fs.write_atomic(path, format_partition_metadata(self.topic_id).encode("utf-8"))
        self._set_mtime(path)

    def _set_mtime(self, path: str) -> None:
        if self.clock_ms >= 0:
            self.fs.set_mtime(path, self.clock_ms)

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"partition writer for {self.path} is closed")

    def __enter__(self) -> PartitionWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None and not self._closed:
            self.close()
