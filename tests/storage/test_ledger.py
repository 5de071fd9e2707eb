"""The purge ledger without Spark: secrets, fingerprints, idempotent Delta writes, lookups."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from kafkalog.storage.ledger import (
    RECORDS_SCHEMA,
    RUNS_SCHEMA,
    SECRET_ENV,
    LedgerError,
    find,
    fingerprint,
    load_secret,
    records_table,
    runs_path,
    write_records,
    write_run,
)

SECRET = b"a-secret-of-32-bytes-for-testing"


def test_fingerprint_is_hmac_sha256__RFC4231_case_2():
    assert (
        fingerprint(b"Jefe", b"what do ya want for nothing?")
        == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    )


def test_secret_from_file_or_environment_never_short(tmp_path):
    path = tmp_path / "secret"
    path.write_bytes(SECRET + b"\n")
    assert load_secret(str(path), environ={}) == SECRET
    assert load_secret(None, environ={SECRET_ENV: SECRET.decode()}) == SECRET
    with pytest.raises(LedgerError, match="--secret-file"):
        load_secret(None, environ={})
    path.write_bytes(b"short\r\n")
    with pytest.raises(LedgerError, match="5 bytes") as info:
        load_secret(str(path), environ={})
    assert info.value.file == str(path)


def _purged(offsets, key=b"alice", action="removed"):
    n = len(offsets)
    return pa.table(
        {
            "topic": ["orders"] * n,
            "partition": [0] * n,
            "offset": offsets,
            "timestamp": [1_700_000_000_000 + o for o in offsets],
            "key": [key] * n,
            "action": [action] * n,
            "matched_by": ["key"] * n,
            "reason": ["ticket 42"] * n,
        }
    )


def test_rows_merge_without_duplicates_and_answer_by_key(tmp_path):
    ledger = str(tmp_path / "ledger")
    log_dir = str(tmp_path / "log")
    rows = records_table(_purged([3, 7]), secret=SECRET, run_id="r1", purged_at_ms=1_800_000_000_000, log_dir=log_dir)
    assert rows.schema == RECORDS_SCHEMA and b"alice" not in str(rows.to_pylist()).encode()
    assert write_records(ledger, rows) == 2
    again = records_table(
        _purged([3, 7, 9]), secret=SECRET, run_id="r2", purged_at_ms=1_800_000_000_001, log_dir=log_dir
    )
    assert write_records(ledger, again) == 1  # 3 and 7 are there already
    tombstone = records_table(
        _purged([9], action="tombstoned"), secret=SECRET, run_id="r3", purged_at_ms=0, log_dir=log_dir
    )
    assert write_records(ledger, tombstone) == 1  # another action on the same record is another row
    replica = records_table(_purged([3]), secret=SECRET, run_id="r4", purged_at_ms=0, log_dir=str(tmp_path / "b2"))
    assert write_records(ledger, replica) == 1  # the same partition in another log directory: its own record
    found = sorted((r["offset"], r["action"], r["run_id"]) for r in find(ledger, b"alice", SECRET))
    assert found == [
        (3, "removed", "r1"),
        (3, "removed", "r4"),
        (7, "removed", "r1"),
        (9, "removed", "r2"),
        (9, "tombstoned", "r3"),
    ]
    assert find(ledger, b"bob", SECRET) == [] and find(ledger, b"alice", b"another-secret-16b") == []
    assert DeltaTable(ledger).to_pyarrow_table().num_rows == 5


def test_an_empty_first_write_creates_the_table_and_runs_append(tmp_path):
    ledger = str(tmp_path / "ledger")
    assert write_records(ledger, RECORDS_SCHEMA.empty_table()) == 0
    assert DeltaTable.is_deltatable(ledger)
    run = {
        "run_id": "r1",
        "started_at": 1,
        "finished_at": 2,
        "purged_at": 3,
        "log_dir": "/x",
        "topics": None,
        "keys": 2,
        "where": False,
        "tombstone": True,
        "partitions": 1,
        "segments": 1,
        "records_removed": 5,
        "records_tombstoned": 1,
        "records_redacted": 0,
        "ledger_rows": 6,
        "remaining": 0,
        "kafkalog_version": "0",
    }
    from kafkalog.storage.ledger import run_table

    # a run table a former version wrote, without `log_dirs` (nor the later columns): the next run's row adds them
    write_deltalake(runs_path(ledger), run_table(run).drop_columns(["log_dirs", "resumes", "replica_differences"]))
    write_run(ledger, dict(run, run_id="r2", log_dirs=["/x", "/y"]))
    runs = DeltaTable(runs_path(ledger)).to_pyarrow_table()
    assert runs.schema == RUNS_SCHEMA and sorted(runs.column("run_id").to_pylist()) == ["r1", "r2"]
    assert sorted(runs.column("log_dirs").to_pylist(), key=str) == [None, ["/x", "/y"]]


def test_a_run_table_of_an_older_kafkalog_gains_the_new_columns(tmp_path):
    """A ledger written before the run table had `missing_replicas` takes the next run's row."""
    ledger = str(tmp_path / "ledger")
    older = RUNS_SCHEMA.remove(RUNS_SCHEMA.get_field_index("missing_replicas"))
    write_deltalake(runs_path(ledger), pa.table({f.name: pa.array([None], f.type) for f in older}, schema=older))
    run = {f.name: None for f in RUNS_SCHEMA} | {"run_id": "r2", "started_at": 1, "finished_at": 2, "purged_at": 3}
    write_run(ledger, run | {"missing_replicas": [{"topic": "t", "partition": 0, "broker": 2, "directory": None}]})
    runs = DeltaTable(runs_path(ledger)).to_pyarrow_table()
    assert "missing_replicas" in runs.schema.names and runs.num_rows == 2
    assert [r for r in runs.column("missing_replicas").to_pylist() if r] == [
        [{"topic": "t", "partition": 0, "broker": 2, "directory": None}]
    ]


