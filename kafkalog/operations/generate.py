"""`kafkalog generate LOG_DIR`: write a realistic Kafka log directory, as a cleanly stopped broker leaves it.

Everything is derived from a seed: the same `GeneratorSpec` gives byte-identical files with identical
mtimes, which come from the data's timestamps, never from the wall clock. Every partition is written
through `PartitionWriter` (the broker's append path), so segments roll, indexes, producer snapshots,
transaction indexes and leader epochs are what a broker would have written for the same appends.

The `__consumer_offsets` topic holds offset commits (OffsetCommitKey v1 / OffsetCommitValue v3) of
consumer groups that read the generated topics, each group in the partition Kafka's coordinator uses
for it. `GenerateSummary.commits` says what a reader should find there.
"""

from __future__ import annotations

import bisect
import datetime
import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
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
from ..errors import LogDirError
from ..storage.checkpoint import format_offset_checkpoint
from ..storage.fs import LogFileSystem
from ..storage.log_writer import PartitionWriter, WrittenPartition, derive_topic_id
from ..storage.logdir import CLEAN_SHUTDOWN, LOCK_FILE, META_PROPERTIES
from ..storage.naming import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    TopicPartition,
)
from .generate_spec import (
    CODECS,
    CONSUMER_OFFSETS_TOPIC,
    PRESETS,
    TIMESTAMP_TYPES,
    ConsumerOffsetsSpec,
    GeneratorSpec,
    TopicSpec,
    demo_preset,
    preset,
    small_preset,
)

# The spec types and presets are part of this command's API: notebooks build a spec and generate it.
__all__ = [
    "generate",
    "generate_log_dir",
    "GenerateSummary",
    "GeneratorSpec",
    "TopicSpec",
    "ConsumerOffsetsSpec",
    "preset",
    "demo_preset",
    "small_preset",
    "PRESETS",
    "CONSUMER_OFFSETS_TOPIC",
    "java_string_hashcode",
    "partition_for_group",
]


# -- what was generated ---------------------------------------------------------------------------------


@dataclass
class GenerateSummary:
    path: str
    seed: int
    cluster_id: str
    broker_id: int
    start_ms: int
    end_ms: int  # the broker clock at shutdown: the latest timestamp written
    partitions: dict[TopicPartition, WrittenPartition] = field(default_factory=dict)
    records: dict[TopicPartition, int] = field(default_factory=dict)  # data records written
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    # The final committed offset of each (group, topic, partition); deleted groups have none.
    commits: dict[tuple[str, str, int], OffsetCommitValue] = field(default_factory=dict)

    def config_properties(self) -> str:
        """The topics' configurations as a Kafka-style properties file (`topic.<TOPIC>.<name>=value`),
        for `--config-file` of the commands that act on the generated directory."""
        lines = [f"# topic configurations of the log directory generated with seed {self.seed}"]
        for topic, config in sorted(self.topic_configs.items()):
            lines += [f"topic.{topic}.{name}={value}" for name, value in config.items()]
        return "\n".join(lines) + "\n"

    def summary(self) -> str:
        """What was written, a line per topic, for the command line (`to_dict` is the whole manifest)."""
        topics: dict[str, list[tuple[int, int]]] = {}
        for tp, p in sorted(self.partitions.items()):
            topics.setdefault(tp.topic, []).append((self.records.get(tp, 0), len(p.segments)))
        records, segments = sum(self.records.values()), sum(len(p.segments) for p in self.partitions.values())
        lines = [
            f"generated {self.path} (seed {self.seed}): {len(topics)} topics, {len(self.partitions)} partitions, "
            f"{records:,} records in {segments} segments, timestamps {_utc(self.start_ms)} to {_utc(self.end_ms)}"
        ]
        for topic, parts in topics.items():
            policy = self.topic_configs.get(topic, {}).get("cleanup.policy", "")
            lines.append(
                f"  {topic}: {_count(len(parts), 'partition')}, {sum(r for r, _ in parts):,} records in "
                f"{sum(s for _, s in parts)} segments" + (f", cleanup.policy={policy}" if policy else "")
            )
        if self.commits:
            groups = len({group for group, _, _ in self.commits})
            lines.append(f"  __consumer_offsets: {len(self.commits)} committed offsets of {_count(groups, 'group')}")
        return "\n".join(lines)

    @property
    def topic_ids(self) -> dict[str, str]:
        return {tp.topic: p.topic_id for tp, p in self.partitions.items()}

    def to_dict(self) -> dict:
        return {
            "logDir": self.path,
            "seed": self.seed,
            "clusterId": self.cluster_id,
            "brokerId": self.broker_id,
            "startMs": self.start_ms,
            "endMs": self.end_ms,
            "topics": {
                topic: {"topicId": self.topic_ids[topic], "config": config}
                for topic, config in sorted(self.topic_configs.items())
            },
            "partitions": [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "records": self.records.get(tp, 0),
                    "logStartOffset": p.log_start_offset,
                    "logEndOffset": p.log_end_offset,
                    "highWatermark": p.high_watermark,
                    "lastStableOffset": p.last_stable_offset,
                    "segments": len(p.segments),
                    "abortedTransactions": len(p.aborted_txns),
                }
                for tp, p in sorted(self.partitions.items())
            ],
            "commits": [
                {"group": g, "topic": t, "partition": n, "offset": v.offset}
                for (g, t, n), v in sorted(self.commits.items())
            ],
        }


