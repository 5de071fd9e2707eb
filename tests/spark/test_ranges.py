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
    by_ranges = []
    for log in plan.chosen:
        cuts = ranges.partition_ranges(plan, log, settings[log.topic])
        maps = [ranges._map_range(fs, r, NOW) for r in cuts]
        merged = ranges._merge(cuts, maps, NOW)
        by_ranges.append([ranges._rewrite_range(fs, str(cut), r, m, now=NOW, write=True) for r, m in zip(cuts, merged)])
    assert max(len(rs) for rs in by_ranges) > 2  # partitions were cut
    scanned = {seg.log_path: seg.size for s in plan.chosen for seg in plan.scanned(s)}
    assert stats.as_dict() == {path: (2, 2 * size) for path, size in scanned.items()}
    assert all(c.error is None for rs in by_ranges for c in rs)
    assert [[row for c in rs for row in c.segments] for rs in by_ranges] == [c.segments for c in by_one]
    assert staged(cut) == staged(one) != {}
