"""Python tasks on the executors (kafkalog/spark/tasks.py)."""

from __future__ import annotations

import gc
import os
import threading
from concurrent.futures import Future

import pytest

from kafkalog.spark.tasks import DriverShare, run_tasks


def _frozen(_item: int) -> int:
    return gc.get_freeze_count()


@pytest.mark.spark
def test_a_worker_keeps_its_imports_out_of_full_collections(spark):
    # PySpark's daemon collects after every task of a reused worker: what a worker imported (tens
    # of thousands of objects) is frozen out of those scans at its first task
    frozen = run_tasks(spark, [[0], [1], [2]], _frozen)
    assert min(frozen) > 10_000, frozen


def _share(items, fail_at=None, ready_after=2):
    """A DriverShare over `items` whose session (a Future) starts once the driver has begun
    `ready_after` items; the driver's item in hand waits until `session()` has returned."""
    session: Future = Future()
    handed_over, began = threading.Event(), []

    def work(item):
        began.append(item)
        if item == fail_at:
            raise ValueError(f"item {item}")
        if len(began) == ready_after:
            session.set_result("spark")
            handed_over.wait(5)
        return item * 10

    return DriverShare(session, items, work), handed_over, began


def test_the_driver_works_from_the_end_until_the_session_starts():
    share, handed_over, began = _share(list(range(6)))
    with share:
        spark, rest = share.session()
        handed_over.set()
        share._thread.join(5)  # while Spark's tasks run
    assert spark == "spark"
    assert began == [5, 4, 3]  # from the end: two before the session, then one more while Spark's tasks start
    assert rest == [0, 1, 2]  # the items no one had begun but the driver's next, in order
    assert share.done == {5: 50, 4: 40, 3: 30}  # the item in hand was finished, and the next


def test_the_item_the_driver_keeps_is_done_when_sparks_tasks_end_first():
    share, handed_over, began = _share([0, 1, 2])
    with share:
        _, rest = share.session()
        handed_over.set()
    assert rest == []  # Spark got nothing to do, and the block ends at once: the driver's item is not dropped
    assert began == [2, 1, 0] and share.done == {2: 20, 1: 10, 0: 0}


def test_a_started_session_gets_every_item():
    share = DriverShare("spark", [1, 2, 3], lambda item: pytest.fail("the driver worked"))
    with share:
        assert share.session() == ("spark", [0, 1, 2])
    assert share.done == {}


def test_the_drivers_failure_is_raised_before_spark_gets_a_job():
    share, _, began = _share(list(range(6)), fail_at=5, ready_after=99)
    share._thread.join(5)  # the driver failed at its first item
    share._spark.set_result("spark")
    with pytest.raises(ValueError, match="item 5"), share:
        share.session()
    assert began == [5]


def test_no_work_of_the_driver_outlives_the_share():
    share, handed_over, began = _share(list(range(6)))
    share._spark.result(5)  # the driver is in its second item
    threading.Timer(0.2, handed_over.set).start()
    with pytest.raises(KeyError), share:
        raise KeyError("the command failed while the driver worked")
    assert began == [5, 4] and share.done == {5: 50, 4: 40}  # the item in hand finished, no other begun


@pytest.mark.spark
def test_sparks_jvm_holds_none_of_the_callers_output(spark):
    # a script reading a command's output gets its end when the command exits, not once the JVM
    # (which stops when the command's pipe to its stdin closes) has shut down too
    from pyspark import SparkContext

    proc = SparkContext._gateway.proc
    for fd, ours in ((1, proc.stdout), (2, proc.stderr)):  # the JVM writes into pipes this process reads
        assert os.readlink(f"/proc/{proc.pid}/fd/{fd}") == os.readlink(f"/proc/self/fd/{ours.fileno()}")
