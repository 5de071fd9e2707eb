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


# -- purge of the remote tier ------------------------------------------------------------------------------

SECRET = b"remote-tier-tests-secret-0123456"
TIERED = "remote.storage.enable=true"


def _file_bytes(*roots: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for root in roots for p in sorted(root.rglob("*")) if p.is_file()}


def _tiered_records(log: Path, remote: Path) -> list[tuple[int, bytes]]:
    from kafkalog.storage.logdir import LogDir
    from kafkalog.storage.remote_log import RemoteStorage

    local = LogDir.open(str(log)).partition("tiered", 0).segments
    part = RemoteStorage.open(str(remote)).partition("tiered", 0)
    return [(r.offset, r.key) for s in [*part.segments, *local] for _, b in s.batches() for r in b.records()]


@pytest.fixture
def full_tiered(tmp_path) -> tuple[Path, Path]:
    """The fixture as the broker left it: local segments 0, 14, 28; remote copies of 0 and 14."""
    shutil.copytree(FIXTURE, tmp_path / "t")
    return tmp_path / "t" / "log", tmp_path / "t" / "remote"


def test_purge_rewrites_the_remote_segments_that_hold_purged_keys(spark, full_tiered, tmp_path):
    from kafkalog.config import resolver_from
    from kafkalog.operations.purge import purge

    log, remote = full_tiered
    before = _tiered_records(log, remote)
    cache = log / "remote-log-index-cache"  # the broker's cached copies of remote indexes
    cache.mkdir()
    (cache / "0_1rvAsADDRBSdo2tZkS233g.index").write_bytes(b"stale")
    (cache / "14_nD13I6qKS5SvnS2ocnd-CA.timeindex").write_bytes(b"stale")
    (cache / "28_AAAAAAAAAAAAAAAAAAAAAA.index").write_bytes(b"a segment not rewritten")
    config = resolver_from(settings=[TIERED])
    kwargs = dict(config=config, now=0, remote_storage=str(remote), topics=["tiered"])
    dry = purge(spark, str(log), [b"k7", b"k19"], dry_run=True, **kwargs)
    assert dry.remote is not None and [p["removed"] for p in dry.remote.partitions] == [2]
    assert "remote tier" in dry.summary() and "would remove 2 records" in dry.summary()

    ledger = str(tmp_path / "ledger")
    result = purge(spark, str(log), [b"k7", b"k19"], ledger=ledger, secret=SECRET, **kwargs)
    assert result.remote is not None
    assert [(s["start_offset"], s["records_in"], s["records_out"]) for s in result.remote.segments] == [
        (0, 14, 13),
        (14, 14, 13),
    ]
    # __remote_log_metadata keeps the old sizes (docs/semantics.md): reported beside the new ones
    assert [s["metadata_size"] for s in result.remote.segments] == [1942, 2023]
    assert all(s["bytes_out"] < s["bytes_in"] == s["metadata_size"] for s in result.remote.segments)
    assert result.remote.ledger_rows == 2 and result.remote.remaining == 0
    assert result.ledger_rows == 2  # the local copies of the same records, rows of their own
    assert "2 remote segments rewritten" in result.summary()
    assert _tiered_records(log, remote) == [(o, k) for o, k in before if k not in (b"k7", b"k19")]
    assert sorted(p.name for p in cache.iterdir()) == ["28_AAAAAAAAAAAAAAAAAAAAAA.index"]
    # no purged key in any byte of any file, local or remote
    for path, data in _file_bytes(log, remote).items():
        assert b"k7" not in data and b"k19" not in data, path

    files = _file_bytes(log, remote)
    again = purge(spark, str(log), [b"k7", b"k19"], ledger=ledger, secret=SECRET, **kwargs)
    assert again.remote is not None and again.remote.segments == [] and again.remote.ledger_rows == 0
    assert _file_bytes(log, remote) == files


def test_a_failed_remote_staging_changes_no_remote_file_and_a_rerun_finishes(spark, full_tiered, tmp_path):
    from kafkalog.config import resolver_from
    from kafkalog.errors import KafkaLogError
    from kafkalog.operations.purge import purge
    from kafkalog.spark.remote_purge import STAGE_STEP

    log, remote = full_tiered
    remote_files = _file_bytes(remote)

    def fault(step, path):
        if step == STAGE_STEP and path.endswith("-nD13I6qKS5SvnS2ocnd-CA.kafkalog-staged"):
            raise OSError("disk full")

    kwargs = dict(config=resolver_from(settings=[TIERED]), now=0, remote_storage=str(remote))
    ledger = str(tmp_path / "ledger")
    with pytest.raises(KafkaLogError, match="staging the rewrite failed: OSError: disk full"):
        purge(spark, str(log), [b"k7", b"k19"], ledger=ledger, secret=SECRET, fault=fault, **kwargs)
    assert _file_bytes(remote) == remote_files  # the other segment's staging went too
    result = purge(spark, str(log), [b"k7", b"k19"], ledger=ledger, secret=SECRET, **kwargs)
    assert result.remote is not None and len(result.remote.segments) == 2
    assert all(b"k19" not in data for data in _file_bytes(log, remote).values())
