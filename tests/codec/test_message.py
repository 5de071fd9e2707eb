"""The message-schema wire format (codec/message.py) and the records decoded with it
(codec/coordinator_records.py, codec/metadata_records.py), on bytes built here by hand, field by
field, from Kafka's message specs."""

from __future__ import annotations

import base64
import struct
import uuid

import pytest

from kafkalog.codec.batch import build_batch
from kafkalog.codec.control import build_end_txn_marker
from kafkalog.codec.coordinator_records import (
    GROUP_RECORDS,
    SHARE_RECORDS,
    TRANSACTION_RECORDS,
    decode_coordinator_record,
    share_partition_start_offsets,
)
from kafkalog.codec.message import Reader, decode, encode, parse_schemas, read_message
from kafkalog.codec.metadata_records import decode_metadata_record
from kafkalog.codec.reader import iter_batches
from kafkalog.codec.records import Record
from kafkalog.errors import CorruptBatchError, TruncatedDataError
from kafkalog.rules.retention import share_group_offsets

TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0").bytes
TOPIC_ID_TEXT = base64.urlsafe_b64encode(TOPIC_ID).decode().rstrip("=")


# -- a writer of the primitives, independent of the reader under test ---------------------------------


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def i8(n):
    return struct.pack(">b", n)


def i16(n):
    return struct.pack(">h", n)


def i32(n):
    return struct.pack(">i", n)


def i64(n):
    return struct.pack(">q", n)


def string(text, compact):
    if text is None:
        return uvarint(0) if compact else i16(-1)
    raw = text.encode()
    return (uvarint(len(raw) + 1) if compact else i16(len(raw))) + raw


def array(items, compact):
    if items is None:
        return uvarint(0) if compact else i32(-1)
    return (uvarint(len(items) + 1) if compact else i32(len(items))) + b"".join(items)


def tagged(*fields):
    return uvarint(len(fields)) + b"".join(uvarint(tag) + uvarint(len(data)) + data for tag, data in fields)


# -- the generic decoder ------------------------------------------------------------------------------

SCHEMAS = parse_schemas(
    """
Sample 0-2 flex1+
  id int32
  name string null0+
  tags []string 1+
  owner {} 1+ null1+
    host string
    port uint16
  extra int64 1+ tag0
  flags []int8 2+ null2+ tag1
"""
)


def test_a_non_flexible_version_reads_int16_strings_and_has_no_tagged_section():
    data = i32(7) + string("n", False)
    assert decode(SCHEMAS["Sample"], 0, data) == {"id": 7, "name": "n"}


def test_a_flexible_version_reads_compact_forms_nested_structs_and_tagged_fields():
    owner = i8(1) + string("h", True) + struct.pack(">H", 65535) + tagged()
    data = i32(7) + string(None, True) + array([string("a", True), string("b", True)], True) + owner
    data += tagged((0, i64(-5)), (1, array([i8(1), i8(-1)], True)), (9, b"\x01\x02"))
    assert decode(SCHEMAS["Sample"], 2, data) == {
        "id": 7,
        "name": None,
        "tags": ["a", "b"],
        "owner": {"host": "h", "port": 65535},
        "extra": -5,
        "flags": [1, -1],
        "_unknownTaggedFields": [{"tag": 9, "data": b"\x01\x02"}],
    }


def test_absent_tagged_fields_and_null_structs_are_left_out_or_none():
    data = i32(1) + string("x", True) + array([], True) + i8(-1) + tagged()
    assert decode(SCHEMAS["Sample"], 1, data) == {"id": 1, "name": "x", "tags": [], "owner": None}


def test_truncated_and_trailing_bytes_are_errors_with_positions():
    data = i32(1) + string("x", True) + array([], True) + i8(-1) + tagged()
    for cut in range(len(data)):
        with pytest.raises(TruncatedDataError) as info:
            decode(SCHEMAS["Sample"], 1, data[:cut])
        assert 0 <= info.value.position <= cut
    with pytest.raises(CorruptBatchError, match="bytes left after the last field") as info:
        decode(SCHEMAS["Sample"], 1, data + b"\x00")
    assert info.value.position == len(data)
    with pytest.raises(CorruptBatchError, match="non-null array"):
        decode(SCHEMAS["Sample"], 1, i32(1) + string("x", True) + uvarint(0) + i8(-1) + tagged())


def test_read_message_reads_behind_what_came_first_with_positions_in_the_whole_buffer():
    data = i16(1) + i32(7) + string("n", False)
    reader = Reader(data, "prefixed")
    assert reader.int16("version") == 1
    assert read_message(reader, SCHEMAS["Sample"], 0) == {"id": 7, "name": "n"}
    assert reader.pos == len(data)
    reader = Reader(data[:-1], "prefixed", 2)
    with pytest.raises(TruncatedDataError, match="prefixed: name declares 1 bytes") as info:
        read_message(reader, SCHEMAS["Sample"], 0)
    assert info.value.position == 6  # the length, after the 2-byte prefix and the int32


