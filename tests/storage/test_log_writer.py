"""The append path: SegmentWriter (one segment and its indexes) and PartitionWriter (roll rules, producer
snapshots, transaction index, leader epochs; spec §4.4-§4.8, §4.11, §6, §7.6; catalogue 101, 108, 109)."""

from __future__ import annotations

import os

import pytest

from kafkalog.codec.batch import TimestampType, build_batch
from kafkalog.codec.compression import Codec
from kafkalog.codec.control import ControlType, build_end_txn_marker, control_record
from kafkalog.codec.reader import iter_batches
from kafkalog.codec.records import Record
from kafkalog.errors import KafkaLogError, LogDirError
from kafkalog.rules.aborted_txn import AbortedTxn
from kafkalog.storage.checkpoint import EpochEntry, parse_leader_epoch_checkpoint, parse_partition_metadata
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.index import LogSegmentOffsetOverflowError, build_indexes
from kafkalog.storage.log_writer import PartitionWriter, derive_topic_id
from kafkalog.storage.partition import Partition
from kafkalog.storage.producer_state import ProducerStateManager
from kafkalog.storage.segment_writer import SegmentWriter, UnexpectedAppendOffsetError
from kafkalog.storage.snapshot import ProducerSnapshot, ProducerStateEntry
from kafkalog.storage.txnindex import TransactionIndex

T0 = 1_700_000_000_000


@pytest.fixture
def fs():
    return LogFileSystem.for_path("/")[0]


def batch(base: int, count: int = 1, *, ts: int = T0, value: bytes = b"v" * 50, **kwargs) -> bytes:
    return build_batch([Record(base + i, ts, b"k%d" % (base + i), value) for i in range(count)], **kwargs)


def mtime_ms(path) -> int:
    return os.stat(path).st_mtime_ns // 1_000_000


# -- SegmentWriter -----------------------------------------------------------------------------------


def test_segment_writer_writes_log_and_indexes_as_recovery_would(fs, tmp_path):
    data = [batch(100 + 3 * i, 3, ts=T0 + (7 * i) % 5) for i in range(20)]
    writer = SegmentWriter(fs, str(tmp_path), 100, index_interval_bytes=300)
    for chunk in data:
        writer.append(chunk)
    assert (writer.size, writer.last_offset, writer.next_offset) == (sum(map(len, data)), 159, 160)
    assert writer.max_timestamp == T0 + 4 and writer.first_batch_max_timestamp == T0 and not writer.is_empty
    written = writer.close(mtime_ms=T0 + 99)

    log = tmp_path / "00000000000000000100.log"
    assert log.read_bytes() == b"".join(data)
    expected_index, expected_time = build_indexes(writer.batches, 100, 300)
    assert (tmp_path / "00000000000000000100.index").read_bytes() == expected_index.to_bytes()
    assert (tmp_path / "00000000000000000100.timeindex").read_bytes() == expected_time.to_bytes()
    # the summaries are the batches as they sit in the file
    assert [(b.position, b.size, b.last_offset) for b in writer.batches] == [
        (b.position, b.size, b.last_offset) for b in iter_batches(log.read_bytes())
    ]
    assert len(expected_index.entries) > 3 and expected_time.entries[-1] == (T0 + 4, 108)  # batch 2 holds the max
    assert not (tmp_path / "00000000000000000100.txnindex").exists()  # created only for aborts
    assert set(written.files) == {".log", ".index", ".timeindex"}
    assert all(mtime_ms(p) == T0 + 99 for p in written.files.values())
    assert (written.base_offset, written.next_offset, written.batch_count, written.max_timestamp) == (
        100,
        160,
        20,
        T0 + 4,
    )


def test_segment_writer_suffix_and_txn_index(fs, tmp_path):
    writer = SegmentWriter(fs, str(tmp_path), 0, suffix=".cleaned")
    writer.append(batch(0, 2, producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True))
    writer.append(build_end_txn_marker(offset=2, timestamp=T0, producer_id=7, producer_epoch=0, commit=False))
    writer.append_aborted_txn(AbortedTxn(7, 0, 2, 3))
    written = writer.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f"00000000000000000000{kind}.cleaned" for kind in (".index", ".log", ".timeindex", ".txnindex")]
    assert TransactionIndex.from_bytes(
        (tmp_path / "00000000000000000000.txnindex.cleaned").read_bytes(), 0
    ).entries == [AbortedTxn(7, 0, 2, 3)]
    assert written.txn_index.entries == [AbortedTxn(7, 0, 2, 3)]


