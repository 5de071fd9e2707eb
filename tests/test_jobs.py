"""The spark-submit jobs of jobs/ and the files of conf/: arguments and configuration defaults without
Spark, then compact, retain and validate through the real spark-submit of the installed pyspark."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pyarrow.parquet
import pyspark
import pytest

from kafkalog import cli
from kafkalog.jobs import job_arguments
from kafkalog.operations.clock import stamp
from kafkalog.operations.validate import validate_paths
from kafkalog.spark.session import _LOG4J2, ALWAYS, LOCAL_DEFAULTS
from kafkalog.storage.logdir import LogDir, parse_properties
from kafkalog.storage.naming import CLEANER_OFFSET_CHECKPOINT

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"
SPARK_SUBMIT = Path(pyspark.__file__).parent / "bin" / "spark-submit"
NOW = 1_700_100_000_000  # the small preset's records span 1_700_000_000_000 + a few minutes


# -- without Spark ---------------------------------------------------------------------------------------


def test_the_conf_dir_gives_the_configuration_options_the_arguments_leave_out(tmp_path):
    (tmp_path / "kafkalog.properties").write_text("log.retention.hours=1\n")
    (tmp_path / "topics").mkdir()
    env = {"KAFKALOG_CONF_DIR": str(tmp_path)}
    conf_file, topics = str(tmp_path / "kafkalog.properties"), str(tmp_path / "topics")
    assert job_arguments("compact", ["LOG", "--now", "5"], env) == [
        "--config-file",
        conf_file,
        "--topic-config-dir",
        topics,
        "LOG",
        "--now",
        "5",
    ]
    assert job_arguments("validate", ["A", "B", "--config-file", "mine.properties"], env) == [
        "--topic-config-dir",
        topics,
        "A",
        "B",
        "--config-file",
        "mine.properties",
    ]
    assert job_arguments("retain", ["LOG"], {}) == ["LOG"]  # no $KAFKALOG_CONF_DIR: nothing implicit
    (tmp_path / "kafkalog.properties").unlink()
    assert job_arguments("retain", ["LOG", "--topic-config-dir", "t"], env) == ["LOG", "--topic-config-dir", "t"]
    with pytest.raises(SystemExit) as exited:  # refused before any Spark starts
        job_arguments("compact", ["LOG", "--now", "soon"], env)
    assert exited.value.code == 2


def test_topic_files_override_the_properties_file_and_are_overridden_by_the_command_line():
    args = cli.build_parser().parse_args(
        [
            "validate",
            "x",
            "--config-file",
            str(CONF / "kafkalog.properties"),
            "--topic-config-dir",
            str(CONF / "topics"),
            "--topic-config",
            "clickstream:retention.bytes=1",
        ]
    )
    resolver = cli.options.config_resolver(args)
    customers, clicks = resolver.for_topic("customers"), resolver.for_topic("clickstream")
    assert customers.cleanup_policy == ("compact",) and customers.min_compaction_lag_ms == 3_600_000
    assert (clicks.segment_ms, clicks.retention_bytes) == (86_400_000, 1)
    assert resolver.for_topic("other").retention_ms == 168 * 3_600_000  # the properties file's broker setting
    assert resolver.for_topic("__consumer_offsets").segment_bytes == 104_857_600


def test_a_topic_file_with_a_broker_name_is_refused_naming_the_file(tmp_path, capsys):
    (tmp_path / "orders.properties").write_text("log.retention.hours=1\n")
    assert cli.main(["validate", str(tmp_path), "--topic-config-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "orders.properties" in err and "unknown topic configuration log.retention.hours for topic orders" in err


def test_spark_defaults_are_the_sessions_local_defaults():
    conf = dict(
        line.split(None, 1)
        for line in (CONF / "spark-defaults.conf").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    assert conf == {"spark.master": "local[2]", **LOCAL_DEFAULTS, **ALWAYS}


def test_log4j2_properties_is_the_sessions_quiet_configuration_on_stderr():
    assert parse_properties((CONF / "log4j2.properties").read_text()) == parse_properties(
        _LOG4J2.format(appender="console")
    )


# -- through spark-submit (each run starts a JVM: five runs in all) ------------------------------------------
#
# The five runs are independent (each on a copy of the generated log dir) and spend much of their time
# starting a JVM and Python workers: `runs` starts them all at once, two at a time, when the module's first
# job test asks, and each test checks its run's result.


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A small log dir (100 records per partition) and a conf dir holding its configuration."""
    root = tmp_path_factory.mktemp("jobs")
    (root / "conf").mkdir()
    assert (
        cli.main(
            [
                "generate",
                str(root / "log"),
                "--preset",
                "small",
                "--seed",
                "7",
                "--records",
                "100",
                "--config-out",
                str(root / "conf" / "kafkalog.properties"),
            ]
        )
        == 0
    )
    return root


