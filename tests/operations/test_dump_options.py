"""`kafkalog dump`'s options after kafka-dump-log's (--skip-record-metadata, --max-bytes, the decoders on
the command line), control-record payloads, and files whose names are not Kafka's."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from kafka.record.memory_records import MemoryRecords

from kafkalog.cli import main
from kafkalog.codec.batch import build_batch
from kafkalog.codec.control import build_end_txn_marker
from kafkalog.codec.records import Record
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


def test_key_and_value_decoders_as_kafka_dump_logs(tmp_path, capsys):
    records = [
        Record(0, 10, b"k-0", b'{"id": 1, "name": "\xc3\xa9"}', ()),
        Record(1, 11, b"\xff\xfe", b"not json", ((("h", b"\x00")),)),
        Record(2, 12, None, None, ()),
    ]
    log = tmp_path / "t-0" / "00000000000000000000.log"
    log.parent.mkdir()
    log.write_bytes(build_batch(records))

    def fields(*options):
        return [
            {k: o.get(k) for k in ("key", "value", "keyError", "valueError")}
            for o in _run(capsys, str(log), *options)
            if o["type"] == "record"
        ]

    # a decoder implies --records; base64 stays the default
    assert fields("--value-decoder", "base64") == fields("--records")
    assert fields("--records")[0]["value"] == base64.b64encode(records[0].value).decode()
    hexed = fields("--key-decoder", "hex", "--value-decoder", "json")
    assert [f["key"] for f in hexed] == ["6b2d30", "fffe", None]
    assert hexed[0]["value"] == {"id": 1, "name": "é"} and hexed[2]["value"] is None
    # a value that is not JSON stays base64 and says why, and the dump goes on
    assert hexed[1]["value"] == base64.b64encode(b"not json").decode() and hexed[1]["valueError"].startswith("not JSON")
    # string: UTF-8, malformed bytes replaced as Java's new String(bytes, UTF_8) does
    strings = fields("--key-decoder", "string", "--value-decoder", "string")
    assert [f["key"] for f in strings] == ["k-0", "\ufffd\ufffd", None]
    assert (
        strings[1]["value"] == "not json" and "valueError" not in _run(capsys, str(log), "--value-decoder", "string")[2]
    )


def test_files_takes_comma_lists_and_checkpoint_files_are_decoded(capsys):
    log_dir = Path(__file__).resolve().parents[1] / "fixtures" / "kraft-4.3.1" / "log"
    objs = _run(
        capsys,
        str(log_dir / "replication-offset-checkpoint"),
        "--files",
        f"{log_dir / 'meta.properties'},{log_dir / 'orders-0' / 'partition.metadata'}",
        "--files",
        str(log_dir / "orders-0" / "leader-epoch-checkpoint"),
    )
    assert [(o["type"], o.get("topic"), o.get("partition"), o.get("offset")) for o in objs[:2]] == [
        ("offsetCheckpoint", "orders", 0, 0),
        ("offsetCheckpoint", "orders", 1, 0),
    ]
    meta, metadata, epoch = objs[2:]
    assert meta["type"] == "metaProperties" and (meta["version"], meta["nodeId"]) == (1, 1)
    assert meta["clusterId"] == "C5I4OfapQnGBCJcjKe0-pA" and meta["directoryId"] == "CKCcG0CzPP3oP8f46qNcqQ"
    assert (metadata["type"], metadata["version"], metadata["topicId"]) == (
        "partitionMetadata",
        0,
        "WBvXqWGWSEWViPkqsHADUQ",
    )
    assert (epoch["type"], epoch["epoch"], epoch["startOffset"]) == ("leaderEpoch", 0, 0)
    assert main(["dump"]) == 2 and "needs a PATH or --files" in capsys.readouterr().err


def test_a_damaged_checkpoint_is_one_error_naming_the_file(tmp_path, capsys):
    bad = tmp_path / "replication-offset-checkpoint"
    bad.write_text("0\n2\norders 0 0\n")  # says 2 entries, holds 1
    assert main(["dump", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0]
