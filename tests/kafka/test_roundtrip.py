"""Round trips through a real Apache Kafka 4.x broker (issue 15, item 3).

Real clients (Producer.java, Consumer.java: Kafka's own Java client) write through the broker; the
broker is stopped with a controlled shutdown; kafkalog rewrites its log dir in place (compact, retain,
purge); the broker is started again over it. Then:

(a) server.log of the new start has none of Kafka's recovery, rebuild, corruption or truncation lines
    (broker.RECOVERY_LINES names each and what it means), and says it skipped recovery because the
    clean shutdown file was there;
(b) read_committed and read_uncommitted consumers see exactly the records the rule predicts (computed
    here from what was produced, not by kafkalog), with their original offsets, keys, values,
    headers and timestamps;
(c) DumpLogSegments (`--deep-iteration --index-sanity-check`, `--verify-index-only`) reports no
    problem on any file kafkalog wrote;
(d) consumer groups (classic and KIP-848 protocols) resume at their committed offsets, and producers,
    idempotent and transactional, that lived across the restart go on with the same producer id and
    epoch (the broker accepted their next sequence numbers), as do new ones.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kafkalog.config import resolver_from
from kafkalog.storage.logdir import LogDir

from .broker import Broker, KafkaTools

pytestmark = pytest.mark.spark

DAY = 86_400_000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
SEGMENT_BYTES = 1024  # tiny segments: internal.segment.bytes on the broker (segment.bytes is at least 1 MiB)


# -- what was produced, and what should survive ----------------------------------------------------------------


@dataclass
class Sent:
    """One record the broker acknowledged."""

    topic: str
    partition: int
    offset: int
    key: str | None
    value: str | None
    headers: list
    timestamp: int
    transactional: bool = False
    aborted: bool = False

    def as_consumed(self) -> dict:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "key": self.key,
            "value": self.value,
            "headers": [list(h) for h in self.headers],
            "timestamp": self.timestamp,
        }


@dataclass
class Workload:
    """Runs for Producer.java and, once acknowledged, the records they wrote."""

    runs: list = field(default_factory=list)
    sent: list = field(default_factory=list)

    def add(self, run: dict) -> dict:
        self.runs.append(run)
        return run

    def record(self, run: dict, acked_run: dict) -> None:
        transactional = run.get("mode") == "transactional"
        for group, acked in zip(run["groups"], acked_run["groups"]):
            aborted = transactional and group.get("end") == "abort"
            for spec, meta in zip(group["records"], acked):
                self.sent.append(
                    Sent(
                        run["topic"],
                        meta["partition"],
                        meta["offset"],
                        spec["key"],
                        spec["value"],
                        spec.get("headers", []),
                        meta["timestamp"],
                        transactional,
                        aborted,
                    )
                )

    def produce(self, tools: KafkaTools, broker: Broker, topics=()) -> None:
        acked = tools.produce(broker.bootstrap, self.runs, topics)
        for run, result in zip(self.runs, acked):
            self.record(run, result)
        self.runs = []


def groups(
    tag: str,
    n_groups: int,
    per_group: int,
    *,
    keys: int,
    tombstone_every: int = 0,
    header_every: int = 2,
    ends=None,
    timestamps=None,
    start: int = 0,
    pad: int = 0,
) -> list[dict]:
    """`n_groups` groups of `per_group` keyed records: keys cycle over `keys` keys, every
    `tombstone_every`-th record is a tombstone, every `header_every`-th has headers (one with a null
    value); `ends(g)` is a group's end (commit/abort/flush); `timestamps(n)` an explicit timestamp;
    `pad` more bytes in every value."""
    out = []
    n = start
    for g in range(n_groups):
        records = []
        for i in range(per_group):
            tombstone = tombstone_every and n % tombstone_every == tombstone_every - 1
            record = {
                "key": f"key-{n % keys}",
                "value": None if tombstone else f"{tag}-{g}-{i}-" + "x" * (n % 13) + _noise(f"{tag}{n}", pad),
            }
            if header_every and n % header_every == 0:
                record["headers"] = [["source", tag], ["n", str(n)], ["empty", None]]
            if timestamps is not None:
                record["timestamp"] = timestamps(n)
            records.append(record)
            n += 1
        group = {"records": records}
        if ends is not None:
            group["end"] = ends(g)
        out.append(group)
    return out


def _noise(seed: str, n: int) -> str:
    """n characters that compress poorly (hex digits of a hash chain)."""
    out = ""
    while len(out) < n:
        seed = hashlib.sha256(seed.encode()).hexdigest()
        out += seed
    return out[:n]


def committed_view(records):
    return [r for r in records if not r.aborted]


def compacted(sent: list[Sent], upper: dict) -> list[Sent]:
    """Kafka's first cleaning pass over a log with no cleaner checkpoint, every transaction complete and
    nothing within min.compaction.lag.ms: below each partition's first uncleanable offset (`upper`,
    the active segment's base offset), aborted records go and a record stays only when it is the
    latest of its key among the committed records below `upper` (tombstones stay: their
    delete.retention.ms starts with this pass); from `upper` on, everything stays."""
    latest = {}
    for r in sent:
        if r.offset < upper[(r.topic, r.partition)] and not r.aborted:
            latest[(r.topic, r.partition, r.key)] = max(latest.get((r.topic, r.partition, r.key), -1), r.offset)
    return [
        r
        for r in sent
        if r.offset >= upper[(r.topic, r.partition)]
        or (not r.aborted and latest[(r.topic, r.partition, r.key)] == r.offset)
    ]


class Steps:
    """Prints how long each step took (pytest shows it with a failure, or with -s)."""

    def __init__(self):
        self.last = time.monotonic()

    def __call__(self, name: str) -> None:
        now = time.monotonic()
        print(f"[{now - self.last:6.1f}s] {name}", flush=True)
        self.last = now


def consumed(record: dict) -> dict:
    return {k: record[k] for k in ("topic", "partition", "offset", "key", "value", "headers", "timestamp")}


def read_all(tools: KafkaTools, broker: Broker, topics, isolation: str) -> list[dict]:
    results = tools.consume(broker.bootstrap, [{"kind": "read", "topic": t, "isolation": isolation} for t in topics])
    return sorted(
        (consumed(r) for result in results for r in result["records"]),
        key=lambda r: (r["topic"], r["partition"], r["offset"]),
    )


def expected(records) -> list[dict]:
    return sorted((r.as_consumed() for r in records), key=lambda r: (r["topic"], r["partition"], r["offset"]))


def assert_same_records(actual: list[dict], wanted: list[dict], what: str) -> None:
    if actual == wanted:
        return
    a = {(r["topic"], r["partition"], r["offset"]): r for r in actual}
    w = {(r["topic"], r["partition"], r["offset"]): r for r in wanted}
    missing = sorted(set(w) - set(a))
    extra = sorted(set(a) - set(w))
    changed = sorted(k for k in set(a) & set(w) if a[k] != w[k])
    pytest.fail(
        f"{what}: {len(actual)} records read, {len(wanted)} expected; missing {missing[:10]}, "
        f"unexpected {extra[:10]}, different {[(a[k], w[k]) for k in changed[:3]]}"
    )


# -- the log dir before and after ---------------------------------------------------------------------------------


def file_digests(log_dir: Path) -> dict[str, str]:
    """Every file of the log dir (relative path -> sha256), partition directories included."""
    return {
        str(p.relative_to(log_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(log_dir.rglob("*"))
        if p.is_file()
    }


def written_files(before: dict, after: dict) -> list[str]:
    """Files kafkalog created or changed (bytes differ)."""
    return sorted(name for name, digest in after.items() if before.get(name) != digest)


def segment_bases(partition_dir: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in partition_dir.glob("*.log"))


def check_with_dump_log_segments(tools: KafkaTools, *written: tuple[Path, list[str]]) -> None:
    """`dump_log_segments_problems` finds none in `written`, (log dir, files) pairs checked in the same
    DumpLogSegments runs (a JVM each)."""
    problems, kept_max = dump_log_segments_problems(tools, written)
    problems += kept_max
    assert not problems, "DumpLogSegments reports problems on files kafkalog wrote:\n" + "\n".join(problems[:40])


def dump_log_segments_problems(
    tools: KafkaTools, written: tuple[tuple[Path, list[str]], ...]
) -> tuple[list[str], list[str]]:
    """Kafka's DumpLogSegments on every segment, index, time index, transaction index and producer
    snapshot kafkalog wrote (`written`: log dirs, each with the paths of its files kafkalog wrote), and
    the indexes of every segment it wrote: `--deep-iteration --index-sanity-check` (every index passes
    Kafka's sanity check; every batch reads and its CRC is valid; no bytes after the last batch) and
    `--verify-index-only` (every offset index entry points at a batch whose last offset it names;
    every time index entry names a batch's last offset and the largest timestamp of its records,
    increasing). "Non-consecutive offsets" is not a problem in a compacted log: the records removed
    leave gaps. Returns the problems, and apart the time index mismatches that come from a batch
    whose header max timestamp is above its records' (see `classify_timestamp_mismatches`)."""
    kinds = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
    paths = [d / f for d, files in written for f in files if f.endswith(kinds) and "-" in f.split("/")[0]]
    # a rewritten segment's indexes are checked too, also when their bytes did not change
    for log in [p for p in paths if p.suffix == ".log"]:
        paths += [
            i
            for i in (log.with_suffix(".index"), log.with_suffix(".timeindex"), log.with_suffix(".txnindex"))
            if i.exists() and i not in paths
        ]
    assert paths, "kafkalog wrote no segment file"
    problems, kept_max = [], []
    deep = tools.dump_log_segments(paths, deep_iteration=True, index_sanity_check=True)
    problems += [f"--deep-iteration --index-sanity-check: {p}" for p in deep.problems]
    for path in paths:
        if path.suffix in (".index", ".timeindex") and f"Dumping {path}" in deep.stdout:
            section = deep.stdout.split(f"Dumping {path}\n", 1)[1].split("Dumping ", 1)[0]
            if "passed sanity check" not in section and "is empty" not in section:
                problems.append(f"{path}: neither 'passed sanity check' nor 'is empty': {section[:300]!r}")
    indexes = [p for p in paths if p.suffix in (".index", ".timeindex")]
    if indexes:
        verify = tools.dump_log_segments(indexes, verify_index_only=True)
        empty, kept = classify_timestamp_mismatches(tools, verify)
        explained = {(f, ts) for f, ts, _ in empty + kept}
        files_explained = {f for f, _, _ in verify.timestamp_mismatches()} - {
            f for f, ts, _ in verify.timestamp_mismatches() if (f, ts) not in explained
        }
        for line in verify.problems:
            if line.startswith("Found timestamp mismatch in :") and line.split(":", 1)[1] in files_explained:
                continue
            if line.startswith("  Index timestamp: ") and any(
                line == f"  Index timestamp: {ts}, log timestamp: {log_ts}" for _, ts, log_ts in empty + kept
            ):
                continue
            problems.append(f"--verify-index-only: {line}")
        kept_max += [
            f"--verify-index-only: Found timestamp mismatch in :{f}: Index timestamp: {ts}, log timestamp: "
            f"{log_ts} (the batch the entry names has max timestamp {ts} in its header, its records "
            f"at most {log_ts})"
            for f, ts, log_ts in kept
        ]
    return problems, kept_max


def classify_timestamp_mismatches(tools: KafkaTools, verify) -> tuple[list, list]:
    """DumpLogSegments' time index mismatches, (file, index timestamp, log timestamp) each, sorted:

    - `empty`: the entry names an empty batch (count 0: every record removed, the batch kept for its
      producer's sequence numbers) and that batch's header max timestamp. This is Kafka's own rule,
      not a fault: Kafka's cleaner keeps such a batch's header max timestamp and indexes it so
      (retained-batch metadata), as LogSegment.recover does, but DumpLogSegments computes the log
      timestamp from the batch's records: -1.
    - `kept`: the entry names a batch and its header max timestamp, which is above the largest
      timestamp of the batch's records. Kafka never writes that: a batch that loses records is
      rebuilt (MemoryRecords.filterTo) with the max timestamp of the records it keeps.
    Any other mismatch is in neither list (so stays a problem)."""
    mismatches = verify.timestamp_mismatches()
    empty, kept = [], []
    for file in sorted({f for f, _, _ in mismatches}):
        log_file = file[: -len(".timeindex")] + ".log"
        entries = tools.dump_log_segments([file]).stdout
        batches = tools.dump_log_segments([log_file]).stdout
        offsets = {
            int(ts): int(o)
            for ts, o in (
                line[len("timestamp: ") :].split(" offset: ")
                for line in entries.splitlines()
                if line.startswith("timestamp: ")
            )
        }
        for f, ts, log_ts in mismatches:
            if f != file or ts not in offsets:
                continue
            line = _batch_line(batches, offsets[ts])
            if f"CreateTime: {ts} " not in line:
                continue
            if log_ts == -1 and " count: 0 " in line:
                empty.append((f, ts, log_ts))
            elif 0 <= log_ts < ts:
                kept.append((f, ts, log_ts))
    return empty, kept


def _batch_line(dump: str, last_offset: int) -> str:
    return next((line for line in dump.splitlines() if f" lastOffset: {last_offset} " in line), "")


def assert_loaded_cleanly(broker: Broker) -> None:
    found = broker.recovery_lines()
    assert not found, "the broker recovered or rebuilt what kafkalog wrote:\n" + "\n".join(found[:20])
    log = broker.server_log()
    assert "since clean shutdown file was found" in log, "the broker did not see its clean shutdown marker"


def offsets_for_times_mismatches(tools: KafkaTools, broker: Broker, sent: list[Sent], partitions) -> list[str]:
    """ListOffsets by timestamp (the consumer's offsetsForTimes) for every timestamp produced to
    `partitions`, against Kafka's rule (UnifiedLog.fetchOffsetByTimestamp) applied to the records the
    files hold: the first segment whose largest timestamp is at least the target, then in it the
    first record, data or control, in offset order, whose timestamp is at least the target, or none
    (timestamps here increase with offsets but for transaction markers). A segment's largest
    timestamp is its records' largest, and an empty batch's header max timestamp (Kafka's cleaner
    keeps it; a target between them finds no record in that segment: Kafka's own answer), or the
    file's mtime in a segment without batches. Kafka answers from its time index and the batches'
    header max timestamps, so a header or an index that does not agree with the records shows here."""

    def answer(segments, target):
        for largest, records in segments:
            if largest >= target:
                return next((o for o, ts in records if ts >= target), None)
        return None

    tasks, wanted = [], []
    for topic, partition in partitions:
        part = LogDir.open(str(broker.log_dir)).partition(topic, partition)
        segments = []
        for segment in part.segments:
            batches = [b for _, b in segment.batches()]
            records = [(r.offset, r.timestamp) for b in batches for r in b.records()]
            stamps = [ts for _, ts in records] + [b.max_timestamp for b in batches if not b.records()]
            segments.append((max(stamps) if stamps else segment.mtime_ms, records))
        targets = sorted({r.timestamp for r in sent if (r.topic, r.partition) == (topic, partition)})
        tasks.append({"kind": "times", "topic": topic, "partition": partition, "timestamps": targets})
        wanted.append({str(t): answer(segments, t) for t in targets})
    results = tools.consume(broker.bootstrap, tasks)
    out = []
    for task, result, want in zip(tasks, results, wanted):
        for t, offset in want.items():
            if result["offsets"][t] != offset:
                out.append(
                    f"{task['topic']}-{task['partition']}: offsetsForTimes({t}) = {result['offsets'][t]}, "
                    f"the first record at or after that timestamp is at offset {offset}"
                )
    return out


def batch_producers(log_dir: Path, topic: str, partition: int) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, producer id, producer epoch) of every data batch, from the files."""
    part = LogDir.open(str(log_dir)).partition(topic, partition)
    return [
        (b.base_offset, b.last_offset, b.producer_id, b.producer_epoch)
        for segment in part.segments
        for _, b in segment.batches()
        if not b.is_control
    ]


def producers_of(log_dir: Path, topic: str, partition: int, offsets) -> set[tuple[int, int]]:
    """The (producer id, epoch) of the batches holding these offsets."""
    offsets = set(offsets)
    return {
        (pid, epoch)
        for base, last, pid, epoch in batch_producers(log_dir, topic, partition)
        if any(base <= o <= last for o in offsets)
    }


# -- compact -----------------------------------------------------------------------------------------------------

COMPACTED = {
    "cleanup.policy": "compact",
    "index.interval.bytes": "128",
    "delete.retention.ms": str(DAY),
    "min.compaction.lag.ms": str(DAY),
}  # the broker's own cleaner leaves these topics alone


def test_compact_round_trip(running_broker: Broker, kafka_tools: KafkaTools, spark, tmp_path):
    from kafkalog.operations.compact import compact

    broker, tools, step = running_broker, kafka_tools, Steps()
    topics = [f"cmp-{codec}" for codec in CODECS]
    broker_configs = {**COMPACTED, "internal.segment.bytes": str(SEGMENT_BYTES)}
    work = Workload()
    for codec, topic in zip(CODECS, topics):
        # an idempotent producer, a transactional one (commits and aborts) and a plain one, same keys
        work.add(
            {
                "topic": topic,
                "mode": "idempotent",
                "compression": codec,
                "groups": groups(f"{codec}-idem", 10, 6, keys=9, tombstone_every=11),
            }
        )
        work.add(
            {
                "topic": topic,
                "mode": "transactional",
                "transactional_id": f"tx-{topic}",
                "compression": codec,
                "groups": groups(
                    f"{codec}-txn", 8, 5, keys=9, start=3, ends=lambda g: "abort" if g % 3 == 1 else "commit"
                ),
            }
        )
        work.add(
            {
                "topic": topic,
                "mode": "plain",
                "compression": codec,
                "groups": groups(f"{codec}-plain", 3, 4, keys=9, start=5, tombstone_every=5),
            }
        )
    work.produce(tools, broker, [{"name": t, "partitions": 2, "configs": broker_configs} for t in topics])
    step("produced")

    # producers that live across the restart: they produce now, wait, and go on after it (same producer
    # id, epoch and sequence numbers: the broker checks them against the producer state it loaded)
    go = tmp_path / "go"
    live = {
        "idempotent": {
            "topic": "cmp-lz4",
            "partition": 0,
            "mode": "idempotent",
            "compression": "lz4",
            "groups": groups("live-idem", 4, 5, keys=9, start=1) + groups("live-idem-after", 2, 5, keys=9),
        },
        "transactional": {
            "topic": "cmp-zstd",
            "partition": 1,
            "mode": "transactional",
            "transactional_id": "tx-live",
            "compression": "zstd",
            "groups": groups("live-txn", 4, 5, keys=9, start=2, ends=lambda g: "abort" if g == 2 else "commit")
            + groups("live-txn-after", 2, 5, keys=9, ends=lambda g: "commit"),
        },
    }
    for name, run in live.items():
        run["groups"][3]["signal"] = str(tmp_path / f"{name}-ready.json")
        run["groups"][4]["wait_for"] = str(go)
    running = {name: tools.produce_async(broker.bootstrap, [run]) for name, run in live.items()}
    try:
        acked_before = _wait_for_signals(live, running)
        step("live producers ready")
        for name, run in live.items():
            work.record({**run, "groups": run["groups"][:4]}, acked_before[name])

        # consumer groups commit part of the way: the classic protocol and KIP-848's
        groups_before = tools.consume(
            broker.bootstrap,
            [
                {
                    "kind": "group",
                    "group": "g-classic",
                    "protocol": "classic",
                    "topic": "cmp-none",
                    "isolation": "read_committed",
                    "max_records": 40,
                },
                {
                    "kind": "group",
                    "group": "g-consumer",
                    "protocol": "consumer",
                    "topic": "cmp-gzip",
                    "isolation": "read_committed",
                    "max_records": 40,
                },
            ],
        )
        # the harness itself: before any rewrite, the consumers read what was produced
        assert_same_records(
            read_all(tools, broker, topics, "read_uncommitted"), expected(work.sent), "read_uncommitted before"
        )
        step("groups committed, read before")

        broker.stop()
        assert broker.clean_shutdown_marker
        step("broker stopped")
        log_dir = broker.log_dir
        sent = list(work.sent)
        live_producers = {
            name: producers_of(
                log_dir, run["topic"], run["partition"], [m["offset"] for g in acked_before[name]["groups"] for m in g]
            )
            for name, run in live.items()
        }
        assert all(len({pid for pid, _ in p}) == 1 for p in live_producers.values()), live_producers
        upper = {(t, p): segment_bases(broker.partition_dir(t, p))[-1] for t in topics for p in (0, 1)}
        assert min(len(segment_bases(broker.partition_dir(t, p))) for t in topics for p in (0, 1)) >= 4, (
            "too few segments to compact"
        )
        before = file_digests(log_dir)
        shutil.copytree(log_dir, tmp_path / "log-before-compact")  # kept for a look when a check fails

        settings = [f"{k}={v}" for k, v in {**COMPACTED, "segment.bytes": str(SEGMENT_BYTES)}.items()]
        config = resolver_from(topic_settings=[f"{t}:{s}" for t in topics for s in settings])
        now = int(time.time() * 1000) + 2 * DAY
        result = compact(spark, str(log_dir), config, now)
        step("kafkalog compact")
        chosen = {(c.topic, c.partition) for c in result.plan.chosen}
        assert chosen == set(upper), f"kafkalog chose {sorted(chosen)}"
        written = written_files(before, file_digests(log_dir))
        touched = {w.split("/")[0] for w in written if "/" in w}
        assert touched <= {f"{t}-{p}" for t, p in upper}, f"kafkalog changed files of other partitions: {touched}"

        check_with_dump_log_segments(tools, (log_dir, written))
        step("DumpLogSegments")

        broker.start()
        assert_loaded_cleanly(broker)
        step("broker restarted")

        survivors = compacted(sent, upper)
        assert len(survivors) < 0.7 * len(sent), (len(survivors), len(sent))  # compaction removed records
        assert_same_records(
            read_all(tools, broker, topics, "read_uncommitted"), expected(survivors), "read_uncommitted after compact"
        )
        assert_same_records(
            read_all(tools, broker, topics, "read_committed"),
            expected(committed_view(survivors)),
            "read_committed after compact",
        )
        wrong = offsets_for_times_mismatches(tools, broker, sent, sorted(upper))
        assert not wrong, "ListOffsets by timestamp after compact:\n" + "\n".join(wrong[:20])
        step("read after")

        # the groups resume where they committed
        groups_after = tools.consume(
            broker.bootstrap,
            [
                {"kind": "committed", "group": "g-classic"},
                {"kind": "committed", "group": "g-consumer"},
                {
                    "kind": "group",
                    "group": "g-classic",
                    "protocol": "classic",
                    "topic": "cmp-none",
                    "isolation": "read_committed",
                },
                {
                    "kind": "group",
                    "group": "g-consumer",
                    "protocol": "consumer",
                    "topic": "cmp-gzip",
                    "isolation": "read_committed",
                },
            ],
        )
        for before_group, committed, resumed, topic in (
            (groups_before[0], groups_after[0], groups_after[2], "cmp-none"),
            (groups_before[1], groups_after[1], groups_after[3], "cmp-gzip"),
        ):
            at = {int(p): o for p, o in before_group["committed"].items()}
            assert at, f"{topic}: the group committed nothing"
            assert {int(p): o for p, o in committed["committed"].get(topic, {}).items()} == at
            wanted = [
                r
                for r in expected(committed_view(survivors))
                if r["topic"] == topic and r["offset"] >= at.get(r["partition"], 0)
            ]
            got = sorted((consumed(r) for r in resumed["records"]), key=lambda r: (r["partition"], r["offset"]))
            assert_same_records(got, wanted, f"group resumed on {topic}")

        # the live producers go on
        go.touch()
        acked_all = {name: handle.wait()[0] for name, handle in running.items()}
        step("groups resumed, live producers done")
    finally:
        go.touch()
        for handle in running.values():
            handle.kill()
    later = Workload()
    for name, run in live.items():
        assert acked_all[name]["groups"][:4] == acked_before[name]["groups"]
        later.record({**run, "groups": run["groups"][4:]}, {"groups": acked_all[name]["groups"][4:]})
        after = producers_of(
            log_dir, run["topic"], run["partition"], [m["offset"] for g in acked_all[name]["groups"][4:] for m in g]
        )
        if name == "idempotent":  # an epoch bump would mean the broker had lost the producer's state
            assert after == live_producers[name], (
                f"the idempotent producer went from (id, epoch) {live_producers[name]} to {after}"
            )
        else:  # transaction version 2 bumps the epoch at every transaction's end: the id stays
            assert {pid for pid, _ in after} == {pid for pid, _ in live_producers[name]}

    # new producers too: a transactional id the log knows (its epoch is bumped) and a new idempotent one
    later.add(
        {
            "topic": "cmp-snappy",
            "mode": "transactional",
            "transactional_id": "tx-cmp-snappy",
            "compression": "snappy",
            "groups": groups("again-txn", 2, 3, keys=9, ends=lambda g: "commit"),
        }
    )
    later.add({"topic": "cmp-none", "mode": "idempotent", "groups": groups("again-idem", 2, 3, keys=9)})
    later.produce(tools, broker)
    assert_same_records(
        read_all(tools, broker, topics, "read_uncommitted"),
        expected(survivors + later.sent),
        "read_uncommitted after producing again",
    )
    step("produced again, read")


def _wait_for_signals(live: dict, running: dict, timeout: float = 120, signal_group: int = 3) -> dict:
    """The acks of the live producers' groups before their wait (their "signal" files)."""
    deadline = time.monotonic() + timeout
    files = {name: Path(run["groups"][signal_group]["signal"]) for name, run in live.items()}
    while not all(f.exists() for f in files.values()):
        for name, handle in running.items():
            if handle.process.poll() is not None:
                handle.wait()  # raises with its output
                pytest.fail(f"the {name} producer ended early")
        assert time.monotonic() < deadline, "the live producers did not get ready in time"
        time.sleep(0.1)
    return {name: json.loads(f.read_text()) for name, f in files.items()}


