"""The scan's pure-Python parts, without a SparkSession: planning (pruning, cutting at index
entries, packing), decoding work units into Arrow batches, inventory probes, pushdown translation."""

from __future__ import annotations

import itertools
import shutil

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.codec.batch import build_batch
from kafkalog.codec.records import Record
from kafkalog.errors import CorruptIndexError, CrcMismatchError, KafkaLogError
from kafkalog.scan.inventory import IOStats, inventory_rows, list_segments
from kafkalog.scan.reader import read_task, read_unit
from kafkalog.scan.scan_plan import (
    ScanFilter,
    WorkUnit,
    check_tiling,
    pack_partitions,
    pack_units,
    plan_scan,
    plan_units,
    prune_segments,
    split_ranges,
    task_bytes,
    unit_of_offsets,
)
from kafkalog.scan.views import NARROW_SCHEMA, RECORDS_SCHEMA, filesystem, record_sequences
from kafkalog.storage.fs import FileEntry
from kafkalog.storage.index import OffsetPosition
from kafkalog.storage.segment import FIRST_HEADER_BYTES, LogSegment, log_end_offset

from . import direct

ENTRIES = [OffsetPosition(10 * i, 1000 * i) for i in range(1, 10)]  # (10, 1000) ... (90, 9000)


# -- cutting segments at index entries -----------------------------------------------------------------


def test_split_ranges_cut_at_entries_within_max_bytes_and_tile_the_file():
    ranges = split_ranges(10_000, ENTRIES, 2500, base_offset=0)
    assert [(s, e) for s, e, _, _ in ranges] == [(0, 2000), (2000, 4000), (4000, 6000), (6000, 8000), (8000, 10_000)]
    positions = {e.position for e in ENTRIES}
    assert all(s in positions for s, *_ in ranges[1:])
    # [p_i, p_j) holds offsets in [o_(i-1) + 1, o_j); the first starts at the base, the last is open
    assert [(lo, hi) for _, _, lo, hi in ranges] == [(0, 20), (11, 40), (31, 60), (51, 80), (71, None)]


def test_split_ranges_long_runs_forced_cuts_and_no_index():
    sparse = [OffsetPosition(5, 100), OffsetPosition(50, 9000)]
    assert [(s, e) for s, e, *_ in split_ranges(10_000, sparse, 1000, 0)] == [(0, 100), (100, 9000), (9000, 10_000)]
    assert split_ranges(10_000, [], 1000, 7) == [(0, 10_000, 7, None)]
    assert [(s, e) for s, e, *_ in split_ranges(10_000, ENTRIES, 100_000, 0, forced=[4000])] == [
        (0, 4000),
        (4000, 10_000),
    ]
    assert split_ranges(10_000, ENTRIES, 100_000, 0, forced=[4321]) == [(0, 10_000, 0, None)]  # not an entry


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(1, 9), min_size=1, max_size=40), st.integers(0, 200), st.integers(1, 120))
def test_unit_of_offsets_holds_every_batch_of_its_offsets(tmp_path_factory, sizes, low, length):
    """A segment of batches of `sizes` records, indexed every few hundred bytes: the unit of [low,
    high) starts and ends at batches and holds every batch with an offset in the range."""
    from kafkalog.storage.fs import LogFileSystem
    from kafkalog.storage.log_writer import PartitionWriter
    from kafkalog.storage.logdir import LogDir

    base = tmp_path_factory.mktemp("unit")
    writer = PartitionWriter(LogFileSystem.for_path(str(base))[0], str(base), "t", 0, index_interval_bytes=200)
    for n in sizes:
        writer.append_records([Record(0, 1, b"k", b"v" * 40) for _ in range(n)])
    writer.close()
    (seg,) = LogDir.open(str(base)).partition("t", 0).segments
    high = low + length
    unit = unit_of_offsets(seg, low, high)
    batches = list(seg.batches())
    starts = [p for p, _ in batches] + [seg.size]
    assert unit.start in starts and unit.end in starts
    for position, batch in batches:
        if batch.base_offset < high and batch.last_offset >= low:
            assert unit.start <= position < unit.end


