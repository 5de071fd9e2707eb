"""Shared test set-up: where the real broker fixtures live, one local SparkSession per run (the
`spark` fixture, shared by tests/spark and tests/kafka; lazy: a test that takes no `spark` starts no
Spark; every session the process starts has delta-spark, so that the order of tests does not
matter), the generated `small_log`, an S3 API on 127.0.0.1 (`s3_server`, moto's server; started only
when a test asks), and what starts in the background (tests/early.py) at the first test of a run that
holds the tests needing it: tests/cluster's job archive (its tests run last; their Spark standalone
cluster and its applications start later, `_cluster_starts`), and tests/spark/test_connect.py's run on
a Spark Connect server."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.early import InBackground
from tests.ports import free_port
from tests.s3_server import S3Server
from tests.s3_server import environment as s3_environment

REPO = Path(__file__).resolve().parents[1]
CLUSTER_TESTS = REPO / "tests" / "cluster"
CONNECT_TESTS = REPO / "tests" / "spark" / "test_connect.py"
REAL_FIXTURES = (REPO.parent / "shared" / "fixtures" / "real").resolve()

if not REAL_FIXTURES.is_dir():
    raise RuntimeError(f"the real broker fixtures are expected at {REAL_FIXTURES} (shared/ beside the repo)")


# The S3 API the tests use (`s3_server`) is configured the way an operator configures kafkalog for one:
# the standard AWS environment variables, set before any SparkSession starts so that its Python
# workers inherit them.
S3_PORT = free_port()
os.environ.update(s3_environment(S3_PORT))


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """moto's S3 server on 127.0.0.1 for the run (`tests/s3_server.py`)."""
    with S3Server(S3_PORT, tmp_path_factory.mktemp("s3") / "moto.log") as server:
        yield server


@pytest.fixture(scope="session")
def real_fixtures() -> Path:
    return REAL_FIXTURES


@pytest.fixture(scope="session", autouse=True)
def _sessions_with_delta():
    """Every SparkSession this test process starts is the shared `spark` fixture's kind: with
    delta-spark. A test that runs a command in-process (the command line starts its session in a
    thread of its own) may start the process's one JVM before the fixture does; without Delta's
    jars, the fixture and every later test would then have to take that session without Delta.
    Importing kafkalog.spark.session starts nothing."""
    from kafkalog.spark import session

    defaults = session.local_session.__kwdefaults__
    given = defaults["delta"]
    defaults["delta"] = True
    yield
    defaults["delta"] = given


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


@pytest.fixture(scope="session")
def small_log(tmp_path_factory):
    """The generator's small preset: six topics (lz4, zstd, gzip, snappy, v1, v0), transactions with
    aborts, rolled segments with dense indexes, and `__consumer_offsets`. `.path` is the log dir,
    `.summary` what the generator says it wrote."""
    from kafkalog.operations.generate import generate, small_preset

    path = tmp_path_factory.mktemp("small") / "log"
    return SimpleNamespace(path=path, summary=generate(str(path), small_preset(seed=7)))


def _in_cluster_tests(item: pytest.Item) -> bool:
    return CLUSTER_TESTS in item.path.parents


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """tests/cluster's tests last, the others in their order: what they need (`cluster_started_early`)
    starts while the others run."""
    items.sort(key=_in_cluster_tests)


@pytest.fixture(scope="session", autouse=True)
def cluster_started_early(request, tmp_path_factory):
    """When the run holds tests/cluster's tests: their job archive, and their Spark standalone cluster and
    applications (tests/cluster/conftest.py `StartedEarly`), in background threads: the archive from the
    run's first test on (a venv installed and packed), the cluster (three JVMs) and then the applications
    it runs from `_cluster_starts`' test on; stopped at the end of the run."""
    if not any(_in_cluster_tests(item) for item in request.session.items):
        yield None
        return
    from tests.cluster.conftest import StartedEarly

    early = StartedEarly(tmp_path_factory)
    try:
        yield early
    finally:
        early.close()


# The standalone cluster starts, and runs tests/cluster's applications, at the first test of these: tests/spark
# is first of them in a whole run, and leaves a third of the machine idle (one pytest process steering one
# SparkSession; session 20, vmstat), which the applications fill. Before it, the real-broker tests of
# tests/kafka run with a JVM of their own and are left alone.
CLUSTER_STARTS_AT = (REPO / "tests" / "spark", REPO / "tests" / "storage", REPO / "tests", CLUSTER_TESTS)


@pytest.fixture(autouse=True)
def _cluster_starts(request, cluster_started_early):
    if cluster_started_early is not None and request.node.path.parent in CLUSTER_STARTS_AT:
        cluster_started_early.start()


@pytest.fixture(scope="session", autouse=True)
def connect_started_early(request, tmp_path_factory):
    """When the run holds tests/spark/test_connect.py: its run on a Spark Connect server (`small_log`
    generated now, then `run_on_spark_connect`: a server JVM and a client process, some 40 s) in a
    background thread from the run's first test on; the module's tests compare what it wrote. The
    run's end waits for it, so that no server outlives the run."""
    if not any(item.path == CONNECT_TESTS for item in request.session.items):
        yield None
        return
    from tests.spark.test_connect import run_on_spark_connect

    early = InBackground(run_on_spark_connect, request.getfixturevalue("small_log"), tmp_path_factory.mktemp("connect"))
    try:
        yield early
    finally:
        early.finished()
