"""A kill -9 inside the commit of the table writers an incremental export uses on the driver, in its
append (changelog) or merge (latest): the table reads as exactly the old or exactly the new rows, with
the note of those rows (one commit), and the next commits go on from there. Spark-free, given small
Arrow data (tests/spark/test_export_kill.py kills delta-spark's in the JVM).

* Delta through `deltalake` (export's writer for a small table, or without delta-spark): it writes each
  file under a temporary name and renames it into place, links the commit's file into place and removes
  its temporary. strace kills the process (SIGKILL on entering the syscall, which then does not run) at
  the first data file's rename, at the commit's link, and at the temporary's removal just after it.
* Iceberg through pyiceberg (storage/tables/iceberg.py's `_publish`: `v<N>.metadata.json` written
  under a temporary name, linked into place, the temporary removed, `version-hint.text` replaced): a
  kill is the disk copied at that instant, then an exception no handler takes (as
  tests/operations/test_repartition_stages.py does), before the link, after it, and before the hint."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

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
REPO = Path(__file__).resolve().parents[2]
STRACE = shutil.which("strace")
# (op, point, strace's --inject: SIGKILL on entering the first such syscall, the state that leaves)
DELTA_POINTS = [
    ("merge", "data", "rename:signal=KILL:when=1", "old"),
    ("merge", "before-commit", "linkat:signal=KILL:when=1", "old"),
    ("merge", "after-commit", "unlink:signal=KILL:when=1", "new"),
    ("append", "after-commit", "unlink:signal=KILL:when=1", "new"),
]


class Killed(BaseException):
    """A kill -9: no handler runs (the disk was copied as it was at that instant)."""


def commit(path: str, op: str, note: str, fmt: str = "iceberg") -> None:
    if op == "merge":
        tables.merge_table(path, NEW, ("partition", "key"), fmt, note=note)
    else:
        tables.write_table(path, NEW.drop_columns([DELETED]), fmt, append=True, note=note)


def rows(path: str, fmt: str = "iceberg") -> list[tuple]:
    found = tables.read_table(path, fmt, columns=["partition", "key", "offset"]).to_pylist()
    return sorted((r["partition"], r["key"], r["offset"]) for r in found)


def old_and_new(tmp_path, op: str, fmt: str) -> tuple[str, list, list]:
    """The table at tmp_path/table with OLD, noted "old"; its rows, and those after `op` of NEW."""
    path = str(tmp_path / "table")
    tables.write_table(path, OLD, fmt, note="old")
    clean = str(tmp_path / "clean")
    shutil.copytree(path, clean)
    commit(clean, op, "new", fmt)
    assert rows(clean, fmt) != rows(path, fmt)
    return path, rows(path, fmt), rows(clean, fmt)


KILLED_RUN = "import sys\nfrom tests.storage.test_table_kill import commit\ncommit(*sys.argv[1:3], 'new', 'delta')\n"


@pytest.mark.parametrize("op,point,inject,state", DELTA_POINTS, ids=[f"{o}-{p}" for o, p, _, _ in DELTA_POINTS])
def test_a_deltalake_commit_killed_at_each_step_leaves_old_or_new_and_a_rerun_converges(
    tmp_path, op, point, inject, state
):
    if STRACE is None:
        pytest.fail("strace is not installed: scripts/setup.sh installs it (apt-get install strace)")
    path, old, new = old_and_new(tmp_path, op, "delta")
    command = [STRACE, "-f", "-qq", "-o", os.devnull, f"--inject={inject}", sys.executable, "-c", KILLED_RUN]
    done = subprocess.run([*command, path, op], env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]  # strace ends as its tracee did

    assert existing(path, "delta")
    assert rows(path, "delta") == {"old": old, "new": new}[state]
    assert tables.notes(path, "delta")[0] == state  # the note of the rows read: the next run starts there
    assert {p.name for p in Path(path).rglob("*#1")}  # the file the kill left under its temporary name
    if state == "old":
        commit(path, op, "new", "delta")  # the rerun; after the commit an export's finds nothing to apply
    assert rows(path, "delta") == new and tables.notes(path, "delta")[0] == "new"
    commit(path, op, "next", "delta")
    assert tables.notes(path, "delta")[0] == "next"


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
    path, old, new = old_and_new(tmp_path, op, "iceberg")

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
