"""What `kafkalog generate` writes: a `GeneratorSpec` of topics (records, codecs, producers,
transactions, timestamps, cleanup policies) and `__consumer_offsets` groups, checked as Kafka would
refuse them, and the named presets."""

from __future__ import annotations

import dataclasses
import datetime
import re
from dataclasses import dataclass, field

from ..codec.batch import TimestampType
from ..codec.compression import Codec
from ..codec.consumer_offsets import OffsetCommitValue
from ..errors import ConfigError
from ..storage.index import DEFAULT_INDEX_INTERVAL_BYTES
from ..storage.log_writer import (
    DEFAULT_SEGMENT_BYTES,
    DEFAULT_SEGMENT_INDEX_BYTES,
    DEFAULT_SEGMENT_MS,
    WrittenPartition,
    derive_topic_id,
)
from ..storage.naming import TopicPartition
from ..topics import CONSUMER_OFFSETS_TOPIC

DEFAULT_START_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z: a fixed epoch, so output never depends on today
DAY_MS = 24 * 60 * 60 * 1000

CODECS = {"none": Codec.NONE, "gzip": Codec.GZIP, "snappy": Codec.SNAPPY, "lz4": Codec.LZ4, "zstd": Codec.ZSTD}
TIMESTAMP_TYPES = {"CreateTime": TimestampType.CREATE_TIME, "LogAppendTime": TimestampType.LOG_APPEND_TIME}
CLEANUP_POLICIES = ("delete", "compact", "compact,delete")
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")  # Kafka's legal topic characters and length


# -- what to generate ---------------------------------------------------------------------------------


@dataclass
class TopicSpec:
    """One topic. Sizes, ratios and Kafka configs are per partition; None timestamps inherit the
    `GeneratorSpec`'s."""

    name: str
    partitions: int = 1
    records: int = 1000  # data records per partition (markers come on top)
    keys: int = 100  # key cardinality; 0 writes records without keys
    key_skew: float = 1.0  # zipf exponent: P(k-th key) ~ 1/k^skew; 0 is uniform
    cyclic_keys: bool = False  # record n has key n mod keys instead of a random one (keys >= records: all distinct)
    key_prefix: str = "key"
    value_bytes: tuple[int, int] = (16, 256)  # min, max value size
    tombstone_ratio: float = 0.0  # share of keyed records with a null value
    headers: int = 0  # up to this many headers per record
    version_header: str = ""  # a header of this key on every record: an 8-byte big-endian version (KIP-280)
    codec: str = "none"  # none, gzip, snappy, lz4, zstd
    batch_records: tuple[int, int] = (1, 10)  # min, max records per batch
    magic: int = 2  # 0 and 1 write the legacy message formats
    timestamp_type: str = "CreateTime"  # or LogAppendTime
    start_ms: int | None = None
    step_ms: int | None = None
    jitter_ms: int | None = None
    plain_producer: bool = True  # a producer without idempotence also writes
    idempotent_producers: int = 0
    transactional_producers: int = 0
    transaction_batches: tuple[int, int] = (1, 4)  # data batches per transaction in a partition
    abort_ratio: float = 0.0
    hanging_transactions: bool = False  # leave the last transactions open (LSO < high watermark)
    leader_epochs: int = 1  # leader terms over a partition's life
    start_offset: int = 0  # log start offset, as if retention had deleted what came before
    cleanup_policy: str = "delete"
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    segment_ms: int = DEFAULT_SEGMENT_MS
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES

    def config(self) -> dict[str, str]:
        """The topic's configuration under Kafka's names, for the commands that act on it."""
        return {
            "cleanup.policy": self.cleanup_policy,
            "compression.type": "uncompressed" if self.codec == "none" else self.codec,
            "message.timestamp.type": self.timestamp_type,
            "segment.bytes": str(self.segment_bytes),
            "segment.ms": str(self.segment_ms),
            "segment.index.bytes": str(self.segment_index_bytes),
            "index.interval.bytes": str(self.index_interval_bytes),
        }


