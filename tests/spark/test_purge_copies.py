"""Purge of several log dirs holding copies of the same partitions (every broker's replicas, JBOD
dirs): one decision, the same records in every copy after, nothing swapped anywhere until every
copy is staged, and a rerun that finishes a purge interrupted between two dirs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from deltalake import DeltaTable

from kafkalog.codec.records import Record
from kafkalog.config import resolver_from
from kafkalog.errors import ConfigError, KafkaLogError
from kafkalog.operations.purge import log_dirs_of, purge
from kafkalog.operations.validate import validate_paths
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.log_writer import PartitionWriter
from kafkalog.storage.logdir import LogDir
from kafkalog.storage.naming import REPLICATION_OFFSET_CHECKPOINT

from .test_purge import SECRET, files, read_log, segment_bytes

NOW = 1_800_000_000_000
CLUSTER = "P4mWrUMKRvm3AylnZYNBaQ"
DIRECTORIES = {1: "7Dcvk0ffSRyW43vMnnNsPA", 2: "b3K2mT6vQk2B3n0yq8d9Vg", 3: "Xk3nR2pQSbO8Jw1mLq7c5A"}
KEYS = [b"k1", b"k3"]
CONFIG = resolver_from(settings=["delete.retention.ms=1000"], topic_settings=["c:cleanup.policy=compact"])


def _records(n: int) -> list[Record]:
    """Keys k0..k4 in turn, a header on every third record, each key's latest a value."""
    return [
        Record(0, NOW - 100_000 + i, f"k{i % 5}".encode(), f"v{i}".encode(), (("h", b"x"),) if i % 3 == 0 else ())
        for i in range(n)
    ]


def write_copy(root: Path, node_id: int, *, batch: int, records: int = 30, codec: int = 0) -> str:
    """A broker's log dir: a compacted topic `c` and a delete topic `d`, one partition each, the
    first `records` records of `_records(30)` in batches of `batch` (a copy another broker wrote
    its own way: logically the same records, not the same bytes), and its meta.properties."""
    root.mkdir(parents=True)
    (root / "meta.properties").write_text(
        f"version=1\nnode.id={node_id}\ncluster.id={CLUSTER}\ndirectory.id={DIRECTORIES[node_id]}\n"
    )
    fs = LogFileSystem.for_path(str(root))[0]
    ends = {}
    for topic in ("c", "d"):
        w = PartitionWriter(fs, str(root), topic, 0, segment_bytes=600, index_interval_bytes=0, now_ms=NOW - 200_000)
        rows = _records(30)[:records]
        for start in range(0, len(rows), batch):
            w.append_records(rows[start : start + batch], codec=codec)
        w.close()
        ends[(topic, 0)] = w.log_end_offset
    LogDir.open(str(root)).write_checkpoint(REPLICATION_OFFSET_CHECKPOINT, ends)
    return str(root)


def data_records(root) -> dict:
    """{(topic, partition): {offset: (key, value, headers, timestamp)}} of the data records, as
    kafka-python reads them."""
    return {tp: {r[0]: r[1:5] for r in rows if not r[5]} for tp, rows in read_log(root).items()}


def assert_same_where_shared(copies: list[str]) -> None:
    """Every copy holds the same records over the offsets it shares with another."""
    first, *others = [data_records(c) for c in copies]
    for tp, records in first.items():
        for other in others:
            upto = min(max(records), max(other[tp]))  # offsets past the shorter copy's end are not shared
            assert {o: r for o, r in records.items() if o <= upto} == {o: r for o, r in other[tp].items() if o <= upto}


# -- below Spark ------------------------------------------------------------------------------------------


def test_the_log_dirs_of_a_purge_are_checked(tmp_path):
    assert log_dirs_of("a") == ["a"] and log_dirs_of(["a", "b"]) == ["a", "b"]
    with pytest.raises(ConfigError, match="at least one"):
        log_dirs_of([])
    with pytest.raises(ConfigError, match="given twice"):
        log_dirs_of([str(tmp_path / "a"), str(tmp_path / "x" / ".." / "a")])
    with pytest.raises(ConfigError, match="--output takes one log directory"):
        log_dirs_of(["a", "b"], "out")


def test_the_purge_command_and_job_take_several_log_dirs():
    from kafkalog import cli
    from kafkalog.jobs import job_arguments

    argv = ["a", "b", "c", "--keys", "k.txt", "--dry-run"]
    assert job_arguments("purge", argv, {}) == argv  # jobs/purge.py parses as the CLI does
    assert cli.build_parser().parse_args(["purge", *argv]).log_dir == ["a", "b", "c"]


