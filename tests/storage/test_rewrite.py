"""Rewriting a group of segments into one staged output segment."""

from __future__ import annotations

import os
import random

from kafkalog.codec.batch import RecordBatch, build_batch, build_empty_batch
from kafkalog.codec.compression import Codec
from kafkalog.codec.control import build_end_txn_marker
from kafkalog.codec.filter import BatchRetention
from kafkalog.codec.reader import iter_batches
from kafkalog.codec.records import Record
from kafkalog.rules.aborted_txn import AbortedTxn
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.partition import Partition
from kafkalog.storage.rewrite import BatchPlan, rewrite_segments
from kafkalog.storage.txnindex import TransactionIndex


def _segment(d, base, batches, mtime):
    path = d / f"{base:020d}.log"
    path.write_bytes(b"".join(batches))
    os.utime(path, ns=(mtime * 10**6, mtime * 10**6))


def test_rewrite_copies_untouched_filters_changed_and_stages_cleaned(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    b0 = build_batch([Record(0, 10, b"a", b"1"), Record(1, 11, b"b", b"2")], codec=Codec.GZIP)
    b1 = build_batch([Record(2, 12, b"c", b"3")])
    b2 = build_batch([Record(3, 13, b"d", None)])  # a tombstone that needs a horizon
    b3 = build_batch(
        [Record(4, 14, b"e", b"5")], producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    b4 = build_end_txn_marker(offset=5, timestamp=15, producer_id=1, producer_epoch=0, commit=False)
    b5 = build_empty_batch(base_offset=6, last_offset_delta=0, max_timestamp=16)
    _segment(d, 0, [b0, b1], 1_000)
    _segment(d, 3, [b2, b3, b4, b5], 2_000)
    fs = LogFileSystem.for_path(str(d))[0]
    part = Partition.open(fs, str(d))
    plans = {
        (0, 0): BatchPlan(BatchRetention.DELETE_EMPTY, frozenset({0})),
        (3, 0): BatchPlan(BatchRetention.DELETE_EMPTY, has_tombstone=True),
        (3, len(b2)): BatchPlan(BatchRetention.RETAIN_EMPTY, frozenset({4})),
        (3, len(b2) + len(b3) + len(b4)): BatchPlan(BatchRetention.DELETE_EMPTY),
    }
    aborted = [AbortedTxn(1, 4, 5, 6)]
    written, stats = rewrite_segments(
        fs, str(d), part.segments, plans, delete_horizon_ms=99_999, index_interval_bytes=0, aborted_txns=aborted
    )
    assert written.log_path.endswith("00000000000000000000.log.cleaned")
    out = list(iter_batches((d / "00000000000000000000.log.cleaned").read_bytes()))
    assert [(b.base_offset, b.last_offset, b.records_count) for b in out] == [
        (0, 1, 1),
        (2, 2, 1),
        (3, 3, 1),
        (4, 4, 0),
        (5, 5, 1),
    ]
    assert out[0].codec == Codec.GZIP and [r.offset for r in out[0].records()] == [1]
    assert out[1].data == b1  # untouched: byte for byte
    assert out[2].delete_horizon_ms == 99_999 and out[2].records()[0].value is None
    assert out[3].is_transactional and out[3].size == 61
    assert out[4].data == b4
    assert TransactionIndex.from_bytes((d / "00000000000000000000.txnindex.cleaned").read_bytes(), 0).entries == aborted
    assert os.stat(d / "00000000000000000000.log.cleaned").st_mtime_ns // 10**6 == 2_000
    assert (stats.records_in, stats.records_out, stats.horizons_set) == (6, 4, 1)
    assert dict(stats.batches) == {"reencoded": 2, "verbatim": 2, "empty": 1, "dropped": 1}
    assert all(isinstance(b, RecordBatch) and b.is_valid() for b in out)


def test_purge_plans_tombstone_redact_and_take_the_kept_records_max_timestamp(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    b0 = build_batch(
        [Record(0, 30, b"a", b"1", (("h", b"pii"),)), Record(1, 10, b"b", b"2"), Record(2, 20, b"c", b"3")],
        codec=Codec.LZ4,
        producer_id=7,
        producer_epoch=1,
        base_sequence=0,
    )
    b1 = build_batch([Record(3, 40, b"d", b"4")])
    _segment(d, 0, [b0, b1], 1_000)
    fs = LogFileSystem.for_path(str(d))[0]
    part = Partition.open(fs, str(d))
    plans = {
        (0, 0): BatchPlan(
            BatchRetention.RETAIN_EMPTY, frozenset({0}), tombstoned=frozenset({1}), redacted=frozenset({2})
        ),
        (0, len(b0)): BatchPlan(BatchRetention.DELETE_EMPTY, tombstoned=frozenset({3})),
    }
    rewrite_segments(fs, str(d), part.segments, plans, delete_horizon_ms=99_999, index_interval_bytes=0)
    out = list(iter_batches((d / "00000000000000000000.log.cleaned").read_bytes()))
    assert out[0].records() == [Record(1, 10, b"b", None), Record(2, 20, None, None)]
    # the largest kept timestamp, as Kafka's rewrite sets it (the record at 30 went); codec and sequences stay
    assert (out[0].max_timestamp, out[0].codec, out[0].last_sequence) == (20, Codec.LZ4, 2)
    assert out[0].delete_horizon_ms == 99_999  # it keeps a tombstone now
    assert out[1].records() == [Record(3, 40, b"d", None)]
    unchanged = BatchPlan(BatchRetention.DELETE_EMPTY, tombstoned=frozenset({3}))
    assert unchanged.apply(out[1].records()) == out[1].records()  # a second purge finds nothing to change


def test_splicing_writes_the_bytes_decoding_and_reencoding_writes(tmp_path, monkeypatch):
    """Large batches of every codec and timestamp type, half their records removed, some gaining a
    horizon: the splice (records' bytes reused) and the full decode and re-encode agree byte for byte."""
    from kafkalog.codec import filter as filter_module
    from kafkalog.codec import splice as splice_module
    from kafkalog.operations.generate import GeneratorSpec, TopicSpec, generate

    topics = [
        TopicSpec(
            f"t{i}",
            records=1500,
            keys=300,
            value_bytes=(5, 300),
            tombstone_ratio=0.05,
            headers=2,
            codec=codec,
            batch_records=(10, 120),
            timestamp_type=kind,
            idempotent_producers=1,
        )
        for i, (codec, kind) in enumerate(
            [
                ("none", "CreateTime"),
                ("gzip", "LogAppendTime"),
                ("snappy", "CreateTime"),
                ("lz4", "CreateTime"),
                ("zstd", "LogAppendTime"),
            ]
        )
    ]
    generate(str(tmp_path / "in"), GeneratorSpec(seed=5, topics=topics, consumer_offsets=None))
    rng = random.Random(3)
    threshold_of_splice = filter_module.SPLICE_THRESHOLD
    for topic in topics:
        d = tmp_path / "in" / f"{topic.name}-0"
        fs = LogFileSystem.for_path(str(d))[0]
        part = Partition.open(fs, str(d))
        plans = {}
        for seg in part.segments:
            for pos, batch in seg.batches():
                removed = frozenset(o for o in range(batch.base_offset, batch.last_offset + 1) if rng.random() < 0.5)
                plans[(seg.base_offset, pos)] = BatchPlan(
                    rng.choice(list(BatchRetention)[1:]), removed, rng.random() < 0.3, rng.random() < 0.5
                )
        written, spliced = {}, []
        monkeypatch.setattr(
            filter_module, "splice", lambda *a, spliced=spliced: spliced.append(splice_module.splice(*a)) or spliced[-1]
        )
        for label, threshold in (("splice", threshold_of_splice), ("reencode", 10**9)):
            monkeypatch.setattr(filter_module, "SPLICE_THRESHOLD", threshold)
            out = tmp_path / label / topic.name
            out.mkdir(parents=True)
            _, stats = rewrite_segments(
                fs, str(out), part.segments, plans, delete_horizon_ms=10**13, index_interval_bytes=4096
            )
            written[label] = ({p.name: p.read_bytes() for p in out.iterdir()}, stats)
        assert written["splice"] == written["reencode"]
        assert sum(bool(section) for sections in spliced if sections for section in sections) >= 10
