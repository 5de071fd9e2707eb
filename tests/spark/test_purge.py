"""Purge on Spark, end to end on the generated log (compacted and delete topics, every codec, v0/v1,
transactions, many segments): kafka-python reads the result, `validate` checks it, the ledger reads
back with deltalake and Spark, and reruns, crashes and dry runs leave what they should."""

from __future__ import annotations

import os
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
from deltalake import DeltaTable
from kafka.record import MemoryRecords

from kafkalog.codec.records import Record
from kafkalog.config import resolver_from
from kafkalog.operations.evidence import build_report
from kafkalog.operations.purge import PurgeVerificationError, purge
from kafkalog.operations.validate import validate_paths
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.ledger import SECRET_ENV, find, fingerprint, runs_path
from kafkalog.storage.log_writer import PartitionWriter
from kafkalog.storage.logdir import LogDir, parse_properties
from kafkalog.storage.naming import REPLICATION_OFFSET_CHECKPOINT
from kafkalog.storage.swap import SWAP_STEPS

NOW = 1_800_000_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
SECRET = b"purge-tests-secret-0123456789abcdef"
# key-000005 ends legacy-v0 and key-000012 legacy-v1 (both redacted there); customer-000002 ends customers
KEYS = [b"key-000005", b"key-000012", b"customer-000002", b"account-000002", b"account-000007", b"nobody"]
KEY_FILE = (
    "key-000005\nhex:6b65792d303030303132\ncustomer-000002\r\naccount-000002\nbase64:YWNjb3VudC0wMDAwMDc=\n\nnobody\n"
)
WHERE = "topic = 'clicks' AND CAST(value AS STRING) LIKE '0:42 %'"  # one unkeyed record


# -- reading a log directory with kafka-python, the independent reader ----------------------------------


def read_log(root) -> dict:
    """{(topic, partition): [(offset, key, value, headers, timestamp, isControl)]}, as kafka-python reads it."""
    out = {}
    for tp in LogDir.open(str(root)).topic_partitions:
        rows = out.setdefault(tp, [])
        for log in sorted((Path(root) / f"{tp[0]}-{tp[1]}").glob("*.log")):
            records = MemoryRecords(log.read_bytes())
            while records.has_next():
                batch = records.next_batch()
                control = getattr(batch, "is_control_batch", False)
                for r in batch:
                    headers = () if control else tuple(r.headers or ())
                    rows.append(
                        (
                            r.offset,
                            None if control else r.key,
                            None if control else r.value,
                            headers,
                            r.timestamp,
                            control,
                        )
                    )
    return out


def expected_after(before: dict) -> dict:
    """The records a purge of KEYS and WHERE leaves: each partition's last record of a legacy topic
    stays redacted, every other purged record goes, the rest is untouched."""
    out = {}
    for (topic, partition), rows in before.items():
        if topic.startswith("__"):
            out[(topic, partition)] = rows
            continue
        last = rows[-1][0]
        kept = []
        for row in rows:
            offset, key, value, _, timestamp, control = row
            purged = not control and (
                key in KEYS
                or (topic == "clicks" and partition == 0 and value is not None and value.startswith(b"0:42 "))
            )
            if not purged:
                kept.append(row)
            elif topic.startswith("legacy") and offset == last:
                kept.append((offset, None, None, (), timestamp, False))
        out[(topic, partition)] = kept
    return out


def files(root) -> dict:
    """Every file's (inode, size, mtime) under `root`, but the broker's `.lock` (an in-place run takes
    it, creating it where it is absent, as a broker does)."""
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            if n == ".lock" and os.path.samefile(d, root):
                continue
            st = os.stat(os.path.join(d, n))
            out[os.path.relpath(os.path.join(d, n), root)] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return out


def segment_bytes(root, topics=None) -> dict:
    return {
        os.path.relpath(p, root): p.read_bytes()
        for p in sorted(Path(root).rglob("0*.*"))
        if topics is None or p.parent.name.rsplit("-", 1)[0] in topics
    }


@pytest.fixture(scope="module")
def resolver(small_log):
    return resolver_from(parse_properties(small_log.summary.config_properties()))


