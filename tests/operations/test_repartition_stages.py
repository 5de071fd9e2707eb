"""repartition's two stages run in this process (Spark's scheduling replaced by a loop over the tasks:
the tasks themselves are the ones Spark runs), checked against independent models: the k-way merge
against a sort of everything, and `--compact` against Kafka's compaction restated per key (the key's
record of highest precedence, keyless records gone, a winning tombstone gone once its source batch's
delete horizon is past, one kept in a batch whose delete horizon is at least now + delete.retention.ms).
"""

from __future__ import annotations

import itertools
import os
import shutil
from concurrent.futures import Future

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog import tuning
from kafkalog.codec.batch import build_batch
from kafkalog.codec.records import Record
from kafkalog.config import ConfigResolver
from kafkalog.operations.repartition import COMMIT_INTENT, plan_repartition, run_repartition
from kafkalog.rules.partitioner import new_partition
from kafkalog.spark import repartition as stages
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.log_writer import PartitionWriter
from kafkalog.storage.logdir import LogDir

TOPIC_ID = "Yt1kQ7cbQ2mXr3o9bXb5Ag"
NOW = 1_800_000_000_000
RETENTION = 3_600_000
KEYS = [None, b"a", b"b", b"c", b"dd", b"eee", b"f"]


@pytest.fixture
def in_process(monkeypatch):
    """Each task run here, in order, as one Spark task would run it."""
    monkeypatch.setattr(stages, "run_tasks", lambda spark, groups, work: [work(x) for g in groups for x in g])
    monkeypatch.setattr(stages, "default_min_tasks", lambda spark: 3)
    monkeypatch.setattr(stages, "MERGE_ROWS", 3)  # a compacting write's records in many chunks


# a source batch: records of (key index, value or None for a tombstone, timestamp step: CreateTime
# may go back), and whether the cleaner gave it a delete horizon: none, past (before NOW) or ahead
_batch = st.tuples(
    st.lists(st.tuples(st.integers(0, len(KEYS) - 1), st.one_of(st.none(), st.binary(max_size=4)), st.integers(-3, 3)))
    .filter(bool)
    .map(tuple),
    st.sampled_from([None, NOW - 1, NOW + 5]),
)
_sources = st.lists(st.lists(_batch, max_size=5), min_size=1, max_size=3)


def write_source(log_dir, sources) -> dict[tuple[int, int], tuple]:
    """The source topic "t"; each key in the one partition Kafka would have given it (a null key
    anywhere). A record whose step is not negative has a version header "v" (8 bytes). (partition,
    offset) -> (key, value, timestamp, delete horizon, (rank, version) by that header) of every record."""
    fs = LogFileSystem.for_path(str(log_dir))[0]
    written = {}
    for p, batches in enumerate(sources):
        writer = PartitionWriter(fs, str(log_dir), "t", p)
        ts = 1_000
        for records, horizon in batches:
            mine = [(k, v, step) for k, v, step in records if KEYS[k] is None or k % len(sources) == p]
            if not mine:
                continue
            batch = []
            for key, value, step in mine:
                ts += step
                offset = writer.log_end_offset + len(batch)
                version = (step * 7) % 5
                headers = (("v", version.to_bytes(8, "big")),) if step >= 0 else ()
                batch.append(Record(offset, ts, KEYS[key], value, headers))
                written[p, offset] = (KEYS[key], value, ts, horizon, (int(step >= 0), version if step >= 0 else 0))
            writer.append(build_batch(batch, delete_horizon_ms=horizon, partition_leader_epoch=0))
        writer.close()
    return written


def model_survivors(records: dict, n: int, strategy: str) -> set[tuple[int, int]]:
    best: dict[bytes, tuple] = {}
    for (p, offset), (key, value, ts, horizon, versioned) in records.items():
        if key is None:
            continue
        precedence = (
            (ts, offset) if strategy == "timestamp" else (*versioned, offset) if strategy == "header" else (offset,)
        )
        if key not in best or precedence > best[key][0]:
            best[key] = (precedence, (p, offset), value is None and horizon is not None and horizon <= NOW)
    return {where for _, where, expired in best.values() if not expired}


