"""The replay of KRaft's replica assignment against Kafka's rules (PartitionRegistration, TopicsDelta,
MetadataBatchLoader): records built with the codec's encoder and read back with its decoder, as a
broker's metadata loader reads them."""

from __future__ import annotations

import pytest

from kafkalog.codec.metadata_records import decode_metadata_record, encode_metadata_record
from kafkalog.rules.replica_assignment import (
    LOST,
    MIGRATING,
    UNASSIGNED,
    Assignment,
    AssignmentReplay,
    MetadataReplayError,
    Replica,
)

ORDERS, ORDERS_AGAIN, CLICKS = "WBvXqWGWSEWViPkqsHADUQ", "x5TqAAAAAAAAAAAAAAAAAQ", "c2xpY2tzAAAAAAAAAAAAAA"
D1, D2, D3, D4 = "CKCcG0CzPP3oP8f46qNcqQ", "ZGlyZWN0b3J5LTIAAAAAAA", "ZGlyZWN0b3J5LTMAAAAAAA", "ZGlyZWN0b3J5LTQAAAAAAA"


def record(kind: str, version: int = 0, **data) -> dict:
    """A metadata record as a broker reads it: encoded by the codec, then decoded."""
    return decode_metadata_record(encode_metadata_record(kind, version, data))


def topic(topic_id: str, name: str) -> dict:
    return record("TopicRecord", name=name, topicId=topic_id)


def partition(topic_id: str, pid: int, replicas: list[int], directories: list[str] | None = None) -> dict:
    """A PartitionRecord: version 1 with `directories`, else version 0 (which has none)."""
    fields = dict(
        partitionId=pid,
        topicId=topic_id,
        replicas=replicas,
        isr=replicas,
        removingReplicas=[],
        addingReplicas=[],
        leader=replicas[0],
        leaderEpoch=0,
        partitionEpoch=0,
    )
    if directories is None:
        return record("PartitionRecord", 0, **fields)
    return record("PartitionRecord", 1, directories=directories, **fields)


def change(topic_id: str, pid: int, version: int = 1, **fields) -> dict:
    return record("PartitionChangeRecord", version, partitionId=pid, topicId=topic_id, **fields)


def replay(*records: dict) -> AssignmentReplay:
    replayed = AssignmentReplay()
    for offset, r in enumerate(records):
        replayed.apply(offset, r)
    return replayed


def test_a_partition_record_sets_replicas_and_directories():
    got = replay(topic(ORDERS, "orders"), partition(ORDERS, 0, [1, 2, 3], [D1, D2, D3])).assignments()
    assert got == {("orders", 0): Assignment((1, 2, 3), (D1, D2, D3))}
    assert got["orders", 0].replica_list() == [Replica(1, D1), Replica(2, D2), Replica(3, D3)]


def test_directories_absent_or_empty_are_migrating_and_name_no_directory():
    got = replay(
        topic(ORDERS, "orders"),
        partition(ORDERS, 0, [1, 2]),  # version 0: no directories field
        partition(ORDERS, 1, [2, 3], []),
    ).assignments()
    assert got["orders", 0] == Assignment((1, 2), (MIGRATING, MIGRATING))
    assert got["orders", 1] == Assignment((2, 3), (MIGRATING, MIGRATING))
    assert got["orders", 0].replica_list() == [Replica(1, None), Replica(2, None)]


def test_unassigned_and_lost_directories_name_no_directory():
    got = replay(topic(ORDERS, "orders"), partition(ORDERS, 0, [1, 2, 3], [UNASSIGNED, LOST, D3])).assignments()
    assert got["orders", 0].replica_list() == [Replica(1, None), Replica(2, None), Replica(3, D3)]


def test_a_reassignment_adds_then_removes_replicas():
    """kafka-reassign-partitions from [1, 2, 3] to [2, 3, 4]: the controller first writes the union with
    adding and removing replicas, then, once 4 is in sync, the target."""
    replayed = replay(
        topic(ORDERS, "orders"),
        partition(ORDERS, 0, [1, 2, 3], [D1, D2, D3]),
        change(
            ORDERS,
            0,
            replicas=[2, 3, 4, 1],
            directories=[D2, D3, UNASSIGNED, D1],
            addingReplicas=[4],
            removingReplicas=[1],
        ),
    )
    assert replayed.assignments()["orders", 0] == Assignment((2, 3, 4, 1), (D2, D3, UNASSIGNED, D1))
    replayed.apply(3, change(ORDERS, 0, directories=[D2, D3, D4, D1]))  # broker 4 says where it put it
    assert replayed.assignments()["orders", 0] == Assignment((2, 3, 4, 1), (D2, D3, D4, D1))
    replayed.apply(
        4, change(ORDERS, 0, replicas=[2, 3, 4], directories=[D2, D3, D4], addingReplicas=[], removingReplicas=[])
    )
    assert replayed.assignments()["orders", 0] == Assignment((2, 3, 4), (D2, D3, D4))


def test_a_change_without_replicas_or_directories_keeps_them():
    replayed = replay(
        topic(ORDERS, "orders"), partition(ORDERS, 0, [1, 2], [D1, D2]), change(ORDERS, 0, isr=[1], leader=1)
    )
    assert replayed.assignments()["orders", 0] == Assignment((1, 2), (D1, D2))
    replayed.apply(3, change(ORDERS, 0, replicas=None, directories=None, isr=[1, 2]))  # explicitly null: the same
    assert replayed.assignments()["orders", 0] == Assignment((1, 2), (D1, D2))


