"""Plain Python work run on the executors, one Spark task per planned task: with DataFrames
(`range` and `mapInArrow`, which Spark Connect sessions run too; a range of `count` rows in as many
partitions gives each partition exactly one row: its task's number), and, where only results come
back to the driver, as an RDD on a classic session (`run_tasks`)."""

from __future__ import annotations

import functools
import gc
import pickle
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from .context import map_numbers

T = TypeVar("T")
R = TypeVar("R")


def task_frame(spark, count: int, task: Callable[[int], Iterable], schema):
    """A DataFrame whose rows are the Arrow record batches `task(i)` yields in Spark task i, for i
    in range(count); `schema` is theirs (a Spark schema or DDL string)."""

    def run(numbers):
        settle_worker()
        for batch in numbers:
            for i in batch.column(0).to_pylist():
                yield from task(i)

    return spark.range(0, count, 1, max(count, 1)).mapInArrow(run, schema)


@functools.cache  # once per process
def settle_worker() -> None:
    """Take what this Python worker holds at its first task, its imports above all, out of the cyclic
    garbage collector's full scans (`gc.freeze`).

    PySpark's daemon runs `gc.collect()` after every task of a reused worker, and a task that makes
    many objects sets off more full collections of its own. Each walks every object of the imports
    (about 90,000: pyarrow, numpy, kafkalog), and never finds garbage there. Over a 1 GiB repartition
    at load 5 to 7, 15 full collections took each worker 2.6 to 3.0 s, and 0.02 to 0.04 s with the
    imports frozen (docs/benchmarks.md, "The fixed costs of Python tasks"). Objects freed by their
    reference counts are freed as before; only a cycle among the frozen objects would stay.
    """
    gc.freeze()


def run_tasks(spark, groups: Sequence[Sequence[T]], work: Callable[[T], R]) -> list[R]:
    """`work(item)` for every item of every group, the items of a group in one task; the results
    come back to the driver pickled, in the order of the items.

    A classic session runs the tasks as an RDD of their numbers (`context.map_numbers`): a DataFrame
    job's planning, code generation and Arrow streams buy nothing here, and a first job of two tasks
    took 2.5 s as a DataFrame against 1.5 s as an RDD on a quiet local[2] (docs/benchmarks.md, "The
    fixed costs of Python tasks"). A Spark Connect session, which has no RDDs, runs them as a
    DataFrame (`task_frame`)."""
    groups = [list(g) for g in groups]
    if not groups:
        return []

    def each(i: int) -> list[R]:
        settle_worker()
        return [work(item) for item in groups[i]]

    done = map_numbers(spark, len(groups), each)
    if done is not None:
        return [result for results in done for result in results]

    def task(i: int):
        import pyarrow as pa

        results = pickle.dumps(each(i))
        yield pa.RecordBatch.from_arrays([pa.array([i]), pa.array([results])], names=["task", "results"])

    rows = task_frame(spark, len(groups), task, "task long, results binary").collect()
    by_task = {row.task: pickle.loads(row.results) for row in rows}
    return [result for i in range(len(groups)) for result in by_task[i]]
