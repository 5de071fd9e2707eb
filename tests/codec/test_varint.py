"""Zig-zag varints: the spec's examples, limits and round trips, against kafka-python's encoder."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.util import decode_varint as kp_decode
from kafka.record.util import encode_varint as kp_encode

from kafkalog.codec.varint import read_varint, read_varlong, varint_size, write_varint, write_varlong
from kafkalog.errors import CorruptBatchError, TruncatedDataError


@pytest.mark.parametrize(
    "value, encoded", [(0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (64, "8001"), (-65, "8101"), (300, "d804")]
)
def test_spec_examples(value, encoded):
    out = bytearray()
    write_varint(out, value)
    assert out.hex() == encoded
    assert read_varint(bytes.fromhex(encoded), 0) == (value, len(encoded) // 2)


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip_and_kafka_python(value):
    out = bytearray()
    write_varint(out, value)
    assert read_varint(bytes(out), 0) == (value, len(out))
    theirs = bytearray()
    kp_encode(value, theirs.append)
    assert theirs == out and kp_decode(bytes(out), 0) == (value, len(out))


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(value):
    out = bytearray()
    write_varlong(out, value)
    assert read_varlong(bytes(out) + b"\xff", 0) == (value, len(out)) and varint_size(value) == len(out)


def test_too_long_and_truncated():
    with pytest.raises(CorruptBatchError, match="too long"):
        read_varint(b"\xff" * 5 + b"\x00", 0)
    with pytest.raises(CorruptBatchError, match="too long"):
        read_varlong(b"\xff" * 10 + b"\x00", 0)
    assert read_varlong(b"\xff" * 9 + b"\x01", 0)[1] == 10
    with pytest.raises(TruncatedDataError):
        read_varint(b"\x80\x80", 0)
    with pytest.raises(TruncatedDataError):
        read_varint(b"", 0)
