"""Mutated batches of every format and codec: the reader, the full decode and the key scan raise
nothing but KafkaLogError, finish quickly, and never allocate past the decompression limit."""

from __future__ import annotations

import time
import tracemalloc

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.codec.batch import build_batch
from kafkalog.codec.compression import Codec
from kafkalog.codec.control import build_end_txn_marker
from kafkalog.codec.legacy import build_legacy_batch
from kafkalog.codec.reader import BatchReader
from kafkalog.codec.records import Record
from kafkalog.codec.scan import KeyColumns, scan_keys
from kafkalog.errors import KafkaLogError

LIMIT = 1 << 20


def _records(n, ts=1_700_000_000_000):
    return [
        Record(i, ts + i, b"key-%d" % (i % 5), (b"value-%d " % i) * (i % 4) or None, (("h", b"v"),) if i % 3 else ())
        for i in range(n)
    ]


SEEDS = (
    [build_batch(_records(12), codec=c) for c in Codec]
    + [
        build_legacy_batch([r._replace(headers=()) for r in _records(6)], magic=m, codec=c)
        for m in (0, 1)
        for c in (Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4)
    ]
    + [build_end_txn_marker(offset=20, timestamp=5, producer_id=3, producer_epoch=0, commit=False)]
)


@st.composite
def mutated(draw):
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["flip", "byte", "truncate", "insert", "delete"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "byte" and data:
            data[pos] = draw(st.integers(0, 255))
        elif kind == "truncate":
            del data[pos:]
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[pos : pos + draw(st.integers(1, 8))]
    return bytes(data)


def _consume(data: bytes) -> None:
    cols = KeyColumns()
    for batch in BatchReader(data):
        batch.is_valid()
        batch.records(limit=LIMIT)
        scan_keys(batch, cols, limit=LIMIT)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutations_raise_only_kafkalog_errors(data):
    start = time.perf_counter()
    tracemalloc.start()
    try:
        _consume(data)
    except KafkaLogError as err:
        assert err.message  # every error says what was expected
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert time.perf_counter() - start < 2.0
    assert peak < 16 * LIMIT
