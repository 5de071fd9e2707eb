"""The same queries through `format("kafkalog")` with and without pruning: Spark's Kafka source options
(timestamps resolved through the time index, per-partition offsets), which open only the segments they
need, against the same selection written as a filter over the whole log dir, which Spark applies after
every record is decoded (filter pushdown is off where Spark shares pushed state, 4.1 to 4.3).

    .venv/bin/python benchmarks/kafka_source_pruning.py [--size-mb 256] [--master local[2]] [--dir DIR]

The log dir is scan.py's (5 topics, 2 partitions each, 64 MiB segments), generated unless `--dir` holds
it. Each query runs `--repeat` times each way (alternating) and the fastest run counts; both ways must
return the same count and value bytes. Column pruning is not measured: Spark's Python data source API
passes no query's columns, so every read decodes whole records. Prints a Markdown table on stdout.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scan import log_dir_parser, prepare_log_dir, temporary_dir  # noqa: E402

AGGREGATE = ("count(*) AS records", "sum(length(value)) AS value_bytes")


def queries(segments, root: str) -> dict:
    """name: (options of the pruned read, SQL filter of the unpruned read) selecting the same records."""
    latest = max(s.largest_timestamp() for s in segments)
    earliest = min(s.first_batch_timestamp() for s in segments)
    recent = earliest + (latest - earliest) * 9 // 10  # the last tenth of the time span
    topic = segments[0].topic
    ends = {p: max((s.last_offset() or 0) for s in segments if (s.topic, s.partition) == (topic, p)) for p in (0, 1)}
    middle = {p: (end // 2, end // 2 + 20_000) for p, end in ends.items()}
    offsets = {
        "subscribe": topic,
        "startingOffsets": json.dumps({topic: {str(p): lo for p, (lo, _) in middle.items()}}),
        "endingOffsets": json.dumps({topic: {str(p): hi for p, (_, hi) in middle.items()}}),
    }
    in_middle = " OR ".join(f"(partition = {p} AND offset >= {lo} AND offset < {hi})" for p, (lo, hi) in middle.items())
    return {
        "the last tenth of the time span (startingTimestamp)": (
            {"startingTimestamp": str(recent)},
            f"timestamp >= timestamp_millis({recent})",
        ),
        f"20,000 offsets in the middle of each partition of {topic} (startingOffsets/endingOffsets JSON)": (
            offsets,
            f"topic = '{topic}' AND ({in_middle})",
        ),
    }


def timed(df) -> tuple[float, tuple]:
    start = time.perf_counter()
    row = df.selectExpr(*AGGREGATE).collect()[0]
    return time.perf_counter() - start, tuple(row)


def main(argv=None) -> None:
    parser = log_dir_parser(__doc__, size_mb=256)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    from kafkalog.spark.session import local_session

    with temporary_dir(args.keep) as work:
        root = args.dir or work / "log"
        segments, nbytes = prepare_log_dir(Path(root), args.size_mb)
        spark = local_session("kafkalog-pruning-bench", args.master, conf={"spark.ui.enabled": "false"})
        spark.read.format("kafkalog").option("endingOffset", 1000).load(str(root)).count()  # warm-up
        lines = [
            f"{len(segments)} segments, {nbytes / 1e6:,.0f} MB of .log; {args.master}; best of {args.repeat}",
            "",
            "| query | pruned: s | tasks | whole log dir + filter: s | tasks | speed-up | records |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for name, (options, condition) in queries(segments, str(root)).items():
            reader = spark.read.format("kafkalog")
            for key, value in options.items():
                reader = reader.option(key, value)
            pruned = reader.load(str(root))
            whole = spark.read.format("kafkalog").load(str(root)).filter(condition)
            best: dict[str, float] = {}
            answers = {}
            for _ in range(args.repeat):
                for way, df in (("pruned", pruned), ("whole", whole)):
                    seconds, answers[way] = timed(df)
                    best[way] = min(best.get(way, seconds), seconds)
            if answers["pruned"] != answers["whole"]:
                raise RuntimeError(f"{name}: the two reads disagree: {answers}")
            tasks = {way: df.rdd.getNumPartitions() for way, df in (("pruned", pruned), ("whole", whole))}
            lines.append(
                f"| {name} | {best['pruned']:.1f} | {tasks['pruned']} | {best['whole']:.1f} | {tasks['whole']} | "
                f"{best['whole'] / best['pruned']:.1f}x | {answers['pruned'][0]:,} |"
            )
            print(lines[-1], file=sys.stderr)
        spark.stop()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
