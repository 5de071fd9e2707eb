"""storage/tables/output.py: a table write that fails at any step leaves the output as it was.

A property test draws the table's state (none, or one an earlier commit wrote), the write (the whole
table, an append, a merge; a Parquet directory replaced), and the step at which it fails and how:
an unreadable or missing input (the rows' source raises PermissionError or FileNotFoundError as the
writer reads it) or a full disk (ENOSPC from the writer's file system: pyiceberg's FileIO, and the
renames that put a staged table in place). Below Spark: the writers export uses are given small
Arrow data here (tests/spark/test_export_safety.py runs the whole export a few times)."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.storage import tables
from kafkalog.storage.destination import STAGING_SUFFIX
from kafkalog.storage.tables import DELETED, TableError
from kafkalog.storage.tables import output as table_output
from kafkalog.storage.tables.output import REPLACED_SUFFIX, existing, writing

FAILURES = {
    "unreadable": lambda: PermissionError(errno.EACCES, "Permission denied", "seg.log"),
    "missing": lambda: FileNotFoundError(errno.ENOENT, "No such file or directory", "seg.log"),
    "disk full": lambda: OSError(errno.ENOSPC, "No space left on device"),
}


class Faults:
    """Counts the steps a write takes and fails the `at`-th with `failure` (never when past the last)."""

    def __init__(self, at: int, failure: str):
        self.at, self.failure, self.steps, self.fired = at, failure, 0, False

    def step(self) -> None:
        self.steps += 1
        if self.steps == self.at:
            self.fired = True
            raise FAILURES[self.failure]()


def rows(n: int, first: int = 0) -> pa.Table:
    return pa.table(
        {
            "partition": pa.array([i % 2 for i in range(first, first + n)], pa.int32()),
            "key": [f"k{i % 7}-{i}".encode() for i in range(first, first + n)],
            "value": [f"v{i}".encode() for i in range(first, first + n)],
            "offset": pa.array(range(first, first + n), pa.int64()),
        }
    )


def source(table: pa.Table, faults: Faults) -> pa.RecordBatchReader:
    """`table` read a few rows at a time, each batch a step (an input read as it is written)."""

    def batches():
        for batch in table.to_batches(max_chunksize=3):
            faults.step()
            yield batch

    return pa.RecordBatchReader.from_batches(table.schema, batches())


def tree(root: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and directory (None) under `root`."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def content(path: str, fmt: str) -> list:
    if fmt == "parquet":
        return sorted(pq.read_table(path).to_pylist(), key=lambda r: r["offset"])
    return sorted(tables.read_table(path, fmt).to_pylist(), key=lambda r: r["offset"])


def commit(target: str, fmt: str, op: str, data: pa.Table, faults: Faults) -> None:
    """One write of export's (storage/tables.py's writers; a Parquet directory as Spark writes one:
    part files, then _SUCCESS), its input and its file system failing at the drawn step."""
    if fmt == "parquet":
        os.makedirs(target, exist_ok=True)
        for i, batch in enumerate(data.to_batches(max_chunksize=3)):
            faults.step()
            pq.write_table(pa.Table.from_batches([batch]), f"{target}/part-{i:05d}.parquet")
        faults.step()
        Path(target, "_SUCCESS").touch()
        return
    note = '{"kafkalogExport": {}}' if fmt == "delta" else "{}"
    given = source(data, faults) if fmt == "delta" else data  # pyiceberg takes a whole table: its FileIO fails
    if op == "merge":
        changes = data.append_column(DELETED, pa.array([i % 3 == 0 for i in range(data.num_rows)]))
        tables.merge_table(
            target, source(changes, faults) if fmt == "delta" else changes, ("partition", "key"), fmt, note=note
        )
    else:
        tables.write_table(target, given, fmt, append=op == "append", note=note)


def expected(before: list, op: str, data: pa.Table) -> list:
    new = data.to_pylist()
    if op == "append":
        return sorted(before + new, key=lambda r: r["offset"])
    if op == "merge":
        deleted = {(r["partition"], r["key"]) for i, r in enumerate(new) if i % 3 == 0}
        changed = {(r["partition"], r["key"]) for r in new}
        kept = [r for r in before if (r["partition"], r["key"]) not in changed]
        return sorted(kept + [r for r in new if (r["partition"], r["key"]) not in deleted], key=lambda r: r["offset"])
    return sorted(new, key=lambda r: r["offset"])


@pytest.fixture
def faulty_file_systems(monkeypatch):
    """Route pyiceberg's file outputs and the renames through the current `Faults`."""
    from pyiceberg.io.pyarrow import PyArrowFileIO

    current: list[Faults] = []

    def faulty(real):
        def call(*args, **kwargs):
            if current:
                current[-1].step()
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(PyArrowFileIO, "new_output", faulty(PyArrowFileIO.new_output))
    for name in ("rename", "link", "replace"):
        monkeypatch.setattr(os, name, faulty(getattr(os, name)))
    return current