# -- retain ------------------------------------------------------------------------------------------------------

DELETED = {"cleanup.policy": "delete", "index.interval.bytes": "128", "retention.ms": str(7 * DAY)}


def expected_start_by_time(bases: list[int], sent: list[Sent], now: int, retention_ms: int) -> int:
    """Kafka's time retention: the oldest segments go while their largest timestamp is more than
    retention.ms before now (a prefix; never every segment here)."""
    for i, base in enumerate(bases[:-1]):
        largest = max(r.timestamp for r in sent if base <= r.offset < bases[i + 1])
        if not now - largest > retention_ms:
            return base
    return bases[-1]


def expected_start_by_size(bases: list[int], sizes: list[int], retention_bytes: int) -> int:
    """Kafka's size retention: the oldest segments go while the excess over retention.bytes left is
    at least the segment's size."""
    excess = sum(sizes) - retention_bytes
    for base, size in zip(bases, sizes):
        if excess - size < 0:
            return base
        excess -= size
    return bases[-1]


def test_retain_round_trip(running_broker: Broker, kafka_tools: KafkaTools, tmp_path):
    from kafkalog.operations.retain import retain

    broker, tools, step = running_broker, kafka_tools, Steps()
    segment = {"internal.segment.bytes": str(SEGMENT_BYTES)}
    topic_configs = {
        "ret-time": dict(DELETED),  # 7 days, as Kafka's default
        "ret-size": {**DELETED, "retention.bytes": "3000"},
        "ret-dr": dict(DELETED),  # kafka-delete-records.sh's JSON file
        "ret-trunc": dict(DELETED),  # the same, and records below the log start offset physically removed
        "ret-consumed": dict(DELETED),  # KIP-68 consumed retention (kafkalog's settings only)
    }
    topics = sorted(topic_configs)
    real_now = int(time.time() * 1000)
    work = Workload()
    old = real_now - 6 * DAY  # 8 days old at kafkalog's clock (two days ahead): past retention.ms
    work.add(
        {
            "topic": "ret-time",
            "mode": "idempotent",
            "compression": "gzip",
            "groups": groups("old", 6, 6, keys=50, timestamps=lambda n: old + n, pad=60)
            + groups("recent", 5, 6, keys=50, start=36, pad=60),
        }
    )
    for topic, codec in (("ret-dr", "lz4"), ("ret-trunc", "zstd"), ("ret-consumed", "snappy")):
        work.add(
            {
                "topic": topic,
                "mode": "idempotent",
                "compression": codec,
                "groups": groups(topic, 10, 6, keys=50, pad=60),
            }
        )
    work.produce(
        tools, broker, [{"name": t, "partitions": 1, "configs": {**c, **segment}} for t, c in topic_configs.items()]
    )
    # ret-size is written by a producer that lives across the restart (its first batches are deleted)
    go = tmp_path / "go"
    live = {
        "topic": "ret-size",
        "partition": 0,
        "mode": "idempotent",
        "compression": "snappy",
        "groups": groups("live", 10, 6, keys=50, pad=60) + groups("live-after", 2, 6, keys=50, start=60, pad=60),
    }
    live["groups"][9]["signal"] = str(tmp_path / "ready.json")
    live["groups"][10]["wait_for"] = str(go)
    running = tools.produce_async(broker.bootstrap, [live])
    try:
        acked_before = _wait_for_signals({"live": live}, {"live": running}, signal_group=9)["live"]
        work.record({**live, "groups": live["groups"][:10]}, acked_before)
        groups_before = tools.consume(
            broker.bootstrap,
            [
                {
                    "kind": "group",
                    "group": "r-classic",
                    "protocol": "classic",
                    "topic": "ret-consumed",
                    "max_records": 20,
                },
                {
                    "kind": "group",
                    "group": "r-consumer",
                    "protocol": "consumer",
                    "topic": "ret-consumed",
                    "max_records": 35,
                },
            ],
        )
        step("produced, groups committed")

        broker.stop()
        assert broker.clean_shutdown_marker
        log_dir = broker.log_dir
        sent = list(work.sent)
        bases = {t: segment_bases(broker.partition_dir(t, 0)) for t in topics}
        assert min(len(b) for b in bases.values()) >= 5, bases
        sizes = {t: [(broker.partition_dir(t, 0) / f"{b:020d}.log").stat().st_size for b in bases[t]] for t in topics}
        live_producer = producers_of(log_dir, "ret-size", 0, [m["offset"] for g in acked_before["groups"] for m in g])
        cut = {t: bases[t][2] + 2 for t in ("ret-dr", "ret-trunc")}  # inside the third segment
        assert all(bases[t][2] + 2 < bases[t][3] for t in cut)
        now = real_now + 2 * DAY
        min_committed = min(g["committed"]["0"] for g in groups_before)
        wanted_start = {
            "ret-time": expected_start_by_time(
                bases["ret-time"], [r for r in sent if r.topic == "ret-time"], now, 7 * DAY
            ),
            "ret-size": expected_start_by_size(bases["ret-size"], sizes["ret-size"], 3000),
            "ret-dr": cut["ret-dr"],
            "ret-trunc": cut["ret-trunc"],
            "ret-consumed": max(b for b in bases["ret-consumed"] if b <= min_committed),
        }
        assert all(wanted_start[t] > bases[t][0] for t in topics), (wanted_start, bases)  # each deletes something
        before = file_digests(log_dir)
        shutil.copytree(log_dir, tmp_path / "log-before-retain")

        def settings(t):
            c = {**topic_configs[t], "segment.bytes": str(SEGMENT_BYTES)}
            if t == "ret-consumed":
                c.update({"retention.commitoffset.enable": "true", "retention.commitoffset.ms": "3600000"})
            return [f"{t}:{k}={v}" for k, v in c.items()]

        config = resolver_from(topic_settings=[s for t in topics for s in settings(t)])
        delete_records = tmp_path / "delete-records.json"
        delete_records.write_text(
            json.dumps({"version": 1, "partitions": [{"topic": "ret-dr", "partition": 0, "offset": cut["ret-dr"]}]})
        )
        report = retain(
            str(log_dir),
            config=config,
            now_ms=now,
            topics=[t for t in topics if t != "ret-trunc"],
            delete_records=str(delete_records),
        )
        report_trunc = retain(
            str(log_dir),
            config=config,
            now_ms=now,
            topics=["ret-trunc"],
            delete_records={("ret-trunc", 0): cut["ret-trunc"]},
            truncate_below_start=True,
        )
        step("kafkalog retain")
        starts = {
            (p.topic, p.partition): p.outcome.log_start_offset for p in report.partitions + report_trunc.partitions
        }
        assert {t: starts[(t, 0)] for t in topics} == wanted_start
        written = written_files(before, file_digests(log_dir))
        touched = {w.split("/")[0] for w in written if "/" in w}
        assert touched <= {f"{t}-0" for t in topics}, f"kafkalog changed files of other partitions: {touched}"
        check_with_dump_log_segments(tools, (log_dir, written))
        step("DumpLogSegments")

        broker.start()
        assert_loaded_cleanly(broker)
        step("broker restarted")
        kept = [r for r in sent if r.offset >= wanted_start[r.topic]]
        for isolation in ("read_uncommitted", "read_committed"):
            results = tools.consume(
                broker.bootstrap, [{"kind": "read", "topic": t, "isolation": isolation} for t in topics]
            )
            assert {t: r["start"]["0"] for t, r in zip(topics, results)} == wanted_start
            actual = sorted(
                (consumed(r) for result in results for r in result["records"]),
                key=lambda r: (r["topic"], r["partition"], r["offset"]),
            )
            assert_same_records(actual, expected(kept), f"{isolation} after retain")
        resumed = tools.consume(
            broker.bootstrap,
            [
                {"kind": "group", "group": "r-classic", "protocol": "classic", "topic": "ret-consumed"},
                {"kind": "group", "group": "r-consumer", "protocol": "consumer", "topic": "ret-consumed"},
            ],
        )
        for before_group, after_group in zip(groups_before, resumed):
            at = before_group["committed"]["0"]
            assert_same_records(
                [consumed(r) for r in after_group["records"]],
                [r for r in expected(kept) if r["topic"] == "ret-consumed" and r["offset"] >= at],
                "group resumed on ret-consumed",
            )
        step("read after")
        go.touch()
        acked_all = running.wait()[0]
    finally:
        go.touch()
        running.kill()
    after = producers_of(log_dir, "ret-size", 0, [m["offset"] for g in acked_all["groups"][10:] for m in g])
    assert after == live_producer, f"the idempotent producer went from (id, epoch) {live_producer} to {after}"
    step("live producer done")


