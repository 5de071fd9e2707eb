"""`kafkalog repartition` against what users do today: a Java consume-and-produce copy through the same
broker. One run, one machine, Spark local[2].

    .venv/bin/python benchmarks/repartition.py [--size-mib 1024] [--keys 1000000] [--partitions 4]
        [--to-partitions 12] [--small]

A single-node KRaft broker (tests/kafka/broker.py) gets a keyed lz4 topic of `--partitions` partitions
filled by benchmarks/BulkProducer.java until `--size-mib` of record batches are written, and two empty
targets of `--to-partitions` partitions. Timed:

* the Java copy: benchmarks/BulkCopy.java, a read_committed consumer handing every record to a producer
  (acks=all, the same compression, Kafka's default partitioner) into the first target, to its flush;
* kafkalog: the broker stopped, `python -m kafkalog repartition LOG --topic T --partitions N --to-topic
  T2 --output LOG --topic-config T2:compression.type=lz4`, the whole command as a user runs it (Spark's
  start included), into the second target in the broker's own log dir.

Each timed step starts after a `sync`, so that neither pays the write-back of what the steps before it wrote
(the source, the copy): the Java copy ends when its producer's last send is acknowledged (the broker does not
fsync), kafkalog when its output is fsynced. The broker is then started again: it must skip recovery, and
the second target's end offsets must add up to the records the copy moved. Prints a Markdown report on
stdout and a JSON object on stderr (and into `--json FILE`), with the peak resident memory of kafkalog's
Python workers as its tasks report it (stage 1, placing, and stage 2, merging and writing; a worker runs
several tasks, so this bounds each):
run it at two `--keys` to see that memory does not grow with the keys; and the wall time of kafkalog's
steps from its report (Spark's session start, placing, writing, committing).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kafka_cleaner import (  # noqa: E402
    MIB,
    REPO,
    java_version,
    kafka_version,
    loadavg,
    log_bytes,
    machine,
    produce,
    run_with_broker,
)

HERE = Path(__file__).resolve().parent


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="MiB of record batches to produce (default 1024)")
    parser.add_argument("--keys", type=int, default=1_000_000, help="distinct keys (default 1,000,000)")
    parser.add_argument("--small", action="store_true", help="a quick try: 50 MiB over 50,000 keys")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--to-partitions", type=int, default=12)
    parser.add_argument("--compression", default="lz4")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--dir", type=Path, help="working directory (default: a temporary one, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the working directory")
    parser.add_argument("--json", type=Path, help="also write the JSON result there")
    run_with_broker(parser.parse_args(argv), "kafkalog-repartition-", run, render)


def run(args, base: Path, tools, broker) -> dict:
    topic, copied, ours = "orders", "orders-copy", "orders-kafkalog"
    broker.start()
    produced = produce(
        tools,
        broker,
        topic,
        partitions=args.partitions,
        size_mib=args.size_mib,
        keys=args.keys,
        configs={},
        compression=args.compression,
    )
    targets = [{"name": name, "partitions": args.to_partitions} for name in (copied, ours)]
    tools.produce(broker.bootstrap, [], targets)

    os.sync()  # each timed step starts with no dirty pages of the steps before it to write back
    load = loadavg()
    done = tools.java(
        [str(HERE / "BulkCopy.java"), "--bootstrap", broker.bootstrap, "--from", topic, "--to", copied]
        + ["--compression", args.compression],
        heap="-Xmx1g",
        timeout=7200,
    )
    java = {**json.loads(done.stdout.strip().splitlines()[-1]), "load": [load, loadavg()]}

    broker.stop()
    log_dir = str(broker.log_dir)
    source_bytes, source_segments = log_bytes(broker.log_dir, topic)
    command = [sys.executable, "-m", "kafkalog", "repartition", log_dir, "--topic", topic]
    command += ["--partitions", str(args.to_partitions), "--to-topic", ours, "--output", log_dir]
    command += ["--topic-config", f"{ours}:compression.type={args.compression}", "--master", args.master, "--quiet"]
    command += ["--report", str(base / "repartition.json")]
    os.sync()
    load = loadavg()
    start = time.perf_counter()
    subprocess.run(command, check=True, cwd=REPO, capture_output=True, text=True, timeout=7200)
    ours_seconds = time.perf_counter() - start
    kafkalog = {"seconds": ours_seconds, "load": [load, loadavg()]}
    out_bytes, out_segments = log_bytes(broker.log_dir, ours)

    broker.start()
    skipped = "Skipping recovery" in broker.server_log() and not broker.recovery_lines()
    (described,) = tools.admin(broker.bootstrap, [{"kind": "describe", "topics": [ours]}])
    led = sum(p["leader"] >= 0 for p in described["partitions"])
    report = json.loads((base / "repartition.json").read_text())
    moved = sum(p["records"] for p in report["partitions"])
    memory = {
        "place_peak_rss_mib": report["staged"]["peakRssMiB"],
        "write_peak_rss_mib": max(p["peakRssMiB"] for p in report["partitions"]),
    }
    steps = {name: round(seconds, 1) for name, seconds in report["seconds"].items()}
    steps["start and plan"] = round(ours_seconds - sum(report["seconds"].values()), 1)
    return {
        "machine": machine(),
        "kafka": kafka_version(tools),
        "java": java_version(tools),
        "size_mib": args.size_mib,
        "keys": args.keys,
        "partitions": args.partitions,
        "to_partitions": args.to_partitions,
        "produced": produced,
        "source": {"bytes": source_bytes, "segments": source_segments},
        "output": {"bytes": out_bytes, "segments": out_segments, "records": moved},
        "java_copy": java,
        "kafkalog": {**kafkalog, **memory, "steps": steps},
        "skipped_recovery": skipped,
        "led_partitions": led,
        "speedup": java["seconds"] / ours_seconds,
    }


def render(args, r: dict) -> list[str]:
    mib = r["source"]["bytes"] / MIB
    return [
        f"## Repartition: {mib:,.0f} MiB, {r['partitions']} into {r['to_partitions']} partitions",
        "",
        f"{r['machine']}; Kafka {r['kafka']}, {r['java']}; {r['produced']['records']:,} records over "
        f"{r['keys']:,} keys",
        "",
        "| | seconds | MiB/s | load (1 min) before, after |",
        "| --- | ---: | ---: | --- |",
        f"| Java consume-and-produce copy (acks=all) | {r['java_copy']['seconds']:.1f} | "
        f"{mib / r['java_copy']['seconds']:.1f} | {r['java_copy']['load'][0][0]}, {r['java_copy']['load'][1][0]} |",
        f"| kafkalog repartition (the CLI, Spark's start included) | {r['kafkalog']['seconds']:.1f} | "
        f"{mib / r['kafkalog']['seconds']:.1f} | {r['kafkalog']['load'][0][0]}, {r['kafkalog']['load'][1][0]} |",
        "",
        f"kafkalog / Java: {r['speedup']:.2f}x. Output: {r['output']['bytes'] / MIB:,.0f} MiB in "
        f"{r['output']['segments']} segments, {r['output']['records']:,} records (the Java copy moved "
        f"{r['java_copy']['records']:,}); the broker skipped recovery: {r['skipped_recovery']}, and leads "
        f"{r['led_partitions']} of its {r['to_partitions']} partitions. Peak resident memory of a Python "
        f"worker: {r['kafkalog']['place_peak_rss_mib']:,.0f} MiB placing, {r['kafkalog']['write_peak_rss_mib']:,.0f} "
        "MiB merging and writing.",
        "",
        "kafkalog's steps (seconds): "
        + ", ".join(f"{name} {seconds}" for name, seconds in r["kafkalog"]["steps"].items())
        + " (start and plan: Python's start, the plan, the command's own end).",
    ]


if __name__ == "__main__":
    main()
