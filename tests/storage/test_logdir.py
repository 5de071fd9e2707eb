"""Log directories as a whole: the broker's lock, interrupted swaps, index rebuilds."""

from __future__ import annotations

import shutil
import subprocess
import sys
from contextlib import contextmanager

import pyarrow.fs as pafs
import pytest

from kafkalog.cli import main
from kafkalog.errors import LogDirError
from kafkalog.operations.generate import generate, preset
from kafkalog.operations.validate import validate_paths
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.index import build_indexes
from kafkalog.storage.logdir import LogDir

from ..conftest import REAL_FIXTURES

# A process that takes the .lock file with one kind of lock: "lockf" is a POSIX record lock (what a
# broker's FileChannel.tryLock takes), "flock" a flock(2) lock (what flock(1) and some wrappers take).
# "hold" keeps it until stdin closes; "try" reports whether it could be taken without waiting.
LOCKER = """
import fcntl, sys
path, kind, mode = sys.argv[1:]
f = open(path, "a+")
lock = fcntl.lockf if kind == "lockf" else fcntl.flock
if mode == "hold":
    lock(f, fcntl.LOCK_EX)
    print("locked", flush=True)
    sys.stdin.read()
else:
    try:
        lock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        print("acquired")
    except OSError:
        print("refused")
"""


@contextmanager
def held(lock_file, kind):
    """Another process holding `lock_file` with `kind` ("lockf", "flock", or "flock(1)": the
    util-linux command) for the length of the block."""
    if kind == "flock(1)":
        command = ["flock", "--exclusive", str(lock_file), "sh", "-c", "echo locked; exec cat"]
    else:
        command = [sys.executable, "-c", LOCKER, str(lock_file), kind, "hold"]
    holder = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)


def can_lock(lock_file, kind) -> bool:
    """Whether another process can take `lock_file` exclusively with `kind` at once."""
    out = subprocess.run(
        [sys.executable, "-c", LOCKER, str(lock_file), kind, "try"],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    ).stdout.strip()
    assert out in ("acquired", "refused"), out
    return out == "acquired"


HOLDERS = [
    "lockf",
    "flock",
    pytest.param(
        "flock(1)",
        marks=pytest.mark.skipif(
            shutil.which("flock") is None, reason="util-linux flock(1) is not installed; the flock(2) case covers it"
        ),
    ),
]


@pytest.fixture
def broker_dir(tmp_path):
    log_dir = tmp_path / "logs"
    shutil.copytree(REAL_FIXTURES / "broker-dirs" / "kafka-3.1.0", log_dir)
    return log_dir


@pytest.mark.parametrize("kind", HOLDERS)
def test_a_held_lock_of_either_kind_is_refused_a_stale_one_is_not(broker_dir, kind):
    LogDir.open(str(broker_dir)).ensure_unlocked()  # an empty .lock left by a stopped broker is normal
    with held(broker_dir / ".lock", kind):
        with pytest.raises(
            LogDirError,
            match=r"locked by another process \(a running broker or another kafkalog "
            r"run\)",
        ) as refused:
            LogDir.open(str(broker_dir)).ensure_unlocked()
        assert refused.value.file == str(broker_dir / ".lock")
        with pytest.raises(LogDirError, match="locked by another process"):
            with LogDir.open(str(broker_dir)).locked():
                pytest.fail("the block ran while another process held the lock")
    LogDir.open(str(broker_dir)).ensure_unlocked()
    with LogDir.open(str(broker_dir)).locked():
        pass


def test_our_lock_keeps_brokers_and_flock_users_out_until_released(broker_dir):
    lock_file = broker_dir / ".lock"
    log_dir = LogDir.open(str(broker_dir))
    assert can_lock(lock_file, "lockf") and can_lock(lock_file, "flock")
    with log_dir.locked():
        assert not can_lock(lock_file, "lockf")  # a broker's tryLock fails: it refuses the directory
        assert not can_lock(lock_file, "flock")
        log_dir.ensure_unlocked()  # our own lock is no reason to refuse, and testing it keeps it held
        LogDir.open(str(broker_dir)).ensure_unlocked()
        assert not can_lock(lock_file, "lockf") and not can_lock(lock_file, "flock")
    assert can_lock(lock_file, "lockf") and can_lock(lock_file, "flock")


