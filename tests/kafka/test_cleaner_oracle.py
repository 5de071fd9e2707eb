"""Kafka's own LogCleaner as the oracle for `kafkalog compact` (issue 15, item 4).

One log, produced through the broker by real clients (Producer.java: keyed updates, tombstones, headers,
an idempotent producer, a transactional one that commits and aborts, a plain one), is cleaned twice:

- by kafkalog: the broker is stopped and its partition directories (with the log dir's checkpoint files
  and meta.properties) are copied; `kafkalog.spark.compaction.compact(..., force=True)` cleans the copy;
- by the broker's own LogCleaner: the broker is started again, the topic's configuration is altered
  (kafka-configs.sh: `min.compaction.lag.ms=0`, a tiny `min.cleanable.dirty.ratio`; the topic was
  created with a day of compaction lag so that the cleaner left it alone until the copy was taken), and
  the test waits for LogCleaner's "Log cleaner thread 0 cleaned log <topic>-<p> (dirty section = [a, b])"
  line in log-cleaner.log for every partition; then the broker is stopped.

Both directories are read with kafkalog's storage reader, and below the offset both cleaned up to (the
smaller of Kafka's dirty section end and kafkalog's upper bound) every batch (offsets, producer id,
epoch, base sequence, transactional/control/delete-horizon flags) and every record (offset, key, value,
headers, timestamp) must be equal. `delete.retention.ms` is a day: the first pass of either cleaner keeps
the tombstones and sets the delete horizon (cleaning time + a day) on the batches holding them. Kafka's
cleaner takes its own `now` per partition; kafkalog is run once per partition (on its own copy) with the
`now` Kafka's horizon gives, so that the segment and index bytes can be compared too: they must be equal,
the batches a cleaner rebuilds included (kafkalog frames zstd and gzip as Kafka's Java codecs do).
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from kafkalog.config import resolver_from
from kafkalog.storage.logdir import LogDir

from .broker import Broker, KafkaTools
from .test_roundtrip import DAY, SEGMENT_BYTES, Steps, Workload, groups, segment_bases

pytestmark = pytest.mark.spark

TOPIC = "oracle-cmp"
PARTITIONS = (0, 1)
CREATED = {"cleanup.policy": "compact", "index.interval.bytes": "128", "delete.retention.ms": str(DAY),
           "min.compaction.lag.ms": str(DAY)}  # the broker's cleaner leaves the topic alone until altered
CLEAN_NOW = {"min.compaction.lag.ms": "0", "min.cleanable.dirty.ratio": "0.01"}
HORIZON_SLACK_MS = 300_000  # the two cleaning times are within this of each other


def alter_topic_config(tools: KafkaTools, broker: Broker, topic: str, configs: dict) -> None:
    """kafka-configs.sh --alter --entity-type topics --entity-name TOPIC --add-config k=v,..."""
    tools.java(["kafka.admin.ConfigCommand", "--bootstrap-server", broker.bootstrap, "--alter",
                "--entity-type", "topics", "--entity-name", topic,
                "--add-config", ",".join(f"{k}={v}" for k, v in configs.items())], timeout=120)


def copy_partitions(log_dir: Path, target: Path, topic: str) -> None:
    """The input of kafkalog: the topic's partition directories, the log dir's checkpoint files and
    meta.properties."""
    target.mkdir(parents=True)
    for entry in log_dir.iterdir():
        if entry.is_dir() and entry.name.rsplit("-", 1)[0] == topic:
            shutil.copytree(entry, target / entry.name)
        elif entry.is_file() and (entry.name.endswith("checkpoint") or entry.name == "meta.properties"):
            shutil.copy2(entry, target / entry.name)


def surviving(log_dir: Path, topic: str, partition: int, below: int) -> list[tuple]:
    """Every batch below `below` as (header tuple, delete horizon, records), read by kafkalog's reader."""
    part = LogDir.open(str(log_dir)).partition(topic, partition)
    out = []
    for segment in part.segments:
        for _, b in segment.batches():
            if b.base_offset >= below:
                continue
            header = (b.base_offset, b.last_offset, b.producer_id, b.producer_epoch, b.base_sequence,
                      b.is_transactional, b.is_control, b.has_delete_horizon)
            records = tuple((r.offset, r.key, r.value, tuple(r.headers), r.timestamp) for r in b.records()
                            if r.offset < below)
            out.append((header, b.delete_horizon_ms, records))
    return out


