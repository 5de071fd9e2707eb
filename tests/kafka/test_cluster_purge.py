"""A purge of every replica of a real three-broker KRaft cluster (issue 28, "Tests (real parts)").

Topics of replication factor 3 (compacted and not, transactional and not) get keyed records through
Kafka's own clients; once every partition's ISR is its three replicas, every broker stops with a
controlled shutdown and kafkalog purges the three log dirs with the same keys and the same `now`.
Then, after the brokers start again over what kafkalog wrote:

(a) each broker loads its log dir without recovering or rebuilding anything (broker.RECOVERY_LINES);
(b) every replica, made the leader of every partition in turn (kafka-reassign-partitions' replica
    order, then kafka-leader-election's preferred leader, through ClusterAdmin.java), serves exactly
    the records produced but those of the purged keys, with their offsets, keys, values, headers and
    timestamps (read_committed for the transactional topics);
(c) records produced afterwards replicate to every replica (the ISR stays at three; every copy holds
    the same batches, byte for byte), and no broker logged that it cut a replica's log back
    (broker.TRUNCATION_LINES);
(d) DumpLogSegments finds no problem in any file of any copy.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kafkalog.codec.batch import RecordBatch
from kafkalog.config import resolver_from
from kafkalog.errors import ConfigError
from kafkalog.operations.replicas import check_replicas
from kafkalog.storage.logdir import LogDir

from .broker import KafkaTools
from .cluster import Cluster
from .test_roundtrip import (
    COMPACTED,
    DELETED,
    SEGMENT_BYTES,
    Steps,
    Workload,
    assert_loaded_cleanly,
    assert_same_records,
    check_with_dump_log_segments,
    committed_view,
    consumed,
    expected,
    groups,
)

pytestmark = pytest.mark.spark

TOPICS = {
    "rf-del": DELETED,
    "rf-cmp": COMPACTED,
    "rf-txn-del": DELETED,
    "rf-txn-cmp": COMPACTED,
}  # the broker's cleaner leaves the compacted ones alone (min.compaction.lag.ms): copies stay comparable
TRANSACTIONAL = ("rf-txn-del", "rf-txn-cmp")
PARTITIONS = 2
PURGED = ["key-2", "key-7"]  # Kafka's partitioner puts them in partition 0 and 1
PURGED_BYTES = {k.encode() for k in PURGED}
SECRET = b"kafkalog-tests-purge-secret"


@pytest.fixture(scope="module")
def cluster(kafka_tools: KafkaTools, kafka_cluster_started_early):
    """The cluster conftest.py's `kafka_cluster_started_early` started, closed after this module."""
    cluster = kafka_cluster_started_early.result()
    try:
        yield cluster
    finally:
        cluster.close()


def purge_copies(spark, log_dirs: list[Path], keys: list[bytes], *, now: int, **options) -> list:
    """kafkalog's purge of every broker's log dir in one run: the same keys, the same `now`, one
    decision (a list of one result: the checks below sum over results)."""
    from kafkalog.operations.purge import purge

    return [purge(spark, [str(d) for d in log_dirs], keys, now=now, **options)]


