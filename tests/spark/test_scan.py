"""The scan on Spark: real broker directories read row for row as the codec decodes them, pruning
counted in opened files, split segments, and errors that name file and byte."""

from __future__ import annotations

import shutil

import pytest
from chispa import assert_df_equality

from kafkalog.scan.inventory import IOStats
from kafkalog.spark import ScanMetrics, narrow_scan, read_records, segment_inventory
from kafkalog.storage.naming import parse_segment_file_name

from . import direct
from .conftest import REAL_BROKER_DIRS

pytestmark = pytest.mark.spark

LOG_DIRS = sorted(d for d in REAL_BROKER_DIRS.iterdir() if d.is_dir() and not d.name.endswith(".golden"))
ORDER = ("topic", "partition", "offset")


def _millis(df):
    from pyspark.sql import functions as F

    return df.withColumn("timestamp", F.unix_millis("timestamp"))


def test_the_real_fixtures_hold_what_the_equality_test_must_cover():
    rows = [r for log_dir in LOG_DIRS for r in direct.record_rows(log_dir)]
    assert len(LOG_DIRS) == 6 and len(rows) > 25_000
    assert any(r[0] is None for r in rows) and any(r[1] is None for r in rows)  # null keys and values
    assert any(r[7] for r in rows) and {r[6] for r in rows} >= {-1, 0}  # headers; v0 and CreateTime
    assert {r[14] for r in rows} >= {0, 1, 2, 3}  # none, gzip, snappy, lz4


@pytest.mark.parametrize("log_dir", LOG_DIRS, ids=lambda p: p.name)
def test_records_of_real_broker_dirs_equal_the_codec_row_for_row(spark, log_dir):
    df = read_records(spark, str(log_dir))
    assert dict(df.dtypes)["timestamp"] == "timestamp"  # Spark's Kafka source type
    expected = spark.createDataFrame(direct.record_rows(log_dir), direct.RECORDS_DDL)
    assert_df_equality(_millis(df).orderBy(*ORDER), expected.orderBy(*ORDER), ignore_nullable=True)


def _segment_files(partition_dir):
    """(base offset, path) of the non-empty .log files, from the directory listing alone."""
    out = []
    for path in sorted(partition_dir.iterdir()):
        name = parse_segment_file_name(path.name)
        if name is not None and name.kind == ".log" and name.state is None and path.stat().st_size:
            out.append((name.base_offset, str(path)))
    return out


def test_pruning_opens_only_the_segments_needed(spark, small_log):
    root = small_log.path
    metrics = ScanMetrics()
    rows = narrow_scan(spark, str(root), topics=["orders"], partitions=[1], metrics=metrics).count()
    assert metrics.executor.files(".log") == {p for _, p in _segment_files(root / "orders-1")}
    assert len(metrics.executor.files(".log")) > 1 and metrics.driver.bytes_read(".log") == 0
    assert rows == len([r for r in direct.narrow_rows(root, {"orders"}) if r[1] == 1])

    # an offset range: only segments whose [base offset, next base offset) meets [150, 250)
    metrics = ScanMetrics()
    df = read_records(
        spark, str(root), topics=["orders", "payments"], start_offset=150, end_offset=250, metrics=metrics
    )
    got = sorted((r.topic, r.partition, r.offset) for r in df.select(*ORDER).collect())
    expected_files = set()
    for partition_dir in sorted(root.glob("orders-*")) + sorted(root.glob("payments-*")):
        segments = _segment_files(partition_dir)
        bases = [b for b, _ in segments] + [None]
        expected_files |= {p for (b, p), nxt in zip(segments, bases[1:]) if b < 250 and (nxt is None or nxt > 150)}
    assert metrics.executor.files(".log") == expected_files
    assert len(expected_files) < sum(len(_segment_files(d)) for d in root.glob("orders-*")) + sum(
        len(_segment_files(d)) for d in root.glob("payments-*")
    )
    assert got == sorted(
        (r[2], r[3], r[4]) for r in direct.record_rows(root, {"orders", "payments"}) if 150 <= r[4] < 250
    )

    # past the end of every partition nothing is opened (the driver reads the active segments' tails)
    metrics = ScanMetrics()
    assert narrow_scan(spark, str(root), start_offset=10**9, metrics=metrics).count() == 0
    assert metrics.executor.files(".log") == set()
    assert 0 < metrics.driver.bytes_read(".log") < 64 * 1024