@dataclass
class ConsumerOffsetsSpec:
    """The `__consumer_offsets` topic: `groups` consume `topics` (None: every generated topic) and
    commit `commit_rounds` times over the data's time range, each group lagging a little more."""

    partitions: int = 50  # offsets.topic.num.partitions
    groups: tuple[str, ...] = ("billing-service", "fraud-detector", "search-indexer")
    topics: tuple[str, ...] | None = None
    commit_rounds: int = 4
    group_metadata: bool = True  # also write each group's GroupMetadata records (v3)
    deleted_groups: tuple[str, ...] = ()  # groups whose offsets and metadata end in tombstones
    segment_bytes: int = 100 * 1024 * 1024  # offsets.topic.segment.bytes
    segment_ms: int = DEFAULT_SEGMENT_MS
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES


@dataclass
class GeneratorSpec:
    seed: int = 0
    topics: list[TopicSpec] = field(default_factory=list)
    consumer_offsets: ConsumerOffsetsSpec | None = field(default_factory=ConsumerOffsetsSpec)
    start_ms: int = DEFAULT_START_MS
    step_ms: int = 1000  # time between consecutive records of a partition
    jitter_ms: int = 0  # CreateTime timestamps move by up to this much either way
    broker_id: int = 0
    clean_shutdown: bool = True  # leave `.kafka_cleanshutdown`, as a cleanly stopped broker does

    @classmethod
    def from_dict(cls, data: dict) -> GeneratorSpec:
        """A spec from plain JSON-like values (lists where the dataclasses have tuples)."""
        data = dict(data)
        topics = [_from_dict(TopicSpec, t) for t in data.pop("topics", [])]
        offsets = data.pop("consumer_offsets", {})
        spec = _from_dict(cls, data)
        spec.topics = topics
        spec.consumer_offsets = None if offsets is None else _from_dict(ConsumerOffsetsSpec, offsets)
        return spec

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def validate(self) -> None:
        """Refuse, before anything is written, what Kafka would refuse or the generator cannot do."""
        names = [t.name for t in self.topics]
        if len(set(names)) != len(names):
            raise ConfigError(f"topic names must be unique: {names}")
        for value, what in (
            (self.start_ms, "start_ms"),
            (self.step_ms, "step_ms"),
            (self.jitter_ms, "jitter_ms"),
            (self.broker_id, "broker_id"),
        ):
            _require(value >= 0, f"{what} must be >= 0, not {value}")
        for topic in self.topics:
            _validate_topic(topic)
        if self.consumer_offsets is not None:
            _validate_consumer_offsets(self.consumer_offsets, set(names))


def _from_dict(cls, data: dict):
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(data) - set(known)
    if unknown:
        raise ConfigError(f"unknown {cls.__name__} fields: {sorted(unknown)}")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    try:
        return cls(**values)
    except TypeError as err:
        raise ConfigError(f"{cls.__name__}: {err}") from None


def _require(condition: object, message: str) -> None:
    if not condition:
        raise ConfigError(message)


