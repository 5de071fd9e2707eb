"""Differential test: kafkalog's Spark compaction against the independent reference model of Kafka's
cleaner (tests/reference), offset for offset and byte for byte, on random partitions with keys,
tombstones, idempotent and transactional producers (commits and aborts), several codecs and segments."""

from __future__ import annotations

import os
import random
from dataclasses import replace

import pytest

from kafkalog import tuning
from kafkalog.codec.compression import Codec
from kafkalog.config import resolver_from
from kafkalog.operations.compact import REASONS, compact
from kafkalog.rules.aborted_txn import AbortedTxn
from kafkalog.storage.index import BatchSummary, build_indexes
from kafkalog.storage.logdir import LogDir
from kafkalog.storage.txnindex import TransactionIndex

from ..reference.cleaner_model import CleanerConfig, clean, replay_producers, split_batches
from ..reference.scenarios import T0, LogBuilder

SEGMENT_BYTES = 2048
DELETE_RETENTION_MS = 1_000


def random_partition(seed: int) -> list:
    rng = random.Random(seed)
    log = LogBuilder(segment_bytes=SEGMENT_BYTES)
    producers = {pid: log.transactional(pid) for pid in (11, 12)}
    idempotent = log.idempotent(21)
    open_txns = set()
    for _ in range(rng.randrange(30, 60)):
        log.sleep(rng.randrange(1, 50))
        roll = rng.random()
        keys = [rng.randrange(12) for _ in range(rng.randrange(1, 5))]
        codec = rng.choice(list(Codec))
        if roll < 0.45:
            log.append([(k, None if rng.random() < 0.15 else f"v{rng.random():.6f}") for k in keys], codec=codec)
        elif roll < 0.6:
            idempotent(keys, codec=codec)
        elif roll < 0.85:
            pid = rng.choice(list(producers))
            producers[pid](keys, codec=codec)
            open_txns.add(pid)
        elif open_txns:
            pid = rng.choice(sorted(open_txns))
            open_txns.discard(pid)
            (log.commit if rng.random() < 0.6 else log.abort)(pid)
    for pid in sorted(open_txns):  # leave no transaction open, so the LSO is the log end
        log.commit(pid)
    log.roll()
    return log.build()


def write_partition(root, segments, config: CleanerConfig) -> None:
    """Files as a broker leaves them: .log, indexes built by Kafka's recovery rules, .txnindex entries."""
    part = root / "t-0"
    part.mkdir(parents=True)
    aborted = replay_producers(segments).aborted_txns
    bases = [s.base_offset for s in segments]
    for i, seg in enumerate(segments):
        data = b"".join(seg.batches)
        name = f"{seg.base_offset:020d}"
        (part / f"{name}.log").write_bytes(data)
        summaries, pos = [], 0
        for batch in split_batches(data):
            summaries.append(BatchSummary(pos, batch.size, batch.last_offset, batch.max_timestamp))
            pos += batch.size
        offset_index, time_index = build_indexes(summaries, seg.base_offset, config.index_interval_bytes)
        (part / f"{name}.index").write_bytes(offset_index.to_bytes())
        (part / f"{name}.timeindex").write_bytes(time_index.to_bytes())
        end = bases[i + 1] if i + 1 < len(bases) else float("inf")
        mine = [AbortedTxn(*t) for t in aborted if seg.base_offset <= t.last_offset < end]
        if mine:
            (part / f"{name}.txnindex").write_bytes(TransactionIndex(seg.base_offset, mine).to_bytes())
        for suffix in (".log", ".index", ".timeindex"):
            os.utime(part / f"{name}{suffix}", ns=(seg.mtime_ms * 10**6,) * 2)