def test_the_lock_is_released_when_the_block_raises(broker_dir):
    lock_file = broker_dir / ".lock"
    with pytest.raises(RuntimeError, match="boom"):
        with LogDir.open(str(broker_dir)).locked():
            assert not can_lock(lock_file, "lockf")
            raise RuntimeError("boom")
    assert can_lock(lock_file, "lockf") and can_lock(lock_file, "flock")
    with LogDir.open(str(broker_dir)).locked():  # and this process may take it again
        assert not can_lock(lock_file, "flock")


def test_a_second_lock_from_the_same_process_is_refused_and_the_first_stays(broker_dir):
    lock_file = broker_dir / ".lock"
    with LogDir.open(str(broker_dir)).locked():
        with pytest.raises(LogDirError, match="this process already holds the log directory's lock"):
            with LogDir.open(str(broker_dir / ".." / "logs")).locked():  # the same directory by another path
                pytest.fail("a nested rewrite of the same directory ran")
        assert not can_lock(lock_file, "lockf") and not can_lock(lock_file, "flock")
    assert can_lock(lock_file, "lockf")


def test_locking_creates_the_lock_file_as_kafka_does(tmp_path):
    generate(str(tmp_path / "logs"), preset("small", seed=1))
    lock_file = tmp_path / "logs" / ".lock"
    lock_file.unlink(missing_ok=True)
    with LogDir.open(str(tmp_path / "logs")).locked():
        assert lock_file.is_file()
        assert not can_lock(lock_file, "lockf")
    assert lock_file.is_file() and can_lock(lock_file, "lockf")


def test_a_non_local_filesystem_has_no_lock_to_take(tmp_path):
    (tmp_path / "logs").mkdir()
    fs = LogFileSystem(pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem()))
    assert not fs.is_local
    log_dir = LogDir(fs, "logs")
    log_dir.ensure_unlocked()
    with log_dir.locked():
        with log_dir.locked():  # nothing is held, so nothing refuses
            pass
    assert not (tmp_path / "logs" / ".lock").exists()


# -- partition directories Kafka could not have made ----------------------------------------------

ILLEGAL_NAMES = ["..-0", "my topic-0", "new\nline-1", "t" * 250 + "-0", "caf\u00e9-0", "orders-007"]


@pytest.fixture
def log_with_illegal_dirs(tmp_path):
    root = tmp_path / "logs"
    generate(str(root), preset("small", seed=2))
    source = next(p for p in sorted(root.iterdir()) if p.is_dir())
    for name in ILLEGAL_NAMES:
        shutil.copytree(source, root / name)
    return root, source


def test_illegal_partition_dirs_are_kept_apart_and_refuse_a_rewrite(log_with_illegal_dirs):
    root, source = log_with_illegal_dirs
    log_dir = LogDir.open(str(root))
    assert sorted(log_dir.illegal_dirs) == sorted(str(root / n) for n in ILLEGAL_NAMES)
    assert "'..'" in log_dir.illegal_dirs[str(root / "..-0")]
    assert "' '" in log_dir.illegal_dirs[str(root / "my topic-0")]
    assert "249" in log_dir.illegal_dirs[str(root / ("t" * 250 + "-0"))]
    assert "leading zeros" in log_dir.illegal_dirs[str(root / "orders-007")]
    assert all("/" not in tp[0] and " " not in tp[0] for tp in log_dir.topic_partitions)
    assert ("orders", 7) not in log_dir.partition_paths and ("my topic", 0) not in log_dir.partition_paths
    # the legal partitions still read
    topic, number = source.name.rsplit("-", 1)
    assert sum(1 for seg in log_dir.partition(topic, int(number)).segments for _ in seg.batches()) > 0
    with pytest.raises(LogDirError, match="not a partition directory Kafka could have made") as refused:
        log_dir.ensure_legal_partition_dirs()
    assert refused.value.file == min(str(root / n) for n in ILLEGAL_NAMES)
    assert f"{len(ILLEGAL_NAMES) - 1} more such directories" in str(refused.value)
    for name in ILLEGAL_NAMES:
        shutil.rmtree(root / name)
    LogDir.open(str(root)).ensure_legal_partition_dirs()


