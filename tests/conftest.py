"""Shared test set-up: where the real broker fixtures live, one local SparkSession per run (the
`spark` fixture, shared by tests/spark and tests/kafka; lazy: a test that takes no `spark` starts no
Spark), and an S3 API on 127.0.0.1 (`s3_server`, moto's server; started only when a test asks)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REAL_FIXTURES = (REPO.parent / "shared" / "fixtures" / "real").resolve()

if not REAL_FIXTURES.is_dir():
    raise RuntimeError(f"the real broker fixtures are expected at {REAL_FIXTURES} (shared/ beside the repo)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The S3 API the tests use is configured the way an operator configures kafkalog for one: the standard
# AWS environment variables (pyarrow reads them; deltalake too, with AWS_ALLOW_HTTP for a plain-http
# endpoint). They are set before any SparkSession starts, so that its Python workers inherit them.
S3_PORT = _free_port()
os.environ.update(
    {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{S3_PORT}",
        "AWS_ACCESS_KEY_ID": "kafkalog-tests",
        "AWS_SECRET_ACCESS_KEY": "kafkalog-tests-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
    }
)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """moto's S3 server on 127.0.0.1 for the run; yields a function that creates a bucket."""
    log = tmp_path_factory.mktemp("s3") / "moto.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(S3_PORT)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", S3_PORT), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto's S3 server did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.2)
        import boto3

        client = boto3.client("s3")
        yield lambda name: client.create_bucket(Bucket=name)
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="session")
def real_fixtures() -> Path:
    return REAL_FIXTURES


@pytest.fixture(scope="session")
def spark():
    from kafkalog.spark.session import local_session

    session = local_session(
        "kafkalog-tests",
        "local[2]",
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            "spark.ui.enabled": "false",
        },
        delta=True,
    )  # delta-spark from Maven Central, for the purge ledger's Spark path (tests/spark/test_purge.py)
    yield session
    session.stop()
