"""The compaction report's `bytes_removed` (issue 40): after a pass, the bytes its partitions' `.log`
files lost; in a dry run, an estimate from the decisions, the same by both paths, never negative and
never more than the bytes read. On a generated log whose compacted topics include legacy v0 and v1
(gzip wrappers) ones, and v2 ones compressed with zstd and lz4."""

from __future__ import annotations

from kafkalog import tuning
from kafkalog.config import resolver_from
from kafkalog.operations.compact import compact
from kafkalog.operations.generate import generate
from kafkalog.operations.generate_spec import DEFAULT_START_MS, preset

TOPICS = ["customers", "legacy-v0", "legacy-v1", "orders"]
NOW = DEFAULT_START_MS + 7 * 24 * 3600 * 1000
RESOLVER = resolver_from(settings=["cleanup.policy=compact"])


def log_bytes(root) -> dict:
    """The bytes of each partition's `.log` files."""
    sizes: dict = {}
    for path in root.glob("*/*.log"):
        topic, _, partition = path.parent.name.rpartition("-")
        sizes[topic, int(partition)] = sizes.get((topic, int(partition)), 0) + path.stat().st_size
    return sizes


def removed(result) -> dict:
    return {(r["topic"], r["partition"]): r["bytes_removed"] for r in result.report}


def test_bytes_removed_is_what_the_files_lose_and_a_dry_run_estimates_it(spark, tmp_path, monkeypatch):
    root = tmp_path / "log"
    generate(str(root), preset("small", seed=11))
    before, listed = log_bytes(root), sorted(root.rglob("*"))
    estimates = []
    # every partition in one task, then by the window path, then in ranges of one output segment
    for task_bytes, large in ((1 << 40, "window"), (0, "window"), (0, "ranges")):
        monkeypatch.setattr(tuning, "ONE_TASK_BYTES", task_bytes)
        monkeypatch.setattr(tuning, "LARGE_PARTITIONS", large)
        monkeypatch.setattr(tuning, "RANGE_BYTES", 1)
        dry = compact(spark, str(root), RESOLVER, NOW, force=True, topics=TOPICS, dry_run=True)
        estimates.append(removed(dry))
    assert log_bytes(root) == before
    # nothing written into the log dir, and the range path's staging beside it gone
    assert sorted(root.rglob("*")) == listed and list(tmp_path.iterdir()) == [root]
    assert estimates[0] == estimates[1] == estimates[2]
    read = {(s.topic, s.partition): sum(seg.size for seg in dry.plan.scanned(s)) for s in dry.plan.chosen}
    assert {tp[0] for tp in estimates[0]} == set(TOPICS)
    assert all(0 < estimates[0][tp] <= read[tp] for tp in estimates[0]), (estimates[0], read)

    result = compact(spark, str(root), RESOLVER, NOW, force=True, topics=TOPICS)
    after = log_bytes(root)
    lost = {tp: before[tp] - after[tp] for tp in before if before[tp] != after[tp]}
    assert removed(result) == lost
    assert all(0 < lost[tp] <= read[tp] for tp in lost)
    for tp, exact in lost.items():  # how far the estimate was (measured: within a few percent)
        assert abs(estimates[0][tp] - exact) <= exact // 4, (tp, estimates[0][tp], exact)