def test_the_row_builders_both_writers_share(tmp_path):
    """Spark's writer builds rows with `ledger_rows` one Arrow batch at a time, on executors, with the
    log directory named on the driver; the rows are records_table's."""
    from kafkalog.storage.ledger import ledger_rows, log_dir_identity, run_table

    purged = _purged([3, 7, 9])
    whole = records_table(purged, secret=SECRET, run_id="r1", purged_at_ms=5, log_dir="relative/log")
    assert log_dir_identity("relative/log") == os.path.abspath("relative/log")
    (batch,) = purged.to_batches()
    by_batch = ledger_rows(
        batch, secret=SECRET, run_id="r1", purged_at_ms=5, log_dir_name=log_dir_identity("relative/log")
    )
    assert by_batch == whole and whole.column("timestamp")[0].value == 1_700_000_000_003 * 1000
    run = {
        "run_id": "r1",
        "started_at": 1,
        "finished_at": 2,
        "purged_at": 3,
        "log_dir": "/x",
        "topics": ["t"],
        "keys": 2,
        "where": True,
        "tombstone": False,
    }
    row = run_table(run)
    assert row.schema == RUNS_SCHEMA and row.num_rows == 1 and row.column("records_removed")[0].as_py() is None
    write_run(str(tmp_path / "ledger"), run)
    assert DeltaTable(runs_path(str(tmp_path / "ledger"))).to_pyarrow_table() == row


def test_rows_of_several_copies_name_each_copy_and_its_broker(tmp_path):
    """A purge of several log dirs gives each row its own log dir and broker; a ledger written before
    the `node_id` column existed takes the new rows (the column is added, older rows null)."""
    ledger = str(tmp_path / "ledger")
    old = records_table(_purged([1]), secret=SECRET, run_id="r0", purged_at_ms=0, log_dir="/b1").drop_columns(
        ["node_id"]
    )
    write_deltalake(ledger, old)
    copies = (
        pa.concat_tables([_purged([3]), _purged([3])])
        .append_column("log_dir", pa.array(["/b1", "/b2"]))
        .append_column("node_id", pa.array([1, 2], pa.int32()))
    )
    rows = records_table(copies, secret=SECRET, run_id="r1", purged_at_ms=0)
    assert rows.schema == RECORDS_SCHEMA and rows.select(["log_dir", "node_id"]).to_pylist() == [
        {"log_dir": "/b1", "node_id": 1},
        {"log_dir": "/b2", "node_id": 2},
    ]
    assert write_records(ledger, rows) == 2
    assert sorted((r["log_dir"], r["offset"], r["node_id"]) for r in find(ledger, b"alice", SECRET)) == [
        ("/b1", 1, None),
        ("/b1", 3, 1),
        ("/b2", 3, 2),
    ]
    assert records_table(_purged([3]), secret=SECRET, run_id="r2", purged_at_ms=0, log_dir="/b1").column(
        "node_id"
    ).to_pylist() == [None]


# -- what a purge checks before it touches a copy ---------------------------------------------------------


def _segment_rows(run_id: str, *rows: tuple) -> pa.Table:
    """Segments table rows of `run_id`: (log_dir, base_offset, sha256_after) each."""
    from kafkalog.storage.ledger import segments_table

    return segments_table(
        [
            {"log_dir": d, "broker_id": 1, "directory_id": None, "topic": "t", "partition": 0, "base_offset": b}
            | {"records_before": 2, "records_after": 1, "bytes_before": 9, "bytes_after": 5}
            | {"sha256_before": "b" * 64, "sha256_after": after}
            for d, b, after in rows
        ],
        run_id=run_id,
        purged_at_ms=1,
        secret=SECRET,
    )


