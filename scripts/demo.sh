#!/usr/bin/env bash
# The five-minute demo: generate a sample Kafka log directory, compact it on Spark local mode with
# Kafka's semantics, and validate the result.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
SAMPLE="${1:-sample}"
NOW=1700100000000   # a fixed clock: the same input and --now give byte-identical output
rm -rf "$SAMPLE" "$SAMPLE.properties"
echo "== generate: a synthetic broker writes $SAMPLE/"
.venv/bin/kafkalog generate "$SAMPLE" --preset demo --seed 7 --config-out "$SAMPLE.properties" \
  | .venv/bin/python -c 'import json, sys; s = json.load(sys.stdin); print(json.dumps({k: s[k] for k in s if k in ("logDir", "seed", "partitions", "records")}))'
echo "== compact: one Kafka cleaning pass per chosen partition, on Spark local mode"
.venv/bin/kafkalog compact "$SAMPLE" --config-file "$SAMPLE.properties" --now "$NOW" --report "$SAMPLE-report.json"
echo "== validate"
.venv/bin/kafkalog validate "$SAMPLE" --config-file "$SAMPLE.properties" --fail-on error
