"""Planning benchmark: a compaction's plan (`plan_compaction`) of a log directory without producer
snapshots, so that every partition's producer state is replayed from its first batch, with the replays
on the driver against the same replays on Spark's executors, in one run.

    .venv/bin/python benchmarks/plan.py [--size-mb 256] [--master local[2]] [--repeat 3] [--dir DIR]

The directory is `benchmarks/compact.py`'s, copied without its `.snapshot` files. The executors' run
sets `tuning.REPLAY_ON_EXECUTORS_BYTES` to 0, so that it replays there whatever the size; the table says
which of the two `compact` takes by default at this size. Both plans must be equal, which the run
asserts. Rounds alternate the two, the fastest of each counts; the session is started and warm (its
Python workers running, the log in the page cache) before the first round.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from compact import RESOLVER  # noqa: E402
from scan import ensure_log_dir, log_dir_parser, temporary_dir  # noqa: E402

from kafkalog import tuning  # noqa: E402
from kafkalog.operations.compact import plan_compaction  # noqa: E402

NOW = 1_800_000_000_000


def main(argv=None) -> None:
    parser = log_dir_parser(__doc__, size_mb=256)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the fastest run of each counts")
    args = parser.parse_args(argv)

    with temporary_dir(args.keep) as work:
        log_dir = args.dir or work / "log"
        ensure_log_dir(log_dir, args.size_mb, "compact")
        no_snapshots = work / "no-snapshots"
        shutil.copytree(log_dir, no_snapshots)
        for snapshot in no_snapshots.glob("*/*.snapshot"):
            snapshot.unlink()
        report(str(no_snapshots), args.master, args.repeat)


def _plan(root: str, spark) -> tuple:
    plan = plan_compaction(root, RESOLVER, NOW, spark=spark)
    return [vars(s) for s in plan.logs], {tp: str(err) for tp, err in plan.uncleanable.items()}


def report(root: str, master: str, repeat: int) -> None:
    from kafkalog.spark import local_session

    default = tuning.REPLAY_ON_EXECUTORS_BYTES
    tuning.REPLAY_ON_EXECUTORS_BYTES = 0  # the executors' run replays there, whatever the size
    spark = local_session("kafkalog-plan-bench", master)
    _plan(root, spark)  # warm-up
    load_before = os.getloadavg()[0]
    best = {"driver": float("inf"), "executors": float("inf")}
    plans = {}
    for _ in range(repeat):
        for name, session in (("driver", None), ("executors", spark)):
            started = time.perf_counter()
            plans[name] = _plan(root, session)
            best[name] = min(best[name], time.perf_counter() - started)
    spark.stop()
    assert plans["driver"] == plans["executors"], "the two plans differ"
    logs = list(Path(root).glob("*/*.log"))
    nbytes = sum(f.stat().st_size for f in logs)
    print(
        f"{nbytes / 1e6:.0f} MB of .log in {len(logs)} segments of {len(plans['driver'][0])} partitions, no "
        f"producer snapshots; python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
        f"{load_before:.1f} before and {os.getloadavg()[0]:.1f} after the runs\n"
    )
    print("| replays | seconds | vs the driver |")
    print("| --- | ---: | ---: |")
    for name, label in (("driver", "on the driver"), ("executors", f"on executors, {master}")):
        print(f"| {label} | {best[name]:.2f} | {best['driver'] / best[name]:.2f}x |")
    chosen = "the executors" if nbytes >= default else "the driver"
    print(f"\n`compact` replays on {chosen} at this size (`REPLAY_ON_EXECUTORS_BYTES` = {default:,} bytes)")


if __name__ == "__main__":
    main()
