"""Compaction on Spark, end to end on real files: Kafka's outcomes, valid output, determinism."""

from __future__ import annotations

import json
import shutil

from kafkalog.codec.records import Record
from kafkalog.config import resolver_from
from kafkalog.operations.compact import compact
from kafkalog.operations.validate import validate_paths
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.log_writer import PartitionWriter
from kafkalog.storage.logdir import LogDir
from kafkalog.storage.naming import CLEANER_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT

COMPACT = resolver_from(settings=["cleanup.policy=compact", "delete.retention.ms=100"])
T0 = 1_700_000_000_000


def _log(tmp_path, build):
    root = tmp_path / "logs"
    root.mkdir()
    fs = LogFileSystem.for_path(str(root))[0]
    writer = PartitionWriter(
        fs, str(root), "t", 0, segment_bytes=1 << 20, segment_ms=1 << 40, index_interval_bytes=0, now_ms=T0
    )
    build(writer)
    writer.roll()
    written = writer.close()
    log_dir = LogDir.open(str(root))
    log_dir.write_checkpoint(REPLICATION_OFFSET_CHECKPOINT, {("t", 0): writer.log_end_offset})
    return str(root), written


def _contents(root):
    part = LogDir.open(root).partition("t", 0)
    batches, records = [], []
    for seg in part.segments:
        for _, b in seg.batches():
            batches.append(b.last_offset)
            records += [(r.offset, r.key) for r in b.records()]
    return batches, records


def _rec(key):
    return Record(0, T0, None if key is None else str(key).encode(), b"v%s" % str(key).encode())


def test_basic_transaction_aware_cleaning__LCT_testBasicTransactionAwareCleaning(spark, tmp_path):
    def build(w):
        w.append_records([_rec(1), _rec(2)], producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True)
        w.append_records([_rec(2), _rec(3)], producer_id=2, producer_epoch=0, base_sequence=0, is_transactional=True)
        w.append_records([_rec(3), _rec(4)], producer_id=1, producer_epoch=0, base_sequence=2, is_transactional=True)
        w.append_end_txn_marker(producer_id=1, producer_epoch=0, commit=False, timestamp=T0)
        w.append_end_txn_marker(producer_id=2, producer_epoch=0, commit=True, timestamp=T0)
        w.append_records([_rec(2)], producer_id=1, producer_epoch=0, base_sequence=4, is_transactional=True)
        w.append_end_txn_marker(producer_id=1, producer_epoch=0, commit=True, timestamp=T0)

    root, _ = _log(tmp_path, build)
    result = compact(spark, root, COMPACT, now=T0 + 1_000, force=True)
    batches, records = _contents(root)
    assert [o for o, k in records if k is not None and len(k) == 1] == [3, 8]  # keys 3 and 2 survive
    assert [o for o, _ in records] == [3, 6, 7, 8, 9]  # with the three markers
    (row,) = result.report
    assert (row["aborted_transaction"], row["superseded"]) == (4, 1)
    assert LogDir.open(root).read_checkpoint(CLEANER_OFFSET_CHECKPOINT) == {("t", 0): 10}
    assert validate_paths([root]).exit_code == 0


def test_tombstone_survives_first_pass_then_expires__LCT_testCleanTombstone(spark, tmp_path):
    def build(w):
        w.append_records([_rec(1), _rec(2)])
        w.append_records([Record(0, T0 - 10**9, b"1", None)])  # an old tombstone: its horizon starts now
        w.append_records([_rec(3)])

    root, _ = _log(tmp_path, build)
    compact(spark, root, COMPACT, now=T0, force=True)
    assert _contents(root)[1] == [(1, b"2"), (2, b"1"), (3, b"3")]
    compact(spark, root, COMPACT, now=T0 + 50, force=True)  # within delete.retention.ms
    assert _contents(root)[1] == [(1, b"2"), (2, b"1"), (3, b"3")]
    compact(spark, root, COMPACT, now=T0 + 101, force=True)
    assert _contents(root)[1] == [(1, b"2"), (3, b"3")]
    assert validate_paths([root]).exit_code == 0


