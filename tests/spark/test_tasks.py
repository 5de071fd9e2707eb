"""Python tasks on the executors (kafkalog/spark/tasks.py)."""

from __future__ import annotations

import gc

import pytest

from kafkalog.spark.tasks import run_tasks


def _frozen(_item: int) -> int:
    return gc.get_freeze_count()


@pytest.mark.spark
def test_a_worker_keeps_its_imports_out_of_full_collections(spark):
    # PySpark's daemon collects after every task of a reused worker: what a worker imported (tens
    # of thousands of objects) is frozen out of those scans at its first task
    frozen = run_tasks(spark, [[0], [1], [2]], _frozen)
    assert min(frozen) > 10_000, frozen
