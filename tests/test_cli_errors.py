"""Every failure a user can meet before or around Spark's start ends in one line and exit 2, with no
traceback and nothing written: no Java or one too old, a missing input file, an unreadable file, a
missing optional package. Each command runs as a user runs it, in a subprocess, and fails before
Spark starts: in about a second."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkalog.cli import main
from kafkalog.errors import KafkaLogError, MissingExtraError, UnreadableFileError
from kafkalog.storage.fs import LogFileSystem

REPO = Path(__file__).resolve().parents[1]
NOW = "1700100000000"
BEFORE_SPARK = 15  # seconds: far less than a JVM takes to start, with margin for a loaded machine
SECRET = b"a-test-secret-of-32-bytes-length"


def run(*args: str, env: dict | None = None, prefix: tuple = (), code: str | None = None, module: str = "kafkalog"):
    """`python -m MODULE ARGS` (or `python -c CODE ARGS`) with `env` over this environment (None: unset)."""
    environ = {**os.environ, "PYTHONPATH": str(REPO)}
    for name, value in (env or {}).items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value
    command = [*prefix, sys.executable, *(["-c", code] if code else ["-m", module]), *args]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=environ, timeout=300, check=False)
    return done, time.perf_counter() - start


def one_line(done, seconds: float, command: str, *named: str, code: int = 2) -> str:
    """The one line a failed command printed, checked: its exit code, no traceback, the names it must
    name, and no Spark start."""
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"kafkalog {command}: "), done.stderr
    for name in named:
        assert name in lines[0], (name, lines[0])
    assert seconds < BEFORE_SPARK, f"{seconds:.1f} s: did Spark start?"
    return lines[0]


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("errors")
    assert main(["generate", str(root / "log"), "--preset", "small", "--seed", "1", "--records", "50"]) == 0
    return root / "log"


@pytest.fixture
def files(tmp_path) -> dict[str, str]:
    """Inputs that are there: a keys file, a secret, a ledger directory, an empty directory."""
    (tmp_path / "keys.txt").write_text("key-1\n")
    (tmp_path / "secret").write_bytes(SECRET)
    (tmp_path / "ledger").mkdir()
    (tmp_path / "empty").mkdir()
    return {
        name: str(tmp_path / file)
        for name, file in (("keys", "keys.txt"), ("secret", "secret"), ("ledger", "ledger"), ("empty", "empty"))
    }


# -- no Java, or one too old -------------------------------------------------------------------------------


def _java_env(tmp_path: Path, case: str) -> dict:
    if case == "no java on PATH":
        (tmp_path / "bin").mkdir()
        return {"PATH": str(tmp_path / "bin"), "JAVA_HOME": None}
    if case == "JAVA_HOME without java":
        (tmp_path / "jdk").mkdir()
        return {"JAVA_HOME": str(tmp_path / "jdk")}
    java = tmp_path / "jdk8" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\necho 'openjdk version \"1.8.0_392\"' >&2\n")
    java.chmod(0o755)
    return {"PATH": str(java.parent), "JAVA_HOME": None}


JAVA_CASES = {
    "no java on PATH": ("Java was not found", "PATH=", "JAVA_HOME unset"),
    "JAVA_HOME without java": ("Java was not found", "$JAVA_HOME/bin/java", "JAVA_HOME="),
    "java 8": ("Java 8 is too old", "jdk8/bin/java", "PATH="),
}


@pytest.mark.parametrize(
    "case, command",
    [("no java on PATH", command) for command in ("compact", "export", "purge", "verify-purge")]
    + [(case, "compact") for case in ("JAVA_HOME without java", "java 8")],
)
def test_a_spark_command_without_java_17_says_so_before_spark_starts(tmp_path, log_dir, files, case, command):
    out = tmp_path / "out"
    args = {
        "compact": [str(log_dir), "--config", "cleanup.policy=compact", "--output", str(out)],
        "export": [str(log_dir), "--topic", "customers", "--output", str(out)],
        "purge": [str(log_dir), "--keys", files["keys"], "--secret-file", files["secret"], "--ledger", str(out)],
        "verify-purge": [str(log_dir), "--ledger", files["ledger"], "--secret-file", files["secret"]],
    }[command]
    now = ["--now", NOW] if command in ("compact", "purge") else []
    if command == "verify-purge":  # its plan reads the ledger before Spark starts: one listing a purged key
        _ledger_of_one_key(files["ledger"])
    done, seconds = run(command, *args, *now, env=_java_env(tmp_path, case))
    one_line(done, seconds, command, *JAVA_CASES[case], "install Java 17")
    assert not out.exists()


def _ledger_of_one_key(path: str) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    from kafkalog.storage.ledger import RECORDS_SCHEMA

    row = {"run_id": "r", "topic": "customers", "matched_by": "key", "action": "removed", "key_fingerprint": "ab"}
    write_deltalake(path, pa.Table.from_pylist([row], RECORDS_SCHEMA), mode="overwrite")


@pytest.mark.parametrize("case", list(JAVA_CASES))
def test_kafkalog_session_and_a_job_without_java_17_fail_in_one_line(tmp_path, log_dir, case):
    env = _java_env(tmp_path, case)
    code = (
        "import kafkalog\n"
        "try:\n    kafkalog.session()\n"
        "except kafkalog.KafkaLogError as err:\n    print(type(err).__name__, err)\n"
    )
    done, seconds = run(code=code, env=env)
    assert done.returncode == 0 and done.stdout.startswith("JavaError "), done.stdout + done.stderr
    assert all(name in done.stdout for name in JAVA_CASES[case]) and seconds < BEFORE_SPARK
    done, _ = run("compact", str(log_dir), "--dry-run", "--now", NOW, module="kafkalog.jobs", env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and all(name in errors[0] for name in JAVA_CASES[case]), done.stderr


def test_the_java_version_is_read_as_java_states_it(tmp_path):
    from kafkalog.spark.java import java_version

    for stated, major in (('openjdk version "17.0.15" 2025-04-15', 17), ('java version "1.8.0_392"', 8), ("x", None)):
        java = tmp_path / f"java-{major}"
        java.write_text(f"#!/bin/sh\necho '{stated}' >&2\n")
        java.chmod(0o755)
        assert java_version(str(java)) == major


# -- input files that are not there -----------------------------------------------------------------------


def _missing_cases():
    """(command line, the option named, what would have been written); `{x}` is a path that is not there."""
    compact = ["compact", "{log}", "--now", NOW]
    retain = ["retain", "{log}", "--now", NOW, "--output", "{out}"]
    purge = ["purge", "{log}", "--now", NOW, "--ledger", "{out}"]
    return [
        ([*compact, "--config-file", "{x}", "--output", "{out}"], "--config-file"),
        ([*compact, "--topic-config-dir", "{x}", "--output", "{out}"], "--topic-config-dir"),
        (["validate", "{log}", "--config-file", "{x}", "--findings", "{out}"], "--config-file"),
        (["configs", "{log}", "--config-file", "{x}"], "--config-file"),
        (["get-offsets", "{log}", "--config-file", "{x}"], "--config-file"),
        ([*retain, "--delete-records", "{x}"], "--delete-records"),
        ([*retain, "--committed-offsets", "{x}"], "--committed-offsets"),
        ([*retain, "--remote-storage-dir", "{x}"], "--remote-storage-dir"),
        ([*purge, "--keys", "{x}", "--secret-file", "{secret}"], "--keys"),
        ([*purge, "--keys", "{keys}", "--secret-file", "{x}"], "--secret-file"),
        ([*purge, "--keys", "{keys}", "--secret-file", "{secret}", "--metadata", "{x}"], "--metadata"),
        (["verify-purge", "{log}", "--ledger", "{x}", "--secret-file", "{secret}"], "--ledger"),
        (["evidence", "build", "--ledger", "{ledger}", "--signing-key", "{x}", "--output", "{out}"], "--signing-key"),
        (["evidence", "verify", "{x}", "--public-key", "{secret}"], "REPORT"),
        (["evidence", "verify", "{secret}", "--public-key", "{x}"], "--public-key"),
        (["generate", "{out}", "--spec", "{x}"], "--spec"),
        (
            ["export", "{log}", "--topic", "customers", "--output", "{out}", "--value-format", "avro"]
            + ["--schema-dir", "{x}"],
            "--schema-dir",
        ),
    ]


@pytest.mark.parametrize("argv, option", _missing_cases(), ids=lambda v: v if isinstance(v, str) else v[0])
def test_an_input_that_is_not_there_is_named_before_anything_runs(
    tmp_path, log_dir, files, capsys, monkeypatch, argv, option
):
    """In this process (each would take a second as a subprocess; the one below runs as a user runs it),
    where the suite's shared session may run already: a session asked for fails the test."""
    import kafkalog.spark.session as session

    def no_spark(*args, **kwargs):
        raise AssertionError("the command asked for a SparkSession before naming the missing input")

    monkeypatch.setattr(session, "local_session", no_spark)
    monkeypatch.setattr(session, "start_session", no_spark)
    paths = {"log": str(log_dir), "out": str(tmp_path / "out"), "x": str(tmp_path / "nope"), **files}
    start = time.perf_counter()
    code = main([arg.format(**paths) for arg in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith(f"kafkalog {argv[0]}: "), err
    assert f"{tmp_path / 'nope'}: no such " in err[0] and err[0].endswith(f" ({option})"), err
    assert time.perf_counter() - start < BEFORE_SPARK
    assert not (tmp_path / "out").exists()


def test_purge_names_a_missing_keys_file_before_spark_starts(tmp_path, log_dir, files):
    """The issue's case: the keys file was named only after Spark had started (34 s)."""
    argv = ["purge", str(log_dir), "--keys", str(tmp_path / "nope.txt"), "--secret-file", files["secret"]]
    done, seconds = run(*argv, "--ledger", str(tmp_path / "ledger-new"), "--now", NOW)
    one_line(done, seconds, "purge", f"{tmp_path / 'nope.txt'}: no such file or directory (--keys)")
    assert not (tmp_path / "ledger-new").exists()


def test_an_input_of_the_wrong_kind_is_named(tmp_path, log_dir, files):
    done, seconds = run("compact", str(log_dir), "--config-file", files["empty"], "--now", NOW)
    assert "a directory, where a file was expected (--config-file)" in one_line(done, seconds, "compact")
    done, seconds = run("retain", str(log_dir), "--remote-storage-dir", files["secret"], "--now", NOW)
    assert "not a directory (--remote-storage-dir)" in one_line(done, seconds, "retain", files["secret"])


def test_a_job_names_a_missing_input_before_spark_starts(tmp_path, log_dir):
    args = ["compact", str(log_dir), "--config-file", str(tmp_path / "nope"), "--now", NOW]
    done, seconds = run(*args, module="kafkalog.jobs")
    assert done.returncode == 2 and "Traceback" not in done.stderr and seconds < BEFORE_SPARK, done.stderr
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and f"{tmp_path / 'nope'}: no such file (--config-file)" in errors[0], done.stderr


# -- a file the system will not read ----------------------------------------------------------------------


def _cannot(reason: str) -> None:
    """Skip on a developer's machine that cannot make a file unreadable; fail in CI, which must run these."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}: CI runs these tests")
    pytest.skip(reason)


def _unreadable_prefix(probe: Path) -> tuple:
    """What makes `probe` (mode 000) unreadable to a command: nothing for a user; for root, setpriv
    dropping the capabilities that let root read any file."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        _cannot("root reads any file, and setpriv (util-linux) is not installed to drop that")
    prefix = (
        "setpriv",
        "--inh-caps",
        "-dac_override,-dac_read_search",
        "--bounding-set",
        "-dac_override,-dac_read_search",
    )
    check = subprocess.run([*prefix, "cat", str(probe)], capture_output=True, text=True, check=False)
    if check.returncode == 0 or "Permission denied" not in check.stderr:
        _cannot(f"setpriv cannot drop root's read-any-file capabilities here: {check.stderr.strip()}")
    return prefix


@pytest.fixture
def unreadable(tmp_path, log_dir):
    """A copy of the log dir whose orders-0 first segment cannot be read, and how to run a command on it."""
    copy = tmp_path / "log"
    shutil.copytree(log_dir, copy)
    segment = copy / "orders-0" / "00000000000000000000.log"
    segment.chmod(0)
    try:
        yield copy, segment, _unreadable_prefix(segment)
    finally:
        segment.chmod(0o644)


@pytest.mark.parametrize(
    "argv",
    [
        ["dump", "{log}/orders-0", "--records"],
        ["txn-report", "{log}", "--now", NOW],
        ["compact", "{log}", "--config", "cleanup.policy=delete", "--output", "{out}", "--now", NOW],
        ["retain", "{log}", "--output", "{out}", "--now", NOW],
    ],
    ids=lambda argv: argv[0],
)
def test_an_unreadable_file_is_named_with_the_cause(tmp_path, unreadable, argv):
    log, segment, prefix = unreadable
    out = tmp_path / "out"
    done, seconds = run(*(a.format(log=log, out=out) for a in argv), prefix=prefix)
    one_line(done, seconds, argv[0], f"{segment}: cannot read: Permission denied (EACCES)")
    assert not out.exists()


@pytest.mark.spark
def test_an_unreadable_segment_read_by_a_spark_task_is_one_line(tmp_path, unreadable):
    """The error is raised in an executor's Python worker and reaches the driver inside Spark's exception
    (one JVM start: the only case here that gets as far as Spark)."""
    log, segment, prefix = unreadable
    out = tmp_path / "out"
    argv = ["export", str(log), "--topic", "orders", "--output", str(out), "--format", "parquet", "--quiet"]
    done, _ = run(*argv, prefix=prefix)
    line = one_line(done, 0, "export")  # 0: Spark started, as it must to read the segment
    assert line == f"kafkalog export: {segment}: cannot read: Permission denied (EACCES)"
    assert not out.exists()


def test_validate_reports_an_unreadable_file_and_goes_on(unreadable):
    log, segment, prefix = unreadable
    done, _ = run("validate", str(log), "--json", prefix=prefix)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    import json

    findings = json.loads(done.stdout)["findings"]
    assert {(f["check"], f["file"]) for f in findings if f["severity"] == "error"} == {("io.read", str(segment))}


def test_a_read_that_fails_midway_names_the_file(tmp_path, monkeypatch):
    fs, root = LogFileSystem.for_path(str(tmp_path))
    path = fs.join(root, "00000000000000000000.log")
    fs.write_bytes(path, b"x" * 100)

    class FailingFile:  # a disk that answers the open and fails the read, as a bad sector does
        def read_at(self, *args):
            raise OSError(errno.EIO, "Input/output error")

        read = read_at

        def close(self):
            pass

    class FailingDisk:
        def open_input_file(self, _path):
            return FailingFile()

    monkeypatch.setattr(fs, "fs", FailingDisk())
    with pytest.raises(UnreadableFileError, match=rf"^{path}: cannot read: Input/output error \(EIO\)$"):
        fs.read_range(path, 0, 10)
    with pytest.raises(UnreadableFileError, match=r"\(EIO\)$"):
        fs.read_bytes(path)


def test_a_task_error_that_reaches_the_driver_inside_sparks_is_one_line(capsys, monkeypatch):
    """An executor's KafkaLogError arrives as the text of Spark's exception (spark/errors.py): the command
    line prints the error it carries, whichever operation ran the job."""
    import kafkalog.cli as cli

    carried = UnreadableFileError("cannot read: Permission denied (EACCES)", file="/data/orders-0/0.log")

    def failing_run(_args):
        raise RuntimeError(f"Traceback ...\nkafkalog.errors.UnreadableFileError: ...\n{carried.as_data()}\n\tat ...")

    monkeypatch.setattr(cli.txn_report, "_run_txn_report", failing_run)
    assert cli.main(["txn-report", "x"]) == 2
    assert (
        capsys.readouterr().err
        == "kafkalog txn-report: /data/orders-0/0.log: cannot read: Permission denied (EACCES)\n"
    )


def test_a_task_whose_python_worker_was_killed_is_one_line(capsys, monkeypatch):
    """A Python worker killed mid-task (the OOM killer, kill -9) fails Spark's job with a page of Java
    stack and no kafkalog error in it: the command line says what happened in one line, exit 2."""
    import kafkalog.cli as cli

    def failing_run(_args):
        raise RuntimeError(
            "An error occurred while calling o96.collectToPython.\n: org.apache.spark.SparkException: Job aborted "
            "due to stage failure: Task 3 in stage 0.0 failed 1 times: org.apache.spark.SparkException: Python "
            "worker exited unexpectedly (crashed).\n\tat org.apache.spark.api.python.BasePythonRunner..."
        )

    monkeypatch.setattr(cli.txn_report, "_run_txn_report", failing_run)
    assert cli.main(["txn-report", "x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kafkalog txn-report: a Spark task's Python worker was killed mid-task")
    assert err.count("\n") == 1


# -- an optional package that is not installed ------------------------------------------------------------

BLOCKING = "import sys; sys.modules[{module!r}] = None\nfrom kafkalog.cli import main; sys.exit(main(sys.argv[1:]))"


def _extra_cases():
    export = ["export", "{log}", "--topic", "customers", "--output", "{out}"]
    return [
        ("pyiceberg", [*export, "--format", "iceberg"], "iceberg"),
        ("fastavro", [*export, "--value-format", "avro", "--schema-dir", "{empty}"], "formats"),
        ("grpc_tools", [*export, "--value-format", "protobuf", "--schema-dir", "{empty}"], "formats"),
        ("deltalake", ["validate", "{log}", "--findings", "{out}", "--findings-format", "delta"], "delta"),
        ("deltalake", ["verify-purge", "{log}", "--ledger", "{ledger}", "--secret-file", "{secret}"], "delta"),
        ("cryptography", ["evidence", "verify", "{secret}", "--public-key", "{secret}"], "evidence"),
        (
            "pyspark",
            ["compact", "{log}", "--config", "cleanup.policy=compact", "--output", "{out}", "--now", NOW],
            "spark",
        ),
    ]


@pytest.mark.parametrize("module, argv, extra", _extra_cases(), ids=lambda v: v if isinstance(v, str) else None)
def test_an_option_without_its_extra_names_the_pip_command_before_spark(tmp_path, log_dir, files, module, argv, extra):
    paths = {"log": str(log_dir), "out": str(tmp_path / "out"), **files}
    done, seconds = run(*(a.format(**paths) for a in argv), code=BLOCKING.format(module=module))
    one_line(done, seconds, argv[0], f"needs the {module} package", f"pip install 'kafkalog[{extra}]'")
    assert not (tmp_path / "out").exists()


def test_spark_connect_without_its_client_names_the_extra(tmp_path, log_dir):
    argv = ["plan", str(log_dir), "--config", "cleanup.policy=compact", "--now", NOW]
    done, seconds = run(*argv, code=BLOCKING.format(module="grpc"), env={"SPARK_REMOTE": "sc://127.0.0.1:1"})
    one_line(done, seconds, "plan", "Spark Connect (sc://127.0.0.1:1) needs the grpc package", "'kafkalog[connect]'")


def test_the_library_names_the_extra_where_it_imports_lazily(tmp_path, monkeypatch):
    from kafkalog.storage.tables import read_table

    monkeypatch.setitem(sys.modules, "deltalake", None)
    with pytest.raises(MissingExtraError, match=r"needs the deltalake package.*pip install 'kafkalog\[delta\]'"):
        read_table(str(tmp_path), "delta")
    monkeypatch.setitem(sys.modules, "pyiceberg", None)
    with pytest.raises(KafkaLogError, match=r"needs the pyiceberg package.*'kafkalog\[iceberg\]'"):
        read_table(str(tmp_path), "iceberg")
