"""KIP-280 strategies benchmark: `compact` of the same generated log directory under each compaction
strategy (offset, timestamp, header), warm, on one local Spark session, in one run.

    .venv/bin/python benchmarks/compact_strategies.py [--size-mb 1024] [--repeat 2] [--dir DIR]

The directory is `benchmarks/compact.py`'s (four compacted topics, four codecs, half the records
superseded, tombstones, transactions) with one more header on every record, `version`, an 8-byte
big-endian version that mostly grows with the offset (some updates out of order). Each strategy
compacts fresh copies (`compact(force=True)`, the copy not timed) `--repeat` times after one warm-up
round of the offset strategy; the fastest round of each counts. The target (issue 38): `timestamp` and
`header` at most 1.3x the `offset` strategy's time.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from compact import _session, compact_copy  # noqa: E402
from compact import spec_for as compact_spec_for  # noqa: E402
from scan import log_dir_parser, prepare_log_dir, temporary_dir  # noqa: E402

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


def main(argv=None) -> None:
    import time

    parser = log_dir_parser(__doc__, size_mb=1024)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="2g", help="the JVM heap of local mode (spark.driver.memory)")
    parser.add_argument("--repeat", type=int, default=2, help="compaction rounds per strategy; the fastest counts")
    args = parser.parse_args(argv)
    with temporary_dir(args.keep) as work:
        base = args.dir or work
        source = base / "log"
        segments, nbytes = prepare_log_dir(source, args.size_mb, module="compact_strategies")
        load_before = os.getloadavg()[0]
        spark, session_seconds = _session(args.master, args.driver_memory)
        now = int(time.time() * 1000)
        resolvers = {
            name: resolver_from(settings=["cleanup.policy=compact", *settings]) for name, settings in STRATEGIES.items()
        }
        compact_copy(spark, source, base / "work", now, resolvers["offset"])  # warm-up, not counted
        rounds: dict[str, list] = {name: [] for name in STRATEGIES}
        for _ in range(args.repeat):  # interleaved: a drift in the machine's load touches every strategy
            for name, resolver in resolvers.items():
                rounds[name].append(compact_copy(spark, source, base / "work", now, resolver))
        spark.stop()
        load_after = os.getloadavg()[0]
    best = {name: min(r[0] for r in runs) for name, runs in rounds.items()}
    totals = {name: min(runs, key=lambda r: r[0])[1] for name, runs in rounds.items()}
    print(
        f"\n{nbytes / 1e6:.0f} MB of .log in {len(segments)} segments, 4 codecs; Spark {args.master}, session start "
        f"{session_seconds:.1f} s (not counted); python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"load average {load_before:.1f} before and {load_after:.1f} after\n"
    )
    print("| strategy | seconds (best) | vs offset | superseded | invalid headers | rounds (s) |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for name, runs in rounds.items():
        print(
            f"| {name} | {best[name]:.1f} | {best[name] / best['offset']:.2f}x | "
            f"{totals[name].get('superseded', 0):,} | {totals[name].get('invalid_headers', 0):,} | "
            f"{', '.join(f'{r[0]:.1f}' for r in runs)} |"
        )


if __name__ == "__main__":
    main()
