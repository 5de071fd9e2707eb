"""The range path below Spark (spark/ranges.py): each range's task reads its `.log` bytes once to map
its keys and once to rewrite, lists nothing, and the ranges stage the bytes the one-task path stages.
(test_one_task's first test runs it through Spark against every other path.)"""

from __future__ import annotations

import os
import shutil

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog import tuning
from kafkalog.operations.compact import plan_compaction
from kafkalog.rules.compaction import FATES
from kafkalog.rules.ranges import slice_sizes
from kafkalog.scan.inventory import CountingFileSystem, IOStats
from kafkalog.spark import compaction, ranges
from kafkalog.storage.fs import LogFileSystem

from .test_one_task import NOW, RESOLVER, write_log_dir


def staged(root) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.cleaned"))}


def tasks_in_this_process(monkeypatch) -> None:
    """The range path's tasks run here, one after the other, one range each: no Spark."""
    monkeypatch.setattr(ranges, "run_tasks", lambda spark, groups, work: [work(item) for g in groups for item in g])
    monkeypatch.setattr(ranges, "pack_tasks", lambda spark, items, nbytes: [[item] for item in items])
    monkeypatch.setattr(ranges, "default_parallelism", lambda spark: 1)


@pytest.mark.parametrize("records", [None, 7])
def test_ranges_read_each_log_byte_twice_and_stage_what_one_task_stages(tmp_path, monkeypatch, records):
    """With `records`, each range is mapped and rewritten in slices of at most that many records (a
    batch is never cut), and its keys merged in more parts than there are ranges."""
    one, cut = tmp_path / "one", tmp_path / "cut"
    one.mkdir()
    write_log_dir(one)
    shutil.copytree(one, cut)
    plan = plan_compaction(str(one), RESOLVER, NOW, force=True)
    settings = {s.topic: compaction.OutputSettings.of(RESOLVER.for_topic(s.topic), NOW) for s in plan.logs}
    fs = LogFileSystem.for_path(str(one))[0]
    by_one = [
        compaction.clean_partition(fs, str(one), job, NOW, 1 << 30, write=True)
        for job in compaction.one_task_jobs(plan, settings)
    ]

    monkeypatch.setattr(tuning, "RANGE_BYTES", 1)  # a range per output segment
    if records:
        monkeypatch.setattr(tuning, "RANGE_RECORDS", records)
    plan = plan_compaction(str(cut), RESOLVER, NOW, force=True)
    monkeypatch.setattr(LogFileSystem, "list_dir", lambda *a: pytest.fail("a task listed a directory"))
    stats = IOStats()
    fs = CountingFileSystem(LogFileSystem.for_path(str(cut))[0], stats)
    # the steps' Spark jobs run here, one task after the other, on a counting file system
    tasks_in_this_process(monkeypatch)
    monkeypatch.setattr(ranges, "filesystem", lambda root: fs)
    counts = [len(ranges.partition_ranges(plan, log, settings[log.topic])) for log in plan.chosen]
    written, write = [], ranges._write
    monkeypatch.setattr(ranges, "_write", lambda fs, path, table: (written.append(path), write(fs, path, table)))
    by_ranges = ranges.clean_in_ranges(None, plan, plan.chosen, settings, write=True)
    assert max(counts) > 2  # partitions were cut, their keys merged in as many parts
    sliced = [p for p in written if os.path.basename(p).startswith("fates-") and not p.endswith("-0.arrow")]
    assert bool(sliced) == bool(records)  # a range in several slices
    scanned = {seg.log_path: seg.size for s in plan.chosen for seg in plan.scanned(s)}
    assert {p: n for p, n in stats.as_dict().items() if p.endswith(".log")} == {
        path: (2, 2 * size) for path, size in scanned.items()
    }
    assert all(c.error is None for c in by_ranges)
    assert [c.segments for c in by_ranges] == [c.segments for c in by_one]
    assert staged(cut) == staged(one) != {}
    assert not list(cut.rglob(ranges.STAGING))  # the steps' files are gone


def test_a_dry_run_of_a_read_only_log_dir_plans_on_the_range_path(tmp_path, monkeypatch):
    """`kafkalog compact --dry-run` (and `plan`) on a log dir whose disk is mounted read-only (found with
    `mount -o ro`: EROFS at `<log dir>.kafkalog-dry-run-<run>/<partition>`) says what a pass would do, as
    the other paths' dry runs do there."""
    import errno
    import functools

    from kafkalog.storage import fs as fs_module

    root = tmp_path / "log"
    root.mkdir()
    write_log_dir(root)
    monkeypatch.setattr(tuning, "RANGE_BYTES", 1)
    plan = plan_compaction(str(root), RESOLVER, NOW, force=True)
    settings = {s.topic: compaction.OutputSettings.of(RESOLVER.for_topic(s.topic), NOW) for s in plan.logs}
    tasks_in_this_process(monkeypatch)
    writable = ranges.clean_in_ranges(None, plan, plan.chosen, settings, write=False)

    made = LogFileSystem.make_dirs

    @functools.wraps(made)
    def read_only(self, path):  # what a read-only mount answers for anything made in or beside the log dir
        if path.startswith(str(tmp_path)):
            raise fs_module.refused(OSError(errno.EROFS, "Read-only file system"), "create the directory", path)
        return made(self, path)

    monkeypatch.setattr(LogFileSystem, "make_dirs", read_only)
    read_only_run = ranges.clean_in_ranges(None, plan, plan.chosen, settings, write=False)
    assert [c.segments for c in read_only_run] == [c.segments for c in writable] != []
    assert list(tmp_path.iterdir()) == [root]


