"""The range path below Spark (spark/ranges.py): each range's task reads its `.log` bytes once to map
its keys and once to rewrite, lists nothing, and the ranges stage the bytes the one-task path stages.
(test_one_task's first test runs it through Spark against every other path.)"""

from __future__ import annotations

import shutil

import pytest

from kafkalog import tuning
from kafkalog.operations.compact import plan_compaction
from kafkalog.scan.inventory import CountingFileSystem, IOStats
from kafkalog.spark import compaction, ranges
from kafkalog.storage.fs import LogFileSystem

from .test_one_task import NOW, RESOLVER, write_log_dir


def staged(root) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.cleaned"))}


def test_ranges_read_each_log_byte_twice_and_stage_what_one_task_stages(tmp_path, monkeypatch):
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
    plan = plan_compaction(str(cut), RESOLVER, NOW, force=True)
    monkeypatch.setattr(LogFileSystem, "list_dir", lambda *a: pytest.fail("a task listed a directory"))
    stats = IOStats()
    fs = CountingFileSystem(LogFileSystem.for_path(str(cut))[0], stats)
    # the steps' Spark jobs run here, one task after the other, on a counting file system
    monkeypatch.setattr(ranges, "run_tasks", lambda spark, groups, work: [work(item) for g in groups for item in g])
    monkeypatch.setattr(ranges, "pack_tasks", lambda spark, items, nbytes: [[item] for item in items])
    monkeypatch.setattr(ranges, "default_parallelism", lambda spark: 1)
    monkeypatch.setattr(ranges, "filesystem", lambda root: fs)
    counts = [len(ranges.partition_ranges(plan, log, settings[log.topic])) for log in plan.chosen]
    by_ranges = ranges.clean_in_ranges(None, plan, plan.chosen, settings, write=True)
    assert max(counts) > 2  # partitions were cut, their keys merged in as many parts
    scanned = {seg.log_path: seg.size for s in plan.chosen for seg in plan.scanned(s)}
    assert {p: n for p, n in stats.as_dict().items() if p.endswith(".log")} == {
        path: (2, 2 * size) for path, size in scanned.items()
    }
    assert all(c.error is None for c in by_ranges)
    assert [c.segments for c in by_ranges] == [c.segments for c in by_one]
    assert staged(cut) == staged(one) != {}
    assert not list(cut.rglob(ranges.STAGING))  # the steps' files are gone


@pytest.mark.xfail(
    strict=True,
    reason="a dry run on the range path stages beside the log dir (<log dir>.kafkalog-dry-run-<run>) and fails "
    "where that cannot be written (a read-only mount or snapshot of a stopped broker's disk), while the "
    "one-task and window paths' dry runs write nothing; spark/ranges.py is being rewritten by another helper",
)
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
    monkeypatch.setattr(ranges, "run_tasks", lambda spark, groups, work: [work(item) for g in groups for item in g])
    monkeypatch.setattr(ranges, "pack_tasks", lambda spark, items, nbytes: [[item] for item in items])
    monkeypatch.setattr(ranges, "default_parallelism", lambda spark: 1)
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


@pytest.mark.xfail(
    strict=True,
    reason="a dry run killed (kill -9) on the range path leaves <log dir>.kafkalog-dry-run-<run> beside the log "
    "dir, and no later run removes or names it (each stages under a new name); spark/ranges.py is being "
    "rewritten by another helper",
)
def test_what_a_killed_dry_run_staged_beside_the_log_dir_goes_with_the_next_run(tmp_path, monkeypatch):
    """Found with a real `kafkalog compact --dry-run` killed by SIGKILL in its merge step: the staging
    directory beside the log dir stayed, with its maps (a partition's keys), after the next dry run."""
    root = tmp_path / "log"
    root.mkdir()
    write_log_dir(root)
    left = tmp_path / f"log{ranges.DRY_RUN_STAGING}0123456789ab"  # as the killed run left it
    (left / "lag-0").mkdir(parents=True)
    (left / "lag-0" / "map-0-0.arrow").write_bytes(b"keys of the partition")
    monkeypatch.setattr(tuning, "RANGE_BYTES", 1)
    plan = plan_compaction(str(root), RESOLVER, NOW, force=True)
    settings = {s.topic: compaction.OutputSettings.of(RESOLVER.for_topic(s.topic), NOW) for s in plan.logs}
    monkeypatch.setattr(ranges, "run_tasks", lambda spark, groups, work: [work(item) for g in groups for item in g])
    monkeypatch.setattr(ranges, "pack_tasks", lambda spark, items, nbytes: [[item] for item in items])
    monkeypatch.setattr(ranges, "default_parallelism", lambda spark: 1)
    assert all(c.error is None for c in ranges.clean_in_ranges(None, plan, plan.chosen, settings, write=False))
    assert list(tmp_path.iterdir()) == [root]
