"""`kafkalog export` against a real Kafka broker and Kafka's own Java clients: keyed JSON values from
a transactional producer (commits and aborts) and a plain one (tombstones); the log dir copied from
the stopped broker is exported as of an offset, then brought up to date incrementally, then again
after more records were produced; each table must be what Kafka's Java consumer with
isolation.level=read_committed reads, keeping the last value per key, up to the same point. The
time lookup is compared with the broker's own offsetsForTimes."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pytest

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

    rows = pa.table(DeltaTable(path).scan()).to_pylist()  # scan(): to_pyarrow_table() refuses deletion vectors
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
    running_broker: Broker, kafka_tools: KafkaTools, spark, tmp_path, monkeypatch
):
    """The first and third exports take the latest table's range path (a range per segment or index
    entry, a map handed on every few keys), the second the one-task path."""
    from kafkalog import tuning

    broker, tools = running_broker, kafka_tools
    ranges = {"LATEST_TASK_RECORDS": 2, "RANGE_BYTES": 1, "COMBINE_ROWS": 3}
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
    with monkeypatch.context() as patched:
        for knob, value in ranges.items():
            patched.setattr(tuning, knob, value)
        first = export(spark, log_dir, TOPIC, table, as_of_offset=as_of, incremental=True)
    assert first.committed and delta_table(table) == consumer_table(read, as_of)
    second = export(spark, log_dir, TOPIC, table, incremental=True)
    assert second.committed and delta_table(table) == consumer_table(read)
    assert {p: e for p, e in second.end_offsets.items()} == {int(p): e for p, e in read["end"].items()}

    tools.produce(broker.bootstrap, workload(100))
    (read,) = tools.consume(broker.bootstrap, [{"kind": "read", "topic": TOPIC, "isolation": "read_committed"}])
    log_dir = offline_copy(broker, tmp_path / "copy-2")
    with monkeypatch.context() as patched:
        for knob, value in ranges.items():
            patched.setattr(tuning, knob, value)
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


# -- decoded values: Avro and Protobuf in Confluent's wire format, schemas in `_schemas`, Debezium --

AVRO_TOPIC, PROTO_TOPIC, CDC_TOPIC = "exp-avro", "exp-proto", "exp-cdc"
AVRO_V1 = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}
AVRO_V2 = {**AVRO_V1, "fields": [*AVRO_V1["fields"], {"name": "qty", "type": "int", "default": 1}]}
PROTO_TEXT = 'syntax = "proto3";\npackage exp;\nmessage Reading {\n  string sensor = 1;\n  double celsius = 2;\n}\n'


def reading_class():
    """The Protobuf class of PROTO_TEXT, built from its descriptor by hand (not by kafkalog's protoc)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    file = descriptor_pb2.FileDescriptorProto(name="reading.proto", package="exp", syntax="proto3")
    message = file.message_type.add(name="Reading")
    message.field.add(name="sensor", number=1, type=9, label=1)  # string
    message.field.add(name="celsius", number=2, type=1, label=1)  # double
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("exp.Reading"))


def framed(schema_id: int, payload: bytes, *, message_indexes: bytes = b"") -> str:
    """Confluent's wire format (magic 0, the 4-byte schema id, Protobuf's message indexes), in base64."""
    import base64

    return base64.b64encode(b"\0" + schema_id.to_bytes(4, "big") + message_indexes + payload).decode()


def avro_frame(schema_id: int, schema: dict, value: dict) -> str:
    import io

    import fastavro

    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return framed(schema_id, out.getvalue())


def registered(subject: str, version: int, schema_id: int, schema: str, schema_type: str | None = None) -> dict:
    """A `_schemas` record as Schema Registry writes it."""
    key = {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}
    value = {"subject": subject, "version": version, "id": schema_id, "schema": schema, "deleted": False}
    if schema_type:
        value["schemaType"] = schema_type
    return {"key": json.dumps(key, separators=(",", ":")), "value": json.dumps(value)}


