"""The export's logic below Spark: what a read_committed consumer reads of each partition (the
executors' filter run here in-process, against the independent model of tests/export_scenario.py),
the as-of points (offsets, Spark's endingOffsets JSON, offsetsForTimes), the last stable offset."""

from __future__ import annotations

import pyarrow as pa
import pytest

from kafkalog import tuning
from kafkalog.errors import ConfigError, LogDirError
from kafkalog.operations.export import as_of_offsets, clamped_offsets, partition_ranges
from kafkalog.rules.compaction_strategy import OFFSET
from kafkalog.scan.reader import read_task
from kafkalog.scan.scan_plan import ScanFilter, plan_scan
from kafkalog.spark.latest_ranges import chosen_records, cut_ranges, range_winners
from kafkalog.spark.topic_table import committed_batches, last_per_key
from kafkalog.storage.logdir import LogDir
from kafkalog.storage.offsets_for_times import offset_for_timestamp
from tests.export_scenario import T0, TOPIC, consumer_reads, latest, write_topic


@pytest.fixture(scope="module")
def topic(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("export"))
    records, fates = write_topic(root)
    return root, records, fates


def read_committed(root: str, ranges) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """The executors' filter over every work unit, one task per unit, here in-process."""
    wanted = {r.partition: r for r in ranges}
    flt = ScanFilter.of(TOPIC)
    plan = plan_scan(root, flt, max_bytes_per_task=512)  # many small tasks: trackers start mid-partition
    assert len(plan.tasks) > 4
    rows = []
    for task in plan.tasks:
        for batch in committed_batches(read_task(root, task, "records", flt), wanted):
            rows += zip(
                batch["partition"].to_pylist(),
                batch["offset"].to_pylist(),
                batch["key"].to_pylist(),
                batch["value"].to_pylist(),
            )
    return sorted(rows)


def expected(read) -> list:
    return [(r.partition, r.offset, r.key, r.value) for r in read]


@pytest.mark.parametrize("combine_rows", [1, 5, 1 << 18])
def test_one_task_keeps_each_keys_last_record_as_a_consumer_would(topic, monkeypatch, combine_rows):
    """The latest table's one-task path: both partitions read by one task, in many small units, the
    records combined a few rows at a time or all at once."""
    root, records, fates = topic
    monkeypatch.setattr(tuning, "COMBINE_ROWS", combine_rows)
    wanted = {r.partition: r for r in partition_ranges(root, TOPIC)}
    flt = ScanFilter.of(TOPIC)
    units = plan_scan(root, flt, max_bytes_per_task=512).units
    assert len({u.partition for u in units}) == 2 and len(units) > 4
    rows: dict = {}
    for batch in last_per_key(committed_batches(read_task(root, units, "records", flt), wanted)):
        for p, key, offset, value in zip(*(batch[c].to_pylist() for c in ("partition", "key", "offset", "value"))):
            assert (p, key) not in rows and key is not None
            rows[p, key] = (offset, value)
    read = consumer_reads(records, fates)
    tombstoned = {(r.partition, r.key): (r.offset, None) for r in read if r.key is not None}  # the last wins
    assert rows == {**tombstoned, **{k: (r.offset, r.value) for k, r in latest(read).items()}}
    assert any(value is None for _, value in rows.values())  # tombstones stay: an incremental run deletes by them


