"""Producer state replay (spec §6), named after the Kafka tests it mirrors."""

from __future__ import annotations

from kafkalog.codec.batch import RecordBatch, build_batch, build_empty_batch
from kafkalog.codec.control import build_end_txn_marker
from kafkalog.codec.records import Record
from kafkalog.rules.aborted_txn import AbortedTxn
from kafkalog.storage.producer_state import ProducerStateManager
from kafkalog.storage.snapshot import ProducerSnapshot, ProducerStateEntry


def data(offsets, pid=-1, epoch=-1, seq=-1, txn=False, ts=100, last_delta=None):
    records = [Record(o, ts, b"k%d" % o, b"v") for o in offsets]
    return RecordBatch(
        build_batch(
            records,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            is_transactional=txn,
            last_offset_delta=last_delta,
        )
    )


def marker(offset, pid, commit, epoch=0, ts=200):
    return RecordBatch(
        build_end_txn_marker(
            offset=offset, timestamp=ts, producer_id=pid, producer_epoch=epoch, commit=commit, coordinator_epoch=7
        )
    )


def test_rebuild_with_empty_compacted_batch__ULT_testRebuildProducerStateWithEmptyCompactedBatch():
    manager = ProducerStateManager()
    manager.append(
        RecordBatch(
            build_empty_batch(
                base_offset=0, last_offset_delta=1, max_timestamp=5, producer_id=1, producer_epoch=0, base_sequence=0
            )
        )
    )
    assert manager.producers[1].last_sequence == 1 and manager.active_producers() == {1: (1, 0)}


def test_compacted_data_keeps_last_sequence__ULT_testRebuildProducerIdMapWithCompactedData():
    manager = ProducerStateManager()
    manager.append(data([0, 3], pid=1, epoch=0, seq=0, last_delta=3))  # 4 records, 2 left after cleaning
    assert manager.producers[1].last_sequence == 3 and manager.map_end_offset == 4


def test_empty_control_batch_changes_nothing__PSMT_testAppendEmptyControlBatch():
    manager = ProducerStateManager()
    manager.append(data([0], pid=1, epoch=0, seq=0, txn=True))
    empty_marker = RecordBatch(
        build_empty_batch(
            base_offset=1,
            last_offset_delta=0,
            max_timestamp=5,
            producer_id=1,
            producer_epoch=0,
            is_transactional=True,
            is_control=True,
        )
    )
    assert manager.append(empty_marker) is None
    assert manager.open_transactions() == {1: 0}


def test_markers_of_empty_transactions_complete_none__PSMT_testSkipEmptyTransactions():
    # ProducerAppendInfo.appendEndTxnMarker emits a CompletedTxn only when the producer has a
    # transaction with data: an empty one gets no .txnindex entry and never moves the LSO.
    manager = ProducerStateManager(16)
    manager.append(data(range(16, 21), pid=1, epoch=0, seq=0, txn=True))
    assert manager.first_unstable_offset() == 16
    completed = manager.append(marker(21, 1, commit=True))
    assert completed == (1, 16, 21, False)
    assert manager.append(marker(22, 1, commit=True)) is None
    assert manager.append(marker(23, 1, commit=False)) is None
    manager.append(data(range(24, 28), pid=1, epoch=0, seq=5, txn=True))
    completed = manager.append(marker(28, 1, commit=False))
    assert completed.is_aborted and manager.aborted_txn(completed) == AbortedTxn(1, 24, 28, 29)
    assert manager.append(marker(29, 1, commit=False, ts=290)) is None
    # the marker of an empty transaction still updates the producer (ProducerStateEntry.update)
    assert (manager.producers[1].coordinator_epoch, manager.producers[1].last_timestamp) == (7, 290)
    manager.append(data([30, 31], pid=1, epoch=0, seq=9, txn=True))
    assert manager.first_unstable_offset() == 30


def test_abort_lso_points_at_other_open_txn__LST_testRecoverTransactionIndex():
    manager = ProducerStateManager(100)
    manager.append(data([100, 101], pid=1, epoch=0, seq=0, txn=True))
    manager.append(data([102, 103], pid=2, epoch=0, seq=0, txn=True))
    manager.append(data([104, 105], pid=2, epoch=0, seq=2, txn=True))
    completed = manager.append(marker(106, 2, commit=False))
    assert completed.is_aborted and manager.aborted_txn(completed) == AbortedTxn(2, 102, 106, 100)
    assert manager.first_unstable_offset() == 100


def test_abort_with_txn_open_in_snapshot__LST_testRecoverTransactionIndex_preloaded():
    snapshot = ProducerSnapshot(100, [ProducerStateEntry(2, 0, 5, 80, 0, 90, 7, current_txn_first_offset=75)])
    manager = ProducerStateManager.from_snapshot(snapshot)
    manager.append(data([100, 101], pid=1, epoch=0, seq=0, txn=True))
    manager.append(data([102, 103], pid=2, epoch=0, seq=6, txn=True))
    completed = manager.append(marker(106, 2, commit=False))
    assert manager.aborted_txn(completed) == AbortedTxn(2, 75, 106, 100)


