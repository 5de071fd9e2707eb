"""The jobs of jobs/ on a real Spark standalone cluster (conftest.py: one master and two one-core workers on
127.0.0.1), submitted as jobs/README.md's "Standalone" section says, with the archive
scripts/build-job-archive.sh builds: each job's exit code; compact, retain and purge write byte for byte
what the same command writes on local[2]; a compaction whose Python worker is killed mid-task runs the
task again and still writes those bytes; the executors run the archive's Python and import kafkalog and
its native dependencies from it.

The applications ran before these tests, while the run's other tests went on (applications.py); the
tests here assert what they did, and run the same commands on local[2] to compare."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from kafkalog import cli

from .applications import NOW, purge_args
from .conftest import REPO, SPARK_HOME, Submitted, die_with_parent

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def cluster(applications):
    return applications[0]


@pytest.fixture(scope="module")
def ran(applications):
    """What the applications did: `.small` (the generated log dir and its conf), `.out`, `.runs`, `.killed`."""
    return applications[1]


@pytest.fixture(scope="module")
def small(ran):
    return ran.small


def assert_job_ran(run: Submitted, command: str, small, code: int = 0) -> None:
    """Its exit code, and the job's own lines: its command line with the conf dir's file, where it ran,
    how it ended."""
    assert run.returncode == code, run
    assert f"kafkalog {command} --config-file {small.properties} " in run.stdout, run
    assert "master spark://127.0.0.1:" in run.stdout and run.app_id, run
    assert f"kafkalog {command}: exit code {code} (" in run.stdout, run
    assert "INFO SparkContext" not in run.stdout, run  # conf/log4j2.properties reached the driver


def assert_same_tree(actual: Path, expected: Path) -> None:
    """Every file under `expected` is under `actual` with the same bytes, and nothing else is."""

    def tree(root: Path) -> dict:
        return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*"))}

    got, want = tree(actual), tree(expected)
    assert sorted(got) == sorted(want), f"{actual} and {expected} hold different files"
    differ = [name for name, path in want.items() if path.is_file() and got[name].read_bytes() != path.read_bytes()]
    assert not differ, f"files of {actual} differ from local mode's {expected}: {differ}"
    assert sum(p.is_file() for p in want.values()) > 5


def local(command: str, small, *args: str) -> None:
    """The same command on local[2] (the test process's SparkSession, or none for retain)."""
    assert cli.main([command, str(small.log), *args, "--config-file", str(small.properties)]) == 0


# -- compaction with a Python worker killed mid-task; retain and validate meanwhile ------------------------

# what an executor logs when the Python worker of a task dies under it
TASK_FAILED = re.compile(
    r"ERROR Executor: Exception in task (\d+)\.(\d+) in stage (\d+\.\d+) \(TID \d+\)\n"
    r".*Python worker exited unexpectedly \(crashed\)"
)


def test_compact_job_runs_a_killed_python_workers_task_again_and_writes_what_local_mode_writes(
    ran, small, cluster, spark, tmp_path
):
    run, (pid, executor) = ran.runs["compact"], ran.killed
    assert pid is not None, f"the job ended before any of its Python workers was seen computing:\n{run}"
    assert_job_ran(run, "compact", small)
    assert "\n1 of 4 compacted partitions chosen at now=" in run.stdout, run

    # the executor whose worker was killed failed the task, and the task ran again and finished
    failed = TASK_FAILED.findall((executor / "stderr").read_text())
    assert failed, f"Python worker {pid} was killed, but {executor}/stderr shows no failed task"
    logs = "".join((d / "stderr").read_text() for d in cluster.application_dirs(run.app_id))
    for index, attempt, stage in failed:
        assert f"Finished task {index}.{int(attempt) + 1} in stage {stage}" in logs, (index, attempt, stage)

    local("compact", small, "--now", NOW, "--output", str(tmp_path / "local"))
    assert_same_tree(ran.out / "compact", tmp_path / "local")


def test_retain_job_writes_what_local_mode_writes(ran, small, tmp_path):
    run = ran.runs["retain"]
    assert_job_ran(run, "retain", small)
    assert "7 of 11 partitions change" in run.stdout, run
    local("retain", small, "--now", NOW, "--config", "retention.ms=3600000", "--output", str(tmp_path / "local"))
    assert_same_tree(ran.out / "retain", tmp_path / "local")


def test_validate_job_exit_code_reaches_spark_submit(ran, small):
    run = ran.runs["validate"]
    assert_job_ran(run, "validate", small, code=1)
    assert "batch.crc: orders-0/00000000000000000000.log" in run.stdout, run


def test_purge_job_writes_what_local_mode_writes(ran, small, spark, tmp_path):
    run = ran.runs["purge"]
    assert_job_ran(run, "purge", small)
    assert re.search(r"purged [1-9]\d* records removed", run.stdout), run
    assert (ran.out / "purge-ledger" / "_delta_log").is_dir()
    local("purge", small, *purge_args(small, tmp_path / "local"))
    assert_same_tree(ran.out / "purge", tmp_path / "local")


# -- where the executors' Python and modules come from ------------------------------------------------------

# the extension modules kafkalog's codecs and scans load (python-snappy's is cramjam)
NATIVE = {"crc32c", "zstandard", "lz4", "cramjam", "xxhash", "pyarrow", "numpy"}


def test_executors_import_kafkalog_and_its_native_dependencies_from_the_archive(ran, cluster):
    run = ran.runs["probe"]  # applications.PROBE
    assert run.returncode == 0, run
    tasks = json.loads(run.stdout.split("PROBE ", 1)[1].splitlines()[0])
    venv = str(REPO / ".venv")
    for task in tasks:
        env = os.path.join(task["cwd"], "environment")  # where Spark unpacked --archives ...#environment
        assert os.path.normpath(task["executable"]) == os.path.join(env, "bin", "python"), task
        assert os.path.normpath(task["prefix"]) == env, task
        assert task["kafkalog"].startswith(os.path.join(env, "lib") + os.sep), task
        assert all(f.startswith(env + os.sep) for f in task["native"]), task["native"]
        # lib/python3.x/site-packages/<package>/...
        assert NATIVE <= {Path(f).relative_to(env).parts[3].split(".")[0] for f in task["native"]}, task["native"]
        # pyspark is the cluster's (here the pip-installed Spark, which lives in the venv); nothing else of the venv
        assert task["pyspark"].startswith(str(SPARK_HOME / "python" / "lib" / "pyspark.zip")), task
        assert not [p for p in task["path"] if p.startswith(venv) and not p.startswith(str(SPARK_HOME))], task["path"]
    # each executor in its worker's work dir (work/<application>/<executor>), one per worker
    assert sorted({Path(task["cwd"]).parents[1] for task in tasks}) == cluster.work_dirs, tasks


# -- the test process ---------------------------------------------------------------------------------------


def test_a_cluster_process_leaves_the_sessions_connection_alone(spark):
    """A process started as the cluster's thread starts its processes (`die_with_parent`), from a thread
    other than the main one, leaves the main thread's py4j connection to the session's JVM open: a child
    that ran Python before its exec (a `preexec_fn`) shut it down, and a test of tests/spark failed."""
    spark.sparkContext._jsc.sc().applicationId()  # the main thread's connection, made if there was none
    connection = spark.sparkContext._gateway._gateway_client.get_thread_connection().socket
    started = threading.Thread(target=subprocess.run, args=(die_with_parent(["true"]),), kwargs={"check": True})
    started.start()
    started.join()
    timeout = connection.gettimeout()
    connection.settimeout(0)
    try:
        with pytest.raises(BlockingIOError):  # open, nothing to read: neither reset nor shut down
            connection.recv(1, socket.MSG_PEEK)
    finally:
        connection.settimeout(timeout)
