"""The transaction report (spec §6): open and hanging transactions, the last stable offset and the
producer holding it, empty and aborted transactions, on logs written by the broker's append path."""

from __future__ import annotations

import json

import pytest

from kafkalog.cli import main
from kafkalog.codec.records import Record
from kafkalog.operations.generate import ConsumerOffsetsSpec, GeneratorSpec, TopicSpec, generate, small_preset
from kafkalog.operations.txn_report import EndedTxn, OpenTxn, txn_report
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.log_writer import PartitionWriter
from kafkalog.storage.logdir import LogDir
from kafkalog.storage.naming import LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from kafkalog.storage.txnindex import TransactionIndex

T0 = 1_700_000_000_000
TIMEOUT = 900_000


@pytest.fixture
def fs():
    return LogFileSystem.for_path("/")[0]


def append(writer: PartitionWriter, pid: int = -1, count: int = 1, ts: int = T0, txn: bool = True, seq: int = 0):
    writer.append_records(
        [Record(0, ts, b"k", b"v")] * count,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq if pid >= 0 else -1,
        is_transactional=txn,
        now_ms=ts,
    )


def end(writer: PartitionWriter, pid: int, commit: bool, ts: int = T0):
    writer.append_end_txn_marker(producer_id=pid, producer_epoch=0, commit=commit, timestamp=ts)


def write_mixed(fs, root, segment_bytes: int = 1 << 30):
    """Offsets: 0-1 plain; 2-3 pid 10; 4 pid 11; 5 pid 10; 6 ABORT pid 10; 7 COMMIT pid 12 (no data);
    8 ABORT pid 13 (no data); 9 pid 15; 10 COMMIT pid 15; 11 pid 14. Open at the end: pid 11 (from 4,
    last append T0+1000) and pid 14 (from 11, last append T0+5000)."""
    writer = PartitionWriter(fs, root, "pay", 0, segment_bytes=segment_bytes)
    append(writer, count=2, txn=False)
    append(writer, 10, count=2)
    append(writer, 11, ts=T0 + 1000)
    append(writer, 10, ts=T0 + 2000, seq=2)
    end(writer, 10, commit=False, ts=T0 + 2001)
    end(writer, 12, commit=True, ts=T0 + 2002)
    end(writer, 13, commit=False, ts=T0 + 2003)
    append(writer, 15, ts=T0 + 3000)
    end(writer, 15, commit=True, ts=T0 + 3001)
    append(writer, 14, ts=T0 + 5000)
    return writer.close()


def test_open_hanging_empty_aborted_and_the_producer_holding_the_lso(fs, tmp_path):
    write_mixed(fs, str(tmp_path))
    now = T0 + 1000 + TIMEOUT + 1  # pid 11 idle 1 ms longer than the timeout; pid 14 4 s less
    (part,) = txn_report(str(tmp_path), now_ms=now).partitions
    assert part.open == [
        OpenTxn(11, 0, 4, T0 + 1000, TIMEOUT + 1, hanging=True),
        OpenTxn(14, 0, 11, T0 + 5000, TIMEOUT - 3999, hanging=False),
    ]
    assert (part.log_end_offset, part.high_watermark, part.high_watermark_source) == (12, 12, "logEnd")
    assert part.last_stable_offset == 4 and part.blocking.producer_id == 11
    assert part.aborted == [
        EndedTxn(10, 0, 2, 6, aborted=True, data_batches=2),
        EndedTxn(13, 0, 8, 8, aborted=True, data_batches=0),
    ]
    assert part.empty == [
        EndedTxn(12, 0, 7, 7, aborted=False, data_batches=0),
        EndedTxn(13, 0, 8, 8, aborted=True, data_batches=0),
    ]
    assert part.committed == 2
    assert part.summary() == {
        "topic": "pay",
        "partition": 0,
        "lastStableOffset": 4,
        "highWatermark": 12,
        "blockingProducerId": 11,
        "open": 2,
        "hanging": 1,
        "aborted": 2,
        "empty": 2,
        "committed": 2,
    }
    assert part.to_dict()["aborted"][0] == {
        "producerId": 10,
        "producerEpoch": 0,
        "firstOffset": 2,
        "lastOffset": 6,
        "marker": "ABORT",
        "dataBatches": 2,
        "dataInLog": True,
    }
    # exactly at the timeout nothing hangs: Kafka's rule is "idle longer than"
    assert txn_report(str(tmp_path), now_ms=now - 1).hanging == []


def test_the_threshold_is_an_option(fs, tmp_path):
    write_mixed(fs, str(tmp_path))
    report = txn_report(str(tmp_path), now_ms=T0 + 6000, transaction_max_timeout_ms=1000)
    assert [(t.producer_id, t.age_ms) for _, t in report.hanging] == [(11, 5000)]  # pid 14: idle 1000, not more


def test_a_high_watermark_below_the_open_transactions_bounds_the_lso(fs, tmp_path):
    write_mixed(fs, str(tmp_path))
    LogDir.open(str(tmp_path)).write_checkpoint(REPLICATION_OFFSET_CHECKPOINT, {("pay", 0): 3})
    (part,) = txn_report(str(tmp_path), now_ms=T0).partitions
    assert (part.high_watermark, part.high_watermark_source, part.last_stable_offset) == (3, "checkpoint", 3)
    assert part.blocking is None and part.to_dict()["blockingProducerId"] is None


