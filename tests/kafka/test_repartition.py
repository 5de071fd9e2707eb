"""`kafkalog repartition` with a real Kafka 4.3 broker and Kafka's own Java clients.

A keyed topic of 3 partitions is produced with the Java producer (a transactional producer with one
transaction aborted, an idempotent one and a plain one; gzip, lz4, zstd), a consumer group reads about
half of it and commits, a target topic of 5 partitions is created, the broker stops, kafkalog writes
the target's partitions into the broker's own log dir, and the broker starts again without recovering
anything. Then a read_committed Java consumer reads every committed record exactly once, each key in
the partition the Java partitioner names and in its order; kafka-consumer-groups --reset-offsets
--from-file takes kafkalog's CSV and the group resumes missing nothing, reading again exactly what
kafkalog said it would. A second run with --compact writes a compacted target in the same log dir,
which the broker loads too and a consumer reads one record per key from. murmur2 is also compared with
the Java client's partitioner on its own."""

from __future__ import annotations

import json
import random
from collections import Counter

import numpy as np
import pyarrow.parquet as pq

from kafkalog import cli
from kafkalog.operations.repartition import plan_repartition
from kafkalog.rules.partitioner import new_partitions, partition_for_key

from .broker import HERE, Broker, KafkaTools

SOURCE, TARGET, GROUP = "rp-orders", "rp-orders5", "rp-group"
COMPACTED = "rp-orders5c"  # the target of `repartition --compact`
T0 = 1_700_000_000_000


def java_partitions(tools: KafkaTools, keys: list[bytes], n: int, tmp_path) -> list[int]:
    path = tmp_path / f"keys-{n}.txt"
    path.write_text("".join(key.hex() + "\n" for key in keys))
    done = tools.java([str(HERE / "Partitioner.java"), str(path), str(n)])
    return [int(line) for line in done.stdout.split()]


def test_murmur2_agrees_with_the_java_partitioner(kafka_tools: KafkaTools, tmp_path):
    rng = random.Random(37)
    keys = [b"", b"a", b"\xff", b"\x80\x00\x00\x00", "ключ".encode()]
    keys += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 70))) for _ in range(3000)]
    keys += [f"user-{i}".encode() for i in range(1000)]
    for n in (1, 5, 12, 1009):
        java = java_partitions(kafka_tools, keys, n, tmp_path)
        assert [partition_for_key(k, n) for k in keys] == java, n
        assert new_partitions(keys, np.zeros(len(keys)), n).tolist() == java, n  # the vectorised one


def records(start: int, count: int) -> list[dict]:
    return [
        {"key": f"key-{i % 23}", "value": f"v{i}", "timestamp": T0 + 10 * i, "headers": [["n", str(i)]]}
        for i in range(start, start + count)
    ]


def workload() -> list[dict]:
    txn = [{"end": "abort" if g == 2 else "commit", "records": records(10 * g, 10)} for g in range(5)]
    return [
        {"topic": SOURCE, "mode": "transactional", "transactional_id": "rp-tx", "compression": "gzip", "groups": txn},
        {"topic": SOURCE, "mode": "idempotent", "compression": "lz4", "groups": [{"records": records(50, 40)}]},
        {"topic": SOURCE, "mode": "plain", "compression": "zstd", "groups": [{"records": records(90, 40)}]},
    ]