def test_generated_log_compacts_validates_and_a_rerun_changes_nothing(spark, tmp_path, small_log):
    root = str(tmp_path / "logs")
    shutil.copytree(small_log.path, root)
    from kafkalog.storage.logdir import parse_properties

    resolver = resolver_from(parse_properties(small_log.summary.config_properties()))
    first = compact(spark, root, resolver, now=T0)  # a fresh log is all dirty: chosen without --force
    assert any(r["superseded"] for r in first.report) and first.plan.chosen
    assert validate_paths([root]).exit_code == 0
    before = {p: open(p, "rb").read() for p in _files(root)}
    second = compact(spark, root, resolver, now=T0)  # nothing dirty since the checkpoint
    (customers,) = [s for s in second.plan.logs if s.topic == "customers"]
    assert not second.plan.chosen and customers.reason.startswith("dirty ratio 0.000")
    assert before == {p: open(p, "rb").read() for p in _files(root)}


def _files(root):
    import os

    return sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if not f.endswith(".lock"))


def test_cli_compact_output_leaves_input_untouched_and_plan_writes_nothing(spark, tmp_path, small_log, capsys):

    from kafkalog.cli import main

    root, out = str(tmp_path / "in"), str(tmp_path / "out")
    shutil.copytree(small_log.path, root)
    config = tmp_path / "topics.properties"
    config.write_text(small_log.summary.config_properties())
    before = {p: open(p, "rb").read() for p in _files(root)}
    assert main(["plan", root, "--config-file", str(config), "--now", str(T0)]) == 0
    assert "customers" in capsys.readouterr().out
    assert (
        main(
            [
                "compact",
                root,
                "--config-file",
                str(config),
                "--now",
                str(T0),
                "--output",
                out,
                "--report",
                str(tmp_path / "report.json"),
            ]
        )
        == 0
    )
    assert before == {p: open(p, "rb").read() for p in _files(root)}
    report = json.loads((tmp_path / "report.json").read_text())
    (customers,) = [r for r in report["records"] if r["topic"] == "customers"]
    assert customers["superseded"] > 0 and report["now"] == T0
    assert validate_paths([out], index_interval_bytes=256).exit_code == 0
    assert _contents_of(out, "customers") != _contents_of(root, "customers")


def _contents_of(root, topic):
    part = LogDir.open(root).partition(topic, 0)
    return [r.offset for seg in part.segments for _, b in seg.batches() for r in b.records()]


def test_every_format_compacts_to_the_latest_record_per_key_as_kafka_python_reads_it(spark, tmp_path, small_log):
    """v0 and v1 (legacy tombstone rule, wrapper offsets), v2 in every codec, idempotent producers and
    unkeyed records: after one forced pass, kafka-python reads exactly the latest record of each key
    below the first uncleanable offset, and everything above it, computed from the input independently."""
    root, out = str(tmp_path / "in"), str(tmp_path / "out")
    shutil.copytree(small_log.path, root)
    everything = resolver_from(settings=["cleanup.policy=compact"])
    topics = ["orders", "customers", "clicks", "legacy-v1", "legacy-v0"]  # payments: transactions, tested apart
    result = compact(spark, root, everything, now=T0, force=True, topics=topics, output=out)
    assert {s.topic for s in result.plan.chosen} == set(topics)
    for state in result.plan.logs:
        before = _kafka_python_records(root, state.topic, state.partition)
        latest = {key: offset for offset, key, _ in before if key is not None and offset < state.upper_bound}
        expected = [r for r in before if r[0] >= state.upper_bound or latest.get(r[1]) == r[0]]
        assert _kafka_python_records(out, state.topic, state.partition) == expected, (state.topic, state.partition)
    assert validate_paths([out], index_interval_bytes=256).exit_code == 0
    report = json.loads(json.dumps(result.to_dict()))  # the report compact --report writes: JSON as it is
    assert (report["now"], report["dryRun"], report["logDir"]) == (T0, False, out)
    assert [p["firstDirtyOffset"] for p in report["partitions"]] == [
        p["first_dirty_offset"] for p in result.plan.partitions()
    ]
    assert [r["abortedTransaction"] for r in report["records"]] == [r["aborted_transaction"] for r in result.report]
    assert not [key for key in _keys(report) if "_" in key]  # one casing: camelCase, as every report's