OPS = {"delta": ("write", "append", "merge"), "iceberg": ("write", "append", "merge"), "parquet": ("write",)}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    case=st.sampled_from([(fmt, op) for fmt, ops in OPS.items() for op in ops]),
    there=st.booleans(),
    at=st.integers(1, 14),
    failure=st.sampled_from(sorted(FAILURES)),
    n=st.integers(1, 10),
)
def test_a_write_that_fails_at_any_step_leaves_the_output_as_it_was(faulty_file_systems, case, there, at, failure, n):
    fmt, op = case
    there = there or op != "write"  # an append or a merge goes to a table that is there
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        output = str(root / "table")
        if there:
            with writing(output, fmt) as target:
                commit(target, fmt, "write", rows(5), Faults(0, failure))
        old = content(output, fmt) if there else []
        before = tree(root)
        faults = Faults(at, failure)
        faulty_file_systems.append(faults)
        try:
            with writing(output, fmt) as target:
                commit(target, fmt, op, rows(n, first=100), faults)
        except (OSError, TableError) as err:
            assert faults.fired, err
            after = tree(root)
            if after != before:  # only once a commit is in: then the new version is whole
                assert there and fmt != "parquet", sorted(set(after) ^ set(before))
                assert content(output, fmt) == expected(old, op, rows(n, first=100))
            assert not any(name.endswith((STAGING_SUFFIX, REPLACED_SUFFIX)) for name in os.listdir(root))
        else:
            assert not faults.fired
            assert content(output, fmt) == expected(old, op, rows(n, first=100))
            assert os.listdir(root) == ["table"]
        finally:
            faulty_file_systems.clear()


def test_a_failed_commit_into_an_existing_table_takes_back_the_files_it_added(tmp_path, faulty_file_systems):
    # the property above, pinned where a failed commit surely leaves files: Iceberg's data file is
    # written, the manifest's output fails
    output = str(tmp_path / "ice")
    with writing(output, "iceberg") as target:
        commit(target, "iceberg", "write", rows(5), Faults(0, "disk full"))
    before = tree(tmp_path)
    faults = Faults(2, "disk full")
    faulty_file_systems.append(faults)
    added = []
    real_take_back = table_output._take_back
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(table_output, "_take_back", lambda fs, found: (added.extend(found), real_take_back(fs, found)))
        with pytest.raises(TableError, match="No space left"), writing(output, "iceberg") as target:
            commit(target, "iceberg", "append", rows(4, first=100), faults)
    assert any(path.endswith(".parquet") for path, _ in added)
    assert tree(tmp_path) == before


def test_what_is_at_the_output_decides(tmp_path):
    out = tmp_path / "out"
    assert not existing(str(out), "delta")
    out.mkdir()
    assert not existing(str(out), "iceberg")  # an empty directory is no table
    (out / "notes.txt").write_text("mine")
    for fmt in ("delta", "iceberg", "parquet"):
        with pytest.raises(TableError, match=f"holds files but no {fmt} table"):
            existing(str(out), fmt)
    (out / "notes.txt").unlink()
    pq.write_table(rows(2), out / "part-0.parquet")
    assert existing(str(out), "parquet")
    with pytest.raises(TableError, match="no delta table"):  # --incremental into a plain Parquet directory
        existing(str(out), "delta")
    staging = tmp_path / f"out{STAGING_SUFFIX}"
    staging.mkdir()
    with pytest.raises(Exception, match="did not finish left this staging directory"):
        existing(str(out), "parquet")
    staging.rmdir()
    (tmp_path / f"out{REPLACED_SUFFIX}").mkdir()
    with pytest.raises(TableError, match="moved the previous output aside"):
        existing(str(out), "parquet")
    (tmp_path / "file").write_text("x")
    with pytest.raises(TableError, match="a file, not a table's directory"):
        existing(str(tmp_path / "file"), "delta")