def _validate_topic(t: TopicSpec) -> None:
    where = f"topic {t.name!r}"
    _require(
        bool(_TOPIC_NAME.fullmatch(t.name)) and t.name not in (".", ".."),
        f"{where}: Kafka topic names are 1-249 characters of [a-zA-Z0-9._-]",
    )
    _require(t.name != CONSUMER_OFFSETS_TOPIC, f"{where}: is written from ConsumerOffsetsSpec")
    _require(t.partitions >= 1, f"{where}: partitions must be >= 1")
    _require(t.records >= 0 and t.keys >= 0 and t.headers >= 0, f"{where}: counts must be >= 0")
    _require(t.key_skew >= 0, f"{where}: key_skew must be >= 0")
    _require(0 <= t.value_bytes[0] <= t.value_bytes[1], f"{where}: value_bytes must be (min, max) with 0 <= min <= max")
    _require(
        1 <= t.batch_records[0] <= t.batch_records[1], f"{where}: batch_records must be (min, max), 1 <= min <= max"
    )
    _require(
        1 <= t.transaction_batches[0] <= t.transaction_batches[1],
        f"{where}: transaction_batches must be (min, max), 1 <= min <= max",
    )
    _require(0 <= t.tombstone_ratio <= 1 and 0 <= t.abort_ratio <= 1, f"{where}: ratios must be in [0, 1]")
    _require(t.codec in CODECS, f"{where}: codec must be one of {sorted(CODECS)}")
    _require(t.timestamp_type in TIMESTAMP_TYPES, f"{where}: timestamp_type must be one of {sorted(TIMESTAMP_TYPES)}")
    _require(t.magic in (0, 1, 2), f"{where}: magic must be 0, 1 or 2")
    _require(t.cleanup_policy in CLEANUP_POLICIES, f"{where}: cleanup_policy must be one of {CLEANUP_POLICIES}")
    _require(
        t.plain_producer or t.idempotent_producers or t.transactional_producers, f"{where}: needs at least one producer"
    )
    _require(t.idempotent_producers >= 0 and t.transactional_producers >= 0, f"{where}: producer counts must be >= 0")
    _require(t.leader_epochs >= 1 and t.start_offset >= 0, f"{where}: leader_epochs >= 1 and start_offset >= 0")
    # Kafka's own lower bounds for these configs
    _require(
        t.segment_bytes >= 14 and t.segment_ms >= 1 and t.index_interval_bytes >= 0 and t.segment_index_bytes >= 4,
        f"{where}: segment/index configs below Kafka's minimums",
    )
    if "compact" in t.cleanup_policy:
        _require(t.keys >= 1, f"{where}: a compacted topic refuses records without keys")
    for value, what in ((t.start_ms, "start_ms"), (t.step_ms, "step_ms"), (t.jitter_ms, "jitter_ms")):
        _require(value is None or value >= 0, f"{where}: {what} must be >= 0")
    if t.magic < 2:
        _require(t.codec != "zstd", f"{where}: zstd needs magic 2")
        _require(t.headers == 0 and not t.version_header, f"{where}: magic {t.magic} messages have no headers")
        _require(
            not t.idempotent_producers and not t.transactional_producers,
            f"{where}: idempotent and transactional producers need magic 2",
        )
        _require(t.magic == 1 or t.timestamp_type == "CreateTime", f"{where}: magic 0 has no timestamp type")


def _validate_consumer_offsets(spec: ConsumerOffsetsSpec, topics: set[str]) -> None:
    _require(spec.partitions >= 1, "consumer_offsets.partitions must be >= 1")
    _require(spec.commit_rounds >= 1, "consumer_offsets.commit_rounds must be >= 1")
    _require(
        all(isinstance(g, str) and g for g in spec.groups) and len(set(spec.groups)) == len(spec.groups),
        "consumer_offsets.groups must be distinct non-empty names",
    )
    _require(set(spec.deleted_groups) <= set(spec.groups), "consumer_offsets.deleted_groups must be among groups")
    unknown = set(spec.topics or ()) - topics
    _require(not unknown, f"consumer_offsets.topics names topics that are not generated: {sorted(unknown)}")
    _require(
        spec.segment_bytes >= 14 and spec.segment_ms >= 1 and spec.index_interval_bytes >= 0,
        "consumer_offsets segment configs below Kafka's minimums",
    )


# -- presets --------------------------------------------------------------------------------------------