def differences(kafka: list[tuple], ours: list[tuple]) -> list[str]:
    """What differs between Kafka's cleaned batches and kafkalog's; a delete horizon may differ by the
    time between the two cleanings (HORIZON_SLACK_MS)."""
    out = []
    k_by = {h[0]: (h, dh, r) for h, dh, r in kafka}
    o_by = {h[0]: (h, dh, r) for h, dh, r in ours}
    for base in sorted(set(k_by) | set(o_by)):
        k, o = k_by.get(base), o_by.get(base)
        if k is None:
            out.append(f"batch {o[0]} kept by kafkalog only, records {o[2]}")
        elif o is None:
            out.append(f"batch {k[0]} kept by Kafka only, records {k[2]}")
        else:
            if k[0] != o[0]:
                out.append(f"batch at {base}: Kafka header {k[0]}, kafkalog {o[0]}")
            if (k[1] is None) != (o[1] is None) or (k[1] is not None and abs(k[1] - o[1]) > HORIZON_SLACK_MS):
                out.append(f"batch at {base}: Kafka delete horizon {k[1]}, kafkalog {o[1]}")
            if k[2] != o[2]:
                out.append(f"batch at {base}: Kafka records {k[2]}, kafkalog {o[2]}")
    return out


def byte_differences(kafka: bytes, ours: bytes) -> list[str]:
    """Batch by batch, how two segments' bytes differ (nothing when they are the same). kafkalog frames
    zstd and gzip as Kafka 4.x does (zstd-jni's stream: no content size, an empty last block; the
    JDK's gzip header with OS byte 255), so a batch either cleaner rebuilt is byte for byte the same."""
    from kafkalog.codec.reader import BatchReader

    if kafka == ours:
        return []
    fields = ("base_offset", "partition_leader_epoch", "magic", "attributes", "last_offset_delta", "base_timestamp",
              "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "records_count")
    k_batches, o_batches = list(BatchReader(kafka)), list(BatchReader(ours))
    if len(k_batches) != len(o_batches):
        return [f"{len(k_batches)} batches in Kafka's, {len(o_batches)} in kafkalog's"]
    out = []
    for k, o in zip(k_batches, o_batches):
        if bytes(k.buf[k.position:k.position + k.size]) == bytes(o.buf[o.position:o.position + o.size]):
            continue
        header = {f: (getattr(k, f), getattr(o, f)) for f in fields if getattr(k, f) != getattr(o, f)}
        out.append(f"batch {k.base_offset}..{k.last_offset}: "
                   + (f"header fields differ {header}" if header else f"codec {k.codec}, same header, other bytes"))
    return out


def test_kafka_cleaner_is_the_oracle(running_broker: Broker, kafka_tools: KafkaTools, spark, tmp_path):
    from kafkalog.spark.compaction import compact

    broker, tools, step = running_broker, kafka_tools, Steps()
    work = Workload()
    work.add({"topic": TOPIC, "mode": "idempotent", "compression": "lz4",
              "groups": groups("idem", 8, 6, keys=9, tombstone_every=7)})
    work.add({"topic": TOPIC, "mode": "transactional", "transactional_id": "tx-oracle", "compression": "gzip",
              "groups": groups("txn", 8, 5, keys=9, start=3, tombstone_every=6,
                               ends=lambda g: "abort" if g % 3 == 1 else "commit")})
    work.add({"topic": TOPIC, "mode": "plain", "compression": "none",
              "groups": groups("plain", 4, 4, keys=9, start=5, tombstone_every=5)})
    work.add({"topic": TOPIC, "mode": "idempotent", "compression": "zstd",
              "groups": groups("idem2", 4, 5, keys=9, start=2, tombstone_every=4)})
    # the last word on some keys is a tombstone: an idempotent producer's, a committed transaction's
    # (an aborted transaction's tombstone on other keys goes, the value before it stays)
    work.add({"topic": TOPIC, "mode": "idempotent", "compression": "lz4",
              "groups": [{"records": [{"key": f"key-{k}", "value": None} for k in (0, 3, 6)]}]})
    work.add({"topic": TOPIC, "mode": "transactional", "transactional_id": "tx-oracle-deletes", "compression": "gzip",
              "groups": [{"end": "commit", "records": [{"key": f"key-{k}", "value": None,
                                                        "headers": [["deleted", "yes"]]} for k in (1, 4)]},
                         {"end": "abort", "records": [{"key": f"key-{k}", "value": None} for k in (2, 5, 7, 8)]}]})
    # the last records, of other keys, over a segment's size in each partition (uncompressed): the
    # segments of everything above roll, so that the active segment holds none of it
    for p in PARTITIONS:
        work.add({"topic": TOPIC, "partition": p, "mode": "plain", "compression": "none",
                  "groups": [{"records": [{"key": f"tail-{p}-{g}-{i}", "value": f"tail-{g}-{i}-" + "t" * 40}
                                          for i in range(4)]} for g in range(4)]})
    work.produce(tools, broker, [{"name": TOPIC, "partitions": len(PARTITIONS),
                                  "configs": {**CREATED, "internal.segment.bytes": str(SEGMENT_BYTES)}}])
    step("produced")

    broker.stop()
    assert broker.clean_shutdown_marker
    assert min(len(segment_bases(broker.partition_dir(TOPIC, p))) for p in PARTITIONS) >= 4, "too few segments"
    copy = tmp_path / "copy"
    copy_partitions(broker.log_dir, copy, TOPIC)
    step("broker stopped, partitions copied")

    # Kafka's cleaner
    broker.start()
    alter_topic_config(tools, broker, TOPIC, CLEAN_NOW)
    sections = {p: broker.wait_until_cleaned(f"{TOPIC}-{p}", timeout=60) for p in PARTITIONS}
    now = int(time.time() * 1000)
    broker.stop()
    step(f"Kafka's LogCleaner cleaned {sections}")

    # kafkalog, on a copy per partition: Kafka's cleaner took its own `now` for each partition (the
    # delete horizon it wrote is that now + delete.retention.ms); kafkalog is given the same one, so
    # that the same horizon is written and the segment bytes can be compared too
    settings = {**CREATED, **CLEAN_NOW, "segment.bytes": str(SEGMENT_BYTES)}
    config = resolver_from(topic_settings=[f"{TOPIC}:{k}={v}" for k, v in settings.items()])
    ours_dirs, uppers, nows = {}, {}, {}
    for p in PARTITIONS:
        horizons = {dh for _, dh, _ in surviving(broker.log_dir, TOPIC, p, max(e for _, e in sections[p]))
                    if dh is not None}
        assert len(horizons) <= 1, f"{TOPIC}-{p}: Kafka wrote the delete horizons {horizons}"
        nows[p] = horizons.pop() - DAY if horizons else now  # no horizon written: `now` changes nothing
        assert abs(nows[p] - now) < HORIZON_SLACK_MS
        ours_dirs[p] = tmp_path / f"kafkalog-{p}"
        shutil.copytree(copy, ours_dirs[p])
        result = compact(spark, str(ours_dirs[p]), config, nows[p], force=True, topics=[TOPIC])
        chosen = {s.partition: s.upper_bound for s in result.plan.chosen if s.topic == TOPIC}
        assert set(chosen) == set(PARTITIONS), f"kafkalog chose {sorted(chosen)}"
        uppers[p] = chosen[p]
    step(f"kafkalog compact, upper bounds {uppers}, now {nows}")

    try:
        found, stats = [], {}
        for p in PARTITIONS:
            kafka_upper = max(end for _, end in sections[p])
            assert kafka_upper == uppers[p], \
                f"{TOPIC}-{p}: Kafka cleaned below {kafka_upper} ({sections[p]}), kafkalog below {uppers[p]}"
            below = min(kafka_upper, uppers[p])
            kafka = surviving(broker.log_dir, TOPIC, p, below)
            ours = surviving(ours_dirs[p], TOPIC, p, below)
            produced = [s for s in work.sent if s.partition == p and s.offset < below]
            kept = [r for _, _, rs in kafka for r in rs]
            stats[p] = {"produced": len(produced), "kept": len(kept), "tombstones": sum(r[2] is None for r in kept),
                        "control batches": sum(h[6] for h, _, _ in kafka),
                        "empty batches": sum(not rs and not h[6] for h, _, rs in kafka),
                        "with horizon": sum(h[7] for h, _, _ in kafka)}
            assert len(kept) < 0.7 * len(produced), f"{TOPIC}-{p}: Kafka removed little: {stats[p]}"
            found += [f"{TOPIC}-{p} (below {below}): {d}" for d in differences(kafka, ours)]
            # the same horizon: the same bytes, segment by segment
            kafka_bases = [b for b in segment_bases(broker.partition_dir(TOPIC, p)) if b < below]
            ours_bases = [b for b in segment_bases(ours_dirs[p] / f"{TOPIC}-{p}") if b < below]
            if kafka_bases != ours_bases:
                found.append(f"{TOPIC}-{p}: segments below {below}: Kafka {kafka_bases}, kafkalog {ours_bases}")
            for base in sorted(set(kafka_bases) & set(ours_bases)):
                name = f"{base:020d}.log"
                found += [f"{TOPIC}-{p}: segment {name}: {d}" for d in byte_differences(
                    (broker.partition_dir(TOPIC, p) / name).read_bytes(), (ours_dirs[p] / f"{TOPIC}-{p}" / name).read_bytes())]
                for suffix in (".index", ".timeindex", ".txnindex"):
                    k_file = broker.partition_dir(TOPIC, p) / f"{base:020d}{suffix}"
                    o_file = ours_dirs[p] / f"{TOPIC}-{p}" / f"{base:020d}{suffix}"
                    k_bytes = k_file.read_bytes() if k_file.exists() else b""  # absent or empty: the same
                    o_bytes = o_file.read_bytes() if o_file.exists() else b""
                    if k_bytes != o_bytes:
                        found.append(f"{TOPIC}-{p}: {k_file.name} differs in bytes")
        print(f"compared: {stats}")
        assert not found, "Kafka's LogCleaner and kafkalog kept different things:\n" + "\n".join(found[:40])
        assert all(s["tombstones"] and s["control batches"] and s["with horizon"] for s in stats.values()), \
            f"the scenario lacks what it is about: {stats}"
    finally:
        broker.start()  # the next tests get a running broker
    step("compared")
