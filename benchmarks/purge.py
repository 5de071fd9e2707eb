"""Purge benchmark: removing 1,000 keys from a generated log directory on local Spark, next to a
full compaction of the same log directory, in one run.

    .venv/bin/python benchmarks/purge.py [--size-mb 1024] [--keys 1000] [--master local[2]] [--dir DIR] [--keep]

The log directory is `benchmarks/scan.py`'s (5 topics, codecs none/lz4/snappy/zstd/gzip, 2
partitions each, 50,000 keys with zipf popularity) with compacted topics and segments of about an
eighth of a partition, so that a forced compaction rewrites all but the active segments; it is
generated into a temporary folder or reused from `--dir`. The purge and the compaction each work
on their own fresh copy. The
purge time is the whole `purge()` call: decide (narrow scan joined with the keys), rewrite, ledger
(deltalake), swap, and the verifying rescan. The compaction is `compact(..., force=True)`. A
warm-up job starts the Python workers first.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import scan  # noqa: E402
from scan import log_dir_parser, prepare_log_dir, spark_job, temporary_dir  # noqa: E402

KEY_SPACE = 50_000  # scan.py's key cardinality: keys are key-000000 ... key-049999
NOW = 1_800_000_000_000  # after every generated timestamp
SECRET = b"benchmark-secret-not-for-real-use"


def spec_for(size_mb: int):
    """scan.py's topics, compacted, in segments of an eighth of a partition (1 MiB at least)."""
    import dataclasses

    spec = scan.spec_for(size_mb)
    segment = max(1 << 20, size_mb * 1_000_000 // (2 * len(spec.topics)) // 8)
    spec.topics = [dataclasses.replace(t, cleanup_policy="compact", segment_bytes=segment) for t in spec.topics]
    return spec


def purge_keys(count: int) -> list[bytes]:
    """`count` keys spread over the popularity ranks, the same in every run."""
    return [f"key-{rank:06d}".encode() for rank in sorted(random.Random(5).sample(range(KEY_SPACE), count))]


def fresh_copy(source: Path, work: Path, name: str) -> str:
    target = work / name
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    return str(target)


def main(argv=None) -> None:
    parser = log_dir_parser(__doc__, size_mb=1024)
    parser.add_argument("--keys", type=int, default=1000, help="how many keys to purge")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)

    with temporary_dir(args.keep) as work:
        log_dir = args.dir or work / "log"
        segments, nbytes = prepare_log_dir(log_dir, args.size_mb, module="purge")

        from kafkalog.config import resolver_from
        from kafkalog.operations.compact import REASONS, compact
        from kafkalog.operations.purge import purge
        from kafkalog.spark import local_session, narrow_scan
        from kafkalog.storage.logdir import parse_properties

        resolver = resolver_from(
            parse_properties(
                "".join(
                    f"topic.{t.name}.{k}={v}\n" for t in spec_for(args.size_mb).topics for k, v in t.config().items()
                )
            )
        )
        keys = purge_keys(args.keys)
        load_before = os.getloadavg()[0]
        spark = local_session("kafkalog-bench", args.master)
        warm = time.perf_counter()
        spark_job(narrow_scan(spark, str(log_dir), end_offset=1000, min_tasks=1, max_bytes_per_task=1))
        warm_seconds = time.perf_counter() - warm

        root = fresh_copy(log_dir, work, "purged")
        start = time.perf_counter()
        result = purge(spark, root, keys, ledger=str(work / "ledger"), secret=SECRET, config=resolver, now=NOW)
        purge_seconds = time.perf_counter() - start

        root = fresh_copy(log_dir, work, "compacted")
        start = time.perf_counter()
        compacted = compact(spark, root, resolver, NOW, force=True)
        compact_seconds = time.perf_counter() - start
        load_after = os.getloadavg()[0]
        cores = spark.sparkContext.defaultParallelism
        spark.stop()

    removed = result.total("removed") + result.total("tombstoned") + result.total("redacted")
    superseded = sum(row[reason] for row in compacted.report for reason in REASONS if reason != "kept")
    print(
        f"\n{nbytes / 1e6:.0f} MB of .log in {len(segments)} segments; Spark {args.master} ({cores} cores), "
        f"warm-up job {warm_seconds:.1f} s; python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
        f"{load_before:.1f} before and {load_after:.1f} after the runs\n"
    )
    print("| job | seconds | MB/s | records removed | segments rewritten |")
    print("| --- | ---: | ---: | ---: | ---: |")
    print(
        f"| purge {args.keys:,} keys (`purge`, verified, ledger) | {purge_seconds:.1f} | "
        f"{nbytes / purge_seconds / 1e6:.1f} | {removed:,} | {len(result.outputs)} |"
    )
    print(
        f"| full compaction (`compact`, force) | {compact_seconds:.1f} | {nbytes / compact_seconds / 1e6:.1f} | "
        f"{superseded:,} | {len(segments) - sum(1 for s in segments if s.is_active)} (cleanable) |"
    )
    print(
        f"\npurge / compaction: {purge_seconds / compact_seconds:.2f}x the time; the purge removed "
        f"{removed:,} records of {args.keys:,} keys and left {result.remaining} (verified)"
    )


if __name__ == "__main__":
    main()
