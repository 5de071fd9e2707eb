"""One deterministic command-line session and digests of what its user sees: the regression check of
issue 36 ("every user-visible output is byte-identical before and after"; tests/test_user_outputs.py).

The session generates the `small` preset with a fixed seed, then runs txn-report, plan, compact,
retain, validate, dump and export on it, in process (`kafkalog.cli.main`), each with a fixed --now.
What is digested (SHA-256):
- each command's exit code and stdout, the session's temporary directory written as `<TMP>` (the only
  part of stdout that changes from run to run); stderr is not compared: it holds progress and
  timings only (--quiet where a command has it);
- every file of the log directory after generate, compact and retain, byte for byte, by relative path
  (not their times, which are the run's);
- the export's rows (a Parquet table: its files' bytes hold the writer's metadata): every column of
  every row, sorted, as JSON.

    PYTHONPATH=REPO python tests/user_outputs.py OUT.json [TEXTS_DIR]

writes the digests of the kafkalog on PYTHONPATH to OUT.json (and each step's stdout into TEXTS_DIR;
each step's seconds go to stderr).
tests/fixtures/user_outputs.json holds those of commit 024968a, the code before issue 36's plan/run
refactor:

    git worktree add /tmp/old 024968a
    cd /tmp && PYTHONPATH=/tmp/old python REPO/tests/user_outputs.py REPO/tests/fixtures/user_outputs.json
    git worktree remove /tmp/old

(from a directory outside both trees: Spark's Python workers put their working directory first on
their path, so that a run from inside REPO would run REPO's kafkalog on the executors).
The script imports nothing but kafkalog (and pyarrow, pyspark), so that it runs against old code.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import sys
import tempfile
import time

SEED = 7
RETENTION = "retention.bytes=6000"  # for every topic: retain deletes some of the segments
NOW = 1_700_200_000_000  # after the preset's records (DEFAULT_START_MS and on): time rules decide


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _files(root: str) -> dict[str, str]:
    """Every file under `root` (relative path -> digest of its bytes)."""
    out = {}
    for parent, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(parent, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = _sha(f.read())
    return dict(sorted(out.items()))


def _rows(table_path: str) -> str:
    """The exported rows, sorted, as one digest (the Parquet file's own bytes hold writer metadata)."""
    import pyarrow.parquet as pq

    table = pq.read_table(table_path)
    rows = [json.dumps(r, sort_keys=True, default=repr) for r in table.to_pylist()]
    return _sha("\n".join(sorted(rows)).encode())


def run_session(tmp: str, texts: str | None = None) -> dict:
    """The session in `tmp` (an empty directory); its digests. `texts`: a directory where each step's
    stdout is also written as it was digested (to see where two runs differ)."""
    from kafkalog.cli import main

    log, cfg, out = os.path.join(tmp, "log"), os.path.join(tmp, "topics.properties"), os.path.join(tmp, "export")
    steps = [
        (
            "generate",
            ["generate", log, "--preset", "small", "--seed", str(SEED), "--records", "120", "--config-out", cfg],
        ),
        ("txn-report", ["txn-report", log, "--now", str(NOW)]),
        ("txn-report --json", ["txn-report", log, "--now", str(NOW), "--json"]),
        ("plan", ["plan", log, "--now", str(NOW), "--config-file", cfg, "--quiet"]),
        ("compact", ["compact", log, "--now", str(NOW), "--config-file", cfg, "--quiet"]),
        ("retain", ["retain", log, "--now", str(NOW), "--config-file", cfg, "--config", RETENTION, "--quiet"]),
        ("validate", ["validate", log, "--config-file", cfg, "--quiet"]),
        ("validate --json", ["validate", log, "--json", "--quiet"]),
        ("dump", ["dump", log]),
        ("dump --records", ["dump", os.path.join(log, "payments-0"), "--records", "--txn-index", "--snapshot"]),
        ("export", ["export", log, "--topic", "customers", "--output", out, "--format", "parquet", "--quiet"]),
    ]
    digests: dict = {}
    for name, argv in steps:
        stdout, started = io.StringIO(), time.monotonic()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(io.StringIO()):
            code = main(argv)
        print(f"{name}: {time.monotonic() - started:.1f} s", file=sys.stderr)
        text = stdout.getvalue().replace(tmp, "<TMP>")
        digests[name] = {"exit": code, "stdout": _sha(text.encode()), "lines": text.count("\n")}
        if texts:
            with open(os.path.join(texts, name.replace(" ", "_")), "w") as f:
                f.write(text)
        if name in ("generate", "compact", "retain"):
            digests[f"files after {name}"] = _files(log)
    digests["export rows"] = _rows(out)
    return digests


def main(argv: list[str]) -> int:
    from kafkalog.spark.session import local_session

    # the test suite's session settings (tests/conftest.py), so that the CLI's commands use this one
    spark = local_session(
        "kafkalog-user-outputs",
        "local[2]",
        conf={"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"},
    )
    try:
        with tempfile.TemporaryDirectory() as tmp:
            digests = run_session(os.path.realpath(tmp), argv[1] if len(argv) > 1 else None)
    finally:
        spark.stop()
    with open(argv[0], "w") as f:
        json.dump(digests, f, indent=1, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
