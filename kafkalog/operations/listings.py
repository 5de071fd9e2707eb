"""What Kafka's listing tools say of a cluster, said of log directories offline:

- `log_dirs`: `kafka-log-dirs.sh --describe` (each broker's log dirs, the size of each partition);
- `get_offsets`: `kafka-get-offsets.sh` (earliest, latest, max-timestamp, earliest-local or by time,
  as the broker that owned the log dir answers ListOffsets after loading it: `rules.partition_state`);
- `describe_configs`: `kafka-configs.sh --describe --all` for topics, each setting as kafkalog resolves
  it from the configuration given, with where its value comes from.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..config import KEYS, ConfigResolver, did_you_mean
from ..errors import ConfigError
from ..rules.partition_state import partition_state
from ..storage.logdir import LogDir
from ..storage.offsets_for_times import offset_for_timestamp
from ..storage.producer_state import replay_partition

# kafka-get-offsets' --time: its names and numbers (ListOffsetsRequest's special timestamps)
TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4, "latest-tiered": -5}


def log_dirs(paths: Sequence[str], topics: Iterable[str] | None = None) -> dict:
    """kafka-log-dirs --describe's JSON for `paths`: log dirs grouped by the broker their
    meta.properties names (-1 where there is none), each partition's size (its `.log` files, as
    UnifiedLog.size), offsetLag 0 and isFuture false (an offline log dir has no replica catching up)."""
    wanted = set(topics) if topics else None
    brokers: dict[int, list] = {}
    for path in paths:
        log = LogDir.open(path)
        log.check_topics(wanted)
        meta = log.read_meta()
        broker = -1 if meta is None or meta.node_id is None else meta.node_id
        partitions = [
            {
                "partition": part.name,
                "size": sum(segment.size for segment in part.segments),
                "offsetLag": 0,
                "isFuture": False,
            }
            for part in log.partitions(wanted)
        ]
        brokers.setdefault(broker, []).append({"partitions": partitions, "error": None, "logDir": log.path})
    return {"brokers": [{"broker": b, "logDirs": dirs} for b, dirs in sorted(brokers.items())], "version": 1}


def parse_time(text: str) -> int:
    """--time as kafka-get-offsets takes it: a name of TIMES, its number, or a timestamp (epoch ms)."""
    value = TIMES.get(text.strip().lower(), None)
    if value is not None:
        return value
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(
            f"--time {text!r}: expected a timestamp (epoch ms) or one of "
            + ", ".join(f"{n} ({v})" for n, v in TIMES.items())
        ) from None
    if value < -5:
        raise ConfigError(f"--time {value}: a timestamp is at least 0; -1 to -5 name the special times")
    return value


@dataclass(frozen=True)
class PartitionOffset:
    topic: str
    partition: int
    offset: int

    def line(self) -> str:
        """kafka-get-offsets' output line: `topic:partition:offset`."""
        return f"{self.topic}:{self.partition}:{self.offset}"


def get_offsets(
    log_dir: str,
    time: int = TIMES["latest"],
    *,
    topic_pattern: str | None = None,
    partitions: Iterable[int] | None = None,
    config: ConfigResolver | None = None,
) -> list[PartitionOffset]:
    """kafka-get-offsets for every partition of `log_dir` (of the topics `topic_pattern`, a regular
    expression matching the whole name, and `partitions`): the offset the broker answers ListOffsets
    with, read_uncommitted, as kafka-get-offsets asks. A partition with no answer (no record at or
    past a timestamp, below the high watermark) is left out, as kafka-get-offsets leaves it out; so is
    every partition for `latest-tiered` of a topic without remote storage (Kafka answers -1)."""
    log = LogDir.open(log_dir)
    resolver = config or ConfigResolver()
    chosen = _partitions(log, topic_pattern, partitions)
    checkpoints = log.offset_checkpoints()
    out = []
    for topic, number in chosen:
        part = log.partition(topic, number)
        part.ensure_settled()
        tiered = resolver.for_topic(topic).remote_storage_enable
        if time == TIMES["latest-tiered"] and tiered:
            raise ConfigError(
                f"--time latest-tiered for {topic}, a tiered topic: the highest offset in remote storage is "
                "in __remote_log_metadata, which get-offsets does not read (kafkalog dump "
                "--remote-log-metadata-decoder shows it)"
            )
        state = partition_state(part, replay_partition, **checkpoints.of((topic, number)), tiered=tiered)
        offset = _answer(part, state, time)
        # Partition.fetchOffsetForTimestamp: a found offset must lie below the high watermark
        if offset is not None and (time < 0 and time != TIMES["max-timestamp"] or offset < state.high_watermark):
            out.append(PartitionOffset(topic, number, offset))
    return sorted(out, key=lambda p: f"{p.topic}-{p.partition}")  # TopicPartition.toString's order, as Kafka's tool