def _keys(value) -> set:
    if isinstance(value, dict):
        return set(value).union(*map(_keys, value.values()))
    return set().union(*map(_keys, value)) if isinstance(value, list) else set()


def test_legacy_batches_written_as_v2_as_kafka_4_does(spark, tmp_path, small_log):
    """`legacy_as_v2`: every v0/v1 batch of the cleaned segments comes out as v2 (Kafka 4.x's filterTo,
    checked byte for byte in tests/kafka/test_filter_to.py), the records kafka-python reads are those
    of the default pass, and the batches above the cleaned range keep their format."""
    root, out = str(tmp_path / "in"), str(tmp_path / "out")
    shutil.copytree(small_log.path, root)
    topics = ["legacy-v1", "legacy-v0"]
    result = compact(
        spark,
        root,
        resolver_from(settings=["cleanup.policy=compact"]),
        T0,
        force=True,
        topics=topics,
        output=out,
        legacy_as_v2=True,
    )
    for state in result.plan.logs:
        before = _kafka_python_records(root, state.topic, state.partition)
        latest = {key: offset for offset, key, _ in before if key is not None and offset < state.upper_bound}
        expected = [r for r in before if r[0] >= state.upper_bound or latest.get(r[1]) == r[0]]
        assert _kafka_python_records(out, state.topic, state.partition) == expected
        formats = {
            (b.base_offset < state.upper_bound, b.magic)
            for seg in LogDir.open(out).partition(state.topic, state.partition).segments
            for _, b in seg.batches()
        }
        legacy = 1 if state.topic == "legacy-v1" else 0
        assert formats == {(True, 2), (False, legacy)}, (state.topic, formats)
    assert validate_paths([out], index_interval_bytes=512).exit_code == 0


def _kafka_python_records(root, topic, partition):
    from kafka.record.memory_records import MemoryRecords

    part = LogDir.open(root).partition(topic, partition)
    out = []
    for seg in part.segments:
        records = MemoryRecords(open(seg.log_path, "rb").read())
        while (batch := records.next_batch()) is not None:
            out += [(r.offset, r.key, r.value) for r in batch]
    return out


def test_a_corrupt_batch_makes_its_partition_uncleanable_and_changes_nothing(spark, tmp_path, small_log, capsys):
    from kafkalog.cli import main
    from kafkalog.errors import CrcMismatchError

    root = str(tmp_path / "logs")
    shutil.copytree(small_log.path, root)
    segment = sorted((tmp_path / "logs" / "customers-0").glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    data[100] ^= 0xFF  # inside the first batch's CRC-covered bytes
    segment.write_bytes(bytes(data))
    before = {p: open(p, "rb").read() for p in _files(root)}
    config = resolver_from(settings=["cleanup.policy=compact"])
    result = compact(spark, root, config, now=T0, force=True, topics=["customers"])
    err = result.plan.uncleanable[("customers", 0)]
    assert isinstance(err, CrcMismatchError) and f"{segment}, byte 17, offset" in str(err)  # the first CRC field
    assert not result.plan.chosen and result.outputs == {}
    assert {p: open(p, "rb").read() for p in _files(root)} == before
    assert (
        main(
            ["compact", root, "--config", "cleanup.policy=compact", "--force", "--topic", "customers", "--now", str(T0)]
        )
        == 1
    )  # something was skipped
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert err_lines[-1].startswith(
        f"kafkalog compact: customers-0 is uncleanable and was left as it is: {segment}, byte 17, offset"
    )
    assert not any("Traceback" in line or line.startswith("\tat ") for line in err_lines)
