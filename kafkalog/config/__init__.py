"""Kafka's topic configuration: names, definitions (defaults, types, rules, broker synonyms), a topic's
effective configuration and the files a cluster's configuration comes in.

- `names`: every topic and broker name Apache Kafka 4.x defines, and those 4.0 removed;
- `definitions`: the configurations kafkalog uses, one `ConfigKey` each on a `ConfigDef` (`KEYS`), as
  Kafka's LogConfig; and what is done with a name, known or not;
- `topic_config`: `TopicConfig`, one topic's effective values (defaults from `KEYS`);
- `resolver`: `ConfigResolver` (defaults < broker `log.*` < every topic < one topic), the command
  line's forms and `resolver_from`;
- `properties`: a `server.properties` or the output of `kafka-configs.sh --describe [--all]`.

A name Kafka does not define is refused where it is typed (`--config`, `--topic-config`), with the
closest known name suggested; in a configuration file it is a warning and the name is ignored, as
Kafka's broker logs "The configuration 'x' was supplied but isn't a known config" and starts.
"""

from __future__ import annotations

from .definitions import (
    BROKER_NAMES,
    BROKER_RULES,
    INT_MAX,
    KEYS,
    LONG_MAX,
    MIB,
    REMOVED_TOPIC_NAMES,
    TOPIC_NAMES,
    ConfigDef,
    ConfigKey,
    UnknownTopicConfig,
    at_least,
    between,
    did_you_mean,
    format_value,
    one_of,
    parse_value,
    remote_log_prefixes,
    unknown_name,
    warn_unknown,
)
from .names import (
    KAFKA_BROKER_CONFIG_NAMES,
    KAFKA_BROKER_CONFIG_NAMES_BY_CLASS,
    KAFKA_CONFIG_PREFIXES,
    KAFKA_PLUGIN_CONFIG_NAMES,
    KAFKA_REMOVED_IN_4_0,
    KAFKA_TOPIC_CONFIG_NAMES,
    REMOTE_LOG_PREFIX_CONFIGS,
)
from .properties import load_properties, parse_config_file, parse_java_properties
from .resolver import (
    ConfigResolver,
    parse_setting,
    parse_topic_setting,
    resolver_from,
    resolver_of,
    topic_properties,
)
from .topic_config import TopicConfig

__all__ = [
    "BROKER_NAMES",
    "BROKER_RULES",
    "INT_MAX",
    "KAFKA_BROKER_CONFIG_NAMES",
    "KAFKA_BROKER_CONFIG_NAMES_BY_CLASS",
    "KAFKA_CONFIG_PREFIXES",
    "KAFKA_PLUGIN_CONFIG_NAMES",
    "KAFKA_REMOVED_IN_4_0",
    "KAFKA_TOPIC_CONFIG_NAMES",
    "KEYS",
    "LONG_MAX",
    "MIB",
    "REMOTE_LOG_PREFIX_CONFIGS",
    "REMOVED_TOPIC_NAMES",
    "TOPIC_NAMES",
    "ConfigDef",
    "ConfigKey",
    "ConfigResolver",
    "TopicConfig",
    "UnknownTopicConfig",
    "at_least",
    "between",
    "did_you_mean",
    "format_value",
    "load_properties",
    "one_of",
    "parse_config_file",
    "parse_java_properties",
    "parse_setting",
    "parse_topic_setting",
    "parse_value",
    "remote_log_prefixes",
    "resolver_from",
    "resolver_of",
    "topic_properties",
    "unknown_name",
    "warn_unknown",
]