@pytest.fixture(scope="module")
def purged(spark, small_log, resolver, tmp_path_factory):
    """One purge of KEYS (from a key file in every written form) and WHERE, on a copy of the small log."""
    tmp = tmp_path_factory.mktemp("purge")
    root, ledger = tmp / "log", str(tmp / "ledger")
    shutil.copytree(small_log.path, root)
    keys = tmp / "keys.txt"
    keys.write_bytes(KEY_FILE.encode())
    before_files = files(root)
    result = purge(spark, str(root), str(keys), ledger=ledger, secret=SECRET, where=WHERE, config=resolver, now=NOW)
    return SimpleNamespace(
        root=root,
        ledger=ledger,
        result=result,
        keys=str(keys),
        before_files=before_files,
        before=read_log(small_log.path),
    )


def test_purged_keys_are_gone_and_every_other_record_is_unchanged(purged, resolver):
    after = read_log(purged.root)
    assert after == expected_after(purged.before)
    assert not any(key in KEYS for rows in after.values() for _, key, *_ in rows)
    report = {(p["topic"], p["partition"]): p for p in purged.result.partitions}
    assert report[("legacy-v0", 0)]["redacted"] == 1 and report[("legacy-v1", 0)]["redacted"] == 1
    assert report[("clicks", 0)]["removed"] == 1 and report[("payments", 0)]["removed"] > 0
    gone = sum(len(purged.before[tp]) - len(after[tp]) for tp in after)
    assert purged.result.total("removed") == gone and purged.result.remaining == 0
    assert all(p["remaining"] == 0 for p in purged.result.partitions)
    assert (
        validate_paths([str(purged.root)], index_interval_bytes=resolver.values_of("index.interval.bytes")).exit_code
        == 0
    )


def test_only_batches_with_a_purged_record_change(purged, small_log):
    def batches(root):  # by partition and first offset (a legacy wrapper's is its last)
        log = LogDir.open(str(root))
        return {
            (tp, b.base_offset if b.magic == 2 else b.last_offset): b
            for tp in log.topic_partitions
            for seg in log.partition(*tp).segments
            for _, b in seg.batches()
        }

    before, after = batches(small_log.path), batches(purged.root)
    after_rows = read_log(purged.root)
    purged_offsets = {(tp, r[0]) for tp, rows in purged.before.items() for r in set(rows) - set(after_rows[tp])}
    for key, batch in before.items():
        touched = any((key[0], r.offset) in purged_offsets for r in batch.records())
        if not touched:
            assert after[key].data == batch.data  # copied byte for byte
        elif batch.magic == 2 and batch.producer_id >= 0:  # producer state: the batch stays, maybe empty
            kept = [r.timestamp for r in batch.records() if (key[0], r.offset) not in purged_offsets]
            # the max timestamp is the kept records' largest, as Kafka's rewrite sets it (an empty batch's stays)
            largest = max(kept) if kept and batch.timestamp_type == 0 else batch.max_timestamp
            assert (after[key].last_offset, after[key].last_sequence, after[key].max_timestamp) == (
                batch.last_offset,
                batch.last_sequence,
                largest,
            )
    rewritten = {name for name, st in files(purged.root).items() if purged.before_files.get(name) != st}
    touched_segments = {f"{o.topic}-{o.partition}/{o.base_offset:020d}.log" for o in purged.result.outputs}
    assert {n for n in rewritten if n.endswith(".log")} == touched_segments  # untouched segments stay as they are