def test_segment_writer_refuses_offsets_that_go_backwards_and_leaves_the_segment_as_it_was(fs, tmp_path):
    writer = SegmentWriter(fs, str(tmp_path), 10)
    writer.append(batch(10, 2))
    size = writer.size
    for bad in (batch(11), batch(5), batch(12) + batch(12)):
        with pytest.raises(UnexpectedAppendOffsetError) as caught:
            writer.append(bad)
        assert isinstance(caught.value, KafkaLogError) and caught.value.file.endswith("00000000000000000010.log")
    assert (writer.size, writer.last_offset, len(writer.batches)) == (size, 11, 1)
    with pytest.raises(UnexpectedAppendOffsetError):
        writer.append_aborted_txn(AbortedTxn(1, 10, 50, 51))  # marker not in this segment
    writer.close()
    assert (tmp_path / "00000000000000000010.log").read_bytes() == batch(10, 2)


@pytest.mark.parametrize("segment_base, base", [(0, 2**31), (100, 10), (0, 2**31 - 1 - 1)])
def test_segment_writer_refuses_offsets_a_segment_cannot_index(fs, tmp_path, segment_base, base):
    writer = SegmentWriter(fs, str(tmp_path), segment_base)
    with pytest.raises(LogSegmentOffsetOverflowError):  # catalogue 101
        writer.append(batch(base, 3))  # the last offset, or the base, is outside [base, base + 2^31 - 1]
    assert writer.is_empty


def test_segment_writer_refuses_a_partial_record_set(fs, tmp_path):
    writer = SegmentWriter(fs, str(tmp_path), 0)
    with pytest.raises(UnexpectedAppendOffsetError, match="ends inside a batch"):
        writer.append(batch(0) + batch(1)[:30])
    with pytest.raises(UnexpectedAppendOffsetError, match="no batch"):
        writer.append(b"")


def test_segment_writer_abort_removes_its_files(fs, tmp_path):
    with pytest.raises(RuntimeError):
        with SegmentWriter(fs, str(tmp_path), 0) as writer:
            writer.append(batch(0))
            raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []


# -- PartitionWriter: roll rules (§7.6) ------------------------------------------------------------------


def open_partition(tmp_path, name="t-0") -> Partition:
    fs, path = LogFileSystem.for_path(str(tmp_path / name))
    return Partition.open(fs, path)


def test_roll_on_size_keeps_segments_within_segment_bytes(fs, tmp_path):
    size = len(batch(0))
    writer = PartitionWriter(fs, str(tmp_path), "t", 0, segment_bytes=3 * size)
    for offset in range(10):
        writer.append(batch(offset))
    written = writer.close()
    assert [s.base_offset for s in written.segments] == [0, 3, 6, 9]
    assert [s.size for s in written.segments] == [3 * size] * 3 + [size]
    # one byte less: the third batch would overflow, so two per segment
    writer = PartitionWriter(fs, str(tmp_path / "b"), "t", 0, segment_bytes=3 * size - 1)
    for offset in range(5):
        writer.append(batch(offset))
    assert [s.base_offset for s in writer.close().segments] == [0, 2, 4]


def test_roll_on_size_with_a_multi_batch_record_set_and_an_oversized_batch(fs, tmp_path):
    small = len(batch(0))
    writer = PartitionWriter(fs, str(tmp_path), "t", 0, segment_bytes=2 * small)
    writer.append(batch(0, 20))  # larger than segment.bytes: it still goes into the empty segment
    writer.append(batch(20) + batch(21))  # a two-batch set rolls as one
    writer.append(batch(22))
    written = writer.close()
    assert [s.base_offset for s in written.segments] == [0, 20, 22]
    assert [s.batch_count for s in written.segments] == [1, 2, 1]


def test_roll_on_time_measures_from_the_first_batch_max_timestamp(fs, tmp_path):
    writer = PartitionWriter(fs, str(tmp_path), "t", 0, segment_ms=100)
    for offset, ts in enumerate([1000, 1050, 1100, 990, 1101, 1150, 1202]):
        writer.append(batch(offset, ts=ts))
    # 1100 - 1000 = 100 is not more than segment.ms; 1101 is; then 1202 - 1101 = 101
    assert [s.base_offset for s in writer.close().segments] == [0, 4, 6]


