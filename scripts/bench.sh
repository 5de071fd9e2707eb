#!/usr/bin/env bash
# Run every benchmark in benchmarks/ and rewrite their results in docs/benchmarks.md, keeping the prose
# around them (scripts/bench_doc.py says how). Takes a while and all the CPU: run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python scripts/bench_doc.py
