"""Where replicas live, read from the metadata log a real Kafka 4.x broker wrote (KRaft, combined mode):
topics created through the broker, the broker stopped, the replay finds node 1 and its log dir's
directory for every partition; the broker's own log dir gives every replica, and a replica on another
broker, appended to a copy of the metadata log as a reassignment would write it, is reported missing."""

from __future__ import annotations

import shutil

from kafkalog.operations.replicas import MissingReplica, missing_replicas, replica_assignment
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.logdir import LogDir
from kafkalog.storage.partition import Partition
from kafkalog.storage.remote_log import topic_id

from ..storage.test_metadata_records import batch, metadata

OTHER = "ZGlyZWN0b3J5LTIAAAAAAA"


def test_the_replay_of_a_real_brokers_metadata_log_and_a_replica_it_does_not_have(
    running_broker, kafka_tools, tmp_path
):
    broker = running_broker
    topics = {"replicas-a": 3, "replicas-b": 1}
    kafka_tools.produce(broker.bootstrap, [], [{"name": t, "partitions": n} for t, n in topics.items()])
    broker.stop()
    try:
        log_dir = str(broker.log_dir)
        meta = LogDir.open(log_dir).read_meta()
        assert meta is not None and meta.node_id == 1 and meta.directory_id
        assignment = replica_assignment(log_dir)
        ours = {tp: a for tp, a in assignment.items() if tp[0] in topics}
        assert sorted(ours) == [("replicas-a", 0), ("replicas-a", 1), ("replicas-a", 2), ("replicas-b", 0)]
        assert {(a.replicas, a.directories) for a in ours.values()} == {((1,), (meta.directory_id,))}
        assert missing_replicas([log_dir], list(topics)) == []

        copy = shutil.copytree(broker.log_dir / "__cluster_metadata-0", tmp_path / "__cluster_metadata-0")
        part = Partition.open(*LogFileSystem.for_path(str(copy)))
        last = part.segments[-1]
        _, tail = list(last.batches())[-1]
        change = dict(
            partitionId=1,
            topicId=topic_id(LogDir.open(log_dir).partition("replicas-a", 1)),
            replicas=[1, 2],
            directories=[meta.directory_id, OTHER],
        )
        with open(last.log_path, "ab") as log:
            log.write(
                batch(
                    tail.last_offset + 1,
                    metadata("PartitionChangeRecord", 1, **change),
                    epoch=tail.partition_leader_epoch,
                )
            )
        assert missing_replicas([log_dir], list(topics), str(copy)) == [MissingReplica("replicas-a", 1, 2, OTHER)]
    finally:
        broker.start()