def test_an_empty_segment_never_rolls_on_time(fs, tmp_path):
    writer = PartitionWriter(fs, str(tmp_path), "t", 0, segment_ms=1, now_ms=0)
    writer.append(batch(0, ts=T0), now_ms=T0 + 10**9)
    assert [s.base_offset for s in writer.close().segments] == [0]


def test_roll_on_time_without_timestamps_uses_the_broker_clock(fs, tmp_path):
    writer = PartitionWriter(fs, str(tmp_path), "t", 0, segment_ms=100, now_ms=1000)
    for offset, now in enumerate([1000, 1100, 1101, 1150]):
        writer.append(batch(offset, ts=-1), now_ms=now)  # no timestamps: time since the segment was created
    assert [s.base_offset for s in writer.close().segments] == [0, 2]


def test_roll_when_the_time_index_is_full(fs, tmp_path):
    # segment.index.bytes 36: 4 offset-index slots, 3 time-index slots of which the last is kept for the
    # final entry, so the time index is full at 2 entries
    writer = PartitionWriter(fs, str(tmp_path), "t", 0, index_interval_bytes=0, segment_index_bytes=36)
    for offset in range(7):
        writer.append(batch(offset, ts=T0 + offset))
    written = writer.close()
    assert [s.base_offset for s in written.segments] == [0, 3, 6]
    assert [len(s.time_index.entries) for s in written.segments] == [2, 2, 1]


def test_roll_when_the_offset_index_is_full(fs, tmp_path):
    # without timestamps the time index stays empty; 24 bytes hold 3 offset-index entries
    writer = PartitionWriter(fs, str(tmp_path), "t", 0, index_interval_bytes=0, segment_index_bytes=24)
    for offset in range(6):
        writer.append(batch(offset, ts=-1))
    written = writer.close()
    assert [s.base_offset for s in written.segments] == [0, 4]
    assert [len(s.offset_index.entries) for s in written.segments] == [3, 1]


def test_roll_at_the_incoming_base_offset_when_offsets_cannot_be_indexed(fs, tmp_path):
    writer = PartitionWriter(fs, str(tmp_path), "t", 0)
    writer.append(batch(0, 2))
    writer.append(batch(2**31 + 5, 2))  # an over-compacted follower's jump (catalogue 132)
    written = writer.close()
    assert [s.base_offset for s in written.segments] == [0, 2**31 + 5]
    assert written.log_end_offset == 2**31 + 7
    assert sorted(p.name for p in tmp_path.joinpath("t-0").glob("*.snapshot")) == [
        "00000000002147483653.snapshot",
        "00000000002147483655.snapshot",
    ]


def test_a_first_batch_far_above_the_log_start_replaces_the_empty_segment(fs, tmp_path):
    writer = PartitionWriter(fs, str(tmp_path), "t", 0)
    writer.append(batch(2**32, 1))
    assert [s.base_offset for s in writer.close().segments] == [2**32]
    assert not (tmp_path / "t-0" / "00000000000000000000.log").exists()


def test_append_refuses_offsets_below_the_log_end_offset(fs, tmp_path):
    writer = PartitionWriter(fs, str(tmp_path), "t", 0)
    writer.append(batch(0, 3))
    with pytest.raises(UnexpectedAppendOffsetError):
        writer.append(batch(2))
    assert writer.log_end_offset == 3
    size = 2 * len(batch(0))
    writer.segment_bytes = size  # the next append would roll, but a bad set is refused first
    with pytest.raises(UnexpectedAppendOffsetError):
        writer.append(batch(5) + batch(4))
    assert writer.active_segment.base_offset == 0 and writer.log_end_offset == 3
    writer.append(batch(10))  # gaps are fine (compacted data, a follower)
    assert writer.close().log_end_offset == 11


# -- snapshots, transactions, epochs ---------------------------------------------------------------------


def replay_snapshot(segments_data: list[bytes], offset: int) -> ProducerSnapshot:
    manager = ProducerStateManager()
    for data in segments_data:
        for b in iter_batches(data):
            if b.last_offset < offset:
                manager.append(b)
    manager.map_end_offset = offset
    return manager.snapshot()


