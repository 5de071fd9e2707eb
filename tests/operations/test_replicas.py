"""Which copies exist and whether each was given (operations/replicas.py): three brokers' log dirs,
hand-built, with a KRaft metadata log in broker 1's; the real metadata log of tests/fixtures/kraft-4.3.1
with a replica added to it; and the CLI's refusal, before Spark starts."""

from __future__ import annotations

import hashlib
import logging
import shutil
from pathlib import Path

import pytest

from kafkalog.cli import main
from kafkalog.errors import ConfigError
from kafkalog.operations.replicas import (
    MissingReplica,
    ReplicaDir,
    check_replicas,
    copies,
    missing_replicas,
    replica_assignment,
)
from kafkalog.rules.replica_assignment import Assignment

from ..storage.test_metadata_records import batch, metadata, partition, topic, write_metadata_log

FIXTURE_LOG = Path(__file__).resolve().parents[1] / "fixtures" / "kraft-4.3.1" / "log"
ORDERS, CLICKS = "b3JkZXJzb3JkZXJzb3JkZQ", "Y2xpY2tzY2xpY2tzY2xpYw"
DIRS = {
    1: "ZGlyZWN0b3J5LTEAAAAAAA",
    2: "ZGlyZWN0b3J5LTIAAAAAAA",
    3: "ZGlyZWN0b3J5LTMAAAAAAA",
    4: "ZGlyZWN0b3J5LTQAAAAAAA",
}


def broker_dir(root: Path, node: int, partitions: list[str], directory: str | None = None) -> Path:
    log_dir = root / f"b{node}"
    for name in partitions:
        (log_dir / name).mkdir(parents=True)
    lines = ["version=1", f"node.id={node}", "cluster.id=C5I4OfapQnGBCJcjKe0-pA"]
    lines += [] if directory is None else [f"directory.id={directory}"]
    (log_dir / "meta.properties").write_text("\n".join(lines) + "\n")
    return log_dir


@pytest.fixture
def cluster(tmp_path) -> list[str]:
    """orders-0 on brokers 1, 2, 3 and orders-1 on 1, 2, each in its broker's one directory;
    clicks-0 on broker 3 in a directory the metadata does not name (PartitionRecord version 0)."""
    dirs = [
        broker_dir(tmp_path, 1, ["orders-0", "orders-1"], DIRS[1]),
        broker_dir(tmp_path, 2, ["orders-0", "orders-1"], DIRS[2]),
        broker_dir(tmp_path, 3, ["orders-0", "clicks-0"], DIRS[3]),
    ]
    clicks = metadata(
        "PartitionRecord",
        0,
        partitionId=0,
        topicId=CLICKS,
        replicas=[3],
        isr=[3],
        removingReplicas=[],
        addingReplicas=[],
        leader=3,
        leaderEpoch=0,
        partitionEpoch=0,
    )
    write_metadata_log(
        dirs[0] / "__cluster_metadata-0",
        {
            0: [
                batch(0, topic(ORDERS, "orders"), partition(ORDERS, 0, [1, 2, 3], [DIRS[1], DIRS[2], DIRS[3]])),
                batch(2, partition(ORDERS, 1, [2, 1], [DIRS[2], DIRS[1]]), topic(CLICKS, "clicks"), clicks),
            ]
        },
        {},
    )
    return [str(d) for d in dirs]


def test_copies_are_the_partition_dirs_of_each_log_dir_with_whose_they_are(cluster):
    b1, b2, b3 = cluster
    assert copies(cluster) == {
        ("orders", 0): [ReplicaDir(b1, 1, DIRS[1]), ReplicaDir(b2, 2, DIRS[2]), ReplicaDir(b3, 3, DIRS[3])],
        ("orders", 1): [ReplicaDir(b1, 1, DIRS[1]), ReplicaDir(b2, 2, DIRS[2])],
        ("clicks", 0): [ReplicaDir(b3, 3, DIRS[3])],
    }


