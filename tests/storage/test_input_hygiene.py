"""Hostile log directories (issue 26 §3): special files, symbolic links, clashing segment names.

The commands run in a subprocess with a timeout wherever a regression would hang (a FIFO blocks
its reader until a writer comes), so that it fails instead.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kafkalog.errors import LogDirError
from kafkalog.operations.generate import generate, preset
from kafkalog.storage.fs import LogFileSystem

SEGMENT = "customers-0/00000000000000000060.log"


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("small") / "logs"
    generate(str(root), preset("small", seed=1))
    return root


def _copy(small, tmp_path):
    import shutil

    target = tmp_path / "logs"
    shutil.copytree(small, target)
    return target


def _cli(*args, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "kafkalog", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def _fifo(path):
    path.unlink()
    os.mkfifo(path)


def _unblock_later(fifo, seconds=5.0):
    """Open `fifo` for a moment after `seconds`: a reader stuck in opening it (a regression) then
    reads an empty file and the test fails instead of hanging."""
    import threading

    def touch():
        os.close(os.open(fifo, os.O_RDWR))  # O_RDWR never blocks on Linux

    timer = threading.Timer(seconds, touch)
    timer.daemon = True
    timer.start()
    return timer


def test_every_read_refuses_a_special_file_before_opening_it(tmp_path):
    fs, _ = LogFileSystem.for_path(str(tmp_path))
    os.mkfifo(tmp_path / "pipe")
    timers = [_unblock_later(tmp_path / "pipe") for _ in range(3)]
    for read in (fs.read_bytes, fs.open_input, lambda p: fs.read_range(p, 0, 1)):
        with pytest.raises(LogDirError, match=r"a FIFO \(named pipe\), not a regular file") as caught:
            read(str(tmp_path / "pipe"))
        assert caught.value.file == str(tmp_path / "pipe")
    with pytest.raises(LogDirError, match="a directory, not a regular file"):
        fs.read_bytes(str(tmp_path))
    for timer in timers:
        timer.cancel()


@pytest.mark.parametrize(
    "fifo, command",
    [
        (SEGMENT, "validate"),
        (SEGMENT, "dump"),
        ("cleaner-offset-checkpoint", "validate"),
        ("cleaner-offset-checkpoint", "retain"),
    ],
)
def test_a_fifo_in_the_log_dir_is_one_error_line_not_a_hang(small, tmp_path, fifo, command):
    log = _copy(small, tmp_path)
    _fifo(log / fifo)
    args = {
        "validate": ["validate", log],
        "dump": ["dump", log / SEGMENT],
        "retain": ["retain", log, "--now", "1700100000000", "--config", "retention.ms=1000"],
    }[command]
    done = _cli(*args)
    message = f"{log / fifo}: a FIFO (named pipe), not a regular file"
    if command == "validate":  # a finding: validate goes on with the rest
        check = "partition.not_regular" if fifo == SEGMENT else "checkpoint.parse"
        assert done.returncode == 1 and f"{check}: {fifo}: " in done.stdout
        assert "a FIFO (named pipe), not a regular file" in done.stdout
    else:
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [f"kafkalog {command}: {message}: kafkalog reads only regular files"]
    assert os.path.exists(log / fifo) and not os.path.isfile(log / fifo)


def test_an_output_copy_refuses_a_fifo_and_leaves_nothing(small, tmp_path):
    from kafkalog.storage.destination import STAGING_SUFFIX, destination

    log = _copy(small, tmp_path)
    _fifo(log / SEGMENT)
    out = tmp_path / "out"
    with pytest.raises(LogDirError, match="a FIFO"), destination(str(log), str(out)):
        pass
    assert not out.exists() and not (tmp_path / ("out" + STAGING_SUFFIX)).exists()


# -- a partition directory that is a symbolic link ---------------------------------------------------


def _tree(path):
    """Every file under `path` with its bytes: to show a directory was not changed."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture
def linked(small, tmp_path):
    """A log dir whose customers-0 is a symbolic link to a directory outside it."""
    log = _copy(small, tmp_path)
    outside = tmp_path / "elsewhere" / "customers-0"
    outside.parent.mkdir()
    (log / "customers-0").rename(outside)
    (log / "customers-0").symlink_to(outside)
    return log, outside


def test_the_log_dir_lists_each_linked_partition_dir_with_its_target(linked):
    from kafkalog.storage.logdir import LogDir

    log, outside = linked
    opened = LogDir.open(str(log))
    assert opened.linked_dirs == {str(log / "customers-0"): str(outside)}
    assert ("customers", 0) in opened.partition_paths  # still read, as Kafka reads it
    with pytest.raises(LogDirError) as caught:
        opened.ensure_no_linked_partition_dirs()
    assert caught.value.file == str(log / "customers-0") and str(outside) in caught.value.message


