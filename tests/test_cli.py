"""The command line as users meet it: exit codes and output forms."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kafkalog.cli import main

from .conftest import REAL_FIXTURES


def test_validate_exit_codes(capsys, tmp_path):
    assert main(["validate", str(REAL_FIXTURES / "broker-dirs" / "kafka-gzip-idempotent")]) == 0
    bad = next((REAL_FIXTURES / "captured" / "kafka-rust").glob("*invalid_crc*"))
    assert main(["validate", str(bad)]) == 1
    assert main(["validate", str(tmp_path / "missing")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_validate_json_names_file_position_offset(capsys):
    bad = next((REAL_FIXTURES / "captured" / "kafka-rust").glob("*invalid_crc*"))
    assert main(["validate", "--json", str(bad)]) == 1
    report = json.loads(capsys.readouterr().out)
    (problem,) = [f for f in report["findings"] if f["severity"] == "error"]
    assert (problem["check"], problem["position"], problem["offset"]) == ("batch.crc", 12, 0)
    assert problem["file"].endswith(bad.name)


def test_bad_config_is_refused_with_kafkas_rule(capsys):
    code = main(["validate", "--config", "index.interval.bytes=-1", str(REAL_FIXTURES / "broker-dirs" / "kafka-3.1.0")])
    assert code == 2 and "Value must be at least 0" in capsys.readouterr().err


def test_python_dash_m_runs():
    out = subprocess.run([sys.executable, "-m", "kafkalog", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("kafkalog ")


def test_kafkalog_alone_says_what_it_is_and_lists_every_command(capsys):
    from kafkalog.cli import ABOUT, EXAMPLES

    assert main([]) == 2
    out = capsys.readouterr().out
    assert ABOUT.splitlines()[0] in out
    for command in EXAMPLES:
        assert f"    {command}" in out  # each command, with its one-line summary


@pytest.mark.parametrize(
    "command", ["generate", "dump", "validate", "plan", "compact", "retain", "purge", "txn-report", "export"]
)
def test_every_commands_help_ends_with_examples(capsys, command):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    lines = capsys.readouterr().out.rstrip().splitlines()
    examples = lines[lines.index("examples:") + 1 :]
    assert len(examples) >= 2 and all(line.strip().startswith(f"kafkalog {command} ") for line in examples)


def _run_cli(*args, cwd=None):
    import subprocess
    import time

    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "kafkalog", *args], capture_output=True, text=True, cwd=cwd, timeout=60
    )
    return done, time.perf_counter() - start


@pytest.mark.parametrize("case", ["missing", "output-inside", "output-exists", "locked", "illegal-topic"])
def test_what_can_be_checked_without_spark_fails_before_the_jvm_starts(tmp_path, case):
    """One line, exit 2, and no JVM: the command returns in a fraction of what starting Spark takes
    (and Spark's JVM would print its warning on stderr)."""
    import fcntl

    log = tmp_path / "log"
    (log / "t-0").mkdir(parents=True)
    args = ["compact", str(log), "--config", "cleanup.policy=compact"]
    holder = None
    if case == "missing":
        args[1] = str(tmp_path / "nope")
    elif case == "output-inside":
        args += ["--output", str(log / "out")]
    elif case == "output-exists":
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "x").write_text("x")
        args += ["--output", str(tmp_path / "out")]
    elif case == "locked":
        holder = open(log / ".lock", "w")
        fcntl.flock(holder, fcntl.LOCK_EX)  # held by this test process: another process is refused
    else:
        (log / "bad topic-0").mkdir()
    try:
        done, seconds = _run_cli(*args)
    finally:
        if holder is not None:
            holder.close()
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafkalog compact: "), done.stderr
    assert seconds < 3, f"{seconds:.1f} s: did Spark start?"