def test_purge_every_replica(cluster: Cluster, kafka_tools: KafkaTools, spark, tmp_path):
    tools, step = kafka_tools, Steps()
    topics = sorted(TOPICS)
    partitions = [(t, p) for t in topics for p in range(PARTITIONS)]
    work = workload()
    produce(tools, cluster, work, [topic_spec(t) for t in topics])
    in_sync(tools, cluster, topics)
    step("produced, ISR 3")

    assert cluster.stop() == [True] * 3, "a broker left no clean shutdown marker"
    sent = list(work.sent)
    assert {r.key for r in sent} >= set(PURGED)
    assert min(len(LogDir.open(str(d)).partition(*tp).segments) for d in cluster.log_dirs for tp in partitions) > 1
    before = same_copies(cluster.log_dirs, partitions, "before the purge")
    # The brokers' copies of the cluster's metadata name every replica: two of three log dirs are refused
    dirs = [str(d) for d in cluster.log_dirs]
    with pytest.raises(ConfigError, match=r"on broker 3 .*is not among the given log dirs"):
        check_replicas(dirs[:2], topics)
    assert check_replicas(dirs, topics).missing == [] and check_replicas(dirs, topics).partitions == len(partitions)
    results = purge_copies(
        spark,
        cluster.log_dirs,
        [k.encode() for k in PURGED],
        now=int(time.time() * 1000),
        ledger=str(tmp_path / "ledger"),
        secret=SECRET,
        topics=topics,
        config=resolver_from(
            topic_settings=[
                f"{t}:{k}={v}" for t, c in TOPICS.items() for k, v in {**c, "segment.bytes": str(SEGMENT_BYTES)}.items()
            ]
        ),
    )
    step("kafkalog purge of the three log dirs")
    assert all(r.all_replicas for r in results), "the metadata's replicas were not all given"
    purged = len(cluster.brokers) * len([r for r in sent if r.key in PURGED])  # every copy's
    summaries = "\n".join(r.summary() for r in results)
    assert sum(r.total("removed") for r in results) == purged, summaries
    assert sum(r.ledger_rows for r in results) == purged and not any(r.remaining for r in results), summaries
    after = same_copies(cluster.log_dirs, partitions, "after the purge")
    for tp, batches in after.items():
        left = [r for data in batches for r in RecordBatch(data).records() if r.key in PURGED_BYTES]
        assert not left, f"{tp}: records of purged keys are left: {left[:5]}"
        assert batches != before[tp], f"{tp}: nothing purged"

    cluster.start()
    for broker in cluster.brokers:
        assert_loaded_cleanly(broker)
    step("restarted")
    wanted = expected(committed_view([r for r in sent if r.key not in PURGED]))
    ends = [{"topic": t, "partition": p, "offset": RecordBatch(after[t, p][-1]).last_offset + 1} for t, p in partitions]
    for broker in cluster.brokers:
        lead = {"kind": "lead", "broker": broker.node_id, "topics": topics, "ends": ends}
        led = tools.admin(cluster.bootstrap, [lead])[0]["partitions"]
        assert {p["leader"] for p in led} == {broker.node_id}, led
        assert_same_records(read(tools, cluster, topics), wanted, f"read from broker {broker.node_id}, the leader")
        step(f"read from broker {broker.node_id}")

    later = produce_again(tools, cluster, topics)
    in_sync(tools, cluster, topics)
    wanted = expected(committed_view([r for r in sent if r.key not in PURGED] + later))
    assert_same_records(read(tools, cluster, topics), wanted, "read after producing again")
    step("produced again, ISR 3")

    assert cluster.stop() == [True] * 3, "a broker left no clean shutdown marker"
    truncated = [line for broker in cluster.brokers for line in broker.truncation_lines()]
    assert not truncated, "a broker cut a replica's log back:\n" + "\n".join(truncated[:20])
    final = same_copies(cluster.log_dirs, partitions, "after producing again")
    for tp, batches in final.items():
        assert batches[: len(after[tp])] == after[tp], f"{tp}: the batches kafkalog wrote changed"
    check_with_dump_log_segments(tools, *[(d, partition_files(d, topics)) for d in cluster.log_dirs])
    step("copies compared, DumpLogSegments")


# -- the workload ----------------------------------------------------------------------------------------------


def topic_spec(topic: str) -> dict:
    configs = {**TOPICS[topic], "internal.segment.bytes": str(SEGMENT_BYTES)}
    return {"name": topic, "partitions": PARTITIONS, "replication_factor": 3, "configs": configs}


