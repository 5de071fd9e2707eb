"""kafkalog repartition on the generator's small log dir, checked against a model that reads the source
with end-transaction markers (not the `.txnindex` and the transaction tracker the run uses): every
committed record exactly once, in its key's murmur2 partition, each source's order kept, offsets dense,
a clean validate, and each group's CSV the smallest offsets that skip nothing."""

from __future__ import annotations

import csv

import pyarrow.parquet as pq
import pytest

from kafkalog import cli
from kafkalog.codec.control import ControlType, parse_control_type
from kafkalog.codec.records import Record
from kafkalog.errors import ConfigError, LogDirError
from kafkalog.operations.repartition import plan_repartition, run_repartition
from kafkalog.operations.retain_partition import read_committed_offsets
from kafkalog.rules.partitioner import new_partition
from kafkalog.storage.checkpoint import parse_offset_checkpoint, parse_partition_metadata
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.log_writer import PartitionWriter
from kafkalog.storage.logdir import LogDir

TOPIC_ID = "Yt1kQ7cbQ2mXr3o9bXb5Ag"


def model_committed(log_dir, topic: str) -> dict[int, list]:
    """Per source partition, (offset, record) of what read_committed returns, from the markers: a
    transaction's records are held until its COMMIT (kept) or ABORT (dropped)."""
    out = {}
    opened = LogDir.open(str(log_dir))
    for part in opened.partitions({topic}):
        kept, open_txns = [], {}
        for _, batch in part.batches():
            records = batch.records()
            if batch.is_control:
                _, kind = parse_control_type(records[0].key)
                held = open_txns.pop(batch.producer_id, [])
                if kind == ControlType.COMMIT:
                    kept += held
            elif batch.is_transactional:
                open_txns.setdefault(batch.producer_id, []).extend(records)
            else:
                kept += records
        assert not open_txns, "the model reads logs without open transactions"
        out[part.partition] = sorted(kept, key=lambda r: r.offset)
    return out


def records_of(log_dir, topic: str) -> dict[int, list]:
    opened = LogDir.open(str(log_dir))
    return {p.partition: [r for _, b in p.batches() for r in b.records()] for p in opened.partitions({topic})}


@pytest.mark.parametrize("topic", ["payments", "clicks"])
def test_repartition_moves_every_committed_record_once_in_place_and_order(spark, small_log, tmp_path, topic):
    n = 5
    out, offset_map, groups = tmp_path / "out", tmp_path / "map", tmp_path / "groups"
    plan = plan_repartition(
        str(small_log.path),
        topic,
        n,
        str(out),
        to_topic=f"{topic}5",
        topic_id=TOPIC_ID,
        offset_map=str(offset_map),
        group_offsets=str(groups),
    )
    run_repartition(spark, plan)

    source = model_committed(small_log.path, topic)
    written = records_of(out, f"{topic}5")
    assert sorted(written) == list(range(n))
    mapping = pq.read_table(str(offset_map)).to_pylist()
    by_new = {(m["partition"], m["offset"]): (m["sourcePartition"], m["sourceOffset"]) for m in mapping}
    source_by_offset = {(p, r.offset): r for p, recs in source.items() for r in recs}
    assert sorted(by_new.values()) == sorted(source_by_offset)  # each committed record exactly once
    for q, recs in written.items():
        assert [r.offset for r in recs] == list(range(len(recs)))  # dense from 0
        last: dict[int, int] = {}
        for r in recs:
            p, o = by_new[q, r.offset]
            s = source_by_offset[p, o]
            assert (r.key, r.value, r.headers, r.timestamp) == (s.key, s.value, s.headers, s.timestamp)
            assert q == new_partition(r.key, p, n)
            assert o > last.get(p, -1)  # a source partition's order is kept
            last[p] = o
        meta = (out / f"{topic}5-{q}" / "partition.metadata").read_text()
        assert parse_partition_metadata(meta).topic_id == TOPIC_ID
    ends = {tp: o for tp, o in parse_offset_checkpoint((out / "recovery-point-offset-checkpoint").read_text()).items()}
    assert ends == {(f"{topic}5", q): len(written[q]) for q in range(n)}
    assert cli.main(["validate", str(out), "--fail-on", "warning"]) == cli.EXIT_OK

    # each group resumes at the first record it has not consumed, in every new partition
    committed = read_committed_offsets(LogDir.open(str(small_log.path))).offsets
    for group in {g for g, t, _ in committed if t == topic}:
        with open(groups / f"{group}.csv") as f:
            rows = {int(q): int(o) for t, q, o in csv.reader(f)}
        for q, recs in written.items():
            unconsumed = [
                r.offset
                for r in recs
                if by_new[q, r.offset][1] >= (committed.get((group, topic, by_new[q, r.offset][0])) or 0)
            ]
            assert rows[q] == (min(unconsumed) if unconsumed else len(recs))