def test_repartitioned_topic_is_loaded_and_read_by_kafka(
    running_broker: Broker, kafka_tools: KafkaTools, spark, tmp_path
):
    broker, tools = running_broker, kafka_tools
    tools.produce(broker.bootstrap, workload(), [{"name": SOURCE, "partitions": 3}])
    (source,) = tools.consume(broker.bootstrap, [{"kind": "read", "topic": SOURCE, "isolation": "read_committed"}])
    committed = source["records"]
    assert len(committed) == 120 and {r["partition"] for r in committed} == {0, 1, 2}  # 10 aborted
    group_task = {"kind": "group", "group": GROUP, "protocol": "classic", "isolation": "read_committed"}
    (before,) = tools.consume(broker.bootstrap, [{**group_task, "topic": SOURCE, "max_records": 60}])
    compacted = {"name": COMPACTED, "partitions": 5, "configs": {"cleanup.policy": "compact"}}
    tools.produce(broker.bootstrap, [], [{"name": TARGET, "partitions": 5}, compacted])

    broker.stop()
    assert broker.clean_shutdown_marker
    groups, offset_map = tmp_path / "groups", tmp_path / "map"
    log_dir = str(broker.log_dir)
    args = [log_dir, "--topic", SOURCE, "--partitions", "5", "--to-topic", TARGET, "--output", log_dir]
    args += ["--metadata", log_dir, "--group-offsets", str(groups), "--offset-map", str(offset_map)]
    args += ["--report", str(tmp_path / "report.json"), "--quiet"]
    assert cli.main(["repartition", *args]) == cli.EXIT_OK
    args = [log_dir, "--topic", SOURCE, "--partitions", "5", "--to-topic", COMPACTED, "--output", log_dir]
    args += ["--metadata", log_dir, "--compact", "--topic-config", f"{COMPACTED}:cleanup.policy=compact", "--quiet"]
    assert cli.main(["repartition", *args]) == cli.EXIT_OK
    plan = plan_repartition(
        log_dir, SOURCE, 5, str(tmp_path / "unused"), to_topic=TARGET, metadata=log_dir, dry_run=True
    )
    broker.start()
    assert broker.recovery_lines() == []
    assert "Skipping recovery" in broker.server_log()

    (target,) = tools.consume(broker.bootstrap, [{"kind": "read", "topic": TARGET, "isolation": "read_committed"}])
    moved = target["records"]
    assert Counter((r["key"], r["value"]) for r in moved) == Counter((r["key"], r["value"]) for r in committed)
    keys = sorted({r["key"] for r in moved})
    java = dict(zip(keys, java_partitions(tools, [k.encode() for k in keys], 5, tmp_path)))
    assert all(r["partition"] == java[r["key"]] for r in moved)
    for key in keys:  # each key's records in their order
        in_source = [r["value"] for r in sorted(committed, key=lambda r: r["offset"]) if r["key"] == key]
        in_target = [r["value"] for r in sorted(moved, key=lambda r: r["offset"]) if r["key"] == key]
        assert in_source == in_target
    original = {r["value"]: (r["headers"], r["timestamp"], r["timestamp_type"]) for r in committed}
    assert {r["value"]: (r["headers"], r["timestamp"], r["timestamp_type"]) for r in moved} == original
    assert plan.topic_id  # the id found in the metadata log, as partition.metadata holds it

    # --compact: each key's last committed record alone, where the Java partitioner puts the key
    (compact,) = tools.consume(broker.bootstrap, [{"kind": "read", "topic": COMPACTED, "isolation": "read_committed"}])
    last = {r["key"]: r["value"] for r in sorted(committed, key=lambda r: (r["partition"], r["offset"]))}
    assert {r["key"]: r["value"] for r in compact["records"]} == last
    assert len(compact["records"]) == len(last) and all(r["partition"] == java[r["key"]] for r in compact["records"])

    # the group resumes on the target: nothing it has not consumed is missed
    csv_path = groups / f"{GROUP}.csv"
    reset = tools.java(
        [
            "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
            "--bootstrap-server",
            broker.bootstrap,
            "--group",
            GROUP,
            "--reset-offsets",
            "--from-file",
            str(csv_path),
            "--execute",
        ]
    )
    assert TARGET in reset.stdout
    (after,) = tools.consume(broker.bootstrap, [{**group_task, "topic": TARGET}])
    seen_before = Counter(r["value"] for r in before["records"])
    seen_after = Counter(r["value"] for r in after["records"])
    assert set(seen_before) | set(seen_after) == {r["value"] for r in committed}  # nothing missed
    assert len(csv_path.read_text().split()) == 5  # topic,partition,offset of each new partition
    assert 0 < len(seen_before) < len(committed)
    overlap = sum((seen_before & seen_after).values())
    report = json.loads((tmp_path / "report.json").read_text())
    assert overlap == sum(g["reread"] for g in report["groups"][GROUP])  # read again: what kafkalog said
    mapped = pq.read_table(str(offset_map)).to_pylist()
    assert len(mapped) == len(committed)
