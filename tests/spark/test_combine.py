"""What a compaction's scan task decides, without Spark: its records' fates before superseding
(`record_fates`), and the map-side combine's chunks (`_chunks`): cut where one partition's rows end,
a partition too big for a chunk marked split, and rows of a partition seen again refused."""

from __future__ import annotations

import pyarrow as pa
import pytest

from kafkalog.rules.compaction import (
    ABORTED,
    CONTROL,
    EXPIRE_TOMBSTONE,
    KEEP,
    KEEP_TOMBSTONE,
    MARKER,
    UNKEYED,
    SegmentFacts,
    record_fates,
)
from kafkalog.spark.compaction import _chunks


def batches(*tps_per_batch):
    return [pa.RecordBatch.from_pydict({"tp": pa.array(tps, pa.int32())}) for tps in tps_per_batch]


def chunks(input_batches, max_rows):
    return [(t["tp"].to_pylist(), sorted(split)) for t, split in _chunks(input_batches, max_rows)]


def test_chunks_are_cut_where_a_partitions_rows_end():
    got = chunks(batches([0, 0, 1], [1, 1, 2], [2, 3]), max_rows=3)
    assert got == [([0, 0], []), ([1, 1, 1], []), ([2, 2], []), ([3], [])]


def test_a_partition_that_fills_a_chunk_alone_is_split_from_then_on():
    got = chunks(batches([0, 1, 1], [1, 1], [1, 2]), max_rows=3)
    # partition 1 alone fills a chunk: it is split, and stays so in the chunks after
    assert got == [([0], []), ([1, 1, 1, 1], [1]), ([1, 2], [1])]
    assert chunks(batches([5, 5], [5]), max_rows=10) == [([5, 5, 5], [])]  # one chunk: nothing split


def test_rows_of_a_partition_after_its_whole_chunk_are_refused():
    with pytest.raises(RuntimeError, match=r"partitions \[0\] are not together"):
        chunks(batches([0, 0, 1], [1, 0]), max_rows=3)


def narrow(rows):
    """A narrow Arrow batch of one segment from (offset, position, key, value is null, control, magic,
    delete horizon) rows."""
    offset, position, key, tomb, control, magic, horizon = zip(*rows)
    n = len(rows)
    return pa.RecordBatch.from_pydict(
        {
            "offset": pa.array(offset, pa.int64()),
            "position": pa.array(position, pa.int64()),
            "key": pa.array(key, pa.binary()),
            "valueIsNull": pa.array(tomb),
            "isControl": pa.array(control),
            "magic": pa.array(magic, pa.int8()),
            "deleteHorizonMs": pa.array(horizon, pa.int64()),
            "recordSpanSize": pa.array([10] * n, pa.int32()),
        }
    )


def test_record_fates_follow_kafkas_cleaner_before_superseding():
    now = 1_000
    facts = SegmentFacts(tp=3, number=7, mtime_ms=500, first_dirty=4, upper_bound=12, legacy_horizon_ms=400, whole=True)
    rows = [
        (0, 0, b"k", False, False, 2, None),  # below the dirty range: kept, not in the map
        (1, 100, b"k", False, False, 2, None),  # a discarded batch's data record: aborted
        (2, 200, None, False, True, 2, None),  # a discarded batch's control record: a removed marker
        (3, 300, None, False, True, 2, None),  # a control record that stays
        (4, 400, None, False, False, 2, None),  # unkeyed
        (5, 500, b"t", True, False, 2, None),  # a tombstone without a horizon yet: kept
        (6, 600, b"t", True, False, 2, 2_000),  # its horizon is not past: kept
        (7, 700, b"t", True, False, 2, 1_000),  # its horizon is past: expires
        (8, 800, b"t", True, False, 1, None),  # v1: the segment's mtime is after the legacy horizon: kept
        (9, 900, b"v", False, False, 2, None),  # a keyed record in the dirty range: in the map
        (12, 1000, b"v", False, False, 2, None),  # at the upper bound: not this pass's
    ]
    out = record_fates(narrow(rows), facts, discarded=[100, 200], now=now)
    assert out["offset"].to_pylist() == list(range(10))
    assert out["fate"].to_pylist() == [
        KEEP,
        ABORTED,
        MARKER,
        CONTROL,
        UNKEYED,
        KEEP_TOMBSTONE,
        KEEP_TOMBSTONE,
        EXPIRE_TOMBSTONE,
        KEEP_TOMBSTONE,
        KEEP,
    ]
    assert out["map_offset"].to_pylist() == [None, None, None, None, None, 5, 6, 7, 8, 9]
    assert set(out["tp"].to_pylist()) == {3} and set(out["segment"].to_pylist()) == {7}
    assert all(out["whole"].to_pylist())
    expired = SegmentFacts(3, 7, mtime_ms=400, first_dirty=0, upper_bound=12, legacy_horizon_ms=400, whole=False)
    (v1,) = record_fates(narrow([rows[8]]), expired, discarded=[], now=now)["fate"].to_pylist()
    assert v1 == EXPIRE_TOMBSTONE  # v1: the segment is not newer than the legacy horizon
