"""Where the time of a range-path compaction goes (spark/ranges.py): each step's wall and CPU seconds.

    .venv/bin/python benchmarks/range_steps.py LOG_DIR --topic T [--rounds 2] [--master local[2]]
        [--tuning NAME=INT ...] [--topic-config T:KEY=VALUE ...] [--now MS]

LOG_DIR is left alone: each round compacts a fresh copy of it (the copy is not timed) in one started
session, `force=True`, with `tuning.ONE_TASK_BYTES=0` unless given (every chosen partition takes the
range path). The steps are told apart by wrapping the range path's Spark jobs (`run_tasks` as
spark/ranges.py calls it: the map, then on the executors the merge, then the rewrite), what the driver
does between them, and the swap (`swap_in`). CPU seconds are sampled at each step's start and end
over this process and its descendants (Spark's JVM and its Python workers), by kind; the peak resident
memory of the Python workers is sampled every 0.2 s. The load average is printed before each round.
Each round prints one SHA-256 over the files it leaves (two versions of the code wrote the same bytes
or not). A log dir made by `benchmarks/kafka_cleaner.py --keep` (its `input/`) is a broker's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))


def files_digest(root: Path) -> str:
    """One SHA-256 over every file's path and bytes under `root`: two runs wrote the same files or not."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def cpu_by_kind() -> dict[str, float]:
    """CPU seconds so far of this process and its descendants: the driver, the JVM, the Python workers
    (each process's own and its reaped children's: a Python worker that has ended counts in the daemon
    that forked it)."""
    import psutil

    me = psutil.Process()
    out = {"driver": 0.0, "jvm": 0.0, "workers": 0.0}
    for proc in [me, *me.children(recursive=True)]:
        try:
            times, name = proc.cpu_times(), proc.name()
        except psutil.Error:
            continue
        kind = "driver" if proc.pid == me.pid else "jvm" if name == "java" else "workers"
        out[kind] += times.user + times.system
        if kind == "workers":  # the driver's and the JVM's children are counted live
            out[kind] += times.children_user + times.children_system
    return out


class PeakWorkers:
    """The peak summed resident memory (MiB) of the Python workers (the JVM's Python children)."""

    def __init__(self):
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        import psutil

        me = psutil.Process()
        while not self._stop.wait(0.2):
            total = 0
            for proc in me.children(recursive=True):
                try:
                    if proc.name().startswith("python"):
                        total += proc.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total / (1 << 20))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


class Steps:
    """Step boundaries: (name, wall seconds, CPU by kind) in order."""

    def __init__(self):
        self.rows: list[tuple[str, float, dict]] = []
        self.mark = (time.perf_counter(), cpu_by_kind())

    def end(self, name: str) -> None:
        now, cpu = time.perf_counter(), cpu_by_kind()
        self.rows.append((name, now - self.mark[0], {k: cpu[k] - self.mark[1][k] for k in cpu}))
        self.mark = (now, cpu)


def wrapped(steps: Steps):
    """Wrap the range path's jobs and the swap so that `steps` records their boundaries."""
    from kafkalog.operations import compact as operation
    from kafkalog.spark import ranges

    jobs = iter(["map", "merge (executors)", "rewrite", "job 4", "job 5"])
    run_tasks, swap_in = ranges.run_tasks, operation.swap_in

    def timed_tasks(*args, **kwargs):
        steps.end("driver before")
        out = run_tasks(*args, **kwargs)
        steps.end(next(jobs))
        return out

    def timed_swap(*args, **kwargs):
        steps.end("driver before swap")
        out = swap_in(*args, **kwargs)
        steps.end("swap")
        return out

    ranges.run_tasks, operation.swap_in = timed_tasks, timed_swap
    return lambda: (setattr(ranges, "run_tasks", run_tasks), setattr(operation, "swap_in", swap_in))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log_dir", type=Path)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--tuning", action="append", default=[], metavar="NAME=INT")
    parser.add_argument("--topic-config", action="append", default=[], metavar="T:KEY=VALUE")
    parser.add_argument("--now", type=int, default=None, help="the clock (ms; default: now)")
    parser.add_argument("--work", type=Path, default=None, help="where the copies go (default: beside LOG_DIR)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    from kafkalog import tuning
    from kafkalog.config import resolver_from
    from kafkalog.operations.compact import compact
    from kafkalog.spark import local_session

    tuning.ONE_TASK_BYTES = 0
    for knob in args.tuning:
        name, _, value = knob.partition("=")
        setattr(tuning, name, int(value))
    config = resolver_from(topic_settings=[f"{args.topic}:cleanup.policy=compact", *args.topic_config])
    now = args.now or int(time.time() * 1000)
    work = args.work or args.log_dir.with_name(args.log_dir.name + "-range-steps")
    spark = local_session("kafkalog-range-steps", args.master)
    spark.range(4).count()
    results = []
    try:
        for i in range(args.rounds):
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(args.log_dir, work)
            time.sleep(2)
            load = [round(x, 2) for x in os.getloadavg()]
            steps = Steps()
            restore = wrapped(steps)
            try:
                with PeakWorkers() as peak:
                    started = time.perf_counter()
                    compact(spark, str(work), config, now, force=True, topics=[args.topic])
                    wall = time.perf_counter() - started
            finally:
                restore()
            steps.end("driver after")
            digest = files_digest(work)
            results.append(
                {"round": i + 1, "load": load, "wall": wall, "workers_peak_mib": peak.peak, "steps": steps.rows}
                | {"files_sha256": digest}
            )
            print(
                f"round {i + 1}: {wall:.2f} s wall, load {load}, workers' peak {peak.peak:,.0f} MiB, "
                f"files {digest[:16]}",
                flush=True,
            )
            for name, seconds, cpu in steps.rows:
                print(
                    f"  {name:<20} {seconds:7.2f} s  cpu driver {cpu['driver']:6.2f}  jvm {cpu['jvm']:6.2f}"
                    f"  workers {cpu['workers']:6.2f}",
                    flush=True,
                )
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
