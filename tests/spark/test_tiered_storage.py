"""The `kafkalog` data source over a tiered partition (`remoteStorageDir`): remote and local segments
read together, each offset once, on the files of a real Kafka 4.3.1 broker (tests/fixtures/tiered-4.3.1)
with its first two local segments deleted, as the broker's local retention deletes uploaded ones."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kafkalog.operations.validate import validate_paths
from kafkalog.scan.scan_plan import plan_scan
from kafkalog.spark import narrow_scan, read_records
from kafkalog.storage.log_writer import PartitionWriter

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


def _generated_tiered(root: Path) -> tuple[Path, Path]:
    """A generated tiered partition `gen-0`: gzip batches of keys g0..g17 and, in the second segment,
    an aborted transaction of producer 7 whose only record has key `p`; every segment but the active
    one copied into a LocalTieredStorage layout (an empty `.snapshot` and `.leader_epoch_checkpoint`:
    a purge leaves both as they are)."""
    from kafkalog.codec.compression import Codec
    from kafkalog.codec.records import Record
    from kafkalog.storage.fs import LogFileSystem

    fs, _ = LogFileSystem.for_path(str(root))
    log, remote = root / "log", root / "remote"
    writer = PartitionWriter(fs, str(log), "gen", 0, segment_bytes=300, index_interval_bytes=1)

    def plain(first: int) -> None:
        records = [Record(0, 1_700_000_000_000 + i, f"g{i}".encode(), b"v" * 40) for i in range(first, first + 3)]
        writer.append_records(records, codec=Codec.GZIP)

    plain(0)
    plain(3)
    txn = [Record(0, 1_700_000_000_100, b"p", b"secret-value")]
    writer.append_records(txn, producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    writer.append_end_txn_marker(producer_id=7, producer_epoch=0, commit=False, timestamp=1_700_000_000_101)
    for first in range(6, 18, 3):
        plain(first)
    written = writer.close()
    part_dir = remote / "kafka-tiered-storage" / f"gen-0-{writer.topic_id}"
    part_dir.mkdir(parents=True)
    for n, segment in enumerate(written.segments[:-1]):
        name = f"{segment.base_offset:020d}-{'A' * 21}{n}"
        for kind, path in segment.files.items():
            shutil.copyfile(path, part_dir / f"{name}{kind}")
        for kind in (".snapshot", ".leader_epoch_checkpoint"):
            (part_dir / f"{name}{kind}").write_bytes(b"")
    return log, remote


def test_purge_of_a_generated_remote_tier_keeps_transactions_and_offsets(spark, tmp_path):
    from kafkalog.config import resolver_from
    from kafkalog.operations.purge import purge
    from kafkalog.storage.remote_log import RemoteStorage

    log, remote = _generated_tiered(tmp_path)
    part = RemoteStorage.open(str(remote)).partition("gen", 0)
    assert part is not None and len(part.segments) >= 2
    txn_segment = next(s for s in part.segments if s.aborted_txns())
    txnindex = txn_segment.read(".txnindex")
    before = [(r.offset, r.key) for s in part.segments for _, b in s.batches() for r in b.records()]
    ledger = str(tmp_path / "ledger")
    result = purge(
        spark,
        str(log),
        [b"p", b"g4", b"g9"],  # in the segment of the transaction's batch, and of its marker
        ledger=ledger,
        secret=SECRET,
        config=resolver_from(settings=[TIERED]),
        now=0,
        remote_storage=str(remote),
    )
    assert result.remote is not None and result.remote.remaining == 0
    part = RemoteStorage.open(str(remote)).partition("gen", 0)
    assert part is not None
    batches = [b for s in part.segments for _, b in s.batches()]
    assert [(r.offset, r.key) for b in batches for r in b.records()] == [
        (o, k) for o, k in before if k not in (b"p", b"g4", b"g9")
    ]
    assert {s["start_offset"] for s in result.remote.segments} == {0, txn_segment.base_offset}
    # the transaction's emptied batch stays (its producer's state), its marker and .txnindex entry too
    emptied = [b for b in batches if b.producer_id == 7 and not b.is_control]
    assert len(emptied) == 1 and emptied[0].records_count == 0
    assert any(b.is_control and b.producer_id == 7 for b in batches)
    txn_after = next(s for s in part.segments if s.base_offset == txn_segment.base_offset)
    assert txn_after.read(".txnindex") == txnindex
    assert all(b.codec == 1 for b in batches if not b.is_control and b.records_count)  # still gzip
    assert validate_paths([str(remote)]).ok
    for path, data in _file_bytes(remote).items():
        assert b"secret-value" not in data, path


def test_purge_rewrites_remote_segments_in_a_bucket(spark, full_tiered, s3_server, tmp_path):
    """The remote tier on an object store (moto's S3 server): staged objects copied into place."""
    import pyarrow.fs as pafs

    from kafkalog.config import resolver_from
    from kafkalog.operations.purge import purge
    from kafkalog.storage.remote_log import RemoteStorage

    log, remote = full_tiered
    s3_server.create_bucket("kafkalog-tiered")
    uri = f"s3://kafkalog-tiered/{tmp_path.name}/remote"
    pafs.copy_files(str(remote), uri, source_filesystem=pafs.LocalFileSystem())
    kwargs = dict(config=resolver_from(settings=[TIERED]), now=0, remote_storage=uri)
    result = purge(spark, str(log), [b"k7"], ledger=str(tmp_path / "ledger"), secret=SECRET, **kwargs)
    assert result.remote is not None and [s["start_offset"] for s in result.remote.segments] == [0]
    part = RemoteStorage.open(uri).partition("tiered", 0)
    assert part is not None
    keys = [r.key for s in part.segments for _, b in s.batches() for r in b.records()]
    assert keys == [f"k{i}".encode() for i in range(28) if i != 7]
    objects = [e for e in part.fs.list_dir(part.path)]
    assert not any(e.is_dir for e in objects)  # no staging left
    assert all(b"k7" not in part.fs.read_bytes(e.path) for e in objects)
