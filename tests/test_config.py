"""Topic configuration: Kafka's defaults, broker synonyms, layering and validation rules."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from kafkalog.config import (
    BROKER_NAMES,
    KAFKA_BROKER_CONFIG_NAMES,
    KAFKA_REMOVED_IN_4_0,
    KAFKA_TOPIC_CONFIG_NAMES,
    KEYS,
    ConfigResolver,
    TopicConfig,
    parse_config_file,
    parse_java_properties,
    resolver_from,
    topic_properties,
)
from kafkalog.errors import ConfigError

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "config"


def test_kafka_defaults():
    config = ConfigResolver().for_topic("t")
    assert config == TopicConfig()
    assert (
        config.cleanup_policy,
        config.retention_ms,
        config.segment_bytes,
        config.delete_retention_ms,
        config.min_cleanable_dirty_ratio,
        config.max_compaction_lag_ms,
    ) == (("delete",), 604_800_000, 1_073_741_824, 86_400_000, 0.5, 2**63 - 1)


def test_broker_synonyms_with_units_and_priority():
    assert ConfigResolver({"log.retention.hours": "1"}).for_topic("t").retention_ms == 3_600_000
    assert (
        ConfigResolver({"log.retention.minutes": "2", "log.retention.hours": "1"}).for_topic("t").retention_ms
        == 120_000
    )
    assert ConfigResolver({"log.retention.ms": "5", "log.retention.minutes": "2"}).for_topic("t").retention_ms == 5
    assert ConfigResolver({"log.retention.hours": "-5"}).for_topic("t").retention_ms == -1
    assert ConfigResolver({"log.cleaner.delete.retention.ms": "10"}).for_topic("t").delete_retention_ms == 10


def test_layers_topic_over_all_topics_over_broker():
    resolver = resolver_from(
        {"log.cleanup.policy": "compact", "topic.orders.eu.retention.ms": "7"},
        settings=["retention.ms=5"],
        topic_settings=["pay-ments:cleanup.policy=compact,Delete"],
    )
    assert resolver.for_topic("x").cleanup_policy == ("compact",) and resolver.for_topic("x").retention_ms == 5
    assert resolver.for_topic("orders.eu").retention_ms == 7
    payments = resolver.for_topic("pay-ments")
    assert payments.cleanup_policy == ("compact", "delete") and payments.compact and payments.delete


@pytest.mark.parametrize(
    "setting, rule",
    [
        ("retention.ms=-2", "Value must be at least -1"),
        ("segment.bytes=13", "Value must be at least 14"),
        ("min.cleanable.dirty.ratio=1.5", "Value must be no more than 1"),
        ("max.compaction.lag.ms=0", "Value must be at least 1"),
        ("cleanup.policy=compact,purge", "String must be one of: compact, delete"),
        ("message.timestamp.type=Now", "String must be one of"),
        ("delete.retention.ms=soon", "expected a long"),
        ("segment.bytes=4294967296", "expected a int"),
    ],
)
def test_invalid_values_name_kafkas_rule(setting, rule):
    with pytest.raises(ConfigError, match=rule) as err:
        resolver_from(settings=[setting])
    assert setting.split("=")[0] in str(err.value)


def test_min_lag_above_max_lag_conflicts():
    with pytest.raises(ConfigError, match="conflict topic config setting"):
        resolver_from(topic_settings=["t:min.compaction.lag.ms=10", "t:max.compaction.lag.ms=5"])


def test_consumed_retention_must_not_exceed_retention():
    with pytest.raises(ConfigError, match="must not exceed retention.ms"):
        resolver_from(settings=["retention.commitoffset.enable=true", "retention.commitoffset.ms=10", "retention.ms=5"])


def test_unknown_names_and_bad_forms():
    with pytest.raises(
        ConfigError, match="unknown configuration 'retention.minutes'.*did you mean 'log.retention.minutes'"
    ):
        resolver_from(settings=["retention.minutes=5"])
    with pytest.raises(ConfigError, match="TOPIC:key=value"):
        resolver_from(topic_settings=["retention.ms=5"])


def test_shipped_properties_file_resolves():
    from kafkalog.storage.logdir import parse_properties

    text = (Path(__file__).resolve().parents[1] / "conf" / "kafkalog.properties").read_text()
    resolver = resolver_from(parse_properties(text))
    assert resolver.for_topic("orders").retention_ms == 168 * 3_600_000
    offsets = resolver.for_topic("__consumer_offsets")
    assert offsets.cleanup_policy == ("compact",) and offsets.segment_bytes == 104_857_600


# -- Kafka 4.x's names ---------------------------------------------------------------------------------------


def test_kafkalogs_settings_are_kafkas_names():
    """The names kafkalog uses are Kafka's (but KIP-68's and KIP-280's), and so are their broker synonyms."""
    kip68 = {"retention.commitoffset.enable", "retention.commitoffset.ms", "compaction.strategy"}
    kip68 |= {"compaction.strategy.header"}
    assert set(KEYS) - kip68 - {"producer.id.expiration.ms"} <= KAFKA_TOPIC_CONFIG_NAMES
    synonyms = {s for k in KEYS.values() if k.name not in kip68 for s in k.broker}
    assert synonyms <= KAFKA_BROKER_CONFIG_NAMES
    assert not KAFKA_TOPIC_CONFIG_NAMES & KAFKA_REMOVED_IN_4_0 and not KAFKA_BROKER_CONFIG_NAMES & KAFKA_REMOVED_IN_4_0
    assert not any(name.startswith("topic.") for name in BROKER_NAMES)  # the topic.<TOPIC>. form is free
    assert len(KAFKA_TOPIC_CONFIG_NAMES) == 34 and len(KAFKA_BROKER_CONFIG_NAMES) == 369


