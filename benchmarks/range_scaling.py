"""One large partition on the range path (spark/ranges.py) under several Spark masters: the wall time of each,
the peak memory of its JVM and Python workers, and the SHA-256 of every file it leaves, in one run.

    .venv/bin/python benchmarks/range_scaling.py --dir DIR [--size-mib 2048] [--keys 8000000]
        [--records N] [--value-bytes 100:400] [--master local[1] --master local[2]] [--cluster 2]
        [--in-place] [--rounds 1] [--json FILE]

The input is built once and kept in `DIR/input` (reused by later runs with the same `--dir`; without
`--dir`, a temporary directory, removed at the end): one lz4 partition of a compacted topic produced
through a real Kafka 4.3 broker by benchmarks/BulkProducer.java (`kafka_cleaner.produce`: keys drawn
uniformly from `--keys`, JSON-like values of `--value-bytes`, until `--size-mib` MiB of batches are
written or `--records` records sent; segments of `--segment-mib`). What was produced is in
`DIR/input.json`, with the clock every run compacts at (the end of producing plus a day), so that
every run decides the same.

Each `--master` (default, without `--cluster`: local[1] then local[2]) compacts a fresh copy of the
input (the copy is not timed) in a process of its own: Spark's start and a first small job, then
`compact(force=True)` timed on its own (`--rounds` times on fresh copies: the best counts). `--cluster N`
adds a run on a Spark standalone cluster of N workers of one core each started from the installed
pyspark (tests/cluster/conftest.Cluster, as the suite starts one; the driver in this machine's client
mode, the executors running this checkout with the driver's Python), stopped at the end. Peak resident
memory is sampled every 0.2 s over the run's process tree (for the cluster: the workers' trees too):
the Python driver, the JVMs (local mode: one; on the cluster, the driver's and the executors', not the
master or the worker daemons), the Python workers summed and the largest one. The files each run
leaves are hashed one by one; the report says whether every run left the same bytes, and the ratio of
the first run's time to each run's.
`--in-place` compacts `DIR/input` itself (one run, given by one `--master` or `--cluster`, no copy: for
inputs too large to copy; the input is then compacted and no longer the pristine one).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))

from kafka_cleaner import (  # noqa: E402
    MIB,
    exit_on_sigterm,
    kafka_version,
    loadavg,
    log_bytes,
    machine,
    produce,
    start_kafka,
)

TOPIC = "updates"
DAY_MS = 24 * 3600 * 1000


def settings(segment_bytes: int) -> list[str]:
    """The topic's configuration as kafka_cleaner.py's `--beyond-one-pass` gives both cleaners."""
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": segment_bytes,
        "min.compaction.lag.ms": 0,
        "min.cleanable.dirty.ratio": 0,
    }
    return [f"{TOPIC}:{k}={v}" for k, v in configs.items()]


# -- the input -------------------------------------------------------------------------------------------------
def build(args, work: Path) -> dict:
    """`DIR/input` and `DIR/input.json`: one partition produced through a broker (kept when they exist)."""
    described = work / "input.json"
    if described.exists():
        return json.loads(described.read_text())
    low, _, high = args.value_bytes.partition(":")
    shutil.rmtree(work / "broker", ignore_errors=True)
    tools, broker = start_kafka(work / "broker")
    try:
        broker.start()
        load = loadavg()
        created = {
            "cleanup.policy": "compact",
            "segment.bytes": str(args.segment_mib * MIB),
            "min.compaction.lag.ms": str(7 * DAY_MS),  # Kafka's own cleaner leaves it alone
        }
        produced = produce(
            tools,
            broker,
            TOPIC,
            partitions=1,
            size_mib=args.size_mib,
            keys=args.keys,
            configs=created,
            records=args.records,
            value_bytes=(int(low), int(high)),
        )
        broker.stop()
        nbytes, segments = log_bytes(broker.log_dir, TOPIC)
        shutil.move(broker.log_dir, work / "input")
    finally:
        broker.close()
    shutil.rmtree(work / "broker", ignore_errors=True)
    out = {
        "produced": produced,
        "keys": args.keys,
        "value_bytes": args.value_bytes,
        "log_bytes": nbytes,
        "segments": segments,
        "segment_bytes": args.segment_mib * MIB,
        "now_ms": int(time.time() * 1000) + DAY_MS,
        "kafka_version": kafka_version(tools),
        "load": [load, loadavg()],
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    }
    described.write_text(json.dumps(out, indent=1) + "\n")
    return out


# -- one run, in a process of its own ----------------------------------------------------------------------------
def child(args) -> None:
    """`--child MASTER`: compact `--copy` (`--rounds` fresh copies of `--pristine` when given) in this
    process's session on MASTER; prints one JSON line: each round's seconds, Spark's start."""
    from kafkalog import tuning
    from kafkalog.config import resolver_from
    from kafkalog.operations.compact import compact
    from kafkalog.spark import local_session

    for knob in args.tuning:
        name, _, value = knob.partition("=")
        setattr(tuning, name, int(value))
    conf = dict(c.split("=", 1) for c in args.conf)
    started = time.perf_counter()
    spark = local_session("kafkalog-range-scaling", args.child, conf)
    spark.range(4).count()
    out: dict = {"session_start_seconds": time.perf_counter() - started, "rounds": []}
    config = resolver_from(topic_settings=settings(args.segment_bytes))
    try:
        for _ in range(args.rounds):
            if args.pristine:
                shutil.rmtree(args.copy, ignore_errors=True)
                shutil.copytree(args.pristine, args.copy)
            time.sleep(2)
            load = loadavg()
            started = time.perf_counter()
            compact(spark, str(args.copy), config, args.now, force=True, topics=[TOPIC])
            out["rounds"].append({"seconds": time.perf_counter() - started, "load": [load, loadavg()]})
    finally:
        spark.stop()
    print(json.dumps(out), flush=True)