def small_preset(seed: int = 0) -> GeneratorSpec:
    """A few thousand records that still cover every feature: for tests."""
    return GeneratorSpec(
        seed=seed,
        topics=[
            TopicSpec(
                "orders",
                partitions=2,
                records=400,
                keys=50,
                key_skew=1.1,
                value_bytes=(20, 120),
                headers=2,
                codec="lz4",
                batch_records=(1, 8),
                jitter_ms=1500,
                idempotent_producers=2,
                leader_epochs=3,
                segment_bytes=8 * 1024,
                index_interval_bytes=512,
            ),
            TopicSpec(
                "customers",
                records=400,
                keys=40,
                key_skew=1.2,
                key_prefix="customer",
                tombstone_ratio=0.15,
                codec="zstd",
                batch_records=(1, 5),
                cleanup_policy="compact",
                segment_bytes=6 * 1024,
                index_interval_bytes=256,
            ),
            TopicSpec(
                "payments",
                partitions=2,
                records=400,
                keys=30,
                key_prefix="account",
                codec="gzip",
                batch_records=(1, 4),
                plain_producer=False,
                idempotent_producers=1,
                transactional_producers=3,
                transaction_batches=(1, 3),
                abort_ratio=0.4,
                segment_bytes=8 * 1024,
                index_interval_bytes=512,
            ),
            TopicSpec(
                "clicks",
                records=300,
                keys=0,
                headers=1,
                codec="snappy",
                timestamp_type="LogAppendTime",
                batch_records=(1, 6),
                segment_ms=60_000,
                index_interval_bytes=1024,
            ),
            TopicSpec(
                "legacy-v1",
                records=200,
                keys=20,
                codec="gzip",
                magic=1,
                batch_records=(1, 6),
                segment_bytes=4 * 1024,
                index_interval_bytes=512,
            ),
            TopicSpec(
                "legacy-v0",
                records=150,
                keys=20,
                magic=0,
                batch_records=(1, 3),
                segment_bytes=4 * 1024,
                index_interval_bytes=512,
            ),
        ],
        consumer_offsets=ConsumerOffsetsSpec(
            partitions=3,
            groups=("billing", "analytics", "audit", "retired"),
            commit_rounds=4,
            deleted_groups=("retired",),
        ),
    )


def demo_preset(seed: int = 0) -> GeneratorSpec:
    """The README demo: a compacted topic with tombstones, a transactional topic with aborts, a
    delete-policy topic whose old segments span a month, an old-format topic, `__consumer_offsets`."""
    month_ago = DEFAULT_START_MS - 30 * DAY_MS
    return GeneratorSpec(
        seed=seed,
        topics=[
            TopicSpec(
                "customers",
                partitions=3,
                records=5000,
                keys=500,
                key_skew=1.1,
                key_prefix="customer",
                tombstone_ratio=0.05,
                headers=1,
                codec="zstd",
                batch_records=(1, 20),
                cleanup_policy="compact",
                segment_bytes=64 * 1024,
            ),
            TopicSpec(
                "payments",
                partitions=3,
                records=3000,
                keys=200,
                key_prefix="account",
                codec="lz4",
                batch_records=(1, 10),
                plain_producer=False,
                idempotent_producers=1,
                transactional_producers=4,
                abort_ratio=0.25,
                leader_epochs=2,
                segment_bytes=64 * 1024,
            ),
            TopicSpec(
                "clickstream",
                partitions=3,
                records=6000,
                keys=0,
                headers=2,
                codec="snappy",
                batch_records=(5, 30),
                start_ms=month_ago,
                step_ms=30 * DAY_MS // 6000,
                jitter_ms=2000,
                segment_ms=DAY_MS,
                segment_bytes=1024 * 1024,
                idempotent_producers=2,
            ),
            TopicSpec(
                "audit-legacy",
                records=1000,
                keys=50,
                codec="gzip",
                magic=1,
                batch_records=(1, 10),
                segment_bytes=32 * 1024,
            ),
        ],
        consumer_offsets=ConsumerOffsetsSpec(
            groups=("billing-service", "fraud-detector", "search-indexer", "analytics-etl", "old-dashboard"),
            commit_rounds=6,
            deleted_groups=("old-dashboard",),
        ),
    )


PRESETS = {"demo": demo_preset, "small": small_preset}


def preset(name: str, seed: int = 0) -> GeneratorSpec:
    try:
        return PRESETS[name](seed)
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}: expected one of {sorted(PRESETS)}") from None


def generated_uuid(name: str) -> str:
    """A deterministic Kafka Uuid (URL-safe base64, 22 characters) for `name`."""
    return derive_topic_id(name, "kafkalog-generator")


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


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _utc(ms: int) -> str:
    return f"{datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc):%Y-%m-%d %H:%M:%S} UTC"