def test_snapshots_at_every_roll_and_at_shutdown_agree_with_a_replay(fs, tmp_path):
    size = len(batch(0, 2, producer_id=1, producer_epoch=0, base_sequence=0))
    writer = PartitionWriter(fs, str(tmp_path), "t", 0, segment_bytes=3 * size)
    sequences = {1: 0, 2: 0}
    for i in range(10):
        pid = 1 + i % 2
        writer.append_records(
            [Record(0, T0 + i, b"k", b"v" * 50)] * 2, producer_id=pid, producer_epoch=0, base_sequence=sequences[pid]
        )
        sequences[pid] += 2
    written = writer.close()
    assert written.snapshots == [6, 12, 18, 20]  # the roll offsets, then the log end offset
    part = open_partition(tmp_path)
    assert sorted(part.snapshots) == written.snapshots
    logs = [s.read(".log") for s in part.segments]
    for offset, entry in part.snapshots.items():
        on_disk = ProducerSnapshot.from_bytes(fs.read_bytes(entry.path), offset)
        assert on_disk == replay_snapshot(logs, offset)
    last = ProducerSnapshot.from_bytes(fs.read_bytes(part.snapshots[20].path), 20)
    assert [(e.producer_id, e.last_sequence, e.last_offset) for e in last.entries] == [(1, 9, 17), (2, 9, 19)]


def test_no_snapshot_for_a_partition_that_never_got_data(fs, tmp_path):
    written = PartitionWriter(fs, str(tmp_path), "t", 0).close()
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir())
    assert names == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "leader-epoch-checkpoint",
        "partition.metadata",
    ]
    assert written.snapshots == [] and written.leader_epochs == [EpochEntry(0, 0)]
    assert (written.log_end_offset, written.high_watermark, written.last_stable_offset) == (0, 0, 0)


def txn_batch(base, count, pid, *, epoch=0, seq=100, leader_epoch=15):
    return batch(
        base,
        count,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
        partition_leader_epoch=leader_epoch,
    )


def marker(offset, pid, commit, epoch=0):
    return build_end_txn_marker(
        offset=offset, timestamp=T0, producer_id=pid, producer_epoch=epoch, commit=commit, partition_leader_epoch=15
    )


def write_catalogue_108(fs, path, producer_state=None):
    """LogSegmentTest.testRecoverTransactionIndex: pid1 at 100-101, pid2 at 102-103, plain 104-105,
    ABORT pid2 at 106 (pid1 still open, so the LSO is 100), COMMIT pid1 at 107."""
    pid1, pid2 = 5, 10
    writer = PartitionWriter(fs, path, "txn", 0, log_start_offset=100, leader_epoch=None, producer_state=producer_state)
    writer.append(txn_batch(100, 2, pid1))
    writer.append(txn_batch(102, 2, pid2))
    writer.append(batch(104, 2, partition_leader_epoch=15))
    info = writer.append(marker(106, pid2, commit=False))
    assert writer.last_stable_offset == 100  # pid1's transaction is still open
    writer.append(marker(107, pid1, commit=True))
    assert info.completed_txns[0].is_aborted
    return writer.close()


def test_catalogue_108_aborted_txn_lso_points_at_the_other_producers_open_transaction(fs, tmp_path):
    written = write_catalogue_108(fs, str(tmp_path))
    assert written.log_end_offset == 108 and written.last_stable_offset == 108
    assert written.aborted_txns == [AbortedTxn(10, 102, 106, 100)]
    txn_file = tmp_path / "txn-0" / "00000000000000000100.txnindex"
    assert TransactionIndex.from_bytes(txn_file.read_bytes(), 100).entries == [AbortedTxn(10, 102, 106, 100)]
    assert written.leader_epochs == [EpochEntry(15, 100)]


def test_catalogue_108_with_a_transaction_begun_in_an_earlier_segment(fs, tmp_path):
    # producer state loaded from a snapshot says pid2's transaction began at 75
    snapshot = ProducerSnapshot(
        100,
        [
            ProducerStateEntry(
                10,
                0,
                last_sequence=10,
                last_offset=10,
                offset_delta=5,
                coordinator_epoch=0,
                current_txn_first_offset=75,
            )
        ],
    )
    written = write_catalogue_108(fs, str(tmp_path), ProducerStateManager.from_snapshot(snapshot))
    assert written.aborted_txns == [AbortedTxn(10, 75, 106, 100)]