def test_every_kafka_topic_name_is_accepted_where_topic_names_stand(caplog):
    caplog.set_level(logging.DEBUG, "kafkalog.config")
    values = {
        "cleanup.policy": "compact",
        "message.timestamp.type": "CreateTime",
        "compression.type": "zstd",
        "leader.replication.throttled.replicas": "0:1,1:2",
        "min.cleanable.dirty.ratio": "0.1",
        **{
            name: "true"
            for name in (
                "preallocate",
                "unclean.leader.election.enable",
                "remote.storage.enable",
                "remote.log.copy.disable",
                "remote.log.delete.on.disable",
            )
        },
    }
    for name in sorted(KAFKA_TOPIC_CONFIG_NAMES):
        value = values.get(name, "4096")
        resolver_from(settings=[f"{name}={value}"])
        resolver_from(topic_settings=[f"orders.eu:{name}={value}"])
        resolver_from({f"topic.orders.eu.{name}": value})
        resolver_from(topic_properties("orders", {name: value}))
    # the ones kafkalog has no use for are ignored silently (a debug line only)
    resolver = resolver_from(settings=["min.insync.replicas=2", "message.timestamp.before.max.ms=5"])
    assert resolver.for_topic("t") == TopicConfig()
    assert not [r for r in caplog.records if r.levelno >= logging.INFO]
    assert any("min.insync.replicas" in r.getMessage() for r in caplog.records)


def test_every_kafka_broker_name_is_accepted_in_a_file_and_with_config():
    used = {s for k in KEYS.values() for s in k.broker}  # the ones kafkalog reads are checked elsewhere
    resolver = resolver_from({name: "1" for name in KAFKA_BROKER_CONFIG_NAMES - used})
    assert resolver.for_topic("t") == TopicConfig()
    resolver = resolver_from(settings=["log.retention.hours=2", "listeners=PLAINTEXT://:9092", "node.id=3"])
    assert resolver.for_topic("t").retention_ms == 7_200_000