@pytest.mark.parametrize("range_bytes, held", [(256, 1 << 20), (2048, 3)])
def test_ranges_keep_each_keys_last_record_as_a_consumer_would(topic, range_bytes, held):
    """The latest table's range path below Spark: each partition cut into ranges of about
    `range_bytes` (transactions cut across them), step 1 per range (its map handed on every few
    keys where `held` is small), the merge by key (Spark's max of (rank, version, offset, range),
    here a dict), step 3 per range reading it again."""
    root, model_records, fates = topic
    wanted = {r.partition: r for r in partition_ranges(root, TOPIC)}
    flt = ScanFilter.of(TOPIC)
    ranges = []
    for p in wanted:
        ranges += cut_ranges(LogDir.open(root).partition(TOPIC, p).segments, flt, range_bytes)
    assert len(ranges) > (8 if range_bytes == 256 else 2)

    def committed(units):
        return committed_batches(read_task(root, units, "records", flt), wanted)

    best: dict = {}
    repeated = 0  # rows of a key a range hands on more than once: only when its map fills
    for i, units in enumerate(ranges):
        mine = [row for b in range_winners(committed(units), i, OFFSET, held, 5) for row in b.to_pylist()]
        repeated += len(mine) - len({row["key"] for row in mine})
        for row in mine:
            order = (row["rank"], row["version"], row["offset"], row["range"])
            best[row["partition"], row["key"]] = max(best.get((row["partition"], row["key"]), order), order)
    chosen = pa.RecordBatch.from_pylist(
        [{"range": r, "offset": o} for _, _, o, r in best.values()]
        + [{"range": i, "offset": None} for i in range(len(ranges))],
        pa.schema([("range", pa.int32()), ("offset", pa.int64())]),
    )
    assert (repeated > 0) == (held < 100)
    rows = {}
    for batch in chosen_records([chosen], lambda i: committed(ranges[i])):
        for p, key, offset, value in zip(*(batch[c].to_pylist() for c in ("partition", "key", "offset", "value"))):
            assert (p, key) not in rows
            rows[p, key] = (offset, value)
    read = consumer_reads(model_records, fates)
    tombstoned = {(r.partition, r.key): (r.offset, None) for r in read if r.key is not None}  # the last wins
    assert rows == {**tombstoned, **{k: (r.offset, r.value) for k, r in latest(read).items()}}


def test_read_committed_matches_the_model(topic):
    root, records, fates = topic
    ranges = partition_ranges(root, TOPIC)
    assert any("abort" == f for f in fates.values()) and len(read_committed(root, ranges)) > 100
    assert read_committed(root, ranges) == expected(consumer_reads(records, fates))


def test_the_open_transaction_holds_the_last_stable_offset(topic):
    root, records, fates = topic
    held = min(r.offset for r in records if r.partition == 0 and r.txn and r.txn[0] == 9)
    ends = {r.partition: r.end for r in partition_ranges(root, TOPIC)}
    assert ends[0] == held  # records after it, plain ones too, are not yet visible
    assert any(r.partition == 0 and r.offset > held and r.txn is None for r in records)
    assert ends[1] == LogDir.open(root).partition(TOPIC, 1).segments[-1].last_offset() + 1


@pytest.mark.parametrize("as_of", [40, {"0": 17, "1": -1}, '{"orders": {"0": 60, "1": 5}}'])
def test_as_of_offset_is_exclusive(topic, as_of):
    root, records, fates = topic
    ranges = partition_ranges(root, TOPIC, as_of_offset=as_of)
    cut = as_of_offsets(as_of, [0, 1], TOPIC)
    model = consumer_reads(records, fates, as_of={p: o for p, o in cut.items() if o >= 0})
    assert read_committed(root, ranges) == expected(model)
    assert max(r.offset for r in model if r.partition == 0) < (cut[0] if cut[0] >= 0 else 1 << 62)


def test_as_of_offsets_are_refused_when_incomplete_or_unknown():
    with pytest.raises(ConfigError, match=r"leave out partitions \[1\]"):
        as_of_offsets({"0": 5}, [0, 1], TOPIC)
    with pytest.raises(ConfigError, match=r"partitions \[7\]"):
        as_of_offsets({"0": 5, "1": 5, "7": 1}, [0, 1], TOPIC)
    with pytest.raises(ConfigError, match="expected an offset or a JSON object"):
        as_of_offsets("yesterday", [0], TOPIC)


