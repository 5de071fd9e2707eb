"""`spark.read.format("kafkalog")` on a stopped broker's files against Spark's own Kafka source
(spark-sql-kafka-0-10) reading the same topic from the live broker, both on Spark local[2], in one run.

    .venv/bin/python benchmarks/kafka_source.py [--size-mib 1024] [--keys 1000000] [--partitions 4] [--small]

A single-node KRaft Apache Kafka 4.3 broker (tests/kafka/broker.py) gets a topic of keyed lz4 records
from benchmarks/BulkProducer.java (as in benchmarks/kafka_cleaner.py, never cleaned: `cleanup.policy=delete`,
no retention) until `--size-mib` of record batches are written. One Spark session, with the Kafka source
fetched from Maven Central through `spark.jars.packages` (Ivy's cache in ~/.ivy2.5.2), runs the same
aggregate over every record of the topic, `count(*)`, `sum(length(key))`, `sum(length(value))`, so that
every key and value is read: kafkalog's data source on the broker's log dir while the broker is stopped,
Spark's Kafka source (`subscribe`, earliest to latest offsets) while it runs. Both get an untimed
warm-up job over their first 1,000 records a partition; then the two alternate for `--repeat` rounds
(the broker is started and stopped between them, untimed) and the fastest round of each counts. The two
must return the same numbers. CPU seconds are reported next to wall time: Spark's JVM, its Python
workers and, for the Kafka source, the broker serving the fetches. Load averages (1, 5, 15 minutes) are
taken before and after each timed job. Prints a Markdown report on stdout and a JSON object on stderr
(and into `--json FILE`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kafka_cleaner import (  # noqa: E402
    MIB,
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

AGGREGATE = ("count(*) AS records", "sum(length(key)) AS key_bytes", "sum(length(value)) AS value_bytes")
KAFKA_ARTIFACT = "spark-sql-kafka-0-10_2.13"
MAVEN = "https://repo1.maven.org/maven2/org/apache/spark"


def kafka_package() -> str:
    """Spark's Kafka source for the installed pyspark: its own version when Maven Central (or Ivy's cache)
    has it, else the first release of its line (x.y.0)."""
    import pyspark

    version = pyspark.__version__
    candidates = [version] + ([f"{'.'.join(version.split('.')[:2])}.0"] if not version.endswith(".0") else [])
    for v in candidates:
        cached = (
            Path.home()
            / ".ivy2.5.2"
            / "cache"
            / "org.apache.spark"
            / KAFKA_ARTIFACT
            / "jars"
            / f"{KAFKA_ARTIFACT}-{v}.jar"
        )
        if cached.exists():
            return f"org.apache.spark:{KAFKA_ARTIFACT}:{v}"
        try:
            request = urllib.request.Request(f"{MAVEN}/{KAFKA_ARTIFACT}/{v}/{KAFKA_ARTIFACT}-{v}.pom", method="HEAD")
            with urllib.request.urlopen(request, timeout=30) as response:
                if response.status == 200:
                    return f"org.apache.spark:{KAFKA_ARTIFACT}:{v}"
        except OSError:
            continue
    return f"org.apache.spark:{KAFKA_ARTIFACT}:{version}"


def timed(df, broker_pid: int | None = None) -> dict:
    """Run the aggregate over `df`: wall seconds, CPU seconds of this process tree by kind (Spark's JVM,
    its Python workers with this driver, and the broker when it runs), load before and after, the numbers."""
    load = loadavg()
    with CpuSampler(os.getpid(), broker_pid=broker_pid) as cpu:
        start = time.perf_counter()
        row = df.selectExpr(*AGGREGATE).collect()[0]
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "cpu": cpu.by_kind(), "load": [load, loadavg()], "result": row.asDict()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="MiB of record batches to produce (default 1024)")
    parser.add_argument("--keys", type=int, default=1_000_000, help="distinct keys (default 1,000,000)")
    parser.add_argument("--small", action="store_true", help="a quick try: 50 MiB over 50,000 keys")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--compression", default="lz4")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=2, help="rounds of each read; the fastest counts")
    parser.add_argument(
        "--package", help="Maven coordinates of Spark's Kafka source (default: for the installed pyspark)"
    )
    parser.add_argument("--dir", type=Path, help="working directory (default: a temporary one, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the working directory")
    parser.add_argument("--json", type=Path, help="also write the JSON result there")
    run_with_broker(parser.parse_args(argv), "kafkalog-kafka-source-", run, render)


def run(args, base: Path, tools, broker) -> dict:
    import pyspark

    from kafkalog.spark import local_session

    topic = "events"
    segment_bytes = segment_bytes_for(args.size_mib, args.partitions)
    configs = {
        "cleanup.policy": "delete",
        "retention.ms": "-1",
        "retention.bytes": "-1",
        "segment.bytes": str(segment_bytes),
    }
    package = args.package or kafka_package()
    result: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": machine(),
        "java": java_version(tools),
        "kafka_version": kafka_version(tools),
        "pyspark": pyspark.__version__,
        "package": package,
        "topic": topic,
        "partitions": args.partitions,
        "keys": args.keys,
        "compression": args.compression,
        "segment_bytes": segment_bytes,
        "master": args.master,
    }
    say = lambda text: print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)  # noqa: E731

    broker.start()
    load = loadavg()
    result["produced"] = produce(
        tools,
        broker,
        topic,
        partitions=args.partitions,
        size_mib=args.size_mib,
        keys=args.keys,
        configs=configs,
        compression=args.compression,
    )
    result["load_produce"] = [load, loadavg()]
    broker.stop()
    result["log_bytes"], result["segments"] = log_bytes(broker.log_dir, topic)
    say(
        f"produced {result['produced']['records']:,} records: {result['log_bytes'] / MIB:,.0f} MiB of .log "
        f"in {result['segments']} segments"
    )

    started = time.perf_counter()
    spark = local_session("kafkalog-bench", args.master, conf={"spark.jars.packages": package})
    spark.range(4).count()
    result["session_start_seconds"] = time.perf_counter() - started
    jars = spark.sparkContext.getConf().get("spark.jars", "")  # what Ivy resolved for the package
    clients = [j.rsplit("kafka-clients-", 1)[1][: -len(".jar")] for j in jars.split(",") if "kafka-clients-" in j]
    result["source_kafka_clients"] = clients[0] if clients else "?"
    try:

        def kafkalog_df(**options):
            reader = spark.read.format("kafkalog").option("topics", topic)
            for k, v in options.items():
                reader = reader.option(k, v)
            return reader.load(str(broker.log_dir))

        def kafka_df(ending: str = "latest"):
            return (
                spark.read.format("kafka")
                .option("kafka.bootstrap.servers", broker.bootstrap)
                .option("subscribe", topic)
                .option("startingOffsets", "earliest")
                .option("endingOffsets", ending)
                .load()
            )

        first = json.dumps({topic: {str(p): 1000 for p in range(args.partitions)}})
        runs: dict[str, list[dict]] = {"kafkalog": [], "kafka": []}
        warm = {}
        for i in range(args.repeat):
            # the broker is stopped: kafkalog reads its files
            if i == 0:
                warm["kafkalog"] = timed(kafkalog_df(endingOffset="1000"))["seconds"]
            time.sleep(2)
            runs["kafkalog"].append(timed(kafkalog_df()))
            say(f"round {i + 1}: kafkalog source {runs['kafkalog'][-1]['seconds']:.1f} s")
            broker.start()
            if i == 0:
                warm["kafka"] = timed(kafka_df(first), broker.process.pid)["seconds"]
            time.sleep(2)
            runs["kafka"].append(timed(kafka_df(), broker.process.pid))
            say(f"round {i + 1}: Kafka source {runs['kafka'][-1]['seconds']:.1f} s")
            broker.stop()
        result["warm_up_seconds"] = warm
        result["runs"] = runs
        result["tasks"] = {"kafkalog": kafkalog_df().rdd.getNumPartitions()}
    finally:
        spark.stop()
    answers = {name: [r["result"] for r in rs] for name, rs in runs.items()}
    result["same_result"] = all(a == answers["kafkalog"][0] for rs in answers.values() for a in rs)
    if not result["same_result"]:
        raise RuntimeError(f"the two sources disagree: {answers}")
    return result


def render(args, r: dict) -> list[str]:
    mb = r["log_bytes"] / 1e6
    best = {name: min(rs, key=lambda x: x["seconds"]) for name, rs in r["runs"].items()}
    baseline = best["kafka"]["seconds"]
    counted = r["runs"]["kafkalog"][0]["result"]
    labels = {
        "kafka": f'Spark\'s Kafka source (`format("kafka")`, {r["package"].rsplit(":", 1)[1]}, kafka-clients '
        f"{r['source_kafka_clients']}) from the live broker, {args.master}",
        "kafkalog": f"kafkalog's data source (`format(\"kafkalog\")`) on the stopped broker's files, {args.master}",
    }
    produced = r["produced"]
    out = [
        f"{produced['records']:,} records over {r['keys']:,} keys in {r['partitions']} partitions, "
        f"{r['compression']}, {r['log_bytes'] / MIB:,.0f} MiB ({mb:,.0f} MB) of .log in {r['segments']} segments "
        f"of {r['segment_bytes'] // MIB} MiB ({counted['key_bytes'] / 1e6:,.0f} MB of keys and "
        f"{counted['value_bytes'] / 1e6:,.0f} MB of values uncompressed); Kafka {r['kafka_version']} broker on "
        f"127.0.0.1, {r['java']}; pyspark {r['pyspark']}; {r['machine']}; {r['date']}",
        "",
        "| read (count, sum of key and value lengths) | seconds | M records/s | MB/s of .log | "
        "× Kafka source | CPU s: Spark JVM + Python (workers, driver) + broker |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in ("kafka", "kafkalog"):
        b = best[name]
        s, cpu = b["seconds"], b["cpu"]
        out.append(
            f"| {labels[name]} | {s:.1f} | {counted['records'] / s / 1e6:.3f} | {mb / s:.1f} | "
            f"{baseline / s:.2f}x | {cpu['jvm']:.1f} + {cpu['python']:.1f} + {cpu['broker']:.1f} |"
        )
    out += [
        "",
        "rounds (s): "
        + "; ".join(f"{name} " + ", ".join(f"{x['seconds']:.1f}" for x in rs) for name, rs in r["runs"].items())
        + f"; untimed warm-ups (s): kafkalog {r['warm_up_seconds']['kafkalog']:.1f}, Kafka source "
        f"{r['warm_up_seconds']['kafka']:.1f}; kafkalog tasks {r['tasks']['kafkalog']}, Kafka source tasks "
        f"{r['partitions']} (one per partition); session start with the package "
        f"{r['session_start_seconds']:.1f} s; both returned {counted['records']:,} records, "
        f"{counted['key_bytes']:,} key bytes and {counted['value_bytes']:,} value bytes",
        "",
        "load average (1/5/15 min) before → after: produce "
        + fmt_load(*r["load_produce"])
        + "; "
        + "; ".join(
            f"{name} round {i + 1} {fmt_load(*x['load'])}" for name, rs in r["runs"].items() for i, x in enumerate(rs)
        ),
    ]
    return out


if __name__ == "__main__":
    main()
