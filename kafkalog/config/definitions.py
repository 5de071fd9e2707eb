"""The topic configurations kafkalog uses, each defined once as Kafka's `LogConfig` defines its own on a
`ConfigDef`: name, type, default, validator, documentation, and the broker synonyms that set it for
every topic (`ServerTopicConfigSynonyms`). `TopicConfig` takes its defaults from here, the resolver its
types, rules and synonyms, and `kafka-configs` its sources.

Also here: what is done with a name, known or not (refused where typed, a warning in a file, the
closest known name suggested)."""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ..errors import ConfigError, KafkaLogError
from .names import (
    KAFKA_BROKER_CONFIG_NAMES,
    KAFKA_CONFIG_PREFIXES,
    KAFKA_PLUGIN_CONFIG_NAMES,
    KAFKA_REMOVED_IN_4_0,
    KAFKA_TOPIC_CONFIG_NAMES,
    REMOTE_LOG_PREFIX_CONFIGS,
)

log = logging.getLogger("kafkalog.config")

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
MIB = 1024 * 1024

Validator = Callable[[object], "str | None"]  # the broken rule, or None


def no_rule(value: object) -> str | None:
    return None


# ConfigDef's validators, with the messages of Kafka's ConfigException
def at_least(low):  # ConfigDef.Range.atLeast
    return lambda v: None if v >= low else f"Value must be at least {low}"


def between(low, high):  # ConfigDef.Range.between
    return lambda v: (
        None
        if low <= v <= high
        else f"Value must be no more than {high}"
        if v > high
        else f"Value must be at least {low}"
    )


def one_of(*allowed):  # ConfigDef.ValidString.in, ValidList.in
    return lambda v: (
        None
        if all(x in allowed for x in (v if isinstance(v, list | tuple) else [v]))
        else f"String must be one of: {', '.join(allowed)}"
    )


@dataclass(frozen=True)
class ConfigKey:
    """One definition, as ConfigDef.ConfigKey: `type` is ConfigDef.Type's ("long", "int", "double",
    "list", "string", "boolean"); `broker` the broker synonyms, highest priority first, and
    `broker_scale` the multiplier of each (minutes and hours to milliseconds)."""

    name: str
    type: str
    default: object
    check: Validator = no_rule
    broker: tuple[str, ...] = ()
    broker_scale: tuple[int, ...] = ()
    doc: str = ""


class ConfigDef(dict[str, ConfigKey]):
    """The definitions by name, built as Kafka's `new ConfigDef().define(...).define(...)`."""

    def define(
        self,
        name: str,
        type: str,
        default: object,
        check: Validator = no_rule,
        doc: str = "",
        *,
        broker: tuple[str, ...] = (),
        broker_scale: tuple[int, ...] = (),
    ) -> ConfigDef:
        if name in self:
            raise ValueError(f"configuration {name} is defined twice")
        self[name] = ConfigKey(name, type, default, check, broker, broker_scale, doc)
        return self


