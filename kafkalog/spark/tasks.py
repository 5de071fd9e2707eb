"""Plain Python work run on the executors, one Spark task per group of items, with DataFrames only
(`range` and `mapInArrow`: no RDD, so Spark Connect sessions run it too). Results come back to the
driver pickled, in the order of the items."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def run_tasks(spark, groups: Sequence[Sequence[T]], work: Callable[[T], R]) -> list[R]:
    """`work(item)` for every item of every group, the items of a group in one task (a range of
    `len(groups)` rows in as many partitions gives each partition exactly one row: its group)."""
    groups = [list(g) for g in groups]
    if not groups:
        return []

    def run(batches):
        import pyarrow as pa

        for batch in batches:
            for task in batch.column(0).to_pylist():
                results = pickle.dumps([work(item) for item in groups[task]])
                yield pa.RecordBatch.from_arrays([pa.array([task]), pa.array([results])], names=["task", "results"])

    rows = spark.range(0, len(groups), 1, len(groups)).mapInArrow(run, "task long, results binary").collect()
    by_task = {row.task: pickle.loads(row.results) for row in rows}
    return [result for task in range(len(groups)) for result in by_task[task]]
