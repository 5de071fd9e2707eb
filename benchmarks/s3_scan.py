"""Object-store benchmark: the Spark scans of a log directory read from an S3 API (moto's server on
127.0.0.1) against the same directory on local disk, in one run.

    .venv/bin/python benchmarks/s3_scan.py [--size-mb 256] [--repeat 2] [--dir DIR]

The directory is `benchmarks/scan.py`'s (5 codecs, 2 partitions each, 64 MiB segments), uploaded to a
bucket with kafkalog's own `copy_log_dir`. kafkalog reaches the server as an operator's deployment
reaches S3: an `s3://` URI and the standard AWS environment variables. Rounds interleave local and S3
runs of each scan and the fastest of each counts. The server's request log is read after every S3 run:
the GET requests of `.log` objects, and the bytes each brought on average, show whether a scan
reads in large ranged reads (chunks of up to 8 MiB, `storage/segment.py`) or per batch. moto keeps
objects in its own memory on the same machine, so this measures the cost of the S3 API path (HTTP,
the server, pyarrow's S3 client), not a network's bandwidth or latency.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from scan import ensure_log_dir, log_dir_parser, spark_job, temporary_dir  # noqa: E402

from tests.ports import free_port  # noqa: E402
from tests.s3_server import S3Server, environment  # noqa: E402

BUCKET = "kafkalog-bench"
SCANS = {"narrow": "narrow scan (`narrow_scan`)", "full": "full read (`read_records`)"}


def main(argv=None) -> None:
    parser = log_dir_parser(__doc__, size_mb=256)
    parser.add_argument("--repeat", type=int, default=2, help="rounds; the fastest run of each counts")
    args = parser.parse_args(argv)

    port = free_port()
    os.environ.update(environment(port))  # before Spark starts: its Python workers inherit them
    with temporary_dir(args.keep) as work:
        log_dir = args.dir or work / "log"
        ensure_log_dir(log_dir, args.size_mb)
        with S3Server(port, work / "moto.log") as server:
            report(server, log_dir, args.repeat)


def report(server: S3Server, log_dir: Path, repeat: int) -> None:
    from kafkalog.scan.scan_plan import plan_scan
    from kafkalog.spark import local_session, narrow_scan, read_records
    from kafkalog.storage.logdir import copy_log_dir

    server.create_bucket(BUCKET)
    remote = f"s3://{BUCKET}/log"
    started = time.perf_counter()
    copy_log_dir(str(log_dir), remote)
    upload = time.perf_counter() - started
    plan = plan_scan(str(log_dir))
    nbytes = sum(u.nbytes for u in plan.units)

    spark = local_session("kafkalog-s3-bench", "local[2]")
    frames = {"narrow": narrow_scan, "full": read_records}
    load_before = os.getloadavg()[0]
    spark_job(narrow_scan(spark, str(log_dir), end_offset=1000, min_tasks=1, max_bytes_per_task=1))  # warm-up
    best: dict[tuple[str, str], float] = {}
    gets = {}
    for _ in range(repeat):
        for name, scan in frames.items():
            for where, root in (("local", str(log_dir)), ("s3", remote)):
                before = len(server.requests())
                seconds = spark_job(scan(spark, root))[0]
                best[name, where] = min(seconds, best.get((name, where), seconds))
                if where == "s3":
                    new = server.requests()[before:]
                    gets[name] = sum(1 for r in new if r.method == "GET" and r.path.endswith(".log"))
    spark.stop()

    print(
        f"{nbytes / 1e6:.0f} MB of .log in {len(plan.units)} work units; uploaded with `copy_log_dir` in "
        f"{upload:.1f} s; Spark local[2]; python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
        f"{load_before:.1f} before and {os.getloadavg()[0]:.1f} after the runs\n"
    )
    print("| scan | local disk (s) | S3 API (s) | S3 MB/s | S3 / local time | `.log` GETs per S3 run | MB per GET |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, label in SCANS.items():
        local, s3 = best[name, "local"], best[name, "s3"]
        print(
            f"| {label} | {local:.2f} | {s3:.2f} | {nbytes / s3 / 1e6:.1f} | {s3 / local:.2f}x | {gets[name]} | "
            f"{nbytes / gets[name] / 1e6:.1f} |"
        )


if __name__ == "__main__":
    main()
