"""Keys and values decoded by format, against real encoders: fastavro writes the Avro, classes that
protoc generated (grpc_tools, --python_out) write the Protobuf, json writes the JSON; Confluent's
frame around them as its serializers write it. Confluent's own (Java) serializer is not used: it is
published only on packages.confluent.io, which `mvn dependency:get` could not reach from here."""

from __future__ import annotations

import datetime as dt
import decimal
import importlib
import importlib.resources
import io
import json
import sys

import fastavro
import pyarrow as pa
import pytest

from kafkalog.codec.confluent import frame
from kafkalog.codec.debezium import DELETE, UPSERT, debezium_change, debezium_row_type
from kafkalog.codec.schema_registry import read_schemas_topic
from kafkalog.codec.value_format import ValueDecoder, ValueFormat
from kafkalog.codec.value_types import JSON_TEXT, avro_type, conform, infer_json_type, merge_types, settle
from kafkalog.errors import KafkaLogError, UndecodableValueError
from kafkalog.storage.schemas import compile_protobuf_schemas


def registration(subject, version, schema_id, schema, deleted=False, **extra) -> tuple[bytes, bytes]:
    key = {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}
    value = {"subject": subject, "version": version, "id": schema_id, "schema": schema, "deleted": deleted, **extra}
    return json.dumps(key).encode(), json.dumps(value).encode()


def avro_bytes(schema: dict, value, named=None) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema, named_schemas=named), value)
    return out.getvalue()


# -- Avro -------------------------------------------------------------------------------------------

ADDRESS = {"type": "record", "name": "Address", "namespace": "shop", "fields": [{"name": "city", "type": "string"}]}
ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "ship_to", "type": ["null", "shop.Address"]},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tags", "type": {"type": "map", "values": "long"}},
        {"name": "lines", "type": {"type": "array", "items": "string"}},
        {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 2}},
        {"name": "either", "type": ["null", "int", "string"]},
    ],
}
ORDER_V2 = {**ORDER_V1, "fields": [*ORDER_V1["fields"], {"name": "note", "type": ["null", "string"], "default": None}]}
ADDRESS_REF = [{"name": "shop.Address", "subject": "address", "version": 1}]


@pytest.fixture(scope="module")
def avro_registry():
    return read_schemas_topic(
        [
            registration("address", 1, 1, json.dumps(ADDRESS)),
            registration("orders-value", 1, 2, json.dumps(ORDER_V1), references=ADDRESS_REF),
            registration("orders-value", 2, 3, json.dumps(ORDER_V2), references=ADDRESS_REF),
            # a writer schema whose reference was hard-deleted
            registration("broken-value", 1, 4, '"string"', references=[{"name": "x", "subject": "gone", "version": 1}]),
            # v1 soft-deleted later: its id still decodes what was written with it
            registration("orders-value", 1, 2, json.dumps(ORDER_V1), deleted=True, references=ADDRESS_REF),
        ]
    )


ORDER = {
    "id": "o-1",
    "qty": 3,
    "ship_to": {"city": "Lyon"},
    "status": "PAID",
    "amount": decimal.Decimal("12.50"),
    "day": dt.date(2026, 11, 27),
    "at": dt.datetime(2026, 11, 27, 10, 0, 0, 123000, tzinfo=dt.timezone.utc),
    "tags": {"a": 1},
    "lines": ["x", "y"],
    "hash": b"\x01\x02",
    "either": "text",
}


def test_avro_type_follows_spark_from_avro(avro_registry):
    decoder = ValueDecoder(ValueFormat("avro", subject="orders-value"), avro_registry)
    t = decoder.arrow_type
    assert decoder.reader.id == 3  # the latest live version is the reader
    assert t.field("ship_to").type == pa.struct([("city", pa.string())])
    assert t.field("status").type == pa.string()
    assert t.field("amount").type == pa.decimal128(9, 2)
    assert t.field("day").type == pa.date32()
    assert t.field("at").type == pa.timestamp("us", tz="UTC")
    assert t.field("tags").type == pa.map_(pa.string(), pa.int64())
    assert t.field("lines").type == pa.list_(pa.string())
    assert t.field("hash").type == pa.binary()
    assert t.field("either").type == pa.struct([("member0", pa.int32()), ("member1", pa.string())])
    assert t.field("note").type == pa.string()


