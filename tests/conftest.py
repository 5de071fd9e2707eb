"""Shared test set-up: where the real broker fixtures live, and one local SparkSession per run (the
`spark` fixture, shared by tests/spark and tests/kafka; lazy: a test that takes no `spark` starts no Spark)."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REAL_FIXTURES = (REPO.parent / "shared" / "fixtures" / "real").resolve()

if not REAL_FIXTURES.is_dir():
    raise RuntimeError(f"the real broker fixtures are expected at {REAL_FIXTURES} (shared/ beside the repo)")


@pytest.fixture(scope="session")
def real_fixtures() -> Path:
    return REAL_FIXTURES


@pytest.fixture(scope="session")
def spark():
    from kafkalog.spark.session import local_session

    session = local_session("kafkalog-tests", "local[2]", conf={
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.enabled": "false",
    }, delta=True)  # delta-spark from Maven Central, for the purge ledger's Spark path (tests/spark/test_purge.py)
    yield session
    session.stop()
