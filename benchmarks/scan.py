"""Spark scan benchmark: the narrow scan and the full read of a generated log directory on local
Spark, next to the single-core codec key scan of the same segments, in one run.

    .venv/bin/python benchmarks/scan.py [--size-mb 1024] [--master local[2]] [--dir DIR] [--keep]

The directory (5 topics: none, lz4, snappy, zstd and gzip; 2 partitions each; keys, headers and
tombstones; 64 MiB segments) is generated into a temporary folder, or reused from `--dir` if it
holds a previous run's output. Rates are records and on-disk `.log` megabytes (10^6 bytes) per
second of wall time. The Spark jobs write to the `noop` sink, so every column is produced; the
Spark scans verify CRCs, the codec key scan does not. A warm-up job starts the Python workers
first; every scan runs `--repeat` times and the fastest run counts. The target: the narrow Spark scan on 2 cores
at 1.5x the single-core codec key scan or more.

CPU seconds are reported next to wall time (the JVM's, and the Python workers' summed): the JVM's
share is the conversion of Arrow batches into Spark rows, which the codec key scan does not pay.
`--scans` runs only some of the Spark scans, to keep a run short.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalog.codec.batch import RecordBatch  # noqa: E402
from kafkalog.codec.scan import KeyColumns, scan_batches, scan_keys  # noqa: E402
from kafkalog.scan.inventory import list_segments  # noqa: E402
from kafkalog.storage.fs import LogFileSystem  # noqa: E402
from kafkalog.storage.segment import SegmentReader  # noqa: E402

CODECS = ("none", "lz4", "snappy", "zstd", "gzip")
# on-disk bytes per record of the topic spec below, measured once; used to size the directory
BYTES_PER_RECORD = {"none": 620, "lz4": 232, "snappy": 182, "zstd": 90, "gzip": 74}
SPEC_MARKER = "benchmark-spec.json"
SPARK_SCANS = {  # name: the report's label
    "narrow": "Spark narrow scan (`narrow_scan`, {master})",
    "full": "Spark full read (`read_records`, {master})",
    "source": 'Spark data source (`format("kafkalog")`, {master})',
}


def spec_for(size_mb: int):
    from kafkalog.operations.generate import GeneratorSpec, TopicSpec

    per_record = sum(BYTES_PER_RECORD.values())
    records = max(1000, size_mb * 1_000_000 // per_record // 2)  # per partition: 2 partitions per topic
    return GeneratorSpec(
        seed=11,
        consumer_offsets=None,
        topics=[
            TopicSpec(
                f"events-{codec}",
                partitions=2,
                records=records,
                keys=50_000,
                key_skew=0.8,
                value_bytes=(200, 1000),
                tombstone_ratio=0.02,
                headers=1,
                codec=codec,
                batch_records=(50, 300),
                segment_bytes=64 * 1024 * 1024,
            )
            for codec in CODECS
        ],
    )


def ensure_log_dir(path: Path, size_mb: int, module: str = "scan") -> float:
    """Generate the directory of `module`'s `spec_for` (a benchmark of this folder) unless `path`
    already holds it at this size; returns seconds spent."""
    marker = path / SPEC_MARKER
    wanted = {"size_mb": size_mb} if module == "scan" else {"size_mb": size_mb, "spec": module}
    if marker.exists() and json.loads(marker.read_text()) == wanted:
        return 0.0
    if path.exists():
        shutil.rmtree(path)
    # In a child process: what the generator leaves in memory must not slow this one's scans
    # (a heap of live objects makes every garbage collection of the key scan longer).
    start = time.perf_counter()
    code = (
        f"import sys; sys.path.insert(0, sys.argv[1]); from {module} import spec_for; "
        "from kafkalog.operations.generate import generate; generate(sys.argv[2], spec_for(int(sys.argv[3])))"
    )
    subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent), str(path), str(size_mb)], check=True)
    marker.write_text(json.dumps(wanted))
    return time.perf_counter() - start


def log_dir_parser(doc: str, size_mb: int) -> argparse.ArgumentParser:
    """The command line of a benchmark of a generated log directory, described by the first
    paragraph of `doc`: `--size-mb` (default `size_mb`), `--dir` and `--keep`; it adds its own."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=size_mb, help="approximate .log bytes to generate (MB)")
    parser.add_argument("--dir", type=Path, help="where to generate (reused when it holds this size)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    return parser


@contextmanager
def temporary_dir(keep: bool) -> Iterator[Path]:
    """A folder for a run's files (and its log directory, without `--dir`), removed at the end
    unless `keep`."""
    work = Path(tempfile.mkdtemp(prefix="kafkalog-bench-"))
    try:
        yield work
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def prepare_log_dir(path: Path, size_mb: int, module: str = "scan") -> tuple[list, int]:
    """`ensure_log_dir`, then what the directory holds on stderr; returns its segments and their
    bytes."""
    generated = ensure_log_dir(path, size_mb, module)
    segments = list_segments(str(path))
    nbytes = sum(s.size for s in segments)
    print(
        f"log dir {path}: {len(segments)} segments, {nbytes / 1e6:.0f} MB"
        + (f" (generated in {generated:.0f} s)" if generated else ""),
        file=sys.stderr,
    )
    return segments, nbytes


def codec_key_scan(log_dir: Path, header: bytes | None = None) -> tuple[int, float]:
    """The codec's key scan over every batch of every segment, one process, one core, at its best:
    windows of 64 v2 batches read in one pass (`scan_batches`, as the narrow scan reads them),
    batch by batch (`scan_keys`) where a window is declined and for legacy or empty batches; with
    `header`, each record's last header of that key read too (KIP-280's `header` strategy)."""
    fs, _ = LogFileSystem.for_path(str(log_dir))
    records = 0
    start = time.perf_counter()
    for segment in list_segments(str(log_dir)):
        cols, window = KeyColumns(header), []
        for _, batch in SegmentReader(fs, segment.log_path, segment.size):
            if isinstance(batch, RecordBatch) and batch.records_count > 0:
                window.append(batch)
                if len(window) == 64:
                    records += _scan_window(window, cols)
                    window = []
            else:
                records += _scan_window(window, cols) + scan_keys(batch, cols)
                window = []
            if len(cols) >= 65536:
                cols.clear()
        records += _scan_window(window, cols)
    return records, time.perf_counter() - start


def _scan_window(window: list, cols: KeyColumns) -> int:
    sections = [batch.records_section() for batch in window]
    if window and scan_batches(window, sections, cols):
        return sum(batch.records_count for batch in window)
    return sum(scan_keys(batch, cols, section=section) for batch, section in zip(window, sections))


def spark_cpu() -> tuple[float, float]:
    """CPU seconds used so far by the JVM and by its Python workers (summed; reused workers live
    through the run, so differences of two calls are a job's CPU)."""
    jvm = workers = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            used = sum(child.cpu_times()[:2])
            name = child.name()
        except psutil.Error:  # a worker exited while sampled
            continue
        if name == "java":
            jvm += used
        elif name.startswith("python"):
            workers += used
    return jvm, workers


def spark_job(df) -> tuple[float, float, float]:
    """Wall seconds, JVM CPU seconds and Python workers' CPU seconds of writing `df` to noop."""
    cpu_before = spark_cpu()
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - start
    cpu_after = spark_cpu()
    return seconds, cpu_after[0] - cpu_before[0], cpu_after[1] - cpu_before[1]


def main(argv=None) -> None:
    parser = log_dir_parser(__doc__, size_mb=1024)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each scan; the best is kept")
    parser.add_argument(
        "--scans",
        default=",".join(SPARK_SCANS),
        help=f"comma-separated Spark scans to run, of {', '.join(SPARK_SCANS)}",
    )
    args = parser.parse_args(argv)
    scans = [name for name in SPARK_SCANS if name in args.scans.split(",")]

    with temporary_dir(args.keep) as work:
        log_dir = args.dir or work / "log"
        segments, nbytes = prepare_log_dir(log_dir, args.size_mb)

        from kafkalog.spark import local_session, narrow_scan, read_records

        load_before = os.getloadavg()[0]
        started = time.perf_counter()
        spark = local_session("kafkalog-bench", args.master)
        session_seconds = time.perf_counter() - started
        root = str(log_dir)
        frames = {
            "narrow": lambda: narrow_scan(spark, root),
            "full": lambda: read_records(spark, root),
            "source": lambda: spark.read.format("kafkalog").load(root),
        }
        warm = time.perf_counter()  # start every Python worker: one small task per unit
        spark_job(narrow_scan(spark, root, end_offset=1000, min_tasks=1, max_bytes_per_task=1))
        warm_seconds = time.perf_counter() - warm
        # Rounds interleave the scans, so that a busy neighbour slows all of them alike; the
        # fastest round of each scan counts. A run is (wall seconds, CPU seconds of the JVM, of Python).
        runs: dict[str, list[tuple]] = {k: [] for k in ["codec"] + scans}
        for _ in range(args.repeat):
            cpu = time.process_time()
            records, seconds = codec_key_scan(log_dir)
            runs["codec"].append((seconds, 0.0, time.process_time() - cpu))
            for name in scans:
                runs[name].append(spark_job(frames[name]()))
        best = {k: min(v) for k, v in runs.items()}
        load_after = os.getloadavg()[0]
        tasks = narrow_scan(spark, root).rdd.getNumPartitions()
        cores = spark.sparkContext.defaultParallelism
        spark.stop()

    codec_seconds = best["codec"][0]

    def row(name: str, run: tuple) -> str:
        seconds, jvm, python = run
        return (
            f"| {name} | {seconds:.2f} | {records / seconds / 1e6:.3f} | {nbytes / seconds / 1e6:.1f} | "
            f"{codec_seconds / seconds:.2f}x | {jvm:.2f} + {python:.2f} |"
        )

    print(
        f"\n{records:,} records, {nbytes / 1e6:.0f} MB of .log in {len(segments)} segments; Spark {args.master} "
        f"({cores} cores, {tasks} tasks), session start {session_seconds:.1f} s, warm-up job {warm_seconds:.1f} s; "
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load_before:.1f} before "
        f"and {load_after:.1f} after the runs\n"
    )
    print("| scan | seconds | M records/s | MB/s | vs codec key scan | CPU s (JVM + Python) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    print(row("codec key scan (`scan_batches` windows, 1 core, no CRC)", best["codec"]))
    for name in scans:
        print(row(SPARK_SCANS[name].format(master=args.master), best[name]))
    rounds = "; ".join(f"{k} " + ", ".join(f"{run[0]:.2f}" for run in v) for k, v in runs.items())
    print(f"\nseconds per round: {rounds}")


if __name__ == "__main__":
    main()