# -- generating -----------------------------------------------------------------------------------------


def generate(path_or_uri: str, spec: GeneratorSpec, *, fs: LogFileSystem | None = None) -> GenerateSummary:
    """Write the log directory `spec` describes at `path_or_uri`, which must not exist or be empty.
    With `fs`, the path is a path inside that filesystem."""
    spec.validate()
    if fs is None:
        fs, root = LogFileSystem.for_path(path_or_uri)
    else:
        root = path_or_uri
    if fs.exists(root):
        if not fs.is_dir(root) or fs.list_dir(root):
            raise LogDirError("refusing to generate into a path that exists and is not an empty directory", file=root)
    fs.make_dirs(root)
    summary = GenerateSummary(
        path=root,
        seed=spec.seed,
        cluster_id=_uuid(f"cluster\0{spec.seed}"),
        broker_id=spec.broker_id,
        start_ms=_start_of(spec),
        end_ms=_start_of(spec),
    )
    timelines: dict[TopicPartition, _Timeline] = {}
    producer_ids = _ProducerIds()
    for topic in spec.topics:
        summary.topic_configs[topic.name] = topic.config()
        pids = producer_ids.allocate(topic)
        for p in range(topic.partitions):
            tp = TopicPartition(topic.name, p)
            written, count, timeline = _write_topic_partition(fs, root, spec, topic, p, pids)
            summary.partitions[tp], summary.records[tp], timelines[tp] = written, count, timeline
    if spec.consumer_offsets is not None:
        _write_consumer_offsets(fs, root, spec, spec.consumer_offsets, summary, timelines)
    summary.end_ms = max(
        [summary.start_ms] + [p.mtime_ms for p in summary.partitions.values() if p.mtime_ms is not None]
    )
    _write_broker_files(fs, root, spec, summary)
    return summary


def _start_of(spec: GeneratorSpec) -> int:
    starts = [spec.start_ms] + [t.start_ms for t in spec.topics if t.start_ms is not None]
    return min(starts)


def _uuid(name: str) -> str:
    """A deterministic Kafka Uuid (URL-safe base64, 22 characters) for `name`."""
    return derive_topic_id(name, "kafkalog-generator")


class _Timeline:
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


class _ProducerIds:
    """Producer ids as a cluster hands them out: one id per producer, shared by all its partitions."""

    def __init__(self):
        self.next_id = 1000

    def allocate(self, topic: TopicSpec) -> list[tuple[str, int, int]]:
        """(kind, producer id, epoch) for each producer of the topic; the plain producer has id -1."""
        producers = [("plain", -1, -1)] if topic.plain_producer else []
        for _ in range(topic.idempotent_producers):
            producers.append(("idempotent", self._take(), 0))
        for i in range(topic.transactional_producers):
            producers.append(("transactional", self._take(), i % 3))  # some producers were fenced before
        return producers

    def _take(self) -> int:
        self.next_id += 1
        return self.next_id - 1


