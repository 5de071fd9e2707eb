#!/usr/bin/env bash
# Run the whole test suite from a fresh clone: sets up first (see setup.sh), then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