def test_abort_with_nothing_else_open_has_lso_after_marker():
    manager = ProducerStateManager()
    manager.append(data([0, 1], pid=4, epoch=0, seq=0, txn=True))
    completed = manager.append(marker(2, 4, commit=False))
    assert manager.aborted_txn(completed) == AbortedTxn(4, 0, 2, 3)
    assert manager.first_unstable_offset() is None and manager.producers[4].coordinator_epoch == 7


def test_new_epoch_clears_batch_history():
    manager = ProducerStateManager()
    manager.append(data([0], pid=1, epoch=0, seq=0))
    manager.append(marker(1, 1, commit=True, epoch=1))  # a marker of a newer epoch (producer fenced)
    assert manager.active_producers() == {1: (-1, 1)}


def test_expiry_spares_open_transactions__PSMT_testPidExpirationTimeout_testProducersWithOngoingTransactionsDontExpire():  # noqa: E501 Kafka's test names
    manager = ProducerStateManager()
    manager.append(data([0], pid=1, epoch=0, seq=0, ts=1_000))
    manager.append(data([1], pid=2, epoch=0, seq=0, txn=True, ts=1_000))
    manager.remove_expired(now=1_000 + 86_400_000 - 1)
    assert set(manager.producers) == {1, 2}
    manager.remove_expired(now=1_000 + 86_400_000)
    assert set(manager.producers) == {2}


def test_snapshot_round_trip_of_replayed_state():
    manager = ProducerStateManager()
    manager.append(data([0, 1, 2], pid=9, epoch=3, seq=10, ts=55))
    manager.append(data([3], pid=8, epoch=0, seq=0, txn=True, ts=56))
    snap = manager.snapshot()
    assert snap.offset == 4
    again = ProducerSnapshot.from_bytes(snap.to_bytes(), 4)
    assert again.entries == snap.entries
    restored = ProducerStateManager.from_snapshot(again)
    assert restored.active_producers() == manager.active_producers()
    assert restored.open_transactions() == {8: 3}
    assert ProducerStateManager.from_snapshot(again, now=10**12).producers.keys() == {8}


def test_replay_bytes_are_the_bytes_a_replay_reads(tmp_path, monkeypatch):
    """What packs compaction's replays into executor tasks: the segments from the latest snapshot's on
    (the last one always, for the log end offset), or every segment without a snapshot; the first from
    where the read starts."""
    from kafkalog.operations.generate import GeneratorSpec, TopicSpec, generate
    from kafkalog.storage.fs import LogFileSystem
    from kafkalog.storage.partition import Partition
    from kafkalog.storage.producer_state import replay_bytes, replay_partition
    from kafkalog.storage.segment import LogSegment

    spec = TopicSpec("t", records=600, keys=50, segment_bytes=4096, idempotent_producers=2, transactional_producers=1)
    generate(str(tmp_path), GeneratorSpec(seed=5, consumer_offsets=None, topics=[spec]))
    part = Partition.open(*LogFileSystem.for_path(str(tmp_path / "t-0")))
    bases = [s.base_offset for s in part.segments]
    assert len(bases) >= 4 and bases[2] in part.snapshots, (bases, sorted(part.snapshots))
    read: list[tuple[LogSegment, int]] = []
    batches = LogSegment.batches

    def counted(self, start=0, *args, **kwargs):
        read.append((self, start))
        return batches(self, start, *args, **kwargs)

    monkeypatch.setattr(LogSegment, "batches", counted)
    replays = []
    for snapshots, expected in (
        (dict(part.snapshots), bases[-1:]),  # the generator's latest snapshot is in the last segment
        ({bases[2]: part.snapshots[bases[2]]}, bases[2:]),  # at a segment's base: the ones before are not read
        ({}, bases),
    ):
        read.clear()
        part.snapshots = snapshots
        state, end = replay_partition(part)
        assert [s.base_offset for s, _ in read] == expected
        assert replay_bytes(part) == sum(s.size - start for s, start in read)
        replays.append((state.snapshot(), end))
    assert replays[0] == replays[1] == replays[2]  # the same state at the same log end offset, whatever it read


def test_an_empty_active_segment_ends_the_log_at_its_base_offset(tmp_path):
    """Kafka's LogLoader takes the log end offset from the last segment alone (`readNextOffset`: its
    base offset when it holds no batch), also where an earlier segment ends lower, as after a cleaner
    removed a segment's last records and the log rolled. Every reader of the log end agrees."""
    from kafkalog.codec.batch import build_batch as build
    from kafkalog.rules.partition_state import partition_state
    from kafkalog.storage.fs import LogFileSystem
    from kafkalog.storage.partition import Partition
    from kafkalog.storage.producer_state import replay_partition
    from kafkalog.storage.segment import log_end_offset

    part_dir = tmp_path / "t-0"
    part_dir.mkdir()
    (part_dir / f"{0:020d}.log").write_bytes(build([Record(o, 100, b"k", b"v") for o in range(6)]))
    (part_dir / f"{10:020d}.log").write_bytes(b"")  # rolled at 10; offsets 6-9 were cleaned away
    part = Partition.open(*LogFileSystem.for_path(str(part_dir)))
    assert log_end_offset(part.segments) == 10
    assert replay_partition(part)[1] == 10
    assert partition_state(part, replay_partition).log_end_offset == 10