class _Producer:
    def __init__(self, kind: str, producer_id: int, epoch: int):
        self.kind, self.producer_id, self.epoch = kind, producer_id, epoch
        self.sequence = 0
        self.txn_batches_left = 0  # > 0 while a transaction is open

    @property
    def in_transaction(self) -> bool:
        return self.txn_batches_left > 0


_VOCABULARY = (
    "order",
    "payment",
    "customer",
    "account",
    "shipped",
    "pending",
    "refund",
    "invoice",
    "eu-west",
    "us-east",
    "premium",
    "basic",
    "cart",
    "checkout",
    "session",
    "click",
    "view",
    "search",
    "mobile",
    "desktop",
    "approved",
    "declined",
    "retry",
    "timeout",
    "warehouse",
    "parcel",
    "coupon",
    "loyalty",
)
_FIXED_HEADERS = {"source": b"checkout-service", "content-type": b"application/json", "schema-version": b"3"}
_HEADER_NAMES = ("trace-id", *_FIXED_HEADERS, "retry-count")


class _RecordMaker:
    """Keys with zipf-like popularity, compressible text values, tombstones, headers."""

    def __init__(self, topic: TopicSpec, partition: int, rng: random.Random):
        self.topic, self.partition, self.rng = topic, partition, rng
        if topic.keys and not topic.cyclic_keys:
            weights, total = [], 0.0
            for rank in range(1, topic.keys + 1):
                total += 1.0 / rank**topic.key_skew
                weights.append(total)
            self.cum_weights = weights
        self.corpus = " ".join(rng.choice(_VOCABULARY) for _ in range(4096))
        self.ordinal = 0

    def record(self, timestamp: int) -> Record:
        t, rng = self.topic, self.rng
        ordinal = self.ordinal
        self.ordinal += 1
        key = None
        if t.keys:
            rank = ordinal % t.keys if t.cyclic_keys else rng.choices(range(t.keys), cum_weights=self.cum_weights)[0]
            key = f"{t.key_prefix}-{rank:06d}".encode()
        if key is not None and t.tombstone_ratio and rng.random() < t.tombstone_ratio:
            value = None
        else:
            size = rng.randint(*t.value_bytes)
            start = rng.randrange(len(self.corpus) - size) if size < len(self.corpus) else 0
            text = f"{self.partition}:{ordinal} {self.corpus[start : start + size]}"
            value = text[:size].encode()
        headers: tuple[tuple[str, bytes | None], ...] = ()
        if t.headers:
            chosen = rng.sample(_HEADER_NAMES, min(rng.randint(0, t.headers), len(_HEADER_NAMES)))
            headers = tuple((name, _header_value(name, rng)) for name in chosen)
        if t.version_header:  # versions that mostly grow, some updates arriving out of order
            version = max(0, ordinal + rng.randint(-50, 50))
            headers += ((t.version_header, version.to_bytes(8, "big", signed=True)),)
        return Record(-1, timestamp, key, value, headers)


def _header_value(name: str, rng: random.Random) -> bytes | None:
    if name == "trace-id":
        return f"{rng.getrandbits(64):016x}".encode()
    if name == "retry-count":
        return None if rng.random() < 0.5 else str(rng.randint(1, 5)).encode()  # a header with a null value
    return _FIXED_HEADERS[name]


class _Timing(NamedTuple):
    """Record n of a partition is created at start + n * step, moved by up to ±jitter."""

    start: int
    step: int
    jitter: int

    @classmethod
    def of(cls, spec: GeneratorSpec, topic: TopicSpec) -> _Timing:
        def pick(own, default):
            return default if own is None else own

        return cls(
            pick(topic.start_ms, spec.start_ms),
            pick(topic.step_ms, spec.step_ms),
            pick(topic.jitter_ms, spec.jitter_ms),
        )

    def nominal(self, n: int) -> int:
        return self.start + n * self.step

    def create_time(self, n: int, rng: random.Random) -> int:
        return max(0, self.nominal(n) + (rng.randint(-self.jitter, self.jitter) if self.jitter else 0))


