"""Keys and values decoded on executors: schemas read from the log dir's own `_schemas` partition,
a dead-letter column or a located error for what does not decode, JSON types inferred, Debezium."""

from __future__ import annotations

import datetime as dt
import io
import json

import fastavro
import pytest

from kafkalog.codec.confluent import frame
from kafkalog.codec.records import Record
from kafkalog.codec.value_format import ValueFormat
from kafkalog.errors import KafkaLogError, UndecodableValueError
from kafkalog.spark.errors import from_spark_error
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.log_writer import PartitionWriter
from kafkalog.storage.schemas import read_schemas_partition

pytestmark = pytest.mark.spark
T0 = 1_700_000_000_000
ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}


def _write(root, topic: str, pairs: list[tuple[bytes | None, bytes | None]]) -> None:
    fs = LogFileSystem.for_path(str(root))[0]
    writer = PartitionWriter(fs, str(root), topic, 0, segment_bytes=1 << 20, segment_ms=1 << 40, now_ms=T0)
    writer.append_records([Record(i, T0 + i, k, v) for i, (k, v) in enumerate(pairs)])
    writer.close()


def _avro(value: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(ORDER), value)
    return frame(1, out.getvalue())


def test_avro_values_with_schemas_from_the_log_dir_and_a_dead_letter_column(spark, tmp_path):
    root = tmp_path / "logs"
    root.mkdir()
    key = {"keytype": "SCHEMA", "subject": "orders-value", "version": 1, "magic": 1}
    value = {"subject": "orders-value", "version": 1, "id": 1, "schema": json.dumps(ORDER), "deleted": False}
    _write(root, "_schemas", [(json.dumps(key).encode(), json.dumps(value).encode())])
    at = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.timezone.utc)
    _write(root, "orders", [(b"k1", _avro({"id": "a", "at": at})), (b"k2", None), (b"k3", b"\x00\x00\x00\x00\x01")])
    from kafkalog.spark import read_records
    from kafkalog.spark.decode import decode_records

    registry = read_schemas_partition(str(root))
    records = read_records(spark, str(root), topics=["orders"])
    formats = dict(key=ValueFormat("string"), value=ValueFormat("avro").for_topic("orders", is_key=False))
    decoded = decode_records(records, **formats, registry=registry, on_error="dead-letter")
    assert decoded.schema["value"].dataType.simpleString() == "struct<id:string,at:timestamp>"
    rows = [r.asDict(recursive=True) for r in decoded.orderBy("offset").collect()]
    assert [(r["key"], r["value"], r["_decodeError"]) for r in rows] == [
        ("k1", {"id": "a", "at": at.astimezone().replace(tzinfo=None)}, None),
        ("k2", None, None),  # a tombstone decodes to null, and is no error
        ("k3", None, "value: the Avro payload ends inside a value of schema id 1"),
    ]
    assert rows[0]["headers"] is None and rows[0]["topic"] == "orders"  # the other columns pass through

    failing = decode_records(records, **formats, registry=registry)
    with pytest.raises(Exception) as raised:
        failing.collect()
    error = from_spark_error(raised.value)
    assert isinstance(error, UndecodableValueError)
    assert error.offset == 2
    assert "topic orders partition 0, value: the Avro payload ends inside" in error.message


def test_json_inferred_and_debezium_envelopes(spark):
    from pyspark.sql import types as T

    from kafkalog.spark.decode import decode_records, json_format

    events = [
        {"before": None, "after": {"id": 1, "name": "a"}, "op": "c"},
        {"before": {"id": 1, "name": "a"}, "after": {"id": 1, "name": "b", "vip": True}, "op": "u"},
        {"before": {"id": 1, "name": "b"}, "after": None, "op": "d"},
        None,  # the tombstone Debezium writes after a delete
        {"op": "t"},
    ]
    schema = T.StructType(
        [T.StructField("key", T.BinaryType()), T.StructField("value", T.BinaryType())]
        + [T.StructField("topic", T.StringType()), T.StructField("partition", T.IntegerType())]
        + [T.StructField("offset", T.LongType())]
    )
    rows = [(b"1", None if e is None else json.dumps(e).encode(), "db.users", 0, i) for i, e in enumerate(events)]
    df = spark.createDataFrame(rows, schema)
    decoded = decode_records(df, value=ValueFormat("json"), envelope="debezium", on_error="dead-letter")
    assert decoded.schema["value"].dataType.simpleString() == "struct<id:bigint,name:string,vip:boolean>"
    got = [
        (r["_operation"], r["value"] and r["value"].asDict(), r["_decodeError"])
        for r in decoded.orderBy("offset").collect()
    ]
    assert got == [
        ("upsert", {"id": 1, "name": "a", "vip": None}, None),
        ("upsert", {"id": 1, "name": "b", "vip": True}, None),
        ("delete", {"id": 1, "name": "b", "vip": None}, None),
        ("delete", None, None),
        (None, None, "value: Debezium event with op 't': only c, r, u and d change one key's row"),
    ]
    given = decode_records(df, value=json_format(spark, "after STRUCT<id: INT>, op STRING"), on_error="dead-letter")
    assert given.schema["value"].dataType.simpleString() == "struct<after:struct<id:int>,op:string>"
    assert given.orderBy("offset").first()["value"].asDict(recursive=True) == {"after": {"id": 1}, "op": "c"}
    with pytest.raises(KafkaLogError, match="the DataFrame has no key column to decode"):
        decode_records(df.drop("key"), key=ValueFormat("string"))
    with pytest.raises(KafkaLogError, match="decoding would change nothing"):
        decode_records(df)
    with pytest.raises(KafkaLogError, match="on_error must be one of fail, dead-letter"):
        decode_records(df, value=ValueFormat("binary"), on_error="skip")