def test_removed_in_kafka_4_are_accepted_with_a_note(caplog):
    caplog.set_level(logging.INFO, "kafkalog.config")
    resolver = resolver_from(
        {"zookeeper.connect": "zk:2181", "log.message.format.version": "2.8", "topic.t.message.format.version": "2.8"}
    )
    assert resolver.for_topic("t") == TopicConfig()
    notes = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any("zookeeper.connect" in n and "removed in Kafka 4.0" in n for n in notes)
    assert any("message.format.version (topic t)" in n for n in notes)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: resolver_from(settings=["min.insync.replica=2"]), "did you mean 'min.insync.replicas'"),
        (lambda: resolver_from(settings=["confluent.support.metrics.enable=false"]), "defines no such topic or broker"),
        (lambda: resolver_from(topic_settings=["t:retention.msx=1"]), "did you mean 'retention.ms'"),
        (
            lambda: resolver_from(topic_settings=["t:log.retention.hours=1"]),
            "the topic configuration is 'retention.ms'",
        ),
        (lambda: resolver_from(topic_settings=["t:listeners=x"]), "is a broker configuration, not a topic"),
        (lambda: topic_properties("t", {"listeners": "1"}), "is a broker configuration, not a topic"),
        (lambda: ConfigResolver({"log.retention.hourz": "1"}), "did you mean 'log.retention.hours'"),
        (lambda: ConfigResolver(per_topic={"t": {"retention.hours": "1"}}), "unknown topic configuration"),
    ],
)
def test_a_name_kafka_does_not_define_is_refused_where_typed_with_the_closest(make, message):
    with pytest.raises(ConfigError, match=message):
        make()


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: resolver_from({"log.retention.hour": "1"}), "did you mean 'log.retention.hours'"),
        (lambda: resolver_from({"confluent.support.metrics.enable": "false"}), "defines no such topic or broker"),
        (lambda: resolver_from({"topic.orders.retention.msx": "1"}), "did you mean topic.orders.retention.ms"),
        (lambda: resolver_from(topic_properties("t", {"segment.byte": "1"})), "did you mean 'segment.bytes'"),
    ],
)
def test_a_name_kafka_does_not_define_in_a_file_is_a_warning_and_ignored(caplog, make, message):
    """As Kafka's broker: "The configuration 'x' was supplied but isn't a known config", and it starts."""
    caplog.set_level(logging.WARNING, "kafkalog.config")
    assert make().for_topic("orders") == TopicConfig()
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert re.search(message, warning) and "ignored" in warning


def test_prefixes_kafka_reads_are_accepted():
    resolver_from(
        {
            "listener.name.sasl_ssl.plain.sasl.jaas.config": "x",
            "rsm.config.dir": "/tiered",
            "rlmm.config.remote.log.metadata.topic.replication.factor": "3",
            "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
        }
    )
    resolver_from({"remote.log.storage.manager.impl.prefix": "tiered.", "tiered.bucket": "b"})
    with pytest.raises(ConfigError, match="unknown configuration 'tiered.bucket'"):
        resolver_from({"log.retention.hours": "1"}, ["tiered.bucket=b"])  # only under the prefix the file names


# -- Kafka 4.x's limits --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "properties, rule",
    [
        ({"log.segment.bytes": "1048575"}, "log.segment.bytes: Value must be at least 1048576"),
        ({"log.roll.hours": "0"}, "log.roll.hours: Value must be at least 1"),
        ({"log.retention.hours": "2147483648"}, "log.retention.hours: expected a int"),
        ({"producer.id.expiration.ms": "2147483648"}, "expected a int"),
    ],
)
def test_kafka_4_broker_limits(properties, rule):
    with pytest.raises(ConfigError, match=rule):
        resolver_from(properties)


def test_segment_size_as_kafka_4_reads_it():
    assert resolver_from({"log.segment.bytes": "1048576"}).for_topic("t").segment_bytes == 1_048_576
    assert resolver_from(settings=["segment.bytes=4096"]).for_topic("t").segment_bytes == 4096  # 4.0's bound
    internal = resolver_from(settings=["segment.bytes=1073741824", "internal.segment.bytes=2048"]).for_topic("t")
    assert internal.segment_bytes == 2048 and internal.internal_segment_bytes == 2048  # LogConfig.segmentSize()