@pytest.mark.parametrize("command", ["compact", "retain", "purge"])
def test_an_in_place_run_refuses_a_linked_partition_dir_in_one_line(linked, tmp_path, command):
    """Refused before anything is read or written (and before Spark starts): exit 2, one line naming
    the link and its target, and the directory it leads to is unchanged."""
    log, outside = linked
    before = _tree(outside)
    extra = {
        "compact": ["--config", "cleanup.policy=compact", "--force"],
        "retain": ["--config", "retention.ms=1"],
        "purge": ["--keys", tmp_path / "keys.txt", "--ledger", tmp_path / "ledger"],
    }[command]
    (tmp_path / "keys.txt").write_text("k\n")
    done = subprocess.run(
        [sys.executable, "-m", "kafkalog", command, str(log), "--now", "1700100000000", *map(str, extra)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "KAFKALOG_PURGE_SECRET": "a secret of sixteen bytes or more"},
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"kafkalog {command}: {log / 'customers-0'}: "), lines
    assert f"symbolic link to {outside}" in lines[0] and "--follow-symlinks" in lines[0]
    assert _tree(outside) == before


def test_dry_runs_outputs_and_follow_symlinks_name_the_link_in_a_warning(linked, tmp_path, caplog):
    from kafkalog.storage.destination import destination

    log, outside = linked
    cases = [
        ({"output": None, "dry_run": True}, "an in-place run refuses it without --follow-symlinks"),
        (
            {"output": None, "dry_run": True, "follow_symlinks": True},
            "an in-place run would rewrite there (--follow-symlinks)",
        ),
        ({"output": str(tmp_path / "out")}, "read through it: --output copies what it leads to"),
        ({"output": None, "follow_symlinks": True}, "rewritten there (--follow-symlinks)"),
    ]
    for options, consequence in cases:
        caplog.clear()
        with destination(str(log), **options):
            pass
        assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
            f"partition directory {log / 'customers-0'} is a symbolic link to {outside}: {consequence}"
        ]
    out = tmp_path / "out" / "customers-0"
    assert not out.is_symlink() and _tree(out) == _tree(outside)  # the copy holds what the link leads to


def test_retain_follows_a_linked_partition_dir_when_told(linked):
    from kafkalog.operations.retain import retain

    log, outside = linked
    before = _tree(outside)
    with pytest.raises(LogDirError, match="symbolic link"):
        retain(str(log), config={"retention.ms": "1"}, now_ms=1700100000000)
    assert _tree(outside) == before
    report = retain(str(log), config={"retention.ms": "1"}, now_ms=1700100000000, follow_symlinks=True)
    assert report.summary() and _tree(outside) != before
    assert (log / "customers-0").is_symlink()


@pytest.mark.parametrize("command", ["compact", "retain", "purge"])
def test_the_cli_and_the_jobs_take_follow_symlinks(command):
    from kafkalog.cli import build_parser
    from kafkalog.jobs import job_arguments

    extra = ["--keys", "k.txt"] if command == "purge" else []
    assert build_parser().parse_args([command, "logs", *extra, "--follow-symlinks"]).follow_symlinks
    assert job_arguments(command, ["logs", *extra, "--follow-symlinks"], {}) == ["logs", *extra, "--follow-symlinks"]


# -- segment file names that are not Kafka's ---------------------------------------------------------


def _misname(log, kind):
    """customers-0 with a second .log at base offset 123 under a 19-digit name ("clash"), or its
    segment 123's files renamed to names without the padding ("short")."""
    part = log / "customers-0"
    if kind == "clash":
        (part / "0000000000000000123.log").write_bytes((part / "00000000000000000123.log").read_bytes())
        return part / "0000000000000000123.log"
    for suffix in (".log", ".index", ".timeindex", ".snapshot"):
        (part / f"00000000000000000123{suffix}").rename(part / f"123{suffix}")
    return part / "123.index"


def test_a_partition_lists_the_files_whose_offset_is_not_written_in_20_digits(small, tmp_path):
    from kafkalog.storage.logdir import LogDir

    log = _copy(small, tmp_path)
    clash = _misname(log, "clash")
    part = LogDir.open(str(log)).partition("customers", 0)
    reason = "its base offset is written in 19 digits, not 20; 00000000000000000123.log names the same base offset"
    assert part.misnamed == {str(clash): reason}
    with pytest.raises(LogDirError, match="not a segment file name Kafka writes") as caught:
        part.ensure_well_named()
    assert caught.value.file == str(clash)
    assert LogDir.open(str(small)).partition("customers", 0).misnamed == {}