def _write_topic_partition(
    fs: LogFileSystem,
    root: str,
    spec: GeneratorSpec,
    topic: TopicSpec,
    partition: int,
    producer_kinds: list[tuple[str, int, int]],
):
    """One partition's life: producers take turns writing batches, transactions end in markers,
    leadership moves now and then; returns what was written and its timeline."""
    rng = random.Random(f"kafkalog-generator/{spec.seed}/{topic.name}/{partition}")
    timing = _Timing.of(spec, topic)
    codec = CODECS[topic.codec]
    ts_type = TIMESTAMP_TYPES[topic.timestamp_type]
    legacy = topic.magic < 2
    writer = PartitionWriter(
        fs,
        root,
        topic.name,
        partition,
        segment_bytes=topic.segment_bytes,
        segment_ms=topic.segment_ms,
        index_interval_bytes=topic.index_interval_bytes,
        segment_index_bytes=topic.segment_index_bytes,
        log_start_offset=topic.start_offset,
        leader_epoch=None if legacy else 0,
        leader_epoch_cache=not legacy,
        topic_id=derive_topic_id(topic.name, spec.seed),
        now_ms=timing.start,
    )
    timeline = _Timeline(topic.start_offset)
    maker = _RecordMaker(topic, partition, rng)
    producers = [_Producer(*p) for p in producer_kinds]
    # Leadership moves at evenly spaced points of the partition's life.
    epoch_changes = [topic.records * k // topic.leader_epochs for k in range(1, topic.leader_epochs)]
    written = 0
    while written < topic.records:
        while not legacy and epoch_changes and written >= epoch_changes[0]:
            epoch_changes.pop(0)
            writer.become_leader(writer.partition_leader_epoch + 1)
        count = min(rng.randint(*topic.batch_records), topic.records - written)
        records = [maker.record(timing.create_time(written + i, rng)) for i in range(count)]
        now = timing.nominal(written + count - 1)  # the broker receives the batch when its last record is due
        producer = rng.choice(producers)
        if legacy:
            writer.append_legacy_records(records, magic=topic.magic, codec=codec, timestamp_type=ts_type, now_ms=now)
        else:
            _append_from(writer, producer, records, topic, codec, ts_type, now, rng)
        written += count
        timeline.add(writer.clock_ms, writer.log_end_offset)
    for producer in producers:
        if producer.in_transaction and not topic.hanging_transactions:
            _end_transaction(writer, producer, topic, ts_type, rng)
            timeline.add(writer.clock_ms, writer.log_end_offset)
    return writer.close(), written, timeline


def _append_from(
    writer: PartitionWriter,
    producer: _Producer,
    records: list[Record],
    topic: TopicSpec,
    codec: int,
    ts_type: int,
    now: int,
    rng: random.Random,
) -> None:
    transactional = producer.kind == "transactional"
    if transactional and not producer.in_transaction:
        producer.txn_batches_left = rng.randint(*topic.transaction_batches)
    idempotent = producer.kind != "plain"
    writer.append_records(
        records,
        codec=codec,
        timestamp_type=ts_type,
        producer_id=producer.producer_id,
        producer_epoch=producer.epoch,
        base_sequence=producer.sequence if idempotent else -1,
        is_transactional=transactional,
        now_ms=now,
    )
    if idempotent:
        producer.sequence += len(records)
    if transactional:
        producer.txn_batches_left -= 1
        if producer.txn_batches_left == 0:
            _end_transaction(writer, producer, topic, ts_type, rng)


def _end_transaction(
    writer: PartitionWriter, producer: _Producer, topic: TopicSpec, ts_type: int, rng: random.Random
) -> None:
    """The coordinator's COMMIT or ABORT marker, a moment after the producer's last batch."""
    commit = rng.random() >= topic.abort_ratio
    writer.append_end_txn_marker(
        producer_id=producer.producer_id,
        producer_epoch=producer.epoch,
        commit=commit,
        timestamp=writer.clock_ms + rng.randint(1, 50),
        timestamp_type=ts_type,
    )
    producer.txn_batches_left = 0


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


def _write_consumer_offsets(
    fs: LogFileSystem,
    root: str,
    spec: GeneratorSpec,
    co: ConsumerOffsetsSpec,
    summary: GenerateSummary,
    timelines: dict[TopicPartition, _Timeline],
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
    timelines: dict[TopicPartition, _Timeline],
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
        member_id = f"{client}-" + _uuid("\0".join(("member", group, str(generation), str(m))))
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


# -- broker-level files -----------------------------------------------------------------------------------

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _utc(ms: int) -> str:
    return f"{datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc):%Y-%m-%d %H:%M:%S} UTC"


def _java_date(ms: int) -> str:
    """java.util.Date.toString in UTC, as Properties.store writes it; no locale involved."""
    d = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return f"{_DAYS[d.weekday()]} {_MONTHS[d.month - 1]} {d.day:02d} {d:%H:%M:%S} UTC {d.year}"


def _write_broker_files(fs: LogFileSystem, root: str, spec: GeneratorSpec, summary: GenerateSummary) -> None:
    parts = summary.partitions

    def write(name: str, text: str, mtime_ms: int) -> None:
        path = fs.join(root, name)
        fs.write_bytes(path, text.encode("utf-8"))
        fs.set_mtime(path, mtime_ms)

    start, end = summary.start_ms, summary.end_ms
    # The broker's start: its lock and identity
    write(LOCK_FILE, "", start)
    write(
        META_PROPERTIES,
        f"#\n#{_java_date(start)}\nbroker.id={spec.broker_id}\nversion=0\ncluster.id={summary.cluster_id}\n",
        start,
    )
    # Its shutdown: every partition flushed to its end, high watermarks = log end offsets
    write(RECOVERY_POINT_CHECKPOINT, format_offset_checkpoint({tp: p.recovery_point for tp, p in parts.items()}), end)
    write(
        REPLICATION_OFFSET_CHECKPOINT, format_offset_checkpoint({tp: p.high_watermark for tp, p in parts.items()}), end
    )
    # Kafka checkpoints a log start offset only where it is above the first segment's base offset.
    write(
        LOG_START_OFFSET_CHECKPOINT,
        format_offset_checkpoint(
            {
                tp: p.log_start_offset
                for tp, p in parts.items()
                if p.segments and p.log_start_offset > p.segments[0].base_offset
            }
        ),
        end,
    )
    write(CLEANER_OFFSET_CHECKPOINT, "", start)  # the cleaner created it and has checkpointed nothing yet
    if spec.clean_shutdown:
        write(
            CLEAN_SHUTDOWN, json.dumps({"version": 0, "brokerEpoch": _broker_epoch(spec)}, separators=(",", ":")), end
        )
    fs.set_mtime(root, end)


def _broker_epoch(spec: GeneratorSpec) -> int:
    return 1 + int.from_bytes(hashlib.sha256(f"broker-epoch\0{spec.seed}".encode()).digest()[:2], "big")


# -- the command ---------------------------------------------------------------------------------------------


def generate_log_dir(
    log_dir: str,
    *,
    preset_name: str = "demo",
    spec_file: str | None = None,
    seed: int | None = None,
    records: int | None = None,
    offsets_partitions: int | None = None,
    config_out: str | None = None,
) -> GenerateSummary:
    """`kafkalog generate`: a preset (or a JSON GeneratorSpec file), with its seed, records per
    partition and `__consumer_offsets` partitions overridden where given; `config_out` also gets the
    topics' configurations as a properties file for `--config-file`."""
    if spec_file:
        fs, path = LogFileSystem.for_path(spec_file)
        spec = GeneratorSpec.from_dict(json.loads(fs.read_bytes(path)))
        if seed is not None:
            spec.seed = seed
    else:
        spec = preset(preset_name, seed or 0)
    if records is not None:
        for topic in spec.topics:
            topic.records = records
    if offsets_partitions is not None and spec.consumer_offsets is not None:
        spec.consumer_offsets.partitions = offsets_partitions
    summary = generate(log_dir, spec)
    if config_out:
        fs, path = LogFileSystem.for_path(config_out)
        fs.write_bytes(path, summary.config_properties().encode("utf-8"))
    return summary