def _partitions(log: LogDir, topic_pattern: str | None, partitions: Iterable[int] | None) -> list[tuple[str, int]]:
    chosen = log.topic_partitions
    if topic_pattern is not None:
        try:
            pattern = re.compile(topic_pattern)
        except re.error as err:
            raise ConfigError(f"--topic {topic_pattern!r} is not a regular expression: {err}") from None
        chosen = [tp for tp in chosen if pattern.fullmatch(tp[0])]
        if not chosen:
            raise ConfigError(
                f"--topic {topic_pattern!r} matches no topic of {log.path}" + did_you_mean(topic_pattern, log.topics)
            )
    if partitions is not None:
        wanted = set(partitions)
        chosen = [tp for tp in chosen if tp[1] in wanted]
        if not chosen:
            raise ConfigError(f"--partitions {sorted(wanted)}: no such partition of the topics chosen")
    return chosen


def _answer(part, state, time: int) -> int | None:
    """UnifiedLog.fetchOffsetByTimestamp, and the latest offset a read_uncommitted consumer is given."""
    if time == TIMES["latest"]:
        return state.high_watermark
    if time == TIMES["earliest"]:
        return state.log_start_offset
    if time == TIMES["earliest-local"]:
        return state.local_log_start_offset
    if time == TIMES["latest-tiered"]:
        return None  # not tiered: Kafka answers -1, which kafka-get-offsets does not print
    if time == TIMES["max-timestamp"]:
        return _offset_of_max_timestamp(part)
    return offset_for_timestamp(part.segments, time, log_start_offset=state.log_start_offset)


def _offset_of_max_timestamp(part) -> int | None:
    """The first record with the partition's largest timestamp: in the first segment with the
    largest time-index timestamp, the first batch whose max timestamp it is (UnifiedLog's
    MAX_TIMESTAMP lookup, then RecordBatch.offsetOfMaxTimestamp)."""
    if not part.segments:
        return None
    segment = max(part.segments, key=lambda s: s.largest_timestamp())  # the first of equals, as Scala's maxBy
    headers = [(position, batch.max_timestamp) for position, batch in segment.batches(headers_only=True)]
    if not headers:
        return None
    largest = max(timestamp for _, timestamp in headers)
    position = next(position for position, timestamp in headers if timestamp == largest)
    batch = segment.batch_at(position)  # that batch alone, whole
    return next((r.offset for r in batch.records() if r.timestamp == largest), batch.last_offset)


def describe_configs(log_dir: str, resolver: ConfigResolver, topics: Iterable[str] | None = None) -> dict:
    """Per topic of `log_dir` (or of `topics`), every topic configuration as kafkalog resolves it,
    with its source: `topic` (set for this topic: --topic-config, topic.<T>.<name> or a topic's own
    file), `all-topics` (set for every topic: --config, or a topic name in a configuration file),
    `broker` (a broker setting of the file or --config, e.g. log.retention.hours), `default` (Kafka's)."""
    log = LogDir.open(log_dir)
    wanted = sorted(set(topics)) if topics else sorted(log.topics)
    log.check_topics(wanted)
    return {topic: _settings(resolver, topic) for topic in wanted}


def _settings(resolver: ConfigResolver, topic: str) -> list[dict]:
    values = resolver.for_topic(topic).as_properties()
    rows = []
    for name, value in sorted(values.items()):
        key = KEYS[name]
        if name in resolver.per_topic.get(topic, {}):
            source = "topic"
        elif name in resolver.topics_default:
            source = "all-topics"
        elif any(synonym in resolver.broker for synonym in key.broker):
            source = "broker:" + next(s for s in key.broker if s in resolver.broker)
        else:
            source = "default"
        rows.append({"name": name, "value": value, "source": source})
    return rows