def test_validate_reports_each_illegal_partition_dir(log_with_illegal_dirs, capsys):
    root, _ = log_with_illegal_dirs
    report = validate_paths([str(root)])
    named = {f.file for f in report.findings if f.check == "partition.illegal_name"}
    assert named == {str(root / n) for n in ILLEGAL_NAMES}
    assert all(f.severity == "error" for f in report.findings if f.check == "partition.illegal_name")
    assert report.exit_code == 1
    # a clean copy of the same log has no such finding
    for name in ILLEGAL_NAMES:
        shutil.rmtree(root / name)
    assert not [f for f in validate_paths([str(root)]).findings if f.check == "partition.illegal_name"]
    # a partition directory given alone is checked too
    (root / "bad name-3").mkdir()
    assert [
        f.file for f in validate_paths([str(root / "bad name-3")]).findings if f.check == "partition.illegal_name"
    ] == [str(root / "bad name-3")]
    (root / "new\nline-1").mkdir()
    assert main(["validate", str(root)]) == 1
    out = capsys.readouterr().out
    assert "ERROR   partition.illegal_name: bad name-3: " in out
    assert "ERROR   partition.illegal_name: new\\nline-1: " in out  # printed on one line


def test_dump_refuses_an_interrupted_swap(tmp_path, capsys):
    log_dir = tmp_path / "logs"
    shutil.copytree(REAL_FIXTURES / "broker-dirs" / "kafka-3.1.0", log_dir)
    part = next(p for p in log_dir.iterdir() if p.is_dir() and p.name.startswith("cities"))
    log = next(part.glob("*.log"))
    shutil.copy(log, str(log) + ".swap")
    assert main(["dump", str(log_dir)]) == 2
    assert "interrupted rewrite" in capsys.readouterr().err


def test_deleted_indexes_rebuild_to_the_same_bytes(tmp_path):
    spec = preset("small", seed=3)
    generate(str(tmp_path / "logs"), spec)
    log_dir = LogDir.open(str(tmp_path / "logs"))
    intervals = {t.name: t.index_interval_bytes for t in spec.topics}
    checked = 0
    for part in log_dir.partitions():
        for seg in part.segments[:-1]:
            original = (seg.read(".index"), seg.read(".timeindex"))
            offset_index, time_index = build_indexes(
                seg.batch_summaries(), seg.base_offset, intervals.get(part.topic, 4096)
            )
            assert (offset_index.to_bytes(), time_index.to_bytes()) == original, seg.log_path
            checked += 1
    assert checked > 10


def test_segment_reader_chunks_give_file_positions(tmp_path):
    """A segment read in chunks smaller than it yields the same batches at the same file positions."""
    generate(str(tmp_path / "logs"), preset("small", seed=5))
    part = max(LogDir.open(str(tmp_path / "logs")).partitions(), key=lambda p: p.segments[0].size)
    seg = part.segments[0]
    whole = [(pos, b.base_offset, b.size) for pos, b in seg.reader(chunk_size=1 << 30)]
    small = [(pos, b.base_offset, b.size) for pos, b in seg.reader(chunk_size=100)]
    assert whole == small and len(whole) > 3
    assert [s.position for s in seg.batch_summaries()] == [p for p, _, _ in whole]


def test_the_offset_checkpoints_are_read_once_for_every_partition(tmp_path):
    from kafkalog.storage.naming import LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT

    log = LogDir.open(str(tmp_path))
    assert log.offset_checkpoints().of(("t", 0)) == {"log_start_checkpoint": None, "high_watermark_checkpoint": None}
    log.write_checkpoint(LOG_START_OFFSET_CHECKPOINT, {("t", 0): 7})
    log.write_checkpoint(REPLICATION_OFFSET_CHECKPOINT, {("t", 0): 9, ("t", 1): 4})
    checkpoints = log.offset_checkpoints()
    assert checkpoints.of(("t", 0)) == {"log_start_checkpoint": 7, "high_watermark_checkpoint": 9}
    assert checkpoints.of(("t", 1)) == {"log_start_checkpoint": None, "high_watermark_checkpoint": 4}
