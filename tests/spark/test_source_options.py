"""The options of `format("kafkalog")` below Spark: names, values, and what they read from a log dir
(the data source's reader run directly: options, plan and read, without a SparkSession)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from kafkalog.errors import ConfigError
from kafkalog.scan.source_options import checked
from kafkalog.spark.datasource import KafkaLogReader, schema_of


def read(log, view="records", **options) -> pa.Table:
    """What format("kafkalog") reads with these options, through the reader Spark would call."""
    opts = checked({"path": str(log.path), "view": view, **{k: str(v) for k, v in options.items()}})
    reader = KafkaLogReader(opts, view)
    batches = [b for partition in reader.partitions() for b in reader.read(partition)]
    return pa.Table.from_batches(batches) if batches else pa.table({"topic": pa.array([], pa.string())})


def rows(table: pa.Table, *columns: str) -> list[tuple]:
    return sorted(zip(*(table.column(c).to_pylist() for c in columns)))


@pytest.fixture(scope="module")
def everything(small_log) -> pa.Table:
    return read(small_log)


def test_option_names_are_case_insensitive_and_an_unknown_one_names_the_closest():
    assert checked({"STARTINGOFFSET": "5", "path": "/x"}) == {"startingoffset": "5", "path": "/x"}
    with pytest.raises(ConfigError, match=r"unknown option 'startingOfset'.*did you mean 'startingOffset'\?"):
        checked({"startingOfset": "5"})
    with pytest.raises(ConfigError, match=r"unknown option 'subscrib'.*did you mean 'subscribe'\?"):
        checked({"subscrib": "orders"})
    with pytest.raises(ConfigError, match=r"unknown option 'nonsense'"):
        checked({"nonsense": "1"})
    with pytest.raises(ConfigError, match="given twice"):
        checked({"topics": "a", "TOPICS": "b"})
    # a misspelt kafka.isolation.level is refused, not ignored as a Kafka client's setting would be
    for name in ("kafka.isolation.levle", "kafka.isolationLevel", "kafka.isolation_level"):
        with pytest.raises(ConfigError, match=rf"unknown option '{name}'.*did you mean 'kafka.isolation.level'\?"):
            checked({name: "read_committed"})


def test_options_that_mean_nothing_offline_are_accepted_with_a_warning():
    with pytest.warns(UserWarning, match="kafka.bootstrap.servers is ignored: no Kafka client reads a log dir"):
        checked({"kafka.bootstrap.servers": "broker:9092"})
    with pytest.warns(UserWarning, match="maxOffsetsPerTrigger is ignored: a micro-batch of kafkalog.s stream"):
        checked({"maxOffsetsPerTrigger": "100"})


def test_topics_subscribe_pattern_and_assign_select_what_spark_selects(small_log, everything):
    pairs = rows(everything, "topic", "partition")
    assert set(rows(read(small_log, subscribe="orders,clicks"), "topic", "partition")) == {
        p for p in pairs if p[0] in ("orders", "clicks")
    }
    assert set(rows(read(small_log, subscribePattern="pay.*"), "topic", "partition")) == {
        p for p in pairs if p[0] == "payments"
    }
    assigned = read(small_log, assign=json.dumps({"orders": [1], "payments": [0]}))
    assert set(rows(assigned, "topic", "partition")) == {("orders", 1), ("payments", 0)}
    assert rows(assigned, "topic", "partition", "offset") == [
        r for r in rows(everything, "topic", "partition", "offset") if r[:2] in (("orders", 1), ("payments", 0))
    ]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"topics": "nosuch"}, r"option topics names topic 'nosuch', which the log dir does not hold"),
        ({"subscribe": " , "}, r"option subscribe names no topic"),
        ({"partitions": ""}, r"option partitions names no partition"),
        ({"subscribe": "ordres"}, r"option subscribe names topic 'ordres'.*did you mean 'orders'\?"),
        ({"assign": '{"orders": [7]}'}, r"option assign names partition orders-7, which the log dir does not hold"),
        ({"subscribePattern": "nosuch.*"}, r"matches no topic of the log dir \(__consumer_offsets, clicks"),
        ({"topics": "orders", "partitions": "5"}, r"option partitions names partition 5, which no selected topic"),
        ({"subscribe": "orders", "topics": "orders"}, r"options topics and subscribe both give the topics to read"),
        ({"assign": '{"orders": [0]}', "partitions": "0"}, r"options assign and partitions both give partitions"),
        ({"startingOffsets": "latest"}, r"startingOffsets=latest is not allowed in a batch read"),
        ({"endingOffsets": '{"orders": {"0": -2, "1": -1}}'}, r"endingOffsets gives -2 \(earliest\): not allowed"),
        ({"startingOffsets": "{oops"}, r'startingOffsets must be JSON \{"topic": \{"0": value\}\}'),
        ({"subscribe": "orders", "startingOffsets": '{"orders": {"0": 3}}'}, r"gives no value for partition orders-1"),
        ({"startingOffset": "3", "startingOffsets": "earliest"}, r"startingOffset and startingOffsets both give"),
        ({"subscribe": "orders", "startingOffsets": '{"orders": {"0": -3, "1": 0}}'}, r"negative offset other than"),
        ({"startingTimestamp": ""}, r"startingTimestamp must be a timestamp in epoch milliseconds"),
        # kafkalog's startingOffset and Spark's startingOffsets are one letter apart: a value of the
        # other names it
        ({"startingOffset": "earliest"}, r"an integer, not 'earliest'; did you mean startingOffsets=earliest\?"),
        ({"endingOffset": " latest"}, r"endingOffset must be an integer.*did you mean endingOffsets=latest\?"),
        ({"startingOffsets": "23"}, r"must be earliest, latest or JSON .*did you mean startingOffset=23 "),
        ({"failOnDataLoss": "true"}, r"failOnDataLoss=true cannot apply"),
        ({"kafka.isolation.level": "serializable"}, r"must be read_uncommitted or read_committed"),
    ],
)
def test_options_that_cannot_be_met_are_errors(small_log, options, message):
    with pytest.raises(ConfigError, match=message):
        read(small_log, **options)


def test_starting_and_ending_offsets_per_partition(small_log, everything):
    table = read(
        small_log,
        subscribe="orders",
        startingOffsets=json.dumps({"orders": {"0": 10, "1": -2}}),
        endingOffsets=json.dumps({"orders": {"0": 20, "1": 5}}),
        failOnDataLoss="false",
    )
    assert rows(table, "partition", "offset") == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(5)]
    # kafkalog's own options keep working: one range for every selected partition
    table = read(small_log, topics="orders", startingOffset=100, endingOffset=102)
    assert rows(table, "partition", "offset") == [(0, 100), (0, 101), (1, 100), (1, 101)]


def test_timestamps_resolve_as_offsets_for_times_through_the_time_index(small_log, everything):
    orders = {
        (p, o): int(ts.timestamp() * 1000)
        for t, p, o, ts in rows(everything, "topic", "partition", "offset", "timestamp")
        if t == "orders"
    }

    def first_at_or_after(partition: int, at: int) -> int:
        """Brute force offsetsForTimes: the first offset whose record's timestamp is at least `at`."""
        return min(o for (p, o), ts in orders.items() if p == partition and ts >= at)

    stamps = sorted(orders.values())
    for at in (stamps[len(stamps) // 3], stamps[len(stamps) // 2] + 1):
        starts = {p: first_at_or_after(p, at) for p in (0, 1)}
        table = read(small_log, subscribe="orders", startingTimestamp=at)
        assert rows(table, "partition", "offset") == sorted(k for k in orders if k[1] >= starts[k[0]])
        table = read(small_log, subscribe="orders", endingTimestamp=at)
        assert rows(table, "partition", "offset") == sorted(k for k in orders if k[1] < starts[k[0]])
    by_partition = {"orders": {"0": stamps[10], "1": stamps[-1] + 1}}
    with pytest.raises(ConfigError, match=r"no record of orders-1 has a timestamp at or after"):
        read(small_log, subscribe="orders", startingOffsetsByTimestamp=json.dumps(by_partition))
    table = read(
        small_log,
        subscribe="orders",
        startingOffsetsByTimestamp=json.dumps(by_partition),
        startingOffsetsByTimestampStrategy="latest",
    )
    assert set(table.column("partition").to_pylist()) == {0}  # orders-1 starts at its end


def committed_view(batches: pa.Table, records: pa.Table, topic: str) -> list[tuple]:
    """What a read_committed consumer reads, worked out from the batches alone (not from .txnindex):
    a transactional batch belongs to the transaction its producer's next marker ends; an abort
    drops it, and a transaction with no marker yet stops the read at its first offset."""
    aborted, stop = set(), {}
    for partition in sorted(set(batches.column("partition").to_pylist())):
        pending: dict[int, list[tuple[int, int]]] = {}
        for b in sorted(
            (r for r in batches.to_pylist() if r["topic"] == topic and r["partition"] == partition),
            key=lambda r: r["baseOffset"],
        ):
            if b["isControl"]:
                spans = pending.pop(b["producerId"], [])
                if b["controlType"] == 0:
                    aborted |= {(partition, b["producerId"], low, high) for low, high in spans}
            elif b["isTransactional"]:
                pending.setdefault(b["producerId"], []).append((b["baseOffset"], b["lastOffset"]))
        stop[partition] = min((spans[0][0] for spans in pending.values()), default=None)
    return [
        (p, o)
        for t, p, o, pid, control in rows(records, "topic", "partition", "offset", "producerId", "isControl")
        if t == topic
        and not control
        and not any((p, pid) == (q, a) and low <= o <= high for q, a, low, high in aborted)
        and (stop[p] is None or o < stop[p])
    ]


def test_read_committed_leaves_out_aborted_and_control_records(small_log, everything):
    batches = read(small_log, view="batches", topics="payments")
    expected = committed_view(batches, everything, "payments")
    committed = read(small_log, subscribe="payments", **{"kafka.isolation.level": "read_committed"})
    assert rows(committed, "partition", "offset") == sorted(expected)
    uncommitted = [r for r in rows(everything, "topic", "partition", "offset") if r[0] == "payments"]
    assert len(expected) < len(uncommitted)  # the fixture has aborted transactions and markers


def test_include_headers_false_has_no_headers_column(small_log):
    assert "headers" in schema_of(checked({})).fieldNames()
    assert "headers" not in schema_of(checked({"includeHeaders": "false"})).fieldNames()
    table = read(small_log, topics="orders", includeHeaders="false")
    assert table.num_rows and "headers" not in table.column_names
    with pytest.raises(ConfigError, match="includeHeaders applies to the records view"):
        schema_of(checked({"view": "batches", "includeHeaders": "true"}))


def copy_growing(source, target, topic_partition: str, segments: int):
    """`source` with only the first `segments` segments of `topic_partition` (the other partitions whole)."""
    import shutil

    shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns(topic_partition))
    part = target / topic_partition
    part.mkdir(exist_ok=True)
    bases = sorted({f.name.split(".")[0] for f in (source / topic_partition).iterdir() if f.name[0].isdigit()})
    for f in (source / topic_partition).iterdir():
        if not f.name[0].isdigit() or f.name.split(".")[0] in bases[:segments]:
            shutil.copy2(f, part / f.name)


def test_a_stream_reads_what_a_growing_log_dir_adds_between_kafka_offsets(small_log, everything, tmp_path):
    from kafkalog.spark.datasource import KafkaLogStreamReader

    log = tmp_path / "log"
    copy_growing(small_log.path, log, "orders-0", 2)
    stream = KafkaLogStreamReader(checked({"path": str(log), "subscribe": "orders"}), "records")

    def micro_batch(start, end) -> list[tuple]:
        batches = [b for p in stream.partitions(start, end) for b in stream.read(p)]
        return rows(pa.Table.from_batches(batches), "partition", "offset") if batches else []

    start = stream.initialOffset()
    assert start == {"orders": {"0": 0, "1": 0}}
    first = stream.latestOffset(start, None)
    seen = micro_batch(start, first)
    assert stream.partitions(first, first) == []
    copy_growing(small_log.path, log, "orders-0", 99)  # the rest of orders-0 arrives
    second = stream.latestOffset(first, None)
    assert second["orders"]["1"] == first["orders"]["1"] and first["orders"]["0"] < second["orders"]["0"]
    added = micro_batch(first, second)
    assert added and min(o for _, o in added) == first["orders"]["0"]
    assert sorted(seen + added) == [r[1:] for r in rows(everything, "topic", "partition", "offset") if r[0] == "orders"]
    with pytest.raises(ConfigError, match="endingOffsets is not allowed in a streaming read"):
        KafkaLogStreamReader(checked({"path": str(log), "endingOffsets": "latest"}), "records")
    latest = KafkaLogStreamReader(
        checked({"path": str(log), "subscribe": "orders", "startingOffsets": "latest"}), "records"
    )
    assert latest.initialOffset() == second


def test_a_read_committed_stream_reads_what_a_read_committed_batch_reads(small_log):
    from kafkalog.spark.datasource import KafkaLogStreamReader

    options = {"subscribe": "payments", "kafka.isolation.level": "read_committed"}
    stream = KafkaLogStreamReader(checked({"path": str(small_log.path), **options}), "records")
    start = stream.initialOffset()
    end = stream.latestOffset(start, None)
    batches = [b for p in stream.partitions(start, end) for b in stream.read(p)]
    assert rows(pa.Table.from_batches(batches), "partition", "offset") == rows(
        read(small_log, **options), "partition", "offset"
    )