def test_avro_written_with_a_soft_deleted_older_schema_reads_into_the_latest(avro_registry):
    decoder = ValueDecoder(ValueFormat("avro", subject="orders-value"), avro_registry)
    named: dict = {}
    fastavro.parse_schema(ADDRESS, named_schemas=named)
    value = decoder.decode(frame(2, avro_bytes(ORDER_V1, ORDER, named)))
    assert value["note"] is None  # v2's field, its default
    assert value["tags"] == [("a", 1)]
    assert value["either"] == {"member0": None, "member1": "text"}
    assert {k: v for k, v in value.items() if k not in ("tags", "either", "note")} == {
        k: v for k, v in ORDER.items() if k not in ("tags", "either")
    }
    # the decoded value converts to its Arrow type as is
    assert pa.array([value], type=decoder.arrow_type)[0].as_py()["amount"] == decimal.Decimal("12.50")


def test_avro_that_does_not_decode_says_why(avro_registry):
    decoder = ValueDecoder(ValueFormat("avro", schema_id=3), avro_registry)
    named: dict = {}
    fastavro.parse_schema(ADDRESS, named_schemas=named)
    good = frame(3, avro_bytes(ORDER_V2, {**ORDER, "note": "n"}, named))
    assert decoder.decode(good)["note"] == "n"
    with pytest.raises(UndecodableValueError, match="ends inside a value of schema id 3"):
        decoder.decode(good[:-3])
    with pytest.raises(UndecodableValueError, match="1 bytes after the Avro value"):
        decoder.decode(good + b"\x00")
    with pytest.raises(UndecodableValueError, match="schema id 99 is not in the registry"):
        decoder.decode(frame(99, b""))
    with pytest.raises(UndecodableValueError, match="schema id 4: subject 'gone' has no version 1"):
        decoder.decode(frame(4, b""))
    assert decoder.decode_or_error(b"\x07rest")[1] == "byte 0: magic byte 7, expected 0 (Confluent's wire format)"
    assert decoder.decode(None) is None  # a tombstone is no error


def test_an_avro_union_of_records_keeps_the_branch_each_record_was_written_as():
    card = {"type": "record", "name": "Card", "fields": [{"name": "last4", "type": "string"}]}
    iban = {"type": "record", "name": "Iban", "fields": [{"name": "last4", "type": "string"}]}
    payment = {"type": "record", "name": "Payment", "fields": [{"name": "by", "type": [card, iban, "long"]}]}
    registry = read_schemas_topic([registration("payments-value", 1, 1, json.dumps(payment))])
    decoder = ValueDecoder(ValueFormat("avro", schema_id=1), registry)
    # the two records have the same shape: only their names tell them apart
    by_iban = frame(1, avro_bytes(payment, {"by": ("Iban", {"last4": "1234"})}))
    assert decoder.decode(by_iban) == {"by": {"member0": None, "member1": {"last4": "1234"}, "member2": None}}
    assert decoder.decode(frame(1, avro_bytes(payment, {"by": 7})))["by"]["member2"] == 7


# -- Protobuf ---------------------------------------------------------------------------------------

COMMON_PROTO = 'syntax = "proto3";\npackage common;\nmessage Money { string currency = 1; int64 units = 2; }\n'
ORDERS_PROTO = """syntax = "proto3";
package shop;
import "common.proto";
import "google/protobuf/timestamp.proto";
enum Status { NEW = 0; PAID = 1; }
message Order {
  string id = 1;
  repeated Line lines = 2;
  map<string, int32> tags = 3;
  google.protobuf.Timestamp at = 4;
  Status status = 5;
  optional int32 priority = 6;
  common.Money total = 7;
  uint64 big = 8;
  message Line { string sku = 1; double price = 2; }
}
message Refund { string order_id = 1; }
"""


@pytest.fixture(scope="module")
def protobuf(tmp_path_factory):
    """(registry, descriptor sets, the generated module of orders.proto)."""
    from grpc_tools import protoc

    tmp = tmp_path_factory.mktemp("proto")
    (tmp / "common.proto").write_text(COMMON_PROTO)
    (tmp / "orders.proto").write_text(ORDERS_PROTO)
    well_known = str(importlib.resources.files("grpc_tools") / "_proto")
    args = ["protoc", f"-I{tmp}", f"-I{well_known}", f"--python_out={tmp}", "common.proto", "orders.proto"]
    assert protoc.main(args) == 0
    sys.path.insert(0, str(tmp))
    try:
        orders_pb2 = importlib.import_module("orders_pb2")
    finally:
        sys.path.remove(str(tmp))
    registry = read_schemas_topic(
        [
            registration("common", 1, 10, COMMON_PROTO, schemaType="PROTOBUF"),
            registration(
                "orders-value",
                1,
                11,
                ORDERS_PROTO,
                schemaType="PROTOBUF",
                references=[{"name": "common.proto", "subject": "common", "version": 1}],
            ),
        ]
    )
    return registry, compile_protobuf_schemas(registry), orders_pb2


