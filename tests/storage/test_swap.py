"""The swap protocol, crashed at every step and recovered: LCT.testRecoveryAfterCrash stages 1-6."""

from __future__ import annotations

import os
import threading

import pytest

from kafkalog.codec.batch import build_batch
from kafkalog.codec.reader import iter_batches
from kafkalog.codec.records import Record
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.swap import in_flight_files, recover_partition, replace_in_partitions, replace_segments


class Crash(Exception):
    pass


def _write_segment(d, base, offsets, state=""):
    data = b"".join(build_batch([Record(o, 1000 + o, b"k%d" % (o % 3), b"v%d" % o)]) for o in offsets)
    (d / f"{base:020d}.log{state}").write_bytes(data)
    (d / f"{base:020d}.index{state}").write_bytes(b"")
    (d / f"{base:020d}.timeindex{state}").write_bytes(b"")


def _old_state(d):
    _write_segment(d, 0, range(0, 5))
    _write_segment(d, 5, range(5, 10))
    _write_segment(d, 10, range(10, 12))  # the active segment, not rewritten
    (d / f"{5:020d}.snapshot").write_bytes(b"s5")
    (d / f"{10:020d}.snapshot").write_bytes(b"s10")


OLD = list(range(12))
NEW = [3, 4, 8, 9, 10, 11]  # the new segment 0 keeps offsets 3, 4, 8, 9


def _stage(d):
    _write_segment(d, 0, [3, 4, 8, 9], state=".cleaned")


def _offsets(d):
    out = []
    for name in sorted(os.listdir(d)):
        if name.endswith(".log"):
            out += [b.base_offset for b in iter_batches((d / name).read_bytes())]
    return out


def _count_steps(tmp_path):
    d = tmp_path / "count" / "t-0"
    d.mkdir(parents=True)
    _old_state(d)
    _stage(d)
    steps = []
    fs = LogFileSystem.for_path(str(d))[0]
    replace_segments(fs, str(d), [0], [0, 5], fault=lambda step, name: steps.append((step, name)))
    return steps


def test_swap_completes_and_removes_snapshots_of_removed_segments(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    _old_state(d)
    _stage(d)
    fs = LogFileSystem.for_path(str(d))[0]
    replace_segments(fs, str(d), [0], [0, 5])
    assert _offsets(d) == NEW
    names = sorted(os.listdir(d))
    assert not in_flight_files(fs, str(d))
    assert f"{5:020d}.snapshot" not in names and f"{10:020d}.snapshot" in names
    assert f"{5:020d}.log" not in names


def test_crash_at_every_step_recovers_old_or_new__LCT_testRecoveryAfterCrash(tmp_path):
    steps = _count_steps(tmp_path)
    assert len(steps) > 8
    outcomes = set()
    for i, crash_step in enumerate(steps):
        d = tmp_path / f"crash{i}" / "t-0"
        d.mkdir(parents=True)
        _old_state(d)
        _stage(d)
        fs = LogFileSystem.for_path(str(d))[0]
        seen = []

        def fault(step, name, seen=seen, i=i):
            seen.append((step, name))
            if len(seen) == i + 1:
                raise Crash(step)

        with pytest.raises(Crash):
            replace_segments(fs, str(d), [0], [0, 5], fault=fault)
        recover_partition(fs, str(d))
        assert not in_flight_files(fs, str(d)), crash_step
        got = _offsets(d)
        assert got in (OLD, NEW), (crash_step, got)
        outcomes.add(tuple(got))
        # every segment that is there has its .log (no orphan index files after recovery)
        bases = {n.split(".")[0] for n in os.listdir(d) if not n.endswith(".snapshot")}
        assert all((d / f"{b}.log").exists() for b in bases), crash_step
    assert outcomes == {tuple(OLD), tuple(NEW)}  # crashes early roll back, crashes late complete


def test_recovery_of_a_clean_directory_does_nothing(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    _old_state(d)
    fs = LogFileSystem.for_path(str(d))[0]
    assert recover_partition(fs, str(d)) == []
    assert _offsets(d) == OLD


def test_partitions_swapped_together_and_a_crash_in_one_leaves_the_others_whole(tmp_path):
    """replace_in_partitions swaps many partitions at once; when one crashes mid-way, the others end
    their swap before the error is raised, and the crashed one recovers to its old or new state."""
    dirs = []
    for p in range(12):
        d = tmp_path / f"t-{p}"
        d.mkdir()
        _old_state(d)
        _stage(d)
        dirs.append(d)
    fs = LogFileSystem.for_path(str(tmp_path))[0]
    replace_in_partitions(fs, {str(d): ([0], [0, 5]) for d in dirs[:6]})
    assert all(_offsets(d) == NEW and not in_flight_files(fs, str(d)) for d in dirs[:6])

    crashes = []
    lock = threading.Lock()

    def crash_once(step, name):  # the first partition to rename its old segment 5 crashes there
        with lock:
            if step == "old-deleted" and name == f"{5:020d}.log" and not crashes:
                crashes.append(name)
                raise Crash(name)

    with pytest.raises(Crash):
        replace_in_partitions(fs, {str(d): ([0], [0, 5]) for d in dirs[6:]}, fault=crash_once)
    interrupted = [d for d in dirs[6:] if in_flight_files(fs, str(d))]
    assert len(interrupted) == 1
    assert all(_offsets(d) == NEW for d in dirs[6:] if d not in interrupted)
    recover_partition(fs, str(interrupted[0]))
    assert _offsets(interrupted[0]) in (OLD, NEW)
