"""`kafkalog export` memory against the number of distinct keys: logs of the same size whose records
all have distinct keys (compaction's keys case, `benchmarks/compact.py`), each exported into Delta
through delta-spark, the resident memory of the Python driver, the JVM and the Python workers sampled
every 50 ms (peaks), and the CPU seconds each of them spent in the export.

    .venv/bin/python benchmarks/export_memory.py [--size-mb 200] [--keys 1000000 10000000] [--dir DIR]

Every key is a row of the table, so the window keeping the last record per key holds every record:
memory stays flat only where that window and the Delta write spill rather than hold keys in memory.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compact import PeakMemory, keys_spec_for, print_memory_table  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=200, help="MB of .log per case (default 200)")
    parser.add_argument("--keys", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument(
        "--updates", type=int, default=1, help="records per key, spread over its partition (default 1: all distinct)"
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="2g", help="the JVM heap of local mode (spark.driver.memory)")
    parser.add_argument("--dir", type=Path, help="where the generated logs stay (default: a temporary one, removed)")
    args = parser.parse_args(argv)

    from kafkalog.operations.export import export
    from kafkalog.operations.generate import generate
    from kafkalog.scan.inventory import list_segments
    from kafkalog.spark import local_session

    base = args.dir or Path(tempfile.mkdtemp(prefix="kafkalog-export-memory-"))
    spark = local_session(
        "kafkalog-bench-export-memory", args.master, {"spark.driver.memory": args.driver_memory}, delta=True
    )
    rows, cpus = [], []
    try:
        export_warm = base / "warm.delta"
        for keys in args.keys:
            source = base / (f"keys-{keys}" if args.updates == 1 else f"keys-{keys}-x{args.updates}")
            if not source.exists():
                generate(str(source), updates_spec(args.size_mb, keys, args.updates))
            if not export_warm.exists():  # an untimed warm-up, on the first log
                export(spark, str(source), "distinct", str(export_warm), as_of_offset=1000)
            table = base / "table.delta"
            shutil.rmtree(table, ignore_errors=True)
            cpu_before = cpu_seconds()
            with PeakMemory() as memory:
                start = time.perf_counter()
                export(spark, str(source), "distinct", str(table))
                seconds = time.perf_counter() - start
            cpu = {k: round(v - cpu_before.get(k, 0.0), 1) for k, v in cpu_seconds().items()}
            count = spark.read.format("delta").load(str(table)).count()
            if count != keys:
                raise RuntimeError(f"{keys:,} keys, but the table holds {count:,} rows")
            nbytes = sum(s.size for s in list_segments(str(source)))
            rows.append((keys, nbytes, seconds, memory.peak))
            cpus.append(f"{keys:,} keys: CPU seconds {cpu}")
            print(f"[{time.strftime('%H:%M:%S')}] {keys:,} keys: {seconds:.1f} s, {memory.peak}", file=sys.stderr)
    finally:
        spark.stop()
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    print(
        f"Spark {args.master}, {args.driver_memory} heap, delta-spark; "
        + (
            "every record has a distinct key, so every record is a row of the table"
            if args.updates == 1
            else f"{args.updates} records per key, spread over its partition"
        )
        + f"; {time.strftime('%Y-%m-%d %H:%M %Z')}\n"
    )
    print_memory_table(rows)
    print("\n" + "\n".join(cpus))


def updates_spec(size_mb: int, keys: int, updates: int):
    """compaction's keys case (`keys_spec_for`) with `updates` records per key: record n has key n
    mod the partition's keys, so each range of a partition sees every key of it."""
    spec = keys_spec_for(size_mb, keys * updates)
    spec.topics = [replace(spec.topics[0], keys=keys // 2)]
    return spec


def cpu_seconds() -> dict:
    """User and system CPU seconds so far of this process (the driver), its JVM and the Python
    workers below the JVM (those alive: Spark keeps its workers for the next task)."""
    import psutil

    me = psutil.Process()
    spent = {"driver": sum(me.cpu_times()[:2]), "jvm": 0.0, "workers": 0.0}
    for child in me.children(recursive=True):
        try:
            kind = "jvm" if child.name() == "java" else "workers" if child.name().startswith("python") else None
            if kind:
                spent[kind] += sum(child.cpu_times()[:2])
        except psutil.Error:  # a worker exited while read
            pass
    return spent


if __name__ == "__main__":
    main()
