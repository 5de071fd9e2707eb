"""The jobs of jobs/ on a real Spark standalone cluster (conftest.py: one master and two one-core workers on
127.0.0.1), submitted as jobs/README.md's "Standalone" section says, with the archive
scripts/build-job-archive.sh builds: each job's exit code; compact, retain and purge write byte for byte
what the same command writes on local[2]; a compaction whose Python worker is killed mid-task runs the
task again and still writes those bytes; the executors run the archive's Python and import kafkalog and
its native dependencies from it.

Each application costs some 30 s even when it has little to do: the driver and each executor unpack the
archive (180 MB, 530 MB unpacked). So there are five, and retain and validate, which decide on the driver
alone, run while the compaction holds both workers: they get no executors, as on a busy cluster."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from kafkalog import cli
from tests.early import InBackground

from .conftest import REPO, SPARK_HOME, WORKERS, Submission, Submitted, processes_in, run_submitted, start_submit

pytestmark = pytest.mark.spark

NOW = "1700100000000"  # the generated records span 1_700_000_000_000 + a few hours


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """`kafkalog generate DIR --preset small --config-out` (the README's quick start) and the conf dir
    holding that configuration ($KAFKALOG_CONF_DIR on the cluster), a purge key list and its secret."""
    root = tmp_path_factory.mktemp("cluster-small")
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
                "--config-out",
                str(root / "conf" / "kafkalog.properties"),
            ]
        )
        == 0
    )
    (root / "erase.txt").write_text("customer-000001\ncustomer-000003\n")
    (root / "purge.secret").write_text("a-test-secret-of-32-bytes-length")
    return SimpleNamespace(
        root=root, log=root / "log", conf=root / "conf", properties=root / "conf" / "kafkalog.properties"
    )


def job(name: str) -> Path:
    return REPO / "jobs" / f"{name}.py"


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


def kill_a_python_worker_mid_task(root: Path, submission: Submission, timeout: float = 600):
    """SIGKILL the first Python worker of the cluster seen computing; return (pid, its executor's dir).

    An executor's pyspark.daemon (a child of the executor's JVM, one per kind of Python task) forks
    a worker when a task needs one, and keeps it for later tasks, waiting on its socket. A worker
    uses CPU only while it runs a task: from the fork, when it imports pyspark's worker, pyarrow,
    pandas and kafkalog (half a second of CPU or more, before any data), until it hands back the
    task's last result. So a worker whose CPU time grew between three polls 20 ms apart is in the
    middle of a task, and it is killed right after the third: the task would have to end within
    that fraction of a millisecond to be missed, and then the executor's log shows no failed task
    and the test says so. Every compaction forks new workers: the small log dir is enough."""
    cpu_seen: dict[int, int] = {}
    busy: dict[int, int] = {}
    deadline = time.monotonic() + timeout
    while submission.running() and time.monotonic() < deadline:
        found = {pid: p for pid, p in processes_in(root).items() if "pyspark.daemon" in p[3]}
        for pid, (parent, cpu, cwd, _) in found.items():
            if parent not in found:
                continue  # a daemon (its parent is the executor), not one of its workers
            busy[pid] = busy.get(pid, 0) + 1 if cpu > cpu_seen.get(pid, cpu) else 0
            cpu_seen[pid] = cpu
            if busy[pid] >= 2:
                os.kill(pid, signal.SIGKILL)
                return pid, Path(cwd)
        time.sleep(0.02)
    return None, None


def wait_for_executors(root: Path, submission: Submission, timeout: float = 300) -> None:
    """Until an executor runs on every worker (or the application has ended)."""
    deadline = time.monotonic() + timeout
    while submission.running() and time.monotonic() < deadline:
        if sum("CoarseGrainedExecutorBackend" in p[3] for p in processes_in(root).values()) >= WORKERS:
            return
        time.sleep(0.5)


@pytest.fixture(scope="module")
def while_compacting(small, standalone_cluster, job_archive, spark, tmp_path_factory):
    """The compact job, one of whose Python workers is killed mid-task, and, submitted once its executors
    hold both workers, the retain job and the validate job on a copy of the log dir with a bad CRC.
    `.runs`: each one's Submitted; `.killed`: (pid, executor dir) of the killed Python worker;
    `.local_compact`: the same compaction on local[2] into `.out / "local-compact"`, in a thread of its
    own while the job's driver and executors start and unpack the archive (`.result()` raises what it
    raised)."""
    out = tmp_path_factory.mktemp("while-compacting")
    shutil.copytree(small.log, out / "corrupt")
    segment = out / "corrupt" / "orders-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[100] ^= 0xFF  # inside the first batch's CRC-covered bytes
    segment.write_bytes(bytes(data))

    def submit(command: str, *args: str) -> Submission:
        return start_submit(standalone_cluster, job_archive, job(command), *args, conf_dir=small.conf)

    compact = submit("compact", str(small.log), "--now", NOW, "--output", str(out / "compact"))
    local_compact = InBackground(local, "compact", small, "--now", NOW, "--output", str(out / "local-compact"))
    submissions, killed = {"compact": compact}, (None, None)
    try:
        wait_for_executors(standalone_cluster.root, compact)
        submissions["retain"] = submit(
            "retain", str(small.log), "--now", NOW, "--config", "retention.ms=3600000", "--output", str(out / "retain")
        )
        submissions["validate"] = submit("validate", str(out / "corrupt"), "--fail-on", "error")
        killed = kill_a_python_worker_mid_task(standalone_cluster.root, compact)
    finally:
        runs = {name: run_submitted(standalone_cluster, s) for name, s in submissions.items()}
        local_compact.finished()
    return SimpleNamespace(out=out, runs=runs, killed=killed, local_compact=local_compact)


def test_compact_job_runs_a_killed_python_workers_task_again_and_writes_what_local_mode_writes(
    while_compacting, small, standalone_cluster
):
    run, (pid, executor) = while_compacting.runs["compact"], while_compacting.killed
    assert pid is not None, f"the job ended before any of its Python workers was seen computing:\n{run}"
    assert_job_ran(run, "compact", small)
    assert "\n1 of 4 compacted partitions chosen at now=" in run.stdout, run

    # the executor whose worker was killed failed the task, and the task ran again and finished
    failed = TASK_FAILED.findall((executor / "stderr").read_text())
    assert failed, f"Python worker {pid} was killed, but {executor}/stderr shows no failed task"
    logs = "".join((d / "stderr").read_text() for d in standalone_cluster.application_dirs(run.app_id))
    for index, attempt, stage in failed:
        assert f"Finished task {index}.{int(attempt) + 1} in stage {stage}" in logs, (index, attempt, stage)

    while_compacting.local_compact.result()
    assert_same_tree(while_compacting.out / "compact", while_compacting.out / "local-compact")


def test_retain_job_writes_what_local_mode_writes(while_compacting, small, tmp_path):
    run = while_compacting.runs["retain"]
    assert_job_ran(run, "retain", small)
    assert "7 of 11 partitions change" in run.stdout, run
    local("retain", small, "--now", NOW, "--config", "retention.ms=3600000", "--output", str(tmp_path / "local"))
    assert_same_tree(while_compacting.out / "retain", tmp_path / "local")


def test_validate_job_exit_code_reaches_spark_submit(while_compacting, small):
    run = while_compacting.runs["validate"]
    assert_job_ran(run, "validate", small, code=1)
    assert "batch.crc: orders-0/00000000000000000000.log" in run.stdout, run


def test_purge_job_writes_what_local_mode_writes(small, standalone_cluster, job_archive, spark, tmp_path):
    def args(where: str) -> list[str]:
        return [
            "--keys",
            str(small.root / "erase.txt"),
            "--topic",
            "customers",
            "--now",
            NOW,
            "--secret-file",
            str(small.root / "purge.secret"),
            "--ledger",
            str(tmp_path / f"{where}-ledger"),
            "--output",
            str(tmp_path / where),
        ]

    submitted = start_submit(
        standalone_cluster, job_archive, job("purge"), str(small.log), *args("cluster"), conf_dir=small.conf
    )
    try:  # while the job's driver and executors start and unpack the archive
        local("purge", small, *args("local"))
    finally:
        run = run_submitted(standalone_cluster, submitted)
    assert_job_ran(run, "purge", small)
    assert re.search(r"purged [1-9]\d* records removed", run.stdout), run
    assert (tmp_path / "cluster-ledger" / "_delta_log").is_dir()
    assert_same_tree(tmp_path / "cluster", tmp_path / "local")


# -- where the executors' Python and modules come from ------------------------------------------------------

# A Spark application of the test's own: which interpreter and which files the tasks of each executor
# used. It imports what kafkalog's executor code imports and runs the native codecs once.
PROBE = """
import json, sys
from pyspark.sql import SparkSession