def output_records(out, n: int) -> dict[int, list]:
    opened = LogDir.open(str(out))
    return {p.partition: [(b, r) for _, b in p.batches() for r in b.records()] for p in opened.partitions({"t2"})}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_sources, st.integers(1, 4), st.sampled_from(["offset", "timestamp", "header"]))
def test_compact_keeps_what_kafkas_compaction_keeps(in_process, tmp_path_factory, sources, n, strategy):
    base = tmp_path_factory.mktemp("compact")
    records = write_source(base / "log", sources)
    if not records:
        return
    config = {"compaction.strategy": strategy, "delete.retention.ms": str(RETENTION), "cleanup.policy": "compact"}
    if strategy == "header":
        config["compaction.strategy.header"] = "v"
    plan = plan_repartition(
        str(base / "log"),
        "t",
        n,
        str(base / "out"),
        to_topic="t2",
        topic_id=TOPIC_ID,
        offset_map=str(base / "map"),
        config=ConfigResolver(per_topic={"t2": config}),
        compact=True,
        now=NOW,
    )
    result = run_repartition(None, plan)

    expected = model_survivors(records, n, strategy)
    mapping = pq.read_table(str(base / "map")).to_pylist()
    assert {(m["sourcePartition"], m["sourceOffset"]) for m in mapping} == expected
    assert sum(w["records"] for w in result.written) == len(expected)
    assert sum(w["removed"]["records"] for w in result.written) == len(records) - len(expected)
    where = {(m["partition"], m["offset"]): (m["sourcePartition"], m["sourceOffset"]) for m in mapping}
    for q, rows in output_records(base / "out", n).items():
        for batch, record in rows:
            p, offset = where[q, record.offset]
            key, value, ts, _, _ = records[p, offset]
            assert (record.key, record.value, record.timestamp) == (key, value, ts)
            assert q == new_partition(key, p, n)
            if value is None:  # a kept tombstone: its batch has a horizon no earlier than the cleaner's
                assert batch.delete_horizon_ms is not None and batch.delete_horizon_ms >= NOW + RETENTION
    assert not os.path.exists(str(base / "out") + ".kafkalog-incomplete")


def _staged_run(path: str, batches: list[list[tuple[int, int]]]) -> None:
    """A staged run (`<path>.log`, `<path>.arrow`): batches of records of (order, source offset)."""
    schema = pa.schema([stages.PLACED_SCHEMA.field(f) for f in stages.STAGED_FIELDS])
    with open(path + ".log", "wb") as log, pa.ipc.new_file(path + ".arrow", schema) as side:
        for rows in batches:
            log.write(build_batch([Record(i, 0, b"k", b"v") for i in range(len(rows))], partition_leader_epoch=0))
            columns = [pa.array([r[0] for r in rows], pa.int64()), pa.array([r[1] for r in rows], pa.int64())]
            side.write_batch(pa.RecordBatch.from_arrays(columns, schema=schema))