def test_check_tiling_refuses_gaps_overlaps_and_short_covers():
    check_tiling([(0, 5), (5, 9)], 9)
    for bad in ([(0, 5), (6, 9)], [(0, 5), (4, 9)], [(0, 5)], [(0, 0), (0, 9)]):
        with pytest.raises(ValueError):
            check_tiling(bad, 9)


# -- pruning and packing ---------------------------------------------------------------------------------


def _segment(topic, partition, base, nxt, size=100):
    """A listed segment (nothing of it read): its `.log` and `.index` entries."""

    def entry(suffix, nbytes):
        name = f"{base:020d}{suffix}"
        return FileEntry(name, f"/d/{topic}-{partition}/{name}", nbytes, 0, False)

    return LogSegment(
        None,
        f"/d/{topic}-{partition}",
        base,
        {".log": entry(".log", size), ".index": entry(".index", 80)},
        nxt,
        topic,
        partition,
    )


def _segments():
    seg = _segment
    return [
        seg("a", 0, 0, 100),
        seg("a", 0, 100, 200),
        seg("a", 0, 200, None),
        seg("a", 1, 0, None),
        seg("b", 0, 0, 50),
        seg("b", 0, 50, None, size=0),
    ]


def test_prune_segments_by_topic_partition_and_offsets():
    segs = _segments()

    def names(flt):
        return [(s.topic, s.partition, s.base_offset) for s in prune_segments(segs, flt)]

    assert names(ScanFilter()) == [("a", 0, 0), ("a", 0, 100), ("a", 0, 200), ("a", 1, 0), ("b", 0, 0)]  # empty dropped
    assert names(ScanFilter.of(topics="a", partitions=[0])) == [("a", 0, 0), ("a", 0, 100), ("a", 0, 200)]
    # [100, 200) needs only the segment based at 100 of a-0, and the open-ended last ones elsewhere
    assert names(ScanFilter.of(topics="a", start_offset=100, end_offset=200)) == [("a", 0, 100), ("a", 1, 0)]
    assert names(ScanFilter.of(start_offset=99, end_offset=101)) == [("a", 0, 0), ("a", 0, 100), ("a", 1, 0)]
    assert names(ScanFilter.of(start_offset=5, end_offset=5)) == []
    assert names(ScanFilter.of(topics=[])) == []


def test_plan_units_drops_index_ranges_outside_the_offsets():
    seg = _segment("t", 0, 0, None, size=10_000)
    units = plan_units(
        [seg],
        ScanFilter.of(start_offset=45, end_offset=62),
        unit_bytes=2500,
        read_index=lambda s: ENTRIES,
        seek_min_bytes=0,
    )
    # lookup(45) = (40, 4000) forces a cut there; [4000, 6000) holds offsets [31, 60), [6000, 8000) [51, 80)
    assert [(u.start, u.end, u.low_offset, u.high_offset) for u in units] == [
        (4000, 6000, 31, 60),
        (6000, 8000, 51, 80),
    ]
    whole = plan_units([seg], ScanFilter(), unit_bytes=20_000, read_index=lambda s: pytest.fail("index read"))
    assert [(u.start, u.end) for u in whole] == [(0, 10_000)]


def test_pack_units_in_order_with_an_open_cost():
    units = [WorkUnit("t", 0, i, f"/{i}", 0, size, size) for i, size in enumerate([10, 20, 1000, 5, 5, 5])]
    tasks = pack_units(units, target_bytes=100, open_cost=10)
    assert [[u.segment_base_offset for u in task] for task in tasks] == [[0, 1], [2], [3, 4, 5]]
    assert task_bytes(4000, max_bytes=128 << 20, min_tasks=4) == 1 << 20  # never below 1 MiB for parallelism
    assert task_bytes(1 << 30, max_bytes=128 << 20, min_tasks=4) == 128 << 20
    assert task_bytes(1 << 28, max_bytes=128 << 20, min_tasks=4) == 64 << 20


