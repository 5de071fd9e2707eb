"""The export on Spark, against the independent model of tests/export_scenario.py: the latest value
per (partition, key) and the changelog as of now, an offset and a time; Delta (delta-spark, and the
deltalake package) and Iceberg (pyiceberg) tables kept up to date with --incremental, a run
interrupted inside its commit, and reruns that commit nothing."""

from __future__ import annotations

import json
import warnings

import pyarrow as pa
import pytest

from kafkalog.operations.export import export, topic_table
from kafkalog.spark.tables import read_table
from kafkalog.storage.logdir import LogDir
from kafkalog.storage.offsets_for_times import offset_for_timestamp
from tests.export_scenario import T0, TOPIC, consumer_reads, latest, write_topic


@pytest.fixture(scope="module")
def topic(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("export"))
    records, fates = write_topic(root)
    return root, records, fates


def rows_of(df) -> dict:
    return {(r["partition"], bytes(r["key"])): (r["offset"], bytes(r["value"])) for r in df.collect()}


def model_rows(read) -> dict:
    return {k: (r.offset, r.value) for k, r in latest(read).items()}


def test_latest_changelog_and_as_of(spark, topic):
    root, records, fates = topic
    table = topic_table(spark, root, TOPIC)
    assert table.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    assert rows_of(table) == model_rows(consumer_reads(records, fates))

    changelog = topic_table(spark, root, TOPIC, mode="changelog").select("partition", "offset").collect()
    assert [tuple(r) for r in changelog] == [(r.partition, r.offset) for r in consumer_reads(records, fates)]

    as_of = {0: 55, 1: 30}
    assert rows_of(topic_table(spark, root, TOPIC, as_of_offset=json.dumps(as_of))) == model_rows(
        consumer_reads(records, fates, as_of=as_of)
    )
    t = T0 + 1000 * 40
    cuts = {p: offset_for_timestamp(LogDir.open(root).partition(TOPIC, p).segments, t) for p in (0, 1)}
    assert rows_of(topic_table(spark, root, TOPIC, as_of_time=t)) == model_rows(
        consumer_reads(records, fates, as_of={p: c for p, c in cuts.items() if c is not None})
    )

    decoded = topic_table(
        spark, root, TOPIC, key_format="string", value_format="json", value_schema="n int, tag string"
    )
    got = {(r["partition"], r["key"]): r["value"]["n"] for r in decoded.collect()}
    assert got == {
        (p, k.decode()): json.loads(v)["n"] for (p, k), (_, v) in model_rows(consumer_reads(records, fates)).items()
    }


def delta_rows(path: str) -> dict:
    from deltalake import DeltaTable

    t = pa.table(DeltaTable(path).scan()).to_pylist()  # scan(): to_pyarrow_table() refuses deletion vectors
    return {(r["partition"], r["key"]): (r["offset"], r["value"]) for r in t}


def delta_version(path: str) -> int:
    from deltalake import DeltaTable

    return DeltaTable(path).version()


def test_latest_partitions_read_whole_by_a_task_or_in_ranges(spark, topic, monkeypatch):
    """Each partition's latest records are decided in the task that reads it whole, or, past
    `tuning.LATEST_TASK_RECORDS` offsets, by the range path: either way, and both in one plan, the
    same table."""
    from kafkalog import tuning
    from kafkalog.operations.export import partition_ranges

    root, records, fates = topic
    want = model_rows(consumer_reads(records, fates))
    spans = sorted(r.end - r.start for r in partition_ranges(root, TOPIC))
    assert spans[0] < spans[1]
    for cap, ranges in ((spans[1], False), (spans[0], True), (3, True)):  # all, one, no partition read whole
        monkeypatch.setattr(tuning, "LATEST_TASK_RECORDS", cap)
        monkeypatch.setattr(tuning, "RANGE_BYTES", 4096)  # a partition in several ranges
        table = topic_table(spark, root, TOPIC)
        assert rows_of(table) == want
        assert ("Aggregate" in table._jdf.queryExecution().optimizedPlan().toString()) == ranges


