"""`kafkalog dump`: JSON Lines with Kafka's field names, for log dirs, partition dirs and single files."""
from __future__ import annotations

import base64
import json

from kafka.record.memory_records import MemoryRecords

from kafkalog.cli import main

from ..conftest import REAL_FIXTURES

BROKERS = REAL_FIXTURES / "broker-dirs"


def _run(capsys, *argv):
    code = main(["dump", *argv])
    out = capsys.readouterr()
    return code, [json.loads(line) for line in out.out.splitlines()], out.err


def test_dump_log_dir_records_match_kafka_python(capsys):
    code, objs, _ = _run(capsys, str(BROKERS / "kafka-gzip-idempotent"), "--records")
    assert code == 0
    records = [o for o in objs if o["type"] == "record"]
    expected = []
    for path in sorted((BROKERS / "kafka-gzip-idempotent").glob("*/*.log")):
        recs = MemoryRecords(path.read_bytes())
        while recs.has_next():
            expected += [(r.offset, r.value, list(r.headers)) for r in recs.next_batch()]
    got = [(o["offset"], base64.b64decode(o["value"]) if o["value"] is not None else None,
            [(h["key"], base64.b64decode(h["value"])) for h in o["headers"]]) for o in records]
    assert got == expected and len(got) == 14
    batch = next(o for o in objs if o["type"] == "batch" and o["producerId"] >= 0)
    assert {"baseOffset", "lastOffset", "baseSequence", "lastSequence", "producerEpoch", "isTransactional",
            "partitionLeaderEpoch", "compresscodec", "isvalid", "position"} <= batch.keys()


def test_dump_offsets_decoder_and_snapshot(capsys):
    part = BROKERS / "kafka-2.7.1-zk" / "__consumer_offsets-39"
    code, objs, _ = _run(capsys, str(part), "--records", "--offsets-decoder")
    assert code == 0
    commit = next(o for o in objs if o["type"] == "record" and o["offset"] == 16)
    assert commit["payload"]["key"] == {"version": 1, "group": "console-consumer-65070",
                                        "topic": "test_topic_0603", "partition": 0}
    assert commit["payload"]["value"]["offset"] == 9
    code, objs, _ = _run(capsys, str(BROKERS / "kafka-2.7.1-zk" / "myTopic-0" / "00000000000000000038.snapshot"))
    assert code == 0 and [o["producerId"] for o in objs] == [4001, 4002, 4003]


def test_dump_single_segment_and_truncated_tail(capsys, tmp_path):
    source = next((REAL_FIXTURES / "captured" / "kafkajs").glob("*partial_messages*-6.log"))
    target = tmp_path / "00000000000000000000.log"
    target.write_bytes(source.read_bytes())
    code, objs, _ = _run(capsys, str(target))
    assert code == 0 and objs[-1]["type"] == "truncated" and objs[-1]["length"] > 0


def test_dump_missing_path_fails_with_exit_2(capsys, tmp_path):
    code, _, err = _run(capsys, str(tmp_path / "nope"))
    assert code == 2 and "no such file" in err
