"""A real Apache Kafka 4.x broker for the tests of tests/kafka: one per test session.

The jars come from $KAFKALOG_KAFKA_LIBS (scripts/test.sh runs scripts/kafka-jars.sh and exports it),
else from scripts/kafka-jars.sh run here. When they cannot be had, every test here FAILS with a message
saying the Kafka jars could not be fetched: these tests are never skipped.

`kafka_broker` is started once and handed to every test as the previous test left it; a test that
stops it (to rewrite its log dir offline) restarts it, and `running_broker` starts it again if a
failed test left it stopped. Topics are per test (their names start with the test's own prefix). It
stops after the last test here (package scope): an idle broker costs some 6% of a core (session 19),
and the run's tests after tests/kafka take some 20 minutes.

test_cluster_purge.py's controller and three brokers (cluster.py) start in a background thread
(tests/early.py) at the first test here, so that the tests before it run meanwhile; not at the run's
first test: an idle cluster still costs CPU (its heartbeats and metadata fetches).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.early import InBackground

from .broker import Broker, KafkaJarsMissing, KafkaTools, kafka_libs
from .cluster import Cluster, start_cluster

CLUSTER_PURGE = Path(__file__).with_name("test_cluster_purge.py")


@pytest.fixture(scope="session")
def kafka_libs_dir():
    try:
        return kafka_libs()
    except KafkaJarsMissing as err:
        pytest.fail(
            f"{err}\nso the real-broker tests cannot run (scripts/kafka-jars.sh fetches the jars "
            "with Maven from Maven Central)",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def kafka_tools(kafka_libs_dir, tmp_path_factory) -> KafkaTools:
    return KafkaTools(kafka_libs_dir, tmp_path_factory.mktemp("kafka-tools"))


@pytest.fixture(scope="package")
def kafka_broker(kafka_tools, tmp_path_factory):
    broker = Broker(kafka_tools, tmp_path_factory.mktemp("kafka-broker"))
    try:
        broker.start()
        yield broker
    finally:
        broker.close()


@pytest.fixture
def running_broker(kafka_broker) -> Broker:
    if not kafka_broker.running:
        kafka_broker.start()
    return kafka_broker


@pytest.fixture(scope="session", autouse=True)
def kafka_cluster_started_early(request, tmp_path_factory):
    """When the run holds test_cluster_purge.py: its cluster (`start_cluster`: four nodes formatted and
    started, eight JVMs) starting in the background from the first test here on; closed at the end of
    the run, if the test did not close it."""
    if not any(item.path == CLUSTER_PURGE for item in request.session.items):
        yield None
        return
    early = InBackground(start_cluster, tmp_path_factory.mktemp("kafka-cluster"))
    try:
        yield early
    finally:
        started = early.finished()
        if isinstance(started, Cluster):
            started.close()