def read_partition(root) -> list:
    """The segments kafkalog left, read as plain files and split by the model's reader (kafka-python):
    the judging path does not go through kafkalog's own reader."""
    part = root / "t-0"
    names = sorted(p.name for p in part.iterdir())
    assert not [n for n in names if n.endswith((".cleaned", ".swap"))], names
    logs = [n for n in names if n.endswith(".log") and len(n) == 24 and n[:20].isdigit()]
    return [(int(n[:20]), [b.data for b in split_batches((part / n).read_bytes())]) for n in logs]


def reason_counts(result) -> dict:
    """The report's records per reason: the model counts the same records (those of the segments it cleans)."""
    (row,) = result.report
    return {r: row[r] for r in REASONS}


SEEDS = [1, 2, 3]


def _model_config() -> CleanerConfig:
    return CleanerConfig(
        delete_retention_ms=DELETE_RETENTION_MS,
        segment_bytes=SEGMENT_BYTES,
        index_interval_bytes=256,
        producer_id_expiration_ms=None,
    )


def test_the_random_partitions_exercise_the_rules():
    """Without Spark: the seeds below supersede, abort, empty batches and expire tombstones, so the
    differential test compares every kind of decision."""
    totals: dict = {}
    for seed in SEEDS:
        first = clean(random_partition(seed), now=T0 + 10_000, config=_model_config())
        second = clean(
            first.as_input(), now=T0 + 10_000 + DELETE_RETENTION_MS + 1, config=_model_config(), checkpoint=0
        )
        for counts in (first.counts, second.counts):
            for reason, n in counts.items():
                totals[reason] = totals.get(reason, 0) + n
    assert all(totals[r] > 0 for r in ("superseded", "aborted_transaction", "tombstone_expired", "empty_batches"))


@pytest.mark.parametrize(
    "seed,spread", [(seed, False) for seed in SEEDS] + [(1, True), (2, True), (3, "chunked"), (4, "ranges")]
)
def test_spark_compaction_equals_the_reference_model(spark, tmp_path, monkeypatch, request, seed, spread):
    """`spread`: scan tasks of 1 KiB, so that the partition's records are read by several tasks and
    its keys decided by the window across them, not by one task alone (the small logs here are
    otherwise read whole by one task). "chunked": one task reads the partition whole, but combines
    its records in chunks of a few rows (Arrow batches of 7 rows), as a task of millions of records
    does: the window decides across the chunks. "ranges": the range path, a range per output segment
    (spark/ranges.py), mapped and rewritten in slices of 5 records. The others take the path of their
    partition's size: one task."""
    from kafkalog.operations.compact import plan_compaction
    from kafkalog.spark import compaction

    if spread == "ranges":
        monkeypatch.setattr(tuning, "ONE_TASK_BYTES", 0)
        monkeypatch.setattr(tuning, "LARGE_PARTITIONS", "ranges")
        monkeypatch.setattr(tuning, "RANGE_BYTES", 1)
        monkeypatch.setattr(tuning, "RANGE_RECORDS", 5)  # each range mapped and rewritten in slices
    if spread is True:
        monkeypatch.setattr(tuning, "COMPACTION_TASK_BYTES", 1024)
    if spread == "chunked":
        monkeypatch.setattr(tuning, "COMBINE_ROWS", 10)
        batch_rows = "spark.sql.execution.arrow.maxRecordsPerBatch"
        before = spark.conf.get(batch_rows)
        spark.conf.set(batch_rows, "7")
        request.addfinalizer(lambda: spark.conf.set(batch_rows, before))
    config = _model_config()
    resolver = resolver_from(
        settings=[
            "cleanup.policy=compact",
            f"delete.retention.ms={DELETE_RETENTION_MS}",
            f"segment.bytes={SEGMENT_BYTES}",
            "index.interval.bytes=256",
            f"producer.id.expiration.ms={2**31 - 1}",
        ]
    )
    segments = random_partition(seed)
    assert len(segments) >= 3
    write_partition(tmp_path, segments, config)
    now = T0 + 10_000
    scan = compaction._scan(spark, plan_compaction(str(tmp_path), resolver, now, force=True))
    assert compaction._whole(scan) == (set() if spread is True else {("t", 0)})
    expected = clean(segments, now=now, config=config)
    result = compact(spark, str(tmp_path), resolver, now, force=True)
    assert read_partition(tmp_path) == [(s.base_offset, s.batches) for s in expected.segments]
    assert reason_counts(result) == {r: expected.counts[r] for r in REASONS}
    # a second pass past the delete horizon: tombstones and emptied transactions' markers go
    later = now + DELETE_RETENTION_MS + 1
    again = clean(expected.as_input(), now=later, config=config, checkpoint=0)
    LogDir.open(str(tmp_path)).write_checkpoint("cleaner-offset-checkpoint", {("t", 0): 0})
    result = compact(spark, str(tmp_path), resolver, later, force=True)
    assert read_partition(tmp_path) == [(s.base_offset, s.batches) for s in again.segments]
    assert reason_counts(result) == {r: again.counts[r] for r in REASONS}


