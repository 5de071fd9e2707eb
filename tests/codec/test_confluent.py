"""Confluent's wire format: the header and Protobuf's message indexes, as its serializers write them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.codec.confluent import frame, read_message_indexes, read_schema_id
from kafkalog.errors import KafkaLogError, UndecodableValueError


def test_schema_id_is_four_bytes_big_endian_after_magic_zero():
    data = bytes([0, 0, 0, 1, 2]) + b"payload"
    assert read_schema_id(data) == 258
    assert frame(258, b"payload") == data


@pytest.mark.parametrize(
    "data, what",
    [(b"\x00\x00\x00", "shorter than Confluent's 5-byte header"), (b"\x01\x00\x00\x00\x01x", "magic byte 1")],
)
def test_a_value_not_in_the_wire_format_says_why(data, what):
    with pytest.raises(UndecodableValueError, match=what):
        read_schema_id(data)


def test_the_first_message_is_written_as_one_zero_byte():
    # Confluent's MessageIndexes: [0] is written as the single varint 0 (a count of zero)
    data = frame(7, b"P", (0,))
    assert data == bytes([0, 0, 0, 0, 7, 0]) + b"P"
    assert read_message_indexes(data) == ((0,), 6)


def test_message_indexes_are_a_zigzag_count_then_zigzag_indexes():
    # [1, 0]: count 2 -> 0x04, 1 -> 0x02, 0 -> 0x00 (zig-zag varints, as Kafka's ByteUtils writes them)
    data = frame(7, b"P", (1, 0))
    assert data[5:8] == b"\x04\x02\x00"
    assert read_message_indexes(data) == ((1, 0), 8)
    # a long explicit [0] (count 1) reads as [0] too
    assert read_message_indexes(bytes([0, 0, 0, 0, 7, 2, 0]) + b"P") == ((0,), 7)


@pytest.mark.parametrize(
    "tail, what",
    [(b"\x04\x02\x80", "past the end"), (b"\x02\x01", "negative"), (b"\x7e", "count 63 does not fit")],
)
def test_broken_message_indexes_are_refused(tail, what):
    with pytest.raises(UndecodableValueError, match=what) as err:
        read_message_indexes(bytes([0, 0, 0, 0, 7]) + tail)
    assert isinstance(err.value, KafkaLogError)


@given(
    schema_id=st.integers(-(2**31), 2**31 - 1),
    indexes=st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=6),
    payload=st.binary(max_size=16),
)
def test_any_frame_reads_back(schema_id, indexes, payload):
    data = frame(schema_id, payload, tuple(indexes))
    assert read_schema_id(data) == schema_id
    read, start = read_message_indexes(data)
    assert read == tuple(indexes) and data[start:] == payload