def workload() -> Workload:
    """Keys key-0..key-8 over every topic (the partitioner spreads them over both partitions): plain
    and idempotent producers on the non-transactional topics, transactions committed and aborted on
    the others; tombstones and headers here and there."""
    work = Workload()
    for topic in topics_of(transactional=False):
        work.add(
            {
                "topic": topic,
                "mode": "idempotent",
                "compression": "zstd",
                "groups": groups(f"{topic}-idem", 6, 6, keys=9, tombstone_every=7, pad=20),
            }
        )
        work.add(
            {
                "topic": topic,
                "mode": "plain",
                "compression": "gzip",
                "groups": groups(f"{topic}-plain", 3, 5, keys=9, pad=20),
            }
        )
    for topic in topics_of(transactional=True):
        work.add(
            {
                "topic": topic,
                "mode": "transactional",
                "transactional_id": f"tx-{topic}",
                "compression": "snappy",
                "groups": groups(
                    f"{topic}-txn", 8, 5, keys=9, start=4, pad=20, ends=lambda g: "abort" if g % 3 == 1 else "commit"
                ),
            }
        )
    return work


def produce_again(tools: KafkaTools, cluster: Cluster, topics: list[str]) -> list:
    """Records of every key after the purge, by the transactional producers of before (their epoch
    is bumped) and new idempotent ones; returns what was acknowledged."""
    later = Workload()
    for topic in topics:
        run = {
            "topic": topic,
            "mode": "idempotent",
            "compression": "lz4",
            "groups": groups(f"{topic}-again", 2, 4, keys=9),
        }
        if topic in TRANSACTIONAL:
            aborted = groups(f"{topic}-again", 3, 4, keys=9, ends=lambda g: "abort" if g == 1 else "commit")
            run.update(mode="transactional", transactional_id=f"tx-{topic}", groups=aborted)
        later.add(run)
    produce(tools, cluster, later)
    return later.sent


def in_sync(tools: KafkaTools, cluster: Cluster, topics: list[str]) -> None:
    """Wait until every partition of `topics` has a leader and its three replicas in sync."""
    placed = tools.admin(cluster.bootstrap, [{"kind": "in_sync", "topics": topics}])[0]["partitions"]
    assert placed and all(len(p["isr"]) == len(p["replicas"]) == 3 for p in placed), placed


def topics_of(*, transactional: bool) -> list[str]:
    return [t for t in sorted(TOPICS) if (t in TRANSACTIONAL) == transactional]


def produce(tools: KafkaTools, cluster: Cluster, work: Workload, topics: list[dict] = ()) -> None:
    for run, acked in zip(work.runs, tools.produce(cluster.bootstrap, work.runs, topics)):
        work.record(run, acked)
    work.runs = []


def read(tools: KafkaTools, cluster: Cluster, topics: list[str]) -> list[dict]:
    """Every record of `topics` from the log start, read_committed for the transactional ones."""
    tasks = [
        {"kind": "read", "topic": t, "isolation": "read_committed" if t in TRANSACTIONAL else "read_uncommitted"}
        for t in topics
    ]
    results = tools.consume(cluster.bootstrap, tasks)
    records = (consumed(r) for result in results for r in result["records"])
    return sorted(records, key=lambda r: (r["topic"], r["partition"], r["offset"]))


# -- the copies ------------------------------------------------------------------------------------------------


def same_copies(log_dirs: list[Path], partitions: list[tuple[str, int]], when: str) -> dict:
    """(topic, partition) -> the bytes of its batches in log order, the same in every log dir (a
    follower appends its leader's batches as they are, whatever its segment files)."""
    copies = []
    for log_dir in log_dirs:
        opened = LogDir.open(str(log_dir))
        copies.append({tp: [b.data for _, b in opened.partition(*tp).batches()] for tp in partitions})
    for tp in partitions:
        differ = [str(d) for d, copy in zip(log_dirs, copies) if copy[tp] != copies[0][tp]]
        assert not differ, f"{tp} {when}: the copies in {differ} differ from the one in {log_dirs[0]}"
    return copies[0]


def partition_files(log_dir: Path, topics: list[str]) -> list[str]:
    """Every file of the topics' partition directories, relative to the log dir."""
    return sorted(str(f.relative_to(log_dir)) for t in topics for f in log_dir.glob(f"{t}-*/*") if f.is_file())