def test_a_copy_is_named_by_its_meta_properties_where_kafka_reads_it(tmp_path):
    from kafkalog.operations.purge_plan import broker_ids as _broker_ids

    root = write_copy(tmp_path / "a", 3, batch=4)
    assert _broker_ids(LogDir.open(root)) == (3, DIRECTORIES[3])
    (Path(root) / "meta.properties").write_text("version=1\nnode.id=3\n")  # no cluster.id: Kafka refuses it
    assert _broker_ids(LogDir.open(root)) == (None, None)
    (Path(root) / "meta.properties").unlink()
    assert _broker_ids(LogDir.open(root)) == (None, None)


# -- on Spark ---------------------------------------------------------------------------------------------


def test_every_copy_is_purged_alike_in_one_run(spark, tmp_path):
    """Three brokers' copies: b a byte copy of a, c written in other batches and lagging behind (a
    follower that has not fetched the last records). With --tombstone, the latest record of a key
    in any copy is the one kept as a tombstone: the lagging copy keeps none of the key, rather than a
    tombstone where the others removed the record."""
    a = write_copy(tmp_path / "a", 1, batch=4)
    b = str(tmp_path / "b")
    shutil.copytree(a, b)
    (Path(b) / "meta.properties").write_text(
        f"version=1\nnode.id=2\ncluster.id={CLUSTER}\ndirectory.id={DIRECTORIES[2]}\n"
    )
    c = write_copy(tmp_path / "c", 3, batch=1, records=27, codec=1)  # gzip, one record a batch, 3 behind
    assert segment_bytes(a) == segment_bytes(b) and segment_bytes(a) != segment_bytes(c)
    ledger = str(tmp_path / "ledger")

    result = purge(spark, [a, b, c], KEYS, tombstone=True, ledger=ledger, secret=SECRET, config=CONFIG, now=NOW)

    assert segment_bytes(a) == segment_bytes(b)  # the rewrite is deterministic
    assert_same_where_shared([a, b, c])
    for copy in (a, b, c):
        for (topic, _), records in data_records(copy).items():
            for key, value, headers, _ in records.values():
                assert key not in KEYS or (topic == "c" and value is None and headers == ()), (copy, topic)
        assert validate_paths([copy]).exit_code == 0
    # k3's latest record (offset 28) is past c's end: c keeps no record of k3, a and b its tombstone
    assert data_records(a)[("c", 0)][28][:2] == (b"k3", None) and 28 not in data_records(c)[("c", 0)]
    assert b"k3" not in {r[0] for r in data_records(c)[("c", 0)].values()}
    assert [(p["log_dir"], p["node_id"]) for p in result.copies] == [(a, 1), (b, 2), (c, 3)]
    assert [p["directory_id"] for p in result.copies] == [DIRECTORIES[1], DIRECTORIES[2], DIRECTORIES[3]]
    assert {(p["node_id"], p["topic"]) for p in result.partitions} == {(n, t) for n in (1, 2, 3) for t in "cd"}
    assert result.remaining == 0 and "of 3 log dirs" in result.summary() and "cannot know" in result.summary()
    rows = DeltaTable(ledger).to_pyarrow_table().to_pylist()
    assert len(rows) == result.ledger_rows == result.total("removed") + result.total("tombstoned")
    assert {(r["log_dir"], r["node_id"]) for r in rows} == {(a, 1), (b, 2), (c, 3)}
    (run,) = DeltaTable(ledger + "_runs").to_pyarrow_table().to_pylist()
    assert run["log_dirs"] == [a, b, c] and run["log_dir"] == a
    # c lags: its copies differ from a's and b's, which the summary and the run table say
    assert "WARNING: the copies of 2 partitions differ" in result.summary() and "told apart" not in result.summary()
    ends = {(d["topic"], d["log_dir"]): d["log_end_offset"] for d in run["replica_differences"]}
    assert ends == {(t, d): 27 if d == c else 30 for t in "cd" for d in (a, b, c)}
    # every copy's rewritten segments, hashed together, in one commit of the segments table (through
    # delta-spark the table is created empty first, as the records table is, then merged into)
    segments = DeltaTable(ledger + "_segments")
    writes = [h["operation"] for h in segments.history() if h["operation"] in ("MERGE", "WRITE")]
    assert len(writes) == 1 and {r["broker_id"] for r in segments.to_pyarrow_table().to_pylist()} == {1, 2, 3}