def test_strings_read_from_a_memoryview_and_bad_utf8_names_the_string():
    data = i32(7) + string("tópico", False)
    assert decode(SCHEMAS["Sample"], 0, memoryview(data)) == decode(SCHEMAS["Sample"], 0, bytearray(data))
    assert decode(SCHEMAS["Sample"], 0, memoryview(data))["name"] == "tópico"
    with pytest.raises(CorruptBatchError, match=r"name is not valid UTF-8 \(byte 1 of the string\)") as info:
        decode(SCHEMAS["Sample"], 0, memoryview(i32(7) + i16(2) + b"a\xff"))
    assert info.value.position == 4


@pytest.mark.parametrize(
    ("version", "values", "wire"),
    [
        (0, {"id": 7, "name": None}, i32(7) + string(None, False)),
        (
            2,
            {"id": 7, "name": "n", "tags": ["a"], "owner": {"host": "h", "port": 80}, "extra": -5, "flags": None},
            i32(7)
            + string("n", True)
            + array([string("a", True)], True)
            + i8(1)
            + string("h", True)
            + struct.pack(">H", 80)
            + tagged()
            + tagged((0, i64(-5)), (1, uvarint(0))),
        ),
        (
            1,
            {"id": 1, "name": "x", "tags": [], "owner": None},
            i32(1) + string("x", True) + array([], True) + i8(-1) + tagged(),
        ),
    ],
)
def test_encode_writes_the_wire_form_that_decode_reads(version, values, wire):
    assert encode(SCHEMAS["Sample"], version, values) == wire
    assert decode(SCHEMAS["Sample"], version, wire) == values


def test_encode_writes_a_tagged_nullable_struct_with_a_varint_presence():
    schemas = parse_schemas(
        """
Tagged 0 flex0+
  box {} null0+ tag3
    n int8
"""
    )
    boxed = encode(schemas["Tagged"], 0, {"box": {"n": 5}})
    assert boxed == tagged((3, uvarint(1) + i8(5) + tagged()))
    assert encode(schemas["Tagged"], 0, {"box": None}) == tagged((3, uvarint(0)))
    assert encode(schemas["Tagged"], 0, {}) == tagged()
    assert decode(schemas["Tagged"], 0, boxed) == {"box": {"n": 5}}


# -- coordinator records --------------------------------------------------------------------------------


def share_key(record_type, group="sg", partition=3):
    return i16(record_type) + string(group, False) + TOPIC_ID + i32(partition)


def share_batches(first, last):
    return array([i64(first) + i64(last) + i8(2) + i16(1) + tagged()], True)


def share_snapshot(start, *, delivered=None):
    value = i16(0) + i32(0) + i32(5) + i32(1) + i64(start) + i64(1000) + i64(2000) + share_batches(start, start + 9)
    return value + (tagged((0, i32(delivered))) if delivered is not None else tagged())


def share_update(start):
    return i16(0) + i32(0) + i32(2) + i64(start) + share_batches(max(start, 0), max(start, 0) + 4) + tagged()


def test_share_snapshot_and_update_records_decode_with_kafkas_field_names():
    decoded = decode_coordinator_record(SHARE_RECORDS, share_key(0), share_snapshot(40, delivered=3))
    assert decoded["key"] == {"type": 0, "data": {"groupId": "sg", "topicId": TOPIC_ID_TEXT, "partition": 3}}
    assert decoded["value"] == {
        "version": 0,
        "data": {
            "snapshotEpoch": 0,
            "stateEpoch": 5,
            "leaderEpoch": 1,
            "startOffset": 40,
            "deliveryCompleteCount": 3,
            "createTimestamp": 1000,
            "writeTimestamp": 2000,
            "stateBatches": [{"firstOffset": 40, "lastOffset": 49, "deliveryState": 2, "deliveryCount": 1}],
        },
    }
    update = decode_coordinator_record(SHARE_RECORDS, share_key(1), share_update(-1))["value"]["data"]
    assert update["startOffset"] == -1 and update["leaderEpoch"] == 2
    assert decode_coordinator_record(SHARE_RECORDS, share_key(1), None)["value"] is None


def test_unknown_types_and_versions_are_shown_raw_never_an_error():
    unknown = decode_coordinator_record(GROUP_RECORDS, i16(99) + b"xyz", i16(0) + b"abc")
    assert unknown == {"key": {"type": 99, "raw": b"xyz"}, "value": {"version": 0, "raw": b"abc"}}
    newer = decode_coordinator_record(SHARE_RECORDS, share_key(0), i16(7) + b"\x00")
    assert newer["value"] == {"version": 7, "raw": b"\x00"}
    frame = uvarint(1) + uvarint(200) + uvarint(0) + b"\x05"
    assert decode_metadata_record(frame) == {"type": "200", "version": 0, "raw": b"\x05"}