def test_ledger_reads_back_with_deltalake_and_spark_and_holds_no_key(spark, purged):
    table = DeltaTable(purged.ledger).to_pyarrow_table()
    rows = table.to_pylist()
    assert len(rows) == purged.result.ledger_rows == purged.result.total("removed") + purged.result.total("redacted")
    assert {r["run_id"] for r in rows} == {purged.result.run_id}
    by_place = {(r["topic"], r["partition"], r["offset"]): r for r in rows}
    for tp, records in purged.before.items():
        for offset, key, _value, _, timestamp, _ in records:
            if key in KEYS:
                row = by_place[(*tp, offset)]
                assert row["key_fingerprint"] == fingerprint(SECRET, key) and row["matched_by"] == "key"
                if timestamp is not None and timestamp >= 0:  # kafka-python has none for v0
                    assert row["timestamp"] == EPOCH + timedelta(milliseconds=timestamp)
    (click,) = [r for r in rows if r["matched_by"] == "where"]
    assert click["key_fingerprint"] is None and click["reason"] == "erasure request"
    assert {(r["topic"], r["action"]) for r in find(purged.ledger, b"key-000005", SECRET)} >= {
        ("orders", "removed"),
        ("legacy-v0", "redacted"),
    }
    via_spark = spark.read.parquet(*DeltaTable(purged.ledger).file_uris())
    assert via_spark.count() == len(rows) and "key_fingerprint" in via_spark.columns
    runs = DeltaTable(runs_path(purged.ledger)).to_pyarrow_table().to_pylist()
    assert [(r["run_id"], r["remaining"], r["ledger_rows"]) for r in runs] == [(purged.result.run_id, 0, len(rows))]
    for path in [*Path(purged.ledger).rglob("*"), *Path(runs_path(purged.ledger)).rglob("*")]:
        if path.is_file():
            data = path.read_bytes()
            assert not any(key in data for key in KEYS), path


def test_a_rerun_changes_nothing_and_adds_no_ledger_rows(spark, purged, resolver, tmp_path):
    root, ledger = tmp_path / "log", str(tmp_path / "ledger")
    shutil.copytree(purged.root, root)
    shutil.copytree(purged.ledger, ledger)
    shutil.copytree(runs_path(purged.ledger), runs_path(ledger))
    before = files(root)
    again = purge(spark, str(root), purged.keys, ledger=ledger, secret=SECRET, where=WHERE, config=resolver, now=NOW)
    assert files(root) == before
    assert (again.outputs, again.ledger_rows, again.total("removed"), again.remaining) == ([], 0, 0, 0)
    assert again.partitions == []  # nothing matches: the two redacted records have no key left
    assert DeltaTable(ledger).to_pyarrow_table().num_rows == purged.result.ledger_rows
    assert DeltaTable(runs_path(ledger)).to_pyarrow_table().num_rows == 2


