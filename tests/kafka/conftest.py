"""A real Apache Kafka 4.x broker for the tests of tests/kafka: one per test session.

The jars come from $KAFKALOG_KAFKA_LIBS (scripts/test.sh runs scripts/kafka-jars.sh and exports it),
else from scripts/kafka-jars.sh run here. When they cannot be had, every test here FAILS with a message
saying the Kafka jars could not be fetched: these tests are never skipped.

`kafka_broker` is started once and handed to every test as the previous test left it; a test that
stops it (to rewrite its log dir offline) restarts it, and `running_broker` starts it again if a
failed test left it stopped. Topics are per test (their names start with the test's own prefix).
"""

from __future__ import annotations

import pytest

from .broker import Broker, KafkaJarsMissing, KafkaTools, kafka_libs


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


@pytest.fixture(scope="session")
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