def test_offset_for_timestamp_is_the_first_record_at_or_past_it(topic):
    root, records, _ = topic
    part = LogDir.open(root).partition(TOPIC, 1)
    mine = sorted((r for r in records if r.partition == 1), key=lambda r: r.offset)
    for target in (T0, mine[37].timestamp, mine[37].timestamp - 1, mine[-1].timestamp):
        want = min(r.offset for r in mine if r.timestamp >= target)
        # control markers carry timestamps too: the first record of any kind at or past the target
        assert offset_for_timestamp(part.segments, target) <= want
        assert offset_for_timestamp(part.segments, target) >= max(
            (r.offset for r in mine if r.timestamp < target), default=-1
        )
    assert offset_for_timestamp(part.segments, mine[-1].timestamp + 10_000) is None


def test_as_of_time_cuts_where_offsets_for_times_answers(topic):
    root, records, fates = topic
    t = T0 + 1000 * 50  # step 50 of partition 0
    ranges = partition_ranges(root, TOPIC, as_of_time=t)
    cuts = {p: offset_for_timestamp(LogDir.open(root).partition(TOPIC, p).segments, t) for p in (0, 1)}
    assert cuts[1] == 0  # every record of partition 1 is later
    model = consumer_reads(records, fates, as_of={p: o for p, o in cuts.items() if o is not None})
    assert read_committed(root, ranges) == expected(model)
    assert all(r.timestamp < t for r in model)


def test_an_unknown_topic_and_both_as_of_points_are_refused(topic):
    root, _, _ = topic
    with pytest.raises(LogDirError, match="no partition of topic 'ordrs'.*; did you mean 'orders'"):
        partition_ranges(root, "ordrs")
    with pytest.raises(ConfigError, match="not both"):
        partition_ranges(root, TOPIC, as_of_offset=3, as_of_time=T0)


def test_leftovers_of_a_finished_swap_are_read_past_and_a_half_done_swap_is_refused(topic, tmp_path):
    import shutil

    from kafkalog.errors import LogDirError

    root = tmp_path / "copy"
    shutil.copytree(topic[0], root)
    part = root / f"{TOPIC}-1"
    (part / "00000000000000000000.log.deleted").write_bytes(b"old segment")  # as a broker's cleaner leaves it
    assert partition_ranges(str(root), TOPIC) == partition_ranges(topic[0], TOPIC)
    (part / "00000000000000000000.log.swap").write_bytes(b"")
    with pytest.raises(LogDirError, match="interrupted rewrite"):
        partition_ranges(str(root), TOPIC)


def test_a_table_no_export_wrote_is_never_overwritten(topic, tmp_path):
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from kafkalog.operations.export import export

    foreign = str(tmp_path / "theirs")
    write_deltalake(foreign, pa.table({"id": [1, 2]}))
    for incremental in (False, True):
        with pytest.raises(ConfigError, match="no kafkalog export wrote"):
            export(None, topic[0], TOPIC, foreign, incremental=incremental)  # refused before any Spark work
    assert DeltaTable(foreign).version() == 0


def test_the_command_refuses_an_unknown_topic_before_spark_starts(topic):
    import subprocess
    import sys
    import time

    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "kafkalog", "export", topic[0], "--topic", "nope", "--output", "/tmp/never"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and time.perf_counter() - start < 5, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line == f"kafkalog export: {topic[0]}: no partition of topic 'nope' in this log directory"


@pytest.mark.parametrize(
    "options, message",
    [
        ({"value_format": "avro3"}, "value format 'avro3'"),
        ({"envelope": "debezium"}, "give --value-format too"),
        ({"key_format": "string", "key_schema": "k string"}, "a key schema is for json"),
        ({"envelope": "maxwell", "value_format": "json"}, "envelope 'maxwell'"),
        ({"on_decode_error": "dead-letter"}, "with nothing decoded"),
        ({"value_format": "json", "dead_letter": "/tmp/dl"}, "for --on-decode-error dead-letter"),
        ({"value_format": "json", "schema_dir": "/tmp/s"}, "--schema-dir is for avro, protobuf or json-schema"),
        ({"value_format": "avro", "schema_dir": "/tmp/s", "schemas_topic": "_s"}, "not several"),
    ],
)
def test_decoding_options_that_would_do_nothing_or_cannot_be_are_refused(options, message):
    from kafkalog.operations.decoding import Decoding

    with pytest.raises(ConfigError, match=message):
        Decoding(**options)