# -- purge -------------------------------------------------------------------------------------------------------


def test_purge_round_trip(running_broker: Broker, kafka_tools: KafkaTools, spark, tmp_path):
    from kafkalog.operations.purge import purge

    broker, tools, step = running_broker, kafka_tools, Steps()
    topic_configs = {"prg-del": dict(DELETED), "prg-cmp": dict(COMPACTED)}
    topics = sorted(topic_configs)
    purged = ["key-2", "key-5"]
    work = Workload()
    for topic, codec in (("prg-del", "lz4"), ("prg-cmp", "zstd")):
        work.add(
            {
                "topic": topic,
                "mode": "idempotent",
                "compression": codec,
                "groups": groups(f"{topic}-idem", 6, 6, keys=9, tombstone_every=7, pad=20),
            }
        )
        work.add(
            {
                "topic": topic,
                "mode": "transactional",
                "transactional_id": f"tx-{topic}",
                "compression": codec,
                "groups": groups(
                    f"{topic}-txn", 5, 5, keys=9, start=4, pad=20, ends=lambda g: "abort" if g % 2 else "commit"
                ),
            }
        )
        work.add(
            {
                "topic": topic,
                "mode": "plain",
                "compression": "gzip",
                "groups": groups(f"{topic}-plain", 2, 5, keys=9, start=1, pad=20),
            }
        )
    # batches whose record with the largest timestamp is of a purged key (one batch per group: linger)
    t0 = int(time.time() * 1000) + 60_000  # above every timestamp so far: the time index gets entries for them
    work.add(
        {
            "topic": "prg-del",
            "partition": 0,
            "mode": "idempotent",
            "compression": "lz4",
            "linger_ms": 200,
            "groups": [
                {
                    "records": [
                        {"key": "key-1", "value": f"early-{g}", "timestamp": t0 + 10 * g},
                        {"key": "key-5", "value": f"late-{g}", "timestamp": t0 + 10 * g + 5},
                    ]
                }
                for g in range(4)
            ],
        }
    )
    work.produce(
        tools,
        broker,
        [
            {"name": t, "partitions": 2, "configs": {**c, "internal.segment.bytes": str(SEGMENT_BYTES)}}
            for t, c in topic_configs.items()
        ],
    )
    # a transactional producer that lives across the restart; its last transaction before it writes
    # only keys that are purged, so that its last batches lose every record
    go = tmp_path / "go"
    live = {
        "topic": "prg-del",
        "partition": 1,
        "mode": "transactional",
        "transactional_id": "tx-prg-live",
        "compression": "snappy",
        "groups": groups("live", 3, 4, keys=9, start=2, ends=lambda g: "commit")
        + [{"end": "commit", "records": [{"key": "key-2", "value": "live-last"}, {"key": "key-5", "value": None}]}]
        + groups("live-after", 2, 4, keys=9, ends=lambda g: "commit"),
    }
    live["groups"][3]["signal"] = str(tmp_path / "ready.json")
    live["groups"][4]["wait_for"] = str(go)
    running = tools.produce_async(broker.bootstrap, [live])
    try:
        acked_before = _wait_for_signals({"live": live}, {"live": running})["live"]
        work.record({**live, "groups": live["groups"][:4]}, acked_before)
        step("produced")

        broker.stop()
        assert broker.clean_shutdown_marker
        log_dir = broker.log_dir
        sent = list(work.sent)
        assert min(len(segment_bases(broker.partition_dir(t, p))) for t in topics for p in (0, 1)) >= 3
        before = file_digests(log_dir)
        shutil.copytree(log_dir, tmp_path / "log-before-purge")

        config = resolver_from(
            topic_settings=[
                f"{t}:{k}={v}"
                for t, c in topic_configs.items()
                for k, v in {**c, "segment.bytes": str(SEGMENT_BYTES)}.items()
            ]
        )
        result = purge(
            spark,
            str(log_dir),
            [k.encode() for k in purged],
            ledger=str(tmp_path / "ledger"),
            secret=b"kafkalog-tests-purge-secret",
            topics=topics,
            config=config,
        )
        step("kafkalog purge")
        wanted = [r for r in sent if r.key not in purged]
        assert result.total("removed") == len(sent) - len(wanted) > 0, result.summary()
        assert result.remaining == 0
        written = written_files(before, file_digests(log_dir))
        touched = {w.split("/")[0] for w in written if "/" in w}
        assert touched <= {f"{t}-{p}" for t in topics for p in (0, 1)}, f"kafkalog changed other partitions: {touched}"
        check_with_dump_log_segments(tools, (log_dir, written))
        step("DumpLogSegments")

        broker.start()
        assert_loaded_cleanly(broker)
        step("broker restarted")
        assert_same_records(
            read_all(tools, broker, topics, "read_uncommitted"), expected(wanted), "read_uncommitted after purge"
        )
        assert_same_records(
            read_all(tools, broker, topics, "read_committed"),
            expected(committed_view(wanted)),
            "read_committed after purge",
        )
        wrong_times = offsets_for_times_mismatches(tools, broker, sent, [(t, p) for t in topics for p in (0, 1)])
        step("read after")
        go.touch()
        acked_all = running.wait()[0]
    finally:
        go.touch()
        running.kill()
    later = Workload()
    later.record({**live, "groups": live["groups"][4:]}, {"groups": acked_all["groups"][4:]})
    later.add({"topic": "prg-cmp", "mode": "idempotent", "groups": groups("again", 2, 3, keys=9)})
    later.produce(tools, broker)
    assert_same_records(
        read_all(tools, broker, topics, "read_committed"),
        expected(committed_view(wanted + later.sent)),
        "read_committed after producing again",
    )
    step("produced again, read")
    assert not wrong_times, "ListOffsets by timestamp after purge:\n" + "\n".join(wrong_times[:20])
