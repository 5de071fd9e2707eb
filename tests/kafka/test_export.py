"""`kafkalog export` against a real Kafka broker and Kafka's own Java clients: keyed JSON values from
a transactional producer (commits and aborts) and a plain one (tombstones); the log dir copied from
the stopped broker is exported as of an offset, then brought up to date incrementally, then again
after more records were produced; each table must be what Kafka's Java consumer with
isolation.level=read_committed reads, keeping the last value per key, up to the same point. The
time lookup is compared with the broker's own offsetsForTimes."""

from __future__ import annotations

import json
import shutil

from kafkalog.operations.export import export
from kafkalog.storage.logdir import LogDir
from kafkalog.storage.offsets_for_times import offset_for_timestamp

from .broker import Broker, KafkaTools

TOPIC = "exp-orders"
T0 = 1_700_000_000_000


def records(start: int, count: int, *, tombstone_every: int = 0) -> list[dict]:
    out = []
    for i in range(start, start + count):
        value = None if tombstone_every and i % tombstone_every == 0 else json.dumps({"n": i, "kind": "order"})
        out.append({"key": f"k{i % 7}", "value": value, "timestamp": T0 + 1000 * i})
    return out


def workload(first: int) -> list[dict]:
    """A transactional producer (every third transaction aborted) and a plain one with tombstones."""
    txn = [{"end": "abort" if g % 3 == 1 else "commit", "records": records(first + 4 * g, 4)} for g in range(6)]
    plain = [{"records": records(first + 24 + 3 * g, 3, tombstone_every=4)} for g in range(4)]
    return [
        {"topic": TOPIC, "mode": "transactional", "transactional_id": f"tx-{first}", "groups": txn},
        {"topic": TOPIC, "mode": "idempotent", "groups": plain},
    ]


def consumer_table(read: dict, as_of: dict[int, int] | None = None) -> dict:
    """The last value per (partition, key) of what the Java consumer read, up to `as_of` (exclusive)."""
    last: dict = {}
    for r in read["records"]:
        if as_of is None or r["offset"] < as_of[r["partition"]]:
            last[r["partition"], r["key"]] = r["value"]
    return {k: v for k, v in last.items() if v is not None}


def delta_table(path: str) -> dict:
    from deltalake import DeltaTable

    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    assert len({(r["partition"], r["key"]) for r in rows}) == len(rows)
    return {(r["partition"], r["key"].decode()): r["value"].decode() for r in rows}


def offline_copy(broker: Broker, target) -> str:
    """The broker's log dir, copied while it is stopped (then it runs again)."""
    broker.stop()
    assert broker.clean_shutdown_marker
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(broker.log_dir, target, ignore=shutil.ignore_patterns(".lock"))
    broker.start()
    return str(target)


def test_export_matches_the_java_read_committed_consumer(
    running_broker: Broker, kafka_tools: KafkaTools, spark, tmp_path
):
    broker, tools = running_broker, kafka_tools
    tools.produce(
        broker.bootstrap, workload(0), [{"name": TOPIC, "partitions": 2, "configs": {"cleanup.policy": "compact"}}]
    )
    (read,) = tools.consume(broker.bootstrap, [{"kind": "read", "topic": TOPIC, "isolation": "read_committed"}])
    aborted = sum(g["end"] == "abort" for g in workload(0)[0]["groups"])
    assert aborted and any(r["value"] is None for r in read["records"])
    times = [T0 + 1000 * i for i in (0, 9, 17, 30)]
    answers = tools.consume(
        broker.bootstrap,
        [{"kind": "times", "topic": TOPIC, "partition": p, "timestamps": times} for p in (0, 1)],
    )
    log_dir = offline_copy(broker, tmp_path / "copy-1")

    log = LogDir.open(log_dir)
    for p, answer in enumerate(answers):
        for t in times:
            assert offset_for_timestamp(log.partition(TOPIC, p).segments, t) == answer["offsets"][str(t)], (p, t)

    table = str(tmp_path / "orders")
    as_of = {int(p): end // 2 for p, end in read["end"].items()}
    first = export(spark, log_dir, TOPIC, table, as_of_offset=as_of, incremental=True)
    assert first.committed and delta_table(table) == consumer_table(read, as_of)
    second = export(spark, log_dir, TOPIC, table, incremental=True)
    assert second.committed and delta_table(table) == consumer_table(read)
    assert {p: e for p, e in second.end_offsets.items()} == {int(p): e for p, e in read["end"].items()}

    tools.produce(broker.bootstrap, workload(100))
    (read,) = tools.consume(broker.bootstrap, [{"kind": "read", "topic": TOPIC, "isolation": "read_committed"}])
    log_dir = offline_copy(broker, tmp_path / "copy-2")
    third = export(spark, log_dir, TOPIC, table, incremental=True)
    assert third.committed and delta_table(table) == consumer_table(read)
    assert {r.partition: r.start for r in third.ranges} == second.end_offsets
    assert not export(spark, log_dir, TOPIC, table, incremental=True).committed
    through_spark = (
        spark.read.format("delta")
        .load(table)
        .selectExpr("partition", "CAST(key AS STRING) k", "CAST(value AS STRING) v")
    )
    assert {(r["partition"], r["k"]): r["v"] for r in through_spark.collect()} == consumer_table(read)