def test_a_rerun_that_stages_the_same_rewrite_adds_no_segment_rows(tmp_path):
    """A run interrupted before its swap staged segments 0 and 10; the rerun stages them again, the
    same bytes from the same bytes: the table holds each once, under the run that staged it first.
    Another rewrite of the same segment (another `now`, another key) is a row of its own."""
    from kafkalog.storage.ledger import segments_path, write_segments

    ledger = str(tmp_path / "ledger")
    assert write_segments(ledger, _segment_rows("r1", ("/a", 0, "a" * 64), ("/a", 10, "c" * 64))) == 2
    assert write_segments(ledger, _segment_rows("r2", ("/a", 0, "a" * 64), ("/a", 10, "c" * 64))) == 0
    assert write_segments(ledger, _segment_rows("r3", ("/a", 10, "d" * 64), ("/b", 10, "c" * 64))) == 2
    rows = DeltaTable(segments_path(ledger)).to_pyarrow_table().to_pylist()
    assert sorted((r["run_id"], r["log_dir"], r["base_offset"]) for r in rows) == [
        ("r1", "/a", 0),
        ("r1", "/a", 10),
        ("r3", "/a", 10),
        ("r3", "/b", 10),
    ]


def test_an_unfinished_run_is_one_with_rows_over_the_log_dirs_and_no_run_row(tmp_path):
    from kafkalog.storage.ledger import unfinished_runs, write_segments

    ledger = str(tmp_path / "ledger")
    assert unfinished_runs(ledger, ["/a"]) == []  # no ledger yet
    rows = pa.table({"topic": ["t"], "partition": [0], "offset": [3], "timestamp": [1], "key": [b"k"]})
    rows = rows.append_column("action", pa.array(["removed"])).append_column("matched_by", pa.array(["key"]))
    rows = rows.append_column("reason", pa.array(["r"]))
    write_records(ledger, records_table(rows, secret=SECRET, run_id="done", purged_at_ms=1, log_dir="/a"))
    write_records(ledger, records_table(rows, secret=SECRET, run_id="cut", purged_at_ms=1, log_dir="/b"))
    write_segments(ledger, _segment_rows("cut-too", ("/a", 0, "a" * 64)))
    run = {f.name: None for f in RUNS_SCHEMA} | {"started_at": 1, "finished_at": 2, "purged_at": 3}
    write_run(ledger, run | {"run_id": "done"})
    assert unfinished_runs(ledger, ["/a"]) == ["cut-too"]
    assert unfinished_runs(ledger, ["/a", "/b"]) == ["cut", "cut-too"]
    assert unfinished_runs(ledger, ["/c"]) == []


def test_every_table_of_the_ledger_must_be_writable_before_a_purge(tmp_path):
    """Absent with a parent to create it in, an empty directory, or a Delta table kafkalog's: else one
    line naming the table, whichever of the three it is."""
    from kafkalog.storage.ledger import check_ledger_writable, segments_path

    ledger = str(tmp_path / "audit" / "ledger")
    check_ledger_writable(ledger)  # nothing there yet: created on the first write
    write_records(ledger, RECORDS_SCHEMA.empty_table())
    (tmp_path / "audit" / "ledger_segments").mkdir()  # an empty directory takes a table
    check_ledger_writable(ledger)

    (tmp_path / "audit" / "ledger_runs").write_text("")
    with pytest.raises(LedgerError, match="the run table is a Delta table .a directory., but a file") as info:
        check_ledger_writable(ledger)
    assert info.value.file == runs_path(ledger)
    os.remove(runs_path(ledger))

    (tmp_path / "audit" / "ledger_segments" / "notes.txt").write_text("x")
    with pytest.raises(LedgerError, match="the segments table is not a Delta table") as info:
        check_ledger_writable(ledger)
    assert info.value.file == segments_path(ledger)
    os.remove(tmp_path / "audit" / "ledger_segments" / "notes.txt")

    write_deltalake(runs_path(ledger), pa.table({"run_id": ["r"], "customer": ["c"]}))  # someone else's table
    with pytest.raises(LedgerError, match="the run table is a Delta table kafkalog did not write .column customer."):
        check_ledger_writable(ledger)

    with pytest.raises(LedgerError, match="a file stands in its path") as info:
        check_ledger_writable(str(tmp_path / "audit" / "ledger" / "_delta_log" / "00000000000000000000.json" / "x"))


def test_a_damaged_delta_log_is_one_line_naming_the_table(tmp_path):
    from kafkalog.storage.ledger import check_ledger_writable

    ledger = str(tmp_path / "ledger")
    write_records(ledger, RECORDS_SCHEMA.empty_table())
    (tmp_path / "ledger" / "_delta_log" / "00000000000000000001.json").write_text("garbage{\n")
    with pytest.raises(LedgerError, match=": cannot read the ledger: DeltaError: .*Json") as info:
        check_ledger_writable(ledger)
    assert info.value.file == ledger and "\n" not in str(info.value)