def test_incremental_delta_interrupted_and_rerun(spark, topic, tmp_path, monkeypatch):
    from kafkalog import tuning

    root, records, fates = topic
    out = str(tmp_path / "table")
    first = export(spark, root, TOPIC, out, as_of_offset=40, incremental=True)
    assert first.committed and delta_rows(out) == model_rows(consumer_reads(records, fates, as_of={0: 40, 1: 40}))
    version = delta_version(out)
    monkeypatch.setattr(tuning, "DRIVER_MERGE_BYTES", -1)  # delta-spark's MERGE, whatever the table's size

    # a run that fails inside its MERGE (a task of its source raises): the table stays as it was
    from kafkalog.operations import export as export_module

    real = export_module.latest_records

    def failing(*args, **kwargs):
        def boom(batches):
            for _ in batches:
                raise RuntimeError("killed inside the commit")
            yield from ()

        latest_df = real(*args, **kwargs)
        return latest_df.mapInArrow(boom, latest_df.schema)

    monkeypatch.setattr(export_module, "latest_records", failing)
    with pytest.raises(Exception, match="killed inside the commit"):
        export(spark, root, TOPIC, out, incremental=True)
    monkeypatch.setattr(export_module, "latest_records", real)
    assert delta_version(out) == version
    assert delta_rows(out) == model_rows(consumer_reads(records, fates, as_of={0: 40, 1: 40}))

    as_of = {0: 70, 1: 70}
    second = export(spark, root, TOPIC, out, as_of_offset=as_of, incremental=True)
    assert second.committed and {r.partition: r.start for r in second.ranges} == {0: 40, 1: 40}
    assert delta_rows(out) == model_rows(consumer_reads(records, fates, as_of=as_of))
    assert delta_version(out) == version + 1  # one commit: upserts and deletes in one MERGE
    # a table with deletion vectors, so that a MERGE marks the rows it replaces rather than copying
    # the rest of their files; kafkalog's own reader (deltalake's scan()) applies them
    from deltalake import DeltaTable

    from kafkalog.storage.tables import read_table as read_arrow

    assert "deletionVectors" in (DeltaTable(out).protocol().reader_features or [])
    assert int(DeltaTable(out).history(1)[0]["operationMetrics"]["numTargetRowsCopied"]) == 0
    arrow_rows = read_arrow(out, "delta").to_pylist()
    assert {(r["partition"], r["key"]): (r["offset"], r["value"]) for r in arrow_rows} == delta_rows(out)

    # a small table is merged on the driver by deltalake, which rewrites the files the deletion
    # vectors mark, applying them: the same table, one commit
    monkeypatch.setattr(tuning, "DRIVER_MERGE_BYTES", 1 << 30)
    third = export(spark, root, TOPIC, out, incremental=True)
    assert third.committed and {r.partition: r.start for r in third.ranges} == as_of
    assert delta_rows(out) == model_rows(consumer_reads(records, fates))
    assert delta_version(out) == version + 2
    assert int(DeltaTable(out).history(1)[0]["operationMetrics"]["num_target_rows_copied"]) > 0
    assert spark.read.format("delta").load(out).count() == len(latest(consumer_reads(records, fates)))
    assert rows_of(spark.read.format("delta").load(out)) == model_rows(consumer_reads(records, fates))

    fourth = export(spark, root, TOPIC, out, incremental=True)
    assert not fourth.committed and delta_version(out) == version + 2


def test_the_merge_runs_with_its_own_settings_and_gives_the_session_back(spark, topic, tmp_path, monkeypatch):
    # the MERGE's join setting (tuning.MERGE_CONF) and the note are set around the MERGE alone: a
    # setting the session had before is as it was after, one it did not have is unset again
    from kafkalog import tuning
    from kafkalog.spark.tables import USER_METADATA_CONF
    from kafkalog.storage.tables import NOTE_KEY

    root, records, fates = topic
    out = str(tmp_path / "table")
    export(spark, root, TOPIC, out, as_of_offset=40, incremental=True)
    monkeypatch.setattr(tuning, "DRIVER_MERGE_BYTES", -1)  # delta-spark's MERGE, whatever the table's size
    [(threshold, merge_value)] = tuning.MERGE_CONF.items()
    assert spark.conf.get(USER_METADATA_CONF, None) is None
    seen = []
    real_sql = spark.sql

    def spying(text, *args, **kwargs):
        if text.startswith("MERGE INTO"):
            seen.append((spark.conf.get(threshold, None), spark.conf.get(USER_METADATA_CONF, None)))
        return real_sql(text, *args, **kwargs)

    monkeypatch.setattr(spark, "sql", spying)
    spark.conf.set(threshold, "1m")
    try:
        result = export(spark, root, TOPIC, out, incremental=True)
        assert result.committed and spark.conf.get(threshold) == "1m"
    finally:
        spark.conf.unset(threshold)
    assert spark.conf.get(USER_METADATA_CONF, None) is None
    [(during, note)] = seen
    assert during == merge_value and json.loads(note)[NOTE_KEY] == {
        "topic": TOPIC,
        "mode": "latest",
        "endOffsets": {str(p): o for p, o in result.end_offsets.items()},
        "keyFormat": "bytes",
    }
    assert delta_rows(out) == model_rows(consumer_reads(records, fates))


