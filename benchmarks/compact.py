"""Compaction benchmark: `compact` end to end on local Spark over a generated log directory, next to
the time kafka-python needs merely to decode the same segment bytes on one core, in one run.

    .venv/bin/python benchmarks/compact.py [--size-mb 1024] [--keys-case 0] [--master local[2]] [--dir DIR]

The directory holds compacted topics in four codecs (two partitions each, about eight segments a
partition) (lz4, zstd, snappy, gzip), about half of whose records are superseded by a later record of
their key, with tombstones, idempotent producers and,
in one topic, transactions of which a third abort. Each round compacts a fresh copy (the copy is
not timed) with `force=True`, so every segment below the active one is cleaned. Peak resident
memory is sampled every 50 ms: the Python driver, the JVM, and the sum of the Python workers.

`--many-partitions N` instead times the shape of a real broker's log directory: one compacted lz4
topic of N partitions of 400 records each in 8 KiB segments, `kafkalog compact --force --output`
as a user runs it (the whole command, Spark's start included), next to kafka-python's decode and
`kafkalog validate` of the same directory: the cost must follow the bytes, not the partitions.

`--keys-case N` (N > 0) instead compacts three logs of the same size whose records all have distinct
keys, N/10, N/2 and N of them, to show that memory does not grow with the number of keys: the latest
offset per key is a window over a sort that spills, not a map held in memory.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scan import log_dir_parser, prepare_log_dir, temporary_dir  # noqa: E402

from kafkalog.config import resolver_from  # noqa: E402
from kafkalog.scan.inventory import list_segments  # noqa: E402
from kafkalog.spark.compaction import REASONS  # noqa: E402

CODECS = ("lz4", "zstd", "snappy", "gzip")
BYTES_PER_RECORD = 130  # on-disk bytes per record of the spec below, averaged over the codecs
# Uniform keys drawn n times from n/1.594 values leave half the records superseded: (1 - e^-x)/x = 0.5.
SUPERSEDED_HALF = 1.594
RESOLVER = resolver_from(settings=["cleanup.policy=compact"])


def spec_for(size_mb: int):
    """Four compacted topics of two partitions; `payments-*` also has transactional producers."""
    from kafkalog.operations.generate import GeneratorSpec, TopicSpec

    records = max(1000, size_mb * 1_000_000 // BYTES_PER_RECORD // (2 * len(CODECS)))  # per partition
    keys = int(records / SUPERSEDED_HALF)
    segment_bytes = max(1 << 20, records * BYTES_PER_RECORD // 8)  # ~8 segments a partition, 7 cleanable
    return GeneratorSpec(
        seed=13,
        consumer_offsets=None,
        topics=[
            TopicSpec(
                f"{'payments' if codec == 'zstd' else 'state'}-{codec}",
                partitions=2,
                records=records,
                keys=keys,
                key_skew=0.0,
                value_bytes=(200, 800),
                tombstone_ratio=0.02,
                headers=1,
                codec=codec,
                batch_records=(20, 200),
                cleanup_policy="compact",
                segment_bytes=segment_bytes,
                idempotent_producers=1,
                **({"transactional_producers": 2, "abort_ratio": 0.33} if codec == "zstd" else {}),
            )
            for codec in CODECS
        ],
    )


def keys_spec_for(size_mb: int, keys: int):
    """One topic whose records all have distinct keys (`keys` of them, small values to fill `size_mb`)."""
    from kafkalog.operations.generate import GeneratorSpec, TopicSpec

    value = max(1, size_mb * 1_000_000 // keys - 40)
    return GeneratorSpec(
        seed=17,
        consumer_offsets=None,
        topics=[
            TopicSpec(
                "distinct",
                partitions=2,
                records=keys // 2,
                keys=keys // 2,
                cyclic_keys=True,
                value_bytes=(value, value),
                codec="lz4",
                batch_records=(200, 500),
                cleanup_policy="compact",
                segment_bytes=64 * 1024 * 1024,
            )
        ],
    )


class PeakMemory:
    """Samples the resident memory of this process (the driver), its JVM child, and the Python
    workers below the JVM; keeps the peaks."""

    def __init__(self, interval: float = 0.05):
        self.interval = interval
        self.peak = {"driver": 0, "jvm": 0, "workers": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            sample = {"driver": 0, "jvm": 0, "workers": 0}
            try:
                sample["driver"] = me.memory_info().rss
                for child in me.children(recursive=True):
                    name = child.name()
                    if name == "java":
                        sample["jvm"] += child.memory_info().rss
                    elif name.startswith("python"):
                        sample["workers"] += child.memory_info().rss
            except psutil.Error:  # a worker exited while sampled
                pass
            for k, v in sample.items():
                self.peak[k] = max(self.peak[k], v)
            self._stop.wait(self.interval)


def kafka_python_decode(log_dir: Path) -> tuple[int, float]:
    """kafka-python's MemoryRecords over every segment: every record's key, value and headers."""
    from kafka.record.memory_records import MemoryRecords

    records = 0
    start = time.perf_counter()
    for segment in list_segments(str(log_dir)):
        batches = MemoryRecords(Path(segment.log_path).read_bytes())
        while (batch := batches.next_batch()) is not None:
            for record in batch:
                _ = record.key, record.value, record.headers
                records += 1
    return records, time.perf_counter() - start


def compact_copy(spark, source: Path, work: Path, now: int, resolver=RESOLVER) -> tuple[float, dict, dict]:
    """Compact a fresh copy of `source`; returns seconds, the report totals and peak memory."""
    from kafkalog.operations.compact import compact

    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(source, work)
    with PeakMemory() as memory:
        start = time.perf_counter()
        result = compact(spark, str(work), resolver, now, force=True)
        seconds = time.perf_counter() - start
    totals: dict = {}
    for row in result.report:
        for k, v in row.items():
            if isinstance(v, int) and k != "partition":
                totals[k] = totals.get(k, 0) + v
    return seconds, totals, memory.peak


def many_spec(partitions: int):
    """One compacted lz4 topic of many small partitions, as a broker's log dir mostly holds."""
    from kafkalog.operations.generate import GeneratorSpec, TopicSpec

    return GeneratorSpec(
        seed=1,
        topics=[
            TopicSpec(
                "events",
                partitions=partitions,
                records=400,
                keys=100,
                value_bytes=(20, 80),
                codec="lz4",
                cleanup_policy="compact",
                segment_bytes=8192,
            )
        ],
    )


