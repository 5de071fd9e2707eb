"""`kafkalog dump`: JSON Lines with Kafka's field names, for log dirs, partition dirs and single files."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys

import pytest
from kafka.record.memory_records import MemoryRecords

from kafkalog.cli import main
from kafkalog.codec.batch import build_batch
from kafkalog.codec.records import Record
from kafkalog.operations.dump import dump_paths, write_dump
from kafkalog.operations.dump_json import Base64Bytes, write_json_lines

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
    got = [
        (
            o["offset"],
            base64.b64decode(o["value"]) if o["value"] is not None else None,
            [(h["key"], base64.b64decode(h["value"])) for h in o["headers"]],
        )
        for o in records
    ]
    assert got == expected and len(got) == 14
    batch = next(o for o in objs if o["type"] == "batch" and o["producerId"] >= 0)
    assert {
        "baseOffset",
        "lastOffset",
        "baseSequence",
        "lastSequence",
        "producerEpoch",
        "isTransactional",
        "partitionLeaderEpoch",
        "compresscodec",
        "isvalid",
        "position",
    } <= batch.keys()


def test_dump_offsets_decoder_and_snapshot(capsys):
    part = BROKERS / "kafka-2.7.1-zk" / "__consumer_offsets-39"
    code, objs, _ = _run(capsys, str(part), "--records", "--offsets-decoder")
    assert code == 0
    commit = next(o for o in objs if o["type"] == "record" and o["offset"] == 16)
    assert commit["payload"]["key"] == {
        "type": 1,
        "data": {"group": "console-consumer-65070", "topic": "test_topic_0603", "partition": 0},
    }
    assert commit["payload"]["value"]["data"]["offset"] == 9
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


def test_a_missing_path_after_others_fails_before_anything_is_printed(capsys, tmp_path):
    """plan_dump finds every path first: no partial output (before the plan, the first path's
    batches were printed before the second was found missing)."""
    code, out, err = _run(capsys, str(BROKERS / "kafka-gzip-idempotent"), str(tmp_path / "nope"))
    assert code == 2 and "no such file" in err and out == []


# -- write_dump: what `kafkalog dump` prints, large keys and values written in pieces --------------


def _log_with_large_records(root, value_sizes, codec=0):
    """A partition t-0 of one batch whose records have values of `value_sizes` bytes (None: null),
    with a header holding a large value too."""
    part = root / "t-0"
    part.mkdir(parents=True)
    records = [
        Record(
            i,
            1_700_000_000_000 + i,
            b"key-%d" % i if i % 2 else os.urandom(70_000),
            None if n is None else os.urandom(n),
            (("h\n\u00e9", os.urandom(100_000)), ("n", None)),
        )
        for i, n in enumerate(value_sizes)
    ]
    (part / "00000000000000000000.log").write_bytes(
        build_batch(records, codec=codec)
        + build_batch([Record(len(records), 1_700_000_000_100, None, b"small")], base_offset=len(records))
    )
    return records


@pytest.mark.parametrize("codec", [0, 1, 4])
def test_write_dump_prints_exactly_the_json_of_dump_paths(tmp_path, codec):
    records = _log_with_large_records(tmp_path, [5, 3 * 1024 * 1024 + 1, None, 64 * 1024, 64 * 1024 - 1], codec)
    for options in ({"records": True}, {"records": False}, {"records": True, "txn_index": True}):
        expected = "".join(json.dumps(o, separators=(",", ":")) + "\n" for o in dump_paths([str(tmp_path)], **options))
        out = io.StringIO()
        write_dump([str(tmp_path)], out, **options)
        assert out.getvalue() == expected
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    values = [base64.b64decode(o["value"]) if o["value"] is not None else None for o in lines if o["type"] == "record"]
    assert values == [r.value for r in records] + [b"small"]


def test_write_json_lines_streams_only_base64_bytes():
    out = io.StringIO()
    big = os.urandom(3 * (3 << 18) + 2)  # several pieces and a partial one
    write_json_lines([{"a": [1, {"b": Base64Bytes(big)}], "c": "x\n"}, {"plain": None}], out)
    first, second = out.getvalue().splitlines()
    assert json.loads(first) == {"a": [1, {"b": base64.b64encode(big).decode()}], "c": "x\n"}
    assert second == '{"plain":null}'
    with pytest.raises(TypeError, match="not JSON serializable"):
        write_json_lines([{"x": object()}], io.StringIO())


DUMP = """
import sys
from kafkalog.operations.dump import write_dump
def peak():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
before = peak()
with open(sys.argv[2], "w") as out:
    write_dump([sys.argv[1]], out, records=True)
print(peak() - before)
"""


def test_dumping_a_large_record_costs_about_twice_its_size(tmp_path):
    size = 64 * 1024 * 1024
    part = tmp_path / "logs" / "t-0"
    part.mkdir(parents=True)
    value = os.urandom(1024) * (size // 1024)
    (part / "00000000000000000000.log").write_bytes(build_batch([Record(0, 1_700_000_000_000, b"k", value)]))
    done = subprocess.run(
        [sys.executable, "-c", DUMP, str(tmp_path / "logs"), str(tmp_path / "out.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    grown = int(done.stdout)
    # the batch as read and the record's value; building the base64 text whole and serialising it
    # (what json.dumps of the object does) cost five times the record and more
    assert grown < 2.75 * size, f"peak grew by {grown >> 20} MiB dumping a {size >> 20} MiB record"
    with open(tmp_path / "out.json") as f:
        objs = [json.loads(line) for line in f]
    assert [o["type"] for o in objs] == ["batch", "record"] and base64.b64decode(objs[1]["value"]) == value
