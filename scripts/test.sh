#!/usr/bin/env bash
# Run the whole test suite from a fresh clone: sets up first (see setup.sh), lints and type-checks, then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# ruff (lint and format) and mypy, configured in pyproject.toml: one line each when clean, and the run
# stops when not
.venv/bin/ruff check kafkalog tests benchmarks jobs scripts
.venv/bin/ruff format --check --quiet kafkalog tests benchmarks jobs scripts && echo "ruff format: clean"
.venv/bin/mypy
# Apache Kafka's broker, tools and clients for tests/kafka (Maven Central, cached outside the checkout);
# when they cannot be fetched, those tests fail saying so (the others run)
if KAFKALOG_KAFKA_LIBS=$(bash scripts/kafka-jars.sh); then
  export KAFKALOG_KAFKA_LIBS
else
  export KAFKALOG_KAFKA_LIBS="unavailable: scripts/kafka-jars.sh failed"
  echo "test: the Kafka jars could not be fetched; the real-broker tests (tests/kafka) will fail" >&2
fi
# delta-spark's jars through Ivy (Maven Central, cached in ~/.ivy2.5.2) and their list in kafkalog's cache,
# as a user fetches them ahead of time: the suite's sessions then name them by path
.venv/bin/python -m kafkalog jars fetch >&2 || echo "test: kafkalog jars fetch failed; the Delta tests will say why" >&2
exec .venv/bin/python -m pytest -q "$@"
