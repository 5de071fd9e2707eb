"""One Arrow batch decoded as an executor decodes it (no Spark): whole columns where Arrow can, row by
row where it cannot, and every row that does not decode named."""

from __future__ import annotations

import pyarrow as pa
import pytest

from kafkalog.codec.value_format import ValueDecoder, ValueFormat
from kafkalog.errors import UndecodableValueError
from kafkalog.spark.decode import DECODE_ERROR, _decode_batch

BATCH = pa.RecordBatch.from_pydict(
    {
        "key": pa.array([b"a", b"\xff", None, b"d"], pa.binary()),
        "value": pa.array([b"1", b"2", b"3", b"x"], pa.binary()),
        "topic": ["t"] * 4,
        "partition": pa.array([0] * 4, pa.int32()),
        "offset": pa.array([10, 11, 12, 13], pa.int64()),
    }
)
JSON_INT = ValueFormat("json", json_type=pa.int64())
DECODERS = {"key": ValueDecoder(ValueFormat("string")), "value": ValueDecoder(JSON_INT)}
TYPES = {"key": pa.string(), "value": pa.int64()}


def test_bad_utf8_in_a_string_column_is_found_row_by_row():
    schema = pa.schema(
        [("key", pa.string()), ("value", pa.int64()), ("offset", pa.int64()), (DECODE_ERROR, pa.string())]
    )
    out = _decode_batch(BATCH, DECODERS, TYPES, None, "dead-letter", schema).to_pydict()
    assert out["key"] == ["a", None, None, "d"]
    assert out["value"] == [1, 2, 3, None]
    assert out[DECODE_ERROR] == [
        None,
        "key: byte 0: not UTF-8: invalid start byte",
        None,
        "value: not JSON: Expecting value at character 0",
    ]


def test_without_a_dead_letter_column_the_first_bad_row_stops_the_batch_named():
    schema = pa.schema([("key", pa.string()), ("value", pa.int64())])
    with pytest.raises(UndecodableValueError) as raised:
        _decode_batch(BATCH, DECODERS, TYPES, None, "fail", schema)
    assert raised.value.offset == 11
    assert str(raised.value) == "offset 11: topic t partition 0, key: byte 0: not UTF-8: invalid start byte"
