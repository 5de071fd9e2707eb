"""A purge refused before it touches any copy, as a user runs it (`python -m kafkalog purge`, before
Spark starts): a ledger table it could not write or that lies in a log dir it purges. Each ends in
exit 2, one line naming the table, no traceback, and every log dir and the ledger as they were."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from kafkalog.codec.records import Record
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.ledger import RECORDS_SCHEMA, write_records
from kafkalog.storage.log_writer import PartitionWriter

SECRET = b"purge-tests-secret-0123456789abcdef"


def _log_dir(root: Path) -> str:
    root.mkdir()
    (root / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=C5I4OfapQnGBCJcjKe0-pA\n")
    w = PartitionWriter(LogFileSystem.for_path(str(root))[0], str(root), "orders", 0, segment_bytes=300)
    for i in range(10):
        w.append_records([Record(0, 1000 + i, f"key-{i}".encode(), b"value")])
    w.close()
    return str(root)


def _tree(*roots) -> dict:
    """Every file's bytes and every directory under `roots` (what a refusal must leave as it was)."""
    out: dict = {}
    for root in map(Path, roots):
        if root.is_file():
            out[str(root)] = root.read_bytes()
        for path in sorted(root.rglob("*")) if root.is_dir() else ():
            out[str(path)] = path.read_bytes() if path.is_file() else None
    return out


@pytest.fixture
def case(tmp_path):
    (tmp_path / "keys.txt").write_text("key-1\n")
    (tmp_path / "secret").write_bytes(SECRET)
    return tmp_path, _log_dir(tmp_path / "a"), _log_dir(tmp_path / "b")


def _refused(tmp_path: Path, log_dirs: list[str], ledger: str, *extra: str, env=None) -> str:
    """Run the purge; assert it is refused as the module's docstring says; its one line."""
    watched = [*log_dirs, ledger, ledger + "_runs", ledger + "_segments"]
    before = _tree(*watched)
    run = subprocess.run(
        [sys.executable, "-m", "kafkalog", "purge", *log_dirs, "--keys", str(tmp_path / "keys.txt"),
         "--secret-file", str(tmp_path / "secret"), "--ledger", ledger, "--now", "1800000000000", *extra],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, **(env or {})},
    )  # fmt: skip
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert run.stdout == "" and _tree(*watched) == before
    return lines[0]


def test_a_run_table_that_is_a_file_refuses_a_purge_of_two_copies(case):
    tmp_path, a, b = case
    (tmp_path / "LED_runs").write_text("")
    line = _refused(tmp_path, [a, b], str(tmp_path / "LED"))
    assert (
        line.startswith(f"kafkalog purge: {tmp_path / 'LED_runs'}: the run table is a Delta table") and "file" in line
    )


def test_a_ledger_that_is_a_file_or_a_foreign_directory_is_refused(case):
    tmp_path, a, _ = case
    (tmp_path / "LED").write_text("notes\n")
    assert f"{tmp_path / 'LED'}: the ledger is a Delta table" in _refused(tmp_path, [a], str(tmp_path / "LED"))
    (tmp_path / "other").mkdir()
    (tmp_path / "other_segments").mkdir()
    (tmp_path / "other_segments" / "part-0.parquet").write_bytes(b"PAR1")
    line = _refused(tmp_path, [a], str(tmp_path / "other"))
    assert f"{tmp_path / 'other_segments'}: the segments table is not a Delta table" in line


def test_a_damaged_delta_log_is_one_line_even_with_rust_backtraces_on(case):
    tmp_path, a, _ = case
    ledger = str(tmp_path / "LED")
    write_records(ledger, RECORDS_SCHEMA.empty_table())
    (tmp_path / "LED" / "_delta_log" / "00000000000000000001.json").write_text("garbage{\n")
    line = _refused(tmp_path, [a], ledger, env={"RUST_BACKTRACE": "1"})
    assert f"{ledger}: cannot read the ledger: DeltaError:" in line


def test_a_delta_table_kafkalog_did_not_write_is_not_taken_for_the_ledger(case):
    tmp_path, a, _ = case
    write_deltalake(str(tmp_path / "LED_runs"), pa.table({"customer": ["c"]}))
    assert "the run table is a Delta table kafkalog did not write" in _refused(tmp_path, [a], str(tmp_path / "LED"))


@pytest.mark.parametrize("where", ["a", "a/orders-0", "b/audit/ledger", "out/ledger"])
def test_a_ledger_inside_a_log_dir_it_purges_is_refused(case, where):
    """In (or equal to) a log dir, the ledger would be read as part of the log or rewritten with it;
    in the output, replaced when the output is renamed into place."""
    tmp_path, a, b = case
    dirs, extra = ([a], ["--output", str(tmp_path / "out")]) if where.startswith("out") else ([a, b], [])
    line = _refused(tmp_path, dirs, str(tmp_path / where), *extra)
    said = "is the input log directory" if where == "a" else "lies inside the input log directory"
    assert f"{tmp_path / where}: the ledger {said}" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("change", ["a segment grew", "a partition came"])
def test_a_log_dir_changed_between_the_plan_and_the_lock_is_refused_under_the_lock(tmp_path, change):
    """The plan lists before the run takes the lock (the command line's check before Spark starts);
    under the lock the run finds what the plan listed, or refuses: a rewrite of stale segments would
    lose what the plan did not see."""
    from kafkalog.errors import LogDirError
    from kafkalog.operations.purge_plan import plan_purge, settled
    from kafkalog.storage.destination import destination
    from kafkalog.storage.logdir import LogDir

    root = _log_dir(tmp_path / "log")
    plan = plan_purge(LogDir.open(root), [b"key-1"], ledger=str(tmp_path / "ledger"), secret=SECRET)
    with destination(plan.checked[0], None) as target:
        assert settled(plan, [target]).copies[0].segments == plan.scope.copies[0].segments  # nothing changed
    if change == "a segment grew":
        with open(sorted((Path(root) / "orders-0").glob("*.log"))[-1], "ab") as log:
            log.write(b"\0" * 12)
    else:
        (Path(root) / "orders-1").mkdir()
    with destination(plan.checked[0], None) as target, pytest.raises(LogDirError, match="since the plan: another"):
        settled(plan, [target])
