"""Codec benchmark: kafkalog's full decode and key scan against kafka-python's and aiokafka's
readers, on the same bytes, in one run (ratios matter, not absolute times).

    .venv/bin/python benchmarks/codec.py [--records N] [--markdown]
"""
from __future__ import annotations

import argparse
import random
import time

from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch
from aiokafka.record.default_records import DefaultRecordBatch as AiokafkaBatch
from aiokafka.record.default_records import _DefaultRecordBatchPy as AiokafkaPyBatch

from kafkalog.codec.batch import RecordBatch, build_batch
from kafkalog.codec.compression import Codec
from kafkalog.codec.records import Record
from kafkalog.codec.scan import KeyColumns, scan_keys

RECORDS_PER_BATCH = 200


def make_batches(n_records: int, codec: int, seed: int = 1) -> list[bytes]:
    """Realistic records: 16-byte keys over 10k distinct values, 100-300-byte JSON-ish values, a header."""
    rng = random.Random(seed)
    batches = []
    offset = 0
    while offset < n_records:
        records = []
        for _ in range(min(RECORDS_PER_BATCH, n_records - offset)):
            key = b"user-%011d" % rng.randrange(10_000)
            value = (b'{"id":%d,"event":"click","payload":"' % offset
                     + bytes(rng.choice(b"abcdefghij") for _ in range(rng.randrange(100, 300))) + b'"}')
            records.append(Record(offset, 1_700_000_000_000 + offset, key, value, (("source", b"web"),)))
            offset += 1
        batches.append(build_batch(records, codec=codec))
    return batches


def run_kafkalog_full(batches):
    n = 0
    for data in batches:
        n += len(RecordBatch(data).records())
    return n


def run_kafkalog_scan(batches):
    cols = KeyColumns()
    n = 0
    for data in batches:
        n += scan_keys(RecordBatch(data), cols)
        cols.clear()
    return n


def _run_peer(cls):
    def run(batches):
        n = 0
        for data in batches:
            for record in cls(data):
                record.key, record.value, record.headers  # what a consumer touches
                n += 1
        return n
    return run


READERS = {
    "kafkalog key scan": run_kafkalog_scan,
    "kafkalog full decode": run_kafkalog_full,
    "kafka-python full decode": _run_peer(KafkaPythonBatch),
    "aiokafka full decode (pure Python)": _run_peer(AiokafkaPyBatch),
    "aiokafka full decode (C extension)": _run_peer(AiokafkaBatch),
}


def measure(fn, batches, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn(batches)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    rows = []
    for codec in Codec:
        batches = make_batches(args.records, codec)
        size = sum(map(len, batches))
        times = {name: measure(fn, batches) for name, fn in READERS.items()}
        base = times["kafka-python full decode"]
        for name, t in times.items():
            rows.append((codec.name.lower(), name, args.records / t, size / t / 1e6, base / t))
    if args.markdown:
        print("| codec | reader | records/s | MB/s | × kafka-python |")
        print("| --- | --- | ---: | ---: | ---: |")
        for codec, name, rps, mbps, ratio in rows:
            print(f"| {codec} | {name} | {rps:,.0f} | {mbps:.1f} | {ratio:.2f} |")
    else:
        for codec, name, rps, mbps, ratio in rows:
            print(f"{codec:7} {name:38} {rps:12,.0f} rec/s {mbps:8.1f} MB/s {ratio:6.2f}x kafka-python")


if __name__ == "__main__":
    main()