@pytest.mark.parametrize("kind", ["clash", "short"])
@pytest.mark.parametrize("command", ["validate", "compact", "retain", "purge"])
def test_a_partition_with_misnamed_files_is_damaged(small, tmp_path, kind, command):
    """validate: an ERROR; compact: uncleanable; retain and purge: refused (the CLI exits 2). Below
    Spark: the compaction plan, retain, and purge's opening of the partitions it will rewrite."""
    from kafkalog.config import ConfigResolver
    from kafkalog.operations.compact import plan_compaction
    from kafkalog.operations.purge_plan import plan_purge
    from kafkalog.operations.retain import retain
    from kafkalog.operations.validate import validate_paths
    from kafkalog.storage.logdir import LogDir

    log = _copy(small, tmp_path)
    bad = _misname(log, kind)
    before = _tree(log)
    if command == "validate":
        report = validate_paths([str(log)])
        found = [p for p in report.findings if p.check == "partition.file_name"]
        assert found and found[0].severity == "error" and found[0].file.endswith(bad.name)
    elif command == "compact":
        resolver = ConfigResolver(topics_default={"cleanup.policy": "compact"})
        plan = plan_compaction(str(log), resolver, 1700100000000, force=True)
        assert set(plan.uncleanable) == {("customers", 0)}
        assert "not a segment file name Kafka writes" in str(plan.uncleanable[("customers", 0)])
    else:
        with pytest.raises(LogDirError, match="not a segment file name Kafka writes"):
            if command == "retain":
                retain(str(log), config={"retention.ms": "1"}, now_ms=1700100000000)
            else:
                plan_purge(LogDir.open(str(log)), [], dry_run=True)
    assert _tree(log) == before


# -- a control batch without the transactional flag ------------------------------------------------

T0 = 1_700_000_000_000


def write_control_flag_log(root, *, topic="t", control_key=b"key-3", transactional=False):
    """One partition: six data batches, a control batch whose first record has `control_key` (the
    control flag set on what could be a data batch, the CRC computed over it), six more, and a
    rolled active segment. Returns the control batch's offset."""
    from kafkalog.codec.batch import build_batch
    from kafkalog.codec.control import END_TXN_MARKER_VALUE
    from kafkalog.codec.records import Record
    from kafkalog.storage.log_writer import PartitionWriter

    fs, path = LogFileSystem.for_path(str(root))
    writer = PartitionWriter(fs, path, topic, 0)
    offset = 0

    def data(value: str) -> None:
        nonlocal offset
        record = Record(offset, T0 + offset, f"key-{offset % 3}".encode(), f"{value}-{offset}".encode())
        writer.append(build_batch([record], base_offset=offset, partition_leader_epoch=0))
        offset += 1

    for _ in range(6):
        data("old")
    control = offset
    producer = {"producer_id": 7, "producer_epoch": 0} if transactional else {}
    record = Record(offset, T0 + offset, control_key, END_TXN_MARKER_VALUE.pack(0, 0))
    writer.append(
        build_batch(
            [record],
            base_offset=offset,
            partition_leader_epoch=0,
            is_control=True,
            is_transactional=transactional,
            **producer,
        )
    )
    offset += 1
    for _ in range(6):
        data("new")
    writer.roll()
    data("active")
    writer.close()
    return control


COMMIT_KEY = b"\x00\x00\x00\x01"  # version 0, COMMIT


@pytest.mark.parametrize("control_key, name", [(b"key-3", "UNKNOWN"), (COMMIT_KEY, "COMMIT")])
def test_validate_reports_a_control_batch_without_the_transactional_flag(tmp_path, control_key, name):
    from kafkalog.operations.validate import validate_paths

    control = write_control_flag_log(tmp_path / "logs", control_key=control_key)
    report = validate_paths([str(tmp_path / "logs")])
    found = [p for p in report.findings if p.check == "batch.control_flags"]
    assert [(p.severity, p.offset) for p in found] == [("error", control)]
    assert f"a control batch ({name}) without the transactional flag" in found[0].message
    assert report.exit_code == 1


@pytest.mark.parametrize("topic, transactional", [("__cluster_metadata", False), ("t", True)], ids=["kraft", "marker"])
def test_validate_accepts_krafts_control_batches_and_transaction_markers(tmp_path, topic, transactional):
    from kafkalog.operations.validate import validate_paths

    write_control_flag_log(tmp_path / "logs", topic=topic, control_key=COMMIT_KEY, transactional=transactional)
    report = validate_paths([str(tmp_path / "logs")])
    assert not [p for p in report.findings if p.check == "batch.control_flags"]