def decoded_workload() -> list[dict]:
    subject = f"{AVRO_TOPIC}-value"
    schemas = [
        registered(subject, 1, 1, json.dumps(AVRO_V1)),
        registered(subject, 2, 2, json.dumps(AVRO_V2)),
        registered(f"{PROTO_TOPIC}-value", 1, 3, PROTO_TEXT, "PROTOBUF"),
    ]
    avro = [
        {"key": f"o{i % 5}", "value_base64": avro_frame(1, AVRO_V1, {"id": i, "item": f"item-{i}"})} for i in range(8)
    ]
    avro += [
        {"key": f"o{i % 5}", "value_base64": avro_frame(2, AVRO_V2, {"id": i, "item": f"item-{i}", "qty": i})}
        for i in range(8, 12)
    ]
    avro.append({"key": "bad", "value_base64": framed(99, b"\x02")})  # a schema id no registry holds
    reading = reading_class()
    proto = [
        {
            "key": f"s{i % 3}",
            "value_base64": framed(
                3, reading(sensor=f"s{i % 3}", celsius=i / 2).SerializeToString(), message_indexes=b"\0"
            ),
        }
        for i in range(7)
    ]

    def event(op: str, row_id: int, before, after) -> str:
        return json.dumps({"before": before, "after": after, "op": op, "ts_ms": T0, "source": {"table": "users"}})

    cdc = []
    for i in range(4):
        cdc.append({"key": json.dumps({"id": i}), "value": event("c", i, None, {"id": i, "name": f"u{i}"})})
    cdc.append({"key": json.dumps({"id": 1}), "value": event("u", 1, {"id": 1, "name": "u1"}, {"id": 1, "name": "v1"})})
    cdc.append({"key": json.dumps({"id": 2}), "value": event("d", 2, {"id": 2, "name": "u2"}, None)})
    cdc.append({"key": json.dumps({"id": 2}), "value": None})  # the tombstone that follows a delete
    cdc.append({"key": json.dumps({"id": 3}), "value": event("d", 3, {"id": 3, "name": "u3"}, None)})  # no tombstone
    return [
        {"topic": "_schemas", "mode": "idempotent", "groups": [{"records": schemas}]},
        {"topic": AVRO_TOPIC, "mode": "idempotent", "groups": [{"records": avro}]},
        {"topic": PROTO_TOPIC, "mode": "idempotent", "groups": [{"records": proto}]},
        {"topic": CDC_TOPIC, "mode": "idempotent", "groups": [{"records": cdc}]},
    ]


def last_values(read: dict) -> dict:
    """The Java consumer's last value per (partition, key), as bytes (None for a tombstone)."""
    import base64

    last = {}
    for r in read["records"]:
        last[r["partition"], r["key"]] = None if r["value_base64"] is None else base64.b64decode(r["value_base64"])
    return last


def parquet_rows(path: str) -> dict:
    import pyarrow.parquet as pq

    rows = pq.read_table(path).to_pylist()
    assert len({(r["partition"], r["key"]) for r in rows}) == len(rows)
    return {(r["partition"], r["key"]): r["value"] for r in rows}


def test_export_decodes_avro_protobuf_and_debezium_as_the_java_consumer_reads_them(
    running_broker: Broker, kafka_tools: KafkaTools, spark, tmp_path
):
    import io

    import fastavro

    broker, tools = running_broker, kafka_tools
    compact = {"cleanup.policy": "compact"}
    topics = [
        {"name": "_schemas", "partitions": 1, "configs": compact},
        {"name": AVRO_TOPIC, "partitions": 2, "configs": compact},
        {"name": PROTO_TOPIC, "partitions": 1, "configs": compact},
        {"name": CDC_TOPIC, "partitions": 1, "configs": compact},
    ]
    tools.produce(broker.bootstrap, decoded_workload(), topics)
    reads = tools.consume(
        broker.bootstrap,
        [{"kind": "read", "topic": t, "isolation": "read_committed"} for t in (AVRO_TOPIC, PROTO_TOPIC, CDC_TOPIC)],
    )
    log_dir = offline_copy(broker, tmp_path / "copy")

    # Avro: each value read with the schema its id names, resolved to the subject's latest version
    writers = {1: fastavro.parse_schema(AVRO_V1), 2: fastavro.parse_schema(AVRO_V2)}
    reader = fastavro.parse_schema(AVRO_V2)
    want = {}
    for (p, key), data in last_values(reads[0]).items():
        if key != "bad":
            want[p, key] = fastavro.schemaless_reader(
                io.BytesIO(data[5:]), writers[int.from_bytes(data[1:5], "big")], reader
            )
    assert len(want) == 5  # o0..o4, over both partitions
    out = str(tmp_path / "orders")
    with pytest.warns(UserWarning, match="1 records did not decode"):
        result = export(
            spark,
            log_dir,
            AVRO_TOPIC,
            out,
            format="parquet",
            key_format="string",
            value_format="avro",
            on_decode_error="dead-letter",
        )
    assert parquet_rows(out) == want
    assert result.dead_letters == 1
    import pyarrow.parquet as pq

    (dead,) = pq.read_table(out + "_dead_letters").to_pylist()
    assert dead["key"] == b"bad" and dead["value"] == b"\0\0\0\0\x63\x02" and "99" in dead["error"]

    # Protobuf
    reading = reading_class()
    want = {}
    for k, data in last_values(reads[1]).items():
        message = reading.FromString(data[6:])  # magic, id, one message index
        want[k] = {"sensor": message.sensor, "celsius": message.celsius}
    assert len(want) == 3
    out = str(tmp_path / "readings")
    export(spark, log_dir, PROTO_TOPIC, out, format="parquet", key_format="string", value_format="protobuf")
    assert parquet_rows(out) == want

    # Debezium: op d and the key-only tombstone delete the key; c, r, u upsert `after`
    want = {}
    for k, data in last_values(reads[2]).items():
        event = None if data is None else json.loads(data)
        if event is not None and event["op"] != "d":
            want[k] = event["after"]
    assert len(want) == 2  # keys 0 and 1; 2 (delete and tombstone) and 3 (delete alone) are gone
    out = str(tmp_path / "users")
    export(
        spark, log_dir, CDC_TOPIC, out, format="parquet", key_format="string", value_format="json", envelope="debezium"
    )
    assert parquet_rows(out) == want