def test_confluent_formats_find_their_schemas_or_say_what_to_do(topic, tmp_path):
    from kafkalog.operations.decoding import Decoding, schema_registry

    root = topic[0]
    assert schema_registry(Decoding(value_format="json"), root) is None
    with pytest.raises(
        ConfigError, match="--value-format avro need the writers' schemas.*no '_schemas' topic.*--schema-dir"
    ):
        schema_registry(Decoding(value_format="avro"), root)
    with pytest.raises(ConfigError, match="no 'registry-log' topic"):
        schema_registry(Decoding(key_format="json-schema", schemas_topic="registry-log"), root)
    (tmp_path / "7.avsc").write_text('{"type": "string"}')
    registry = schema_registry(Decoding(value_format="avro", schema_dir=str(tmp_path)), root)
    assert registry.schema(7).schema_type == "AVRO"
    assert (
        Decoding(value_format="json", on_decode_error="dead-letter").dead_letter_path("/t/out/")
        == "/t/out_dead_letters"
    )


def test_the_command_refuses_avro_without_schemas_before_spark_starts(topic):
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kafkalog",
            "export",
            topic[0],
            "--topic",
            TOPIC,
            "--output",
            "/tmp/never",
            "--value-format",
            "avro",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "give --schema-dir DIR" in done.stderr, done.stderr


@pytest.mark.parametrize("fmt, missing", [("avro", "fastavro"), ("protobuf", "grpc_tools")])
def test_a_format_without_its_extra_says_which_to_install(monkeypatch, fmt, missing):
    import importlib.util

    from kafkalog.operations.decoding import Decoding

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == missing else find_spec(name))
    with pytest.raises(
        ConfigError,
        match=rf"decoding {fmt} keys or values needs the {missing} package.*: pip install 'kafkalog\[formats\]'",
    ):
        Decoding(value_format=fmt)
    Decoding(value_format="json-schema")  # read as JSON: nothing to install


def test_an_as_of_offset_past_the_end_is_said(topic):
    root, _, _ = topic
    ranges = partition_ranges(root, TOPIC, as_of_offset={0: 10**9, 1: 5})
    end = partition_ranges(root, TOPIC)[0].end  # partition 0's last stable offset
    with pytest.warns(UserWarning, match=f"as-of offset {10**9} of {TOPIC}-0 lies past its end: read up to {end}"):
        assert clamped_offsets({0: 10**9, 1: 5}, ranges, TOPIC) == {0: (10**9, end)}
    assert clamped_offsets(None, ranges, TOPIC) == {}


# -- what export refuses before Spark starts: exit 2, one line naming the path, nothing changed ---------


def tree(root) -> dict:
    from pathlib import Path

    return {str(p): (p.read_bytes() if p.is_file() else None) for p in sorted(Path(root).rglob("*"))}


@pytest.fixture
def no_spark(monkeypatch):
    from kafkalog.spark import session

    def started(**_):
        raise AssertionError("Spark started")

    monkeypatch.setattr(session, "start_session", started)
    monkeypatch.setattr(session, "local_session", started)


def export_table(path: str, fmt: str, note: dict | None) -> None:
    """A table as an export writes it, its commit carrying `note` (None: a table no export wrote)."""
    import json

    import pyarrow as pa

    from kafkalog.storage import tables

    text = None if note is None else json.dumps({tables.NOTE_KEY: note} if fmt == "delta" else note)
    tables.write_table(path, pa.table({"key": [b"k"], "value": [b"v"]}), fmt, note=text)


