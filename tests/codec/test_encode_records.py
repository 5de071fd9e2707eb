"""splice.encode_records (many records at once, numpy varints) against records.encode_record, one at a time."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.codec.records import Record, encode_headers, encode_record
from kafkalog.codec.splice import encode_records

_bytes = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=150, max_size=300))
_headers = st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))), max_size=3)
_record = st.tuples(_bytes, _bytes, _headers, st.integers(-(2**40), 2**40), st.integers(0, 2**20))


@settings(max_examples=300, deadline=None)
@given(st.lists(_record, min_size=1, max_size=30), st.integers(-1, 2**41))
def test_encode_records_writes_what_encode_record_writes(rows, base_timestamp):
    records = [Record(100 + gap, base_timestamp + ts, k, v, tuple(h)) for k, v, h, ts, gap in rows]
    expected = bytearray()
    for record in records:
        encode_record(expected, record, 100, base_timestamp)
    got = encode_records(
        [r.offset - 100 for r in records],
        [r.timestamp - base_timestamp for r in records],
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()).slice(0),
        [encode_headers(r.headers) if r.headers else None for r in records],
    )
    assert got == bytes(expected)
    # a slice of longer columns, as a batch cut from Spark's Arrow batch is
    keys = pa.array([b"before", *(r.key for r in records)], pa.binary()).slice(1)
    values = pa.array([b"before", *(r.value for r in records)], pa.binary()).slice(1)
    offsets, stamps = [r.offset - 100 for r in records], [r.timestamp - base_timestamp for r in records]
    headers = [encode_headers(r.headers) if r.headers else None for r in records]
    assert encode_records(offsets, stamps, keys, values, headers) == bytes(expected)
