"""Validation benchmark: `validate` of a generated log directory in one process (the command line)
against the same validation on Spark's executors (what `jobs/validate.py` runs), in one run.

    .venv/bin/python benchmarks/validate.py [--size-mb 1024] [--master local[2]] [--repeat 2] [--dir DIR]

The directory is `benchmarks/scan.py`'s (5 codecs, 2 partitions each). Both runs are deep: every
record decoded, every index and snapshot checked; they must give the same report, which the run
asserts. Rounds alternate the two, the fastest of each counts; the Spark session is started and warm
before the first round.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scan import ensure_log_dir, log_dir_parser, temporary_dir  # noqa: E402

from kafkalog.operations.validate import validate_paths  # noqa: E402


def main(argv=None) -> None:
    parser = log_dir_parser(__doc__, size_mb=1024)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=2, help="rounds; the fastest run of each counts")
    args = parser.parse_args(argv)

    with temporary_dir(args.keep) as work:
        log_dir = args.dir or work / "log"
        ensure_log_dir(log_dir, args.size_mb)
        report(str(log_dir), args.master, args.repeat)


def report(root: str, master: str, repeat: int) -> None:
    from kafkalog.spark import local_session

    spark = local_session("kafkalog-validate-bench", master)
    validate_paths([root], spark=spark)  # warm-up: Python workers started, the log in the page cache
    load_before = os.getloadavg()[0]
    best = {"one": float("inf"), "spark": float("inf")}
    reports = {}
    for _ in range(repeat):
        for name, session in (("one", None), ("spark", spark)):
            started = time.perf_counter()
            reports[name] = validate_paths([root], spark=session)
            best[name] = min(best[name], time.perf_counter() - started)
    spark.stop()
    assert reports["one"].to_json() == reports["spark"].to_json(), "the two reports differ"
    counts = reports["one"].counts
    nbytes = counts["log_bytes"]
    print(
        f"{counts['records']:,} records, {nbytes / 1e6:.0f} MB of .log in {counts['partitions']} partitions; "
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load_before:.1f} before and "
        f"{os.getloadavg()[0]:.1f} after the runs\n"
    )
    print("| run | seconds | MB/s | vs one process |")
    print("| --- | ---: | ---: | ---: |")
    for name, label in (("one", "`validate`, one process (the command line)"), ("spark", f"on executors, {master}")):
        seconds = best[name]
        print(f"| {label} | {seconds:.1f} | {nbytes / seconds / 1e6:.1f} | {best['one'] / seconds:.2f}x |")


if __name__ == "__main__":
    main()