# -- files exported from a cluster ---------------------------------------------------------------------------


def test_java_properties_as_kafka_loads_them():
    props = parse_java_properties(
        "# comment\n  ! another\nkey1 = value one\nkey2:v2\nkey3 v3\n"
        'jaas=Module required \\\n    user="a" \\\n    pass="b";\n'
        "path=C:\\\\dir\\ttab\\u0041\nempty=\nodd\\=key=x\ncontinued\\\\\n"
    )
    assert props == {
        "key1": "value one",
        "key2": "v2",
        "key3": "v3",
        "jaas": 'Module required user="a" pass="b";',
        "path": "C:\\dir\ttabA",
        "empty": "",
        "odd=key": "x",
        "continued\\": "",
    }


def test_server_properties_is_read_as_it_is(caplog):
    caplog.set_level(logging.INFO, "kafkalog.config")
    properties = parse_config_file((FIXTURES / "server.properties").read_text())
    assert properties["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"].endswith('password="broker-secret";')
    config = resolver_from(properties).for_topic("orders")
    assert (
        config.retention_ms,
        config.retention_bytes,
        config.segment_bytes,
        config.min_cleanable_dirty_ratio,
        config.delete_retention_ms,
    ) == (72 * 3_600_000, 10_737_418_240, 536_870_912, 0.3, 43_200_000)
    assert not [r for r in caplog.records if r.levelno >= logging.INFO]  # every name is Kafka 4.x's: no note


def test_a_confluent_platform_server_properties_is_read_with_a_warning_per_unknown_name(caplog):
    """Confluent Platform's brokers hold names Kafka does not define; Kafka's broker warns and starts."""
    caplog.set_level(logging.WARNING, "kafkalog.config")
    text = (FIXTURES / "server.properties").read_text() + (
        "confluent.support.metrics.enable=false\nconfluent.balancer.enable=true\n"
    )
    config = resolver_from(parse_config_file(text), file="server.properties").for_topic("orders")
    assert config.retention_ms == 72 * 3_600_000
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and all("in server.properties" in w and "ignored" in w for w in warnings)
    assert "'confluent.support.metrics.enable'" in warnings[0]


def test_describe_output_sets_the_described_topics_and_the_broker():
    """kafka-configs.sh --describe --all of two topics, broker 1 and the cluster default, from a real
    Kafka 4.3.1 broker (static log.retention.hours=72, log.segment.bytes=512 MiB and
    log.cleaner.delete.retention.ms=1 h; dynamic default log.cleaner.min.cleanable.ratio=0.25; dynamic
    log.retention.bytes=1 GiB for broker 1; orders: cleanup.policy=compact; clicks: retention.ms=1 d and
    LogAppendTime)."""
    properties = parse_config_file((FIXTURES / "kafka-configs-describe-all.txt").read_text())
    assert properties["topic.orders.cleanup.policy"] == "compact"
    assert properties["topic.orders.retention.ms"] == "259200000"  # the value, though synonyms={} names no source
    assert "topic.orders.follower.replication.throttled.replicas" in properties  # an empty value
    assert properties["log.retention.hours"] == "72" and properties["log.retention.bytes"] == "1073741824"
    assert "log.retention.ms" not in properties and "delegation.token.secret.key" not in properties  # null, sensitive
    assert "log.dir" not in properties  # Kafka's default (DEFAULT_CONFIG) is kafkalog's
    resolver = resolver_from(properties)
    orders, clicks, other = (resolver.for_topic(t) for t in ("orders", "clicks", "payments"))
    assert orders.cleanup_policy == ("compact",) and clicks.cleanup_policy == other.cleanup_policy == ("delete",)
    assert (clicks.retention_ms, clicks.message_timestamp_type) == (86_400_000, "LogAppendTime")
    for config in (orders, other):
        assert (
            config.retention_ms,
            config.retention_bytes,
            config.segment_bytes,
            config.min_cleanable_dirty_ratio,
            config.delete_retention_ms,
        ) == (259_200_000, 1_073_741_824, 536_870_912, 0.25, 3_600_000)


