"""KRaft's metadata log is never rewritten: `__cluster_metadata-0` and `bootstrap.checkpoint` stay byte for
byte as they are through `retain`, whatever the configuration (the Spark commands: tests/spark/test_kraft_metadata.py).

The metadata log is a real one (tests/fixtures/kraft-4.3.1/log: a Kafka 4.3.1 node in KRaft combined
mode, formatted with `kafka-storage format`, a topic created, stopped cleanly; its metadata log has two
segments, producer snapshots and two KRaft snapshots), put beside generated topics.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from kafkalog.operations.retain import retain
from kafkalog.storage.naming import (
    KRAFT_BOOTSTRAP_CHECKPOINT,
    KRAFT_METADATA_NOT_REWRITTEN,
    KRAFT_METADATA_TOPIC,
    is_kraft_metadata,
)

KRAFT_LOG = Path(__file__).resolve().parents[1] / "fixtures" / "kraft-4.3.1" / "log"
METADATA_DIR = f"{KRAFT_METADATA_TOPIC}-0"
FAR_FUTURE = 10**13  # every segment is older than any retention.ms


def kraft_log_dir(root: Path) -> Path:
    """Generated topics (one to delete by time, one compacted) with the real metadata log and its
    broker's meta.properties beside them."""
    from kafkalog.operations.generate import GeneratorSpec, TopicSpec, generate

    log_dir = root / "log"
    generate(
        str(log_dir),
        GeneratorSpec(
            seed=3,
            consumer_offsets=None,
            topics=[
                TopicSpec(
                    "orders", records=300, keys=30, batch_records=(1, 4), segment_bytes=4096, index_interval_bytes=512
                ),
                TopicSpec(
                    "customers",
                    records=300,
                    keys=20,
                    tombstone_ratio=0.2,
                    batch_records=(1, 4),
                    cleanup_policy="compact",
                    segment_bytes=4096,
                    index_interval_bytes=512,
                ),
            ],
        ),
    )
    shutil.copytree(KRAFT_LOG / METADATA_DIR, log_dir / METADATA_DIR)
    shutil.copy2(KRAFT_LOG / KRAFT_BOOTSTRAP_CHECKPOINT, log_dir / KRAFT_BOOTSTRAP_CHECKPOINT)
    # the broker the metadata log places orders' replicas on (node 1, its one directory): a purge
    # finds every replica given
    shutil.copy2(KRAFT_LOG / "meta.properties", log_dir / "meta.properties")
    return log_dir


def kraft_files(log_dir: Path) -> dict[str, str]:
    """The metadata log's and bootstrap.checkpoint's files by name, with the SHA-256 of their bytes."""
    files = sorted((log_dir / METADATA_DIR).iterdir()) + [log_dir / KRAFT_BOOTSTRAP_CHECKPOINT]
    return {str(f.relative_to(log_dir)): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


def test_the_one_definition():
    assert is_kraft_metadata("__cluster_metadata")
    assert not any(map(is_kraft_metadata, ["__consumer_offsets", "cluster_metadata", "__cluster_metadata_x"]))


def test_fixture_is_a_real_kraft_metadata_log():
    names = {p.name for p in (KRAFT_LOG / METADATA_DIR).iterdir()}
    assert {
        "00000000000000000000.log",
        "00000000000000000012.log",
        "quorum-state",
        "00000000000000000021-0000000001.checkpoint",
    } <= names
    assert "node.id=1" in (KRAFT_LOG / "meta.properties").read_text()


@pytest.mark.parametrize("mode", ["dry-run", "in-place", "output"])
def test_retain_never_touches_the_metadata_log(tmp_path, mode):
    log_dir = kraft_log_dir(tmp_path)
    before = kraft_files(log_dir)
    output = tmp_path / "out" if mode == "output" else None
    # broker-wide retention of 1 ms, the log end as high watermark, a deleteRecords request for it
    report = retain(
        str(log_dir),
        config={"retention.ms": 1, "retention.bytes": 1},
        now_ms=FAR_FUTURE,
        delete_records={(KRAFT_METADATA_TOPIC, 0): 5, ("orders", 0): -1},
        truncate_below_start=True,
        missing_high_watermark="log-end",
        dry_run=mode == "dry-run",
        output=None if output is None else str(output),
    )
    plans = {(p.topic, p.partition): p for p in report.partitions}
    kraft = plans[(KRAFT_METADATA_TOPIC, 0)]
    assert kraft.skipped == KRAFT_METADATA_NOT_REWRITTEN and not kraft.changed and not kraft.deleted
    assert plans[("orders", 0)].deleted  # retention did run
    assert f"{METADATA_DIR}: skipped: {KRAFT_METADATA_NOT_REWRITTEN}" in report.summary()
    assert report.to_dict()["partitions"][0]["skipped"] == KRAFT_METADATA_NOT_REWRITTEN
    (refused,) = [r for r in report.delete_records_results if r["topic"] == KRAFT_METADATA_TOPIC]
    assert refused["error"]["code"] == "UNKNOWN_TOPIC_OR_PARTITION"  # as a broker answers: not a topic
    assert kraft_files(log_dir) == before
    if output is not None:
        assert kraft_files(output) == before


def test_retain_named_metadata_topic_is_reported_not_retained(tmp_path):
    log_dir = kraft_log_dir(tmp_path)
    before = kraft_files(log_dir)
    report = retain(
        str(log_dir),
        config={"retention.ms": 1, "cleanup.policy": "delete"},
        now_ms=FAR_FUTURE,
        topics=[KRAFT_METADATA_TOPIC],
        missing_high_watermark="log-end",
    )
    assert [(p.topic, p.skipped) for p in report.partitions] == [(KRAFT_METADATA_TOPIC, KRAFT_METADATA_NOT_REWRITTEN)]
    assert kraft_files(log_dir) == before
