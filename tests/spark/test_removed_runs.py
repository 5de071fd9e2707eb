"""A batch plan's removed offsets as runs of 64: made in Spark (`rewrite.removed_run`), read back
by the rewrite task (`rewrite.removed_offsets`, without Spark)."""

from __future__ import annotations

import pyarrow as pa

from kafkalog.spark.rewrite import removed_offsets, removed_run

RUNS = pa.list_(pa.struct([("run", pa.int64()), ("bits", pa.int64())]))


def runs(*rows):
    return pa.array([None if r is None else [{"run": run, "bits": bits} for run, bits in r] for r in rows], RUNS)


def test_runs_become_each_rows_offsets():
    got = removed_offsets(
        runs(
            [(0, 0b101)],  # offsets 0 and 2
            None,  # a batch none of whose records go
            [(2, -(1 << 63)), (3, 1), (2, 1)],  # bit 63: the long's sign bit; run 2 named twice
            [],
        )
    )
    assert got == [frozenset({0, 2}), frozenset(), frozenset({191, 128, 192}), frozenset()]


def test_no_rows():
    assert removed_offsets(runs()) == []


def test_removed_run_of_each_offset_names_it(spark):
    """Purge's runs, one per offset, in Spark: every bit of the long, the sign bit too."""
    from pyspark.sql import functions as F

    offsets = [0, 31, 32, 63, 64, 1_000, 2**40 + 5]
    rows = (
        spark.createDataFrame([(o,) for o in offsets], "offset long")
        .agg(F.collect_list(removed_run(F.col("offset"))).alias("removed"))
        .toArrow()
    )
    assert removed_offsets(rows["removed"]) == [frozenset(offsets)]