def test_incremental_changelog_and_iceberg(spark, topic, tmp_path):
    from pyiceberg.table import StaticTable

    root, records, fates = topic
    out = str(tmp_path / "ice")
    export(spark, root, TOPIC, out, format="iceberg", as_of_offset=25, incremental=True)
    export(spark, root, TOPIC, out, format="iceberg", incremental=True)
    table = StaticTable.from_metadata(out).scan().to_arrow().to_pylist()
    assert {(r["partition"], r["key"]): (r["offset"], r["value"]) for r in table} == model_rows(
        consumer_reads(records, fates)
    )
    # through Spark too: the Parquet files of pyiceberg's scan plan (no Iceberg runtime for Spark 4.2)
    assert rows_of(read_table(spark, out, "iceberg")) == model_rows(consumer_reads(records, fates))
    snapshots = StaticTable.from_metadata(out).metadata.snapshots
    assert not export(spark, root, TOPIC, out, format="iceberg", incremental=True).committed
    assert len(StaticTable.from_metadata(out).metadata.snapshots) == len(snapshots)

    log = str(tmp_path / "changelog")
    export(spark, root, TOPIC, log, mode="changelog", as_of_offset=30, incremental=True)
    export(spark, root, TOPIC, log, mode="changelog", incremental=True)
    got = sorted((r["partition"], r["offset"]) for r in spark.read.format("delta").load(log).collect())
    assert got == [(r.partition, r.offset) for r in consumer_reads(records, fates)]


