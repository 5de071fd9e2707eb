"""Compaction planning with a session: the producer-state replays (every batch of a partition without a
snapshot) run in executor tasks when they read enough to pay for a Spark job, and the plan is the
driver's own, uncleanable partitions and their errors included."""

from __future__ import annotations

import shutil
import struct

import pytest

from kafkalog import tuning
from kafkalog.config import resolver_from
from kafkalog.operations.compact import plan_compaction
from kafkalog.storage.segment import LogSegment

from .jobs import newest_job

pytestmark = pytest.mark.spark

EVERYTHING = resolver_from(settings=["cleanup.policy=compact"])
NOW = 1_700_000_000_000


def _damaged_copy(source, target):
    """`source` with no producer snapshot, so that every partition is replayed from its first batch;
    one batch header that stops the replay of orders-1 (its second batch's magic byte, which the
    plan's metadata reads never reach); a corrupt snapshot in customers-0 (restored, so that the
    replay falls back past it); and an interrupted rewrite in payments-0."""
    shutil.copytree(source, target)
    snapshots = sorted(target.glob("*/*.snapshot"))
    assert snapshots, "the small preset writes producer snapshots"
    kept = next(s for s in snapshots if s.parent.name == "customers-0")
    for snapshot in snapshots:
        snapshot.unlink()
    kept.write_bytes(b"\x00\x01 not a snapshot")
    segment = sorted((target / "orders-1").glob("*.log"))[1]
    data = bytearray(segment.read_bytes())
    (length,) = struct.unpack_from(">i", data, 8)
    data[12 + length + 16] = 7  # the second batch's magic: no record format has it
    segment.write_bytes(bytes(data))
    shutil.copy(
        sorted((target / "payments-0").glob("*.log"))[0], target / "payments-0" / "00000000000000000000.log.swap"
    )


def _plan_as_data(plan):
    """Everything a plan decides, in values that compare: each LogToClean field, the segments listed,
    the excluded and uncleanable partitions with their reasons and errors, and the partition table."""
    return {
        "logs": [vars(s) for s in plan.logs],
        "segments": {tp: [s.log_path for s in segments] for tp, segments in plan.segments.items()},
        "uncleanable": {tp: (type(err), str(err)) for tp, err in plan.uncleanable.items()},
        "excluded": plan.excluded,
        "chosen": [(s.topic, s.partition) for s in plan.chosen],
        "partitions": plan.partitions(),
    }


def test_the_plan_is_the_drivers_and_the_driver_reads_no_batch(spark, small_log, tmp_path, monkeypatch):
    damaged = tmp_path / "damaged"
    _damaged_copy(small_log.path, damaged)
    roots = (small_log.path, damaged)
    alone = {root: _plan_as_data(plan_compaction(str(root), EVERYTHING, NOW)) for root in roots}
    uncleanable = alone[damaged]["uncleanable"]
    assert sorted(uncleanable) == [("orders", 1), ("payments", 0)], uncleanable
    assert "magic" in uncleanable[("orders", 1)][1] and ".log.swap" in uncleanable[("payments", 0)][1]
    assert not alone[small_log.path]["uncleanable"] and len(alone[damaged]["chosen"]) >= 5

    def read_on_the_driver(self, *args, **kwargs):
        raise AssertionError(f"the driver read the batches of {self.log_path}")

    monkeypatch.setattr(LogSegment, "batches", read_on_the_driver)  # the driver's process only: not the workers'
    with pytest.raises(AssertionError, match="the driver read the batches"):
        plan_compaction(str(damaged), EVERYTHING, NOW)
    jobs = newest_job(spark)
    with pytest.raises(AssertionError, match="the driver read the batches"):  # too few bytes to start a job for
        plan_compaction(str(damaged), EVERYTHING, NOW, spark=spark)
    assert newest_job(spark) == jobs
    monkeypatch.setattr(tuning, "REPLAY_ON_EXECUTORS_BYTES", 0)
    for root in roots:
        jobs = newest_job(spark)
        spread = _plan_as_data(plan_compaction(str(root), EVERYTHING, NOW, spark=spark))
        assert spread == alone[root]
        assert newest_job(spark) == jobs + 1  # the replays are one Spark job
