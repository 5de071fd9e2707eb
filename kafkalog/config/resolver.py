"""A topic's effective configuration built as Kafka builds it: Kafka's defaults, overridden by the
broker's `log.*` settings, overridden by settings for every topic, overridden by a topic's own.
Values are validated with Kafka's rules, and the error says the rule, as Kafka's ConfigException does.

Also here: the command line's forms (`--config key=value`, `--topic-config TOPIC:key=value`) and
`resolver_from`, which places a file's and the command line's settings in those layers."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from .definitions import (
    BROKER_NAMES,
    BROKER_RULES,
    KEYS,
    REMOVED_TOPIC_NAMES,
    TOPIC_NAMES,
    USED_BROKER_NAMES,
    ConfigKey,
    UnknownTopicConfig,
    attr_name,
    check_topic_name,
    note_ignored,
    parse_value,
    remote_log_prefixes,
    unknown_name,
    used_name,
    warn_unknown,
)
from .names import KAFKA_REMOVED_IN_4_0
from .topic_config import TopicConfig


class ConfigResolver:
    """Layers configuration as Kafka does: defaults < broker `log.*` < every topic < one topic.

    `broker` holds broker names (server.properties'), `topics_default` and `per_topic` topic names.
    Every name is checked against Kafka's (unknown ones are refused); names kafkalog has no use for
    are kept and ignored."""

    def __init__(
        self,
        broker: Mapping[str, str] | None = None,
        topics_default: Mapping[str, str] | None = None,
        per_topic: Mapping[str, Mapping[str, str]] | None = None,
        *,
        typed_topics: Iterable[str] = (),
    ):
        self.broker = dict(broker or {})
        # the topics of per_topic a user typed (--topic-config), not read from a file: a log dir
        # without one of them is an error, where a file may well name the topics of other log dirs
        self.typed_topics = frozenset(typed_topics)
        self.topics_default = dict(topics_default or {})
        self.per_topic = {t: dict(v) for t, v in (per_topic or {}).items()}
        self._check_names()
        for topic in [None, *self.per_topic]:  # fail early, naming the bad setting
            self.for_topic(topic)

    def _check_names(self) -> None:
        prefixes = remote_log_prefixes(self.broker)
        for name, _value in self.broker.items():
            if name not in BROKER_NAMES and not name.startswith(prefixes) and name not in KAFKA_REMOVED_IN_4_0:
                raise unknown_name(name, "broker", BROKER_NAMES | TOPIC_NAMES)
            if name not in USED_BROKER_NAMES:
                note_ignored(name, "broker")
        for where, layer in [
            ("every topic", self.topics_default),
            *((f"topic {t}", layer) for t, layer in self.per_topic.items()),
        ]:
            for name in layer:
                check_topic_name(name, where)
                if name not in KEYS:
                    note_ignored(name, where)

    def for_topic(self, topic: str | None) -> TopicConfig:
        values: dict[str, Any] = {}
        for name, key in KEYS.items():
            value = self._broker_value(key)
            for layer, source in (
                (self.topics_default, "--config"),
                (self.per_topic.get(topic, {}) if topic is not None else {}, f"topic {topic}"),
            ):
                if name in layer:
                    value = parse_value(key, layer[name], source)
            if value is not None:
                values[attr_name(name)] = tuple(value) if key.type == "list" else value
        if values.get("internal_segment_bytes") is not None:  # LogConfig.segmentSize()
            values["segment_bytes"] = values["internal_segment_bytes"]
        config = TopicConfig(**values)
        if config.min_compaction_lag_ms > config.max_compaction_lag_ms:
            raise ConfigError(
                f"conflict topic config setting min.compaction.lag.ms "
                f"({config.min_compaction_lag_ms}) > max.compaction.lag.ms "
                f"({config.max_compaction_lag_ms})" + (f" for topic {topic}" if topic else "")
            )
        if (
            config.retention_commitoffset_enable
            and config.retention_ms >= 0
            and config.retention_commitoffset_ms > config.retention_ms
        ):
            raise ConfigError(
                f"retention.commitoffset.ms ({config.retention_commitoffset_ms}) must not exceed "
                f"retention.ms ({config.retention_ms})" + (f" for topic {topic}" if topic else "")
            )
        return config

    def values_of(self, name: str) -> Mapping[str, object]:
        """One setting for any topic, as a mapping topic -> value (resolved on lookup)."""
        return _TopicValues(self, attr_name(used_name(name, name)))

    def _broker_value(self, key: ConfigKey):
        scales = key.broker_scale or (1,) * len(key.broker)
        for synonym, scale in zip(key.broker, scales):
            if synonym in self.broker:
                own_type, own_check = BROKER_RULES.get(synonym, (None, None))
                unchecked = dataclasses.replace(key, name=synonym, check=own_check or (lambda v: None))
                value = parse_value(unchecked, self.broker[synonym], synonym, type=own_type)
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


# -- the command line's forms -----------------------------------------------------------------------------


def parse_topic_setting(text: str) -> tuple[str, str, str]:
    """`TOPIC:key=value` (the --topic-config form) → (topic, key, value); key a topic name. A topic
    name has no ':' (Kafka's rule), a value may have some (`leader.replication.throttled.replicas`)."""
    topic, sep, setting = text.partition(":")
    name, eq, value = setting.partition("=")
    if not sep or not topic or not eq:
        raise ConfigError(f"expected TOPIC:key=value, got {text!r}")
    return topic, check_topic_name(name.strip(), f"in {text!r}"), value


def parse_setting(text: str) -> tuple[str, str]:
    """`key=value` (the --config form) → (key, value); key a topic or a broker name."""
    name, eq, value = text.partition("=")
    if not eq:
        raise ConfigError(f"expected key=value, got {text!r}")
    name = name.strip()
    if (
        name not in TOPIC_NAMES
        and name not in BROKER_NAMES
        and name not in KAFKA_REMOVED_IN_4_0
        and not name.startswith(remote_log_prefixes())
    ):
        raise unknown_name(name, f"in {text!r}", TOPIC_NAMES | BROKER_NAMES)
    return name, value


def resolver_from(
    properties: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    settings: Sequence[str] = (),
    topic_settings: Sequence[str] = (),
    *,
    file: str | None = None,
) -> ConfigResolver:
    """Build a resolver from a configuration file's entries (`parse_config_file`), `--config` and
    `--topic-config` arguments.

    In a file, broker names (`log.retention.hours`, `listeners`, ...) are broker settings, topic names
    (`cleanup.policy`) apply to every topic, and `topic.<TOPIC>.<name>` overrides one topic. With
    `--config`, a topic name applies to every topic and a broker name is a broker setting (over the
    file's). A name Kafka does not define is refused in `settings` and `topic_settings` (typed by a
    user), and a warning in `properties` (a file, named by `file`: Kafka's broker warns and starts).
    The topics `topic_settings` name are the resolver's `typed_topics`."""
    broker: dict[str, str] = {}
    topics_default: dict[str, str] = {}
    per_topic: dict[str, dict[str, str]] = {}
    properties = dict(properties)
    prefixes = remote_log_prefixes(properties)

    def place(name: str, value: str, where: str, typed: bool) -> None:
        if name.startswith("topic."):
            try:
                topic, config_name = _split_topic_key(name[len("topic.") :])
            except ConfigError as err:
                if typed:
                    raise
                warn_unknown(err)
                return
            per_topic.setdefault(topic, {})[config_name] = value
        elif name in TOPIC_NAMES:
            topics_default[name] = value
        elif name in BROKER_NAMES or name in KAFKA_REMOVED_IN_4_0 or name.startswith(prefixes):
            broker[name] = value
        elif typed:
            raise unknown_name(name, where, TOPIC_NAMES | BROKER_NAMES)
        else:
            warn_unknown(unknown_name(name, where, TOPIC_NAMES | BROKER_NAMES))

    for name, value in properties.items():
        place(name, value, f"in {file or 'the configuration file'}", typed=False)
    for text in settings:
        name, value = parse_setting(text)
        place(name, value, f"in {text!r}", typed=True)
    typed_topics = set()
    for text in topic_settings:
        topic, name, value = parse_topic_setting(text)
        per_topic.setdefault(topic, {})[name] = value
        typed_topics.add(topic)
    return ConfigResolver(broker, topics_default, per_topic, typed_topics=typed_topics)


def topic_properties(topic: str, properties: Mapping[str, str], file: str | None = None) -> dict[str, str]:
    """One topic's own file (`<TOPIC>.properties`: topic config names, no prefix) as the
    `topic.<TOPIC>.<name>` entries of a properties file. A name Kafka does not define is a warning
    (a file, as in Kafka), a broker name an error (it is known, and would set nothing here)."""
    out = {}
    for name, value in properties.items():
        try:
            check_topic_name(name, f"for topic {topic}")
        except UnknownTopicConfig as err:
            warn_unknown(err.located(file=file))
            continue
        except ConfigError as err:
            raise ConfigError(
                f"unknown topic configuration {name} for topic {topic}: a topic's file holds topic "
                f"config names; {err.message}",
                file=file,
            ) from None
        out[f"topic.{topic}.{name}"] = value
    return out


def _split_topic_key(rest: str) -> tuple[str, str]:
    for name in sorted(TOPIC_NAMES | REMOVED_TOPIC_NAMES, key=len, reverse=True):
        if rest.endswith("." + name) and len(rest) > len(name) + 1:
            return rest[: -len(name) - 1], name
    # the closest `<TOPIC>.<topic name>` reading, for the hint
    best = max(
        (
            (difflib.SequenceMatcher(None, rest[i + 1 :], n).ratio(), rest[:i], n)
            for i, c in enumerate(rest)
            if c == "." and i
            for n in TOPIC_NAMES
        ),
        default=(0, "", ""),
    )
    hint = f"; did you mean topic.{best[1]}.{best[2]}?" if best[0] >= 0.6 else ""
    raise ConfigError(
        f"topic.{rest}: expected topic.<TOPIC>.<topic config name>, and Apache Kafka 4.x defines "
        f"no topic configuration this ends with{hint}"
    )


def resolver_of(config: ConfigResolver | Mapping[str, str] | None) -> ConfigResolver:
    """The resolver an API call's `config=` names: a resolver as it is, a mapping of Kafka config names
    to values as `--config name=value` settings, None Kafka's defaults."""
    if config is None:
        return ConfigResolver()
    if isinstance(config, ConfigResolver):
        return config
    return resolver_from(settings=[f"{name}={value}" for name, value in dict(config).items()])
