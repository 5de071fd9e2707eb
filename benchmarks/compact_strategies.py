"""KIP-280 strategies benchmark: `compact` of the same generated log directory under each compaction
strategy (offset, timestamp, header), warm, on one local Spark session, in one run.

    .venv/bin/python benchmarks/compact_strategies.py [--size-mb 1024] [--repeat 2] [--dir DIR]

The directory is `benchmarks/compact.py`'s (four compacted topics, four codecs, half the records
superseded, tombstones, transactions) with one more header on every record, `version`, an 8-byte
big-endian version that mostly grows with the offset (some updates out of order). Each strategy
compacts fresh copies (`compact(force=True)`, the copy not timed) `--repeat` times after one warm-up
round of the offset strategy; the fastest round of each counts, by wall time and by CPU time (the
driver's, the JVM's and the Python workers': on a shared machine the wall time also measures the
other processes). The target (issue 38): `timestamp` and
`header` at most 1.3x the `offset` strategy's time.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from compact import _session  # noqa: E402
from compact import spec_for as compact_spec_for  # noqa: E402
from scan import log_dir_parser, prepare_log_dir, spark_cpu, temporary_dir  # noqa: E402

from kafkalog.config import resolver_from  # noqa: E402

STRATEGIES = {
    "offset": [],
    "timestamp": ["compaction.strategy=timestamp"],
    "header": ["compaction.strategy=header", "compaction.strategy.header=version"],
}


def spec_for(size_mb: int):
    """`compact.py`'s directory, every record with a `version` header."""
    spec = compact_spec_for(size_mb)
    return dataclasses.replace(spec, topics=[dataclasses.replace(t, version_header="version") for t in spec.topics])


def compact_round(spark, source: Path, work: Path, now: int, resolver) -> tuple[float, float, dict]:
    """Compact a fresh copy of `source` (the copy not timed): wall seconds, CPU seconds (the driver's,
    the JVM's and the Python workers'), and the report's totals."""
    from kafkalog.operations.compact import compact

    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(source, work)
    jvm, workers = spark_cpu()
    driver, start = time.process_time(), time.perf_counter()
    result = compact(spark, str(work), resolver, now, force=True)
    seconds = time.perf_counter() - start
    jvm_after, workers_after = spark_cpu()
    cpu = time.process_time() - driver + jvm_after - jvm + workers_after - workers
    totals: dict = {}
    for row in result.report:
        for k, v in row.items():
            if isinstance(v, int) and k != "partition":
                totals[k] = totals.get(k, 0) + v
    return seconds, cpu, totals


def main(argv=None) -> None:
    parser = log_dir_parser(__doc__, size_mb=1024)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="2g", help="the JVM heap of local mode (spark.driver.memory)")
    parser.add_argument("--repeat", type=int, default=2, help="compaction rounds per strategy; the fastest counts")
    parser.add_argument(
        "--scan", action="store_true", help="instead: the codec's key scan alone, without and with the header read"
    )
    args = parser.parse_args(argv)
    with temporary_dir(args.keep) as work:
        base = args.dir or work
        source = base / "log"
        segments, nbytes = prepare_log_dir(source, args.size_mb, module="compact_strategies")
        if args.scan:
            key_scan(source, nbytes, args.repeat)
            return
        load_before = os.getloadavg()[0]
        spark, session_seconds = _session(args.master, args.driver_memory)
        now = int(time.time() * 1000)
        resolvers = {
            name: resolver_from(settings=["cleanup.policy=compact", *settings]) for name, settings in STRATEGIES.items()
        }
        compact_round(spark, source, base / "work", now, resolvers["offset"])  # warm-up, not counted
        rounds: dict[str, list] = {name: [] for name in STRATEGIES}
        for _ in range(args.repeat):  # interleaved: a drift in the machine's load touches every strategy
            for name, resolver in resolvers.items():
                rounds[name].append(compact_round(spark, source, base / "work", now, resolver))
        spark.stop()
        load_after = os.getloadavg()[0]
    best = {name: min(r[0] for r in runs) for name, runs in rounds.items()}
    cpu = {name: min(r[1] for r in runs) for name, runs in rounds.items()}
    totals = {name: min(runs, key=lambda r: r[0])[2] for name, runs in rounds.items()}
    print(
        f"\n{nbytes / 1e6:.0f} MB of .log in {len(segments)} segments, 4 codecs; Spark {args.master}, session start "
        f"{session_seconds:.1f} s (not counted); python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"load average {load_before:.1f} before and {load_after:.1f} after\n"
    )
    print(
        "| strategy | seconds (best) | vs offset | CPU seconds (best) | vs offset | superseded | invalid headers "
        "| rounds (s) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for name, runs in rounds.items():
        print(
            f"| {name} | {best[name]:.1f} | {best[name] / best['offset']:.2f}x | {cpu[name]:.1f} | "
            f"{cpu[name] / cpu['offset']:.2f}x | {totals[name].get('superseded', 0):,} | "
            f"{totals[name].get('invalid_headers', 0):,} | {', '.join(f'{r[0]:.1f}' for r in runs)} |"
        )


def key_scan(source: Path, nbytes: int, repeat: int) -> None:
    """The codec's key scan (one process, one core) over the directory, without and with the
    `version` header read, in interleaved rounds; the least CPU time of each counts (CPU time, not
    wall time: on a shared machine the wall time mostly measures the other processes)."""
    import time

    from scan import codec_key_scan

    rounds: dict[str, list[float]] = {"keys (offset, timestamp)": [], "keys and the version header": []}
    records = 0
    for _ in range(repeat):
        for name, header in zip(rounds, (None, b"version")):
            cpu = time.process_time()
            records, _ = codec_key_scan(source, header)
            rounds[name].append(time.process_time() - cpu)
    base = min(next(iter(rounds.values())))
    print(f"\n{records:,} records, {nbytes / 1e6:.0f} MB of .log; load average {os.getloadavg()[0]:.1f}\n")
    print("| key scan | CPU seconds (best) | M records/s | vs keys only | rounds (CPU s) |")
    print("| --- | ---: | ---: | ---: | --- |")
    for name, runs in rounds.items():
        best = min(runs)
        print(
            f"| {name} | {best:.2f} | {records / best / 1e6:.2f} | {best / base:.2f}x | "
            f"{', '.join(f'{r:.2f}' for r in runs)} |"
        )


if __name__ == "__main__":
    main()
