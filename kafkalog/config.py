"""Kafka's topic configuration: names, defaults, broker synonyms and validation (spec §8).

A topic's effective configuration is built as Kafka builds it: Kafka's defaults, overridden by the
broker's `log.*` settings, overridden by settings for every topic, overridden by a topic's own.
Values are validated with Kafka's rules, and the error says the rule, as Kafka's ConfigException does.
Two names of the KIP-68 proposal are added for consumed retention (never part of Kafka).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Mapping

from .errors import ConfigError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str  # "long", "int", "double", "list", "string", "boolean"
    default: object
    check: Callable[[object], str | None] = lambda v: None  # returns the broken rule, or None
    broker: tuple[str, ...] = ()  # broker synonyms, highest priority first
    broker_scale: tuple[int, ...] = ()  # multiplier of each synonym (minutes and hours)


def at_least(low):
    return lambda v: None if v >= low else f"Value must be at least {low}"


def between(low, high):
    return lambda v: None if low <= v <= high else f"Value must be no more than {high}" if v > high \
        else f"Value must be at least {low}"


def one_of(*allowed):
    return lambda v: None if all(x in allowed for x in (v if isinstance(v, list) else [v])) \
        else f"String must be one of: {', '.join(allowed)}"


KEYS = {k.name: k for k in [
    ConfigKey("cleanup.policy", "list", ["delete"], one_of("compact", "delete"), ("log.cleanup.policy",)),
    ConfigKey("retention.ms", "long", 604_800_000, at_least(-1),
              ("log.retention.ms", "log.retention.minutes", "log.retention.hours"), (1, 60_000, 3_600_000)),
    ConfigKey("retention.bytes", "long", -1, broker=("log.retention.bytes",)),
    ConfigKey("segment.bytes", "int", 1_073_741_824, at_least(14), ("log.segment.bytes",)),
    ConfigKey("segment.ms", "long", 604_800_000, at_least(1), ("log.roll.ms", "log.roll.hours"), (1, 3_600_000)),
    ConfigKey("segment.jitter.ms", "long", 0, at_least(0), ("log.roll.jitter.ms", "log.roll.jitter.hours"),
              (1, 3_600_000)),
    ConfigKey("segment.index.bytes", "int", 10_485_760, at_least(4), ("log.index.size.max.bytes",)),
    ConfigKey("index.interval.bytes", "int", 4096, at_least(0), ("log.index.interval.bytes",)),
    ConfigKey("min.cleanable.dirty.ratio", "double", 0.5, between(0, 1), ("log.cleaner.min.cleanable.ratio",)),
    ConfigKey("min.compaction.lag.ms", "long", 0, at_least(0), ("log.cleaner.min.compaction.lag.ms",)),
    ConfigKey("max.compaction.lag.ms", "long", LONG_MAX, at_least(1), ("log.cleaner.max.compaction.lag.ms",)),
    ConfigKey("delete.retention.ms", "long", 86_400_000, at_least(0), ("log.cleaner.delete.retention.ms",)),
    ConfigKey("file.delete.delay.ms", "long", 60_000, at_least(0), ("log.segment.delete.delay.ms",)),
    ConfigKey("max.message.bytes", "int", 1_048_588, at_least(0), ("message.max.bytes",)),
    ConfigKey("message.timestamp.type", "string", "CreateTime", one_of("CreateTime", "LogAppendTime"),
              ("log.message.timestamp.type",)),
    ConfigKey("compression.type", "string", "producer",
              one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), ("compression.type",)),
    ConfigKey("preallocate", "boolean", False, broker=("log.preallocate",)),
    ConfigKey("producer.id.expiration.ms", "long", 86_400_000, at_least(1), ("producer.id.expiration.ms",)),
    # KIP-68 (proposal only): consumed retention, with forced retention.ms as the backstop.
    ConfigKey("retention.commitoffset.enable", "boolean", False, broker=("log.retention.commitoffset.enable",)),
    ConfigKey("retention.commitoffset.ms", "long", -1, at_least(-1), ("log.retention.commitoffset.ms",)),
]}


def _attr(name: str) -> str:
    return name.replace(".", "_")


@dataclass(frozen=True)
class TopicConfig:
    """The effective configuration of one topic; attribute names are Kafka's with '_' for '.'."""
    cleanup_policy: tuple = ("delete",)
    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10_485_760
    index_interval_bytes: int = 4096
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = 86_400_000
    file_delete_delay_ms: int = 60_000
    max_message_bytes: int = 1_048_588
    message_timestamp_type: str = "CreateTime"
    compression_type: str = "producer"
    preallocate: bool = False
    producer_id_expiration_ms: int = 86_400_000
    retention_commitoffset_enable: bool = False
    retention_commitoffset_ms: int = -1

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    def get(self, name: str):
        return getattr(self, _attr(name))

    def as_properties(self) -> dict[str, str]:
        return {name: format_value(KEYS[name], self.get(name)) for name in KEYS}


