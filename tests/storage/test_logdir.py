"""Log directories as a whole: the broker's lock, interrupted swaps, index rebuilds."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from kafkalog.cli import main
from kafkalog.errors import LogDirError
from kafkalog.storage.generator import generate, preset
from kafkalog.storage.index import build_indexes
from kafkalog.storage.logdir import LogDir

from ..conftest import REAL_FIXTURES

HOLD_LOCK = """
import fcntl, sys, time
f = open(sys.argv[1], "rb+")
fcntl.lockf(f, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(30)
"""


def test_a_live_brokers_lock_is_refused_a_stale_one_is_not(tmp_path):
    log_dir = tmp_path / "logs"
    shutil.copytree(REAL_FIXTURES / "broker-dirs" / "kafka-3.1.0", log_dir)
    LogDir.open(str(log_dir)).ensure_unlocked()  # an empty .lock left by a stopped broker is normal
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(log_dir / ".lock")], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(LogDirError, match="locked by a running process"):
            LogDir.open(str(log_dir)).ensure_unlocked()
    finally:
        holder.kill()
        holder.wait()
    LogDir.open(str(log_dir)).ensure_unlocked()


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
            offset_index, time_index = build_indexes(seg.batch_summaries(), seg.base_offset,
                                                     intervals.get(part.topic, 4096))
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
