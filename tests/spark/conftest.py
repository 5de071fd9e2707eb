"""The generated log directories the Spark tests share (the session-scoped `spark` fixture, one local
SparkSession for the whole run, and `small_log` are in tests/conftest.py). Fixtures are lazy: a test
that takes no `spark` starts no Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

REAL_BROKER_DIRS = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "real" / "broker-dirs"


@pytest.fixture(scope="session")
def big_segment_log(tmp_path_factory) -> Path:
    """One partition whose first segment is ~1.3 MiB with an offset-index entry every 4 KiB."""
    from kafkalog.operations.generate import GeneratorSpec, TopicSpec, generate

    path = tmp_path_factory.mktemp("big") / "log"
    generate(
        str(path),
        GeneratorSpec(
            seed=3,
            consumer_offsets=None,
            topics=[
                TopicSpec(
                    "big",
                    records=10000,
                    keys=500,
                    value_bytes=(100, 300),
                    headers=1,
                    codec="lz4",
                    batch_records=(1, 12),
                    idempotent_producers=1,
                    segment_bytes=4 * 1024 * 1024,
                    index_interval_bytes=4096,
                )
            ],
        ),
    )
    return path