def test_protobuf_type_and_values(protobuf):
    registry, compiled, pb = protobuf
    decoder = ValueDecoder(ValueFormat("protobuf", subject="orders-value"), registry, compiled)
    t = decoder.arrow_type
    assert t.field("lines").type == pa.list_(pa.struct([("sku", pa.string()), ("price", pa.float64())]))
    assert t.field("tags").type == pa.map_(pa.string(), pa.int32())
    assert t.field("at").type == pa.timestamp("us", tz="UTC")
    assert t.field("status").type == pa.string()
    assert t.field("big").type == pa.decimal128(20, 0)
    assert t.field("total").type == pa.struct([("currency", pa.string()), ("units", pa.int64())])

    message = pb.Order(id="o-1", status=pb.PAID, big=2**64 - 1)
    message.lines.add(sku="s", price=1.5)
    message.tags["k"] = 7
    message.at.FromDatetime(dt.datetime(2026, 11, 27, 10, 0))
    message.total.currency = "EUR"
    value = decoder.decode(frame(11, message.SerializeToString(), (0,)))
    assert value == {
        "id": "o-1",
        "lines": [{"sku": "s", "price": 1.5}],
        "tags": [("k", 7)],
        "at": dt.datetime(2026, 11, 27, 10, 0, tzinfo=dt.timezone.utc),
        "status": "PAID",
        "priority": None,  # optional and unset: null, not 0
        "total": {"currency": "EUR", "units": 0},
        "big": decimal.Decimal(2**64 - 1),
    }
    assert pa.array([value], type=t)[0].as_py()["big"] == decimal.Decimal(2**64 - 1)


def test_protobuf_message_indexes_pick_the_message_nested_ones_included(protobuf):
    registry, compiled, pb = protobuf
    line = ValueDecoder(ValueFormat("protobuf", schema_id=11, message="shop.Order.Line"), registry, compiled)
    # Order's nested Line is [0, 0]: the map entry protoc makes for `tags` is not counted
    assert line.decode(frame(11, pb.Order.Line(sku="a").SerializeToString(), (0, 0))) == {"sku": "a", "price": 0.0}
    refund = ValueDecoder(ValueFormat("protobuf", schema_id=11, message="shop.Refund"), registry, compiled)
    assert refund.decode(frame(11, pb.Refund(order_id="o").SerializeToString(), (1,))) == {"order_id": "o"}
    # a Refund where the column holds Orders is an error, not an Order with every field empty
    order = ValueDecoder(ValueFormat("protobuf", schema_id=11), registry, compiled)
    with pytest.raises(UndecodableValueError, match="message shop.Refund, the column holds shop.Order"):
        order.decode(frame(11, pb.Refund(order_id="o").SerializeToString(), (1,)))
    with pytest.raises(UndecodableValueError, match=r"message indexes \[2\] are not in schema id 11"):
        order.decode(frame(11, b"", (2,)))
    with pytest.raises(UndecodableValueError, match="does not decode with schema id 11"):
        order.decode(frame(11, b"\x0a\x05ab", (0,)))
    with pytest.raises(UndecodableValueError, match="schema id 10 message common.Money"):
        order.decode(frame(10, b"", (0,)))


def test_a_protobuf_schema_protoc_refuses_makes_its_values_say_so():
    registry = read_schemas_topic([registration("bad", 1, 5, "syntax = 'proto3'; message {", schemaType="PROTOBUF")])
    compiled = compile_protobuf_schemas(registry)
    assert "protoc cannot compile schema id 5" in compiled[5]
    with pytest.raises(UndecodableValueError, match="schema id 5 is not compiled: protoc cannot compile"):
        ValueDecoder(ValueFormat("protobuf", schema_id=5), registry, compiled)


def test_a_type_that_contains_itself_is_json_text_below_its_first_level():
    node = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}],
    }
    proto = 'syntax = "proto3";\nmessage Node { int32 v = 1; Node next = 2; }\n'
    registry = read_schemas_topic(
        [registration("avro", 1, 1, json.dumps(node)), registration("proto", 1, 2, proto, schemaType="PROTOBUF")]
    )
    avro = ValueDecoder(ValueFormat("avro", schema_id=1), registry)
    assert avro.arrow_type == pa.struct([("v", pa.int32()), ("next", JSON_TEXT)])
    wide = {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 1}
    assert conform(decimal.Decimal("1.5"), avro_type(fastavro.parse_schema(wide))) == "1.5"
    value = avro.decode(frame(1, avro_bytes(node, {"v": 1, "next": {"v": 2, "next": None}})))
    assert value == {"v": 1, "next": '{"v": 2, "next": null}'}
    compiled = compile_protobuf_schemas(registry)
    protobuf = ValueDecoder(ValueFormat("protobuf", schema_id=2), registry, compiled)
    assert protobuf.arrow_type == pa.struct([("v", pa.int32()), ("next", JSON_TEXT)])
    message = protobuf._message(2, (0,))
    from google.protobuf import message_factory

    cls = message_factory.GetMessageClass(message)
    data = cls(v=1, next=cls(v=2)).SerializeToString()
    assert protobuf.decode(frame(2, data, (0,))) == {"v": 1, "next": '{"v": 2, "next": null}'}


