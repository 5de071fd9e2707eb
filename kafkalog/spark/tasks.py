"""Plain Python work run on the executors, one Spark task per planned task: with DataFrames
(`range` and `mapInArrow`, which Spark Connect sessions run too; a range of `count` rows in as many
partitions gives each partition exactly one row: its task's number), and, where only results come
back to the driver, as an RDD on a classic session (`run_tasks`)."""

from __future__ import annotations

import functools
import gc
import pickle
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from typing import Generic, TypeVar

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


# While the driver works beside the thread that starts Spark, each py4j call of that thread (some 350 as
# a session starts, 70 for a first job) waits for the GIL when its reply comes: at most this long,
# rather than Python's 5 ms switch interval
_SHARE_SWITCH_SECONDS = 0.0005


class DriverShare(Generic[T, R]):
    """Work the driver does itself while its Spark session starts (a Future of it:
    `session.start_session`), in a thread of its own: `work(item)` for one item after another, from
    the end of `items`, until `session()` is called. Then the session is there, the items no one has
    begun but the last are Spark's (`session()` returns their indices), and the driver finishes the one
    in hand, then that last one, beside Spark's tasks.

    A command that starts Spark waits some 3 s for the JVM and its context, and on a small machine the
    JVM's start keeps about one core busy: the other would idle (docs/benchmarks.md, "The driver's
    share"). With a session already started (not a Future) there is no share: every item is Spark's.
    As a context manager: on leaving, the thread is joined, so that no work of the driver outlives the
    block; the driver first finishes the items it kept (none of which Spark got), or, when the block
    raised, begins none; its error, if any, is raised unless another one is.
    """

    def __init__(self, spark, items: Sequence[T], work: Callable[[T], R]):
        self._spark, self._items, self._work = spark, items, work
        self._left = list(range(len(items)))
        self._lock = threading.Lock()
        self.done: dict[int, R] = {}  # index -> result, of the items the driver did
        self._error: BaseException | None = None
        self._thread = None
        if isinstance(spark, Future) and items:
            self._thread = threading.Thread(target=self._run, name="kafkalog-driver-share", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        switch = sys.getswitchinterval()
        sys.setswitchinterval(_SHARE_SWITCH_SECONDS)
        try:
            while True:
                with self._lock:
                    if not self._left:
                        return
                    i = self._left.pop()
                self.done[i] = self._work(self._items[i])
        except BaseException as err:  # raised where the share ends (__exit__)
            self._error = err
        finally:
            sys.setswitchinterval(switch)

    def session(self):
        """The session, once started, and the indices (in order) of the items left to it."""
        spark = self._spark.result() if isinstance(self._spark, Future) else self._spark
        with self._lock:
            # Spark's first task begins some 1.9 s after the session is ready (its Python worker forks and
            # imports: docs/benchmarks.md, "The driver's share"), and the driver, its modules loaded, would
            # finish the item in hand well before: it keeps the next one too, for that time
            working = self._thread is not None and self._thread.is_alive()
            split = max(len(self._left) - working, 0)
            rest, self._left = self._left[:split], self._left[split:]
        if self._error is not None:  # the driver failed (its thread has ended): no job for Spark
            raise self._error
        return spark, rest

    def __enter__(self) -> DriverShare[T, R]:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is not None:  # the command failed: begin nothing more (on success, the driver's share is done)
            with self._lock:
                self._left = []
        if self._thread is not None:
            self._thread.join()
        if kind is None and self._error is not None:
            raise self._error