def test_dry_run_reports_per_partition_and_writes_nothing(spark, purged, small_log, tmp_path, capsys):
    import json

    from kafkalog.cli import main

    root = tmp_path / "log"
    shutil.copytree(small_log.path, root)
    config = tmp_path / "topics.properties"
    config.write_text(small_log.summary.config_properties())
    before = files(root)
    assert (
        main(
            [
                "purge",
                str(root),
                "--keys",
                purged.keys,
                "--where",
                WHERE,
                "--dry-run",
                "--config-file",
                str(config),
                "--now",
                str(NOW),
                "--ledger",
                str(tmp_path / "ledger"),
                "--report",
                str(tmp_path / "report.json"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith(f"would purge {purged.result.total('removed')} records removed") and "legacy-v0" in out
    assert files(root) == before and not (tmp_path / "ledger").exists()
    dry = json.loads((tmp_path / "report.json").read_text())
    counts = ("topic", "partition", "removed", "tombstoned", "redacted", "batches", "segments", "keys")
    assert dry["dryRun"] and [{c: p[c] for c in counts} for p in dry["partitions"]] == [
        {c: p[c] for c in counts} for p in purged.result.partitions
    ]


class Crash(Exception):
    pass


@pytest.mark.parametrize("step", SWAP_STEPS)
def test_a_crash_at_any_swap_step_then_a_rerun_completes_the_purge(spark, purged, small_log, resolver, tmp_path, step):
    topics = ["payments"]  # transactional and idempotent producers, aborts, seven segments per partition
    root, ledger = tmp_path / "log", str(tmp_path / "ledger")
    shutil.copytree(small_log.path, root)

    def crash(at, name):
        if at == step:
            raise Crash(at)

    with pytest.raises(Crash):
        purge(
            spark, str(root), KEYS, topics=topics, ledger=ledger, secret=SECRET, config=resolver, now=NOW, fault=crash
        )
    (interrupted,) = set(DeltaTable(ledger).to_pyarrow_table().column("run_id").to_pylist())
    again = purge(spark, str(root), KEYS, topics=topics, ledger=ledger, secret=SECRET, config=resolver, now=NOW)
    assert segment_bytes(root, topics) == segment_bytes(purged.root, topics)
    identity = ("topic", "partition", "offset", "action", "key_fingerprint")
    rows = DeltaTable(ledger).to_pyarrow_table().select(identity).to_pylist()
    reference = [
        r for r in DeltaTable(purged.ledger).to_pyarrow_table().select(identity).to_pylist() if r["topic"] in topics
    ]
    assert sorted(map(tuple, map(dict.values, rows))) == sorted(map(tuple, map(dict.values, reference)))
    # the rerun re-stages what was not swapped in, the same rewrites: each segment is recorded once, under
    # the interrupted run, which the rerun names; its evidence holds the rows of both
    rewrite = ("topic", "partition", "base_offset", "sha256_before", "sha256_after")
    segments = DeltaTable(ledger + "_segments").to_pyarrow_table().to_pylist()
    reference = [
        r for r in DeltaTable(purged.ledger + "_segments").to_pyarrow_table().to_pylist() if r["topic"] in topics
    ]
    assert sorted(tuple(r[c] for c in rewrite) for r in segments) == sorted(
        tuple(r[c] for c in rewrite) for r in reference
    )
    assert {r["run_id"] for r in segments} == {interrupted} and again.resumes == [interrupted]
    assert f"completes interrupted run {interrupted}" in again.summary()
    (run,) = DeltaTable(runs_path(ledger)).to_pyarrow_table().to_pylist()
    assert run["run_id"] == again.run_id and run["resumes"] == [interrupted]
    report = build_report(ledger)
    assert report["run"]["resumes"] == [interrupted] and len(report["segments"]) == len(reference)
    assert sum(t["removed"] + t["tombstoned"] + t["redacted"] for t in report["byTopic"]) == len(rows)


def test_verification_fails_loudly_when_a_record_survives(spark, small_log, resolver, tmp_path, monkeypatch):
    import kafkalog.operations.purge as module

    root, ledger = tmp_path / "log", str(tmp_path / "ledger")
    shutil.copytree(small_log.path, root)
    monkeypatch.setattr(module, "swap_in", lambda *args, **kwargs: None)  # the rewrite never lands
    with pytest.raises(PurgeVerificationError, match="legacy-v0-0"):
        purge(
            spark,
            str(root),
            [b"key-000001"],
            topics=["legacy-v0"],
            ledger=ledger,
            secret=SECRET,
            config=resolver,
            now=NOW,
        )
    (run,) = DeltaTable(runs_path(ledger)).to_pyarrow_table().to_pylist()
    assert run["remaining"] == run["records_removed"] > 0


def _compacted_log(tmp_path):
    """One compacted partition: key a (a value with a header, then a tombstone with a header), key
    b (its latest a value), key c untouched; an idempotent producer writes one batch."""
    root = tmp_path / "compacted"
    root.mkdir()
    fs = LogFileSystem.for_path(str(root))[0]
    w = PartitionWriter(
        fs, str(root), "t", 0, segment_bytes=1 << 20, segment_ms=1 << 40, index_interval_bytes=0, now_ms=NOW - 10_000
    )
    h = (("email", b"someone@example.com"),)
    w.append_records([Record(0, NOW - 9_000, b"a", b"1", h), Record(0, NOW - 8_000, b"b", b"2")])
    w.append_records(
        [Record(0, NOW - 7_000, b"a", b"3"), Record(0, NOW - 6_000, b"c", b"4")],
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
    )
    w.roll()
    w.append_records([Record(0, NOW - 5_000, b"a", None, h)])
    w.append_records([Record(0, NOW - 4_000, b"b", b"5"), Record(0, NOW - 3_000, b"c", b"6")])
    w.roll()
    w.close()
    LogDir.open(str(root)).write_checkpoint(REPLICATION_OFFSET_CHECKPOINT, {("t", 0): w.log_end_offset})
    return str(root)


def test_tombstones_keep_each_keys_latest_offset_until_compaction_horizon(spark, tmp_path, monkeypatch, capsys):
    """Also a partition spread over several tasks, as a large one is (`tuning.MAX_BYTES_PER_TASK`):
    each segment scanned and rewritten by a task of its own, a key's latest offset decided across them."""
    from kafkalog import tuning
    from kafkalog.cli import main
    from kafkalog.spark import purge as spark_purge
    from kafkalog.spark import scan as spark_scan

    source, out, ledger = _compacted_log(tmp_path), str(tmp_path / "purged"), str(tmp_path / "ledger")
    (tmp_path / "keys.txt").write_text("a\nb\n")
    monkeypatch.setenv(SECRET_ENV, SECRET.decode())
    monkeypatch.setattr(tuning, "MAX_BYTES_PER_TASK", 1)
    scans, packed = [], []
    planned, packing = spark_purge.plan_segments, spark_scan.pack_tasks
    monkeypatch.setattr(spark_purge, "plan_segments", lambda *a, **k: scans.append(planned(*a, **k)) or scans[-1])
    monkeypatch.setattr(spark_scan, "pack_tasks", lambda *a, **k: packed.append(packing(*a, **k)) or packed[-1])
    checks, probes = _counted_checks(monkeypatch)
    before = files(source)
    assert (
        main(
            [
                "purge",
                source,
                "--keys",
                str(tmp_path / "keys.txt"),
                "--tombstone",
                "--ledger",
                ledger,
                "--output",
                out,
                "--config",
                "cleanup.policy=compact",
                "--config",
                "delete.retention.ms=1000",
                "--now",
                str(NOW),
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.startswith("purged 3 records removed, 2 tombstoned")
    assert (len(checks), len(probes)) == (1, 0)  # the plan's check, which the run's destination takes
    assert files(source) == before  # --output: the input is untouched
    batches = [b for seg in LogDir.open(out).partition("t", 0).segments for _, b in seg.batches()]
    assert [(r.offset, r.key, r.value, r.headers) for b in batches for r in b.records()] == [
        (3, b"c", b"4", ()),
        (4, b"a", None, ()),
        (5, b"b", None, ()),
        (6, b"c", b"6", ()),
    ]
    assert [b.delete_horizon_ms for b in batches if any(r.value is None for r in b.records())] == [NOW + 1000] * 2
    assert batches[0].producer_id == 5 and batches[0].last_offset == 3  # the producer's batch keeps its range
    # the partition's 3 segments (361 bytes) scanned by a task per segment or less
    assert {u.partition for t in scans[0].tasks for u in t} == {0} and len(scans[0].tasks) >= 3
    assert len(packed[0]) == 2  # the two segments with a purged record, rewritten by a task each
    before = files(out)
    config = resolver_from(settings=["cleanup.policy=compact", "delete.retention.ms=1000"])
    checks.clear(), probes.clear()
    again = purge(spark, out, [b"a", b"b"], tombstone=True, ledger=ledger, secret=SECRET, config=config, now=NOW)
    assert (len(checks), len(probes)) == (1, 1)  # in place: one preflight, one lock probe, then the lock
    assert files(out) == before and again.ledger_rows == 0 and again.total("kept") == 2
    assert sorted(r["action"] for r in find(ledger, b"a", SECRET)) == ["removed", "removed", "tombstoned"]
    assert validate_paths([out]).exit_code == 0


def _counted_checks(monkeypatch):
    """The preflights (storage/destination.preflight) and lock probes (LogDir.ensure_unlocked) made
    from now on, as two lists that grow."""
    from kafkalog.storage import destination

    checks, probes = [], []
    preflight, probe = destination.preflight, LogDir.ensure_unlocked
    monkeypatch.setattr(destination, "preflight", lambda *a, **k: checks.append(a) or preflight(*a, **k))
    monkeypatch.setattr(LogDir, "ensure_unlocked", lambda self: probes.append(self) or probe(self))
    return checks, probes


def test_a_lock_taken_between_the_plan_and_the_run_is_refused(spark, tmp_path):
    """The run takes the plan's check rather than checking again, and still takes the lock: a broker
    started since the plan (its lock held) makes the run refuse, the log dir left as it was."""
    from kafkalog.errors import LogDirError
    from kafkalog.operations.purge import plan_purge, run_purge

    from ..storage.test_logdir import held

    root = _compacted_log(tmp_path)
    plan = plan_purge(LogDir.open(root), [b"a"], ledger=str(tmp_path / "ledger"), secret=SECRET, now=NOW)
    before = files(root)
    with held(Path(root) / ".lock", "lockf"), pytest.raises(LogDirError, match="locked by another process"):
        run_purge(spark, plan)
    assert files(root) == before and not (tmp_path / "ledger").exists()


def test_keys_come_from_key_files_tables_and_dataframes(spark, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import write_deltalake

    from kafkalog.errors import ConfigError
    from kafkalog.spark.purge import keys_frame
    from kafkalog.storage.keylist import KeyListError

    pq.write_table(pa.table({"key": pa.array([b"\x00\x01", b"a"], pa.binary())}), tmp_path / "keys.parquet")
    (tmp_path / "keys.csv").write_text("key,reason\nhex:0001,ticket 1\nalice,\n")
    write_deltalake(str(tmp_path / "keys-delta"), pa.table({"key": ["base64:AAE=", "alice"], "reason": ["t2", None]}))

    def rows(keys):
        df, count = keys_frame(spark, keys, reason="default")
        return sorted((bytes(r.key), r.reason) for r in df.collect()), count

    assert rows(str(tmp_path / "keys.parquet")) == ([(b"\x00\x01", "default"), (b"a", "default")], None)
    assert rows(str(tmp_path / "keys.csv"))[0] == [(b"\x00\x01", "ticket 1"), (b"alice", "default")]
    assert rows(str(tmp_path / "keys-delta"))[0] == [(b"\x00\x01", "t2"), (b"alice", "default")]
    assert rows(["hex:0001", b"\x00\x01", "alice"]) == ([(b"\x00\x01", "default"), (b"alice", "default")], 2)
    with pytest.raises(KeyListError, match="1 values of the `key` column"):
        keys_frame(spark, spark.createDataFrame([("hex:zz",), ("ok",)], "key string"))
    with pytest.raises(KeyListError, match="binary or string"):
        keys_frame(spark, spark.createDataFrame([(1,)], "key int"))
    log = _compacted_log(tmp_path)
    with pytest.raises(ConfigError, match="--where"):
        purge(spark, log, [], where="no_such_column = 1", dry_run=True)
    with pytest.raises(ConfigError, match="--where"):  # refused before the copy: no partial output
        purge(
            spark,
            log,
            [b"k"],
            where="no_such_column = 1",
            ledger=str(tmp_path / "ledger"),
            secret=b"s" * 32,
            output=str(tmp_path / "copy"),
        )
    assert not (tmp_path / "copy").exists()


# -- the ledger through delta-spark, and with deltalake: each reads and extends what the other wrote -------


def require_delta(spark):
    """The shared session's delta-spark (tests/conftest.py starts it with local_session(delta=True),
    the jars from Maven Central): without it these tests fail and say why, they never skip."""
    from kafkalog.spark.ledger import delta_configured
    from kafkalog.spark.session import delta_unavailable

    if not delta_configured(spark):
        pytest.fail(
            "the ledger's delta-spark path cannot be tested: the shared SparkSession has no delta-spark: "
            + (delta_unavailable(spark) or "tests/conftest.py does not start it with local_session(delta=True)"),
            pytrace=False,
        )


def _ledger_input(offsets, key=b"alice", action="removed"):
    import pyarrow as pa

    n = len(offsets)
    return pa.table(
        {
            "topic": ["orders"] * n,
            "partition": pa.array([0] * n, pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
            "timestamp": pa.array([1_700_000_000_000 + o for o in offsets], pa.int64()),
            "key": pa.array([key] * n, pa.binary()),
            "action": [action] * n,
            "matched_by": ["key"] * n,
            "reason": ["ticket 42"] * n,
        }
    )


def _rows(table, drop=()) -> list:
    """A ledger table's rows as sorted tuples, without the columns in `drop` (times as UTC ISO text:
    the two libraries give them different tzinfo objects)."""
    names = [n for n in table.column_names if n not in drop]
    plain = [
        tuple(v.astimezone(timezone.utc).isoformat() if isinstance(v, datetime) else v for v in r.values())
        for r in table.select(names).to_pylist()
    ]
    return sorted(plain, key=repr)


def test_delta_spark_and_deltalake_extend_and_read_each_others_ledger(spark, tmp_path):
    from kafkalog.spark.ledger import write_ledger_records, write_ledger_run
    from kafkalog.storage.ledger import RECORDS_SCHEMA, RUNS_SCHEMA, records_table, write_records, write_run

    require_delta(spark)
    writers = {
        "delta-spark": lambda ledger, purged, **row: write_ledger_records(
            spark, ledger, spark.createDataFrame(purged), **row
        ),
        "deltalake": lambda ledger, purged, **row: write_records(ledger, records_table(purged, **row)),
    }
    run_writers = {"delta-spark": lambda ledger, run: write_ledger_run(spark, ledger, run), "deltalake": write_run}
    run = {
        "run_id": "r1",
        "started_at": 1,
        "finished_at": 2,
        "purged_at": 3,
        "log_dir": "/x",
        "topics": ["orders"],
        "keys": 2,
        "where": False,
        "tombstone": True,
        "partitions": 1,
        "segments": 1,
        "records_removed": 5,
        "records_tombstoned": 1,
        "records_redacted": 0,
        "ledger_rows": 6,
        "remaining": 0,
        "kafkalog_version": "0",
    }
    log_dir = str(tmp_path / "log")
    tables = {}
    for first, then in [("delta-spark", "deltalake"), ("deltalake", "delta-spark")]:
        ledger = str(tmp_path / f"created-by-{first}")
        steps = [
            (first, [3, 7], "removed", 2),
            (then, [3, 7, 9], "removed", 1),  # 3 and 7 are there already
            (first, [9, 11], "removed", 1),
            (then, [9], "tombstoned", 1),
        ]  # another action: another row
        for i, (writer, offsets, action, added) in enumerate(steps):
            assert (
                writers[writer](
                    ledger,
                    _ledger_input(offsets, action=action),
                    secret=SECRET,
                    run_id=f"r{i}",
                    purged_at_ms=NOW + i,
                    log_dir=log_dir,
                )
                == added
            ), (first, i)
        assert (
            writers[then](ledger, _ledger_input([]), secret=SECRET, run_id="r9", purged_at_ms=NOW, log_dir=log_dir) == 0
        )
        run_writers[first](ledger, run)
        run_writers[then](ledger, dict(run, run_id="r2", topics=None))
        via_deltalake = DeltaTable(ledger).to_pyarrow_table()
        via_spark = spark.read.format("delta").load(ledger).toArrow()
        assert via_deltalake.schema == RECORDS_SCHEMA
        assert _rows(via_spark) == _rows(via_deltalake)
        found = sorted(find(ledger, b"alice", SECRET), key=lambda r: (r["offset"], r["action"]))
        assert [(r["offset"], r["action"], r["run_id"]) for r in found] == [
            (3, "removed", "r0"),
            (7, "removed", "r0"),
            (9, "removed", "r1"),
            (9, "tombstoned", "r3"),
            (11, "removed", "r2"),
        ]
        runs_deltalake = DeltaTable(runs_path(ledger)).to_pyarrow_table()
        assert runs_deltalake.schema == RUNS_SCHEMA
        assert _rows(spark.read.format("delta").load(runs_path(ledger)).toArrow()) == _rows(runs_deltalake)
        engines = [(h["operation"], h.get("engineInfo") or "") for h in DeltaTable(ledger).history()]
        assert ("MERGE", True) in {(op, e.startswith("Apache-Spark") and "Delta-Lake/" in e) for op, e in engines}
        assert any(not e.startswith("Apache-Spark") for _, e in engines), engines  # and deltalake wrote too
        tables[first] = (_rows(via_deltalake), _rows(runs_deltalake))
    assert tables["delta-spark"] == tables["deltalake"]


def test_a_purge_through_delta_spark_writes_the_ledger_a_purge_with_deltalake_does(
    spark, purged, small_log, resolver, tmp_path, monkeypatch
):
    """`purged` wrote its ledger through the shared session's delta-spark; the same purge of another
    copy, with deltalake, writes the same rows (but for run id and log directory); each table reads
    with the other writer's library."""
    import kafkalog.spark.ledger as spark_ledger

    require_delta(spark)
    root, ledger = tmp_path / "log", str(tmp_path / "ledger")
    shutil.copytree(small_log.path, root)
    monkeypatch.setattr(spark_ledger, "delta_configured", lambda session: False)
    result = purge(spark, str(root), purged.keys, ledger=ledger, secret=SECRET, where=WHERE, config=resolver, now=NOW)
    monkeypatch.undo()
    assert {(h.get("engineInfo") or "").split("/")[0] for h in DeltaTable(purged.ledger).history()} == {"Apache-Spark"}
    assert not any((h.get("engineInfo") or "").startswith("Apache-Spark") for h in DeltaTable(ledger).history())
    through_spark = DeltaTable(purged.ledger).to_pyarrow_table()  # delta-spark's table, read with deltalake
    with_deltalake = spark.read.format("delta").load(ledger).toArrow()  # deltalake's table, read with Spark
    assert result.ledger_rows == purged.result.ledger_rows == through_spark.num_rows > 0
    assert {r["log_dir"] for r in through_spark.to_pylist()} == {str(purged.root)}
    assert {r["log_dir"] for r in with_deltalake.to_pylist()} == {str(root)}
    assert _rows(through_spark, drop=("run_id", "log_dir")) == _rows(with_deltalake, drop=("run_id", "log_dir"))
    varying = ("run_id", "log_dir", "log_dirs", "started_at", "finished_at")
    assert _rows(DeltaTable(runs_path(purged.ledger)).to_pyarrow_table(), drop=varying) == _rows(
        spark.read.format("delta").load(runs_path(ledger)).toArrow(), drop=varying
    )


def test_a_session_whose_delta_jars_cannot_be_fetched_starts_without_them_and_says_so(tmp_path):
    """local_session(delta=True) when Ivy cannot fetch delta-spark (here: an artifact that does not
    exist): Spark starts without it, the ledger goes through deltalake, and `delta_unavailable` says why.
    Asked again from another thread (where that session is not the active one, as the command line's
    `start_session` thread's is not the caller's), it is the same session, and Delta's catalog, whose
    classes that JVM lacks, is not set on it (before: every table read failed, "DeltaCatalog class not
    found", which made tests fail when one that ran a command in-process came first)."""
    import subprocess
    import sys

    script = (
        "import warnings, pyspark\n"
        "from kafkalog.spark import session\n"
        "line = '.'.join(pyspark.__version__.split('.')[:2])\n"
        "session.DELTA_ARTIFACTS = {line: 'delta-spark-no-such-artifact_2.13'}\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    spark = session.local_session('delta-unavailable', 'local[1]', delta=True)\n"
        "from kafkalog.spark.ledger import delta_configured\n"
        "print('configured', delta_configured(spark))\n"
        "print('reason', session.delta_unavailable(spark))\n"
        "print('warned', any('deltalake' in str(w.message) for w in caught))\n"
        "import threading\n"
        "again = []\n"
        "asked = threading.Thread(target=lambda: again.append(session.local_session('again', delta=True)))\n"
        "asked.start(); asked.join()\n"
        "print('same', again[0]._jsparkSession.equals(spark._jsparkSession))\n"
        "print('catalog', again[0].conf.get('spark.sql.catalog.spark_catalog', 'unset'))\n"
        "print('tables', again[0].sql('SHOW TABLES').count())\n"
        "spark.stop()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert out["configured"] == "False" and out["warned"] == "True", done.stdout
    assert (out["same"], out["tables"]) == ("True", "0") and "Delta" not in out["catalog"], done.stdout
    assert (
        "could not be fetched from Maven Central" in out["reason"]
        and "io.delta:delta-spark-no-such-artifact_2.13" in out["reason"]
    ), out["reason"]