@pytest.mark.parametrize("on_a_cluster", [False, True])
def test_what_a_killed_dry_run_staged_goes_with_the_next_dry_run_of_its_host(tmp_path, monkeypatch, on_a_cluster):
    """Found with a real `kafkalog compact --dry-run` killed by SIGKILL in its merge step: its staging
    directory (a partition's keys) stayed. A dry run of the same host removes what a process that is gone
    staged (in the temporary directory in local mode, beside the log dir on a cluster), and leaves a
    running one's alone."""
    import socket
    import subprocess
    import sys

    root, temporary = tmp_path / "log", tmp_path / "tmp"
    root.mkdir()
    temporary.mkdir()
    write_log_dir(root)
    monkeypatch.setattr(ranges.tempfile, "tempdir", str(temporary))
    monkeypatch.setattr(ranges, "executors_on_this_host", lambda spark: not on_a_cluster)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    parent, prefix = (
        (tmp_path, f"log.{ranges.DRY_RUN_STAGING}") if on_a_cluster else (temporary, ranges.DRY_RUN_STAGING)
    )
    killed = parent / f"{prefix}{socket.gethostname()}-{gone.stdout.strip()}-0123456789ab"
    running = parent / f"{prefix}{socket.gethostname()}-{os.getppid()}-ba9876543210"
    for left in (killed, running):
        (left / "lag-0").mkdir(parents=True)
        (left / "lag-0" / "map-0-0.arrow").write_bytes(b"keys of the partition")
    monkeypatch.setattr(tuning, "RANGE_BYTES", 1)
    plan = plan_compaction(str(root), RESOLVER, NOW, force=True)
    settings = {s.topic: compaction.OutputSettings.of(RESOLVER.for_topic(s.topic), NOW) for s in plan.logs}
    tasks_in_this_process(monkeypatch)
    assert all(c.error is None for c in ranges.clean_in_ranges(None, plan, plan.chosen, settings, write=False))
    assert not killed.exists() and (running / "lag-0" / "map-0-0.arrow").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["log", "tmp", *[running.name] * on_a_cluster])
    assert list(temporary.iterdir()) == [running] * (not on_a_cluster)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 9), max_size=30), st.lists(st.integers(1, 12), min_size=1), st.integers(1, 15))
def test_a_map_task_slices_its_records_at_batch_boundaries_as_the_rule_cuts_them(sizes, reads, records):
    """The map task's slices (`_slices`) of records read in record batches of any size (a Kafka batch's
    records may straddle two): the rows in file order, each slice the batches rules/ranges.slice_sizes
    gives it, and one empty slice for a range of no records."""
    segment = np.repeat(np.arange(len(sizes)) // 4, sizes).astype(np.int32)  # four batches a segment
    position = np.repeat(np.arange(len(sizes)) * 100, sizes).astype(np.int64)
    n, columns = len(segment), {"segment": segment, "position": position}
    table = pa.table({f.name: columns.get(f.name, pa.nulls(n, f.type)) for f in FATES}, schema=FATES)
    cuts = np.cumsum([0, *(reads * (n // len(reads) + 1))])
    cuts = [c for c in cuts if c < n] + [n]
    read = [table.slice(a, b - a).combine_chunks().to_batches()[0] for a, b in zip(cuts, cuts[1:]) if b > a]
    got = list(ranges._slices(iter(read), records))
    assert pa.concat_tables(got).equals(table)
    want = slice_sizes(sizes, records)
    assert [t.num_rows for t in got] == (
        [sum(sizes[a:b]) for a, b in zip(np.cumsum([0, *want]), np.cumsum(want))] if sizes else [0]
    )


@pytest.mark.parametrize("sorted_parts", [True, False])
def test_a_file_of_parts_gives_each_part_its_rows(tmp_path, sorted_parts):
    """`_write_parts` then `_read_parts`: part j's rows in their order, whether the rows come grouped by
    part (a merge's, in slice order: not sorted again) or not (a map's, by a hash of the key)."""
    part = np.array([0, 0, 2, 2, 2, 3] if sorted_parts else [2, 0, 3, 2, 0, 2])
    table = pa.table({"row": np.arange(len(part))})
    fs = LogFileSystem.for_path(str(tmp_path))[0]
    ranges._write_parts(fs, str(tmp_path / "parts.arrow"), table, part, 5)
    got = [
        ranges._read_parts(fs, str(tmp_path / "parts.arrow"), [j], table.schema)["row"].to_pylist() for j in range(5)
    ]
    assert got == [np.flatnonzero(part == j).tolist() for j in range(5)]
    assert ranges._read_parts(fs, str(tmp_path / "parts.arrow"), [3, 0], table.schema)["row"].to_pylist() == [
        *np.flatnonzero(part == 3).tolist(),
        *np.flatnonzero(part == 0).tolist(),
    ]
