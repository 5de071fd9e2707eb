"""KRaft's metadata log is never rewritten by `plan`, `compact` or `purge`, whatever the configuration:
a broker-wide cleanup.policy=compact with --force leaves `__cluster_metadata-0` (whose records all have
null keys: compaction would drop every one) and `bootstrap.checkpoint` byte for byte as they were."""

from __future__ import annotations

import pytest

from kafkalog.config import resolver_from
from kafkalog.errors import ConfigError
from kafkalog.operations.compact import compact
from kafkalog.operations.purge import purge
from kafkalog.storage.naming import KRAFT_METADATA_NOT_REWRITTEN
from kafkalog.topics import KRAFT_METADATA_TOPIC

from ..storage.test_kraft_metadata import FAR_FUTURE, kraft_files, kraft_log_dir

SECRET = b"kraft-tests-secret-0123456789abcdef"


def test_plan_compact_and_purge_leave_the_metadata_log_alone(spark, tmp_path):
    log_dir = kraft_log_dir(tmp_path)
    before = kraft_files(log_dir)
    everything = resolver_from(settings=["cleanup.policy=compact", "delete.retention.ms=0"])

    planned = compact(spark, str(log_dir), everything, FAR_FUTURE, force=True, dry_run=True)
    rows = {(r["topic"], r["partition"]): r for r in planned.plan.partitions()}
    assert rows[(KRAFT_METADATA_TOPIC, 0)]["chosen"] is False
    assert rows[(KRAFT_METADATA_TOPIC, 0)]["reason"] == KRAFT_METADATA_NOT_REWRITTEN
    assert rows[("customers", 0)]["chosen"] and rows[("orders", 0)]["chosen"]

    result = compact(spark, str(log_dir), everything, FAR_FUTURE, force=True)
    assert {(s.topic, s.partition) for s in result.plan.chosen} == {("customers", 0), ("orders", 0)}
    assert not result.plan.uncleanable
    assert kraft_files(log_dir) == before

    purged = purge(
        spark,
        str(log_dir),
        [b"key-000003"],
        where="true",
        ledger=str(tmp_path / "ledger"),
        secret=SECRET,
        config=everything,
        now=FAR_FUTURE,
    )  # every record of every topic but internal ones
    assert {p["topic"] for p in purged.partitions} == {"orders", "customers"}
    for topics in ([KRAFT_METADATA_TOPIC], ["orders", KRAFT_METADATA_TOPIC]):
        with pytest.raises(
            ConfigError, match=f"purge refuses topic {KRAFT_METADATA_TOPIC}: {KRAFT_METADATA_NOT_REWRITTEN}"
        ):
            purge(
                spark,
                str(log_dir),
                [b"key-000003"],
                topics=topics,
                where="true",
                ledger=str(tmp_path / "ledger"),
                secret=SECRET,
                config=everything,
                now=FAR_FUTURE,
            )
    assert kraft_files(log_dir) == before
