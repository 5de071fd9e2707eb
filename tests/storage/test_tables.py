"""storage/tables.py: each format written and read back, its format told from the path, notes kept
with the commits that carry them (Delta, Iceberg), and what a format cannot do refused."""

from __future__ import annotations

import pyarrow as pa
import pytest

from kafkalog.storage import tables
from kafkalog.storage.tables import TableError, detect_format, read_table, write_table

ROWS = pa.table({"group": ["g", "h"], "partition": pa.array([0, 1], pa.int32()), "value": [b"a", None]})


@pytest.mark.parametrize(
    ("fmt", "name"), [("parquet", "t.parquet"), ("csv", "t.csv"), ("json", "t.jsonl"), ("delta", "t"), ("iceberg", "t")]
)
def test_each_format_round_trips_and_is_told_from_its_path(tmp_path, fmt, name):
    path = str(tmp_path / name)
    table = ROWS.drop_columns(["value"]) if fmt in ("csv", "json") else ROWS
    write_table(path, table, fmt)
    assert detect_format(path) == fmt
    back = read_table(path)
    if fmt == "csv":  # CSV is text: read back as written
        assert back.to_pylist() == [{"group": "g", "partition": "0"}, {"group": "h", "partition": "1"}]
    else:
        assert back.cast(table.schema) == table


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_notes_are_the_commits_newest_first_and_merges_replace_and_delete(tmp_path, fmt):
    path = str(tmp_path / "t")
    assert tables.notes(path, fmt) is None
    write_table(path, ROWS.slice(0, 1), fmt, note="one")
    write_table(path, ROWS.slice(1, 1), fmt, append=True, note="two")
    assert tables.notes(path, fmt) == ["two", "one"]
    # g is deleted; h's value becomes null without being deleted (a decoded JSON `null`); k is new
    changes = pa.table(
        {
            "group": ["g", "h", "k"],
            "partition": pa.array([0, 1, 2], pa.int32()),
            "value": [None, None, b"c"],
            tables.DELETED: [True, False, False],
        }
    )
    tables.merge_table(path, changes, ("group", "partition"), fmt, note="three")
    assert sorted(read_table(path, fmt).to_pylist(), key=str) == sorted(
        [{"group": "h", "partition": 1, "value": None}, {"group": "k", "partition": 2, "value": b"c"}], key=str
    )
    assert tables.notes(path, fmt)[0] == "three"


def test_what_a_format_cannot_do_is_refused(tmp_path):
    with pytest.raises(TableError, match="cannot be appended"):
        write_table(str(tmp_path / "t.parquet"), ROWS, "parquet", append=True)
    with pytest.raises(TableError, match="no commits to note"):
        write_table(str(tmp_path / "t.parquet"), ROWS, "parquet", note="x")
    with pytest.raises(TableError, match="cannot tell the table's format"):
        (tmp_path / "t.txt").write_text("x")
        detect_format(str(tmp_path / "t.txt"))
    # purge's keys: a file is a table only as Parquet or CSV, any other a key list
    (tmp_path / "keys.jsonl").write_text("x")
    keys = {"files": ("parquet", "csv"), "default": "text"}
    assert [detect_format(str(tmp_path / n), **keys) for n in ("t.txt", "keys.jsonl")] == ["text", "text"]
    assert detect_format(str(tmp_path), **keys) == "parquet"  # a directory is a table
    with pytest.raises(TableError, match="cannot write the findings"):
        write_table(str(tmp_path / "no" / "t.parquet"), ROWS, "parquet", what="the findings")


def test_a_delta_tables_data_bytes_are_its_current_files(tmp_path):
    path = str(tmp_path / "t.delta")
    write_table(path, pa.table({"k": list(range(1000))}), "delta")
    write_table(path, pa.table({"k": list(range(10))}), "delta", append=True)
    files = [f for f in (tmp_path / "t.delta").iterdir() if f.suffix == ".parquet"]
    assert len(files) == 2 and tables.delta.data_bytes(path) == sum(f.stat().st_size for f in files)
    write_table(path, pa.table({"k": [1]}), "delta")  # a new version: the old files are no longer its
    assert tables.delta.data_bytes(path) < min(f.stat().st_size for f in files)
