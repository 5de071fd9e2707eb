"""The Spark applications tests/cluster submits to the standalone cluster, run one after another by
`run_applications` in the background thread that started the cluster (conftest.py `StartedEarly`),
while the run's other tests go on: tests/spark leaves a third of the machine idle (session 20, vmstat),
and the applications fill it. test_standalone.py asserts what they did and runs the same commands on
local[2] to compare.

Each application costs some 30 s even when it has little to do: the driver and each executor unpack the
archive (180 MB, 530 MB unpacked). So there are five, and retain and validate, which decide on the driver
alone, run while the compaction holds both workers: they get no executors, as on a busy cluster."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path
from types import SimpleNamespace

from tests.early import generate

from .conftest import REPO, WORKERS, Cluster, Submission, processes_in, run_submitted, start_submit

NOW = "1700100000000"  # the generated records span 1_700_000_000_000 + a few hours


def generate_small(root: Path) -> SimpleNamespace:
    """`kafkalog generate DIR --preset small --config-out` (the README's quick start) and the conf dir
    holding that configuration ($KAFKALOG_CONF_DIR on the cluster), a purge key list and its secret. In a
    process of its own: the test process's main thread runs other tests meanwhile."""
    (root / "conf").mkdir(parents=True)
    properties = root / "conf" / "kafkalog.properties"
    generate(root / "log", "--preset", "small", "--seed", "7", "--config-out", str(properties))
    (root / "erase.txt").write_text("customer-000001\ncustomer-000003\n")
    (root / "purge.secret").write_text("a-test-secret-of-32-bytes-length")
    return SimpleNamespace(root=root, log=root / "log", conf=root / "conf", properties=properties)


def job(name: str) -> Path:
    return REPO / "jobs" / f"{name}.py"


def purge_args(small: SimpleNamespace, out: Path) -> list[str]:
    """The purge job's arguments, writing into `out` and its ledger beside it."""
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
        f"{out}-ledger",
        "--output",
        str(out),
    ]


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


def compact_while_killing(cluster: Cluster, archive: Path, small: SimpleNamespace, out: Path):
    """The compact job, one of whose Python workers is killed mid-task, and, submitted once its executors
    hold both workers, the retain job and the validate job on a copy of the log dir with a bad CRC.
    Returns ({name: Submitted}, (pid, executor dir) of the killed Python worker)."""
    shutil.copytree(small.log, out / "corrupt")
    segment = out / "corrupt" / "orders-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[100] ^= 0xFF  # inside the first batch's CRC-covered bytes
    segment.write_bytes(bytes(data))

    def submit(command: str, *args: str) -> Submission:
        return start_submit(cluster, archive, job(command), *args, conf_dir=small.conf)

    submissions = {"compact": submit("compact", str(small.log), "--now", NOW, "--output", str(out / "compact"))}
    killed = (None, None)
    try:
        wait_for_executors(cluster.root, submissions["compact"])
        submissions["retain"] = submit(
            "retain", str(small.log), "--now", NOW, "--config", "retention.ms=3600000", "--output", str(out / "retain")
        )
        submissions["validate"] = submit("validate", str(out / "corrupt"), "--fail-on", "error")
        killed = kill_a_python_worker_mid_task(cluster.root, submissions["compact"])
    finally:
        runs = {name: run_submitted(cluster, s) for name, s in submissions.items()}
    return runs, killed


# An application of the tests' own: which interpreter and which files the tasks of each executor used. It
# imports what kafkalog's executor code imports and runs the native codecs once.
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

# Tasks start once both executors are registered, so that each takes some: a standalone application
# expects spark.cores.max cores (none without it, and the ratio then waits for nothing). That alone still
# let all six tasks run on one worker's executor once in a full run (2026-11-28), so the probe also waits
# until the driver lists both executors, and each task takes a second.
PROBE_CONF = {
    "spark.cores.max": "2",
    "spark.scheduler.minRegisteredResourcesRatio": "1.0",
    "spark.scheduler.maxRegisteredResourcesWaitingTime": "300s",
}


def run_applications(cluster: Cluster, archive: Path, work: Path) -> SimpleNamespace:
    """Every application of tests/cluster, in `work`: `.small` (generate_small), `.out` (what the jobs
    wrote), `.runs` ({name: Submitted} of compact, retain, validate, purge and the probe), `.killed`."""
    small = generate_small(work / "small")
    out = work / "out"
    out.mkdir()
    runs, killed = compact_while_killing(cluster, archive, small, out)
    purge_job = (job("purge"), str(small.log), *purge_args(small, out / "purge"))
    purge = start_submit(cluster, archive, *purge_job, conf_dir=small.conf)
    runs["purge"] = run_submitted(cluster, purge)
    (work / "probe.py").write_text(PROBE)
    runs["probe"] = run_submitted(cluster, start_submit(cluster, archive, work / "probe.py", conf=PROBE_CONF))
    return SimpleNamespace(small=small, out=out, runs=runs, killed=killed)