def spark_submit(job: str, *args: str, env: dict | None = None, log4j: bool = True) -> subprocess.CompletedProcess:
    """Run a job: the command's results in `.stdout`, the job's logs and progress in `.stderr`. `log4j`:
    with conf/log4j2.properties as the driver's log4j2 configuration (else Spark's default profile)."""
    python = sys.executable
    quiet = ["--driver-java-options", f"-Dlog4j2.configurationFile=file:{CONF / 'log4j2.properties'}"]
    command = [
        str(SPARK_SUBMIT),
        "--master",
        "local[2]",
        "--properties-file",
        str(CONF / "spark-defaults.conf"),
        *(quiet if log4j else []),
        str(REPO / "jobs" / f"{job}.py"),
        *args,
    ]
    environ = {k: v for k, v in os.environ.items() if k != "KAFKALOG_CONF_DIR"}
    environ.update(PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python, **(env or {}))
    return subprocess.run(command, env=environ, capture_output=True, text=True, timeout=600)


def _compact(generated: Path, work: Path) -> subprocess.CompletedProcess:
    shutil.copytree(generated / "log", work / "log")
    return spark_submit(
        "compact", str(work / "log"), "--now", str(NOW), env={"KAFKALOG_CONF_DIR": str(generated / "conf")}
    )


def _retain(generated: Path, work: Path) -> subprocess.CompletedProcess:
    shutil.copytree(generated / "log", work / "log")
    return spark_submit(
        "retain",
        str(work / "log"),
        "--now",
        str(NOW),
        "--topic",
        "orders",
        "--config-file",
        str(generated / "conf" / "kafkalog.properties"),
        "--config",
        "retention.ms=3600000",
        log4j=False,  # as a first run is: Spark's own default profile, INFO
    )


def _validate(generated: Path, work: Path) -> subprocess.CompletedProcess:
    shutil.copytree(generated / "log", work / "log")
    segment = work / "log" / "orders-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[100] ^= 0xFF  # inside the first batch's CRC-covered bytes
    segment.write_bytes(bytes(data))
    return spark_submit(
        "validate", str(work / "log"), "--fail-on", "error", "--findings", str(work / "findings.parquet")
    )


def _doomed(generated: Path) -> list[bytes]:
    """The two keys of customers the purge job erases."""
    return sorted(_keys_of(generated / "log", "customers"))[:2]


def _purge(generated: Path, work: Path) -> subprocess.CompletedProcess:
    shutil.copytree(generated / "log", work / "log")
    (work / "erase.txt").write_text("".join(k.decode() + "\n" for k in _doomed(generated)))
    return spark_submit(
        "purge",
        str(work / "log"),
        "--keys",
        str(work / "erase.txt"),
        "--topic",
        "customers",
        "--ledger",
        str(work / "ledger"),
        "--now",
        str(NOW),
        env={"KAFKALOG_PURGE_SECRET": "a-test-secret-of-32-bytes-length"},
    )


def _export(generated: Path, work: Path) -> subprocess.CompletedProcess:
    return spark_submit(
        "export",
        str(generated / "log"),
        "--topic",
        "customers",
        "--output",
        str(work / "customers.parquet"),
        "--format",
        "parquet",
        "--key-format",
        "string",
        "--value-format",
        "string",
        "--on-decode-error",
        "dead-letter",
    )


# the longest first (the purge writes a Delta ledger), so that the two lanes end together
JOBS = {"purge": _purge, "compact": _compact, "export": _export, "validate": _validate, "retain": _retain}
JOBS_AT_ONCE = 2


@pytest.fixture(scope="module")
def runs(generated, tmp_path_factory):
    """{job: (its working directory, its run to come)}: every job of JOBS started, JOBS_AT_ONCE at a time;
    the module's end waits for those still running."""
    pool = ThreadPoolExecutor(max_workers=JOBS_AT_ONCE, thread_name_prefix="spark-submit")
    started: dict[str, tuple[Path, Future]] = {}
    for job, run in JOBS.items():
        work = tmp_path_factory.mktemp(job)
        started[job] = (work, pool.submit(run, generated, work))
    try:
        yield started
    finally:
        pool.shutdown(wait=True)