@pytest.mark.parametrize(
    "case",
    [
        "output in a partition dir",
        "output in the log dir",
        "output is the log dir",
        "output holds the log dir",
        "a table is there",
        "an iceberg table is there",
        "a table no export wrote, overwritten",
        "incremental into a parquet dir",
        "parquet into an existing dir",
        "dead letters in the log dir",
        "a missing topic",
        "a killed run's staging directory",
        "a killed run's moved-aside directory",
    ],
)
def test_export_refuses_before_spark_starts(topic, tmp_path, no_spark, capsys, case):
    import shutil

    from kafkalog.cli import main

    logs = tmp_path / "logs"
    shutil.copytree(topic[0], logs)
    note = {"topic": TOPIC, "mode": "latest", "endOffsets": {"0": 1, "1": 1}}
    out, options = tmp_path / "out", []
    if case == "output in a partition dir":
        out = logs / f"{TOPIC}-0" / "tbl"
    elif case == "output in the log dir":
        out = logs / "orders-export"
    elif case == "output is the log dir":
        out = logs
    elif case == "output holds the log dir":
        out = tmp_path
    elif case == "a table is there":
        export_table(str(out), "delta", note)
    elif case == "an iceberg table is there":
        export_table(str(out), "iceberg", note)
        options = ["--format", "iceberg"]
    elif case == "a table no export wrote, overwritten":
        export_table(str(out), "delta", None)
        options = ["--overwrite"]
    elif case == "incremental into a parquet dir":
        out.mkdir()
        (out / "part-0.parquet").write_bytes(b"PAR1")
        options = ["--incremental"]
    elif case == "parquet into an existing dir":
        out.mkdir()
        (out / "part-0.parquet").write_bytes(b"PAR1")
        options = ["--format", "parquet"]
    elif case == "dead letters in the log dir":
        options = ["--value-format", "string", "--on-decode-error", "dead-letter", "--dead-letter", str(logs / "dead")]
    elif case == "a killed run's staging directory":  # a kill -9 while a new table was written
        (tmp_path / "out.kafkalog-incomplete" / "_delta_log").mkdir(parents=True)
    elif case == "a killed run's moved-aside directory":  # a kill -9 while a Parquet directory was replaced
        (tmp_path / "out.kafkalog-replaced").mkdir()
        options = ["--format", "parquet", "--overwrite"]
    before = tree(tmp_path)
    topic_name = "ordrs" if case == "a missing topic" else TOPIC
    assert main(["export", str(logs), "--topic", topic_name, "--output", str(out), *options]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    named = {
        "a missing topic": str(logs),
        "dead letters in the log dir": str(logs / "dead"),
        "a killed run's staging directory": f"{out}.kafkalog-incomplete",
        "a killed run's moved-aside directory": f"{out}.kafkalog-replaced",
    }.get(case, str(out))
    assert named in err
    expect = {
        "a table is there": "--overwrite replaces it",
        "an iceberg table is there": "--overwrite replaces it",
        "a table no export wrote, overwritten": "no kafkalog export wrote",
        "incremental into a parquet dir": "holds files but no delta table",
        "parquet into an existing dir": "--overwrite replaces it",
        "a missing topic": "did you mean 'orders'",
        "output holds the log dir": "holds the input log directory",
        "output is the log dir": "is the input log directory",
        "a killed run's staging directory": "an earlier run that did not finish left this staging directory",
        "a killed run's moved-aside directory": "rename it back to",
    }.get(case, "inside the input log directory")
    assert expect in err
    assert tree(tmp_path) == before


def test_a_failed_writes_cause_is_one_line():
    from kafkalog.operations.export import _cause

    spark_text = (
        "An error occurred while calling o91.save.\n: org.apache.spark.SparkException: Job aborted due to stage "
        "failure: Task 0 in stage 3.0 failed 1 times\n\tat org.apache.spark.scheduler.DAGScheduler.fail(x.scala:1)\n"
        "Caused by: org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
        "  File \"worker.py\", line 1, in main\nPermissionError: [Errno 13] Permission denied: '/logs/o-0/0.log'\n"
        "\n\tat org.apache.spark.api.python.BasePythonRunner.read(x.scala:2)\n"
    )
    assert _cause(RuntimeError(spark_text)) == "PermissionError: [Errno 13] Permission denied: '/logs/o-0/0.log'"
    assert _cause(OSError("java.io.IOException: No space left on device")) == "IOException: No space left on device"
    assert _cause(ValueError("two\nlines")) == "ValueError: two"