def test_a_large_segment_split_at_index_entries_reads_as_a_whole(spark, big_segment_log):
    root = str(big_segment_log)
    whole = read_records(spark, root, max_bytes_per_task=1 << 30, min_tasks=1)
    split = read_records(spark, root, max_bytes_per_task=128 * 1024)
    assert whole.rdd.getNumPartitions() == 1 and split.rdd.getNumPartitions() >= 8
    assert_df_equality(split.orderBy("offset"), whole.orderBy("offset"))
    assert_df_equality(
        narrow_scan(spark, root, max_bytes_per_task=128 * 1024).orderBy("offset"),
        narrow_scan(spark, root, max_bytes_per_task=1 << 30, min_tasks=1).orderBy("offset"),
    )

    # a start offset seeks with the index: the bytes before it are not read
    metrics = ScanMetrics()
    tail = read_records(spark, root, start_offset=9000, metrics=metrics)
    assert_df_equality(tail.orderBy("offset"), whole.filter("offset >= 9000").orderBy("offset"))
    segment = next(iter(metrics.executor.files(".log")))
    size = (big_segment_log / "big-0" / "00000000000000000000.log").stat().st_size
    assert metrics.executor.by_path[segment][1] < size // 5


def test_executor_errors_are_kafkalog_errors_naming_file_and_byte(spark, small_log, tmp_path):
    shutil.copytree(small_log.path / "payments-0", tmp_path / "log" / "payments-0")
    segment = sorted((tmp_path / "log" / "payments-0").glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    second = 12 + int.from_bytes(data[8:12], "big")
    data[second + 61] ^= 0x55
    segment.write_bytes(bytes(data))
    with pytest.raises(Exception) as err:
        narrow_scan(spark, str(tmp_path / "log")).collect()
    assert "CrcMismatchError" in str(err.value) and f"{segment}, byte {second + 17}" in str(err.value)


def test_segment_inventory_is_metadata_only(spark, small_log):
    stats = IOStats()
    df = segment_inventory(spark, str(small_log.path), stats=stats)
    rows = df.collect()
    logs = [p for d in small_log.path.iterdir() if d.is_dir() for p in d.glob("*.log")]
    assert len(rows) == len(logs) and {r.path for r in rows} == {str(p) for p in logs}
    assert sum(r.isActive for r in rows) == len({(r.topic, r.partition) for r in rows})
    assert stats.bytes_read(".log") < sum(p.stat().st_size for p in logs) // 4  # tails, not bodies
    orders = sorted((r for r in rows if r.topic == "orders" and r.partition == 0), key=lambda r: r.baseOffset)
    assert [r.lastOffset + 1 for r in orders[:-1]] == [r.baseOffset for r in orders[1:]]
    assert all(r.maxTimestamp and r.mtime for r in orders)
    assert df.columns == [
        "topic",
        "partition",
        "baseOffset",
        "size",
        "path",
        "firstOffset",
        "lastOffset",
        "maxTimestamp",
        "isActive",
        "mtime",
    ]


def test_a_projected_narrow_scan_equals_the_full_view_selected(spark, small_log):
    columns = ["topic", "partition", "offset", "key", "valueIsNull", "deleteHorizonMs"]
    projected = narrow_scan(spark, str(small_log.path), topics=["customers"], columns=columns)
    assert projected.columns == columns
    full = narrow_scan(spark, str(small_log.path), topics=["customers"]).select(*columns)
    assert_df_equality(projected, full, ignore_row_order=True)


# -- the narrow view's windows of batches (no Spark needed) ---------------------------------------------


def _mixed_segment(tmp_path, corrupt_at=None, crc_error_at=None, bad_control_at=None):
    """A .log of batches of every kind a window meets: codecs, LogAppendTime, small and large, legacy,
    control and empty batches; `corrupt_at`: that batch's records are malformed (its CRC is right),
    `crc_error_at`: that batch's stored CRC is wrong, `bad_control_at`: a control batch whose record
    key is too short. Returns the work unit and each batch's position."""
    from kafkalog.codec.batch import build_batch, build_empty_batch
    from kafkalog.codec.compression import Codec
    from kafkalog.codec.control import build_end_txn_marker
    from kafkalog.codec.legacy import build_legacy_batch
    from kafkalog.codec.records import Record
    from kafkalog.scan.scan_plan import WorkUnit
    from tests.codec.test_columnar import batch_of, damage, section_of

    data, positions, offset = bytearray(), [], 0
    codecs = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]
    for i in range(40):
        n = [1, 3, 25, 110][i % 4]
        records = [
            Record(
                offset + j,
                1_700_000_000_000 + 9000 * j - 5 * i,
                b"key-%d" % ((i * 7 + j) % 50),
                None if j % 9 == 4 else b"v" * (j % 200),
            )
            for j in range(n)
        ]
        if i == corrupt_at:
            specs = [{"ts": 9000 * j, "od": j, "key": r.key, "value": r.value} for j, r in enumerate(records)]
            section, starts, fields = section_of(specs)
            damaged, count = damage(section, starts, fields, "key_past_end", n // 2, 3)
            batch = batch_of(damaged, count, base_offset=offset, codec=Codec.LZ4).data
        elif i == bad_control_at:
            batch = build_batch(
                [Record(offset, 5, b"\0", None)],
                is_control=True,
                is_transactional=True,
                producer_id=3,
                producer_epoch=0,
            )
            n = 1
        elif i % 10 == 7:
            batch = build_legacy_batch(records, magic=1, codec=Codec.GZIP if i % 20 == 7 else Codec.NONE)
        elif i % 10 == 5:
            batch = build_end_txn_marker(offset=offset, timestamp=5, producer_id=3, producer_epoch=0, commit=True)
            n = 1
        elif i % 10 == 9:
            batch = build_empty_batch(base_offset=offset, last_offset_delta=2, max_timestamp=7)
            n = 3
        else:
            log_append = i % 3 == 1
            batch = build_batch(
                records,
                codec=codecs[i % 5],
                timestamp_type=int(log_append),
                log_append_time=1_800_000_000_000 + i if log_append else None,
            )
        if i == crc_error_at:
            batch = batch[:-1] + bytes([batch[-1] ^ 1])
        positions.append(len(data))
        data += batch
        offset += n
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(data))
    return WorkUnit("t", 0, 0, str(path), 0, len(data), len(data)), positions


