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


ROW = pa.struct([("id", pa.int64()), ("name", pa.string()), ("tags", pa.list_(pa.string())), ("at", pa.float64())])


@pytest.mark.parametrize(
    "values",
    [
        [b'{"id": 1, "name": "a", "tags": ["x"], "at": 2}', None, b'{"id": 2, "extra": {"z": 1}}', b"{}"],
        [b'{"id": 1}', b'{"id": 1.5}', None],  # a value that does not fit: found row by row
        [b'{"id": 1}{"id": 2}', b'{"id": 3}'],  # two objects in one value
        [b'{"id": 1}', b"  ", b'{"id": 2}'],  # a blank one
        [b'{"id": 1,\n "name": "b"}', b'{"id": 2}'],  # a line break inside a value
        [b'{"name": "\\u00e9"}', b'{"name": "\xff"}'],  # bad UTF-8
        [b"[1, 2]", b'{"id": 3}'],  # not an object
        [None, None],
    ],
)
def test_json_objects_decode_as_one_column_exactly_as_row_by_row(values):
    """Arrow's JSON reader decodes a column of JSON objects at once; where it cannot be sure that row i
    is value i, or refuses a value, the column is decoded row by row: either way every row is what the
    row-by-row decoder makes of it, and every value that does not decode is named."""
    decoder = ValueDecoder(ValueFormat("json", json_type=ROW))
    batch = pa.RecordBatch.from_pydict(
        {"value": pa.array(values, pa.binary()), "offset": pa.array(range(len(values)), pa.int64())}
    )
    schema = pa.schema([("value", ROW), ("offset", pa.int64()), (DECODE_ERROR, pa.string())])
    out = _decode_batch(batch, {"value": decoder}, {"value": ROW}, None, "dead-letter", schema).to_pydict()
    expected = [decoder.decode_or_error(v) for v in values]
    assert out["value"] == [v for v, _ in expected]
    assert out[DECODE_ERROR] == [None if e is None else f"value: {e}" for _, e in expected]


def test_a_column_of_json_objects_is_read_by_arrow_not_row_by_row(monkeypatch):
    decoder = ValueDecoder(ValueFormat("json", json_type=ROW))
    monkeypatch.setattr(decoder, "decode", lambda data: pytest.fail("decoded row by row"))
    batch = pa.RecordBatch.from_pydict({"value": pa.array([b'{"id": 7, "tags": []}', None], pa.binary())})
    schema = pa.schema([("value", ROW)])
    out = _decode_batch(batch, {"value": decoder}, {"value": ROW}, None, "fail", schema).to_pydict()
    assert out["value"] == [{"id": 7, "name": None, "tags": [], "at": None}, None]
