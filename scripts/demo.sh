#!/usr/bin/env bash
# The five-minute demo: generate a sample Kafka log directory, report its transactions, plan and compact
# it on Spark local mode with Kafka's semantics, apply retention, and validate the result.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
SAMPLE="${1:-sample}"
NOW=1700100000000   # a fixed clock: the same input and --now give byte-identical output
rm -rf "$SAMPLE" "$SAMPLE.properties" "$SAMPLE-plan.txt" "$SAMPLE-report.json"
echo "== generate: a synthetic broker writes $SAMPLE/"
.venv/bin/kafkalog generate "$SAMPLE" --preset demo --seed 7 --config-out "$SAMPLE.properties"
echo "== txn-report: open, hanging and aborted transactions (what holds the last stable offset back)"
.venv/bin/kafkalog txn-report "$SAMPLE" --now "$NOW" --topic payments | head -n 6
echo "== plan: which compacted partitions a cleaning pass would choose, and what it would remove (writes nothing)"
.venv/bin/kafkalog plan "$SAMPLE" --config-file "$SAMPLE.properties" --now "$NOW" > "$SAMPLE-plan.txt"
head -n 4 "$SAMPLE-plan.txt"
echo "== compact: one Kafka cleaning pass per chosen partition, on Spark local mode"
.venv/bin/kafkalog compact "$SAMPLE" --config-file "$SAMPLE.properties" --now "$NOW" --report "$SAMPLE-report.json"
echo "== retain: time and size retention of the delete-policy topics (a month of clickstream, 7 days kept)"
.venv/bin/kafkalog retain "$SAMPLE" --config-file "$SAMPLE.properties" --now "$NOW"
echo "== validate"
.venv/bin/kafkalog validate "$SAMPLE" --config-file "$SAMPLE.properties" --fail-on error