SECTION = "All configs for topic {t} are:\n  retention.ms={v} sensitive=false synonyms={{{s}}}\n"


@pytest.mark.parametrize(
    "text, expected",
    [
        (SECTION.format(t="a.b-c", v=5, s="DYNAMIC_TOPIC_CONFIG:retention.ms=5"), {"topic.a.b-c.retention.ms": "5"}),
        (
            "Dynamic configs for topic t are:\n  cleanup.policy=compact,delete sensitive=false synonyms="
            "{DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}\n",
            {"topic.t.cleanup.policy": "compact,delete"},
        ),
        (
            SECTION.format(
                t="t", v=7, s="STATIC_BROKER_CONFIG:log.retention.ms=7, DEFAULT_CONFIG:log.retention.hours=168"
            ),
            {"topic.t.retention.ms": "7", "log.retention.ms": "7"},
        ),
        (
            "Default configs for brokers in the cluster are:\n  log.retention.ms=9 sensitive=false synonyms="
            "{DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=9}\nAll configs for broker 1 are:\n  log.retention.ms=8 "
            "sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=8, DYNAMIC_DEFAULT_BROKER_CONFIG:"
            "log.retention.ms=9}\n",
            {"log.retention.ms": "8"},
        ),  # the per-broker value over the cluster default
    ],
)
def test_describe_sections(text, expected):
    assert parse_config_file(text) == expected


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "All configs for broker 1 are:\n  log.retention.ms=8 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
            "log.retention.ms=8}\nAll configs for broker 2 are:\n  log.retention.ms=9 sensitive=false synonyms="
            "{DYNAMIC_BROKER_CONFIG:log.retention.ms=9}\n",
            "is 8 \\(line 2\\) and 9 \\(line 4\\): describe one broker",
        ),
        (
            "All configs for group g are:\n  consumer.session.timeout.ms=45000 sensitive=false synonyms={}\n",
            "not of groups",
        ),
        ("All configs for topic t are:\n  retention.ms=1\n", "line 2: expected `  name=value sensitive="),
    ],
)
def test_describe_output_refused(text, message):
    with pytest.raises(ConfigError, match=message):
        resolver_from(parse_config_file(text, file="describe.txt"))


def test_describe_output_of_a_confluent_topic_warns_of_its_unknown_names(caplog):
    """A Confluent Platform cluster describes its topics with confluent.* names: warned of, skipped."""
    caplog.set_level(logging.WARNING, "kafkalog.config")
    text = SECTION.format(t="t", v=1, s="") + "  confluent.placement.constraints= sensitive=false synonyms={}\n"
    assert parse_config_file(text, file="describe.txt") == {"topic.t.retention.ms": "1"}
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "describe.txt: unknown topic configuration 'confluent.placement.constraints' (line 3, topic t)" in warning


def test_config_file_option_reads_both_forms(tmp_path):
    from kafkalog import cli

    for name in ("server.properties", "kafka-configs-describe-all.txt"):
        args = cli.build_parser().parse_args(["retain", str(tmp_path), "--config-file", str(FIXTURES / name)])
        assert cli.options.config_resolver(args).for_topic("x").retention_ms == 72 * 3_600_000


def test_kip280_compaction_strategy_names_layer_and_validate():
    """KIP-280's names (kafkalog's extensions): topic over broker synonym, one of three strategies."""
    resolver = ConfigResolver(
        broker={"log.cleaner.compaction.strategy": "timestamp", "log.cleaner.compaction.strategy.header": "v"},
        per_topic={"t": {"compaction.strategy": "header"}},
    )
    assert resolver.for_topic("other").compaction_strategy == "timestamp"
    t = resolver.for_topic("t")
    assert (t.compaction_strategy, t.compaction_strategy_header) == ("header", "v")
    assert TopicConfig().compaction_strategy == "offset"
    with pytest.raises(ConfigError, match="compaction.strategy: String must be one of: offset, timestamp, header"):
        resolver_from(settings=["compaction.strategy=version"])
