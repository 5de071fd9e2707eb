"""An incremental `kafkalog export` killed by SIGKILL inside its commit, through delta-spark (a MERGE in
latest mode, an append in changelog mode): the table reads as exactly the old or exactly the new
state, through Delta's two readers, its note says the offsets those rows hold, and the next run from
there converges to the rows of an uninterrupted run (no record applied twice, none lost). The note is
in the data's own commit (spark/tables.py): there is no instant at which the table has the new records
and a note without them. (A failure between the dead letters' commit and the table's: test_export.py.)

delta-spark writes in the JVM, where no Python hook reaches: KillAt.java (a local file system and
Delta's own log store for local paths) acts at the opening of the MERGE's first data file, just before
a commit's file is written and just after. One process with a Spark of its own runs the changelog's
incremental run, then the latest table's, and is killed just after the second commit; at the points
before, KillAt copies the table's directory as a kill there would leave it (the writing thread waits
meanwhile), as tests/operations/test_repartition_stages.py does. The old tables, the reruns and every
check use the suite's shared session."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from kafkalog.operations.export import export, partition_ranges
from kafkalog.spark.context import spark_context
from kafkalog.spark.tables import read_note
from tests.export_scenario import TOPIC, consumer_reads, latest, write_topic

REPO = Path(__file__).resolve().parents[2]
OLD = 40  # the old table holds offsets below this of each partition
MODES = ("changelog", "latest")
# (mode, point, the state a kill -9 there leaves), in the order the run meets them
POINTS = [
    ("changelog", "before-commit", "old"),
    ("changelog", "after-commit", "new"),
    ("latest", "data", "old"),
    ("latest", "before-commit", "old"),
    ("latest", "after-commit", "new"),
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
def old_tables(spark, topic, tmp_path_factory) -> dict[str, str]:
    """Per mode, the table of the offsets below OLD of each partition, written by an incremental run."""
    base = tmp_path_factory.mktemp("old")
    for mode in MODES:
        export(spark, topic[0], TOPIC, str(base / mode), mode=mode, as_of_offset=OLD, incremental=True)
    return {mode: str(base / mode) for mode in MODES}


def new_state(topic, mode: str) -> tuple[list[tuple], dict]:
    """The rows and note of the table an uninterrupted run writes (the model's: tests/spark/test_export.py
    checks a clean run against it)."""
    root, records, fates = topic
    read = consumer_reads(records, fates)
    if mode == "latest":
        want = ordered((p, k, r.offset, r.value) for (p, k), r in latest(read).items())
    else:
        want = ordered((r.partition, r.key, r.offset, r.value) for r in read)
    ends = {str(r.partition): r.end for r in partition_ranges(root, TOPIC)}
    return want, {"topic": TOPIC, "mode": mode, "endOffsets": ends, "keyFormat": "bytes"}


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


# The changelog's run, then the latest table's, in one process with one Spark, which is killed just
# after the second run's commit; before that, at each point of POINTS, the table's directory is copied
# as a kill there would leave it.
RUN = (
    "import sys\n"
    "from kafkalog import tuning\n"
    "from kafkalog.cli import main\n"
    "tuning.DRIVER_MERGE_BYTES = -1  # delta-spark's MERGE, whatever the table's size\n"
    "changelog, latest, *args = sys.argv[1:]\n"
    "if main(['export', *args, '--output', changelog, '--mode', 'changelog']) != 0:\n"
    "    sys.exit('the changelog run failed')\n"
    "sys.exit(main(['export', *args, '--output', latest]))\n"
)


@pytest.fixture(scope="module")
def killed(topic, old_tables, kill_classpath, tmp_path_factory) -> dict[tuple[str, str], str]:
    """{(mode, point): the table as a kill -9 of its incremental run at that point leaves it}."""
    base = tmp_path_factory.mktemp("killed")
    tables = {mode: str(base / mode) for mode in MODES}
    entries = []
    for mode, point, _ in POINTS:
        table = tables[mode]
        if (mode, point) == ("latest", "after-commit"):
            action = "kill"
        else:
            action = f"copy:{base / mode}-{point}"
        commit = f"{table}/_delta_log/{version(old_tables[mode]) + 1:020d}.json"
        entries.append(f"{point}|{table if point == 'data' else commit}|{action}")
    for mode, table in tables.items():
        shutil.copytree(old_tables[mode], table)
    mark = base / "marks"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "KAFKALOG_KILL_POINTS": ";".join(entries),
        "KAFKALOG_KILL_MARK": str(mark),
        "PYSPARK_SUBMIT_ARGS": (
            f"--driver-class-path {kill_classpath} --conf spark.hadoop.fs.file.impl=KillAt$FileSystem "
            "--conf spark.delta.logStore.file.impl=KillAt$LogStore pyspark-shell"
        ),
    }
    args = [tables["changelog"], tables["latest"], topic[0], "--topic", TOPIC, "--incremental", "--quiet"]
    process = subprocess.Popen(
        [sys.executable, "-c", RUN, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its JVM and Python workers in a group of their own, ended below
    )
    try:
        _, stderr = process.communicate(timeout=600)
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # whatever of the group outlived the JVM's halt
        except ProcessLookupError:
            pass
    assert process.returncode == -signal.SIGKILL, stderr[-3000:]
    fired = [line.split() for line in mark.read_text().splitlines()]
    assert [(Path(path).relative_to(base).parts[0], point) for point, path, _ in fired] == [
        (mode, point) for mode, point, _ in POINTS
    ]
    return {
        (mode, point): tables[mode] if (mode, point) == ("latest", "after-commit") else f"{base / mode}-{point}"
        for mode, point, _ in POINTS
    }


@pytest.mark.parametrize("mode,point,state", POINTS, ids=[f"{m}-{p}" for m, p, _ in POINTS])
def test_a_killed_incremental_export_leaves_the_old_or_the_new_table_and_a_rerun_converges(
    spark, topic, old_tables, killed, tmp_path, mode, point, state
):
    out = str(tmp_path / "table")
    shutil.copytree(killed[mode, point], out)
    old = old_tables[mode]
    new_rows, new_note = new_state(topic, mode)
    want_rows, want_note = (rows(old), read_note(old, "delta")) if state == "old" else (new_rows, new_note)
    assert rows(out) == want_rows
    assert spark_rows(spark, out) == want_rows
    assert read_note(out, "delta") == want_note  # the offsets the rows hold: the next run starts there
    if state == "old":  # the files the kill left half-written, or written but named by no commit: not read
        assert files(out) - files(old) and version(out) == version(old)
    else:
        assert version(out) == version(old) + 1

    rerun = export(spark, topic[0], TOPIC, out, mode=mode, incremental=True)
    assert rerun.committed == (state == "old")  # after the commit there is nothing left to apply
    assert version(out) == version(old) + 1  # the new records in one commit, whichever run made it
    assert rows(out) == new_rows
    assert read_note(out, "delta") == new_note
