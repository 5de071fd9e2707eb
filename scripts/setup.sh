#!/usr/bin/env bash
# Set up kafkalog on a fresh machine: Java 17+ for Spark, strace for the tests, a virtual environment in .venv, and the
# package with the extras the tests use (spark, connect, notebooks, formats, iceberg, test: pyproject.toml says what each
# holds). Safe to run again: it only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

java_major() {
  command -v java >/dev/null 2>&1 || { echo 0; return; }
  java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}

# Debian's package `$1`, as root or through sudo; else ask for it by name
apt_install() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null
  elif command -v sudo >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null
  else
    echo "setup: please install $1 and run again" >&2
    exit 1
  fi
}

if [ "$(java_major)" -lt 17 ]; then
  echo "setup: Java 17+ not found; installing a headless JDK (needed by Spark)" >&2
  apt_install openjdk-17-jre-headless
fi
# strace counts the files a whole command run opens and lists (tests/test_file_access.py)
if ! command -v strace >/dev/null 2>&1; then
  echo "setup: installing strace (the tests count a command's file accesses with it)" >&2
  apt_install strace
fi

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
# PYTHONWARNINGS reaches the build backend: setuptools' notice about editable installs is not news
# pyspark: the newest release of the range the package declares (the `spark` extra), which the tests run
PYTHONWARNINGS=ignore .venv/bin/python -m pip install -q -e '.[spark,connect,notebooks,formats,iceberg,test]' 2>&1 \
  | grep -v '^WARNING: Location' || true
.venv/bin/python -c 'import kafkalog, pyspark, kafka, aiokafka, pyspark.sql.connect.session, matplotlib, fastavro, grpc_tools.protoc, pyiceberg' \
  || { echo "setup: installation failed" >&2; exit 1; }