def where(_):
    import os, sys, time
    time.sleep(1)  # a task an executor cannot finish before the other takes its share
    import kafkalog, kafkalog.codec.compression as compression, crc32c, pyspark
    from kafkalog.spark import scan  # noqa: F401  (what the scan tasks import: pyarrow, numpy)
    for codec in compression.Codec:
        compression.decompress(codec, compression.compress(codec, b"kafkalog" * 100))
    crc32c.crc32c(b"kafkalog")
    native = sorted({getattr(m, "__file__", None) or "" for m in list(sys.modules.values())} - {""})
    yield {"cwd": os.getcwd(), "executable": sys.executable, "prefix": sys.prefix, "path": sys.path,
           "kafkalog": kafkalog.__file__, "pyspark": pyspark.__file__,
           "native": [f for f in native if f.endswith(".so") and "site-packages" in f]}

spark = SparkSession.builder.appName("kafkalog-probe").getOrCreate()
print("application " + spark.sparkContext.applicationId)
import time
deadline = time.monotonic() + 300
while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < 3 and time.monotonic() < deadline:
    time.sleep(0.2)  # the driver and both executors: then each executor takes tasks from the first round
print("PROBE " + json.dumps(spark.sparkContext.parallelize(range(6), 6).mapPartitions(where).collect()))
spark.stop()
"""
# the extension modules kafkalog's codecs and scans load (python-snappy's is cramjam)
NATIVE = {"crc32c", "zstandard", "lz4", "cramjam", "xxhash", "pyarrow", "numpy"}


def test_executors_import_kafkalog_and_its_native_dependencies_from_the_archive(
    standalone_cluster, spark_submit, tmp_path
):
    (tmp_path / "probe.py").write_text(PROBE)
    # tasks start once both executors are registered, so that each takes some: a standalone application
    # expects spark.cores.max cores (none without it, and the ratio then waits for nothing). That alone
    # still let all six tasks run on one worker's executor once in a full run (2026-11-28), so the probe
    # also waits until the driver lists both executors, and each task takes a second.
    run = spark_submit(
        tmp_path / "probe.py",
        conf={
            "spark.cores.max": "2",
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "300s",
        },
    )
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
    assert sorted({Path(task["cwd"]).parents[1] for task in tasks}) == standalone_cluster.work_dirs, tasks