def test_an_abort_is_indexed_in_the_segment_that_holds_its_marker(fs, tmp_path):
    writer = PartitionWriter(fs, str(tmp_path), "t", 0, segment_bytes=len(batch(0)) * 2)
    writer.append(txn_batch(0, 1, 3, leader_epoch=0))
    writer.append(batch(1))
    writer.append(batch(2))  # rolls
    writer.append_end_txn_marker(producer_id=3, producer_epoch=0, commit=False, timestamp=T0)
    written = writer.close()
    assert [s.base_offset for s in written.segments] == [0, 2]
    assert written.segments[0].txn_index.entries == []
    assert written.segments[1].txn_index.entries == [AbortedTxn(3, 0, 3, 4)]
    assert set(written.segments[1].files) == {".log", ".index", ".timeindex", ".txnindex"}


def test_an_empty_aborted_transaction_has_no_txnindex_entry(fs, tmp_path):
    # ProducerAppendInfo.appendEndTxnMarker completes no transaction when the producer has none
    # with data, so UnifiedLog.append indexes nothing (UnifiedLogTest.testZombieCoordinatorFencedEmptyTransaction
    # appends such markers); the next transaction with data is indexed as usual.
    writer = PartitionWriter(fs, str(tmp_path), "t", 0)
    writer.append(batch(0))
    info = writer.append_end_txn_marker(producer_id=3, producer_epoch=0, commit=False, timestamp=T0)
    assert info.completed_txns == () and writer.last_stable_offset == 2
    writer.append(txn_batch(2, 1, 3, leader_epoch=0))
    writer.append_end_txn_marker(producer_id=3, producer_epoch=0, commit=False, timestamp=T0)
    writer.append_end_txn_marker(producer_id=3, producer_epoch=0, commit=False, timestamp=T0)  # empty again
    written = writer.close()
    assert written.aborted_txns == [AbortedTxn(3, 2, 3, 4)]
    assert written.segments[0].txn_index.entries == [AbortedTxn(3, 2, 3, 4)]
    only_empty = PartitionWriter(fs, str(tmp_path / "empty"), "t", 0)
    only_empty.append_end_txn_marker(producer_id=3, producer_epoch=0, commit=False, timestamp=T0)
    written = only_empty.close()
    assert written.aborted_txns == [] and ".txnindex" not in written.segments[0].files


def test_hanging_transaction_keeps_the_last_stable_offset_low(fs, tmp_path):
    writer = PartitionWriter(fs, str(tmp_path), "t", 0)
    writer.append(batch(0, 2))
    writer.append(txn_batch(2, 2, 9, leader_epoch=0))
    writer.append(batch(4, 2))
    written = writer.close()
    assert (written.high_watermark, written.last_stable_offset) == (6, 2)
    snapshot = ProducerSnapshot.from_bytes((tmp_path / "t-0" / "00000000000000000006.snapshot").read_bytes(), 6)
    assert snapshot.entries[0].current_txn_first_offset == 2


def test_catalogue_109_leader_epochs_from_batches(fs, tmp_path):
    writer = PartitionWriter(fs, str(tmp_path), "t", 0, log_start_offset=104, leader_epoch=None)
    for base, epoch in ((104, 0), (106, 1), (108, 1), (110, 2)):
        writer.append(batch(base, 2, partition_leader_epoch=epoch))
    written = writer.close()
    expected = [EpochEntry(0, 104), EpochEntry(1, 106), EpochEntry(2, 110)]
    assert written.leader_epochs == expected
    assert parse_leader_epoch_checkpoint((tmp_path / "t-0" / "leader-epoch-checkpoint").read_text()) == expected


def test_become_leader_starts_an_epoch_at_the_log_end_offset(fs, tmp_path):
    writer = PartitionWriter(fs, str(tmp_path), "t", 0)  # leader of epoch 0 from offset 0
    writer.become_leader(1)  # nothing written in epoch 0: its entry goes
    writer.append_records([Record(0, T0, b"k", b"v")] * 3)
    writer.become_leader(4)
    writer.append_records([Record(0, T0, b"k", b"v")])
    written = writer.close()
    assert written.leader_epochs == [EpochEntry(1, 0), EpochEntry(4, 3)]
    batches = list(iter_batches((tmp_path / "t-0" / "00000000000000000000.log").read_bytes()))
    assert [b.partition_leader_epoch for b in batches] == [1, 4]