def test_consumer_group_records_of_kip_848_decode():
    key = i16(3) + string("cg", False)
    value = i16(0) + i32(4) + tagged((0, i64(99)))
    assert decode_coordinator_record(GROUP_RECORDS, key, value) == {
        "key": {"type": 3, "data": {"groupId": "cg"}},
        "value": {"version": 0, "data": {"epoch": 4, "metadataHash": 99}},
    }
    key = i16(8) + string("cg", False) + string("m1", False)
    partitions = array([TOPIC_ID + array([i32(0), i32(2)], True) + tagged()], True)
    value = i16(0) + i32(5) + i32(4) + i8(0) + partitions + array([], True) + tagged()
    assert decode_coordinator_record(GROUP_RECORDS, key, value)["value"]["data"] == {
        "memberEpoch": 5,
        "previousMemberEpoch": 4,
        "state": 0,
        "assignedPartitions": [{"topicId": TOPIC_ID_TEXT, "partitions": [0, 2]}],
        "partitionsPendingRevocation": [],
    }


def test_transaction_log_value_v1_with_the_transactions_v2_tagged_fields():
    key = i16(0) + string("tx-1", False)
    partitions = array([string("t", True) + array([i32(0)], True) + tagged()], True)
    value = i16(1) + i64(1000) + i16(3) + i32(60000) + i8(1) + partitions + i64(5) + i64(4)
    value += tagged((0, i64(999)), (2, i16(2)))
    assert decode_coordinator_record(TRANSACTION_RECORDS, key, value) == {
        "key": {"type": 0, "data": {"transactionalId": "tx-1"}},
        "value": {
            "version": 1,
            "data": {
                "producerId": 1000,
                "previousProducerId": 999,
                "producerEpoch": 3,
                "transactionTimeoutMs": 60000,
                "transactionStatus": 1,
                "transactionPartitions": [{"topic": "t", "partitionIds": [0]}],
                "transactionLastUpdateTimestampMs": 5,
                "transactionStartTimestampMs": 4,
                "clientTransactionVersion": 2,
            },
        },
    }


# -- share partition start offsets: the share coordinator's replay ------------------------------------------


def _batch(offset, *records, **kwargs):
    return build_batch([Record(offset + i, 0, k, v) for i, (k, v) in enumerate(records)], base_offset=offset, **kwargs)


def _batches(*raw):
    return [("f", batch) for batch in iter_batches(b"".join(raw))]


def test_share_updates_apply_on_top_of_snapshots_and_tombstones_delete():
    other = share_key(0, group="other", partition=0)
    batches = _batches(
        _batch(0, (share_key(0), share_snapshot(10)), (other, share_snapshot(7))),
        _batch(2, (share_key(1), share_update(25))),
        _batch(3, (share_key(1), share_update(-1))),  # -1: the start offset stays
        _batch(4, (other, None)),  # a tombstone: the state is gone
    )
    assert share_partition_start_offsets(batches) == {("sg", TOPIC_ID_TEXT, 3): 25}
    # a later snapshot replaces what the updates made
    batches += _batches(_batch(5, (share_key(0), share_snapshot(12))))
    assert share_partition_start_offsets(batches) == {("sg", TOPIC_ID_TEXT, 3): 12}


def test_share_records_of_an_aborted_transaction_do_not_count():
    txn = {"producer_id": 9, "producer_epoch": 0, "is_transactional": True}
    batches = _batches(
        _batch(0, (share_key(0), share_snapshot(10))),
        _batch(1, (share_key(1), share_update(50)), **txn),
        build_end_txn_marker(offset=2, timestamp=0, producer_id=9, producer_epoch=0, commit=False),
        _batch(3, (share_key(1), share_update(60)), **txn),
        build_end_txn_marker(offset=4, timestamp=0, producer_id=9, producer_epoch=0, commit=True),
    )
    assert share_partition_start_offsets(batches) == {("sg", TOPIC_ID_TEXT, 3): 60}


def test_a_share_partition_start_offset_counts_as_a_committed_offset_of_its_group():
    starts = {("sg", TOPIC_ID_TEXT, 3): 25, ("sg", "unknownTopicIdAAAAAAAAA", 0): 5, ("sg", TOPIC_ID_TEXT, 4): None}
    assert share_group_offsets(starts, {TOPIC_ID_TEXT: "orders"}) == {
        ("sg", "orders", 3): 25,
        ("sg", "orders", 4): None,
    }
