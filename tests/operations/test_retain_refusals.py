"""Retention in place on a disk that refuses: a full disk, a read-only filesystem, an immutable
segment. Each is one line naming the file, exit 2, and no partition is left half done: a file that
cannot be changed stops the run before any partition changes, and a write that fails before a
partition's commit point leaves that partition's segments as they were.

The refusals are simulated below pyarrow's filesystem (tests run as root, whom permissions do not
stop), as the kernel gives them; one test uses a real `chattr +i` where the machine allows it."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from kafkalog.cli import main
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.swap import in_flight_files
from tests.operations.test_retain import NOW, TOPIC, assert_valid, make_log, tree

PARTITIONS = 3


class RefusingFileSystem:
    """pyarrow's local filesystem, but writes, renames and deletes of `refused(path)` paths fail
    with `code`, as the kernel fails them."""

    def __init__(self, fs: pafs.FileSystem, refused, code: int):
        self._fs, self._refused, self._code = fs, refused, code

    def __getattr__(self, name):
        return getattr(self._fs, name)

    def _check(self, *paths: str) -> None:
        if any(self._refused(p) for p in paths):
            raise OSError(self._code, os.strerror(self._code))

    def open_output_stream(self, path, *args, **kwargs):
        self._check(path)
        return self._fs.open_output_stream(path, *args, **kwargs)

    def move(self, src, dst):
        self._check(src, dst)
        return self._fs.move(src, dst)

    def delete_file(self, path):
        self._check(path)
        return self._fs.delete_file(path)


def _refusing(monkeypatch, refused, code: int) -> None:
    """Every LogFileSystem of a local path refuses as `RefusingFileSystem` does."""
    original = LogFileSystem.for_path.__func__

    def for_path(cls, path_or_uri):
        fs, path = original(cls, path_or_uri)
        if fs.is_local:
            fs.fs = RefusingFileSystem(fs.fs, refused, code)
        return fs, path

    monkeypatch.setattr(LogFileSystem, "for_path", classmethod(for_path))


def _log(tmp_path) -> str:
    """Three partitions of three segments each, all of whose segments retention.ms=10000 deletes
    (a new empty segment is rolled, with a producer snapshot): every partition changes."""
    return make_log(tmp_path, [[10] * 5] * 3, partitions=PARTITIONS)


def _retain(root: str) -> int:
    return main(["retain", root, "--config", "retention.ms=10000", "--now", str(NOW)])


def _error_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines and not any("Traceback" in line for line in lines), lines
    return lines[-1]


def _partition(before: dict, after: dict, p: int) -> tuple[dict, dict]:
    prefix = f"{TOPIC}-{p}{os.sep}"
    return {k: v for k, v in before.items() if k.startswith(prefix)}, {
        k: v for k, v in after.items() if k.startswith(prefix)
    }


def _no_leftovers(root: str) -> None:
    fs, _ = LogFileSystem.for_path(root)
    for p in range(PARTITIONS):
        assert not in_flight_files(fs, os.path.join(root, f"{TOPIC}-{p}"))
    assert not [str(f) for f in Path(root).rglob("*.tmp")]


def test_an_immutable_segment_stops_the_run_before_any_partition_changes(tmp_path, capsys, monkeypatch):
    root = _log(tmp_path)
    immutable = str(sorted((Path(root) / f"{TOPIC}-{PARTITIONS - 1}").glob("*.log"))[0])
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: path != immutable and real_access(path, mode, **kw))
    _refusing(monkeypatch, lambda path: path == immutable, errno.EPERM)
    before = tree(root, with_mtime=True)
    assert _retain(root) == 2
    line = _error_line(capsys)
    assert line.startswith(f"kafkalog retain: {immutable}: cannot change it: ") and "immutable" in line, line
    assert tree(root, with_mtime=True) == before  # not even the partitions before it


def test_a_real_immutable_segment(tmp_path, capsys):
    root = _log(tmp_path)
    immutable = sorted((Path(root) / f"{TOPIC}-1").glob("*.log"))[0]
    if subprocess.run(["chattr", "+i", str(immutable)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not permitted on this machine (the simulated test above covers it)")
    try:
        before = tree(root)
        assert _retain(root) == 2
        assert _error_line(capsys).startswith(f"kafkalog retain: {immutable}: cannot change it: ")
        assert tree(root) == before
    finally:
        subprocess.run(["chattr", "-i", str(immutable)], check=True)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
def test_a_refused_staging_write_leaves_the_partition_as_it_was(tmp_path, capsys, monkeypatch, code):
    """The disk fills (or turns read-only) while the second partition's rolled segment is staged:
    the first partition is retained whole, the second and third are as they were, nothing staged
    is left."""
    root = _log(tmp_path)
    before = tree(root)
    _refusing(monkeypatch, lambda path: f"{os.sep}{TOPIC}-1{os.sep}" in path and path.endswith(".cleaned"), code)
    assert _retain(root) == 2
    line = _error_line(capsys)
    assert (
        line.startswith(f"kafkalog retain: {root}{os.sep}{TOPIC}-1{os.sep}") and ".log.cleaned: cannot create: " in line
    )
    assert f"({errno.errorcode[code]})" in line, line
    after = tree(root)
    for p in (1, 2):
        old, now = _partition(before, after, p)
        assert now == old, p
    assert _partition(before, after, 0)[0] != _partition(before, after, 0)[1]
    _no_leftovers(root)
    assert_valid(root)


def test_a_full_disk_at_the_commit_point_leaves_the_segments_as_they_were(tmp_path, capsys, monkeypatch):
    """The log start checkpoint cannot be written: the partition's segments and checkpoints stay as
    they were, its staged segment and the snapshot written for it go, and no `.tmp` is left."""
    root = _log(tmp_path)
    before = tree(root)
    _refusing(monkeypatch, lambda path: path.endswith("log-start-offset-checkpoint.tmp"), errno.ENOSPC)
    assert _retain(root) == 2
    assert "log-start-offset-checkpoint.tmp: cannot write: No space left on device (ENOSPC)" in _error_line(capsys)
    after = tree(root)
    kept = {k: v for k, v in before.items() if not k.endswith(".snapshot")}  # those below the new start go first
    assert {k: v for k, v in after.items() if not k.endswith(".snapshot")} == kept
    assert {k for k in after if k.endswith(".snapshot")} <= {k for k in before if k.endswith(".snapshot")}
    _no_leftovers(root)
    assert_valid(root)


def test_a_full_disk_while_copying_for_output_names_the_file_and_leaves_no_output(tmp_path, capsys, monkeypatch):
    import shutil

    root = _log(tmp_path)
    out = tmp_path / "out"
    real_copy = shutil.copy2

    def copy2(src, dst, **kwargs):
        if str(dst).endswith(".log"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), src, None, dst)  # as shutil raises it
        return real_copy(src, dst, **kwargs)

    monkeypatch.setattr(shutil, "copy2", copy2)
    before = tree(root)
    assert main(["retain", root, "--config", "retention.ms=10000", "--now", str(NOW), "--output", str(out)]) == 2
    line = _error_line(capsys)
    assert line.startswith(f"kafkalog retain: {out}.kafkalog-incomplete{os.sep}{TOPIC}-"), line  # the file written
    assert line.endswith(".log: cannot write: No space left on device (ENOSPC)"), line
    assert not out.exists() and not list(tmp_path.glob("out.*"))
    assert tree(root) == before


def test_a_partition_removed_between_the_plan_and_the_run_is_one_line_and_changes_nothing(tmp_path):
    """kafkalog.retain's plan lists the log dir; a partition directory removed before its run (a
    broker deleting the topic, an operator) stops the run naming it, before any partition changes."""
    import shutil

    from kafkalog.config import resolver_from
    from kafkalog.errors import LogDirError
    from kafkalog.operations.retain import plan_retain, run_retain
    from kafkalog.storage.logdir import LogDir

    root = _log(tmp_path)
    plan = plan_retain(LogDir.open(root), uri=root, config=resolver_from(settings=["retention.ms=10000"]), now_ms=NOW)
    shutil.rmtree(os.path.join(root, f"{TOPIC}-1"))
    before = tree(root, with_mtime=True)
    with pytest.raises(LogDirError, match=f"{TOPIC}-1: .*gone since the log dir was listed"):
        run_retain(plan)
    assert tree(root, with_mtime=True) == before