def parse_value(key: ConfigKey, raw: str, source: str):
    """A value from text, as Kafka's ConfigDef parses it, validated."""
    text = raw.strip()
    try:
        if key.type in ("long", "int"):
            value = int(text)
            limit = LONG_MAX if key.type == "long" else INT_MAX
            if not -limit - 1 <= value <= limit:
                raise ValueError
        elif key.type == "double":
            value = float(text)
        elif key.type == "boolean":
            if text.lower() not in ("true", "false"):
                raise ValueError
            value = text.lower() == "true"
        elif key.type == "list":
            value = [part.strip().lower() for part in text.split(",") if part.strip()]
        else:
            value = text
    except ValueError:
        raise ConfigError(f"Invalid value {raw} for configuration {key.name}: expected a {key.type} "
                          f"(from {source})") from None
    problem = key.check(value)
    if problem:
        raise ConfigError(f"Invalid value {raw} for configuration {key.name}: {problem} (from {source})")
    return value


def format_value(key: ConfigKey, value) -> str:
    if key.type == "list":
        return ",".join(value)
    if key.type == "boolean":
        return str(value).lower()
    return str(value)


class ConfigResolver:
    """Layers configuration as Kafka does: defaults < broker `log.*` < every topic < one topic."""

    def __init__(self, broker: Mapping[str, str] | None = None, topics_default: Mapping[str, str] | None = None,
                 per_topic: Mapping[str, Mapping[str, str]] | None = None):
        self.broker = dict(broker or {})
        self.topics_default = dict(topics_default or {})
        self.per_topic = {t: dict(v) for t, v in (per_topic or {}).items()}
        for topic in [None, *self.per_topic]:  # fail early, naming the bad setting
            self.for_topic(topic)

    def for_topic(self, topic: str | None) -> TopicConfig:
        values = {}
        for name, key in KEYS.items():
            value = self._broker_value(key)
            for layer, source in ((self.topics_default, "--config"),
                                  (self.per_topic.get(topic, {}), f"topic {topic}")):
                if name in layer:
                    value = parse_value(key, layer[name], source)
            if value is not None:
                values[_attr(name)] = tuple(value) if key.type == "list" else value
        config = TopicConfig(**values)
        if config.min_compaction_lag_ms > config.max_compaction_lag_ms:
            raise ConfigError(f"conflict topic config setting min.compaction.lag.ms "
                              f"({config.min_compaction_lag_ms}) > max.compaction.lag.ms "
                              f"({config.max_compaction_lag_ms})" + (f" for topic {topic}" if topic else ""))
        if config.retention_commitoffset_enable and config.retention_ms >= 0 and \
                config.retention_commitoffset_ms > config.retention_ms:
            raise ConfigError(f"retention.commitoffset.ms ({config.retention_commitoffset_ms}) must not exceed "
                              f"retention.ms ({config.retention_ms})" + (f" for topic {topic}" if topic else ""))
        return config

    def values_of(self, name: str) -> Mapping[str, object]:
        """One setting for any topic, as a mapping topic -> value (resolved on lookup)."""
        return _TopicValues(self, _attr(_known(name, name)))

    def _broker_value(self, key: ConfigKey):
        scales = key.broker_scale or (1,) * len(key.broker)
        for synonym, scale in zip(key.broker, scales):
            if synonym in self.broker:
                value = parse_value(dataclasses.replace(key, check=lambda v: None), self.broker[synonym], synonym)
                if key.type in ("long", "int") and scale != 1:
                    value *= scale
                if key.name == "retention.ms" and value < 0:  # any negative broker retention means unlimited
                    value = -1
                problem = key.check(value)
                if problem:
                    raise ConfigError(f"Invalid value {self.broker[synonym]} for configuration {synonym}: {problem}")
                return value
        return key.default