# -- JSON Schema, JSON, strings ---------------------------------------------------------------------

USER_JSON_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": ["string", "null"]},
        "emails": {"type": "array", "items": {"type": "string"}},
        "address": {"type": "object", "properties": {"city": {"type": "string"}}},
        "anything": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    },
}


def test_json_schema_gives_a_type_where_it_is_simple_and_json_text_elsewhere():
    registry = read_schemas_topic([registration("users-value", 1, 7, json.dumps(USER_JSON_SCHEMA), schemaType="JSON")])
    decoder = ValueDecoder(ValueFormat("jsonschema").for_topic("users", is_key=False), registry)
    assert decoder.arrow_type == pa.struct(
        [
            ("id", pa.int64()),
            ("name", pa.string()),
            ("emails", pa.list_(pa.string())),
            ("address", pa.struct([("city", pa.string())])),
            ("anything", JSON_TEXT),
        ]
    )
    value = {"id": 1, "name": None, "emails": ["a@b"], "address": {"city": "Oslo"}, "anything": 5}
    decoded = decoder.decode(frame(7, json.dumps(value).encode()))
    assert decoded == {**value, "anything": "5"}
    assert decoder.decode_or_error(frame(7, b'{"id": "one"}'))[1] == (
        "does not fit the column type at $.id: expected a 64-bit integer, got 'one'"
    )


def test_plain_json_string_and_binary():
    t = pa.struct([("n", pa.int64())])
    assert ValueDecoder(ValueFormat("json", json_type=t)).decode(b'{"n": 2, "more": 1}') == {"n": 2}
    assert ValueDecoder(ValueFormat("json", json_type=t)).decode_or_error(b"{")[1].startswith("not JSON")
    assert ValueDecoder(ValueFormat("string")).decode("é".encode()) == "é"
    assert "not UTF-8" in ValueDecoder(ValueFormat("string")).decode_or_error(b"\xff")[1]
    assert ValueDecoder(ValueFormat("binary")).decode(b"\xff") == b"\xff"


def test_json_types_are_inferred_and_merged():
    inferred = None
    for value in [{"a": 1, "b": None}, {"a": 2.5, "c": [1]}, {"a": 3, "c": ["x"], "b": None}]:
        t = infer_json_type(value)
        inferred = t if inferred is None else merge_types(inferred, t)
    assert settle(inferred) == pa.struct([("a", pa.float64()), ("b", JSON_TEXT), ("c", pa.list_(JSON_TEXT))])


def test_options_that_would_do_nothing_are_refused():
    with pytest.raises(KafkaLogError, match="format 'string' takes no schema_id"):
        ValueFormat("string", schema_id=1)
    with pytest.raises(KafkaLogError, match="unknown format 'xml'"):
        ValueFormat("xml")
    with pytest.raises(KafkaLogError, match="needs json_type"):
        ValueDecoder(ValueFormat("json"))


# -- Debezium ---------------------------------------------------------------------------------------


def test_debezium_envelopes_upsert_and_delete():
    row = {"id": 1, "name": "a"}
    assert debezium_change({"before": None, "after": row, "op": "c"}) == (UPSERT, row)
    assert debezium_change({"before": row, "after": {**row, "name": "b"}, "op": "u"}) == (UPSERT, {**row, "name": "b"})
    assert debezium_change({"before": None, "after": row, "op": "r"}) == (UPSERT, row)
    assert debezium_change({"before": row, "after": None, "op": "d"}) == (DELETE, row)
    assert debezium_change(None) == (DELETE, None)  # the tombstone after a delete
    # the JSON converter with schemas.enable=true wraps the event
    assert debezium_change({"schema": {"type": "struct"}, "payload": {"after": row, "op": "c"}}) == (UPSERT, row)
    with pytest.raises(UndecodableValueError, match="op 't'"):
        debezium_change({"op": "t"})
    with pytest.raises(UndecodableValueError, match="no 'op'"):
        debezium_change({"after": row})


def test_debezium_row_type_is_the_after_field():
    row = pa.struct([("id", pa.int64())])
    envelope = pa.struct([("before", row), ("after", row), ("op", pa.string())])
    assert debezium_row_type(envelope) == row
    assert debezium_row_type(pa.struct([("schema", JSON_TEXT), ("payload", envelope)])) == row
    with pytest.raises(KafkaLogError, match="not a Debezium envelope"):
        debezium_row_type(row)