def many_partitions(args, base: Path) -> None:
    import subprocess

    from kafkalog.operations.generate import generate

    source = base / f"many-{args.many_partitions}"
    if not source.exists():
        generate(str(source), many_spec(args.many_partitions))
    segments = list_segments(str(source))
    nbytes = sum(s.size for s in segments)
    records, decode_seconds = kafka_python_decode(source)
    cli = [str(Path(sys.executable).parent / "kafkalog")]

    def timed(command: list[str]) -> float:
        start = time.perf_counter()
        subprocess.run(cli + command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - start

    validate_seconds = timed(["validate", str(source), "--config", "cleanup.policy=compact", "--fail-on", "error"])
    rounds = []
    for _ in range(args.repeat):
        shutil.rmtree(base / "out", ignore_errors=True)
        rounds.append(
            timed(
                [
                    "compact",
                    str(source),
                    "--config",
                    "cleanup.policy=compact",
                    "--force",
                    "--output",
                    str(base / "out"),
                    "--master",
                    args.master,
                ]
            )
        )
    partitions = len({(s.topic, s.partition) for s in segments})
    print(
        f"\n{records:,} records, {nbytes / 1e6:.1f} MB of .log in {len(segments)} segments of {partitions} "
        f"partitions; python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}\n"
    )
    print("| run | seconds | vs kafka-python decode |")
    print("| --- | ---: | ---: |")
    for name, seconds in (
        ("kafka-python: decode every record (1 core)", decode_seconds),
        ("`kafkalog validate` (one process, every record)", validate_seconds),
        (f"`kafkalog compact --force --output` ({args.master}, whole command with Spark's start)", min(rounds)),
    ):
        print(f"| {name} | {seconds:.1f} | {decode_seconds / seconds:.2f}x |")
    print(f"\ncompaction rounds (s): {', '.join(f'{r:.1f}' for r in rounds)}")


def main(argv=None) -> None:
    parser = log_dir_parser(__doc__, size_mb=1024)
    parser.add_argument(
        "--many-partitions",
        type=int,
        default=0,
        metavar="N",
        help="instead: a log dir of N small partitions, compacted by the CLI",
    )
    parser.add_argument(
        "--keys-case",
        type=int,
        default=0,
        metavar="N",
        help="instead: distinct-key logs of N/10, N/2 and N keys, memory compared",
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="2g", help="the JVM heap of local mode (spark.driver.memory)")
    parser.add_argument("--repeat", type=int, default=1, help="compaction rounds; the fastest counts")
    args = parser.parse_args(argv)
    with temporary_dir(args.keep) as work:
        base = args.dir or work  # the generated logs in it, and each round's copy
        if args.many_partitions:
            many_partitions(args, base)
        elif args.keys_case:
            keys_case(args, base)
        else:
            end_to_end(args, base)


def _session(master, driver_memory: str):
    from kafkalog.spark import local_session

    started = time.perf_counter()
    spark = local_session("kafkalog-bench", master, conf={"spark.driver.memory": driver_memory})
    spark.range(4).count()  # start the JVM and the executors before anything is timed
    return spark, time.perf_counter() - started


def _mb(n: int) -> str:
    return f"{n / 2**20:,.0f}"


def end_to_end(args, base: Path) -> None:
    source = base / "log"
    segments, nbytes = prepare_log_dir(source, args.size_mb, module="compact")
    load_before = os.getloadavg()[0]
    records, decode_seconds = kafka_python_decode(source)
    spark, session_seconds = _session(args.master, args.driver_memory)
    now = int(time.time() * 1000)
    runs = [compact_copy(spark, source, base / "work", now) for _ in range(args.repeat)]
    seconds, totals, peak = min(runs, key=lambda r: r[0])
    spark.stop()
    load_after = os.getloadavg()[0]
    removed = sum(totals.get(reason, 0) for reason in REASONS if reason != "kept")
    print(
        f"\n{records:,} records, {nbytes / 1e6:.0f} MB of .log in {len(segments)} segments, 4 codecs; "
        f"{removed / records:.0%} of the records removed ({totals.get('superseded', 0):,} superseded, "
        f"{totals.get('aborted_transaction', 0):,} aborted); Spark {args.master}, session start "
        f"{session_seconds:.1f} s (not counted); python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"load average {load_before:.1f} before and {load_after:.1f} after\n"
    )
    print("| run | seconds | M records/s | MB/s | vs kafka-python decode |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, s in (
        ("kafka-python: decode every record (1 core)", decode_seconds),
        (f"kafkalog: compact end to end (`compact`, {args.master})", seconds),
    ):
        print(f"| {name} | {s:.1f} | {records / s / 1e6:.3f} | {nbytes / s / 1e6:.1f} | {decode_seconds / s:.2f}x |")
    print(
        f"\npeak resident memory during compaction (MiB): Python driver {_mb(peak['driver'])}, "
        f"JVM {_mb(peak['jvm'])}, Python workers (sum) {_mb(peak['workers'])}; "
        f"compaction rounds (s): {', '.join(f'{r[0]:.1f}' for r in runs)}"
    )


def keys_case(args, base: Path) -> None:
    from kafkalog.operations.generate import generate

    spark, _ = _session(args.master, args.driver_memory)
    rows = []
    for keys in (args.keys_case // 10, args.keys_case // 2, args.keys_case):
        source = base / f"keys-{keys}"
        if not source.exists():
            generate(str(source), keys_spec_for(args.size_mb, keys))
        segments = list_segments(str(source))
        now = int(time.time() * 1000)
        seconds, totals, peak = compact_copy(spark, source, base / "work", now)
        rows.append((keys, sum(s.size for s in segments), seconds, peak))
        shutil.rmtree(base / "work", ignore_errors=True)
    spark.stop()
    print(
        f"\nSpark {args.master}, {args.driver_memory} heap; every record has a distinct key, so nothing is "
        "superseded and every key is in the window\n"
    )
    print_memory_table(rows)


def print_memory_table(rows) -> None:
    """(distinct keys, bytes of .log, seconds, peak memory by process) per run, as a Markdown table."""
    print("| distinct keys | MB of .log | seconds | peak driver MiB | peak JVM MiB | peak workers MiB |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for keys, nbytes, seconds, peak in rows:
        print(
            f"| {keys:,} | {nbytes / 1e6:.0f} | {seconds:.1f} | {_mb(peak['driver'])} | {_mb(peak['jvm'])} | "
            f"{_mb(peak['workers'])} |"
        )


if __name__ == "__main__":
    main()