def test_the_assignment_is_read_from_the_log_dir_or_the_metadata_partition(cluster):
    expected = {
        ("clicks", 0): Assignment((3,), ("AAAAAAAAAAAAAAAAAAAAAA",)),
        ("orders", 0): Assignment((1, 2, 3), (DIRS[1], DIRS[2], DIRS[3])),
        ("orders", 1): Assignment((2, 1), (DIRS[2], DIRS[1])),
    }
    assert replica_assignment(cluster[0]) == expected
    assert replica_assignment(f"{cluster[0]}/__cluster_metadata-0") == expected
    with pytest.raises(ConfigError, match="no KRaft metadata log here"):
        replica_assignment(cluster[1])


def test_every_replica_given(cluster):
    assert missing_replicas(cluster) == []
    check = check_replicas(cluster)
    assert check.missing == [] and check.summary().startswith("every replica of the 3 partitions was given")


def test_a_broker_not_given_is_named_with_its_directory_and_the_purge_refused(cluster):
    assert missing_replicas(cluster[:2]) == [
        MissingReplica("clicks", 0, 3, None),
        MissingReplica("orders", 0, 3, DIRS[3]),
    ]
    assert missing_replicas(cluster[:2], ["orders"]) == [MissingReplica("orders", 0, 3, DIRS[3])]
    assert missing_replicas(cluster[1:], "orders", cluster[0]) == [
        MissingReplica("orders", 0, 1, DIRS[1]),
        MissingReplica("orders", 1, 1, DIRS[1]),
    ]
    with pytest.raises(ConfigError) as caught:
        check_replicas(cluster[:2])
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{cluster[0]}/__cluster_metadata-0: ")
    assert "the replica of clicks-0 on broker 3 is not among the given log dirs" in message
    assert "(1 more replicas missing)" in message and "--allow-missing-replicas" in message
    allowed = check_replicas(cluster[:2], allow_missing=True)
    assert allowed.missing_dicts() == [
        {"topic": "clicks", "partition": 0, "broker": 3, "directory": None},
        {"topic": "orders", "partition": 0, "broker": 3, "directory": DIRS[3]},
    ]
    assert allowed.summary() == (
        "WARNING: 2 replicas were not given and are not purged: clicks-0 on broker 3, "
        f"orders-0 on broker 3 (directory {DIRS[3]})"
    )


def test_a_replica_in_a_directory_the_metadata_does_not_name_is_given_by_a_log_dir_of_its_broker_holding_it(cluster):
    assert missing_replicas(cluster, ["clicks"]) == []
    shutil.rmtree(Path(cluster[2]) / "clicks-0")  # broker 3's given dir does not hold it: another of its dirs may
    assert missing_replicas(cluster, ["clicks"]) == [MissingReplica("clicks", 0, 3, None)]


def test_a_known_directory_is_given_only_by_that_directory(cluster, tmp_path):
    """Broker 3 with two directories (JBOD): its other directory does not give orders-0's replica."""
    other = broker_dir(tmp_path / "jbod", 3, ["orders-0"], "b3RoZXItZGlyZWN0b3J5AA")
    assert missing_replicas([*cluster[:2], str(other)], ["orders"]) == [MissingReplica("orders", 0, 3, DIRS[3])]


