"""Codec benchmark: kafkalog's full decode and key scan against kafka-python's and aiokafka's
readers, on the same bytes, in one run (ratios matter, not absolute times).

    .venv/bin/python benchmarks/codec.py [--records N] [--markdown] [--repeat R] [--codec NAME ...]
                                         [--distinct-headers]
    .venv/bin/python benchmarks/codec.py --thresholds

Readers are timed in interleaved rounds (every reader once per round, best round kept), so a
noisy neighbour slows all of them alike and the ratios stay put. `--thresholds` times the scalar
and the vectorised record readers on batches of a few records, to place decode.DECODE_THRESHOLD
and scan.SCAN_THRESHOLD.
"""

from __future__ import annotations

import argparse
import random
import time
import timeit

from aiokafka.record.default_records import DefaultRecordBatch as AiokafkaBatch
from aiokafka.record.default_records import _DefaultRecordBatchPy as AiokafkaPyBatch
from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch

from kafkalog.codec.batch import RecordBatch, build_batch
from kafkalog.codec.compression import Codec
from kafkalog.codec.records import Record
from kafkalog.codec.scan import KeyColumns, scan_keys

RECORDS_PER_BATCH = 200


def make_batches(n_records: int, codec: int, seed: int = 1, distinct_headers: bool = False) -> list[bytes]:
    """Realistic records: 16-byte keys over 10k distinct values, 100-300-byte JSON-ish values, a header
    (the same in every record, or with `distinct_headers` a trace id of varying length per record)."""
    rng = random.Random(seed)
    batches = []
    offset = 0
    while offset < n_records:
        records = []
        for _ in range(min(RECORDS_PER_BATCH, n_records - offset)):
            key = b"user-%011d" % rng.randrange(10_000)
            value = (
                b'{"id":%d,"event":"click","payload":"' % offset
                + bytes(rng.choice(b"abcdefghij") for _ in range(rng.randrange(100, 300)))
                + b'"}'
            )
            if distinct_headers:
                header = ("trace", b"%x" % rng.getrandbits(rng.randrange(8, 64)))
            else:
                header = ("source", b"web")
            records.append(Record(offset, 1_700_000_000_000 + offset, key, value, (header,)))
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


def run_kafkalog_scan_arrow(batches):
    """The scan as the Spark layer uses it: every batch into one table, then a pyarrow RecordBatch."""
    cols = KeyColumns()
    for data in batches:
        scan_keys(RecordBatch(data), cols)
    return cols.to_arrow().num_rows


def _run_peer(cls):
    def run(batches):
        n = 0
        for data in batches:
            for record in cls(data):
                _ = record.key, record.value, record.headers  # what a consumer touches
                n += 1
        return n

    return run


READERS = {
    "kafkalog key scan": run_kafkalog_scan,
    "kafkalog key scan to Arrow": run_kafkalog_scan_arrow,
    "kafkalog full decode": run_kafkalog_full,
    "kafka-python full decode": _run_peer(KafkaPythonBatch),
    "aiokafka full decode (pure Python)": _run_peer(AiokafkaPyBatch),
    "aiokafka full decode (C extension)": _run_peer(AiokafkaBatch),
}


def measure(readers: dict, batches, repeat: int) -> dict:
    """Best time of each reader over `repeat` interleaved rounds, after one warm-up round."""
    best = {name: float("inf") for name in readers}
    for round_ in range(repeat + 1):
        for name, fn in readers.items():
            start = time.perf_counter()
            fn(batches)
            elapsed = time.perf_counter() - start
            if round_:
                best[name] = min(best[name], elapsed)
    return best


def thresholds(repeat: int) -> None:
    """Per batch size: the scalar and the vectorised readers, in microseconds per batch."""
    from kafkalog.codec import decode, scan
    from kafkalog.codec.records import decode_record
    from kafkalog.codec.scan import _scan_v2

    def best(fn, number=200):
        return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6

    shapes = {
        "16-byte keys, 100-200-byte values, one header": (100, True),
        "16-byte keys, 20-40-byte values, no header": (20, False),
        "16-byte keys, 1000-2000-byte values, no header": (1000, False),
    }
    rng = random.Random(1)
    print(
        f"DECODE_THRESHOLD {decode.DECODE_THRESHOLD} (records under 64 bytes: "
        f"{decode.DECODE_THRESHOLD_SMALL_RECORDS}), SCAN_THRESHOLD {scan.SCAN_THRESHOLD} "
        f"(records under 64 bytes: {scan.SCAN_THRESHOLD_SMALL_RECORDS})"
    )
    for title, (value_size, header) in shapes.items():
        print(f"{title}: microseconds per batch")
        print("  records   decode scalar  vectorised   scan scalar  vectorised")
        for n in (4, 8, 12, 16, 20, 24, 32, 48, 64):
            records = [
                Record(
                    i,
                    1_700_000_000_000 + i,
                    b"user-%011d" % rng.randrange(10_000),
                    bytes(rng.randrange(value_size, 2 * value_size)),
                    (("source", b"web"),) if header else (),
                )
                for i in range(n)
            ]
            batch = RecordBatch(build_batch(records))
            section, args = batch.records_section(), (batch.base_offset, batch.base_timestamp, None)

            # each timed function binds this iteration's section, n and args (B023)
            def scalar_decode(section=section, n=n, args=args):
                pos = 0
                for _ in range(n):
                    pos = decode_record(section, pos, *args)[1]

            times = [
                best(scalar_decode),
                best(lambda section=section, n=n, args=args: decode.decode_section(section, n, *args, force=True)),
                best(lambda section=section, n=n, args=args: _scan_v2(section, n, *args, ([], [], [], [], [], []))),
                best(lambda section=section, n=n, args=args: scan.scan_section(section, n, *args, force=True)),
            ]
            print(f"  {n:7}   {times[0]:13.1f}  {times[1]:10.1f}   {times[2]:11.1f}  {times[3]:10.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds per codec (best kept)")
    parser.add_argument(
        "--codec",
        action="append",
        choices=[c.name.lower() for c in Codec],
        help="only this codec (repeatable); default: every codec",
    )
    parser.add_argument(
        "--distinct-headers",
        action="store_true",
        help="a different header value in every record (default: the same header everywhere)",
    )
    parser.add_argument(
        "--thresholds", action="store_true", help="time scalar against vectorised readers on small batches instead"
    )
    args = parser.parse_args()
    if args.thresholds:
        thresholds(max(args.repeat, 9))
        return
    rows = []
    for codec in Codec:
        if args.codec and codec.name.lower() not in args.codec:
            continue
        batches = make_batches(args.records, codec, distinct_headers=args.distinct_headers)
        size = sum(map(len, batches))
        times = measure(READERS, batches, args.repeat)
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