def _read(unit, windowed: bool, **kw):
    """read_unit's batches, with windows or batch by batch (each batch scanned on its own as `add`
    gets it: what the narrow view did before windows)."""
    from unittest import mock

    from kafkalog import tuning
    from kafkalog.scan import reader, views

    with mock.patch.object(tuning, "VIEW_WINDOW_BATCHES", tuning.VIEW_WINDOW_BATCHES if windowed else 1):
        return list(reader.read_unit(unit, views.filesystem(str(unit.path)), "narrow", **kw))


def _error(fn):
    from kafkalog.errors import KafkaLogError

    with pytest.raises(KafkaLogError) as err:
        fn()
    return type(err.value), err.value.message, err.value.file, err.value.position, err.value.offset


@pytest.mark.parametrize("batch_rows", [1, 50, 64 * 1024])
@pytest.mark.parametrize("offsets", [(None, None), (30, None), (None, 400), (101, 377)])
def test_narrow_windows_equal_the_batch_by_batch_scan(tmp_path, batch_rows, offsets):
    from kafkalog.scan.scan_plan import ScanFilter

    unit, _ = _mixed_segment(tmp_path)
    flt = ScanFilter.of(start_offset=offsets[0], end_offset=offsets[1])
    got = _read(unit, True, flt=flt, batch_rows=batch_rows)
    expected = _read(unit, False, flt=flt, batch_rows=batch_rows)
    assert [b.num_rows for b in got] == [b.num_rows for b in expected]  # the same Arrow batches
    assert all(a.equals(b) for a, b in zip(got, expected))
    assert sum(b.num_rows for b in got) > 500 or offsets != (None, None)


@pytest.mark.parametrize("corrupt_at", [0, 2, 11, 21, 38])
def test_a_corrupt_batch_in_a_window_raises_its_own_error(tmp_path, corrupt_at):
    """The batch's own located CorruptBatchError, as batch by batch, even when a later batch of the
    window fails its CRC check first."""
    from kafkalog.errors import CorruptBatchError

    for crc_error_at in (None, corrupt_at + 1):
        unit, positions = _mixed_segment(tmp_path, corrupt_at, crc_error_at)
        expected = _error(lambda unit=unit: _read(unit, False))
        assert expected[0] is CorruptBatchError and expected[2] == unit.path
        assert expected[3] == positions[corrupt_at] and expected[1].startswith("record at byte")
        assert _error(lambda unit=unit: _read(unit, True)) == expected


@pytest.mark.parametrize("crc_error_at", [None, 14])
def test_a_bad_control_batch_in_a_window_raises_as_before(tmp_path, crc_error_at):
    from kafkalog.errors import CorruptBatchError

    unit, positions = _mixed_segment(tmp_path, bad_control_at=13, crc_error_at=crc_error_at)
    expected = _error(lambda: _read(unit, False))
    assert expected[0] is CorruptBatchError and expected[2] == unit.path and "control record key" in expected[1]
    assert expected[3] == positions[13] and expected[4] is not None  # the batch's first byte and an offset
    assert _error(lambda: _read(unit, True)) == expected
    unit, positions = _mixed_segment(tmp_path, corrupt_at=12, bad_control_at=13)  # the earlier batch first
    expected = _error(lambda: _read(unit, False))
    assert expected[3] == positions[12] and _error(lambda: _read(unit, True)) == expected