class FailInCopy:
    """A fault hook (picklable: rewrite tasks call it on executors) failing the rewrite in one log dir."""

    def __init__(self, log_dir: str):
        self.log_dir = log_dir

    def __call__(self, step: str, path: str) -> None:
        if step == "rewrite" and path.startswith(self.log_dir + "/"):
            raise OSError(28, "No space left on device", path)


def test_a_copy_that_fails_stops_the_purge_of_every_copy(spark, tmp_path, capsys):
    """Damaged (a CRC that does not match), the scan refuses it: exit 2, one line naming the file,
    nothing written anywhere. A rewrite that fails in one copy leaves no staged file in any."""
    from kafkalog.cli import main

    a = write_copy(tmp_path / "a", 1, batch=4)
    b = str(tmp_path / "b")
    shutil.copytree(a, b)
    damaged = Path(b) / "d-0" / "00000000000000000000.log"
    data = bytearray(damaged.read_bytes())
    data[70] ^= 0xFF  # inside the first batch's records: its CRC no longer matches
    damaged.write_bytes(bytes(data))
    before = {a: files(a), b: files(b)}
    (tmp_path / "keys.txt").write_text("k1\n")
    (tmp_path / "secret").write_bytes(SECRET)
    args = ["purge", a, b, "--keys", str(tmp_path / "keys.txt"), "--ledger", str(tmp_path / "ledger")]
    args += ["--secret-file", str(tmp_path / "secret"), "--now", str(NOW)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert str(damaged) in err[-1] and "crc" in err[-1].lower() and not any(str(damaged) in e for e in err[:-1]), err
    assert {a: files(a), b: files(b)} == before and not (tmp_path / "ledger").exists()

    shutil.rmtree(b)
    shutil.copytree(a, b)
    before = {a: files(a), b: files(b)}
    with pytest.raises(KafkaLogError, match="No space left"):
        purge(
            spark,
            [a, b],
            KEYS,
            ledger=str(tmp_path / "ledger"),
            secret=SECRET,
            config=CONFIG,
            now=NOW,
            fault=FailInCopy(b),
        )
    assert {a: files(a), b: files(b)} == before  # a's staged segments went too


class Crash(Exception):
    pass


def test_a_crash_between_two_log_dirs_then_a_rerun_finishes_the_purge(spark, tmp_path):
    a = write_copy(tmp_path / "a", 1, batch=4)
    b = str(tmp_path / "b")
    shutil.copytree(a, b)
    reference = str(tmp_path / "reference")
    shutil.copytree(a, reference)
    purge(spark, reference, KEYS, ledger=str(tmp_path / "ref-ledger"), secret=SECRET, config=CONFIG, now=NOW)
    swapped: list = []

    def crash(step, name):  # in the second log dir's swap, once a's is done
        swapped.append(step)
        if step == "swap-renamed" and swapped.count("done") == 2:  # a's two partitions are swapped in
            raise Crash(name)

    ledger = str(tmp_path / "ledger")
    with pytest.raises(Crash):
        purge(spark, [a, b], KEYS, ledger=ledger, secret=SECRET, config=CONFIG, now=NOW, fault=crash)
    assert segment_bytes(a) == segment_bytes(reference) and segment_bytes(b) != segment_bytes(reference)
    (interrupted,) = set(DeltaTable(ledger).to_pyarrow_table().column("run_id").to_pylist())
    again = purge(spark, [a, b], KEYS, ledger=ledger, secret=SECRET, config=CONFIG, now=NOW)
    assert segment_bytes(a) == segment_bytes(b) == segment_bytes(reference)
    assert again.ledger_rows == 0 and again.remaining == 0  # the rows were written before the first swap
    # b's segments staged again are the same rewrites: recorded once, under the run the rerun completes
    segments = DeltaTable(ledger + "_segments").to_pyarrow_table().to_pylist()
    one_copy = DeltaTable(str(tmp_path / "ref-ledger") + "_segments").to_pyarrow_table().num_rows
    assert len(segments) == 2 * one_copy and {r["run_id"] for r in segments} == {interrupted}
    assert again.resumes == [interrupted]
    # b is a copy of a, meta.properties and all: said, and each is named by its directory
    assert f"{a} and {b} each say they are broker 1, {DIRECTORIES[1]}" in again.summary()
    assert {r["log_dir"] for r in segments} == {a, b}
    assert validate_paths([b]).exit_code == 0


def test_the_cli_purges_several_log_dirs(spark, tmp_path, capsys):
    import json

    from kafkalog.cli import main

    a = write_copy(tmp_path / "a", 1, batch=4)
    b = write_copy(tmp_path / "b", 2, batch=3)
    (tmp_path / "keys.txt").write_text("k1\n")
    (tmp_path / "secret").write_bytes(SECRET)
    report = tmp_path / "report.json"
    args = ["purge", a, b, "--keys", str(tmp_path / "keys.txt"), "--ledger", str(tmp_path / "ledger")]
    args += ["--secret-file", str(tmp_path / "secret"), "--now", str(NOW), "--report", str(report)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("purged 24 records removed, 0 tombstoned, 0 redacted in 4 partitions of 2 log dirs")
    assert f"{a} on broker 1" in out and "node_id" in out
    written = json.loads(report.read_text())
    assert [c["nodeId"] for c in written["copies"]] == [1, 2] and written["allReplicas"] is None
    assert {s["logDir"] for s in written["segments"]} == {a, b}
    assert_same_where_shared([a, b])
    assert main([*args[:3], "--output", str(tmp_path / "out"), *args[3:]]) == 2
    assert "--output takes one log directory" in capsys.readouterr().err


def test_the_decide_step_lists_no_partition_after_the_plan(spark, tmp_path, monkeypatch):
    """The plan lists each partition directory; the decide step scans the plan's segments and the
    rewrite replaces them, with no listing in between (the swap and the verifying rescan list again)."""
    import kafkalog.operations.purge as module

    a = write_copy(tmp_path / "a", 1, batch=4)
    b = str(tmp_path / "b")
    shutil.copytree(a, b)
    listed: dict = {}
    list_dir = LogFileSystem.list_dir

    def counting(self, path):
        listed[path] = listed.get(path, 0) + 1
        return list_dir(self, path)

    monkeypatch.setattr(LogFileSystem, "list_dir", counting)
    planned: list = []
    settled = module.settled
    monkeypatch.setattr(module, "settled", lambda *args: (settled(*args), planned.append(dict(listed)))[0])
    at_swap: list = []
    swap_in = module.swap_in

    def swapping(*args, **kwargs):
        at_swap.append(dict(listed))
        return swap_in(*args, **kwargs)

    monkeypatch.setattr(module, "swap_in", swapping)
    partitions = [str(Path(d) / p) for d in (a, b) for p in ("c-0", "d-0")]
    purge(spark, [a, b], KEYS, config=CONFIG, now=NOW, dry_run=True)
    assert [listed[p] for p in partitions] == [1, 1, 1, 1]  # a dry run's plan lists each once, and no step after
    listed.clear()
    planned.clear()
    purge(spark, [a, b], KEYS, ledger=str(tmp_path / "ledger"), secret=SECRET, config=CONFIG, now=NOW)
    (after_plan,) = planned
    assert [at_swap[0][p] for p in partitions] == [after_plan[p] for p in partitions]


def test_a_legacy_partition_keeps_the_last_record_of_every_copy_redacted(spark, tmp_path):
    """v1 messages cannot leave a partition empty-ended: the last record of each copy stays redacted.
    Judged across copies, the longer copy redacts the shorter one's last record too, rather than
    remove it, and both agree on the offsets they share."""
    copies = []
    for name, count in (("long", 10), ("short", 8)):  # `short`: a follower 2 records behind
        root = tmp_path / name
        root.mkdir()
        w = PartitionWriter(LogFileSystem.for_path(str(root))[0], str(root), "l", 0, now_ms=NOW - 50_000)
        for i in range(count):
            w.append_legacy_records([Record(0, NOW - 40_000 + i, f"r{i}".encode(), f"v{i}".encode())], magic=1)
        w.close()
        copies.append(str(root))
    long, short = copies
    purge(spark, copies, [b"r2", b"r7", b"r9"], ledger=str(tmp_path / "ledger"), secret=SECRET, now=NOW)
    redacted = (None, None, ())
    assert {o: r[:3] for o, r in data_records(long)[("l", 0)].items() if r[0] is None} == {7: redacted, 9: redacted}
    assert {o: r[:3] for o, r in data_records(short)[("l", 0)].items() if r[0] is None} == {7: redacted}
    assert 2 not in data_records(long)[("l", 0)] and 2 not in data_records(short)[("l", 0)]
    assert_same_where_shared(copies)
