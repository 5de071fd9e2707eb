"""Topic configuration: Kafka's defaults, broker synonyms, layering and validation rules."""
from __future__ import annotations

import pytest

from kafkalog.config import ConfigResolver, TopicConfig, resolver_from
from kafkalog.errors import ConfigError


def test_kafka_defaults():
    config = ConfigResolver().for_topic("t")
    assert config == TopicConfig()
    assert (config.cleanup_policy, config.retention_ms, config.segment_bytes, config.delete_retention_ms,
            config.min_cleanable_dirty_ratio, config.max_compaction_lag_ms) == (
        ("delete",), 604_800_000, 1_073_741_824, 86_400_000, 0.5, 2**63 - 1)


def test_broker_synonyms_with_units_and_priority():
    assert ConfigResolver({"log.retention.hours": "1"}).for_topic("t").retention_ms == 3_600_000
    assert ConfigResolver({"log.retention.minutes": "2", "log.retention.hours": "1"}).for_topic("t").retention_ms \
        == 120_000
    assert ConfigResolver({"log.retention.ms": "5", "log.retention.minutes": "2"}).for_topic("t").retention_ms == 5
    assert ConfigResolver({"log.retention.hours": "-5"}).for_topic("t").retention_ms == -1
    assert ConfigResolver({"log.cleaner.delete.retention.ms": "10"}).for_topic("t").delete_retention_ms == 10


def test_layers_topic_over_all_topics_over_broker():
    resolver = resolver_from({"log.cleanup.policy": "compact", "topic.orders.eu.retention.ms": "7"},
                             settings=["retention.ms=5"], topic_settings=["pay-ments:cleanup.policy=compact,Delete"])
    assert resolver.for_topic("x").cleanup_policy == ("compact",) and resolver.for_topic("x").retention_ms == 5
    assert resolver.for_topic("orders.eu").retention_ms == 7
    payments = resolver.for_topic("pay-ments")
    assert payments.cleanup_policy == ("compact", "delete") and payments.compact and payments.delete


@pytest.mark.parametrize("setting, rule", [
    ("retention.ms=-2", "Value must be at least -1"),
    ("segment.bytes=13", "Value must be at least 14"),
    ("min.cleanable.dirty.ratio=1.5", "Value must be no more than 1"),
    ("max.compaction.lag.ms=0", "Value must be at least 1"),
    ("cleanup.policy=compact,purge", "String must be one of: compact, delete"),
    ("message.timestamp.type=Now", "String must be one of"),
    ("delete.retention.ms=soon", "expected a long"),
    ("segment.bytes=4294967296", "expected a int"),
])
def test_invalid_values_name_kafkas_rule(setting, rule):
    with pytest.raises(ConfigError, match=rule) as err:
        resolver_from(settings=[setting])
    assert setting.split("=")[0] in str(err.value)


def test_min_lag_above_max_lag_conflicts():
    with pytest.raises(ConfigError, match="conflict topic config setting"):
        resolver_from(topic_settings=["t:min.compaction.lag.ms=10", "t:max.compaction.lag.ms=5"])


def test_consumed_retention_must_not_exceed_retention():
    with pytest.raises(ConfigError, match="must not exceed retention.ms"):
        resolver_from(settings=["retention.commitoffset.enable=true", "retention.commitoffset.ms=10",
                                "retention.ms=5"])


def test_unknown_names_and_bad_forms():
    with pytest.raises(ConfigError, match="unknown topic configuration"):
        resolver_from(settings=["retention.minutes=5"])
    with pytest.raises(ConfigError, match="TOPIC:key=value"):
        resolver_from(topic_settings=["retention.ms=5"])


def test_shipped_properties_file_resolves():
    from pathlib import Path

    from kafkalog.storage.logdir import parse_properties
    text = (Path(__file__).resolve().parents[1] / "conf" / "kafkalog.properties").read_text()
    resolver = resolver_from(parse_properties(text))
    assert resolver.for_topic("orders").retention_ms == 168 * 3_600_000
    offsets = resolver.for_topic("__consumer_offsets")
    assert offsets.cleanup_policy == ("compact",) and offsets.segment_bytes == 104_857_600