def finished(runs, job: str) -> tuple[Path, subprocess.CompletedProcess]:
    work, run = runs[job]
    return work, run.result()


@pytest.mark.spark
def test_compact_job_reads_the_conf_dir_and_leaves_a_valid_log(generated, runs):
    work, run = finished(runs, "compact")
    log_dir, conf = work / "log", generated / "conf"
    assert run.returncode == 0, run.stderr
    assert f"kafkalog compact --config-file {conf / 'kafkalog.properties'} {log_dir}" in run.stderr
    assert "master local[2]" in run.stderr and "kafkalog compact: exit code 0 (done) after" in run.stderr
    assert "INFO SparkContext" not in run.stderr  # conf/log4j2.properties keeps Spark quiet
    assert run.stdout.startswith("1 of 4 compacted partitions chosen at now="), run.stdout
    assert LogDir.open(str(log_dir)).read_checkpoint(CLEANER_OFFSET_CHECKPOINT).keys() == {("customers", 0)}
    assert cli.main(["validate", str(log_dir), "--config-file", str(conf / "kafkalog.properties")]) == 0


@pytest.mark.spark
def test_retain_job_deletes_expired_segments(generated, runs):
    work, run = finished(runs, "retain")
    log_dir = work / "log"
    assert run.returncode == 0, run.stderr
    # the results alone on stdout; the job's logs and progress on stderr, where Spark's INFO lines stop
    # at the SparkContext's start (a handful, logged before spark.log.level applies; some 45 without it)
    assert run.stdout.startswith(f"retain {log_dir} (in place, now={stamp(NOW)}): 2 of 2 partitions change")
    assert " INFO " not in run.stdout and "kafkalog retain: exit code 0 (done) after" in run.stderr
    spark_info = [line for line in run.stderr.splitlines() if " INFO " in line and " kafkalog" not in line]
    assert len(spark_info) <= 5, run.stderr
    assert cli.main(["validate", str(log_dir), "--config-file", str(generated / "conf" / "kafkalog.properties")]) == 0


@pytest.mark.spark
def test_validate_job_exits_1_on_a_corrupt_segment(runs):
    work, run = finished(runs, "validate")
    log_dir, findings = work / "log", work / "findings.parquet"
    segment = log_dir / "orders-0" / "00000000000000000000.log"
    assert run.returncode == 1, run.stderr
    assert "batch.crc: orders-0/00000000000000000000.log" in run.stdout
    assert "kafkalog validate: exit code 1 (problems found) after" in run.stderr
    # the findings table is the report's: the same checks on the driver alone give the same rows
    table = pyarrow.parquet.read_table(findings)
    assert table == validate_paths([str(log_dir)], fail_on="error").findings_table()
    assert ("batch.crc", "error", str(segment)) in {(r["check"], r["severity"], r["file"]) for r in table.to_pylist()}


@pytest.mark.spark
def test_purge_job_removes_the_keys_and_writes_the_ledger(generated, runs):
    work, run = finished(runs, "purge")
    log_dir = work / "log"
    assert run.returncode == 0, run.stderr
    assert "kafkalog purge: exit code 0 (done) after" in run.stderr
    assert _keys_of(log_dir, "customers") == _keys_of(generated / "log", "customers") - set(_doomed(generated))
    assert (work / "ledger" / "_delta_log").is_dir()
    assert cli.main(["validate", str(log_dir), "--config-file", str(generated / "conf" / "kafkalog.properties")]) == 0


def _keys_of(log_dir, topic) -> set:
    part = LogDir.open(str(log_dir)).partition(topic, 0)
    return {r.key for seg in part.segments for _, b in seg.batches() for r in b.records() if r.key is not None}


@pytest.mark.spark
def test_export_job_writes_the_topics_table(runs):
    import pyarrow.parquet as pq

    work, run = finished(runs, "export")
    assert run.returncode == 0, run.stderr
    assert "kafkalog export: exit code 0 (done) after" in run.stderr
    rows = pq.read_table(work / "customers.parquet").to_pylist()
    keys = {(r["partition"], r["key"]) for r in rows}
    assert rows and len(keys) == len(rows) and all(isinstance(r["value"], str) for r in rows)
    assert all(isinstance(k, str) for _, k in keys)
    assert '"deadLetters": 0' in run.stdout and not (work / "customers.parquet_dead_letters").exists()
