"""Tiered storage in the commands (retain, dump, validate), on the files of a real Kafka 4.3.1 broker
(tests/fixtures/tiered-4.3.1: topic `tiered` with local segments at 0, 14 and 28, the first two
uploaded to LocalTieredStorage and recorded in `__remote_log_metadata`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kafkalog.cli import main
from kafkalog.config import ConfigResolver
from kafkalog.operations.dump import dump_paths
from kafkalog.operations.retain import retain
from kafkalog.operations.validate import validate_paths
from kafkalog.storage.logdir import LogDir, copy_log_dir
from kafkalog.storage.naming import LOG_START_OFFSET_CHECKPOINT

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiered-4.3.1"
NOW = 1_800_000_000_000  # after every timestamp of the fixture, by far more than 7 days
TIERED = {"remote.storage.enable": "true", "retention.ms": "-1", "local.retention.ms": "1000"}


@pytest.fixture
def tiered(tmp_path) -> tuple[Path, Path]:
    shutil.copytree(FIXTURE, tmp_path / "t")
    return tmp_path / "t" / "log", tmp_path / "t" / "remote"


def _local_bases(log: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in (log / "tiered-0").glob("*.log"))


def test_retain_deletes_uploaded_local_segments_and_keeps_the_log_start_offset(tiered):
    log, remote = tiered
    for remote_storage in (None, str(remote)):  # from __remote_log_metadata, and with the layout too
        report = retain(
            str(log),
            config=ConfigResolver(per_topic={"tiered": TIERED}),
            now_ms=NOW,
            dry_run=True,
            remote_storage=remote_storage,
        )
        (plan,) = [p for p in report.partitions if p.topic == "tiered"]
        assert [d.segment.base_offset for d in plan.deleted] == [0, 14]
        assert "offsets up to 27" in report.summary()
    retain(str(log), config=ConfigResolver(per_topic={"tiered": TIERED}), now_ms=NOW)
    assert _local_bases(log) == [28]
    assert LogDir.open(str(log)).read_checkpoint(LOG_START_OFFSET_CHECKPOINT)[("tiered", 0)] == 0
    # __remote_log_metadata is kept forever (Kafka creates it with retention.ms=-1), the broker default
    # of 7 days notwithstanding
    assert (log / "__remote_log_metadata-0" / "00000000000000000000.log").exists()
    assert validate_paths([str(log)]).ok


def test_retain_without_knowledge_of_the_remote_log_deletes_nothing(tiered):
    log, _ = tiered
    shutil.rmtree(log / "__remote_log_metadata-0")
    report = retain(str(log), config=ConfigResolver(per_topic={"tiered": TIERED}), now_ms=NOW)
    (plan,) = report.partitions
    assert plan.deleted == [] and _local_bases(log) == [0, 14, 28]
    assert "no uploaded segment is known" in report.summary()
    # the same topic without tiered storage loses everything old
    plain = retain(str(log), config={"retention.ms": "1000"}, now_ms=NOW, dry_run=True)
    assert len(plain.partitions[0].deleted) == 3


def test_dump_reads_the_remote_layout_and_decodes_remote_log_metadata(tiered):
    log, remote = tiered
    batches = [o for o in dump_paths([str(remote)], records=True) if o["type"] == "record"]
    assert [o["offset"] for o in batches] == list(range(28))
    assert {o["topic"] for o in batches} == {"tiered"} and len({o["remoteSegmentId"] for o in batches}) == 2
    metadata = [
        o["payload"]
        for o in dump_paths([str(log / "__remote_log_metadata-0")], records=True, decoders=["remote-log-metadata"])
        if o["type"] == "record"
    ]
    assert [m["state"] for m in metadata] == ["COPY_SEGMENT_STARTED", "COPY_SEGMENT_FINISHED"] * 2
    segment_ids = {o["remoteSegmentId"] for o in batches}
    assert {m["data"]["remoteLogSegmentId"]["id"] for m in metadata} == segment_ids
    json.dumps(metadata)  # JSON-ready


def test_validate_checks_remote_segments(tiered):
    _, remote = tiered
    assert validate_paths([str(remote)]).ok
    (log_file,) = remote.glob("kafka-tiered-storage/*/00000000000000000014-*.log")
    data = bytearray(log_file.read_bytes())
    data[-1] ^= 0xFF  # the last record's last byte: its batch's CRC no longer holds
    log_file.write_bytes(bytes(data))
    report = validate_paths([str(remote)])
    assert not report.ok
    assert any(str(log_file) in json.dumps(f) for f in report.to_dict()["findings"])


def test_command_line_options(tiered, capsys):
    log, remote = tiered
    shutil.rmtree(log / "__remote_log_metadata-0")  # what is uploaded then comes from the layout alone
    args = ["retain", str(log), "--now", str(NOW), "--topic-config", "tiered:remote.storage.enable=true", "--json"]
    assert main([*args, "--dry-run"]) == 0
    assert json.loads(capsys.readouterr().out)["partitions"][0]["deletedSegments"] == []
    assert main([*args, "--remote-storage-dir", str(remote)]) == 0
    assert json.loads(capsys.readouterr().out)["partitions"][0]["remoteLog"]["highestOffset"] == 27
    assert _local_bases(log) == [28]
    assert (
        main(["dump", "--records", "--remote-log-metadata-decoder", str(FIXTURE / "log" / "__remote_log_metadata-0")])
        == 0
    )
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [o["payload"]["type"] for o in lines if o["type"] == "record"] == [
        "RemoteLogSegmentMetadataRecord",
        "RemoteLogSegmentMetadataUpdateRecord",
    ] * 2


def test_on_an_object_store(s3_server):
    """The same reads and plan through a real S3 API (moto) as from the local copy."""
    s3_server.create_bucket("tiered")
    copy_log_dir(str(FIXTURE), "s3://tiered/t")
    log, remote = "s3://tiered/t/log", "s3://tiered/t/remote"
    offsets = [o["offset"] for o in dump_paths([remote], records=True) if o["type"] == "record"]
    assert offsets == list(range(28))
    assert validate_paths([remote]).ok
    resolver = ConfigResolver(per_topic={"tiered": TIERED})
    for remote_storage in (None, remote):
        report = retain(log, config=resolver, now_ms=NOW, dry_run=True, remote_storage=remote_storage)
        (plan,) = [p for p in report.partitions if p.topic == "tiered"]
        assert [d.segment.base_offset for d in plan.deleted] == [0, 14] and plan.remote.highest_offset == 27


def test_purge_refuses_an_output_copy_with_the_remote_tier_rewritten_in_place(tiered, tmp_path):
    from kafkalog.errors import ConfigError
    from kafkalog.operations.purge import purge

    log, remote = tiered
    with pytest.raises(ConfigError, match="remote storage would be rewritten in place"):
        purge(
            None,  # refused before a session is needed
            str(log),
            [b"k1"],
            ledger=str(tmp_path / "ledger"),
            secret=b"s",
            output=str(tmp_path / "out"),
            remote_storage=str(remote),
        )
    assert not (tmp_path / "out").exists()
