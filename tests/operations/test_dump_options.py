"""`kafkalog dump`'s options after kafka-dump-log's (--skip-record-metadata, --max-bytes, the decoders on
the command line), control-record payloads, and files whose names are not Kafka's."""

from __future__ import annotations

import json
from pathlib import Path

from kafka.record.memory_records import MemoryRecords

from kafkalog.cli import main
from kafkalog.codec.control import build_end_txn_marker
from kafkalog.operations.dump import dump_paths

from ..conftest import REAL_FIXTURES

METADATA = Path(__file__).resolve().parents[1] / "fixtures" / "kraft-4.3.1" / "log" / "__cluster_metadata-0"


def _run(capsys, *argv):
    assert main(["dump", *argv]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_every_real_file_of_batches_dumps_whatever_its_name():
    files = [
        p
        for d in ("captured", "client-batches")
        for p in sorted((REAL_FIXTURES / d).rglob("*.log"))
        if p.stat().st_size  # kafka-python is the oracle for the batches' offsets
    ]
    assert len(files) >= 48
    for path in files:
        objs = list(dump_paths([str(path)]))
        assert objs[0]["type"] == "file" and "not a Kafka segment file name" in objs[0]["note"]
        # kafka-python names a legacy (v0/v1) batch by its wrapper's offset, its last
        ours = [o["baseOffset"] if o["magic"] == 2 else o["lastOffset"] for o in objs if o["type"] == "batch"]
        records, theirs = MemoryRecords(path.read_bytes()), []
        while records.has_next():
            batch = records.next_batch()
            if batch is None:
                break
            theirs.append(batch.base_offset)
        assert ours == theirs, path


def test_skip_record_metadata_and_max_bytes(capsys):
    log = str(METADATA / "00000000000000000000.log")
    full = _run(capsys, log, "--records")
    short = _run(capsys, log, "--records", "--skip-record-metadata", "--max-bytes", "421")
    # the first two batches end at byte 421 (kafka-dump-log: the third starts there)
    assert [o["baseOffset"] for o in short if o["type"] == "batch"] == [0, 1]
    # as kafka-dump-log --max-bytes 500: the batch cut at the limit is left out, and not reported torn
    assert [o["type"] for o in _run(capsys, log, "--max-bytes", "500")] == ["batch", "batch"]
    record = next(o for o in short if o["type"] == "record")
    assert set(record) == {"type", "file", "offset", "key", "value"}
    same = next(o for o in full if o["type"] == "record" and o["offset"] == record["offset"])
    assert same["value"] == record["value"] and "timestamp" in same and "headers" in same


def test_cluster_metadata_decoder_on_a_snapshot_file_and_the_quorum_state(capsys):
    snapshot = str(METADATA / "00000000000000000021-0000000001.checkpoint")
    objs = _run(capsys, snapshot, "--records", "--cluster-metadata-decoder")
    assert _run(capsys, snapshot, "--cluster-metadata-decoder") == objs  # a decoder implies --records
    assert objs[0] == {"type": "snapshot", "file": objs[0]["file"], "endOffset": 21, "epoch": 1}
    controls = [o["controlType"] for o in objs if o["type"] == "control"]
    assert controls == ["SNAPSHOT_HEADER", "SNAPSHOT_FOOTER"]
    topics = [o["payload"]["data"]["name"] for o in objs if o.get("payload", {}).get("type") == "TOPIC_RECORD"]
    assert topics == ["orders"]
    (state,) = _run(capsys, str(METADATA / "quorum-state"))
    assert state["type"] == "quorumState" and state["leaderEpoch"] == 1


def test_a_markers_payload_shows_its_version_and_coordinator_epoch(tmp_path):
    log = tmp_path / "t-0" / "00000000000000000000.log"
    log.parent.mkdir()
    log.write_bytes(
        build_end_txn_marker(offset=0, timestamp=5, producer_id=3, producer_epoch=0, commit=True, coordinator_epoch=7)
    )
    (control,) = [o for o in dump_paths([str(log)], records=True) if o["type"] == "control"]
    assert control["controlType"] == "COMMIT" and control["coordinatorEpoch"] == 7
    assert control["payload"] == {"version": 0}