def test_pack_partitions_keeps_a_partition_that_fits_in_one_task():
    """What pack_units would spread over two tasks (a0 and a1 apart), pack_partitions keeps together;
    a partition too big for a task is packed unit by unit."""
    sizes = [("a", 20), ("a", 20), ("b", 30), ("b", 30), ("c", 150), ("c", 150), ("d", 10)]
    units = [WorkUnit(t, 0, i, f"/{t}/{i}", 0, n, n) for i, (t, n) in enumerate(sizes)]
    names = [[f"{u.topic}{u.segment_base_offset}" for u in task] for task in pack_partitions(units, 100, 10)]
    assert names == [["a0", "a1"], ["b2", "b3"], ["c4"], ["c5"], ["d6"]]
    spread = [[f"{u.topic}{u.segment_base_offset}" for u in task] for task in pack_units(units, 100, 10)]
    assert spread[:2] == [["a0", "a1", "b2"], ["b3"]]


# -- decoding work units -------------------------------------------------------------------------------------


def _rows(batches, columns):
    table = pa.Table.from_batches(list(batches), schema=batches[0].schema if batches else None)
    return list(zip(*(table.column(c).to_pylist() for c in columns)))


def test_split_reads_equal_the_whole_read_and_stop_at_batch_boundaries(big_segment_log):
    whole = plan_scan(big_segment_log, max_bytes_per_task=1 << 30)
    split = plan_scan(big_segment_log, max_bytes_per_task=64 * 1024)
    assert len(whole.units) == 1 and len(split.units) > 10
    size = whole.units[0].segment_size
    check_tiling([(u.start, u.end) for u in split.units], size)
    for view in ("narrow", "records"):
        expected = [b for task in whole.tasks for b in read_task(whole.root, task, view)]
        got = [b for task in split.tasks for b in read_task(split.root, task, view)]
        assert pa.Table.from_batches(got).equals(pa.Table.from_batches(expected))

    fs = filesystem(split.root)
    unit = split.units[1]
    shifted = WorkUnit(**{**unit.__dict__, "end": unit.end - 7})  # a range that ends inside a batch
    with pytest.raises(CorruptIndexError, match="does not end at a batch boundary") as err:
        list(read_unit(shifted, fs))
    assert err.value.position == unit.end - 7 and err.value.file.endswith(".index")
    lying = WorkUnit(**{**unit.__dict__, "high_offset": unit.low_offset + 1})  # an index that understates
    with pytest.raises(CorruptIndexError, match="disagrees with the log"):
        list(read_unit(lying, fs))


def test_views_equal_what_the_codec_decodes_with_offset_filters(small_log):
    plan = plan_scan(small_log.path, min_tasks=3)
    narrow = [b for task in plan.tasks for b in read_task(plan.root, task, "narrow")]
    assert all(b.schema == NARROW_SCHEMA for b in narrow)
    assert sorted(
        _rows(
            narrow,
            [
                "topic",
                "partition",
                "offset",
                "timestamp",
                "key",
                "valueSize",
                "recordSpanStart",
                "recordSpanSize",
                "position",
            ],
        )
    ) == sorted(direct.narrow_rows(small_log.path))
    nulls = _rows(narrow, ["valueIsNull", "valueSize"])
    assert any(is_null for is_null, _ in nulls) and all(is_null == (size < 0) for is_null, size in nulls)
    controls = _rows(narrow, ["isControl", "controlType"])
    assert {c for is_control, c in controls if is_control} == {0, 1}  # ABORT and COMMIT markers
    assert all(c is None for is_control, c in controls if not is_control)

    flt = ScanFilter.of(topics=["orders", "legacy-v1"], partitions=[0], start_offset=57, end_offset=190)
    plan = plan_scan(small_log.path, flt)
    records = [b for task in plan.tasks for b in read_task(plan.root, task, "records", flt)]
    assert all(b.schema == RECORDS_SCHEMA for b in records)
    table = pa.Table.from_batches(records)
    table = table.set_column(5, "timestamp", pc.divide(table.column("timestamp").cast(pa.int64()), 1000))
    got = [
        (*row[:7], None if row[7] is None else [(h["key"], h["value"]) for h in row[7]], *row[8:])
        for row in zip(*(table.column(c).to_pylist() for c in table.column_names))
    ]
    expected = [
        r for r in direct.record_rows(small_log.path, {"orders", "legacy-v1"}) if r[3] == 0 and 57 <= r[4] < 190
    ]
    assert sorted(got, key=lambda r: (r[2], r[4])) == sorted(expected, key=lambda r: (r[2], r[4]))


