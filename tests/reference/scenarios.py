"""Builders of small partitions for the reference cleaner model, in the manner of the helpers of
Kafka's LogCleanerTest (record, tombstoneRecord, appendIdempotentAsLeader,
appendTransactionalAsLeader, commitMarker, abortMarker, log.roll, messageWithOffset), and the
inspectors its assertions use (keysInLog, offsetsInLog, lastOffsetsPerBatchInLog, ...).

A partition is a list of `Segment(base_offset, [batch bytes], mtime_ms)`; the last segment is the
active one. Keys and values given as ints or strings are written as their decimal/UTF-8 bytes, as
Kafka's tests do (`key.toString.getBytes`).

The builders write their inputs with kafkalog's codec; the inspectors read every log, the model's
output included, through the model's reader (kafka-python), never through kafkalog.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from kafkalog.codec.batch import TimestampType, build_batch
from kafkalog.codec.compression import Codec
from kafkalog.codec.control import build_end_txn_marker
from kafkalog.codec.legacy import build_legacy_batch
from kafkalog.codec.records import Record

from .cleaner_model import LONG_MAX, CleanerConfig, CleanResult, OutputSegment, Segment, split_batches

T0 = 1_700_000_000_000  # the builders' clock starts here (Kafka's MockTime starts at wall time)
TOMBSTONE_RETENTION_MS = 86_400_000
# LogCleanerTest's `largeTimestamp`: a clean time whose horizon (+ delete.retention.ms) still fits int64.
LARGE_TIMESTAMP = LONG_MAX - TOMBSTONE_RETENTION_MS - 1

# LogCleanerTest's topic config: segment.bytes 1024, segment.index.bytes 1024, compact; its producer
# state is never expired (the MockTime never runs the expiration task).
LCT_CONFIG = CleanerConfig(segment_bytes=1024, segment_index_bytes=1024, producer_id_expiration_ms=None)


def lct_map_capacity(slots: int) -> int:
    """Keys a LogCleanerTest `makeCleaner(slots)` offset map holds: int(slots * 0.75)."""
    return int(slots * 0.75)


def enc(x) -> bytes | None:
    if x is None or isinstance(x, bytes):
        return x
    return str(x).encode()


class LogBuilder:
    """Appends batches at the log end offset, rolls segments, and keeps a clock for timestamps and
    segment mtimes. `segment_bytes` rolls the active segment as Kafka does when a batch would not
    fit (None: roll only when asked)."""

    def __init__(
        self, *, segment_bytes: int | None = None, time: int = T0, leader_epoch: int = 0, base_offset: int = 0
    ):
        self.segment_bytes = segment_bytes
        self.time = time
        self.leader_epoch = leader_epoch
        self.segments: list[list] = [[base_offset, [], time]]
        self.next_offset = base_offset

    @classmethod
    def from_segments(cls, segments: Iterable, **kwargs) -> LogBuilder:
        """Continue appending to a partition, e.g. to a model's output."""
        if isinstance(segments, CleanResult):
            segments = segments.segments
        log = cls(**kwargs)
        log.segments = []
        for seg in segments:
            base, batches, mtime = tuple(seg)[:3]
            log.segments.append([base, list(batches), mtime])
        last_base, last_batches = log.segments[-1][0], log.segments[-1][1]
        log.next_offset = max([last_base] + [b.next_offset for data in last_batches for b in split_batches(data)])
        return log

    # -- plumbing -----------------------------------------------------------------------------
    @property
    def log_end_offset(self) -> int:
        return self.next_offset

    @property
    def active_base(self) -> int:
        return self.segments[-1][0]

    @property
    def number_of_segments(self) -> int:
        return len(self.segments)

    def sleep(self, ms: int) -> None:
        self.time += ms

    def roll(self, base_offset: int | None = None) -> None:
        """Start a new active segment at the log end offset (or at `base_offset`, leaving a gap)."""
        base = self.next_offset if base_offset is None else base_offset
        if base < self.next_offset:
            raise ValueError(f"cannot roll to {base} below the log end offset {self.next_offset}")
        if not self.segments[-1][1] and self.segments[-1][0] == base:
            return
        self.segments.append([base, [], self.time])
        self.next_offset = base

    def append_batch(self, data: bytes) -> tuple[int, int]:
        """Append whole batches whose offsets start at or after the log end offset."""
        batches = split_batches(data)
        if batches[0].base_offset < self.next_offset:
            raise ValueError(f"batch at {batches[0].base_offset} is below the log end offset {self.next_offset}")
        active = self.segments[-1]
        size = sum(len(x) for x in active[1])
        if self.segment_bytes is not None and size > 0 and size + len(data) > self.segment_bytes:
            self.roll(batches[0].base_offset)
            active = self.segments[-1]
        active[1].append(data)
        active[2] = self.time
        self.next_offset = batches[-1].next_offset
        return batches[0].base_offset, batches[-1].last_offset

    def build(self) -> list[Segment]:
        return [Segment(base, list(batches), mtime) for base, batches, mtime in self.segments]

    # -- v2 data ------------------------------------------------------------------------------
    def append(
        self,
        pairs: Sequence[tuple],
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        transactional: bool = False,
        codec: int = Codec.NONE,
        timestamp: int | None = None,
        timestamps: Sequence[int] | None = None,
        timestamp_type: int = TimestampType.CREATE_TIME,
        leader_epoch: int | None = None,
        offset: int | None = None,
        offsets: Sequence[int] | None = None,
        last_offset_delta: int | None = None,
        headers: tuple = (),
    ) -> tuple[int, int]:
        """One v2 batch of (key, value) records at the log end offset (or at `offset`, or at the
        given per-record `offsets`). Returns (first offset, last offset)."""
        first = self.next_offset if offset is None else offset
        offsets = list(offsets) if offsets is not None else [first + i for i in range(len(pairs))]
        ts = self.time if timestamp is None else timestamp
        stamps = list(timestamps) if timestamps is not None else [ts] * len(pairs)
        records = [Record(o, t, enc(k), enc(v), headers) for o, t, (k, v) in zip(offsets, stamps, pairs)]
        log_append = timestamp_type == TimestampType.LOG_APPEND_TIME
        data = build_batch(
            records,
            base_offset=first,
            codec=codec,
            last_offset_delta=last_offset_delta,
            timestamp_type=timestamp_type,
            log_append_time=ts if log_append else None,
            partition_leader_epoch=self.leader_epoch if leader_epoch is None else leader_epoch,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            is_transactional=transactional,
        )
        return self.append_batch(data)

    def record(self, key, value, **kwargs) -> tuple[int, int]:
        """LCT `record(key, value)`: a one-record batch (value defaults to the key)."""
        return self.append([(key, value)], **kwargs)

    def tombstone(self, key, **kwargs) -> tuple[int, int]:
        return self.append([(key, None)], **kwargs)

    def unkeyed(self, value, **kwargs) -> tuple[int, int]:
        return self.append([(None, value)], **kwargs)

    def idempotent(
        self, producer_id: int, producer_epoch: int = 0, *, transactional: bool = False, sequence: int = 0, **kwargs
    ) -> Callable[..., tuple[int, int]]:
        """LCT appendIdempotentAsLeader: a function appending one batch of keys (value = key) with
        the next sequence numbers, starting at `sequence` (0) for each function made."""

        def append(keys: Sequence, **more) -> tuple[int, int]:
            nonlocal sequence
            out = self.append(
                [(k, k) for k in keys],
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=sequence,
                transactional=transactional,
                **{**kwargs, **more},
            )
            sequence += len(keys)
            return out

        return append

    def transactional(self, producer_id: int, producer_epoch: int = 0, **kwargs) -> Callable[..., tuple[int, int]]:
        """LCT appendTransactionalAsLeader."""
        return self.idempotent(producer_id, producer_epoch, transactional=True, **kwargs)

    def marker(
        self,
        producer_id: int,
        producer_epoch: int = 0,
        *,
        commit: bool,
        timestamp: int | None = None,
        coordinator_epoch: int = 0,
    ) -> int:
        data = build_end_txn_marker(
            offset=self.next_offset,
            timestamp=self.time if timestamp is None else timestamp,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            commit=commit,
            coordinator_epoch=coordinator_epoch,
            partition_leader_epoch=self.leader_epoch,
        )
        return self.append_batch(data)[0]

    def commit(self, producer_id: int, producer_epoch: int = 0, **kwargs) -> int:
        return self.marker(producer_id, producer_epoch, commit=True, **kwargs)

    def abort(self, producer_id: int, producer_epoch: int = 0, **kwargs) -> int:
        return self.marker(producer_id, producer_epoch, commit=False, **kwargs)

    def append_at(self, offset: int, key, value, **kwargs) -> tuple[int, int]:
        """LCT messageWithOffset + appendAsFollower: one record at an explicit offset (gaps allowed)."""
        return self.append([(key, value)], offset=offset, **kwargs)

    # -- legacy data --------------------------------------------------------------------------
    def legacy(
        self,
        pairs: Sequence[tuple],
        *,
        magic: int,
        codec: int = Codec.NONE,
        timestamp: int | None = None,
        timestamps: Sequence[int] | None = None,
        offsets: Sequence[int] | None = None,
        timestamp_type: int = TimestampType.CREATE_TIME,
    ) -> tuple[int, int]:
        """v0/v1 messages: one entry per record uncompressed, one wrapper compressed."""
        offsets = list(offsets) if offsets is not None else [self.next_offset + i for i in range(len(pairs))]
        ts = self.time if timestamp is None else timestamp
        stamps = list(timestamps) if timestamps is not None else [ts] * len(pairs)
        if magic == 0:
            stamps = [-1] * len(pairs)
        records = [Record(o, t, enc(k), enc(v)) for o, t, (k, v) in zip(offsets, stamps, pairs)]
        log_append = magic == 1 and timestamp_type == TimestampType.LOG_APPEND_TIME
        return self.append_batch(
            build_legacy_batch(
                records,
                magic=magic,
                codec=codec,
                timestamp_type=timestamp_type,
                log_append_time=ts if log_append else None,
            )
        )