class _TopicValues(Mapping):
    def __init__(self, resolver: ConfigResolver, attr: str):
        self.resolver, self.attr = resolver, attr

    def __getitem__(self, topic):
        return getattr(self.resolver.for_topic(topic), self.attr)

    def __iter__(self):
        return iter(self.resolver.per_topic)

    def __len__(self):
        return len(self.resolver.per_topic)


def parse_topic_setting(text: str) -> tuple[str, str, str]:
    """`TOPIC:key=value` (the --topic-config form) → (topic, key, value)."""
    topic, sep, setting = text.rpartition(":")
    name, eq, value = setting.partition("=")
    if not sep or not topic or not eq:
        raise ConfigError(f"expected TOPIC:key=value, got {text!r}")
    return topic, _known(name.strip(), text), value


def parse_setting(text: str) -> tuple[str, str]:
    """`key=value` (the --config form) → (key, value)."""
    name, eq, value = text.partition("=")
    if not eq:
        raise ConfigError(f"expected key=value, got {text!r}")
    return _known(name.strip(), text), value


def _known(name: str, source: str) -> str:
    if name not in KEYS:
        raise ConfigError(f"unknown topic configuration {name!r} in {source!r}; known: {', '.join(sorted(KEYS))}")
    return name


def resolver_from(properties: Mapping[str, str] = (), settings: list[str] = (),
                  topic_settings: list[str] = ()) -> ConfigResolver:
    """Build a resolver from a properties file's entries, `--config` and `--topic-config` arguments.

    In a properties file, broker names (`log.retention.hours`) are broker settings, topic names
    (`cleanup.policy`) apply to every topic, and `topic.<TOPIC>.<name>` overrides one topic."""
    broker, topics_default, per_topic = {}, {}, {}
    broker_names = {s for k in KEYS.values() for s in k.broker}
    for name, value in dict(properties).items():
        if name.startswith("topic."):
            topic, config_name = _split_topic_key(name[len("topic."):])
            per_topic.setdefault(topic, {})[config_name] = value
        elif name in KEYS:
            topics_default[name] = value
        elif name in broker_names:
            broker[name] = value
    for text in settings:
        name, value = parse_setting(text)
        topics_default[name] = value
    for text in topic_settings:
        topic, name, value = parse_topic_setting(text)
        per_topic.setdefault(topic, {})[name] = value
    return ConfigResolver(broker, topics_default, per_topic)


def topic_properties(topic: str, properties: Mapping[str, str], file: str | None = None) -> dict[str, str]:
    """One topic's own file (`<TOPIC>.properties`: topic config names, no prefix) as the
    `topic.<TOPIC>.<name>` entries of a properties file."""
    unknown = sorted(set(properties) - set(KEYS))
    if unknown:
        raise ConfigError(f"unknown topic configuration {', '.join(unknown)} for topic {topic}: a topic's file holds "
                          f"topic config names (retention.ms, cleanup.policy, ...)", file=file)
    return {f"topic.{topic}.{name}": value for name, value in properties.items()}


def _split_topic_key(rest: str) -> tuple[str, str]:
    for name in sorted(KEYS, key=len, reverse=True):
        if rest.endswith("." + name) and len(rest) > len(name) + 1:
            return rest[: -len(name) - 1], name
    raise ConfigError(f"topic.{rest}: expected topic.<TOPIC>.<topic config name>")