def _records_view_rows(log_dir) -> list:
    plan = plan_scan(log_dir, max_bytes_per_task=64 * 1024)
    table = pa.Table.from_batches([b for task in plan.tasks for b in read_task(plan.root, task, "records")])
    table = table.set_column(5, "timestamp", pc.divide(table.column("timestamp").cast(pa.int64()), 1000))
    return [
        (*row[:7], None if row[7] is None else [(h["key"], h["value"]) for h in row[7]], *row[8:])
        for row in zip(*(table.column(c).to_pylist() for c in table.column_names))
    ]


def test_the_records_view_of_large_and_small_batches_with_and_without_headers(tmp_path, monkeypatch):
    """Batches the vectorised decoder reads become columns as they are, the records of small ones
    are gathered and made columns together: in one Arrow batch, in order, as the codec decodes them."""
    from kafkalog.codec.batch import RecordBatch
    from kafkalog.codec.decode import RecordColumns
    from kafkalog.operations.generate import GeneratorSpec, TopicSpec, generate

    shapes = {"headers": 2, "plain": 0}
    topics = [
        TopicSpec(name, records=600, keys=40, tombstone_ratio=0.2, headers=headers, codec="lz4", batch_records=(1, 60))
        for name, headers in shapes.items()
    ]
    topics.append(TopicSpec("keyless", records=300, keys=0, batch_records=(30, 60), transactional_producers=1))
    generate(str(tmp_path / "log"), GeneratorSpec(seed=5, consumer_offsets=None, topics=topics))
    seen: set = set()
    real = RecordBatch.record_columns

    def record_columns(batch, *args):
        out = real(batch, *args)
        seen.add("list" if not isinstance(out, RecordColumns) else "headers" if out.headers else "columns")
        return out

    monkeypatch.setattr(RecordBatch, "record_columns", record_columns)
    got = _records_view_rows(tmp_path / "log")
    assert seen == {"list", "headers", "columns"}
    key = lambda r: (r[2], r[3], r[4])  # noqa: E731
    assert sorted(got, key=key) == sorted(direct.record_rows(tmp_path / "log"), key=key)