def test_the_metadata_log_named_or_the_furthest_among_the_log_dirs(cluster, tmp_path):
    b1, b2, b3 = map(Path, cluster)
    shutil.copytree(b1 / "__cluster_metadata-0", b2 / "__cluster_metadata-0")
    with open(b2 / "__cluster_metadata-0" / "00000000000000000000.log", "ab") as log:  # orders-1 moves to [1, 2, 4]
        change = dict(partitionId=1, topicId=ORDERS, replicas=[1, 2, 4], directories=[DIRS[1], DIRS[2], DIRS[4]])
        log.write(batch(5, metadata("PartitionChangeRecord", 1, **change)))
    assert missing_replicas(cluster) == [MissingReplica("orders", 1, 4, DIRS[4])]  # b2's reaches offset 6
    assert missing_replicas(cluster, metadata_dir=str(b1)) == []
    controller = tmp_path / "controller"
    shutil.move(b2 / "__cluster_metadata-0", controller / "__cluster_metadata-0")
    shutil.rmtree(b1 / "__cluster_metadata-0")
    assert missing_replicas(cluster) is None
    assert missing_replicas(cluster, metadata_dir=str(controller)) == [MissingReplica("orders", 1, 4, DIRS[4])]


def test_without_metadata_it_says_it_cannot_know(cluster, caplog):
    shutil.rmtree(Path(cluster[0]) / "__cluster_metadata-0")
    assert missing_replicas(cluster[:1]) is None
    check = check_replicas(cluster[:1])
    assert check.missing_dicts() is None
    assert check.summary() == (
        "WARNING: no KRaft metadata log among the log dirs (--metadata DIR names one): kafkalog cannot know "
        "whether other copies of these partitions exist, on other brokers or in other log dirs"
    )
    with caplog.at_level(logging.WARNING, logger="kafkalog"):
        check_replicas(cluster[:1], allow_missing=True)
    assert "--allow-missing-replicas does nothing here: no KRaft metadata log" in caplog.text


def real_log_with_a_second_replica(tmp_path) -> Path:
    """A copy of the real Kafka 4.3.1 log dir whose metadata log gains one more batch, as a
    reassignment would write it: orders-1 on brokers 1 and 2."""
    log_dir = shutil.copytree(FIXTURE_LOG, tmp_path / "log")
    directory = "CKCcG0CzPP3oP8f46qNcqQ"  # the fixture's meta.properties directory.id
    topic_id = "WBvXqWGWSEWViPkqsHADUQ"  # the fixture's TopicRecord of orders
    change = dict(partitionId=1, topicId=topic_id, replicas=[1, 2], directories=[directory, DIRS[2]])
    with open(log_dir / "__cluster_metadata-0" / "00000000000000000012.log", "ab") as log:
        log.write(batch(22, metadata("PartitionChangeRecord", 1, **change)))
    return log_dir


def test_the_real_brokers_log_dir_gives_its_replicas_and_not_one_added_on_another_broker(tmp_path):
    assert missing_replicas([str(FIXTURE_LOG)]) == []
    log_dir = real_log_with_a_second_replica(tmp_path)
    assert missing_replicas([str(log_dir)]) == [MissingReplica("orders", 1, 2, DIRS[2])]


def tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def test_cli_purge_refuses_a_missing_replica_in_one_line_with_exit_2(tmp_path, capsys):
    log_dir = real_log_with_a_second_replica(tmp_path)
    (tmp_path / "keys.txt").write_text("key-1\n")
    (tmp_path / "secret").write_text("a-secret-of-enough-bytes\n")
    before = tree_digest(log_dir)
    args = ["purge", str(log_dir), "--keys", str(tmp_path / "keys.txt"), "--ledger", str(tmp_path / "ledger")]
    code = main([*args, "--secret-file", str(tmp_path / "secret"), "--now", "0"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err == (
        f"kafkalog purge: {log_dir}/__cluster_metadata-0: the replica of orders-1 on broker 2 (directory {DIRS[2]}) "
        "is not among the given log dirs: a purge must take every copy; give its log dir, or "
        "--allow-missing-replicas to purge the others and record it as not purged"
    )
    assert tree_digest(log_dir) == before and not (tmp_path / "ledger").exists()


# -- copies given to one purge: how they differ, and whether they can be told apart -------------------------


def _written_copy(root: Path, records: int, meta: str | None, segment_bytes: int = 400):
    """A copy of topic t's partition 0 with `records` records (a purge's Copy), its meta.properties `meta`."""
    from kafkalog.codec.records import Record
    from kafkalog.spark.purge import Copy as PurgeCopy
    from kafkalog.storage.fs import LogFileSystem
    from kafkalog.storage.log_writer import PartitionWriter
    from kafkalog.storage.logdir import LogDir

    root.mkdir(parents=True)
    if meta is not None:
        (root / "meta.properties").write_text(meta)
    w = PartitionWriter(LogFileSystem.for_path(str(root))[0], str(root), "t", 0, segment_bytes=segment_bytes)
    for i in range(records):
        w.append_records([Record(0, 1000 + i, f"k{i}".encode(), b"v" * 20)])
    w.close()
    opened = LogDir.open(str(root))
    segments = {tp: opened.partition(*tp).segments for tp in opened.topic_partitions}
    return PurgeCopy(str(root), str(root), opened, segments)


def test_copies_that_differ_are_named_with_how_and_copies_that_agree_are_not(tmp_path):
    from kafkalog.operations.replicas import differences_warning, replica_differences

    meta = "version=1\nnode.id=1\ncluster.id=C5I4OfapQnGBCJcjKe0-pA\n"
    a = _written_copy(tmp_path / "a", 20, meta)
    b = _written_copy(tmp_path / "b", 20, meta)
    assert replica_differences([a, b]) == {} and differences_warning({}) is None
    c = _written_copy(tmp_path / "c", 23, meta)  # an extra segment: three records more
    assert len(c.segments[("t", 0)]) > len(a.segments[("t", 0)])
    found = replica_differences([a, b, c])
    assert [(o.log_dir, o.log_start_offset, o.log_end_offset) for o in found[("t", 0)]] == [
        (a.name, 0, 20),
        (b.name, 0, 20),
        (c.name, 0, 23),
    ]
    warning = differences_warning(found)
    assert warning.startswith("WARNING: the copies of 1 partitions differ, each purged on its own offsets")
    assert f"t-0 (log end offset: {a.name} 20, {b.name} 20, {c.name} 23; segments: " in warning
    d = _written_copy(tmp_path / "d", 20, meta, segment_bytes=10_000)  # the same records, cut otherwise
    cut = len(a.segments[("t", 0)])
    assert differences_warning(replica_differences([a, d])).endswith(f"t-0 (segments: {a.name} {cut}, {d.name} 1)")
    (Path(a.log_dir) / "log-start-offset-checkpoint").write_text("0\n1\nt 0 5\n")  # records deleted below 5
    assert "log start offset: " + f"{a.name} 5, {b.name} 0" in differences_warning(replica_differences([a, b]))


def test_copies_their_meta_properties_cannot_tell_apart_are_named_by_directory():
    from kafkalog.operations.purge import PurgeResult
    from kafkalog.operations.replicas import identity_warning

    def copy(log_dir, node=None, directory=None):
        return {"log_dir": log_dir, "node_id": node, "directory_id": directory}

    assert identity_warning([copy("/a")]) is None  # one copy: nothing to confuse it with
    assert identity_warning([copy("/a", 1, "x"), copy("/b", 1, "y"), copy("/c", 2)]) is None  # JBOD dirs of 1
    assert identity_warning([copy("/a"), copy("/b"), copy("/c")]) == (
        "WARNING: /a, /b, /c name no broker (no meta.properties, or no node.id in it): these copies are told "
        "apart by their directories only"
    )
    copied = [copy("/a", 0), copy("/b", 0), copy("/c", 1, "x"), copy("/d", 1, "x")]
    assert identity_warning(copied) == (
        "WARNING: /a and /b each say they are broker 0; /c and /d each say they are broker 1, x: these copies are "
        "told apart by their directories only"
    )
    result = PurgeResult("r", 0, True, "/a", [], copies=copied)
    assert "/a on broker 0, /b on broker 0" in result.summary() and identity_warning(copied) in result.summary()
