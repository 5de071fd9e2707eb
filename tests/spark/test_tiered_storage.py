"""The `kafkalog` data source over a tiered partition (`remoteStorageDir`): remote and local segments
read together, each offset once, on the files of a real Kafka 4.3.1 broker (tests/fixtures/tiered-4.3.1)
with its first two local segments deleted, as the broker's local retention deletes uploaded ones."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kafkalog.spark import narrow_scan, read_records
from kafkalog.spark.scan_plan import plan_scan

pytestmark = pytest.mark.spark

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiered-4.3.1"


@pytest.fixture
def tiered(tmp_path) -> tuple[Path, Path]:
    shutil.copytree(FIXTURE, tmp_path / "t")
    log, remote = tmp_path / "t" / "log", tmp_path / "t" / "remote"
    for base in (0, 14):
        for f in (log / "tiered-0").glob(f"{base:020d}.*"):
            f.unlink()
    return log, remote


def test_plan_reads_remote_segments_below_the_local_log(tiered):
    log, remote = tiered
    plan = plan_scan(str(log), remote_storage=str(remote))
    tiered_units = [u for u in plan.units if u.topic == "tiered"]
    assert [u.segment_base_offset for u in tiered_units] == [0, 14, 28]
    assert ["kafka-tiered-storage" in u.path for u in tiered_units] == [True, True, False]
    assert tiered_units[1].next_base_offset == 28  # the remote offsets end where the local log starts
    assert [u.segment_base_offset for u in plan_scan(str(log)).units if u.topic == "tiered"] == [28]


def test_data_source_reads_remote_and_local_records_once(spark, tiered):
    log, remote = tiered
    df = spark.read.format("kafkalog").option("topics", "tiered").option("remoteStorageDir", str(remote)).load(str(log))
    rows = df.select("offset", "value").orderBy("offset").collect()
    assert [r.offset for r in rows] == list(range(40))
    local_only = spark.read.format("kafkalog").option("topics", "tiered").load(str(log))
    assert local_only.count() == 12
    assert {r.offset: bytes(r.value) for r in rows if r.offset >= 28} == {
        r.offset: bytes(r.value) for r in local_only.select("offset", "value").collect()
    }
    records = read_records(spark, str(log), topics=["tiered"], remote_storage=str(remote))
    assert [(r.offset, bytes(r.value)) for r in records.select("offset", "value").orderBy("offset").collect()] == [
        (r.offset, bytes(r.value)) for r in rows
    ]
    assert narrow_scan(spark, str(log), topics=["tiered"], remote_storage=str(remote)).count() == 40


def test_purge_of_a_tiered_topic_says_remote_segments_are_not_purged(spark, tiered):
    from kafkalog.config import resolver_from
    from kafkalog.operations.purge import purge

    log, _ = tiered
    for setting, tiered_topics in (("remote.storage.enable=true", ["tiered"]), ("remote.storage.enable=false", [])):
        result = purge(spark, str(log), [b"k"], config=resolver_from(settings=[setting]), now=0, dry_run=True)
        assert result.tiered_topics == tiered_topics
        assert ("segments already in remote storage were not purged" in result.summary()) == bool(tiered_topics)