def test_batch_columns_carry_dumps_names_and_values(small_log):
    """Every batch column Kafka has a name for is named as `kafkalog dump` (kafka-dump-log) names
    it and holds the same value; where dump prints a name, the column holds Kafka's number."""
    from kafkalog.codec.compression import Codec
    from kafkalog.operations.dump import dump_paths

    printed = {
        "timestampType": {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"},
        "compresscodec": {c.value: c.name.lower() for c in Codec},
    }
    kafkalogs = {"topic", "partition", "segmentBaseOffset", "baseTimestamp", "controlType", "coordinatorEpoch"}
    dumped = {(o["file"], o["position"]): o for o in dump_paths([str(small_log.path)]) if o["type"] == "batch"}
    plan = plan_scan(small_log.path)
    rows = pa.Table.from_batches([b for task in plan.tasks for b in read_task(plan.root, task, "batches")])
    assert rows.num_rows == len(dumped)
    for row in rows.to_pylist():
        segment = f"{small_log.path}/{row['topic']}-{row['partition']}/{row['segmentBaseOffset']:020d}.log"
        batch = dumped[segment, row["position"]]
        assert {name: printed.get(name, {}).get(v, v) for name, v in row.items() if name not in kafkalogs} == {
            name: batch[name] for name in row if name not in kafkalogs
        }


def test_record_sequences_add_the_offset_delta_and_wrap():
    base = pa.array([5, 2**31 - 2, 2**31 - 2, -1], pa.int64())
    offsets = pa.array([103, 11, 12, 40], pa.int64())
    batch_base = pa.array([100, 10, 10, 40], pa.int64())
    assert record_sequences(base, offsets, batch_base).to_pylist() == [8, 2**31 - 1, 0, -1]


def test_decoding_errors_name_the_file_and_the_byte(small_log, tmp_path):
    copy = tmp_path / "log"
    shutil.copytree(small_log.path / "customers-0", copy / "customers-0")
    segment = sorted((copy / "customers-0").glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    second = 12 + int.from_bytes(data[8:12], "big")  # the second batch starts after the first
    data[second + 70] ^= 0xFF  # a byte in its records
    segment.write_bytes(bytes(data))
    plan = plan_scan(copy)
    with pytest.raises(CrcMismatchError) as err:
        for task in plan.tasks:
            list(read_task(plan.root, task, "narrow"))
    assert err.value.file == str(segment) and err.value.position == second + 17
    assert f"{segment}, byte {second + 17}" in str(err.value)
    assert isinstance(err.value, KafkaLogError)


# -- inventory probes --------------------------------------------------------------------------------------


def test_list_segments_reads_only_index_tails_and_batch_headers(big_segment_log, small_log):
    for log_dir in (big_segment_log, small_log.path):
        stats = IOStats()
        segments = list_segments(log_dir, stats=stats)
        rows = {(r[0], r[1], r[2]): r for r in inventory_rows(segments)}
        truth = {}
        for topic, number, segment, _, batch in direct.walk(log_dir):
            first, last, ts = truth.get((topic, number, segment.base_offset), (None, None, -1))
            truth[(topic, number, segment.base_offset)] = (
                batch.base_offset if first is None else first,
                batch.last_offset,
                max(ts, batch.max_timestamp),
            )
        for seg in segments:
            topic, partition, base, _, path, first_offset, last_offset, max_ts_seen, *_ = rows[
                (seg.topic, seg.partition, seg.base_offset)
            ]
            if seg.size == 0:
                continue
            entry = seg.last_offset_index_entry  # read already: the row needed it
            tail_bytes = seg.size - (entry.position if entry else 0)
            assert stats.by_path.get(path, (0, 0))[1] <= tail_bytes + FIRST_HEADER_BYTES  # the tail and one header
            first, last, max_ts = truth[(topic, partition, base)]
            assert last_offset == last
            assert first_offset in (first, None)  # None: a legacy compressed wrapper comes first
            if max_ts >= 0:
                assert max_ts_seen == max_ts
    big = list_segments(big_segment_log, stats=(stats := IOStats()))[0]
    inventory_rows([big])
    assert big.size > 1_000_000 and stats.bytes_read(".log") < 8 * 1024  # a tail, not the body
    assert len(stats.files(".index")) == 1


def test_a_scan_tells_the_last_offset_of_each_segment_it_reads_to_its_end(big_segment_log, small_log, tmp_path):
    """What a purge takes its log ends from (spark/purge.Decider): the last offset the scan's units
    read, whole or split at index entries, is each segment's own; told to the segment
    (`scanned`), it ends the log without the tail being read again. An empty last segment whose
    base offset lies past the previous segment's end is read by no unit: its base offset ends the log."""
    for log_dir, max_bytes in ((big_segment_log, 1 << 30), (big_segment_log, 64 * 1024), (small_log.path, 1 << 30)):
        plan = plan_scan(log_dir, max_bytes_per_task=max_bytes)
        ends: dict = {}
        for task in plan.tasks:
            for _ in read_task(plan.root, task, "narrow", ends=ends):
                pass
        segments = list_segments(log_dir)
        assert ends == {(s.topic, s.partition, s.base_offset): s.last_offset() for s in segments if s.size}
    assert len(plan_scan(big_segment_log, max_bytes_per_task=64 * 1024).units) > 10  # the split case is split

    rolled = tmp_path / "log" / "rolled-0"  # 6-9 cleaned away, then the log rolled at 10
    rolled.mkdir(parents=True)
    (rolled / f"{0:020d}.log").write_bytes(build_batch([Record(o, 1_700_000_000_000, b"k", b"v") for o in range(6)]))
    (rolled / f"{10:020d}.log").write_bytes(b"")
    plan = plan_scan(tmp_path / "log")
    ends = {}
    for task in plan.tasks:
        for _ in read_task(plan.root, task, "narrow", ends=ends):
            pass
    assert ends == {("rolled", 0, 0): 5}
    first, last = list_segments(tmp_path / "log")
    first.scanned(ends["rolled", 0, 0])
    (rolled / f"{0:020d}.log").unlink()  # told: the first segment's tail is not read again
    assert (first.next_offset(), log_end_offset([first, last])) == (6, 10)


# -- data source pushdown ---------------------------------------------------------------------------------


def test_pushed_filters_become_scan_filters():
    from pyspark.sql.datasource import EqualTo, GreaterThan, In, IsNotNull, LessThanOrEqual

    from kafkalog.errors import ConfigError
    from kafkalog.scan.source_options import checked
    from kafkalog.spark.datasource import KafkaLogPushdownReader

    reader = KafkaLogPushdownReader(checked({"path": "/x", "topics": "a,b", "startingOffset": "3"}), "records")
    filters = [
        EqualTo(("topic",), "a"),
        In(("partition",), (1, 2)),
        GreaterThan(("offset",), 9),
        LessThanOrEqual(("offset",), 20),
        In(("offset",), (12, 15)),
        IsNotNull(("topic",)),
        EqualTo(("key",), b"k"),
    ]
    left = list(reader.pushFilters(filters))
    assert reader.flt == ScanFilter(frozenset({"a"}), frozenset({1, 2}), 12, 16)
    assert left == [filters[4], filters[5], filters[6]]  # IN on offset only prunes; the rest stays with Spark
    batches = KafkaLogPushdownReader({"path": "/x"}, "batches")
    assert list(batches.pushFilters([GreaterThan(("offset",), 9)])) and batches.flt == ScanFilter()
    with pytest.raises(ConfigError):
        KafkaLogPushdownReader(checked({"path": "/x", "startingOffset": "soon"}), "records")


def test_a_scan_refuses_a_partition_whose_segment_name_is_not_a_regular_file(big_segment_log, tmp_path):
    """A directory where a `.log` should be would leave its segment out of every scan and the data
    source: the listing refuses the partition, naming the entry, rather than answer for less."""
    import os

    from kafkalog.errors import LogDirError

    copy = tmp_path / "log"
    shutil.copytree(big_segment_log, copy)
    part = next(p for p in copy.iterdir() if p.is_dir() and (p / f"{0:020d}.log").exists())
    last = sorted(part.glob("*.log"))[-1]
    os.remove(last)
    last.mkdir()
    with pytest.raises(LogDirError, match="only regular files are segments") as err:
        list_segments(str(copy))
    assert err.value.file == str(last)


def test_a_plan_reads_the_task_bytes_knob_when_it_is_made(big_segment_log, monkeypatch):
    """tuning.MAX_BYTES_PER_TASK is read when a scan is planned, not bound when the module loads: a test
    or benchmark sets it for one run (issue 36)."""
    from kafkalog import tuning

    monkeypatch.setattr(tuning, "MAX_BYTES_PER_TASK", 1 << 30)
    whole = plan_scan(big_segment_log)
    monkeypatch.setattr(tuning, "MAX_BYTES_PER_TASK", 64 * 1024)
    split = plan_scan(big_segment_log)
    given = plan_scan(big_segment_log, max_bytes_per_task=64 * 1024)
    assert len(split.units) > len(whole.units) == 1 and split.units == given.units


@settings(deadline=None)
@given(
    st.lists(st.integers(0, 5), max_size=30),
    st.one_of(st.none(), st.integers(0, 60)),
    st.one_of(st.none(), st.integers(0, 60)),
    st.booleans(),
)
def test_an_offset_range_is_a_slice_where_offsets_rise_else_a_filter(steps, start, end, shuffle):
    """`_filtered` keeps what the offset mask keeps: a slice of the rows (no copy) where the offsets
    rise along them, the mask's filter where they do not."""
    from kafkalog.scan.reader import _filtered, _offset_mask

    offsets = list(itertools.accumulate(steps))
    if shuffle:
        offsets.reverse()
    batch = pa.RecordBatch.from_arrays([pa.array(offsets, pa.int64())], names=["offset"])
    flt = ScanFilter.of(start_offset=start, end_offset=end)
    expected = batch if not flt.has_offsets else batch.filter(_offset_mask(batch, "records", flt))
    assert _filtered(batch, "records", flt).to_pylist() == expected.to_pylist()
