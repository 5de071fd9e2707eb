"""`validate` on Spark's executors (what jobs/validate.py runs): the partitions of a log directory
checked in tasks packed by bytes give the report the driver gives alone, finding for finding."""

from __future__ import annotations

import shutil

import pytest

from kafkalog.cli import main
from kafkalog.operations.validate import validate_paths

from .jobs import newest_job

pytestmark = pytest.mark.spark


def test_the_report_is_the_drivers(spark, small_log, tmp_path, capsys):
    damaged = tmp_path / "damaged"
    shutil.copytree(small_log.path, damaged)
    segment = sorted((damaged / "orders-0").glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    data[200] ^= 0xFF  # a record byte: the batch's CRC no longer matches
    segment.write_bytes(bytes(data))
    sorted((damaged / "orders-1").glob("*.index"))[0].unlink()
    for root, clean in ((small_log.path, True), (damaged, False)):
        alone = validate_paths([str(root)], index_interval_bytes=256)
        spread = validate_paths([str(root)], index_interval_bytes=256, spark=spark)
        assert spread.to_json() == alone.to_json()
        assert (spread.exit_code == 0) == clean and spread.counts["partitions"] > 5
    # the command line checks on the executors of a session already running (a job's): one Spark job more
    jobs = newest_job(spark)
    assert main(["validate", str(damaged), "--json", "--quiet", "--config", "index.interval.bytes=256"]) == 1
    assert capsys.readouterr().out.strip() == alone.to_json().strip()
    assert newest_job(spark) == jobs + 1