class TreePeaks:
    """Peak resident MiB, sampled every 0.2 s, of the process trees under `roots`, by kind: the Python
    driver (`driver_pid`), the JVMs (Spark's daemons `DAEMONS` left out), the Python workers summed and
    the largest of them; and CPU seconds by kind (each process's last sample; a Python worker that
    ended counts in the daemon that forked it)."""

    DAEMONS = ("deploy.master.Master", "deploy.worker.Worker")

    def __init__(self, driver_pid: int, roots: list[int]):
        self.driver_pid, self.roots = driver_pid, roots
        self.peak = {"driver": 0.0, "jvm": 0.0, "workers": 0.0, "largest_worker": 0.0}
        self.cpu: dict[int, tuple[str, float]] = {}
        self.daemons: dict[int, bool] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _kind(self, proc) -> str | None:
        """Asked at every sample: a process forked from Python may exec Java since the last."""
        name = proc.name()
        if proc.pid == self.driver_pid:
            return "driver"
        if name == "java":
            if proc.pid not in self.daemons:
                self.daemons[proc.pid] = any(d in " ".join(proc.cmdline()) for d in self.DAEMONS)
            return None if self.daemons[proc.pid] else "jvm"
        return "workers" if name.startswith("python") else None

    def _sample(self) -> None:
        import psutil

        now = {"driver": 0.0, "jvm": 0.0, "workers": 0.0, "largest_worker": 0.0}
        for root in self.roots:
            try:
                tree = [psutil.Process(root), *psutil.Process(root).children(recursive=True)]
            except psutil.Error:
                continue
            for proc in tree:
                try:
                    kind = self._kind(proc)
                    if kind is None:
                        continue
                    rss, times = proc.memory_info().rss / MIB, proc.cpu_times()
                except psutil.Error:
                    continue
                now[kind] += rss
                if kind == "workers":
                    now["largest_worker"] = max(now["largest_worker"], rss)
                used = times.user + times.system + (times.children_user + times.children_system) * (kind == "workers")
                self.cpu[proc.pid] = (kind, used)
        self.peak = {k: max(v, now[k]) for k, v in self.peak.items()}

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self._sample()

    def cpu_by_kind(self) -> dict[str, float]:
        out = {"driver": 0.0, "jvm": 0.0, "workers": 0.0}
        for kind, used in self.cpu.values():
            out[kind] += used
        return {k: round(v, 1) for k, v in out.items()}

    def __enter__(self) -> TreePeaks:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def file_hashes(root: Path) -> dict[str, str]:
    """SHA-256 of every file under `root` by its relative path."""
    out = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(8 * MIB):
                digest.update(chunk)
        out[str(path.relative_to(root))] = digest.hexdigest()
    return out


