#!/usr/bin/env bash
# The five-minute demo: generate a sample Kafka log directory, then run kafkalog on it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
SAMPLE="${1:-sample}"
rm -rf "$SAMPLE"
.venv/bin/kafkalog generate "$SAMPLE" --seed 7
.venv/bin/kafkalog validate "$SAMPLE"
