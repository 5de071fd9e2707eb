"""storage/tables/erase.py below Spark: small Delta, Iceberg and Parquet tables as export lays them
out (with its note), erased, and every file under them read back."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kafkalog.storage import tables
from kafkalog.storage.tables import TableError
from kafkalog.storage.tables.erase import TableTarget, check_table, erase, stored_values

TOPIC = "users"
PURGED = [b"alice-0000000001", b"carol-0000000003"]


def _rows(n: int = 40, start: int = 0) -> pa.Table:
    keys = [f"{['alice', 'bob', 'carol', 'dave'][i % 4]}-{i % 4 + 1:010d}".encode() for i in range(start, start + n)]
    return pa.table(
        {
            "key": pa.array(keys, pa.binary()),
            "value": pa.array([b"v%d" % i for i in range(start, start + n)], pa.binary()),
            "topic": pa.array([TOPIC] * n, pa.string()),
            "partition": pa.array([i % 2 for i in range(start, start + n)], pa.int32()),
            "offset": pa.array(list(range(start, start + n)), pa.int64()),
        }
    )


def _note(fmt: str, **extra) -> str:
    return tables.note_text(
        {"topic": TOPIC, "mode": "changelog", "endOffsets": {"0": 40}, "keyFormat": "bytes", **extra}, fmt
    )


def make_table(path: str, fmt: str, rows: pa.Table | None = None, versions: int = 2) -> str:
    """A table of `versions` commits (older versions holding the purged keys too)."""
    rows = _rows() if rows is None else rows
    if fmt == "parquet":
        os.makedirs(path)
        half = rows.num_rows // 2
        pq.write_table(rows.slice(0, half), os.path.join(path, "part-00000.snappy.parquet"))
        pq.write_table(rows.slice(half), os.path.join(path, "part-00001.snappy.parquet"))
        open(os.path.join(path, ".part-00000.snappy.parquet.crc"), "wb").write(b"crc")
        tables.write_note_file(path, json.loads(_note("parquet")))
        return path
    for v in range(versions):
        tables.write_table(path, rows.slice(0, rows.num_rows - (versions - 1 - v)), fmt, note=_note(fmt))
    return path


def _offsets(rows: pa.Table) -> dict[int, list[int]]:
    chosen = [r for r in rows.to_pylist() if r["key"] in PURGED]
    out: dict = {}
    for r in chosen:
        out.setdefault(r["partition"], []).append(r["offset"])
    return out


def _holding(path: str, needles) -> set[str]:
    return {file for file, value in stored_values(path) if value in set(needles)}


def _raw_holding(path: str, needles) -> set[str]:
    found = set()
    for d, _, names in os.walk(path):
        for n in names:
            data = open(os.path.join(d, n), "rb").read()
            if any(k in data for k in needles):
                found.add(os.path.relpath(os.path.join(d, n), path))
    return found


@pytest.mark.parametrize("fmt", ["delta", "iceberg", "parquet"])
def test_erase_removes_the_rows_and_every_file_holding_them(tmp_path, fmt):
    path = make_table(str(tmp_path / "t"), fmt)
    before = tables.read_table(path, fmt)
    assert _holding(path, PURGED), "the scan sees the keys before the erase"
    target = check_table(path)
    done = erase(target, _offsets(before), [])  # by offsets alone: the purge's decision
    after = tables.read_table(path, fmt)
    kept = [r for r in before.to_pylist() if r["key"] not in PURGED]
    assert sorted(after.to_pylist(), key=lambda r: r["offset"]) == sorted(kept, key=lambda r: r["offset"])
    assert done.rows_removed == before.num_rows - len(kept) > 0
    assert not _holding(path, PURGED)
    assert not _raw_holding(path, PURGED)
    assert done.deleted and done.written
    assert all(len(f["sha256"]) == 64 for f in done.deleted + done.written)
    # the note stays: an incremental export goes on from it
    assert tables.export_note(path, fmt)[0]["topic"] == TOPIC


@pytest.mark.parametrize("fmt", ["delta", "iceberg", "parquet"])
def test_erase_by_key_reaches_rows_whose_records_left_the_log(tmp_path, fmt):
    path = make_table(str(tmp_path / "t"), fmt)
    done = erase(check_table(path), {}, PURGED)  # no offsets: the keys alone
    assert done.rows_removed == 20
    assert not _holding(path, PURGED)


@pytest.mark.parametrize("fmt", ["delta", "iceberg", "parquet"])
def test_a_record_matched_by_offset_alone_erases_its_row_and_no_other_of_its_key(tmp_path, fmt):
    path = make_table(str(tmp_path / "t"), fmt)
    before = tables.read_table(path, fmt).to_pylist()
    bob = [r for r in before if r["key"].startswith(b"bob")]
    done = erase(check_table(path), {bob[0]["partition"]: [bob[0]["offset"]]}, [])  # a --where match
    after = tables.read_table(path, fmt).to_pylist()
    assert done.rows_removed == 1
    assert sorted(r["offset"] for r in after) == sorted(r["offset"] for r in before if r["offset"] != bob[0]["offset"])


def test_string_keys_match_their_utf8_text_and_json_keys_only_by_offset(tmp_path):
    rows = _rows()
    as_text = rows.set_column(0, "key", rows["key"].cast(pa.string()))
    path = str(tmp_path / "t")
    tables.write_table(path, as_text, "delta", note=_note("delta", keyFormat="string"))
    assert check_table(path).key_kind == "string"
    assert erase(check_table(path), {}, PURGED).rows_removed == 20
    json_path = str(tmp_path / "j")
    tables.write_table(json_path, as_text, "delta", note=_note("delta", keyFormat="json"))
    target = check_table(json_path)
    assert target.key_kind is None  # a decoded JSON key is not its bytes: offsets only
    assert erase(target, {}, PURGED).rows_removed == 0
    assert erase(target, _offsets(rows), PURGED).rows_removed == 20


def test_a_table_without_an_export_note_is_refused_unless_its_key_column_is_named(tmp_path):
    path = str(tmp_path / "t")
    tables.write_table(path, _rows().rename_columns(["id", "value", "topic", "partition", "offset"]), "delta")
    with pytest.raises(TableError, match="no kafkalog export wrote this table.*--key-column"):
        check_table(path)
    with pytest.raises(TableError, match="no key column 'key'"):
        check_table(path, "key")
    target = check_table(path, "id")
    assert target == TableTarget(target.path, "delta", None, "id", "binary", None)
    assert erase(target, {0: [0]}, PURGED).rows_removed == 20  # offsets mean nothing without a note
    with pytest.raises(TableError, match="no table there"):
        check_table(str(tmp_path / "missing"))


def test_delta_time_travel_to_before_the_purge_fails(tmp_path):
    from deltalake import DeltaTable

    path = make_table(str(tmp_path / "t"), "delta", versions=3)
    erase(check_table(path), {}, PURGED)
    with pytest.raises(Exception):  # noqa: B017 - deltalake's own error: the version's commit is gone
        DeltaTable(path, version=0).to_pyarrow_table()
    current = DeltaTable(path)
    assert current.version() >= 3
    assert not [k for k in current.to_pyarrow_table()["key"].to_pylist() if k in PURGED]


def test_iceberg_time_travel_to_before_the_purge_fails(tmp_path):
    from kafkalog.storage.tables.iceberg import catalog

    path = make_table(str(tmp_path / "t"), "iceberg", versions=3)
    old = [s.snapshot_id for s in catalog(path).load_table().snapshots()]
    erase(check_table(path), {}, PURGED)
    table = catalog(path).load_table()
    assert len(table.snapshots()) == 1
    for snapshot_id in old:
        assert table.snapshot_by_id(snapshot_id) is None
    assert not os.path.exists(os.path.join(path, "metadata", "v1.metadata.json"))


class Crash(BaseException):  # a kill: nothing catches it
    pass


def _crash_at(step: str):
    def fault(at: str, name: str) -> None:
        if at == step:
            raise Crash(at)

    return fault


@pytest.mark.parametrize(
    "fmt,step",
    [
        ("delta", "table-committed"),
        ("delta", "table-vacuumed"),
        ("iceberg", "table-committed"),
        ("iceberg", "table-expired"),
        ("parquet", "file-staged"),
        ("parquet", "file-replaced"),
    ],
)
def test_a_crash_at_each_step_leaves_the_table_whole_and_a_rerun_finishes(tmp_path, fmt, step):
    path = make_table(str(tmp_path / "t"), fmt)
    before = tables.read_table(path, fmt)
    kept = sorted(r["offset"] for r in before.to_pylist() if r["key"] not in PURGED)
    with pytest.raises(Crash):
        erase(check_table(path), _offsets(before), PURGED, _crash_at(step))
    offsets = sorted(tables.read_table(path, fmt)["offset"].to_pylist())
    if fmt == "parquet" and step == "file-replaced":  # the first file purged, the second not yet
        assert set(kept) < set(offsets) < set(before["offset"].to_pylist())
    else:
        assert offsets in (kept, sorted(before["offset"].to_pylist()))
    erase(check_table(path), _offsets(before), PURGED)
    assert sorted(tables.read_table(path, fmt)["offset"].to_pylist()) == kept
    assert not _holding(path, PURGED) and not _raw_holding(path, PURGED)