def test_past_the_last_stable_offset_is_refused_unless_asked(tmp_path):
    """An open transaction: the plan refuses it, or stops at its first offset with the flag."""
    log_dir = tmp_path / "log"
    writer = PartitionWriter(LogFileSystem.for_path(str(log_dir))[0], str(log_dir), "t", 0)
    writer.append_records([Record(0, 1000, b"a", b"1")])
    writer.append_records(
        [Record(0, 1001, b"b", b"2")], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    writer.close()
    with pytest.raises(ConfigError, match="past its last stable offset 1"):
        plan_repartition(str(log_dir), "t", 3, str(tmp_path / "out"), topic_id=TOPIC_ID)
    plan = plan_repartition(str(log_dir), "t", 3, str(tmp_path / "out"), topic_id=TOPIC_ID, stop_at_last_stable=True)
    assert [(r.start, r.end) for r in plan.ranges] == [(0, 1)]
    assert plan.left_unstable == {0: (1, 2)}


def test_refusals_before_spark(small_log, tmp_path):
    log = str(small_log.path)
    with pytest.raises(ConfigError, match="inside the input"):
        plan_repartition(log, "orders", 3, log + "/nested", topic_id=TOPIC_ID)
    with pytest.raises(ConfigError, match="is the input log dir"):
        plan_repartition(log, "orders", 3, log, topic_id=TOPIC_ID)
    with pytest.raises(ConfigError, match="topic id of orders3 is not known"):
        plan_repartition(log, "orders", 3, str(tmp_path / "o"), to_topic="orders3")
    with pytest.raises(LogDirError, match="no partition of topic"):
        plan_repartition(log, "nope", 3, str(tmp_path / "o"), topic_id=TOPIC_ID)
    with pytest.raises(ConfigError, match="outside the input and output log dirs"):
        plan_repartition(log, "orders", 3, str(tmp_path / "o"), topic_id=TOPIC_ID, offset_map=str(tmp_path / "o/map"))
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="is a file"):
        plan_repartition(log, "orders", 3, str(tmp_path / "file"), topic_id=TOPIC_ID)
    with pytest.raises(ConfigError, match="at least one partition"):
        plan_repartition(log, "orders", 0, str(tmp_path / "o"), topic_id=TOPIC_ID)


def test_paths_a_run_would_trip_on_are_refused_before_spark(small_log, tmp_path):
    """What a run would find only after Spark's work, or leave where a broker refuses to start: a topic id
    partition.metadata cannot hold, an offset map or groups' directory that is the output or the input log
    dir (or inside it: a broker takes every directory there for a partition's) or each other."""
    log, out = str(small_log.path), str(tmp_path / "o")
    with pytest.raises(ConfigError, match="--topic-id 'xyz' is not a topic id"):
        plan_repartition(log, "orders", 3, out, topic_id="xyz", dry_run=True)
    with pytest.raises(ConfigError, match="not a topic id"):
        plan_repartition(log, "orders", 3, out, topic_id="AAAAAAAAAAAAAAAAAAAAAA")  # all zero
    for where in (out, log, log + "/map"):
        for option in ("offset_map", "group_offsets"):
            with pytest.raises(ConfigError, match="outside the input and output log dirs"):
                plan_repartition(log, "orders", 3, out, topic_id=TOPIC_ID, **{option: where})
    same = str(tmp_path / "same")
    with pytest.raises(ConfigError, match="the same path"):
        plan_repartition(log, "orders", 3, out, topic_id=TOPIC_ID, offset_map=same, group_offsets=same)
    with pytest.raises(LogDirError, match="did you mean 'orders'"):
        plan_repartition(log, "order", 3, out, topic_id=TOPIC_ID)
    assert not (tmp_path / "o").exists() and not (tmp_path / "same").exists()


def test_command_line_refuses_in_one_line_without_waiting_for_spark(small_log, tmp_path):
    """Spark starts while the command plans: a plan that fails ends the command at once, in one line,
    and the JVM that was starting goes with it (nothing is left in the command's process group)."""
    import os
    import subprocess
    import sys
    import time

    start = time.perf_counter()
    command = subprocess.Popen(
        [sys.executable, "-m", "kafkalog", "repartition", str(small_log.path), "--topic", "orders"]
        + ["--partitions", "4", "--output", str(tmp_path / "out"), "--to-topic", "orders4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    _, stderr = command.communicate(timeout=120)
    seconds = time.perf_counter() - start
    assert command.returncode == cli.EXIT_FAILED
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafkalog repartition: the topic id of orders4 is not known"), stderr
    assert not (tmp_path / "out").exists()
    assert seconds < 10, f"{seconds:.1f} s: the command waited for Spark"
    deadline = time.monotonic() + 30
    while True:  # the JVM notices its parent is gone (its gateway's stdin closes) and exits
        try:
            os.killpg(command.pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "a process of the command outlived it by 30 s"
        time.sleep(0.2)


def test_committed_offsets_from_a_file_and_the_dry_run(small_log, tmp_path):
    offsets = tmp_path / "offsets.csv"
    offsets.write_text("group,topic,partition,offset\nbilling,orders,0,17\nbilling,orders,1,3\nother,clicks,0,5\n")
    plan = plan_repartition(
        str(small_log.path), "orders", 3, str(tmp_path / "o"), topic_id=TOPIC_ID, consumer_offsets=str(offsets)
    )
    assert plan.committed == {"billing": {0: 17, 1: 3}}
    out = tmp_path / "dry"
    args = [str(small_log.path), "--topic", "orders", "--partitions", "3", "--output", str(out)]
    assert cli.main(["repartition", *args, "--topic-id", TOPIC_ID, "--dry-run"]) == cli.EXIT_OK
    assert cli.main(["repartition", *args, "--topic-id", TOPIC_ID, "--now", "5"]) == cli.EXIT_FAILED  # no --compact
    assert not out.exists()