def test_a_change_of_replicas_keeps_migrating_directories_migrating():
    """A version 0 change (no directories) of a partition whose directories are all MIGRATING: one
    MIGRATING per new replica (defaultToMigrating)."""
    got = replay(topic(ORDERS, "orders"), partition(ORDERS, 0, [1]), change(ORDERS, 0, 0, replicas=[1, 2, 3]))
    assert got.assignments()["orders", 0] == Assignment((1, 2, 3), (MIGRATING,) * 3)


@pytest.mark.parametrize(
    "bad",
    [
        change(ORDERS, 0, replicas=[1, 2, 3], directories=[D1, D2]),  # InvalidReplicaDirectoriesException
        change(ORDERS, 0, directories=[D1]),  # the replicas stay [1, 2]
        change(ORDERS, 0, 0, replicas=[1, 2, 3]),  # known directories kept for three replicas
    ],
)
def test_directories_that_do_not_match_the_replicas_are_refused_as_kafka_refuses_them(bad):
    with pytest.raises(MetadataReplayError, match="directories") as caught:
        replay(topic(ORDERS, "orders"), partition(ORDERS, 0, [1, 2], [D1, D2]), bad)
    assert caught.value.offset == 2


def test_a_partition_record_with_directories_not_matching_its_replicas_is_refused():
    with pytest.raises(MetadataReplayError, match="2 directories for 3 replicas"):
        replay(topic(ORDERS, "orders"), partition(ORDERS, 0, [1, 2, 3], [D1, D2]))


def test_a_deleted_topic_created_again_under_its_name_is_a_new_topic():
    replayed = replay(
        topic(ORDERS, "orders"),
        partition(ORDERS, 0, [1, 2], [D1, D2]),
        partition(ORDERS, 1, [2, 3], [D2, D3]),
        topic(CLICKS, "clicks"),
        partition(CLICKS, 0, [3], [D3]),
        record("RemoveTopicRecord", topicId=ORDERS),
    )
    assert replayed.assignments() == {("clicks", 0): Assignment((3,), (D3,))}
    replayed.apply(6, topic(ORDERS_AGAIN, "orders"))
    replayed.apply(7, partition(ORDERS_AGAIN, 0, [4], [D4]))
    assert replayed.assignments() == {("clicks", 0): Assignment((3,), (D3,)), ("orders", 0): Assignment((4,), (D4,))}
    with pytest.raises(MetadataReplayError, match=f"topic id {ORDERS}, which no TopicRecord created") as caught:
        replayed.apply(8, change(ORDERS, 1, isr=[2]))  # the old topic's partition is gone with it
    assert caught.value.offset == 8


@pytest.mark.parametrize(
    "bad, message",
    [
        (change(ORDERS, 5, isr=[1]), "partition 5 of topic orders .*which no PartitionRecord created"),
        (record("RemoveTopicRecord", topicId=CLICKS), f"RemoveTopicRecord of topic id {CLICKS}"),
        (partition(CLICKS, 0, [1]), f"PartitionRecord of topic id {CLICKS}"),
    ],
)
def test_changes_of_what_does_not_exist_are_refused(bad, message):
    with pytest.raises(MetadataReplayError, match=message):
        replay(topic(ORDERS, "orders"), partition(ORDERS, 0, [1]), bad)


def test_records_of_an_aborted_or_unfinished_metadata_transaction_never_apply():
    replayed = replay(
        topic(ORDERS, "orders"),
        record("BeginTransactionRecord", name="migration"),
        partition(ORDERS, 0, [1]),
        record("AbortTransactionRecord"),
        record("BeginTransactionRecord"),
        partition(ORDERS, 1, [2]),
        record("EndTransactionRecord"),
        record("BeginTransactionRecord"),
        partition(ORDERS, 2, [3]),
    )
    assert replayed.assignments() == {("orders", 1): Assignment((2,), (MIGRATING,))}
    with pytest.raises(MetadataReplayError, match="BeginTransactionRecord inside"):
        replayed.apply(9, record("BeginTransactionRecord"))
    with pytest.raises(MetadataReplayError, match="EndTransactionRecord without"):
        replay(record("EndTransactionRecord"))


def test_a_record_version_newer_than_kafkalog_reads_is_refused_not_skipped():
    newer = decode_metadata_record(bytes([1, 3, 9]) + b"\x00")  # PartitionRecord version 9
    assert "raw" in newer
    with pytest.raises(MetadataReplayError, match="PartitionRecord version 9 is newer"):
        replay(topic(ORDERS, "orders"), newer)


def test_records_that_do_not_place_replicas_are_ignored():
    got = replay(
        record("FeatureLevelRecord", name="metadata.version", featureLevel=27),
        topic(ORDERS, "orders"),
        record("ConfigRecord", resourceType=2, resourceName="orders", name="cleanup.policy", value="compact"),
        partition(ORDERS, 0, [1], [D1]),
        record("FenceBrokerRecord", id=1, epoch=3),
    ).assignments()
    assert got == {("orders", 0): Assignment((1,), (D1,))}
