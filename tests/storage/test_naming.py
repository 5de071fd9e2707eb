"""Segment file and partition directory names (spec §4.1, §4.2)."""

import pytest

from kafkalog.storage.naming import (
    SegmentFileName,
    TopicPartition,
    illegal_partition_dir_reason,
    illegal_topic_reason,
    parse_partition_dir_name,
    parse_segment_file_name,
    segment_file_name,
)


def test_segment_file_name_is_zero_padded_to_20_digits():
    assert segment_file_name(12345, ".log") == "00000000000000012345.log"
    assert segment_file_name(0, ".index") == "00000000000000000000.index"
    assert segment_file_name(2**63 - 1, ".snapshot") == "09223372036854775807.snapshot"
    assert segment_file_name(7, ".timeindex.swap") == "00000000000000000007.timeindex.swap"


@pytest.mark.parametrize("offset", [-1, 2**63])
def test_segment_file_name_refuses_offsets_outside_a_long(offset):
    with pytest.raises(ValueError):
        segment_file_name(offset, ".log")


@pytest.mark.parametrize(
    "name, expected",
    [
        ("00000000000000012345.log", SegmentFileName(12345, ".log", None)),
        ("00000000000000000000.index", SegmentFileName(0, ".index", None)),
        ("00000000000000000000.timeindex", SegmentFileName(0, ".timeindex", None)),
        ("00000000000000000100.txnindex", SegmentFileName(100, ".txnindex", None)),
        ("00000000000000000038.snapshot", SegmentFileName(38, ".snapshot", None)),
        ("00000000000000000000.log.cleaned", SegmentFileName(0, ".log", ".cleaned")),
        ("00000000000000000000.index.swap", SegmentFileName(0, ".index", ".swap")),
        ("00000000000000000000.timeindex.deleted", SegmentFileName(0, ".timeindex", ".deleted")),
        ("00000000000000000005.snapshot.deleted", SegmentFileName(5, ".snapshot", ".deleted")),
        ("42.log", SegmentFileName(42, ".log", None)),  # Kafka's parser does not require the padding
    ],
)
def test_parse_segment_file_name(name, expected):
    parsed = parse_segment_file_name(name)
    assert parsed == expected
    assert parse_segment_file_name(str(parsed)) == expected


@pytest.mark.parametrize(
    "name",
    [
        "leader-epoch-checkpoint",
        "partition.metadata",
        ".lock",
        "meta.properties",
        "00000000000000000000.log.tmp",
        "00000000000000000000.logx",
        "0000000000000000000a.log",
        ".log",
        "-1.log",
        "+1.log",
        "1_0.log",
        "00000000000000000000.log.swap.deleted",
        "99999999999999999999.log",  # above Long.MAX
        "recovery-point-offset-checkpoint.tmp",
    ],
)
def test_parse_segment_file_name_rejects_other_files(name):
    assert parse_segment_file_name(name) is None


@pytest.mark.parametrize(
    "name, expected",
    [
        ("orders-0", TopicPartition("orders", 0)),
        ("__consumer_offsets-49", TopicPartition("__consumer_offsets", 49)),
        ("my-topic-with-dashes-12", TopicPartition("my-topic-with-dashes", 12)),
        (
            "_confluent-controlcenter-5-1-2-1-error-topic-0",
            TopicPartition("_confluent-controlcenter-5-1-2-1-error-topic", 0),
        ),
        ("t-2147483647", TopicPartition("t", 2**31 - 1)),
        ("orders--1", TopicPartition("orders-", 1)),  # a topic may end in '-'; partitions are never negative
    ],
)
def test_parse_partition_dir_name_splits_at_the_last_dash(name, expected):
    assert parse_partition_dir_name(name) == expected


@pytest.mark.parametrize(
    "name",
    [
        "orders-0.0123456789abcdef0123456789abcdef-delete",
        "orders-0.0123456789abcdef0123456789abcdef-future",
        "orders-0.0123456789abcdef0123456789abcdef-stray",
        "orders",
        "orders-",
        "-0",
        "orders-x",
        "orders-+1",
        "orders-1_0",
        "orders-2147483648",
        "cleaner-offset-checkpoint",
        "meta.properties",
    ],
)
def test_parse_partition_dir_name_rejects_non_partitions(name):
    assert parse_partition_dir_name(name) is None


@pytest.mark.parametrize("topic", ["orders", "a", "__consumer_offsets", "Orders.EU_2-b", "t" * 249, "...", "-"])
def test_topic_names_kafka_accepts(topic):
    assert illegal_topic_reason(topic) is None


@pytest.mark.parametrize(
    "topic, reason",
    [
        ("", "empty"),
        (".", "'.'"),
        ("..", "'..'"),
        ("t" * 250, "at most 249"),
        ("my topic", "' '"),
        ("new\nline", "'\\n'"),
        ("tab\t", "'\\t'"),
        ("caf\u00e9", "'\u00e9'"),
        ("a/b", "'/'"),
        ("a:b", "':'"),
    ],
)
def test_topic_names_kafka_refuses(topic, reason):
    assert reason in illegal_topic_reason(topic)


@pytest.mark.parametrize(
    "name, illegal",
    [
        ("orders-0", False),
        ("orders-eu-12", False),
        ("__consumer_offsets-49", False),
        ("..-0", True),
        ("my topic-0", True),
        ("orders-007", True),
        ("orders-00", True),
        ("t" * 250 + "-1", True),
        ("no-partition", False),
        ("orders-0.0123456789abcdef0123456789abcdef-delete", False),  # not partition dirs
    ],
)
def test_partition_directory_names_kafka_could_have_made(name, illegal):
    assert (illegal_partition_dir_reason(name) is not None) is illegal
