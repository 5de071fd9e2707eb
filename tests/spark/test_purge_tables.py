"""`purge --table`: one purge erases the purged keys from a Delta latest table (with deletion vectors,
from delta-spark's MERGE), an Iceberg table and a Parquet changelog that export wrote, and from every
file under them; verify-purge --table and the evidence report say so, time travel to before the purge
finds nothing, and incremental exports go on. The per-format file logic is tested below Spark
(tests/storage/test_table_erase.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafkalog.cli import main
from kafkalog.codec.records import Record
from kafkalog.operations.evidence import build_report
from kafkalog.operations.export import export
from kafkalog.operations.purge import purge
from kafkalog.storage import tables
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.log_writer import PartitionWriter
from kafkalog.storage.tables.erase import stored_values

NOW = 1_800_000_000_000
SECRET = b"table-purge-tests-secret-0123456"
PURGED = [b"alice@example.com", b"carol@example.com"]
KEYS = PURGED + [b"bob@example.com", b"dave@example.com", b"erin@example.com"]


def _append(root: Path, partition: int, keys: list[bytes], start_ms: int) -> None:
    fs = LogFileSystem.for_path(str(root))[0]
    w = PartitionWriter(fs, str(root), "users", partition, segment_ms=1 << 40, now_ms=NOW - 10_000)
    for i, k in enumerate(keys):
        w.append_records([Record(0, start_ms + i, k, b"profile of " + k + b" #%d" % i)])
    w.close()


def _append_segment(root: Path, partition: int, keys: list[bytes]) -> None:
    """Records appended to a partition as a new segment at its log end (the writer starts new logs only)."""
    import shutil

    from kafkalog.storage.logdir import LogDir
    from kafkalog.storage.naming import segment_file_name

    end = LogDir.open(str(root)).partition("users", partition).segments[-1].last_offset() + 1
    scratch = root.parent / "scratch"
    fs = LogFileSystem.for_path(str(scratch))[0]
    w = PartitionWriter(fs, str(scratch), "users", partition, log_start_offset=end, now_ms=NOW)
    w.append_records([Record(0, NOW + i, k, b"profile of " + k) for i, k in enumerate(keys)])
    w.close()
    for suffix in (".log", ".index", ".timeindex"):
        name = segment_file_name(end, suffix)
        shutil.copy(scratch / f"users-{partition}" / name, root / f"users-{partition}" / name)
    shutil.rmtree(scratch)


def _files_holding(path: str, keys) -> set[str]:
    """Files under `path` holding a key: as a value (decoded: Parquet, JSON, Avro) or as raw bytes."""
    found = {f for f, v in stored_values(path) if v in set(keys)}
    for d, _, names in os.walk(path):
        for n in names:
            data = Path(d, n).read_bytes()
            if any(k in data for k in keys):
                found.add(os.path.relpath(os.path.join(d, n), path))
    return found


class Killed(BaseException):
    """A kill at a step of the purge (its fault hook): nothing catches it."""


def _kill_at(step: str):
    def fault(at: str, name: str) -> None:
        if at == step:
            raise Killed(at)

    return fault


def _rows(path: str, fmt: str) -> list[tuple]:
    return sorted((r["partition"], r["offset"], r["key"]) for r in tables.read_table(path, fmt).to_pylist())


@pytest.fixture
def exported(spark, tmp_path, monkeypatch):
    from kafkalog import tuning

    root = tmp_path / "logs"
    root.mkdir()
    for p in (0, 1):  # keys only in the first offsets, whose rows the incremental MERGE leaves in their file
        once = [b"once-%d-%d@example.com" % (p, i) for i in range(8)]
        _append(root, p, once + [KEYS[(i + p) % len(KEYS)] for i in range(30)], NOW - 9_000)
    lake = {
        "delta": str(tmp_path / "lake" / "users_latest"),
        "iceberg": str(tmp_path / "lake" / "users_iceberg"),
        "parquet": str(tmp_path / "lake" / "users_changelog"),
    }
    export(spark, str(root), "users", lake["delta"], format="delta", incremental=True, as_of_offset=20)
    monkeypatch.setattr(tuning, "DRIVER_MERGE_BYTES", -1)  # delta-spark's MERGE: deletion vectors
    export(spark, str(root), "users", lake["delta"], format="delta", incremental=True)
    monkeypatch.undo()
    export(spark, str(root), "users", lake["iceberg"], format="iceberg", incremental=True)
    export(spark, str(root), "users", lake["parquet"], format="parquet", mode="changelog")
    return root, lake


def test_one_purge_erases_the_keys_from_every_table_and_file(spark, exported, tmp_path, capsys):
    from deltalake import DeltaTable

    root, lake = exported
    fmt = {path: f for f, path in lake.items()}
    assert DeltaTable(lake["delta"]).history(1)[0]["operation"] == "MERGE"
    assert tables.delta.has_deletion_vectors(DeltaTable(lake["delta"]))  # the erase rewrites the table whole
    before = {p: _rows(p, fmt[p]) for p in lake.values()}
    for p in lake.values():
        assert _files_holding(p, PURGED), f"the scan sees the purged keys in {p} before the purge"
    ledger = str(tmp_path / "ledger")

    # the exported table, with its deletion vectors, as a purge's key table: its keys are every key of
    # the log (the latest table drops none here), so every record matches
    as_keys = purge(spark, str(root), lake["delta"], dry_run=True, now=NOW)
    assert as_keys.total("removed") == len(before[lake["parquet"]])

    dry = purge(spark, str(root), PURGED, tables=list(lake.values()), dry_run=True, now=NOW)
    assert {t["table"]: t["rowsRemoved"] for t in dry.tables} == {
        p: sum(1 for r in before[p] if r[2] in PURGED) for p in lake.values()
    }
    assert _rows(lake["delta"], "delta") == before[lake["delta"]]  # a dry run writes nothing

    # killed once the first table (Delta) committed its erase: the log is not swapped yet, the other
    # tables are as they were, and the rerun decides again and finishes every table
    segments = sorted(p.read_bytes() for p in root.rglob("*.log"))
    with pytest.raises(Killed):
        purge(
            spark,
            str(root),
            PURGED,
            ledger=ledger,
            secret=SECRET,
            tables=list(lake.values()),
            now=NOW,
            fault=_kill_at("table-committed"),
        )
    assert sorted(p.read_bytes() for p in root.rglob("*.log")) == segments
    assert _rows(lake["delta"], "delta") == [r for r in before[lake["delta"]] if r[2] not in PURGED]
    assert _rows(lake["parquet"], "parquet") == before[lake["parquet"]]

    result = purge(spark, str(root), PURGED, ledger=ledger, secret=SECRET, tables=list(lake.values()), now=NOW)
    assert sorted(p.read_bytes() for p in root.rglob("*.log")) != segments
    assert "time travel" in result.summary()
    for p in lake.values():
        assert not _files_holding(p, PURGED), p
        assert _rows(p, fmt[p]) == [r for r in before[p] if r[2] not in PURGED]
    assert {t["table"] for t in result.tables} == set(lake.values())

    # a reader that travels to a version before the purge finds no purged key, or fails
    with pytest.raises(Exception):  # noqa: B017 - deltalake's own error: the version's commit is gone
        DeltaTable(lake["delta"], version=0).to_pyarrow_table()
    with pytest.raises(Exception):  # noqa: B017 - Spark's own error
        spark.read.format("delta").option("versionAsOf", 0).load(lake["delta"]).collect()
    from pyspark.sql import functions as F

    changelog = spark.read.parquet(lake["parquet"])  # Spark reads the rewritten files (their .crc gone)
    assert changelog.where(F.col("key").isin(PURGED)).count() == 0
    assert changelog.count() == len(before[lake["parquet"]]) - sum(1 for r in before[lake["parquet"]] if r[2] in PURGED)

    # verify-purge --table, and the evidence report lists the tables
    secret_file = tmp_path / "secret"
    secret_file.write_bytes(SECRET)
    args = ["verify-purge", str(root), "--ledger", ledger, "--secret-file", str(secret_file)]
    assert main([*args, *[a for p in lake.values() for a in ("--table", p)]]) == 0
    assert "3 tables" in capsys.readouterr().out
    report = build_report(ledger)
    assert {t["table"] for t in report["tables"]} == {os.path.abspath(p) for p in lake.values()}
    assert all(t["filesDeleted"] and len(t["filesDeleted"][0]["sha256"]) == 64 for t in report["tables"])

    # a purged key's file planted back under a table is found
    planted = Path(lake["parquet"], "part-planted.parquet")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"key": pa.array([PURGED[0]], pa.binary())}), str(planted))
    assert main([*args, "--table", lake["parquet"]]) == 1
    assert "part-planted.parquet holds a purged key" in capsys.readouterr().err
    planted.unlink()

    # incremental exports go on from the tables' notes: new records come in, the purged keys do not
    _append_segment(root, 0, [b"frank@example.com"])
    for f in ("delta", "iceberg"):
        assert export(spark, str(root), "users", lake[f], format=f, incremental=True).committed
        keys = {r[2] for r in _rows(lake[f], f)}
        assert b"frank@example.com" in keys and not keys & set(PURGED)

    # a rerun finds nothing more to erase
    again = purge(spark, str(root), PURGED, ledger=ledger, secret=SECRET, tables=list(lake.values()), now=NOW)
    assert all(t["rowsRemoved"] == 0 for t in again.tables)


def test_a_table_that_cannot_be_purged_stops_the_run_before_anything_is_written(tmp_path, capsys, monkeypatch):
    """Refused by the command before Spark starts (no `spark` fixture): one line, exit 2, nothing written."""
    import json

    import pyarrow as pa

    root = tmp_path / "logs"
    root.mkdir()
    _append(root, 0, KEYS, NOW - 9_000)
    ours, stranger = str(tmp_path / "ours"), str(tmp_path / "stranger")
    note = {"topic": "users", "mode": "latest", "endOffsets": {"0": 5}, "keyFormat": "bytes"}
    rows = pa.table({"key": pa.array(KEYS, pa.binary()), "partition": [0] * 5, "offset": list(range(5))})
    tables.write_table(ours, rows, "delta", note=json.dumps({tables.NOTE_KEY: note}))
    tables.write_table(stranger, rows.rename_columns(["id", "partition", "offset"]), "delta")
    segments = sorted(p.read_bytes() for p in root.rglob("*.log"))
    (tmp_path / "keys.txt").write_text("alice@example.com\n")
    monkeypatch.setenv("KAFKALOG_PURGE_SECRET", SECRET.decode())
    ledger = str(tmp_path / "ledger")
    args = ["purge", str(root), "--keys", str(tmp_path / "keys.txt"), "--ledger", ledger, "--now", str(NOW)]
    assert main([*args, "--table", ours, "--table", stranger]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no kafkalog export wrote this table" in err[0] and "--key-column" in err[0]
    assert main([*args, "--table", ours, "--key-column", "nothere"]) == 2
    assert "no key column 'nothere'" in capsys.readouterr().err
    orders = str(tmp_path / "orders")
    tables.write_table(orders, rows, "delta", note=json.dumps({tables.NOTE_KEY: {**note, "topic": "orders"}}))
    assert main([*args, "--table", orders]) == 2
    assert "holds topic 'orders', which this purge does not purge" in capsys.readouterr().err
    assert main([*args, "--table", ours, "--output", str(tmp_path / "copy")]) == 2
    assert "--output purges a copy" in capsys.readouterr().err
    assert sorted(p.read_bytes() for p in root.rglob("*.log")) == segments
    assert not os.path.exists(ledger)
    assert _rows(ours, "delta") == [(0, i, k) for i, k in enumerate(KEYS)]
