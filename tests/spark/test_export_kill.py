"""An incremental `kafkalog export` killed by SIGKILL inside its commit, through delta-spark (a MERGE in
latest mode, an append in changelog mode): the table reads as exactly the old or exactly the new
state, through Delta's two readers, its note says the offsets those rows hold, and the next run from
there converges to the rows of an uninterrupted run (no record applied twice, none lost). The note is
in the data's own commit (spark/tables.py): there is no instant at which the table has the new records
and a note without them.

delta-spark writes in the JVM, where no Python hook reaches: KillAt.java (a local file system and
Delta's own log store for local paths, each with one kill point) kills the run's process, then halts
its JVM, at the opening of the MERGE's first data file, just before the commit's JSON is written, or
just after. The run is a subprocess with a Spark of its own (one per point, the only one); the old
tables, the uninterrupted runs and every check use the suite's shared session."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from kafkalog import tuning
from kafkalog.operations.export import export
from kafkalog.spark.context import spark_context
from kafkalog.spark.tables import read_note
from tests.export_scenario import TOPIC, consumer_reads, latest, write_topic

REPO = Path(__file__).resolve().parents[2]
OLD = 40  # the old table holds offsets below this of each partition
# (mode, kill point, the state the kill leaves)
POINTS = [
    ("latest", "data", "old"),
    ("latest", "before-commit", "old"),
    ("latest", "after-commit", "new"),
    ("changelog", "after-commit", "new"),
]


@pytest.fixture(scope="module")
def topic(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("topic"))
    records, fates = write_topic(root)
    return root, records, fates


def ordered(found) -> list[tuple]:
    """(partition, key, offset, value) rows by partition and offset: a row twice is there twice."""
    return sorted(found, key=lambda row: (row[0], row[2]))


def rows(path: str) -> list[tuple]:
    """Every row of the Delta table, deletion vectors applied (deltalake's scan)."""
    from deltalake import DeltaTable

    table = pa.table(DeltaTable(path).scan()).select(["partition", "key", "offset", "value"])
    return ordered(tuple(r.values()) for r in table.to_pylist())


def spark_rows(spark, path: str) -> list[tuple]:
    """The same through delta-spark."""
    found = spark.read.format("delta").load(path).select("partition", "key", "offset", "value").collect()
    return ordered(tuple(v if v is None or isinstance(v, int) else bytes(v) for v in r) for r in found)


def version(path: str) -> int:
    from deltalake import DeltaTable

    return DeltaTable(path).version()


def files(path: str) -> set[str]:
    return {str(p.relative_to(path)) for p in Path(path).rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def states(spark, topic, tmp_path_factory, request):
    """Per mode: the old table (offsets below OLD of each partition), and the rows and note an
    uninterrupted incremental run from it to the end writes (checked against the model)."""
    root, records, fates = topic
    base = tmp_path_factory.mktemp("states")
    out = {}
    for mode in ("latest", "changelog"):
        old = str(base / f"{mode}-old")
        export(spark, root, TOPIC, old, mode=mode, as_of_offset=OLD, incremental=True)
        clean = str(base / f"{mode}-new")
        shutil.copytree(old, clean)
        with pytest.MonkeyPatch.context() as patched:
            patched.setattr(tuning, "DRIVER_MERGE_BYTES", -1)  # delta-spark's MERGE, as the killed runs'
            assert export(spark, root, TOPIC, clean, mode=mode, incremental=True).committed
        read = consumer_reads(records, fates)
        if mode == "latest":
            want = ordered((p, k, r.offset, r.value) for (p, k), r in latest(read).items())
        else:
            want = ordered((r.partition, r.key, r.offset, r.value) for r in read)
        assert rows(clean) == want
        out[mode] = {
            "path": old,
            "old": (rows(old), read_note(old, "delta")),
            "new": (want, read_note(clean, "delta")),
        }
    return out


@pytest.fixture(scope="module")
def kill_classpath(spark, tmp_path_factory) -> str:
    """KillAt compiled, with the delta-storage jar its log store extends: the killed run's driver class
    path (both on the system class path, where delta-spark's classes find Delta's store classes too)."""
    conf = spark_context(spark).getConf()
    (storage,) = [j for j in conf.get("spark.jars", "").split(",") if "delta-storage" in j]
    storage = storage.removeprefix("file://")
    from pyspark.find_spark_home import _find_spark_home

    classes = tmp_path_factory.mktemp("kill-classes")
    javac = shutil.which("javac")
    assert javac, "javac (a JDK) is needed to compile tests/spark/KillAt.java"
    classpath = f"{_find_spark_home()}/jars/*{os.pathsep}{storage}"
    subprocess.run(
        [javac, "-d", str(classes), "-cp", classpath, str(Path(__file__).with_name("KillAt.java"))],
        check=True,
        capture_output=True,
    )
    return f"{classes}{os.pathsep}{storage}"


RUN = (
    "import sys\n"
    "from kafkalog import tuning\n"
    "from kafkalog.cli import main\n"
    "tuning.DRIVER_MERGE_BYTES = -1  # delta-spark's MERGE, whatever the table's size\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def run_killed(root: str, out: str, mode: str, point: str, classpath: str, mark: Path) -> subprocess.CompletedProcess:
    """`kafkalog export --incremental` of the topic into `out` in a process of its own, killed at `point`."""
    commit = f"{out}/_delta_log/{version(out) + 1:020d}.json"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "KAFKALOG_KILL_AT": point,
        "KAFKALOG_KILL_PATH": out if point == "data" else commit,
        "KAFKALOG_KILL_MARK": str(mark),
        "PYSPARK_SUBMIT_ARGS": (
            f"--driver-class-path {classpath} --conf spark.hadoop.fs.file.impl=KillAt$FileSystem "
            "--conf spark.delta.logStore.file.impl=KillAt$LogStore pyspark-shell"
        ),
    }
    args = ["export", root, "--topic", TOPIC, "--output", out, "--mode", mode, "--incremental", "--quiet"]
    process = subprocess.Popen(
        [sys.executable, "-c", RUN, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its JVM and Python workers in a group of their own, ended below
    )
    try:
        stdout, stderr = process.communicate(timeout=300)
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # whatever of the group outlived the JVM's halt
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@pytest.mark.parametrize("mode,point,state", POINTS, ids=[f"{m}-{p}" for m, p, _ in POINTS])
def test_a_killed_incremental_export_leaves_the_old_or_the_new_table_and_a_rerun_converges(
    spark, topic, states, kill_classpath, tmp_path, mode, point, state
):
    root = topic[0]
    out = str(tmp_path / "table")
    shutil.copytree(states[mode]["path"], out)
    before, before_version = files(out), version(out)
    mark = tmp_path / "killed-at"

    done = run_killed(root, out, mode, point, kill_classpath, mark)
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]
    assert mark.read_text().split()[0] == point

    want_rows, want_note = states[mode][state]
    assert rows(out) == want_rows
    assert spark_rows(spark, out) == want_rows
    assert read_note(out, "delta") == want_note  # the offsets the rows hold: the next run starts there
    if state == "old":  # the files the kill left half-written, or written but named by no commit: not read
        assert files(out) - before and version(out) == before_version
    else:
        assert version(out) == before_version + 1

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(tuning, "DRIVER_MERGE_BYTES", -1)
        rerun = export(spark, root, TOPIC, out, mode=mode, incremental=True)
    assert rerun.committed == (state == "old")  # after the commit there is nothing left to apply
    assert version(out) == before_version + 1  # the new records in one commit, whichever run made it
    assert rows(out) == states[mode]["new"][0]
    assert read_note(out, "delta") == states[mode]["new"][1]
