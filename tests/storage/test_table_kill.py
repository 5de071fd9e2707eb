"""A kill -9 at each step of an Iceberg commit (storage/tables/iceberg.py's `_publish`: the next
`v<N>.metadata.json` written under a temporary name, linked into place, the temporary removed, then
`version-hint.text` replaced), in an incremental export's append (changelog) or merge (latest): the
table reads as exactly the old or exactly the new rows, with the note of those rows (one commit), and
the next commits go on from there, past a hint the kill left behind and a leftover temporary file.
Spark-free: the table writers export's incremental runs use on the driver, given small Arrow data
(tests/spark/test_export_kill.py kills delta-spark's in the JVM). A kill is the disk copied at that
instant, then an exception no handler takes (as tests/operations/test_repartition_stages.py does)."""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pytest

from kafkalog.storage import tables
from kafkalog.storage.tables import DELETED
from kafkalog.storage.tables.output import existing

OLD = pa.table({"partition": pa.array([0, 0, 1], pa.int32()), "key": [b"a", b"b", b"c"], "offset": [0, 1, 2]})
# the new records: a's row replaced, b's deleted, d's inserted (merge); appended as they are (append)
NEW = pa.table(
    {"partition": pa.array([0, 0, 1], pa.int32()), "key": [b"a", b"b", b"d"], "offset": [3, 4, 5]}
).append_column(DELETED, pa.array([False, True, False]))
STEPS = ("before-link", "after-link", "before-hint")


class Killed(BaseException):
    """A kill -9: no handler runs (the disk was copied as it was at that instant)."""


def commit(path: str, op: str, note: str) -> None:
    if op == "merge":
        tables.merge_table(path, NEW, ("partition", "key"), "iceberg", note=note)
    else:
        tables.write_table(path, NEW.drop_columns([DELETED]), "iceberg", append=True, note=note)


def rows(path: str) -> list[tuple]:
    found = tables.read_table(path, "iceberg", columns=["partition", "key", "offset"]).to_pylist()
    return sorted((r["partition"], r["key"], r["offset"]) for r in found)


def killed_at(monkeypatch, path: str, step: str) -> None:
    """Patch the commit's file operations on `path`'s table so that the next commit is killed at `step`."""
    real = {name: getattr(os, name) for name in ("link", "replace")}
    aside = path + ".killed"

    def kill():
        shutil.copytree(path, aside)
        raise Killed(step)

    def link(src, dst, *args, **kwargs):
        if step == "before-link" and str(dst).startswith(path):
            kill()
        real["link"](src, dst, *args, **kwargs)
        if step == "after-link" and str(dst).startswith(path):
            kill()

    def replace(src, dst, *args, **kwargs):
        if step == "before-hint" and str(dst).startswith(path):
            kill()
        real["replace"](src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "link", link)
    monkeypatch.setattr(os, "replace", replace)


@pytest.mark.parametrize("op", ["merge", "append"])
@pytest.mark.parametrize("step", STEPS)
def test_an_iceberg_commit_killed_at_each_step_leaves_old_or_new_and_the_next_commits_go_on(
    tmp_path, monkeypatch, op, step
):
    path = str(tmp_path / "table")
    tables.write_table(path, OLD, "iceberg", note="old")
    old = rows(path)
    clean = str(tmp_path / "clean")
    shutil.copytree(path, clean)
    commit(clean, op, "new")
    new = rows(clean)
    assert new != old

    with monkeypatch.context() as patched:
        killed_at(patched, path, step)
        with pytest.raises(Killed):
            commit(path, op, "new")
    shutil.rmtree(path)
    os.rename(path + ".killed", path)

    state = "old" if step == "before-link" else "new"
    assert existing(path, "iceberg")
    assert rows(path) == {"old": old, "new": new}[state]
    assert tables.notes(path, "iceberg")[0] == state  # the note of the rows read: the next run starts there
    if state == "old":  # the data files and the metadata's temporary the kill left: named by no commit
        assert {p.name for p in (tmp_path / "table").rglob("*.tmp")}
        commit(path, op, "new")  # the rerun
        assert rows(path) == new and tables.notes(path, "iceberg")[0] == "new"
    commit(path, op, "next")  # a commit after it takes the next version, whatever the hint says
    assert tables.notes(path, "iceberg")[0] == "next"
