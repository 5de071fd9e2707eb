"""`kafkalog export` (the latest value per key into Delta, from a stopped broker's files) against what a
user does today: Spark's Kafka source reading the live broker, a window keeping the last value per key,
and the same Delta write; then an incremental export after 1% more records. One run, Spark local[2].

    .venv/bin/python benchmarks/export.py [--size-mib 1024] [--keys 1000000] [--partitions 4] [--small]

The topic is benchmarks/kafka_cleaner.py's: a compacted lz4 topic (a week of `min.compaction.lag.ms`,
so that the broker's cleaner leaves it alone) filled by benchmarks/BulkProducer.java with keyed updates
until `--size-mib` of record batches are written. One Spark session, with delta-spark and Spark's Kafka
source from Maven Central, times:

* kafkalog: `export(spark, LOG_DIR, topic, PATH, format="delta")` on the stopped broker's log dir (its
  plan, the producer-state replay, the scan, the window and the Delta write);
* Spark's Kafka source: `format("kafka")` with `kafka.isolation.level=read_committed` from earliest to
  latest offsets on the running broker, `row_number()` over (partition, key) by offset descending,
  tombstones dropped, and the same Delta write (`mode("overwrite")`);
* kafkalog incremental: `--incremental-percent` more records produced (a different seed), the broker
  stopped, `export(..., incremental=True)` on a table a first incremental export wrote, timed, after
  an untimed warm-up MERGE on a small table.

Both full tables must hold the same rows (partition, key, offset). Each timed job gets an untimed
warm-up of its reader first. Prints a Markdown report on stdout and a JSON object on stderr (and into
`--json FILE`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kafka_cleaner import (  # noqa: E402
    MIB,
    WEEK_MS,
    CpuSampler,
    fmt_load,
    java_version,
    kafka_version,
    loadavg,
    log_bytes,
    machine,
    produce,
    run_with_broker,
    segment_bytes_for,
)
from kafka_source import kafka_package  # noqa: E402


def timed(work, broker_pid: int | None = None) -> dict:
    load = loadavg()
    with CpuSampler(os.getpid(), broker_pid=broker_pid) as cpu:
        start = time.perf_counter()
        work()
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "cpu": cpu.by_kind(), "load": [load, loadavg()]}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="MiB of record batches to produce (default 1024)")
    parser.add_argument("--keys", type=int, default=1_000_000, help="distinct keys (default 1,000,000)")
    parser.add_argument("--small", action="store_true", help="a quick try: 50 MiB over 50,000 keys")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--compression", default="lz4")
    parser.add_argument("--incremental-percent", type=float, default=1.0, help="more records, in %% of the topic")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--dir", type=Path, help="working directory (default: a temporary one, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the working directory")
    parser.add_argument("--json", type=Path, help="also write the JSON result there")
    run_with_broker(parser.parse_args(argv), "kafkalog-export-", run, render)


def run(args, base: Path, tools, broker) -> dict:
    import pyspark
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from kafkalog.operations.export import export
    from kafkalog.spark import local_session

    topic = "updates"
    segment_bytes = segment_bytes_for(args.size_mib, args.partitions)
    configs = {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes), "min.compaction.lag.ms": str(WEEK_MS)}
    package = kafka_package()
    result: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": machine(),
        "java": java_version(tools),
        "kafka_version": kafka_version(tools),
        "pyspark": pyspark.__version__,
        "package": package,
        "partitions": args.partitions,
        "keys": args.keys,
        "master": args.master,
    }
    say = lambda text: print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)  # noqa: E731

    def fill(size_mib: int, seed: int) -> dict:
        broker.start()
        produced = produce(
            tools,
            broker,
            topic,
            partitions=args.partitions,
            size_mib=size_mib,
            keys=args.keys,
            configs=configs,
            compression=args.compression,
            seed=seed,
        )
        broker.stop()
        return produced

    result["produced"] = fill(args.size_mib, 1)
    result["log_bytes"], result["segments"] = log_bytes(broker.log_dir, topic)
    say(f"produced {result['produced']['records']:,} records, {result['log_bytes'] / MIB:,.0f} MiB of .log")
    log_dir = str(broker.log_dir)

    spark = local_session("kafkalog-bench-export", args.master, conf={"spark.jars.packages": package}, delta=True)
    ours, theirs, incremental = (str(base / name) for name in ("kafkalog.delta", "kafka-source.delta", "incr.delta"))
    try:

        def kafka_source_export(path: str, ending: str = "latest"):
            records = (
                spark.read.format("kafka")
                .option("kafka.bootstrap.servers", broker.bootstrap)
                .option("kafka.isolation.level", "read_committed")
                .option("subscribe", topic)
                .option("startingOffsets", "earliest")
                .option("endingOffsets", ending)
                .load()
            )
            last = Window.partitionBy("partition", "key").orderBy(F.col("offset").desc())
            table = records.withColumn("_n", F.row_number().over(last)).where("_n = 1 AND value IS NOT NULL").drop("_n")
            table.write.format("delta").mode("overwrite").save(path)

        warm = str(base / "warm.delta")
        timed(lambda: export(spark, log_dir, topic, warm, as_of_offset=1000))  # untimed warm-up
        shutil.rmtree(warm)
        result["kafkalog"] = timed(lambda: export(spark, log_dir, topic, ours))
        say(f"kafkalog export {result['kafkalog']['seconds']:.1f} s")

        broker.start()
        first = json.dumps({topic: {str(p): 1000 for p in range(args.partitions)}})
        timed(lambda: kafka_source_export(warm, first))
        shutil.rmtree(warm)
        result["kafka_source"] = timed(lambda: kafka_source_export(theirs), broker.process.pid)
        say(f"Kafka source + window + Delta {result['kafka_source']['seconds']:.1f} s")
        broker.stop()

        rows = {
            name: spark.read.format("delta").load(path).select("partition", "key", "offset")
            for name, path in (("kafkalog", ours), ("kafka_source", theirs))
        }
        result["rows"] = {name: df.count() for name, df in rows.items()}
        differ = (
            rows["kafkalog"].exceptAll(rows["kafka_source"]).count()
            + rows["kafka_source"].exceptAll(rows["kafkalog"]).count()
        )
        if differ:
            raise RuntimeError(f"the two tables differ in {differ} rows")

        # untimed warm-up of the MERGE, as of the full export above: its first run in a JVM loads and
        # compiles Delta's MERGE
        timed(lambda: export(spark, log_dir, topic, warm, as_of_offset=1000, incremental=True))
        timed(lambda: export(spark, log_dir, topic, warm, as_of_offset=2000, incremental=True))
        shutil.rmtree(warm)
        export(spark, log_dir, topic, incremental, incremental=True)
        result["full_incremental_first"] = True
        # BulkProducer counts whole MiB: at least one
        result["produced_more"] = fill(max(1, round(args.size_mib * args.incremental_percent / 100)), 2)
        result["incremental"] = timed(lambda: export(spark, log_dir, topic, incremental, incremental=True))
        say(f"incremental export after {args.incremental_percent}% more: {result['incremental']['seconds']:.1f} s")
        whole = str(base / "whole.delta")
        result["full_after"] = timed(lambda: export(spark, log_dir, topic, whole))
        a = spark.read.format("delta").load(incremental).select("partition", "key", "offset")
        b = spark.read.format("delta").load(whole).select("partition", "key", "offset")
        if a.exceptAll(b).count() or b.exceptAll(a).count():
            raise RuntimeError("the incremental table differs from a full export")
        result["incremental_rows"] = a.count()
    finally:
        spark.stop()
    return result


def _cpu(x: dict) -> str:
    return f"{x['cpu']['jvm']:.1f} + {x['cpu']['python']:.1f}"


def render(args, r: dict) -> list[str]:
    mb = r["log_bytes"] / 1e6
    base = r["kafka_source"]["seconds"]
    out = [
        f"{r['produced']['records']:,} records over {r['keys']:,} keys in {r['partitions']} partitions, "
        f"{r['log_bytes'] / MIB:,.0f} MiB of .log in {r['segments']} segments; "
        f"Kafka {r['kafka_version']}, {r['java']}; "
        f"pyspark {r['pyspark']}, {args.master}; {r['machine']}; {r['date']}",
        "",
        "| latest value per key into Delta | seconds | MB/s of .log | × Kafka source "
        "| CPU s: Spark JVM + Python + broker |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, label in (
        ("kafka_source", "Spark's Kafka source (read_committed) from the live broker, row_number window, Delta"),
        ("kafkalog", "`kafkalog export` on the stopped broker's files"),
    ):
        x = r[name]
        out.append(
            f"| {label} | {x['seconds']:.1f} | {mb / x['seconds']:.1f} | {base / x['seconds']:.2f}x | "
            f"{x['cpu']['jvm']:.1f} + {x['cpu']['python']:.1f} + {x['cpu']['broker']:.1f} |"
        )
    incr, full = r["incremental"]["seconds"], r["full_after"]["seconds"]
    out += [
        "",
        f"Both tables: {r['rows']['kafkalog']:,} rows, the same (partition, key, offset). Incremental export after "
        f"{100 * r['produced_more']['records'] / r['produced']['records']:.1f}% more records "
        f"({r['produced_more']['records']:,}): {incr:.1f} s, "
        f"{100 * incr / full:.0f}% of a full export of the same log ({full:.1f} s); the two tables the same "
        f"({r['incremental_rows']:,} rows). CPU seconds (Spark JVM + Python), less moved by the machine's load: "
        f"incremental {_cpu(r['incremental'])}, full {_cpu(r['full_after'])}, "
        f"{100 * sum(r['incremental']['cpu'].values()) / sum(r['full_after']['cpu'].values()):.0f}%.",
        "",
        "load average (1/5/15 min) before → after: "
        + "; ".join(
            f"{n} {fmt_load(*r[n]['load'])}" for n in ("kafkalog", "kafka_source", "incremental", "full_after")
        ),
    ]
    return out


if __name__ == "__main__":
    main()