def one_run(args, built: dict, master: str, conf: list[str], daemons: list[int]) -> dict:
    """A process compacting a copy of the input on `master` (the input itself with `--in-place`)."""
    pristine = args.dir / "input"
    copy = pristine if args.in_place else args.dir / "copy"
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--dir",
        str(args.dir),
        "--child",
        master,
        "--copy",
        str(copy),
        "--now",
        str(built["now_ms"]),
        "--segment-bytes",
        str(built["segment_bytes"]),
        "--rounds",
        str(args.rounds),
        *(f"--conf={c}" for c in conf),
        *(f"--tuning={t}" for t in args.tuning),
        *([] if args.in_place else ["--pristine", str(pristine)]),
    ]
    load = loadavg()
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=REPO)
    with TreePeaks(process.pid, [process.pid, *daemons]) as memory:
        stdout, _ = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"the run on {master} exited {process.returncode}")
    out = json.loads(stdout.strip().splitlines()[-1])
    out.update(
        master=master,
        process_seconds=time.perf_counter() - started,
        seconds=min(r["seconds"] for r in out["rounds"]),
        peak_mib={k: round(v) for k, v in memory.peak.items()},
        cpu=memory.cpu_by_kind(),
        load=[load, loadavg()],
        files=file_hashes(copy),
    )
    out["log_bytes_after"] = log_bytes(copy, TOPIC)[0]
    if not args.in_place:
        shutil.rmtree(copy)
    return out


def on_cluster(args, built: dict, workers: int) -> dict:
    """A run on a standalone cluster of `workers` one-core workers, started and stopped here."""
    from tests.cluster.conftest import Cluster, start_cluster
    from tests.ports import free_port

    root = args.dir / "cluster"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    cluster = Cluster(root, free_port(), free_port())
    try:
        import tests.cluster.conftest as harness

        harness.WORKERS = workers
        start_cluster(cluster)
        # the executors run this checkout with the driver's Python (kafkalog not installed: on its path)
        conf = [f"spark.executorEnv.PYTHONPATH={REPO}", f"spark.cores.max={workers}"]
        run = one_run(args, built, cluster.master_url, conf, [p.pid for _, p, _ in cluster.processes])
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    run["master"] = f"standalone, {workers} workers of 1 core"
    return run


