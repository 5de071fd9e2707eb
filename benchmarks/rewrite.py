"""Rewrite benchmark: one output segment per codec written by `rewrite_segments` with about half of
every batch's records removed, spliced (the retained records' bytes reused) against decoded and
re-encoded (the path every batch took before), in one run, on one core, from the same plans.

    .venv/bin/python benchmarks/rewrite.py [--size-mb 128] [--dir DIR]

The log is the compaction benchmark's (benchmarks/compact.py: four codecs, idempotent producers,
transactions in the zstd topic); the first segment of partition 0 of each topic is rewritten. Every
plan also asks for a delete horizon, so every retained record's timestamp delta changes, as on a
first compaction of batches with tombstones. The two outputs must be byte for byte the same.
"""

from __future__ import annotations

import random
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scan import ensure_log_dir, log_dir_parser, temporary_dir  # noqa: E402

from kafkalog.codec import filter as filter_module  # noqa: E402
from kafkalog.codec.filter import BatchRetention  # noqa: E402
from kafkalog.storage.fs import LogFileSystem  # noqa: E402
from kafkalog.storage.partition import Partition  # noqa: E402
from kafkalog.storage.rewrite import BatchPlan, rewrite_segments  # noqa: E402

HORIZON = 10**13
PATHS = {"spliced": filter_module.SPLICE_THRESHOLD, "decoded and re-encoded": 2**62}


def half_removed(segment, seed: int) -> dict:
    """A plan for every data batch: each record goes with probability 1/2, the batch gets a horizon."""
    rng = random.Random(seed)
    plans = {}
    for position, batch in segment.batches():
        if not batch.is_control:
            removed = frozenset(o for o in range(batch.base_offset, batch.last_offset + 1) if rng.random() < 0.5)
            plans[(segment.base_offset, position)] = BatchPlan(BatchRetention.DELETE_EMPTY, removed, has_tombstone=True)
    return plans


def rewrite(fs, segment, plans, out: Path) -> tuple[float, bytes]:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    start = time.perf_counter()
    written, _ = rewrite_segments(fs, str(out), [segment], plans, delete_horizon_ms=HORIZON, index_interval_bytes=4096)
    seconds = time.perf_counter() - start
    return seconds, (out / Path(written.log_path).name).read_bytes()


def main(argv=None) -> None:
    args = log_dir_parser(__doc__, size_mb=128).parse_args(argv)
    with temporary_dir(args.keep) as work:
        base = args.dir or work  # the log in its `log`, the outputs in its `out`
        source = base / "log"
        ensure_log_dir(source, args.size_mb, module="compact")
        print("| topic | MB | records | spliced s | decoded and re-encoded s | speed-up |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for topic_dir in sorted(p for p in source.iterdir() if p.name.endswith("-0")):
            fs = LogFileSystem.for_path(str(topic_dir))[0]
            segment = Partition.open(fs, str(topic_dir)).segments[0]
            plans = half_removed(segment, seed=1)
            records = sum(b.records_count for _, b in segment.batches())
            runs = {}
            for name, threshold in PATHS.items():
                filter_module.SPLICE_THRESHOLD = threshold
                runs[name] = min((rewrite(fs, segment, plans, base / "out") for _ in range(2)), key=lambda r: r[0])
            spliced, reencoded = runs["spliced"], runs["decoded and re-encoded"]
            if spliced[1] != reencoded[1]:
                raise SystemExit(f"{topic_dir.name}: the spliced segment differs from the re-encoded one")
            print(
                f"| {topic_dir.name[:-2]} | {segment.size / 1e6:.1f} | {records:,} | {spliced[0]:.2f} | "
                f"{reencoded[0]:.2f} | {reencoded[0] / spliced[0]:.2f}x |"
            )
        print("\nbest of 2 runs each; the two outputs are identical, byte for byte")


if __name__ == "__main__":
    main()