# -- inspectors (LogCleanerTest / LogTestUtils helpers) -------------------------------------------
def _segments(log) -> list:
    if isinstance(log, CleanResult):
        return log.segments
    if isinstance(log, LogBuilder):
        return log.build()
    return list(log)


def segment_batches(seg) -> list:
    return [b for data in tuple(seg)[1] for b in split_batches(data)]


def batches_in_log(log) -> list:
    return [b for seg in _segments(log) for b in segment_batches(seg)]


def records_in_log(log) -> list:
    return [r for b in batches_in_log(log) for r in b.records()]


def batch_base_offsets(log) -> list[int]:
    return [b.base_offset for b in batches_in_log(log)]


def batch_last_offsets(log) -> list[int]:
    """lastOffsetsPerBatchInLog: every batch, empty ones included."""
    return [b.last_offset for b in batches_in_log(log)]


def offsets_in_log(log) -> list[int]:
    """offsetsInLog: offsets of records with both key and value (markers included)."""
    return [r.offset for r in records_in_log(log) if r.key is not None and r.value is not None]


def keys_in_log(log) -> list[int]:
    """LogTestUtils.keysInLog: keys (as numbers) of non-control records with a value."""
    return [
        int(r.key)
        for b in batches_in_log(log)
        if not b.is_control
        for r in b.records()
        if r.key is not None and r.value is not None
    ]


def last_sequences_in_log(log) -> dict[int, int]:
    """lastSequencesInLog: producer id -> last sequence of its last non-control batch."""
    return {b.producer_id: b.last_sequence for b in batches_in_log(log) if not b.is_control and b.has_producer_id}


def unkeyed_count_in_log(log) -> int:
    return sum(1 for r in records_in_log(log) if r.key is None and r.value is not None)


def log_size(log) -> int:
    return sum(len(data) for seg in _segments(log) for data in tuple(seg)[1])


def segment_sizes(log) -> list[int]:
    return [sum(len(d) for d in tuple(seg)[1]) for seg in _segments(log)]


def distinct_values_by_segment(log) -> list[int]:
    return [len({r.value for b in segment_batches(seg) for r in b.records()}) for seg in _segments(log)]


def aborted_txns_in_log(log) -> list:
    return [t for seg in _segments(log) if isinstance(seg, OutputSegment) for t in seg.aborted_txns]