def test_the_high_watermark_is_never_below_the_checkpointed_log_start_offset(fs, tmp_path):
    write_mixed(fs, str(tmp_path))
    log = LogDir.open(str(tmp_path))
    log.write_checkpoint(REPLICATION_OFFSET_CHECKPOINT, {("pay", 0): 3})
    log.write_checkpoint(LOG_START_OFFSET_CHECKPOINT, {("pay", 0): 5})  # UnifiedLog raises it to the log start
    (part,) = txn_report(str(tmp_path), now_ms=T0).partitions
    assert (part.high_watermark, part.high_watermark_source, part.last_stable_offset) == (5, "checkpoint", 4)


def test_rolled_segments_and_snapshots_give_the_same_report(fs, tmp_path):
    written = write_mixed(fs, str(tmp_path / "one"))
    rolled = write_mixed(fs, str(tmp_path / "many"), segment_bytes=200)
    assert len(written.segments) == 1 and len(rolled.segments) > 3 and len(rolled.snapshots) > 3
    one, many = (txn_report(str(tmp_path / d), now_ms=T0).partitions[0] for d in ("one", "many"))
    assert (many.open, many.ended, many.last_stable_offset) == (one.open, one.ended, one.last_stable_offset)


def test_a_transaction_begun_below_the_first_segment_keeps_its_first_offset(fs, tmp_path):
    rolled = write_mixed(fs, str(tmp_path), segment_bytes=200)
    # retention deleted the segments below offset 6: pid 10's transaction began at 2, its ABORT is at 6
    assert [s.base_offset for s in rolled.segments] == [0, 4, 6, 8, 10] and 6 in rolled.snapshots
    for seg in rolled.segments[:2]:
        for path in seg.files.values():
            fs.delete(path)
    (part,) = txn_report(str(tmp_path), now_ms=T0).partitions
    aborted = part.aborted[0]
    assert (aborted.producer_id, aborted.first_offset, aborted.marker_offset) == (10, 2, 6)
    assert aborted.data_batches == 0 and not aborted.empty  # its data went with the segments, not the cleaner
    assert [t.first_offset for t in part.open] == [4, 11] and part.last_stable_offset == 4


def test_generated_hanging_transactions_hold_the_lso_at_zero(tmp_path):
    spec = GeneratorSpec(
        seed=4,
        topics=[
            TopicSpec(
                "txn",
                records=60,
                plain_producer=False,
                transactional_producers=2,
                hanging_transactions=True,
                transaction_batches=(50, 50),
            ),
            TopicSpec("plain", records=10),
        ],
        consumer_offsets=ConsumerOffsetsSpec(partitions=1, groups=("g",), group_metadata=False),
    )
    summary = generate(str(tmp_path), spec)
    now = summary.end_ms + TIMEOUT + 1
    report = txn_report(str(tmp_path), now_ms=now, topics=["txn"])
    (part,) = report.partitions
    assert (part.topic, part.last_stable_offset, part.high_watermark) == ("txn", 0, 60)
    assert len(part.open) == 2 and part.open[0].first_offset == 0 and part.blocking == part.open[0]
    assert all(t.hanging for t in part.open) and part.ended == []
    assert {p.topic for p in txn_report(str(tmp_path), now_ms=now).partitions} == {"txn", "plain", "__consumer_offsets"}


def test_aborted_transactions_agree_with_the_transaction_indexes(tmp_path):
    generate(str(tmp_path), small_preset(7))
    report = txn_report(str(tmp_path), now_ms=T0, topics=["payments"])
    log = LogDir.open(str(tmp_path))
    for part in report.partitions:
        indexed = []
        for seg in log.partition(part.topic, part.partition).segments:
            data = seg.read(".txnindex")
            if data:
                indexed += TransactionIndex.from_bytes(data, seg.base_offset).entries
        assert len(indexed) > 5
        assert [(t.producer_id, t.first_offset, t.marker_offset) for t in part.aborted] == [
            (e.producer_id, e.first_offset, e.last_offset) for e in indexed
        ]
        assert all(t.data_batches > 0 for t in part.aborted) and part.open == [] and part.empty == []
        assert part.committed > 5 and part.last_stable_offset == part.high_watermark == part.log_end_offset


def test_cli_table_json_and_exit_code(fs, tmp_path, capsys):
    write_mixed(fs, str(tmp_path))
    now = str(T0 + 1000 + TIMEOUT + 1)
    assert main(["txn-report", str(tmp_path), "--now", now]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0] == (
        f"1 partitions with transactions (0 without), 1 hanging (open, idle > {TIMEOUT} ms) at "
        f"now=2023-11-14T22:28:21.001Z ({now})"
    )
    assert "lastStableOffset  highWatermark  blockingProducerId" in out and "open transactions:" in out
    assert main(["txn-report", str(tmp_path), "--now", now, "--json", "--transaction-max-timeout-ms", "86400000"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["hanging"] == 0 and data["partitions"][0]["lastStableOffset"] == 4
    assert main(["txn-report", str(tmp_path / "missing")]) == 2
