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

import datetime
import hashlib
import json
import random
from typing import NamedTuple

from ..codec.records import Record
from ..errors import LogDirError
from ..storage.checkpoint import format_offset_checkpoint
from ..storage.fs import LogFileSystem
from ..storage.log_writer import PartitionWriter, derive_topic_id
from ..storage.logdir import CLEAN_SHUTDOWN, LOCK_FILE, META_PROPERTIES
from ..storage.naming import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    TopicPartition,
)
from .generate_offsets import Timeline, java_string_hashcode, partition_for_group, write_consumer_offsets
from .generate_spec import (
    CODECS,
    CONSUMER_OFFSETS_TOPIC,
    PRESETS,
    TIMESTAMP_TYPES,
    ConsumerOffsetsSpec,
    GenerateSummary,
    GeneratorSpec,
    TopicSpec,
    demo_preset,
    generated_uuid,
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
        cluster_id=generated_uuid(f"cluster\0{spec.seed}"),
        broker_id=spec.broker_id,
        start_ms=_start_of(spec),
        end_ms=_start_of(spec),
    )
    timelines: dict[TopicPartition, Timeline] = {}
    producer_ids = _ProducerIds()
    for topic in spec.topics:
        summary.topic_configs[topic.name] = topic.config()
        pids = producer_ids.allocate(topic)
        for p in range(topic.partitions):
            tp = TopicPartition(topic.name, p)
            written, count, timeline = _write_topic_partition(fs, root, spec, topic, p, pids)
            summary.partitions[tp], summary.records[tp], timelines[tp] = written, count, timeline
    if spec.consumer_offsets is not None:
        write_consumer_offsets(fs, root, spec, spec.consumer_offsets, summary, timelines)
    summary.end_ms = max(
        [summary.start_ms] + [p.mtime_ms for p in summary.partitions.values() if p.mtime_ms is not None]
    )
    _write_broker_files(fs, root, spec, summary)
    return summary


def _start_of(spec: GeneratorSpec) -> int:
    starts = [spec.start_ms] + [t.start_ms for t in spec.topics if t.start_ms is not None]
    return min(starts)


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
    timeline = Timeline(topic.start_offset)
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


# -- broker-level files -----------------------------------------------------------------------------------

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


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
