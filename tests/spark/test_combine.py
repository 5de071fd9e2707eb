"""The map-side combine's chunks (`compaction._chunks`), without Spark: cut where one partition's rows
end, a partition too big for a chunk marked split, and rows of a partition seen again refused."""

from __future__ import annotations

import pyarrow as pa
import pytest

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
