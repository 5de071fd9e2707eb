#!/usr/bin/env bash
# Build what spark-submit needs to run kafkalog's jobs on a cluster (see jobs/README.md), into dist/:
#   dist/kafkalog-<version>-py3-none-any.whl   the package
#   dist/kafkalog-env.tar.gz                    a packed virtual environment with the package and its native
#                                               dependencies (crc32c, lz4, zstandard, python-snappy, pyarrow, ...)
#                                               plus pandas and deltalake, for --archives; not pyspark: the
#                                               cluster's Spark brings its own
#   dist/kafkalog-jobs.zip                      jobs/ and conf/
# The packed environment needs venv-pack (installed into .venv on demand). Like every venv, it links to
# its Python rather than holding it: the cluster's nodes need the same Python at the same path as here.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || bash scripts/setup.sh
PYTHON=.venv/bin/python
ENV_DIR=build/job-env

rm -f dist/kafkalog-*.whl dist/kafkalog-env.tar.gz dist/kafkalog-jobs.zip
mkdir -p dist build
echo "== wheel" >&2
"$PYTHON" -m pip wheel -q --no-deps -w dist . 2>&1 | grep -v '^WARNING: Location' || true
WHEEL=$(ls dist/kafkalog-*.whl)

echo "== jobs and conf" >&2
"$PYTHON" -m zipfile -c dist/kafkalog-jobs.zip jobs conf

echo "== packed environment" >&2
# What executors and the driver import besides kafkalog's own dependencies: pandas (applyInPandas) and
# deltalake (committed offsets from a Delta table), with the versions of the `spark` and `delta` extras.
EXTRAS=$("$PYTHON" - <<'EOF'
import tomllib
with open("pyproject.toml", "rb") as f:
    extras = tomllib.load(f)["project"]["optional-dependencies"]
print(" ".join(r for r in extras["spark"] + extras["delta"] if r.startswith(("pandas", "deltalake"))))
EOF
)
if ! "$PYTHON" -m pip show -q venv-pack >/dev/null 2>&1; then
  "$PYTHON" -m pip install -q venv-pack 2>&1 | grep -v '^WARNING: Location' || true
fi
# run as a module: the console script's #! names the python it was installed with, which need not be
# .venv/bin/python (a copy of the tree with .venv linked in, as tests/cluster builds from, installs it)
if ! "$PYTHON" -c 'import venv_pack' 2>/dev/null; then
  echo "build-job-archive: venv-pack is not available; dist/kafkalog-env.tar.gz not built" >&2
  exit 1
fi
rm -rf "$ENV_DIR"
"$PYTHON" -m venv "$ENV_DIR"
# shellcheck disable=SC2086  # EXTRAS is a list of requirements
"$ENV_DIR/bin/python" -m pip install -q "$WHEEL" $EXTRAS 2>&1 | grep -v '^WARNING: Location' || true
"$ENV_DIR/bin/python" -c 'import kafkalog.codec.compression, crc32c, lz4, zstandard, snappy, pyarrow, pandas' \
  || { echo "build-job-archive: the packed environment is incomplete" >&2; exit 1; }
"$PYTHON" -m venv_pack -q -p "$ENV_DIR" -o dist/kafkalog-env.tar.gz

ls -l "$WHEEL" dist/kafkalog-env.tar.gz dist/kafkalog-jobs.zip
