"""The public API on Spark (kafkalog/api.py): a plan and an export of the shared small log dir through
`kafkalog.X(spark, log_dir, *, config=, now=)`, the configuration given as a mapping. The arguments of
every command, and the calls of 0.1, are checked without Spark in tests/test_api.py."""

from __future__ import annotations

import kafkalog

NOW = 1_700_100_000_000


def test_plan_and_export_through_the_api(spark, small_log, tmp_path):
    log_dir = str(small_log.path)
    before = sorted(p.name for p in small_log.path.rglob("*"))
    config = {"cleanup.policy": "compact", "compaction.strategy": "timestamp"}
    plan = kafkalog.plan(spark, log_dir, config=config, now=NOW, topics=["customers"]).to_dict()
    assert plan["dryRun"] and plan["now"] == NOW
    assert {p["topic"] for p in plan["partitions"]} == {"customers"}
    assert {p["compactionStrategy"] for p in plan["partitions"]} == {"timestamp"}  # the mapping reached the rules
    assert sorted(p.name for p in small_log.path.rglob("*")) == before  # a plan writes nothing

    out = tmp_path / "customers"
    result = kafkalog.export(spark, log_dir, topic="customers", output=str(out), config=config, format="parquet")
    exported = result.to_dict()
    assert exported["committed"] and exported["latestBy"] == "timestamp" and out.is_dir()
    assert exported["endOffsets"] == {str(p): o for p, o in sorted(result.end_offsets.items())}