def test_legacy_records_keep_no_leader_epoch_cache(fs, tmp_path):
    writer = PartitionWriter(fs, str(tmp_path), "old", 0, leader_epoch=None, leader_epoch_cache=False)
    writer.append_legacy_records([Record(0, T0 + i, b"k", b"v") for i in range(4)], magic=1, codec=Codec.GZIP)
    writer.append_legacy_records([Record(0, -1, b"k", b"v")] * 2, magic=0, now_ms=T0 + 50)
    written = writer.close()
    assert written.log_end_offset == 6 and written.leader_epochs == []
    assert not (tmp_path / "old-0" / "leader-epoch-checkpoint").exists()
    data = (tmp_path / "old-0" / "00000000000000000000.log").read_bytes()
    assert [(b.magic, b.last_offset) for b in iter_batches(data)] == [(1, 3), (0, 4), (0, 5)]
    assert mtime_ms(written.segments[0].log_path) == T0 + 50  # v0 has no timestamps: the broker clock


def test_log_append_time_batches_and_markers(fs, tmp_path):
    writer = PartitionWriter(fs, str(tmp_path), "t", 0)
    lat = TimestampType.LOG_APPEND_TIME
    writer.append_records(
        [Record(0, T0, b"k", b"v")],
        timestamp_type=lat,
        producer_id=4,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
        now_ms=T0 + 500,
    )
    writer.append_end_txn_marker(producer_id=4, producer_epoch=0, commit=True, timestamp=T0 + 600, timestamp_type=lat)
    writer.close()
    data = (tmp_path / "t-0" / "00000000000000000000.log").read_bytes()
    first, mark = list(iter_batches(data))
    assert first.timestamp_type == lat and [r.timestamp for r in first.records()] == [T0 + 500]
    assert mark.timestamp_type == lat and mark.is_control and mark.max_timestamp == T0 + 600
    assert control_record(mark).type == ControlType.COMMIT


def test_mtimes_come_from_the_data(fs, tmp_path):
    size = len(batch(0))
    writer = PartitionWriter(fs, str(tmp_path), "t", 0, segment_bytes=2 * size, now_ms=T0)
    for offset in range(3):
        writer.append(batch(offset, ts=T0 + 1000 * offset))
    written = writer.close()
    part = tmp_path / "t-0"
    assert mtime_ms(part / "00000000000000000000.log") == T0 + 1000  # its last write
    assert mtime_ms(part / "00000000000000000000.index") == T0 + 1000
    assert mtime_ms(part / "00000000000000000002.snapshot") == T0 + 2000  # the roll
    assert mtime_ms(part / "00000000000000000002.log") == T0 + 2000
    assert mtime_ms(part / "00000000000000000003.snapshot") == T0 + 2000  # the shutdown
    assert mtime_ms(part / "partition.metadata") == T0
    assert mtime_ms(part) == T0 + 2000 and written.mtime_ms == T0 + 2000


def test_partition_metadata_topic_id_is_deterministic(fs, tmp_path):
    written = PartitionWriter(fs, str(tmp_path), "orders", 3, seed=7).close()
    metadata = parse_partition_metadata((tmp_path / "orders-3" / "partition.metadata").read_text())
    assert metadata.topic_id == written.topic_id == derive_topic_id("orders", 7)
    assert derive_topic_id("orders", 8) != derive_topic_id("orders", 7) != derive_topic_id("order", 7)
    assert all(not derive_topic_id(f"t{i}").startswith("-") for i in range(200))


def test_closed_writers_refuse_more(fs, tmp_path):
    writer = PartitionWriter(fs, str(tmp_path), "t", 0)
    writer.close()
    with pytest.raises(ValueError):
        writer.append(batch(0))


def test_a_partition_directory_that_holds_files_is_refused(fs, tmp_path):
    (tmp_path / "t-0").mkdir()
    (tmp_path / "t-0" / "00000000000000000000.log").write_bytes(b"keep me")
    with pytest.raises(LogDirError):
        PartitionWriter(fs, str(tmp_path), "t", 0)
    assert (tmp_path / "t-0" / "00000000000000000000.log").read_bytes() == b"keep me"