def test_the_command_line_writes_a_parquet_snapshot_and_refuses_to_overwrite_it(spark, topic, tmp_path, capsys):
    from kafkalog.cli import main

    root, records, fates = topic
    out = str(tmp_path / "snapshot")
    args = ["export", root, "--topic", TOPIC, "--output", out, "--format", "parquet"]
    assert main([*args, "--as-of-offset", '{"0": 33, "1": -1}', "--value-format", "string"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["endOffsets"]["0"] == 33 and report["committed"]
    got = {
        (r["partition"], bytes(r["key"])): (r["offset"], r["value"].encode()) for r in spark.read.parquet(out).collect()
    }
    assert got == model_rows(consumer_reads(records, fates, as_of={0: 33}))
    assert main([*args, "--incremental"]) == 2
    assert "--incremental needs --format delta or iceberg" in capsys.readouterr().err


def test_incremental_json_parses_new_records_with_the_tables_schema(spark, topic, tmp_path):
    root, records, fates = topic
    out = str(tmp_path / "json")
    options = {"key_format": "string", "value_format": "json", "incremental": True}
    export(spark, root, TOPIC, out, as_of_offset=25, value_schema="n int", **options)
    # no schema: the table's, not the one inferred from the new records (which has a field more)
    export(spark, root, TOPIC, out, **options)
    table = spark.read.format("delta").load(out)
    assert table.schema["value"].dataType.simpleString() == "struct<n:int>"
    got = {(r["partition"], r["key"]): r["value"]["n"] for r in table.collect()}
    want = model_rows(consumer_reads(records, fates))
    assert got == {(p, k.decode()): json.loads(v)["n"] for (p, k), (_, v) in want.items()}


CDC = "users"


def cdc_event(op: str, before=None, after=None) -> bytes:
    return json.dumps({"before": before, "after": after, "op": op, "source": {"table": CDC}}).encode()


def write_cdc(root: str, values: list[tuple[str, bytes | None]], start: int = 0) -> None:
    from kafkalog.codec.records import Record
    from kafkalog.storage.fs import LogFileSystem
    from kafkalog.storage.log_writer import PartitionWriter

    fs = LogFileSystem.for_path("/")[0]
    writer = PartitionWriter(fs, root, CDC, 0)
    for i, (key, value) in enumerate(values):
        writer.append_records([Record(0, T0 + start + i, key.encode(), value)], now_ms=T0 + start + i)
    writer.close()


def test_debezium_events_and_dead_letters_latest_incremental_and_changelog(spark, tmp_path, monkeypatch):
    root = str(tmp_path / "cdc")
    row = {str(i): {"id": i, "name": n} for i, n in enumerate("abcde")}
    write_cdc(
        root,
        [
            ("1", cdc_event("c", after=row["1"])),  # 0
            ("2", cdc_event("c", after=row["2"])),
            ("3", cdc_event("r", after=row["3"])),
            ("4", b"not json"),  # 3: a dead letter
            ("2", cdc_event("d", before=row["2"])),
            ("2", None),  # 5: the tombstone after the delete
            ("3", cdc_event("u", before=row["3"], after={"id": 3, "name": "c2"})),
            ("1", cdc_event("d", before=row["1"])),  # 7: a delete without a tombstone
            ("5", cdc_event("c", after=row["4"] | {"id": 5})),
            ("3", b'{"op": "u", "after": '),  # 9: a dead letter, the key's last record
            ("4", cdc_event("c", after=row["4"])),
        ],
    )
    out = str(tmp_path / "users")
    options = {
        "key_format": "string",
        "value_format": "json",
        "envelope": "debezium",
        "on_decode_error": "dead-letter",
        "incremental": True,
    }

    def table(path):
        return {r["key"]: r["value"].asDict() for r in spark.read.format("delta").load(path).collect()}

    def dead_offsets():
        return sorted(r["offset"] for r in spark.read.format("delta").load(out + "_dead_letters").collect())

    with pytest.warns(UserWarning, match="1 records did not decode"):
        first = export(spark, root, CDC, out, as_of_offset=7, **options)
    assert first.dead_letters == 1 and table(out) == {"1": row["1"], "3": {"id": 3, "name": "c2"}}
    assert dead_offsets() == [3]
    (dead,) = spark.read.format("delta").load(out + "_dead_letters").collect()
    assert bytes(dead["value"]) == b"not json" and "not JSON" in dead["error"]

    # a run that fails (or is killed) between the dead letters' commit and the table's: key 3's last record
    # (9) is in the dead-letter table, whose note says so, and the table is as it was
    from kafkalog.operations import export as export_module

    def killed(*args, **kwargs):
        raise RuntimeError("killed before the table's commit")

    monkeypatch.setattr(export_module, "merge_latest", killed)
    with pytest.warns(UserWarning, match="1 records did not decode"), pytest.raises(Exception, match="killed before"):
        export(spark, root, CDC, out, **options)
    monkeypatch.undo()
    assert table(out) == {"1": row["1"], "3": {"id": 3, "name": "c2"}} and dead_offsets() == [3, 9]

    # the MERGE: op d deletes key 1, keys 5 and 4 arrive; key 3's last record does not decode: its row
    # stays, and its dead letter, there already, is not written again
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        export(spark, root, CDC, out, **options)
    assert not [w for w in said if "did not decode" in str(w.message)]
    assert table(out) == {"3": {"id": 3, "name": "c2"}, "4": row["4"], "5": row["4"] | {"id": 5}}
    assert dead_offsets() == [3, 9]

    changelog = topic_table(
        spark,
        root,
        CDC,
        mode="changelog",
        key_format="string",
        value_format="json",
        envelope="debezium",
        on_decode_error="dead-letter",
    )
    ops = [r["_operation"] for r in changelog.orderBy("offset").collect()]
    assert ops == ["upsert", "upsert", "upsert", None, "delete", "delete", "upsert", "delete", "upsert", None, "upsert"]

    with pytest.raises(Exception, match="partition 0, value: not JSON"):
        export(spark, root, CDC, str(tmp_path / "fails"), key_format="string", value_format="json", envelope="debezium")
