"""kafkalog's batch rewrite against Kafka 4.3.1's own `MemoryRecords.filterTo` (tests/kafka/FilterTo.java), the
step of Kafka's cleaner that rewrites a batch, on legacy (v0/v1) batches that lose records.

Kafka 4.x writes what it keeps of every legacy batch it cleans as a v2 batch, even one that loses
no record; kafkalog does so with `legacy_as_v2` (`compact --legacy-as-v2`), byte for byte. Without
it kafkalog keeps the batch's own format, as Kafka 3.x's cleaner did (docs/semantics.md). The
segments a whole `--legacy-as-v2` compaction writes pass Kafka's DumpLogSegments.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.codec.batch import RecordBatch, TimestampType
from kafkalog.codec.compression import Codec
from kafkalog.codec.filter import BatchRetention, Outcome, filter_batch
from kafkalog.codec.legacy import build_legacy_batch
from kafkalog.codec.reader import iter_batches
from kafkalog.codec.records import Record

HERE = Path(__file__).parent
NOW, DELETE_RETENTION = 1_700_000_000_000, 86_400_000

CASES = {
    "v1 gzip, a tombstone kept": (1, Codec.GZIP, TimestampType.CREATE_TIME, {5}),
    "v1 lz4, log append time": (1, Codec.LZ4, TimestampType.LOG_APPEND_TIME, {5, 10}),
    "v0 gzip, no timestamps": (0, Codec.GZIP, TimestampType.CREATE_TIME, {8}),
    "v1 gzip, nothing removed": (1, Codec.GZIP, TimestampType.CREATE_TIME, set()),
}


def legacy_batches(magic: int, codec: int, timestamp_type: int) -> bytes:
    first = [Record(5, 1_000, b"a", b"1"), Record(8, 1_002, b"b", None), Record(10, 1_001, b"c", b"3")]
    second = [Record(11, 1_003, b"a", b"4"), Record(12, 1_004, b"d", b"5")]
    if magic == 0:
        first = [r._replace(timestamp=-1) for r in first]
        second = [r._replace(timestamp=-1) for r in second]
    append = 2_000 if timestamp_type == TimestampType.LOG_APPEND_TIME else None
    return b"".join(
        build_legacy_batch(records, magic=magic, codec=codec, timestamp_type=timestamp_type, log_append_time=append)
        for records in (first, second)
    )


def kafkalog_filter(data: bytes, removed: set[int], legacy_as_v2: bool) -> bytes:
    out = []
    for batch in iter_batches(data):
        records = batch.records()
        result = filter_batch(
            batch,
            [r for r in records if r.offset not in removed],
            retention=BatchRetention.DELETE_EMPTY,
            delete_horizon_ms=NOW + DELETE_RETENTION,
            legacy_as_v2=legacy_as_v2,
        )
        assert result.outcome in (Outcome.VERBATIM, Outcome.REENCODED)
        out.append(result.data)
    return b"".join(out)


@pytest.mark.parametrize("case", CASES)
def test_legacy_batches_rewritten_as_kafka_4_does(case, kafka_tools, tmp_path):
    magic, codec, timestamp_type, removed = CASES[case]
    data = legacy_batches(magic, codec, timestamp_type)
    (tmp_path / "in").write_bytes(data)
    kafka_tools.java(
        [
            str(HERE / "FilterTo.java"),
            str(tmp_path / "in"),
            str(tmp_path / "out"),
            ",".join(str(o) for o in sorted(removed)),
            str(NOW),
            str(DELETE_RETENTION),
        ]
    )
    kafkas = (tmp_path / "out").read_bytes()
    assert kafkalog_filter(data, removed, legacy_as_v2=True) == kafkas

    magics = [b.magic for b in iter_batches(kafkas)]
    kept_formats = [b.magic for b in iter_batches(kafkalog_filter(data, removed, legacy_as_v2=False))]
    assert magics == [2, 2] and kept_formats == [magic, magic]  # Kafka 4.x converts; kafkalog by default does not
    horizons = [b.delete_horizon_ms for b in iter_batches(kafkas) if isinstance(b, RecordBatch)]
    assert horizons == [NOW + DELETE_RETENTION if 8 not in removed else None, None]  # offset 8 is a tombstone
    if not removed:
        assert kafkalog_filter(data, removed, legacy_as_v2=False) == data


@pytest.mark.spark
def test_a_compaction_with_legacy_as_v2_passes_dump_log_segments(spark, kafka_tools, tmp_path):
    """The segments `compact --legacy-as-v2` writes from v0 and v1 partitions, checked by Kafka's own
    DumpLogSegments: every batch reads with a valid CRC, every index passes Kafka's checks."""
    from kafkalog.config import resolver_from
    from kafkalog.operations.compact import compact
    from kafkalog.operations.generate import generate, small_preset

    from .test_roundtrip import check_with_dump_log_segments

    source, out = tmp_path / "in", tmp_path / "out"
    generate(str(source), small_preset(seed=7))
    topics = ["legacy-v1", "legacy-v0"]
    compact(
        spark,
        str(source),
        resolver_from(settings=["cleanup.policy=compact"]),
        NOW,
        force=True,
        topics=topics,
        output=str(out),
        legacy_as_v2=True,
    )
    written = [p for p in out.rglob("*.log") if p.parent.name.rsplit("-", 1)[0] in topics]
    assert any(b.magic == 2 for p in written for b in iter_batches(p.read_bytes()))
    check_with_dump_log_segments(kafka_tools, (out, [str(p.relative_to(out)) for p in written]))