def test_snapshots_stay_as_the_broker_wrote_them_and_the_cleaned_log_validates(spark, tmp_path):
    """Issue 14 §2. Producer 11's transaction is open across the roll at 3, so the broker's snapshot
    at 3 says it began at 0. The cleaner removes its first batch (key 1, superseded at 3) and, as
    Kafka's UnifiedLog.replaceSegments, deletes only the snapshots of segments that no longer exist:
    the snapshot keeps 0 while a replay of the cleaned log begins the transaction at 2, its first
    batch left (ProducerAppendInfo.appendDataBatch). Both are Kafka's, and validate accepts them."""
    from kafkalog.codec.batch import RecordBatch
    from kafkalog.operations.validate import validate_paths
    from kafkalog.storage.producer_state import ProducerStateManager

    log = LogBuilder()
    txn = log.transactional(11)
    txn([1])  # 0
    log.record(2, "x")  # 1
    txn([3])  # 2
    log.roll()
    txn([1])  # 3
    log.commit(11)  # 4
    log.roll()
    log.record(5, "y")  # 5, the active segment
    segments = log.build()
    config = replace(_model_config(), segment_bytes=sum(map(len, segments[0].batches)) + 1)  # no merging
    write_partition(tmp_path, segments, config)
    part = tmp_path / "t-0"
    manager, snapshots = ProducerStateManager(), {}
    for seg in segments:  # the broker snapshots producer state at every roll
        if seg.base_offset > 0:
            manager.map_end_offset = seg.base_offset
            snapshots[seg.base_offset] = manager.snapshot().to_bytes()
            (part / f"{seg.base_offset:020d}.snapshot").write_bytes(snapshots[seg.base_offset])
        for data in seg.batches:
            manager.append(RecordBatch(data))  # building the input: kafkalog's parse for kafkalog's state
    resolver = resolver_from(
        settings=[
            "cleanup.policy=compact",
            f"delete.retention.ms={DELETE_RETENTION_MS}",
            f"segment.bytes={config.segment_bytes}",
            "index.interval.bytes=256",
            f"producer.id.expiration.ms={2**31 - 1}",
        ]
    )
    now = T0 + 10_000
    expected = clean(segments, now=now, config=config)
    compact(spark, str(tmp_path), resolver, now, force=True)
    assert read_partition(tmp_path) == [(s.base_offset, s.batches) for s in expected.segments]
    assert [s.base_offset for s in expected.segments] == [0, 3, 5]
    (_, first_segment), *_ = read_partition(tmp_path)
    assert [b.base_offset for data in first_segment for b in split_batches(data)] == [1, 2]
    assert {int(p.stem): p.read_bytes() for p in part.glob("*.snapshot")} == snapshots
    report = validate_paths([str(tmp_path)])
    assert report.problems == [] and report.counts["snapshot_producers_compared"] >= 2
