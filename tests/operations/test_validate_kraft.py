"""`kafkalog validate` on KRaft's metadata partition (tests/fixtures/kraft-4.3.1, written by a real Kafka
4.3.1 broker): its snapshots' batches and their agreement with the log, and its quorum-state."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kafkalog.operations.validate import validate_paths

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "kraft-4.3.1" / "log" / "__cluster_metadata-0"
SNAPSHOT = "00000000000000000021-0000000001.checkpoint"


@pytest.fixture
def metadata(tmp_path) -> Path:
    target = tmp_path / "__cluster_metadata-0"
    shutil.copytree(FIXTURE, target)
    return target


def _kraft(path: Path) -> list[tuple[str, str, str]]:
    report = validate_paths([str(path)])
    return [(p.check, p.severity, Path(p.file).name) for p in report.findings if p.check.startswith("kraft.")]


def test_the_brokers_metadata_partition_is_clean(metadata):
    report = validate_paths([str(metadata)])
    assert not report.findings and report.counts["snapshots"] == 4  # 2 producer, 2 KRaft snapshots


def test_a_snapshot_batch_with_a_bad_crc_is_an_error(metadata):
    data = bytearray((metadata / SNAPSHOT).read_bytes())
    data[200] ^= 0xFF  # inside the second batch (the records), covered by its CRC
    (metadata / SNAPSHOT).write_bytes(bytes(data))
    assert _kraft(metadata) == [("kraft.snapshot", "error", SNAPSHOT)]


def test_a_snapshot_without_its_footer_is_an_error(metadata):
    data = (metadata / SNAPSHOT).read_bytes()
    (metadata / SNAPSHOT).write_bytes(data[:1097])  # the footer batch starts at 1097 (kafka-dump-log)
    problems = validate_paths([str(metadata)]).findings
    (problem,) = [p for p in problems if p.check == "kraft.snapshot"]
    assert "SNAPSHOT_FOOTER" in problem.message and problem.position == 83


def test_a_log_start_above_every_snapshot_is_an_error(metadata):
    for path in metadata.glob("00000000000000000000.*"):
        path.unlink()  # the log now starts at 12
    (metadata / "00000000000000000018-0000000001.checkpoint").rename(
        metadata / "00000000000000000010-0000000001.checkpoint"
    )
    (metadata / SNAPSHOT).unlink()
    checks = _kraft(metadata)
    assert ("kraft.snapshot_range", "error", "00000000000000000012.log") in checks
    assert ("kraft.snapshot_range", "info", "00000000000000000010-0000000001.checkpoint") in checks


def test_a_snapshot_beyond_the_logs_last_epoch_is_a_warning(metadata):
    (metadata / SNAPSHOT).rename(metadata / "00000000000000000021-0000000002.checkpoint")
    assert _kraft(metadata) == [("kraft.snapshot_range", "warning", "00000000000000000021-0000000002.checkpoint")]


def test_a_quorum_state_that_is_not_json_is_an_error(metadata):
    (metadata / "quorum-state").write_text("leaderId=1\n")
    assert _kraft(metadata) == [("kraft.quorum_state", "error", "quorum-state")]


def test_a_snapshot_the_bootstrap_and_the_quorum_state_validate_on_their_own(metadata):
    files = [metadata / SNAPSHOT, FIXTURE.parent / "bootstrap.checkpoint", metadata / "quorum-state"]
    report = validate_paths([str(f) for f in files])
    assert not report.findings and report.counts["snapshots"] == 2
    (metadata / SNAPSHOT).write_bytes((metadata / SNAPSHOT).read_bytes()[83:])  # without its header batch
    assert _kraft(metadata / SNAPSHOT) == [("kraft.snapshot", "error", SNAPSHOT)]