# a source's blocks: per block, its batches as record counts and order steps (a block's running
# maximum starts anew); runs take turns reading the blocks, as tasks share them out
_block = st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=4), min_size=1, max_size=3)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(_block, max_size=4), min_size=1, max_size=3), st.integers(1, 3), st.integers(-5, 20))
def test_merge_is_a_sort_of_every_staged_batch(tmp_path_factory, sources, runs, start):
    """Runs of one source each (a source's blocks dealt to `runs` runs), each block's orders its own
    running maximum: the merge yields every batch once, by (the source's running maximum at the
    batch's first record, source, offset), which never reorders a source."""
    from kafkalog.rules.partitioner import BLOCK_OFFSETS, block_carries

    base = tmp_path_factory.mktemp("merge")
    paths, maxima, every = [], {}, []
    for source, source_blocks in enumerate(sources):
        dealt: list[list] = [[] for _ in range(runs)]
        for m, block in enumerate(source_blocks):
            order, offset = start, m * BLOCK_OFFSETS
            batches = []
            for steps in block:
                rows = []
                for step in steps:
                    order += step
                    rows.append((order, offset))
                    offset += 1
                batches.append(rows)
            maxima[source, m] = order
            every += [(source, rows[0][1], rows[0][0]) for rows in batches]
            dealt[m % runs] += batches
        for r, batches in enumerate(dealt):
            path = str(base / f"{source:05d}-{r:09d}")
            _staged_run(path, batches)
            paths.append(path)
    carries = block_carries(maxima)
    got = [(source, int(rows["sourceOffset"][0].as_py())) for source, _, rows in stages.merged(paths, carries)]
    assert sorted(got) == sorted((s, o) for s, o, _ in every)  # every batch once
    key = {(s, o): (max(carries[s, o // BLOCK_OFFSETS], order), s, o) for s, o, order in every}
    assert [key[g] for g in got] == sorted(key.values())


def test_a_failed_write_leaves_no_output_and_no_staged_records(in_process, tmp_path, monkeypatch):
    batches = [[(((1, b"x", 1), (2, None, 1)), None), (((0, b"y", 0),), None)], [(((3, b"z", 2),), None)]]
    write_source(tmp_path / "log", batches)
    plan = plan_repartition(str(tmp_path / "log"), "t", 3, str(tmp_path / "out"), to_topic="t2", topic_id=TOPIC_ID)
    written = stages.write_partition

    def fail_on_the_last(q, spec):
        if q == 2:
            assert os.listdir(os.path.join(spec.placed, "0"))  # the records were staged
            raise OSError("disk full")
        return written(q, spec)

    monkeypatch.setattr(stages, "write_partition", fail_on_the_last)
    with pytest.raises(OSError, match="disk full"):
        run_repartition(None, plan)
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.kafkalog-incomplete").exists()


# a batch of mixed formats: (kind, records of (key index, value or None, headers)); legacy batches
# carry no headers, v0 no timestamps
_KINDS = ["v0", "v1", "v1-gzip", "v2", "v2-lz4", "v2-zstd", "v2-snappy", "v2-gzip", "v2-append-time"]
_header = st.tuples(st.sampled_from(["h", "trace", "é"]), st.one_of(st.none(), st.binary(max_size=3)))
_mixed_batch = st.tuples(
    st.sampled_from(_KINDS),
    st.lists(
        st.tuples(
            st.integers(0, len(KEYS) - 1), st.one_of(st.none(), st.binary(max_size=300)), st.lists(_header, max_size=2)
        ),
        min_size=1,
        max_size=12,
    ),
)


def write_mixed_source(log_dir, sources) -> dict[tuple[int, int], tuple]:
    """Each partition's legacy batches first (as a topic upgraded from them), then v2 ones.
    (partition, offset) -> (key, value, headers, timestamp, timestamp type) as a consumer reads them."""
    from kafkalog.codec.batch import TimestampType
    from kafkalog.codec.compression import Codec
    from kafkalog.codec.legacy import build_legacy_batch

    codecs = {"gzip": Codec.GZIP, "lz4": Codec.LZ4, "zstd": Codec.ZSTD, "snappy": Codec.SNAPPY}
    fs = LogFileSystem.for_path(str(log_dir))[0]
    expected = {}
    for p, batches in enumerate(sources):
        writer = PartitionWriter(fs, str(log_dir), "t", p)
        ts = 5_000
        for kind, rows in sorted(batches, key=lambda b: not b[0].startswith("v0")):
            magic = int(kind[1])
            codec = next((c for name, c in codecs.items() if kind.endswith(name)), Codec.NONE)
            records = []
            for key, value, headers in rows:
                ts += 7
                headers = tuple(headers) if magic == 2 else ()
                records.append(Record(writer.log_end_offset + len(records), ts, KEYS[key], value, headers))
            if magic < 2:
                data = build_legacy_batch(records, magic=magic, codec=codec)
                ts_type = TimestampType.CREATE_TIME if magic == 1 else TimestampType.NO_TIMESTAMP_TYPE
            elif kind.endswith("append-time"):
                data = build_batch(
                    records,
                    timestamp_type=TimestampType.LOG_APPEND_TIME,
                    log_append_time=ts + 1,
                    partition_leader_epoch=0,
                )
                ts_type = TimestampType.LOG_APPEND_TIME
            else:
                data = build_batch(records, codec=codec, partition_leader_epoch=0)
                ts_type = TimestampType.CREATE_TIME
            writer.append(data)
            for r in records:
                stamp = -1 if magic == 0 else ts + 1 if ts_type == TimestampType.LOG_APPEND_TIME else r.timestamp
                expected[p, r.offset] = (r.key, r.value, r.headers, stamp, ts_type)
        writer.close()
    return expected


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(_mixed_batch, min_size=1, max_size=5), min_size=1, max_size=3), st.integers(1, 4))
def test_the_written_log_reads_as_the_source_records(in_process, tmp_path_factory, sources, n):
    """Mixed codecs, legacy formats, headers, null keys and tombstones: each record's bytes copied after
    its offset delta (v2 as Kafka writes them) or decoded and encoded again (legacy) read back, as a
    consumer decodes them, as the source's record: key, value, headers, timestamp and its type."""
    from kafkalog.codec.batch import TimestampType

    base = tmp_path_factory.mktemp("mixed")
    expected = write_mixed_source(base / "log", sources)
    plan = plan_repartition(
        str(base / "log"), "t", n, str(base / "out"), to_topic="t2", topic_id=TOPIC_ID, offset_map=str(base / "map")
    )
    run_repartition(None, plan)
    where = {
        (m["partition"], m["offset"]): (m["sourcePartition"], m["sourceOffset"])
        for m in pq.read_table(str(base / "map")).to_pylist()
    }
    seen, last = set(), {}
    for q, rows in output_records(base / "out", n).items():
        for batch, record in rows:
            p, offset = where[q, record.offset]
            key, value, headers, stamp, ts_type = expected[p, offset]
            written_type = (
                TimestampType.LOG_APPEND_TIME if ts_type == TimestampType.LOG_APPEND_TIME else TimestampType.CREATE_TIME
            )
            assert (record.key, record.value, tuple(record.headers), record.timestamp) == (key, value, headers, stamp)
            assert batch.timestamp_type == written_type and q == new_partition(key, p, n)
            assert offset > last.get((q, p), -1)  # a source's order kept
            last[q, p] = offset
            seen.add((p, offset))
    assert seen == set(expected)


def test_a_commit_that_fails_midway_puts_the_output_back_as_it_was(in_process, tmp_path, monkeypatch):
    """The commit moves the new partitions into OUT one rename at a time: one that fails after others
    succeeded (a refused rename, EXDEV, a disk gone) must not leave OUT with some partitions of the
    topic written and the rest missing, which a broker loads as a complete topic that lost the rest's
    records; the empty partitions `kafka-topics --create` left are put back too."""
    from kafkalog.storage.checkpoint import format_partition_metadata

    write_source(
        tmp_path / "log", [[(((1, b"x", 1), (2, None, 1)), None), (((0, b"y", 0),), None)], [(((3, b"z", 2),), None)]]
    )
    out = tmp_path / "out"
    for q in range(3):  # as kafka-topics --create leaves them
        (out / f"t2-{q}").mkdir(parents=True)
        (out / f"t2-{q}" / "partition.metadata").write_text(format_partition_metadata(TOPIC_ID))

    def listed() -> list[str]:  # the lock file a run leaves, as a broker's, aside
        return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.name != ".lock")

    before = listed()
    plan = plan_repartition(str(tmp_path / "log"), "t", 3, str(out), to_topic="t2", topic_id=TOPIC_ID)
    renamed = LogFileSystem.rename
    into_out = []

    def refuse_the_second(self, src, dst):
        if os.path.dirname(dst) == str(out):
            into_out.append(dst)
            if len(into_out) == 2:
                raise OSError(18, "Invalid cross-device link")
        return renamed(self, src, dst)

    monkeypatch.setattr(LogFileSystem, "rename", refuse_the_second)
    with pytest.raises(OSError):
        run_repartition(None, plan)
    assert listed() == before
    assert not (tmp_path / "out.kafkalog-incomplete").exists()


def test_a_source_changed_between_the_plan_and_the_run_is_refused(in_process, tmp_path):
    """The plan's offset ranges, read from a partition whose segment went since (retention, an operator),
    would skip that segment's records without a word: the run finds the source as planned, or refuses."""
    from kafkalog.errors import LogDirError

    write_source(tmp_path / "log", [[(((1, b"x", 1), (2, None, 1)), None)], [(((3, b"z", 2),), None)]])
    plan = plan_repartition(str(tmp_path / "log"), "t", 3, str(tmp_path / "out"), to_topic="t2", topic_id=TOPIC_ID)
    for segment in (tmp_path / "log" / "t-1").glob("*.log"):
        segment.unlink()
    with pytest.raises(LogDirError, match="t-1: the partition's files changed since the plan"):
        run_repartition(None, plan)
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.kafkalog-incomplete").exists()


class Killed(BaseException):
    """A kill -9: the next run finds the disk as it was at that instant (copied before any handler runs)."""


def run_killed(monkeypatch, world, args, kwargs, when) -> tuple[list[tuple[str, str]], bool]:
    """Run the repartition, killed before the first change to a file or directory of its commit (from
    the intent's write on) for which `when(i, change)` holds; `world` (every path the run writes under
    it) is left as the kill left it. The changes made, and whether it was killed."""
    changes: list[tuple[str, str]] = []
    killed: list[bool] = []
    originals = {name: getattr(LogFileSystem, name) for name in ("write_bytes", "rename", "delete", "delete_dir")}

    def counted(name):
        def change(self, path, *rest):
            if not killed and (changes or path.endswith(COMMIT_INTENT + ".tmp")):
                if when(len(changes), (name, path)):
                    killed.append(True)
                    shutil.copytree(world, f"{world}.killed")
                    raise Killed
                changes.append((name, path))
            return originals[name](self, path, *rest)

        return change

    with monkeypatch.context() as patched:
        for name in originals:
            patched.setattr(LogFileSystem, name, counted(name))
        try:
            run_repartition(None, plan_repartition(*args, **kwargs))
        except Killed:
            shutil.rmtree(world)
            os.rename(f"{world}.killed", world)
    return changes, bool(killed)


def files(*roots) -> dict[str, bytes]:
    """Each file under the roots (the lock file a run leaves, as a broker's, aside) and its bytes."""
    return {
        f"{root.name}/{p.relative_to(root)}": p.read_bytes()
        for root in roots
        if root.exists()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


SOURCE = [[(((1, b"x", 1), (2, None, 1)), None), (((0, b"y", 0),), None)], [(((3, b"z", 2),), None)]]


def test_a_run_killed_at_any_step_of_its_commit_leaves_the_whole_old_or_the_whole_new_output(
    in_process, tmp_path, monkeypatch, caplog
):
    """A kill before each change the commit makes (the intent's write, each rename of a partition into
    OUT or of an empty one aside, each checkpoint, the offset map's publication, each deletion):
    without an intent OUT is as it was and the next run says to remove the staging directory, after
    which a run writes the whole output; with one, the next run (the same command) completes it."""
    from kafkalog.errors import LogDirError
    from kafkalog.storage.checkpoint import format_partition_metadata

    write_source(tmp_path / "log", SOURCE)
    (tmp_path / "commits.csv").write_text("group,topic,partition,offset\nbilling,t,0,1\nbilling,t,1,1\n")

    def world(name):
        base = tmp_path / name
        for q in range(3):  # as kafka-topics --create leaves them: replaced by the commit
            (base / "out" / f"t2-{q}").mkdir(parents=True)
            (base / "out" / f"t2-{q}" / "partition.metadata").write_text(format_partition_metadata(TOPIC_ID))
        paths = {k: str(base / k) for k in ("map", "groups")}
        kwargs = dict(to_topic="t2", offset_map=paths["map"], group_offsets=paths["groups"])
        kwargs |= dict(consumer_offsets=str(tmp_path / "commits.csv"), topic_id=TOPIC_ID)
        return base, (str(tmp_path / "log"), "t", 3, str(base / "out")), kwargs

    def outputs(base):
        return files(base / "out", base / "map", base / "groups")

    base, args, kwargs = world("whole")
    old = outputs(base)
    run_repartition(None, plan_repartition(*args, **kwargs))
    whole = outputs(base)
    assert whole != old and any(name.startswith("groups/") for name in whole)

    outcomes = []
    for step in itertools.count():
        base, args, kwargs = world(f"killed-{step}")
        changes, killed = run_killed(monkeypatch, base, args, kwargs, lambda i, change, step=step: i == step)
        if not killed:
            break
        staging = base / "out.kafkalog-incomplete"
        if (staging / COMMIT_INTENT).exists():
            caplog.clear()
            result = run_repartition(None, plan_repartition(*args, **kwargs))
            assert "the commit is complete" in caplog.text and "whose commit this one completed" in result.summary()
            outcomes.append("new")
        else:  # killed before its intent: OUT as it was, which a broker may load as it is
            assert files(base / "out") == {k: v for k, v in old.items() if k.startswith("out/")}
            with pytest.raises(LogDirError, match="remove it and run again"):
                plan_repartition(*args, **kwargs)
            shutil.rmtree(staging)
            shutil.rmtree(base / "map.kafkalog-incomplete")
            run_repartition(None, plan_repartition(*args, **kwargs))
            outcomes.append("old")
        assert outputs(base) == whole, (step, changes[step : step + 1])
        assert not staging.exists() and not (base / "map.kafkalog-incomplete").exists()
    kinds = [name for name, _ in changes]
    assert outcomes[:2] == ["old", "old"] and set(outcomes[2:]) == {"new"}  # the intent's .tmp, then its rename
    assert kinds.count("rename") >= 6 + 3 + 1 + 1  # 3 partitions in, 3 aside, 3 checkpoints, the map, the intent


def test_a_run_killed_between_the_commits_renames_is_completed_by_the_next(
    in_process, tmp_path, monkeypatch, caplog, capsys
):
    """A kill -9 after the commit's second rename into OUT: partitions 0 and 1 in OUT, 2 still staged.
    A broker loads that as the whole topic; the next run (the same command, here from the command line)
    finishes the commit and says so, without Spark."""
    write_source(tmp_path / "log", SOURCE)
    out, staging = tmp_path / "w" / "out", tmp_path / "w" / "out.kafkalog-incomplete"
    args, kwargs = (str(tmp_path / "log"), "t", 3, str(out)), dict(to_topic="t2", topic_id=TOPIC_ID)
    run_repartition(None, plan_repartition(str(tmp_path / "log"), "t", 3, str(tmp_path / "out"), **kwargs))
    whole = files(tmp_path / "out")

    into_out = []

    def third_into_out(i, change):  # a rename of a staged partition (into OUT)
        name, path = change
        if name == "rename" and os.path.dirname(path) == str(staging) and os.path.basename(path).startswith("t2-"):
            into_out.append(path)
        return len(into_out) == 3

    _, killed = run_killed(monkeypatch, tmp_path / "w", args, kwargs, third_into_out)
    assert killed and {p.name for p in out.glob("t2-*")} == {"t2-0", "t2-1"} and (staging / "t2-2").is_dir()
    assert not (out / "recovery-point-offset-checkpoint").exists()
    from kafkalog.cli import main
    from kafkalog.cli import repartition as cli

    unused: Future = Future()  # Spark starts with the plan, but nothing is left to run: it is never waited for
    unused.set_exception(AssertionError("the run waited for Spark"))
    monkeypatch.setattr(cli, "spark_session", lambda *args, **kwargs: unused)
    argv = ["repartition", args[0], "--topic", "t", "--partitions", "3", "--output", str(out), "--to-topic", "t2"]
    assert main([*argv, "--topic-id", TOPIC_ID]) == 0
    assert files(out) == whole and not staging.exists()
    said = capsys.readouterr()
    assert "1 of the 3 new partitions of t2" in caplog.text + said.err and "moved them in" in caplog.text + said.err
    assert "repartitioned 3 records of t into t2" in said.out and "whose commit this one completed" in said.out


def test_an_error_after_the_commits_renames_leaves_it_to_the_next_run(in_process, tmp_path, monkeypatch, caplog):
    """Once every partition is in OUT, moving them back is no safer than going on: a checkpoint that
    cannot be written (disk full) leaves the intent, says to run again, and the next run completes."""
    write_source(tmp_path / "log", SOURCE)
    args, kwargs = (str(tmp_path / "log"), "t", 3, str(tmp_path / "out")), dict(to_topic="t2", topic_id=TOPIC_ID)
    update = LogDir.update_checkpoint

    def disk_full(self, name, updates):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(LogDir, "update_checkpoint", disk_full)
    with pytest.raises(OSError, match="No space"):
        run_repartition(None, plan_repartition(*args, **kwargs))
    assert "run the same command again to complete it" in caplog.text
    assert (tmp_path / "out.kafkalog-incomplete" / COMMIT_INTENT).exists()
    monkeypatch.setattr(LogDir, "update_checkpoint", update)
    run_repartition(None, plan_repartition(*args, **kwargs))
    assert "the commit is complete" in caplog.text and not (tmp_path / "out.kafkalog-incomplete").exists()
    assert LogDir.open(str(tmp_path / "out")).read_checkpoint("recovery-point-offset-checkpoint")


def test_the_output_depends_on_the_records_alone(tmp_path, monkeypatch):
    """Replicas hold the same records in segments of their own, and runs share blocks out to as many
    tasks as they have cores: neither changes a byte of the output, nor the offset map."""
    monkeypatch.setattr(stages, "BLOCK_OFFSETS", 37)
    rng = np.random.default_rng(7)
    # each source's clock rises at its own pace, a little out of order: the merge interleaves by it
    keys, jitter = rng.integers(0, 40, (3, 300)), rng.integers(0, 30, (3, 300))
    stamps = np.arange(300) * np.array([[1], [2], [3]]) + jitter
    records = {p: [(bytes([k]), int(ts)) for k, ts in zip(keys[p], stamps[p])] for p in range(3)}

    def run(name: str, segment_bytes: int, task_bytes: int, session: Future | None = None) -> dict[str, bytes]:
        log = tmp_path / name / "log"
        fs = LogFileSystem.for_path(str(log))[0]
        for p, rows in records.items():
            writer = PartitionWriter(fs, str(log), "t", p, segment_bytes=segment_bytes)
            for i in range(0, len(rows), 7):
                writer.append_records([Record(0, 1_000 + ts, k, b"v" * (ts % 5)) for k, ts in rows[i : i + 7]])
            writer.close()
        monkeypatch.setattr(stages, "run_tasks", lambda spark, groups, work: [work(x) for g in groups for x in g])
        monkeypatch.setattr(stages, "default_min_tasks", lambda spark: 1)
        monkeypatch.setattr(tuning, "MAX_BYTES_PER_TASK", task_bytes)  # the blocks a task gets
        out, offsets = tmp_path / name / "out", tmp_path / name / "map"
        plan = plan_repartition(str(log), "t", 4, str(out), to_topic="t2", topic_id=TOPIC_ID, offset_map=str(offsets))
        result = run_repartition(session, plan)
        assert result.staged["blocksPlacedByDriver"] >= (session is not None)
        files = {str(f.relative_to(out)): f.read_bytes() for f in out.rglob("*") if f.is_file() and f.name != ".lock"}
        return {**files, "map": pq.read_table(str(offsets)).sort_by("sourcePartition").to_pydict().__repr__().encode()}

    one = run("one", 1 << 30, 1 << 30)
    assert len([f for f in one if f.endswith(".log")]) == 4
    assert run("small-segments", 700, 1 << 30) == one
    assert run("a-block-a-task", 1 << 30, 1) == one
    assert run("both", 900, 2_000) == one
    assert (
        run("the-driver-places-while-spark-starts", 900, 2_000, _starting_after_the_drivers_blocks(monkeypatch, 2))
        == one
    )


def _starting_after_the_drivers_blocks(monkeypatch, blocks: int) -> Future:
    """A session (None: the tasks run in this process) that starts once the driver has placed `blocks`
    blocks while waiting for it (tasks.DriverShare)."""
    session: Future = Future()
    stage, placed = stages._stage_task, []

    def placing(*args):
        done = stage(*args)
        placed.append(1)
        if len(placed) == blocks:
            session.set_result(None)
        return done

    monkeypatch.setattr(stages, "_stage_task", placing)
    return session