def render(built: dict, runs: list[dict], command: str) -> list[str]:
    produced = built["produced"]
    lines = [
        f"`{command}`",
        "",
        f"One partition: {produced['records']:,} records over {built['keys']:,} keys (values "
        f"{built['value_bytes']} bytes), lz4, {built['log_bytes'] / MIB:,.0f} MiB of .log in {built['segments']} "
        f"segments, produced through Kafka {built['kafka_version']} ({built['date']}); {machine()}",
        "",
        "| run | compact s | × the first | process s | Spark start s | peak MiB: driver / JVM / workers (largest) "
        "| CPU s: driver / JVM / workers | .log MiB after | load before → after |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- | ---: | --- |",
    ]
    for run in runs:
        peak, cpu, (before, after) = run["peak_mib"], run["cpu"], run["load"]
        lines.append(
            f"| {run['master']} | {run['seconds']:.1f} | {runs[0]['seconds'] / run['seconds']:.2f}× "
            f"| {run['process_seconds']:.1f} | {run['session_start_seconds']:.1f} "
            f"| {peak['driver']:,} / {peak['jvm']:,} / {peak['workers']:,} ({peak['largest_worker']:,}) "
            f"| {cpu['driver']} / {cpu['jvm']} / {cpu['workers']} | {run['log_bytes_after'] / MIB:,.0f} "
            f"| {before[0]:.1f} → {after[0]:.1f} |"
        )
    same = all(run["files"] == runs[0]["files"] for run in runs)
    lines += ["", f"Files left: {len(runs[0]['files'])} each; every run the same bytes (SHA-256 per file): {same}"]
    if not same:
        for run in runs[1:]:
            differ = sorted(
                k
                for k in run["files"].keys() | runs[0]["files"].keys()
                if run["files"].get(k) != runs[0]["files"].get(k)
            )
            lines.append(f"{run['master']} differs from {runs[0]['master']} in: {', '.join(differ)}")
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dir",
        type=Path,
        help="where the input is built and kept, and the copies go (default: a temporary one, removed)",
    )
    parser.add_argument("--size-mib", type=int, default=2048)
    parser.add_argument("--keys", type=int, default=8_000_000)
    parser.add_argument("--records", type=int, default=0, help="records to send (instead of --size-mib)")
    parser.add_argument("--value-bytes", default="100:400", metavar="MIN:MAX")
    parser.add_argument("--segment-mib", type=int, default=128)
    parser.add_argument("--master", action="append", help="a Spark master to run on (default local[1], local[2])")
    parser.add_argument(
        "--cluster", type=int, default=0, metavar="N", help="also run on a standalone cluster of N workers"
    )
    parser.add_argument("--rounds", type=int, default=1, help="compactions a run (fresh copies): the best counts")
    parser.add_argument("--in-place", action="store_true", help="compact DIR/input itself: one run, no copy")
    parser.add_argument("--build-only", action="store_true", help="build DIR/input and stop")
    parser.add_argument(
        "--tuning", action="append", default=[], metavar="NAME=INT", help="a kafkalog.tuning knob for every run"
    )
    parser.add_argument("--json", type=Path)
    # a run's own process (one_run)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--copy", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--pristine", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--now", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--segment-bytes", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--conf", action="append", default=[], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    exit_on_sigterm()
    temporary = args.dir is None
    args.dir = args.dir or Path(tempfile.mkdtemp(prefix="kafkalog-range-scaling-"))
    args.dir.mkdir(parents=True, exist_ok=True)
    try:
        measure(args, parser, argv)
    finally:
        if temporary:
            shutil.rmtree(args.dir, ignore_errors=True)


def measure(args, parser, argv) -> None:
    built = build(args, args.dir)
    print(json.dumps(built), file=sys.stderr, flush=True)
    if args.build_only:
        return
    masters = args.master or ([] if args.in_place or args.cluster else ["local[1]", "local[2]"])
    if args.in_place and len(masters) + bool(args.cluster) != 1:
        parser.error("--in-place compacts the input once: give one --master or --cluster")
    runs = []
    for master in masters:
        runs.append(one_run(args, built, master, [], []))
        print(f"{master}: {runs[-1]['seconds']:.1f} s", file=sys.stderr, flush=True)
    if args.cluster:
        runs.append(on_cluster(args, built, args.cluster))
        print(f"{runs[-1]['master']}: {runs[-1]['seconds']:.1f} s", file=sys.stderr, flush=True)
    command = " ".join([".venv/bin/python benchmarks/range_scaling.py", *(argv if argv is not None else sys.argv[1:])])
    print("\n".join(render(built, runs, command)), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"input": built, "runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
