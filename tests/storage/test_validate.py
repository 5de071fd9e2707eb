"""`kafkalog validate`: real broker directories and captured files give exactly the findings their
README explains; synthetic logs are clean; each kind of corruption is found, located and fails."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from kafkalog.codec.batch import RecordBatch, build_batch
from kafkalog.codec.control import build_end_txn_marker
from kafkalog.codec.reader import iter_batches
from kafkalog.codec.records import Record
from kafkalog.errors import LogDirError
from kafkalog.operations.generate import GeneratorSpec, TopicSpec, generate, small_preset
from kafkalog.operations.validate import validate_paths
from kafkalog.operations.validate_report import CHECKS, Problem, ValidationReport
from kafkalog.rules.aborted_txn import AbortedTxn
from kafkalog.storage.index import build_indexes
from kafkalog.storage.producer_state import ProducerStateManager
from kafkalog.storage.snapshot import ProducerSnapshot
from kafkalog.storage.txnindex import TransactionIndex

REAL = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "real"
BROKER_DIRS = REAL / "broker-dirs"


def findings(report: ValidationReport, root: Path | None = None) -> set[tuple[str, str]]:
    """(check, file relative to root) of every finding."""
    out = set()
    for p in report.findings:
        file = p.file or ""
        if root is not None and file.startswith(str(root)):
            file = file[len(str(root)) :].lstrip("/")
        out.add((p.check, file))
    return out


def only(report: ValidationReport, check: str) -> Problem:
    found = [p for p in report.findings if p.check == check]
    assert len(found) == 1, report.findings
    return found[0]


def absent_active_indexes(log_dir: Path) -> set[tuple[str, str]]:
    """index.missing / timeindex.missing infos for every partition whose active (last) segment has
    no .index / .timeindex: normal, the broker creates them when it opens the segment."""
    out = set()
    for part in sorted(p for p in log_dir.iterdir() if p.is_dir()):
        logs = sorted(part.glob("*.log"), key=lambda f: int(f.name.split(".")[0]))
        if not logs:
            continue
        active = logs[-1].name.split(".")[0]
        for suffix, check in ((".index", "index.missing"), (".timeindex", "timeindex.missing")):
            if not (part / f"{active}{suffix}").exists():
                out.add((check, f"{part.name}/{active}{suffix}"))
    return out


# -- real broker directories ---------------------------------------------------------------------------


def test_every_real_broker_dir_has_only_the_findings_its_readme_explains():
    seen = set()
    for log_dir in sorted(BROKER_DIRS.iterdir()):
        report = validate_paths([str(log_dir)])
        got = findings(report, log_dir)
        seen.add(log_dir.name)
        if log_dir.name == "kafka-0.8-v0.golden":
            # Not a log directory: the decoded text of kafka-0.8-v0's partitions, one file per
            # partition. Nothing Kafka is in it, which a CI run should not take for success.
            assert got == {("logdir.not_a_log_dir", "")}
            assert report.exit_code == 1
            continue
        expected = absent_active_indexes(log_dir)
        if log_dir.name == "kafka-snappy":
            # Its recovery-point and replication checkpoints list the 50 __consumer_offsets
            # partitions, whose directories were not kept in the fixture. Kafka ignores such entries.
            expected |= {
                ("checkpoint.unknown_partition", "recovery-point-offset-checkpoint"),
                ("checkpoint.unknown_partition", "replication-offset-checkpoint"),
            }
        assert got == expected, log_dir.name
        # Everything above is informational: every real broker directory is valid.
        assert {p.severity for p in report.findings} <= {"info"}
        assert report.exit_code == 0, report.summary()
    assert seen == {
        "confluent-5.1.2-lz4",
        "kafka-0.8-v0",
        "kafka-0.8-v0.golden",
        "kafka-2.7.1-zk",
        "kafka-3.1.0",
        "kafka-gzip-idempotent",
        "kafka-snappy",
    }


def test_kafka_2_7_1_compacted_segments_and_absent_active_indexes():
    log_dir = BROKER_DIRS / "kafka-2.7.1-zk"
    report = validate_paths([str(log_dir)])
    got = findings(report, log_dir)
    # The README: "The .index/.timeindex files of active segments are absent". The compacted
    # __consumer_offsets partitions have an inactive segment 0 whose (empty) .index and one-entry
    # .timeindex are present and consistent, so nothing is reported for them.
    assert ("index.missing", "__consumer_offsets-28/00000000000000000002.index") in got
    assert not any(f.startswith("__consumer_offsets-28/00000000000000000000") for _, f in got)
    assert report.counts["index_files"] == 3 and report.counts["time_index_files"] == 3
    # myTopic-0: an empty segment at 38 whose producer state is only in 38.snapshot; the snapshot
    # at the log start offset is in range, and the checkpoints (recovery point, high watermark 38)
    # agree with the log end offset 38.
    assert not any(f.startswith("myTopic-0/0") and c != "index.missing" and c != "timeindex.missing" for c, f in got)
    assert report.counts["snapshots"] == 9


def test_a_partition_dir_given_alone():
    part = BROKER_DIRS / "kafka-gzip-idempotent" / "lsx1-0"
    report = validate_paths([str(part)])
    # 13 idempotent producers, epochs changing batch to batch, matching the leader-epoch-checkpoint:
    # no leader_epoch.batches finding.
    assert findings(report, part.parent) == {
        ("index.missing", "lsx1-0/00000000000000000000.index"),
        ("timeindex.missing", "lsx1-0/00000000000000000000.timeindex"),
    }
    assert report.counts["batches"] > 13 and report.exit_code == 0


# -- captured fetch responses and client batches, as single segment files -----------------------------

SINGLE_FILE_FINDINGS = {
    # README: "*invalid_crc* has a wrong CRC on purpose".
    "captured/kafka-rust/fetch2.mytopic.nocompression.invalid_crc.kafka.0900.log": {("batch.crc", "error")},
    # README: "v0_recordbatch_zstd.log is inconsistent on purpose: its CRC is valid, but its
    # attributes say 'none' while the payload is zstd" -- the zstd bytes do not parse as records.
    "captured/kafkajs/v0_recordbatch_zstd.log": {("batch.records", "error")},
    # README: "*partial_messages* and *index_out_of_range* end in a truncated batch on purpose, as a
    # Fetch response may". A file given alone is the last segment: a torn tail there is a warning.
    "captured/kafkajs/v2_response_index_out_of_range.test-topic-index-out-of-range-1.log": {
        ("segment.truncated_tail", "warning")
    },
    **{
        f"captured/kafkajs/v2_response_partial_messages_many_partitions.topic-partial-message-{n}.log": {
            ("segment.truncated_tail", "warning")
        }
        for n in (0, 3, 6, 9)
    },
    # README: "control_batch_data_v2.log is a hand-made ABORT control batch whose CRC is wrong".
    "client-batches/kafka-python/control_batch_data_v2.log": {("batch.crc", "error")},
    # Not in the README: kafka-python's `record_batch_data_v2` test list is four independent
    # batches, and the fourth (captured a year later, maxTimestamp 1535546684353 against
    # 1503229962141) starts again at offset 0 after offsets 0..3. As one record set, its offsets
    # go backwards.
    "client-batches/kafka-python/record_batch_data_v2.log": {("offsets.order", "error")},
}


def single_files() -> list[Path]:
    return sorted([*REAL.glob("captured/*/*.log"), *REAL.glob("client-batches/*/*.log")])


def test_every_captured_and_client_file_has_only_the_findings_its_readme_explains():
    files = single_files()
    assert len(files) == 56
    for file in files:
        name = str(file.relative_to(REAL))
        report = validate_paths([str(file)])
        got = {(p.check, p.severity) for p in report.findings}
        assert got == SINGLE_FILE_FINDINGS.get(name, set()), name
        assert all(p.file == str(file) for p in report.findings)
        assert report.exit_code == (1 if got else 0), name
    assert set(SINGLE_FILE_FINDINGS) <= {str(f.relative_to(REAL)) for f in files}


def test_single_file_findings_are_located():
    invalid_crc = REAL / "captured/kafka-rust/fetch2.mytopic.nocompression.invalid_crc.kafka.0900.log"
    crc = only(validate_paths([str(invalid_crc)]), "batch.crc")
    assert (crc.position, crc.offset) == (12, 0)  # a v0 message's CRC-32 is at byte 12
    assert "0x58585858" in crc.message
    ctl = only(validate_paths([str(REAL / "client-batches/kafka-python/control_batch_data_v2.log")]), "batch.crc")
    assert (ctl.position, ctl.offset) == (17, 0)  # a v2 batch's CRC-32C is at byte 17
    order = only(validate_paths([str(REAL / "client-batches/kafka-python/record_batch_data_v2.log")]), "offsets.order")
    assert (order.position, order.offset) == (218, 0)
    tail = only(
        validate_paths(
            [str(REAL / "captured/kafkajs/v2_response_partial_messages_many_partitions.topic-partial-message-0.log")]
        ),
        "segment.truncated_tail",
    )
    assert (tail.position, tail.offset) == (0, None) and "declares 1785 bytes" in tail.message


def test_shallow_mode_does_not_decode_records():
    # v0_recordbatch_zstd.log only fails when its records are decoded: its CRC is valid.
    report = validate_paths([str(REAL / "captured/kafkajs/v0_recordbatch_zstd.log")], deep=False)
    assert report.findings == [] and report.exit_code == 0 and report.counts["records"] == 0


# -- synthetic logs from the generator ----------------------------------------------------------------

SPEC = GeneratorSpec(
    seed=7,
    topics=[
        TopicSpec(
            "events",
            records=300,
            keys=30,
            value_bytes=(20, 60),
            batch_records=(1, 5),
            idempotent_producers=2,
            leader_epochs=2,
            segment_bytes=3000,
            index_interval_bytes=200,
        ),
        TopicSpec(
            "payments",
            records=300,
            keys=20,
            value_bytes=(20, 60),
            batch_records=(1, 4),
            plain_producer=False,
            idempotent_producers=1,
            transactional_producers=2,
            abort_ratio=0.5,
            segment_bytes=3000,
            index_interval_bytes=200,
        ),
    ],
    consumer_offsets=None,
)
INTERVALS = {t.name: t.index_interval_bytes for t in SPEC.topics}


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("generated") / "logs"
    generate(str(path), SPEC)
    return path


@pytest.fixture
def log_dir(generated, tmp_path) -> Path:
    """A private copy of the generated log directory, to corrupt."""
    copy = tmp_path / "logs"
    shutil.copytree(generated, copy)
    for f in copy.rglob("*"):
        f.chmod(0o755 if f.is_dir() else 0o644)
    return copy


def validate(path: Path, **kwargs) -> ValidationReport:
    return validate_paths([str(path)], index_interval_bytes=INTERVALS, **kwargs)


def segments(part: Path) -> list[Path]:
    return sorted(part.glob("*.log"), key=lambda f: int(f.name.split(".")[0]))


def test_a_generated_log_is_clean(generated):
    report = validate(generated)
    assert report.findings == [], report.summary()
    assert report.exit_code == 0 and report.ok
    c = report.counts
    markers = sum(b.is_control for log in generated.rglob("*.log") for b in iter_batches(log.read_bytes()))
    assert markers > 0
    assert c["partitions"] == 2 and c["segments"] >= 6 and c["batches"] > 100 and c["records"] == 600 + markers
    assert c["txn_index_entries"] > 0 and c["snapshots"] > 0 and c["snapshot_producers_compared"] > 0
    assert c["index_entries"] > 0 and c["time_index_entries"] > 0


def test_each_partition_directory_is_listed_once(generated, monkeypatch):
    """One LIST request a partition on an object store: the listing that sizes a partition for the
    progress and the tasks is the one its check reads."""
    from collections import Counter

    from kafkalog.storage.fs import LogFileSystem

    listed: Counter = Counter()
    list_dir = LogFileSystem.list_dir

    def counted(self, path):
        listed[path] += 1
        return list_dir(self, path)

    monkeypatch.setattr(LogFileSystem, "list_dir", counted)
    assert validate_paths([str(generated)], index_interval_bytes=INTERVALS).exit_code == 0
    partitions = [str(p) for p in generated.iterdir() if p.is_dir()]
    assert partitions and {p: listed[p] for p in partitions} == {p: 1 for p in partitions}


def test_the_small_preset_is_clean(tmp_path):
    # Every codec, v0 and v1 topics, LogAppendTime, tombstones, transactions, __consumer_offsets.
    spec = small_preset()
    generate(str(tmp_path / "logs"), spec)
    report = validate_paths(
        [str(tmp_path / "logs")], index_interval_bytes={t.name: t.index_interval_bytes for t in spec.topics}
    )
    assert report.findings == [], report.summary()
    assert report.counts["partitions"] == 11 and report.exit_code == 0


def test_the_generated_log_is_clean_when_read_in_tiny_chunks(generated):
    # Batches straddle every chunk boundary: streaming must not change any result.
    report = validate(generated, chunk_size=64)
    assert report.findings == [] and report.counts == validate(generated).counts


def test_default_index_interval_reports_lookup_consistent_indexes_as_info(generated):
    # With Kafka's default index.interval.bytes (4096) recovery would build sparser indexes than the
    # generated ones (200 bytes): informational, not a problem.
    report = validate_paths([str(generated)])
    assert {p.check for p in report.findings} == {"index.mismatch", "timeindex.mismatch"}
    assert report.exit_code == 0


def test_flipped_bit_in_a_batch_is_a_crc_error(log_dir):
    log = segments(log_dir / "events-0")[0]
    data = bytearray(log.read_bytes())
    batch = list(iter_batches(bytes(data)))[3]
    value = batch.records()[0].value
    at = bytes(data).index(value, batch.position) + len(value) // 2  # inside a record value
    data[at] ^= 0x10
    log.write_bytes(bytes(data))
    report = validate(log_dir)
    assert findings(report, log_dir) == {("batch.crc", f"events-0/{log.name}")}
    p = report.findings[0]
    assert (p.severity, p.position, p.offset) == ("error", batch.position + 17, batch.base_offset)
    assert report.exit_code == 1


def test_truncated_tail_of_the_active_segment_is_a_warning(log_dir):
    active = segments(log_dir / "events-0")[-1]
    data = active.read_bytes()
    last = list(iter_batches(data))[-1]
    size = len(data)
    with active.open("ab") as f:  # a torn write: the first 40 bytes of another batch
        f.write(data[last.position : last.position + 40])
    report = validate(log_dir)
    assert findings(report, log_dir) == {("segment.truncated_tail", f"events-0/{active.name}")}
    p = report.findings[0]
    assert (p.severity, p.position, p.offset) == ("warning", size, last.last_offset + 1)
    assert report.exit_code == 1
    assert validate(log_dir, fail_on="error").exit_code == 0


def test_truncated_tail_of_an_inactive_segment_is_an_error(log_dir):
    first = segments(log_dir / "events-0")[0]
    data = first.read_bytes()
    last = list(iter_batches(data))[-1]
    first.write_bytes(data[:-5])
    report = validate(log_dir)
    tail = only(report, "segment.truncated_tail")
    assert (tail.severity, tail.file, tail.position) == ("error", str(first), last.position)
    assert "deletes every later segment" in tail.message
    # The indexes still describe the cut batch: the time index's final entry names its offset.
    # The producer snapshot at the next segment's base offset remembers the cut batch too.
    assert {c for c, _ in findings(report)} <= {
        "segment.truncated_tail",
        "index.entry",
        "timeindex.entry",
        "timeindex.final_entry",
        "snapshot.state",
    }
    assert report.exit_code == 1


def test_index_entry_pointing_at_the_wrong_position(log_dir):
    log = segments(log_dir / "events-0")[0]
    index = log.with_suffix(".index")
    data = bytearray(index.read_bytes())
    assert len(data) >= 16
    relative, position = struct.unpack_from(">ii", data, 8)
    struct.pack_into(">ii", data, 8, relative, position + 1)  # into the middle of a batch
    index.write_bytes(bytes(data))
    report = validate(log_dir)
    assert findings(report, log_dir) == {("index.entry", f"events-0/{index.name}")}
    p = report.findings[0]
    assert (p.severity, p.position, p.offset) == ("error", 8, int(log.stem) + relative)
    assert "start of a batch" in p.message
    assert report.exit_code == 1


def test_index_entry_promising_an_offset_a_batch_before_it_holds(log_dir):
    log = segments(log_dir / "events-0")[0]
    index = log.with_suffix(".index")
    data = bytearray(index.read_bytes())
    batches = list(iter_batches(log.read_bytes()))
    relative, position = struct.unpack_from(">ii", data, 8)
    before = max(b.last_offset for b in batches if b.position < position)
    # Offset no larger than a batch before the position: lookups of it would skip that batch.
    struct.pack_into(">ii", data, 8, before - int(log.stem), position)
    prev_relative, _ = struct.unpack_from(">ii", data, 0)
    if before - int(log.stem) <= prev_relative:
        pytest.skip("the first two entries are adjacent batches")
    index.write_bytes(bytes(data))
    report = validate(log_dir)
    p = only(report, "index.entry")
    assert (p.position, p.offset) == (8, before) and f"last offset {before}" in p.message


def test_missing_index_of_an_inactive_segment_is_a_warning_and_of_the_active_one_info(log_dir):
    logs = segments(log_dir / "events-0")
    logs[0].with_suffix(".timeindex").unlink()
    logs[-1].with_suffix(".index").unlink()
    report = validate(log_dir)
    assert {(p.check, p.severity, Path(p.file).name) for p in report.findings} == {
        ("timeindex.missing", "warning", logs[0].with_suffix(".timeindex").name),
        ("index.missing", "info", logs[-1].with_suffix(".index").name),
    }


def test_time_index_without_its_final_entry(log_dir):
    timeindex = segments(log_dir / "events-0")[0].with_suffix(".timeindex")
    data = timeindex.read_bytes()
    assert len(data) >= 24
    timeindex.write_bytes(data[:-12])
    report = validate(log_dir)
    p = only(report, "timeindex.final_entry")
    assert p.severity == "warning" and p.file == str(timeindex)
    assert findings(report, log_dir) == {("timeindex.final_entry", f"events-0/{timeindex.name}")}


def test_time_index_entry_with_a_wrong_timestamp(log_dir):
    timeindex = segments(log_dir / "events-0")[0].with_suffix(".timeindex")
    data = bytearray(timeindex.read_bytes())
    ts, rel = struct.unpack_from(">qi", data, 0)
    struct.pack_into(">qi", data, 0, ts - 1, rel)  # still increasing, but not the max up to its offset
    timeindex.write_bytes(bytes(data))
    p = only(validate(log_dir), "timeindex.entry")
    assert (p.position, p.offset, p.severity) == (0, int(timeindex.stem) + rel, "error")


def test_index_size_and_preallocated_tail(log_dir):
    logs = segments(log_dir / "events-0")
    index = logs[0].with_suffix(".index")
    index.write_bytes(index.read_bytes() + b"\0\0\0")
    active_index = logs[-1].with_suffix(".index")
    active_index.write_bytes(active_index.read_bytes() + bytes(8 * 100))  # preallocated, never trimmed
    report = validate(log_dir)
    assert {(p.check, p.severity, Path(p.file).name) for p in report.findings} == {
        ("index.size", "error", index.name),
        ("index.zero_tail", "warning", active_index.name),
    }


def test_out_of_order_offsets_across_segments(tmp_path):
    # Segment 0 holds offsets 0..14, segment 10 holds 10..19: they overlap.
    part = tmp_path / "overlap-0"
    part.mkdir()
    write_segment(part, 0, [build_batch([rec(o) for o in range(0, 15)])])
    second = write_segment(part, 10, [build_batch([rec(o) for o in range(10, 20)])])
    report = validate_paths([str(part)])
    assert findings(report, tmp_path) == {
        ("offsets.next_segment", "overlap-0/00000000000000000000.log"),
        ("offsets.order", "overlap-0/00000000000000000010.log"),
    }
    p = only(report, "offsets.order")
    assert (p.file, p.position, p.offset, p.severity) == (str(second), 0, 10, "error")
    assert "last offset 14" in p.message and "00000000000000000000.log" in p.message
    assert report.exit_code == 1


def test_segment_base_above_the_first_batch_and_relative_offset_overflow(tmp_path):
    part = tmp_path / "bases-0"
    part.mkdir()
    first = build_batch([rec(90)])
    log = write_segment(part, 100, [first, build_batch([rec(100 + 2**31)])], indexes=False)
    report = validate_paths([str(part)])
    assert {(p.check, p.offset, p.position) for p in report.problems} == {
        ("offsets.segment_base", 90, 0),
        ("offsets.overflow", 90, 0),
        ("offsets.overflow", 100 + 2**31, len(first)),
    }
    assert all(p.file == str(log) for p in report.problems)


def test_bad_snapshot_crc(log_dir):
    part = log_dir / "payments-0"
    snapshot = next(s for s in sorted(part.glob("*.snapshot")) if s.stat().st_size > 10)
    data = bytearray(snapshot.read_bytes())
    data[20] ^= 0x01  # inside the first entry
    snapshot.write_bytes(bytes(data))
    report = validate(log_dir)
    assert findings(report, log_dir) == {("snapshot.parse", f"payments-0/{snapshot.name}")}
    p = report.findings[0]
    assert (p.severity, p.position, p.offset) == ("error", 2, int(snapshot.stem))
    assert "CRC" in p.message and report.exit_code == 1


def test_snapshot_that_disagrees_with_the_replay(log_dir):
    part = log_dir / "payments-0"
    snapshot = next(s for s in sorted(part.glob("*.snapshot")) if s.stat().st_size > 10)
    snap = ProducerSnapshot.from_bytes(snapshot.read_bytes(), int(snapshot.stem))
    first = snap.entries[0]
    snap.entries[0] = first._replace(last_sequence=first.last_sequence + 7)
    snapshot.write_bytes(snap.to_bytes())  # a valid CRC over wrong content
    report = validate(log_dir)
    p = only(report, "snapshot.state")
    assert (p.file, p.position, p.offset) == (str(snapshot), 10, snap.offset)
    assert f"producer {first.producer_id}" in p.message and "last_sequence" in p.message
    # Comparing with the replay is deep mode only.
    assert validate(log_dir, deep=False).findings == []


def test_snapshot_above_the_log_end(log_dir):
    part = log_dir / "events-0"
    (part / f"{10**6:020d}.snapshot").write_bytes(ProducerSnapshot(10**6, []).to_bytes())
    p = only(validate(log_dir), "snapshot.range")
    assert (p.severity, p.offset) == ("error", 10**6)


def test_malformed_checkpoint_line(log_dir):
    checkpoint = log_dir / "replication-offset-checkpoint"
    lines = checkpoint.read_text().split("\n")
    lines[2] = lines[2].rsplit(" ", 1)[0] + " twelve"
    checkpoint.write_text("\n".join(lines))
    report = validate(log_dir)
    assert findings(report, log_dir) == {("checkpoint.parse", "replication-offset-checkpoint")}
    p = report.findings[0]
    assert p.position == len(lines[0]) + len(lines[1]) + 2 and p.offset is None
    assert "line 3" in p.message and report.exit_code == 1


def test_checkpoint_offsets_beyond_the_log_end(log_dir):
    checkpoint = log_dir / "replication-offset-checkpoint"
    text = checkpoint.read_text()
    line = next(entry for entry in text.split("\n") if entry.startswith("events 0 "))
    checkpoint.write_text(text.replace(line, "events 0 999999"))
    report = validate(log_dir)
    p = only(report, "checkpoint.range")
    assert (p.file, p.offset, p.position) == (str(checkpoint), 999999, text.index(line))
    assert "high watermark 999999" in p.message


def test_leader_epoch_checkpoint_problems(log_dir):
    epochs = log_dir / "events-0" / "leader-epoch-checkpoint"
    text = epochs.read_text()
    epochs.write_text(text + "9 999999\n")  # the count line still says one entry less: refused
    p = only(validate(log_dir), "leader_epoch.parse")
    assert p.file == str(epochs) and p.severity == "error"
    lines = text.split("\n")
    lines[1] = str(int(lines[1]) + 1)
    epochs.write_text("\n".join(lines[:-1] + ["9 999999", ""]))
    report = validate(log_dir)
    p = only(report, "leader_epoch.range")
    assert p.offset == 999999 and p.position == len("\n".join(lines[:-1])) + 1


def test_leader_epoch_checkpoint_that_disagrees_with_the_batches(log_dir):
    epochs = log_dir / "events-0" / "leader-epoch-checkpoint"
    lines = epochs.read_text().split("\n")
    assert lines[1] == "2"  # two leader epochs over the partition's life
    epoch, start = lines[3].split()
    lines[3] = f"{epoch} {int(start) + 3}"  # the second epoch starts 3 offsets later than its batches
    epochs.write_text("\n".join(lines))
    p = only(validate(log_dir), "leader_epoch.batches")
    assert p.severity == "warning" and p.offset is not None and int(start) <= p.offset < int(start) + 3


def test_txnindex_entry_with_no_abort_marker(log_dir):
    candidates = []
    for txnindex in sorted((log_dir / "payments-0").glob("*.txnindex")):
        index = TransactionIndex.from_bytes(txnindex.read_bytes(), int(txnindex.stem))
        batches = list(iter_batches(txnindex.with_suffix(".log").read_bytes()))
        if index.entries:
            last = index.entries[-1]
            # a data batch after the last entry's marker: its offset holds no marker
            candidates += [
                (txnindex, index, last, b.last_offset)
                for b in batches
                if not b.is_control and b.last_offset > last.last_offset
            ]
    txnindex, index, last, data_offset = candidates[0]
    bogus = AbortedTxn(last.producer_id, last.first_offset, data_offset, data_offset + 1)
    txnindex.write_bytes(txnindex.read_bytes() + TransactionIndex(0, [bogus]).to_bytes())
    report = validate(log_dir)
    assert findings(report, log_dir) == {("txnindex.entry", f"payments-0/{txnindex.name}")}
    p = report.findings[0]
    assert (p.severity, p.position, p.offset) == ("error", 34 * len(index.entries), data_offset)
    assert "no ABORT marker" in p.message and report.exit_code == 1


# -- hand-made partitions: transactions computed by hand, independently of the replay ----------------


def rec(offset: int, ts: int | None = None, key: bytes = b"k") -> Record:
    return Record(offset, 1_000 + offset if ts is None else ts, key, b"v%d" % offset)


def write_segment(
    part: Path,
    base: int,
    batches: list[bytes],
    *,
    indexes: bool = True,
    interval: int = 4096,
    txns: list[AbortedTxn] = (),
) -> Path:
    log = part / f"{base:020d}.log"
    log.write_bytes(b"".join(batches))
    if indexes:
        parsed = list(iter_batches(log.read_bytes()))
        offset_index, time_index = build_indexes(parsed, base, interval)
        log.with_suffix(".index").write_bytes(offset_index.to_bytes())
        log.with_suffix(".timeindex").write_bytes(time_index.to_bytes())
    if txns:
        log.with_suffix(".txnindex").write_bytes(TransactionIndex(base, txns).to_bytes())
    return log


def txn_partition(part: Path, txns: list[AbortedTxn] | None = None) -> Path:
    """One segment, offsets 0..7: producer 7's transaction [0, 1] is aborted at 2; producer 8's
    transaction [3] is committed at 6, around producer 9's transaction [4] aborted at 5; a plain
    batch at 7. `txns` is the .txnindex to write (default: the right one, computed by hand)."""
    part.mkdir(parents=True)
    batches = [
        build_batch([rec(0), rec(1)], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True),
        build_end_txn_marker(offset=2, timestamp=1_002, producer_id=7, producer_epoch=0, commit=False),
        build_batch([rec(3)], producer_id=8, producer_epoch=1, base_sequence=0, is_transactional=True),
        build_batch([rec(4)], producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True),
        build_end_txn_marker(offset=5, timestamp=1_005, producer_id=9, producer_epoch=0, commit=False),
        build_end_txn_marker(offset=6, timestamp=1_006, producer_id=8, producer_epoch=1, commit=True),
        build_batch([rec(7)]),
    ]
    # Abort of 7 at 2: no other transaction open -> LSO = 3. Abort of 9 at 5: producer 8's
    # transaction (first offset 3) is still open -> LSO = 3.
    expected = [AbortedTxn(7, 0, 2, 3), AbortedTxn(9, 4, 5, 3)]
    write_segment(part, 0, batches, txns=expected if txns is None else txns)
    return part


def test_hand_made_transactions_validate_clean(tmp_path):
    part = txn_partition(tmp_path / "txn-0")
    report = validate_paths([str(part)])
    assert report.findings == []
    assert report.exit_code == 0 and report.counts["txn_index_entries"] == 2


def test_txnindex_that_differs_from_the_replay(tmp_path):
    part = txn_partition(tmp_path / "txn-0", [AbortedTxn(7, 0, 2, 3), AbortedTxn(9, 4, 5, 6)])
    p = only(validate_paths([str(part)]), "txnindex.entry")
    assert (p.position, p.offset) == (34, 5) and "lastStableOffset 3" in p.message


def test_txnindex_entry_at_a_commit_marker_and_a_missing_entry(tmp_path):
    part = txn_partition(tmp_path / "txn-0", [AbortedTxn(7, 0, 2, 3), AbortedTxn(8, 3, 6, 7)])
    report = validate_paths([str(part)])
    entry = only(report, "txnindex.entry")
    assert (entry.position, entry.offset) == (34, 6) and "COMMIT marker, not an ABORT" in entry.message
    missing = only(report, "txnindex.missing_entry")
    assert (missing.offset, missing.position) == (5, None) and "producer 9" in missing.message
    assert missing.file == str(part / "00000000000000000000.txnindex")


def test_compacted_partition_needs_only_abort_markers_for_its_entries(tmp_path):
    # The cleaner drops the entry of a transaction with no data left (spec §5.7.2): with only
    # the second entry kept, a compacted partition is fine, an uncompacted one is missing one.
    part = txn_partition(tmp_path / "txn-0", [AbortedTxn(9, 4, 5, 3)])
    assert {p.check for p in validate_paths([str(part)]).problems} == {"txnindex.missing_entry"}
    assert validate_paths([str(part)], compacted=True).problems == []
    # ... and so it is when the log dir's cleaner-offset-checkpoint names the partition.
    (tmp_path / "cleaner-offset-checkpoint").write_text("0\n1\ntxn 0 8\n")
    assert validate_paths([str(tmp_path)]).problems == []
    assert validate_paths([str(part)]).problems == []  # the parent's checkpoint counts


def test_an_empty_aborted_transaction_has_no_entry(tmp_path):
    # ProducerAppendInfo.appendEndTxnMarker completes no transaction without data: Kafka writes no
    # .txnindex entry for producer 7's ABORT at 1, which follows no data of producer 7.
    part = tmp_path / "txn-0"
    part.mkdir()
    batches = [
        build_batch([rec(0)]),
        build_end_txn_marker(offset=1, timestamp=1_001, producer_id=7, producer_epoch=0, commit=False),
        build_batch([rec(2)], producer_id=8, producer_epoch=0, base_sequence=0, is_transactional=True),
        build_end_txn_marker(offset=3, timestamp=1_003, producer_id=8, producer_epoch=0, commit=False),
    ]
    log = write_segment(part, 0, batches, txns=[AbortedTxn(8, 2, 3, 4)])
    assert validate_paths([str(part)]).findings == []
    # an entry for the empty one is what Kafka never writes
    log.with_suffix(".txnindex").write_bytes(
        TransactionIndex(0, [AbortedTxn(7, 1, 1, 2), AbortedTxn(8, 2, 3, 4)]).to_bytes()
    )
    p = only(validate_paths([str(part)]), "txnindex.entry")
    assert (p.position, p.offset) == (0, 1) and "without data" in p.message


def compacted_txn_partition(root: Path, snapshot_first_offset: int | None = None) -> Path:
    """Producer 7: transaction [0] committed at 1; transaction [2], [4], [5] committed at 6, open
    across the roll at 5; a plain batch at 3 and at 7 (the active segment). The broker took its
    snapshots at the rolls (5 and 7) from the log as written; then the cleaner removed batch 2,
    whose key a the batch at 5 supersedes, and left the snapshots as they were (Kafka's
    replaceSegments deletes only the snapshots of segments that no longer exist)."""
    part = root / "txn-0"
    part.mkdir(parents=True)
    txn = dict(producer_id=7, producer_epoch=0, is_transactional=True)
    written = [
        build_batch([rec(0, key=b"x")], base_sequence=0, **txn),
        build_end_txn_marker(offset=1, timestamp=1_001, producer_id=7, producer_epoch=0, commit=True),
        build_batch([rec(2, key=b"a")], base_sequence=1, **txn),
        build_batch([rec(3, key=b"b")]),
        build_batch([rec(4, key=b"c")], base_sequence=2, **txn),
        build_batch([rec(5, key=b"a")], base_sequence=3, **txn),
        build_end_txn_marker(offset=6, timestamp=1_006, producer_id=7, producer_epoch=0, commit=True),
        build_batch([rec(7, key=b"d")]),
    ]
    manager = ProducerStateManager()
    for offset, data in enumerate(written):
        if offset in (5, 7):
            snapshot = manager.snapshot()
            if offset == 5:
                assert snapshot.entries[0].current_txn_first_offset == 2
                if snapshot_first_offset is not None:
                    snapshot.entries[0] = snapshot.entries[0]._replace(current_txn_first_offset=snapshot_first_offset)
            (part / f"{offset:020d}.snapshot").write_bytes(snapshot.to_bytes())
        manager.append(RecordBatch(data))
    write_segment(part, 0, [written[0], written[1], written[3], written[4]])
    write_segment(part, 5, written[5:7])
    write_segment(part, 7, written[7:])
    (root / "cleaner-offset-checkpoint").write_text("0\n1\ntxn 0 7\n")
    return part


def test_a_snapshot_keeps_the_first_offset_of_a_transaction_whose_first_batch_was_cleaned(tmp_path):
    # A replay of the cleaned log starts producer 7's transaction at its first batch left (4,
    # ProducerAppendInfo.appendDataBatch), the snapshot at 5 remembers 2: both are Kafka's.
    part = compacted_txn_partition(tmp_path)
    report = validate_paths([str(tmp_path)])
    assert report.findings == [] and report.counts["snapshot_producers_compared"] == 2
    # in a partition never cleaned, the snapshot would be wrong
    p = only(validate_paths([str(part)], compacted=False), "snapshot.state")
    assert "current_txn_first_offset 2 (replay: 4)" in p.message and p.offset == 5


@pytest.mark.parametrize("first_offset", [1, 0, 5, -1])
def test_a_snapshots_transaction_cannot_begin_at_or_before_the_producers_previous_batch(tmp_path, first_offset):
    # the COMMIT at 1 ended producer 7's previous transaction: the open one began after it, before 4
    compacted_txn_partition(tmp_path, first_offset)
    p = only(validate_paths([str(tmp_path)]), "snapshot.state")
    assert f"current_txn_first_offset {first_offset} (replay: 4)" in p.message


def test_leftovers_of_a_swap_and_orphan_indexes(tmp_path):
    """A `.swap` that reads whole and covers the segment it replaces is a leftover Kafka's loader
    (and kafkalog's recovery) completes: a warning."""
    part = tmp_path / "swap-0"
    part.mkdir()
    write_segment(part, 0, [build_batch([rec(0), rec(1)])])
    (part / "00000000000000000000.log.swap").write_bytes((part / "00000000000000000000.log").read_bytes())
    (part / "00000000000000000005.index").write_bytes(b"")
    report = validate_paths([str(part)])
    assert {(p.check, p.severity, Path(p.file).name) for p in report.findings} == {
        ("partition.leftover", "warning", "00000000000000000000.log.swap"),
        ("partition.orphan_index", "warning", "00000000000000000005.index"),
    }


@pytest.mark.parametrize("swap", [b"", b"\x00" * 12 + b"\xff\xff\xff\xf0"], ids=["empty", "negative-length"])
def test_a_swap_that_must_not_be_completed_is_an_error_saying_what_kafka_would_do(tmp_path, swap):
    """An empty `.swap` beside the live segment it names, or one that does not read: a broker starting
    on the directory would rename it over the segment. validate says so, as an ERROR on the `.swap`
    (and still a warning on the other leftovers)."""
    part = tmp_path / "swap-0"
    part.mkdir()
    write_segment(part, 0, [build_batch([rec(0), rec(1)]), build_batch([rec(2)])])
    (part / "00000000000000000000.log.swap").write_bytes(swap)
    (part / "00000000000000000000.index.swap").write_bytes(b"")
    report = validate_paths([str(part)])
    leftovers = {(p.severity, Path(p.file).name): p for p in report.findings if p.check == "partition.leftover"}
    swap_log, swap_index = "00000000000000000000.log.swap", "00000000000000000000.index.swap"
    assert set(leftovers) == {("error", swap_log), ("warning", swap_index)}
    error = leftovers[("error", swap_log)]
    assert error.position is not None and error.offset is not None
    expected = (
        "Kafka would replace 00000000000000000000.log, 2 batches, offsets 0-2, with a 0-byte segment: offsets 0-2 "
        "would be lost"
        if not swap
        else "Kafka would replace 00000000000000000000.log, 2 batches, offsets 0-2, with this .swap, which does not "
        "read whole"
    )
    assert expected in error.message, error.message
    assert report.exit_code == 1


def test_zero_tail_of_a_preallocated_segment(tmp_path):
    part = tmp_path / "pre-0"
    part.mkdir()
    log = write_segment(part, 0, [build_batch([rec(0)])])
    size = log.stat().st_size
    log.write_bytes(log.read_bytes() + bytes(1000))
    p = only(validate_paths([str(part)]), "segment.zero_tail")
    assert (p.severity, p.position) == ("warning", size)  # the last segment


def test_corrupt_batch_header_stops_the_segment(tmp_path):
    part = tmp_path / "bad-0"
    part.mkdir()
    data = bytearray(build_batch([rec(0)]) + build_batch([rec(1)]))
    second = len(build_batch([rec(0)]))
    data[second + 16] = 7  # magic 7
    log = part / f"{0:020d}.log"
    log.write_bytes(bytes(data))
    p = only(validate_paths([str(part)]), "batch.structure")
    assert (p.position, p.offset, p.file) == (second + 16, 1, str(log)) and "magic" in p.message


# -- the report ------------------------------------------------------------------------------------------


def test_report_json_and_summary(log_dir):
    log = segments(log_dir / "events-0")[0]
    data = bytearray(log.read_bytes())
    data[-3] ^= 0xFF
    log.write_bytes(bytes(data))
    report = validate(log_dir)
    doc = json.loads(report.to_json())
    assert doc["exitCode"] == 1 and doc["severities"]["error"] >= 1
    assert doc["counts"]["partitions"] == 2
    problem = doc["findings"][0]
    assert set(problem) == {"check", "severity", "message", "file", "position", "offset"}
    assert problem["check"] in CHECKS and problem["file"] == str(log)
    summary = report.summary()
    assert summary.splitlines()[0].startswith("kafkalog validate: PROBLEMS FOUND")
    assert len(summary.splitlines()) <= 25
    assert f"events-0/{log.name}" in summary


def test_findings_beyond_the_cap_are_counted(tmp_path):
    part = tmp_path / "many-0"
    part.mkdir()
    batches = [bytearray(build_batch([rec(o)])) for o in range(10)]
    for b in batches:
        b[-1] ^= 1
    write_segment(part, 0, [bytes(b) for b in batches], indexes=False)
    report = validate_paths([str(part)], max_findings_per_check=3, deep=False)
    assert len([p for p in report.findings if p.check == "batch.crc"]) == 3
    assert sum(report.suppressed.values()) == 7
    assert report.severity_counts()["error"] == 10


def test_a_log_dir_named_like_a_partition_is_a_log_dir(tmp_path):
    # log.dirs=/data/kafka-logs-1 is common: its name parses as topic "kafka-logs", partition 1.
    log_dir = tmp_path / "kafka-logs-1"
    shutil.copytree(BROKER_DIRS / "kafka-gzip-idempotent", log_dir)
    report = validate_paths([str(log_dir)])
    assert report.counts["log_dirs"] == 1 and report.counts["partitions"] == 1
    assert report.counts["checkpoint_files"] == 6 and report.exit_code == 0


def test_a_path_that_does_not_exist_cannot_be_validated(tmp_path):
    with pytest.raises(LogDirError):
        validate_paths([str(tmp_path / "nope")])
    with pytest.raises(LogDirError):
        (tmp_path / "notes.txt").write_text("hello")
        validate_paths([str(tmp_path / "notes.txt")])


def test_each_directory_is_listed_once_and_every_path_found_before_anything_is_checked(tmp_path, monkeypatch):
    """plan_validate finds every path and lists each directory once, here a log dir named like a
    partition (`kafka-logs-1`: listed once to tell which it is, and that listing is the log dir's); the
    run lists each partition directory once. A missing path is refused before any file is read."""
    from collections import Counter

    from kafkalog.operations.validate import LOG_DIR, plan_validate, run_validate
    from kafkalog.storage.fs import LogFileSystem

    shutil.copytree(BROKER_DIRS / "kafka-gzip-idempotent", tmp_path / "kafka-logs-1")
    listed: Counter = Counter()
    list_dir = LogFileSystem.list_dir

    def counted(self, path):
        listed[path] += 1
        return list_dir(self, path)

    monkeypatch.setattr(LogFileSystem, "list_dir", counted)
    plan = plan_validate([str(tmp_path / "kafka-logs-1")])
    assert [t.kind for t in plan.targets] == [LOG_DIR] and list(listed.values()) == [1]
    report = run_validate(None, plan)
    assert report.counts["partitions"] > 0 and set(listed.values()) == {1}, listed
    read: list = []
    monkeypatch.setattr(LogFileSystem, "read_bytes", lambda self, path: read.append(path))
    with pytest.raises(LogDirError, match="no such file"):
        plan_validate([str(tmp_path / "kafka-logs-1"), str(tmp_path / "missing")])
    assert read == []
