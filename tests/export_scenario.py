"""A topic written with the broker's append path (PartitionWriter) for the export tests, with what a
read_committed consumer reads of it computed here, independently of kafkalog's transaction tracker:
transactions interleaved across producers, aborts, tombstones, unkeyed records, several segments, and
an open transaction near the end of partition 0 that holds its last stable offset."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from kafkalog.codec.records import Record
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.log_writer import PartitionWriter

TOPIC = "orders"
T0 = 1_700_000_000_000


@dataclass(frozen=True)
class Written:
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    txn: tuple[int, int] | None  # (producer id, its transaction's number), None: not transactional


def write_topic(root: str, *, seed: int = 7, partitions: int = 2, steps: int = 90, segment_bytes: int = 700):
    """Write the topic under `root`; returns (records, fates): every data record written, and each
    transaction's fate ("commit", "abort"; an open one has none)."""
    rng = random.Random(seed)
    fs = LogFileSystem.for_path("/")[0]
    records: list[Written] = []
    fates: dict[tuple[int, int, int], str] = {}  # (partition, pid, txn number) -> fate
    for p in range(partitions):
        writer = PartitionWriter(fs, root, TOPIC, p, segment_bytes=segment_bytes, index_interval_bytes=128)
        seq: dict[int, int] = {}
        number: dict[int, int] = {}
        open_: set[int] = set()
        for step in range(steps):
            ts = T0 + 1000 * (p * steps + step)
            roll = rng.random()
            hold = p == 0 and step == steps - 12  # an open transaction that never ends
            pid = 9 if hold else rng.choice((1, 2, 3))
            plain = p == 0 and step == steps - 11  # a plain record past the open transaction
            if not plain and (hold or (roll < 0.45 and pid not in open_) or pid in open_ and roll < 0.6):
                if pid not in open_:
                    open_.add(pid)
                    number[pid] = number.get(pid, 0) + 1
                batch = [_record(rng, ts) for _ in range(rng.randint(1, 3))]
                info = writer.append_records(
                    batch,
                    producer_id=pid,
                    producer_epoch=0,
                    base_sequence=seq.get(pid, 0),
                    is_transactional=True,
                    codec=rng.choice((0, 1)),
                    now_ms=ts,
                )
                seq[pid] = seq.get(pid, 0) + len(batch)
                records += [
                    Written(p, info.first_offset + i, ts, r.key, r.value, (pid, number[pid]))
                    for i, r in enumerate(batch)
                ]
            elif not plain and pid in open_ and pid != 9:
                commit = rng.random() < 0.6
                writer.append_end_txn_marker(producer_id=pid, producer_epoch=0, commit=commit, timestamp=ts)
                fates[p, pid, number[pid]] = "commit" if commit else "abort"
                open_.discard(pid)
            else:
                batch = [_record(rng, ts)]
                info = writer.append_records(batch, now_ms=ts)
                records.append(Written(p, info.first_offset, ts, batch[0].key, batch[0].value, None))
        for pid in sorted(open_ - {9}):
            writer.append_end_txn_marker(producer_id=pid, producer_epoch=0, commit=True, timestamp=ts + 1)
            fates[p, pid, number[pid]] = "commit"
        writer.close()
    return records, fates


def _record(rng: random.Random, ts: int) -> Record:
    key = None if rng.random() < 0.05 else f"k{rng.randint(0, 11)}".encode()
    value = None if rng.random() < 0.15 else json.dumps({"n": rng.randint(0, 999), "tag": "x"}).encode()
    return Record(0, ts, key, value)


def consumer_reads(records, fates, *, as_of: dict[int, int] | None = None) -> list[Written]:
    """What a read_committed consumer reads, per partition: up to the first offset of the oldest
    transaction without a marker (the last stable offset) and the as-of offset (exclusive), records
    of committed transactions and plain ones, none of aborted transactions."""
    stops: dict[int, int] = {}
    for r in records:
        if r.txn is not None and (r.partition, *r.txn) not in fates:
            stops[r.partition] = min(stops.get(r.partition, r.offset), r.offset)
    out = []
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        stop = min(stops.get(r.partition, 1 << 62), (as_of or {}).get(r.partition, 1 << 62))
        if r.offset >= stop:
            continue
        if r.txn is not None and fates.get((r.partition, *r.txn)) != "commit":
            continue
        out.append(r)
    return out


def latest(read: list[Written]) -> dict[tuple[int, bytes], Written]:
    """Per (partition, key), the last record read; keys whose last record is a tombstone left out."""
    last: dict[tuple[int, bytes], Written] = {}
    for r in read:
        if r.key is not None:
            last[r.partition, r.key] = r
    return {k: r for k, r in last.items() if r.value is not None}