# Kafka's own (LogConfig.CONFIG and its defaults), then kafkalog's additions (KIP-68, KIP-280).
KEYS = (
    ConfigDef()
    .define(
        "cleanup.policy",
        "list",
        ("delete",),
        one_of("compact", "delete"),
        "delete: retention removes old segments; compact: the cleaner keeps the latest record of each key",
        broker=("log.cleanup.policy",),
    )
    .define(
        "retention.ms",
        "long",
        604_800_000,
        at_least(-1),
        "how long a segment is kept after its largest timestamp; -1: no time limit",
        broker=("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
        broker_scale=(1, 60_000, 3_600_000),
    )
    .define(
        "retention.bytes",
        "long",
        -1,
        doc="the most bytes a partition keeps before retention deletes its oldest segments; -1: no limit",
        broker=("log.retention.bytes",),
    )
    # Kafka 4.0's LogConfig: segment.bytes at least 14 (LegacyRecord.RECORD_OVERHEAD_V0); 4.1+ raised
    # it to 1 MiB and added internal.segment.bytes (below) for small segments. The lower 4.0 bound is
    # kept, so that a 4.0 cluster's topic settings are read as they are; log.segment.bytes is 1 MiB
    # at least in every 4.x (BROKER_RULES).
    .define(
        "segment.bytes",
        "int",
        1_073_741_824,
        at_least(14),
        "the size at which a segment is rolled, and which the cleaner's output segments stay under",
        broker=("log.segment.bytes",),
    )
    # Kafka 4.1+ (LogConfig.INTERNAL_SEGMENT_BYTES_CONFIG, no validator): when set, the segment size
    # instead of segment.bytes (LogConfig.segmentSize()); TopicConfig.segment_bytes is that size.
    .define("internal.segment.bytes", "int", None, doc="when set, the segment size instead of segment.bytes")
    .define(
        "segment.ms",
        "long",
        604_800_000,
        at_least(1),
        "the time after which a segment is rolled even if not full",
        broker=("log.roll.ms", "log.roll.hours"),
        broker_scale=(1, 3_600_000),
    )
    .define(
        "segment.jitter.ms",
        "long",
        0,
        at_least(0),
        "the most random jitter taken off segment.ms",
        broker=("log.roll.jitter.ms", "log.roll.jitter.hours"),
        broker_scale=(1, 3_600_000),
    )
    .define(
        "segment.index.bytes",
        "int",
        10_485_760,
        at_least(4),
        "the size an offset or time index is preallocated to",
        broker=("log.index.size.max.bytes",),
    )
    .define(
        "index.interval.bytes",
        "int",
        4096,
        at_least(0),
        "the log bytes between two offset index entries",
        broker=("log.index.interval.bytes",),
    )
    .define(
        "min.cleanable.dirty.ratio",
        "double",
        0.5,
        between(0, 1),
        "the dirty share of a log at which the cleaner chooses it",
        broker=("log.cleaner.min.cleanable.ratio",),
    )
    .define(
        "min.compaction.lag.ms",
        "long",
        0,
        at_least(0),
        "the least time a record stays uncompacted",
        broker=("log.cleaner.min.compaction.lag.ms",),
    )
    .define(
        "max.compaction.lag.ms",
        "long",
        LONG_MAX,
        at_least(1),
        "the most time a record stays ineligible for compaction",
        broker=("log.cleaner.max.compaction.lag.ms",),
    )
    .define(
        "delete.retention.ms",
        "long",
        86_400_000,
        at_least(0),
        "how long the cleaner keeps tombstones and transaction markers once cleaned",
        broker=("log.cleaner.delete.retention.ms",),
    )
    .define(
        "file.delete.delay.ms",
        "long",
        60_000,
        at_least(0),
        "how long a deleted segment's files wait (as .deleted) before they are removed",
        broker=("log.segment.delete.delay.ms",),
    )
    .define(
        "max.message.bytes",
        "int",
        1_048_588,
        at_least(0),
        "the largest record batch the broker accepts",
        broker=("message.max.bytes",),
    )
    .define(
        "message.timestamp.type",
        "string",
        "CreateTime",
        one_of("CreateTime", "LogAppendTime"),
        "whether a record's timestamp is the producer's or the broker's append time",
        broker=("log.message.timestamp.type",),
    )
    .define(
        "compression.type",
        "string",
        "producer",
        one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        "the codec of written batches; producer: as each batch came",
        broker=("compression.type",),
    )
    .define(
        "preallocate",
        "boolean",
        False,
        doc="whether a new segment's file is preallocated",
        broker=("log.preallocate",),
    )
    # A broker setting in Kafka (TransactionLogConfig, an int), per topic in kafkalog.
    .define(
        "producer.id.expiration.ms",
        "int",
        86_400_000,
        at_least(1),
        "how long a producer id without writes is kept in the producer state",
        broker=("producer.id.expiration.ms",),
    )
    # KIP-68 (proposal only): consumed retention, with forced retention.ms as the backstop.
    .define(
        "retention.commitoffset.enable",
        "boolean",
        False,
        doc="KIP-68: retention also deletes segments every consumer group has committed past",
        broker=("log.retention.commitoffset.enable",),
    )
    .define(
        "retention.commitoffset.ms",
        "long",
        -1,
        at_least(-1),
        "KIP-68: how long a consumed segment is kept; -1: deleted once consumed",
        broker=("log.retention.commitoffset.ms",),
    )
    # KIP-405 tiered storage: local retention of a topic with remote.storage.enable; -2 means "as
    # retention.ms / retention.bytes" (LogConfig.localRetentionMs(), localRetentionBytes()).
    .define("remote.storage.enable", "boolean", False, doc="tiered storage: segments are copied to remote storage")
    .define("remote.log.copy.disable", "boolean", False, doc="tiered storage: no more segments are copied")
    .define(
        "local.retention.ms",
        "long",
        -2,
        at_least(-2),
        "tiered storage: how long a segment stays local; -2: retention.ms",
        broker=("log.local.retention.ms",),
    )
    .define(
        "local.retention.bytes",
        "long",
        -2,
        at_least(-2),
        "tiered storage: the most local bytes of a partition; -2: retention.bytes",
        broker=("log.local.retention.bytes",),
    )
    # KIP-280 (accepted, never shipped): which record of a key compaction keeps (rules/compaction_strategy.py)
    .define(
        "compaction.strategy",
        "string",
        "offset",
        one_of("offset", "timestamp", "header"),
        "KIP-280: the record of a key compaction keeps: the last offset, the largest timestamp or header",
        broker=("log.cleaner.compaction.strategy",),
    )
    .define(
        "compaction.strategy.header",
        "string",
        "",
        doc="KIP-280: the header whose value orders a key's records under compaction.strategy=header",
        broker=("log.cleaner.compaction.strategy.header",),
    )
)
# The broker synonyms' own definitions where they differ from their topic name's (KafkaConfig's types
# and validators: hours and minutes are ints; log.segment.bytes is at least 1 MiB in every 4.x).
BROKER_RULES: dict[str, tuple[str, Validator | None]] = {
    "log.segment.bytes": ("int", at_least(MIB)),
    "log.roll.hours": ("int", at_least(1)),
    "log.roll.jitter.hours": ("int", at_least(0)),
    "log.retention.hours": ("int", None),
    "log.retention.minutes": ("int", None),
}

# Every name kafkalog accepts, by where it may stand.
TOPIC_NAMES = KAFKA_TOPIC_CONFIG_NAMES | set(KEYS)
# the topic names among those removed in 4.0 (TopicConfig's), accepted and ignored where topic names stand
REMOVED_TOPIC_NAMES = frozenset(
    {"message.downconversion.enable", "message.format.version", "message.timestamp.difference.max.ms"}
)
USED_BROKER_NAMES = frozenset(s for k in KEYS.values() for s in k.broker)
BROKER_NAMES = KAFKA_BROKER_CONFIG_NAMES | KAFKA_PLUGIN_CONFIG_NAMES | USED_BROKER_NAMES
# broker synonym -> its topic name, for the hint when a broker name stands where a topic name must
_TOPIC_OF_SYNONYM = {s: k.name for k in KEYS.values() for s in k.broker if s != k.name}


def attr_name(name: str) -> str:
    """A configuration's attribute of TopicConfig: Kafka's name with '_' for '.'."""
    return name.replace(".", "_")


def parse_value(key: ConfigKey, raw: str, source: str, *, type: str | None = None):
    """A value from text, as Kafka's ConfigDef parses it, validated."""
    text = raw.strip()
    type = type or key.type
    value: int | float | bool | list[str] | str
    try:
        if type in ("long", "int"):
            value = int(text)
            limit = LONG_MAX if type == "long" else INT_MAX
            if not -limit - 1 <= value <= limit:
                raise ValueError
        elif type == "double":
            value = float(text)
        elif type == "boolean":
            if text.lower() not in ("true", "false"):
                raise ValueError
            value = text.lower() == "true"
        elif type == "list":
            value = [part.strip().lower() for part in text.split(",") if part.strip()]
        else:
            value = text
    except ValueError:
        raise ConfigError(
            f"Invalid value {raw} for configuration {key.name}: expected a {type} (from {source})"
        ) from None
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


# -- names: known, unknown, ignored ----------------------------------------------------------------------


def remote_log_prefixes(broker: Mapping[str, str] = {}) -> tuple[str, ...]:
    """The prefixes under which Kafka reads configurations it does not name: KAFKA_CONFIG_PREFIXES and
    the remote storage and remote log metadata managers' (as `broker` sets them, else the defaults)."""
    return KAFKA_CONFIG_PREFIXES + tuple(
        broker.get(name, default) or default for name, default in REMOTE_LOG_PREFIX_CONFIGS.items()
    )


def did_you_mean(name: str, candidates: Iterable[str], cutoff: float = 0.6) -> str:
    """`; did you mean 'x'?` with the known name closest to `name` (a configuration's, a topic's, an
    option's; letter case aside), or "" when none is at least `cutoff` alike (difflib's ratio)."""
    by_lower = {candidate.lower(): candidate for candidate in candidates}
    close = difflib.get_close_matches(name.lower(), sorted(by_lower), n=1, cutoff=cutoff)
    return f"; did you mean {by_lower[close[0]]!r}?" if close else ""


class UnknownTopicConfig(ConfigError):
    """A name that stands where a topic configuration must and that Kafka does not define."""


def unknown_name(name: str, where: str, candidates: Iterable[str], file: str | None = None) -> ConfigError:
    """The error for a name Kafka does not define, with the closest known name."""
    return ConfigError(
        f"unknown configuration {name!r} ({where}): Apache Kafka 4.x defines no such topic or "
        f"broker configuration{did_you_mean(name, candidates)}",
        file=file,
    )


def warn_unknown(err: KafkaLogError) -> None:
    """A name a configuration file holds and Kafka does not define: ignored with a warning, as
    Kafka's broker logs "The configuration 'x' was supplied but isn't a known config" and starts."""
    log.warning("%s (ignored: in a file an unknown name is a warning, as in Kafka; typed with --config, an error)", err)


def check_topic_name(name: str, where: str, file: str | None = None) -> str:
    """`name` if it is a topic configuration name, else the error (a broker name gets its topic name)."""
    if name in TOPIC_NAMES or name in REMOVED_TOPIC_NAMES:
        return name
    if name in _TOPIC_OF_SYNONYM:
        raise ConfigError(
            f"{name!r} ({where}) is a broker configuration; the topic configuration is {_TOPIC_OF_SYNONYM[name]!r}",
            file=file,
        )
    if name in BROKER_NAMES or name in KAFKA_REMOVED_IN_4_0:
        raise ConfigError(f"{name!r} ({where}) is a broker configuration, not a topic configuration", file=file)
    raise UnknownTopicConfig(
        f"unknown topic configuration {name!r} ({where}): Apache Kafka 4.x defines no such topic "
        f"configuration{did_you_mean(name, TOPIC_NAMES)}",
        file=file,
    )


def used_name(name: str, source: str) -> str:
    """`name` if kafkalog uses it (a name of KEYS), else the error."""
    if name not in KEYS:
        check_topic_name(name, f"in {source!r}")
        raise ConfigError(
            f"topic configuration {name!r} (in {source!r}) has no effect in kafkalog; it uses: "
            f"{', '.join(sorted(KEYS))}"
        )
    return name


def note_ignored(name: str, where: str) -> None:
    if name in KAFKA_REMOVED_IN_4_0:
        log.info("configuration %s (%s) was removed in Kafka 4.0; ignored", name, where)
    else:
        log.debug("configuration %s (%s) does not change what kafkalog does; ignored", name, where)
