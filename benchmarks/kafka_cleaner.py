"""Kafka's own LogCleaner (one cleaner thread) against `kafkalog compact` (the CLI, Spark local[2]), on the
same log produced through a real Apache Kafka 4.3 broker, on the same machine, in one run.

    .venv/bin/python benchmarks/kafka_cleaner.py [--size-mib 1024] [--keys 1000000] [--partitions 4] [--small]
        [--dedupe-buffer-mib 128] [--beyond-one-pass]

A single-node KRaft broker (tests/kafka/broker.py) gets a compacted lz4 topic created with a week of
`min.compaction.lag.ms`, so that its cleaner leaves it alone, and benchmarks/BulkProducer.java fills it
with keyed updates (keys drawn uniformly from `--keys`, JSON-like values of 100-400 bytes; Kafka's default
idempotent producer) until `--size-mib` of record batches are written. The broker is stopped and its
log dir copied for kafkalog. Kafka: the broker is started again, the topic altered to
`min.compaction.lag.ms=0` (kafka-configs.sh's ConfigCommand), and the wall time runs from that command's
return to the last partition's "Log cleaner thread 0 cleaned log" line; the cleaner's own statistics
(its "MB of log processed in S seconds" lines; Kafka's MB are MiB) are reported too. kafkalog:
`python -m kafkalog compact COPY --force --now MS --topic T --topic-config ...`, timed as a user runs it
(the whole command, Spark's start included), then, in this process's own session, `compact(force=True)`
on fresh copies (`--session-rounds`): the first compaction of a started session and a warm one. The two
results are then compared: every partition's surviving records (offset, key, value hash, timestamp)
read from both directories must be the same, and the segment and index files are compared byte for
byte. Load averages (1, 5, 15 minutes) are taken before and after each measured phase.

The broker runs with Kafka's default cleaner buffer (`log.cleaner.dedupe.buffer.size`, 128 MiB, one
pass holds 5.0 million keys) and the test harness's `log.cleaner.backoff.ms=1000` (Kafka's default is
15 s: the cleaner would then notice the change up to 15 s later). Prints a Markdown report on stdout and
a JSON object on stderr (and into `--json FILE`).

`--beyond-one-pass`: one partition with more distinct keys than the cleaner's map holds, so that Kafka
needs several passes (3,500,000 keys, one partition, a 16 MiB `log.cleaner.dedupe.buffer.size`: about
629,000 keys a pass; each default can be given). Kafka's cleaner maps the dirty range from its start
until the map holds `buffer / threads / 24 bytes * 0.9` keys (SkimpyOffsetMap: an MD5 hash and an offset
a slot; `log.cleaner.io.buffer.load.factor`), cleans the log up to the last offset it mapped, checkpoints
there and starts the next pass from that offset (LogCleaner's Cleaner.doClean and buildOffsetMap). The
topic gets `min.compaction.lag.ms=0` and `min.cleanable.dirty.ratio=0` (kafkalog the same): with the
default ratio of 0.5 Kafka stops once the cleaned part outweighs the rest, and the range would not be
clean until more is written. The time is the same as always (to the "cleaned log" line that reaches the
active segment); the result adds the passes per partition (its statistics lines) and the map's size.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
# kafkalog from this checkout in the driver, the CLI's process and Spark's Python workers alike (not from
# wherever the virtual environment's editable install points)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))

import tests.kafka.broker as harness  # noqa: E402
from tests.kafka.broker import Broker, KafkaTools, kafka_libs  # noqa: E402

HERE = Path(__file__).resolve().parent
PRODUCER = HERE / "BulkProducer.java"
MIB = 1 << 20
WEEK_MS = 7 * 24 * 3600 * 1000
BROKER_HEAP = "-Xmx1g"  # the harness's 512m is tight next to the cleaner's 128 MiB buffer
CLEANER_BUFFER = 128 * MIB  # Kafka's default log.cleaner.dedupe.buffer.size (the harness sets 16 MiB)
# --beyond-one-pass: the defaults it changes (the production scale of the issue: 16 MiB for ~600k keys a pass)
BEYOND_ONE_PASS = {"keys": 3_500_000, "partitions": 1, "dedupe_buffer_mib": 16}
# SkimpyOffsetMap: an MD5 hash (16 bytes) and an offset (8) a slot, filled to the load factor (default 0.9)
MAP_BYTES_PER_ENTRY, MAP_LOAD_FACTOR = 24, 0.9


# -- shared with kafka_source.py ------------------------------------------------------------------------------
def loadavg() -> list[float]:
    """The load averages `uptime` prints (1, 5 and 15 minutes)."""
    return [round(x, 2) for x in os.getloadavg()]


def fmt_load(before: list[float], after: list[float]) -> str:
    return f"{before[0]:.2f} / {before[1]:.2f} / {before[2]:.2f} → {after[0]:.2f} / {after[1]:.2f} / {after[2]:.2f}"


class CpuSampler:
    """CPU seconds (user + system) used while the block runs by the processes `roots` and all their
    descendants, sampled every `interval` s (a process that starts and ends between two samples is
    missed; Spark's Python workers are reused, so they live through a job). `by_kind()` sums them
    as the broker, Spark's JVM, its Python workers and other processes."""

    def __init__(self, *roots, broker_pid: int | None = None, interval: float = 0.2):
        import psutil

        self.roots = [r if isinstance(r, psutil.Process) else psutil.Process(r) for r in roots]
        self.broker_pid, self.interval = broker_pid, interval
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.names: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self, into: dict) -> None:
        import psutil

        for root in self.roots:
            try:
                tree = [root] + root.children(recursive=True)
            except psutil.Error:
                continue
            for proc in tree:
                try:
                    times = proc.cpu_times()
                    into[proc.pid] = times.user + times.system
                    self.names[proc.pid] = proc.name()  # the latest: spark-submit's bash execs java
                except psutil.Error:
                    pass

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample(self.last)

    def __enter__(self) -> CpuSampler:
        self._sample(self.first)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample(self.last)

    def by_kind(self) -> dict[str, float]:
        out = {"broker": 0.0, "jvm": 0.0, "python": 0.0, "other": 0.0}
        for pid, used in self.last.items():
            name = self.names.get(pid, "")
            kind = (
                "broker"
                if pid == self.broker_pid
                else "jvm"
                if name == "java"
                else "python"
                if name.startswith("python")
                else "other"
            )
            out[kind] += used - self.first.get(pid, 0.0)
        return {k: round(v, 2) for k, v in out.items()}


def exit_on_sigterm() -> None:
    """SIGTERM (and SIGHUP) exit through Python's `finally` blocks, so that the broker is stopped."""

    def handler(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGHUP, handler)


def start_kafka(
    base: Path, overrides: dict | None = None, dedupe_buffer: int = CLEANER_BUFFER
) -> tuple[KafkaTools, Broker]:
    """Kafka's tools and a formatted single-node broker (not started) under `base`."""
    harness.HEAP = BROKER_HEAP  # read by Broker.start
    tools = KafkaTools(kafka_libs(), base / "tools")
    broker = Broker(
        tools, base / "broker", overrides={"log.cleaner.dedupe.buffer.size": str(dedupe_buffer), **(overrides or {})}
    )
    return tools, broker


def map_capacity(dedupe_buffer: int, threads: int = 1) -> int:
    """The keys one pass of Kafka's cleaner maps at most: its share of the dedupe buffer in slots of
    SkimpyOffsetMap, times the load factor (Cleaner.buildOffsetMapForSegment's maxDesiredMapSize)."""
    return int(dedupe_buffer // threads // MAP_BYTES_PER_ENTRY * MAP_LOAD_FACTOR)


def segment_bytes_for(size_mib: int, partitions: int) -> int:
    """About eight segments a partition (seven cleanable), at least Kafka's minimum of 1 MiB."""
    return max(1, size_mib // partitions // 8) * MIB


def produce(
    tools: KafkaTools,
    broker: Broker,
    topic: str,
    *,
    partitions: int,
    size_mib: int,
    keys: int,
    configs: dict,
    compression: str = "lz4",
    seed: int = 1,
    tombstone_ratio: float = 0.0,
    records: int = 0,
    value_bytes: tuple[int, int] = (100, 400),
) -> dict:
    """BulkProducer.java: create `topic` with `configs`, then send keyed records until `size_mib` MiB of
    record batches are written (or `records` records, when given), with values of `value_bytes` (min, max).
    Returns what it printed (records, bytes, seconds)."""
    args = [
        "--bootstrap",
        broker.bootstrap,
        "--topic",
        topic,
        "--partitions",
        str(partitions),
        *(["--records", str(records)] if records else ["--bytes", str(size_mib * MIB)]),
        "--value-min",
        str(value_bytes[0]),
        "--value-max",
        str(value_bytes[1]),
        "--keys",
        str(keys),
        "--compression",
        compression,
        "--seed",
        str(seed),
        "--tombstone-ratio",
        str(tombstone_ratio),
    ]
    for key, value in configs.items():
        args += ["--config", f"{key}={value}"]
    command = [
        tools.java_bin,
        "-Xmx1g",
        "-XX:+UseParallelGC",
        f"-Dlog4j2.configurationFile={tools.tools_log4j}",
        "-cp",
        tools.classpath,
        str(PRODUCER),
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"BulkProducer exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def partition_dirs(log_dir: Path, topic: str) -> dict[int, Path]:
    out = {}
    for entry in log_dir.iterdir():
        name, _, number = entry.name.rpartition("-")
        if entry.is_dir() and name == topic and number.isdigit():
            out[int(number)] = entry
    return dict(sorted(out.items()))


def segment_files(partition_dir: Path, suffix: str = ".log") -> dict[int, Path]:
    """A partition's live files of one kind by base offset (not .deleted, .cleaned or .swap ones)."""
    return {
        int(p.name[: -len(suffix)]): p
        for p in partition_dir.iterdir()
        if p.name.endswith(suffix) and p.name[: -len(suffix)].isdigit()
    }


def log_bytes(log_dir: Path, topic: str) -> tuple[int, int]:
    """(.log bytes, segments) of `topic` in `log_dir`."""
    sizes = [p.stat().st_size for d in partition_dirs(log_dir, topic).values() for p in segment_files(d).values()]
    return sum(sizes), len(sizes)


def kafka_version(tools: KafkaTools) -> str:
    jars = sorted(tools.libs.glob("kafka_2.13-*.jar"))
    return jars[0].name[len("kafka_2.13-") : -len(".jar")] if jars else "?"


def java_version(tools: KafkaTools) -> str:
    done = subprocess.run([tools.java_bin, "-version"], capture_output=True, text=True)
    return (done.stderr.splitlines() or ["?"])[0].replace("openjdk version ", "OpenJDK ").replace('"', "")


def machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} CPUs, {memory:.0f} GiB, python {sys.version.split()[0]}"


def report(markdown: list[str], result: dict, json_path: Path | None) -> None:
    print("\n".join(markdown))
    text = json.dumps(result, indent=1, default=str)
    print(text, file=sys.stderr)
    if json_path:
        json_path.write_text(text + "\n")


# -- Kafka's cleaner ---------------------------------------------------------------------------------------------
STATS = re.compile(
    r"Log cleaner thread (?P<thread>\d+) cleaned log (?P<log>\S+) "
    r"\(dirty section = \[(?P<start>\d+), (?P<end>\d+)\]\)\s*"
    r"(?P<mb>[\d,.]+) MB of log processed in (?P<secs>[\d,.]+) seconds \((?P<rate>[\d,.]+) MB/sec\)\.\s*"
    r"Indexed (?P<index_mb>[\d,.]+) MB in (?P<index_secs>[\d,.]+) seconds.*?"
    r"Buffer utilization: (?P<buffer>[\d,.]+)%\s*"
    r"Cleaned (?P<clean_mb>[\d,.]+) MB in (?P<clean_secs>[\d,.]+) seconds.*?"
    r"Start size: (?P<start_mb>[\d,.]+) MB \((?P<start_msgs>[\d,]+) messages\)\s*"
    r"End size: (?P<end_mb>[\d,.]+) MB \((?P<end_msgs>[\d,]+) messages\)",
    re.S,
)
LOG_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]", re.M)


def cleaner_stats(broker: Broker, topic: str) -> list[dict]:
    """LogCleaner's statistics of this start for `topic`'s logs (its CleanerThread logs them into server.log),
    each with the time of its log line."""
    text = broker.server_log() + "\n" + broker.cleaner_log()
    out = []
    for m in STATS.finditer(text):
        if m["log"].rpartition("-")[0] != topic:
            continue
        stamps = LOG_TIME.findall(text, 0, m.start())
        row = {k: float(v.replace(",", "")) for k, v in m.groupdict().items() if k not in ("log", "thread")}
        row.update(log=m["log"], logged_at=stamps[-1] if stamps else None)
        out.append(row)
    return out


def log_time(stamp: str) -> float:
    """A log4j timestamp of the broker's log (its local time zone, this machine's) as epoch seconds."""
    return time.mktime(time.strptime(stamp[:19], "%Y-%m-%d %H:%M:%S")) + int(stamp[20:]) / 1000


def alter_topic(tools: KafkaTools, broker: Broker, topic: str, configs: dict) -> None:
    """kafka-configs.sh --alter --entity-type topics --entity-name TOPIC --add-config k=v,..."""
    tools.java(
        [
            "kafka.admin.ConfigCommand",
            "--bootstrap-server",
            broker.bootstrap,
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            topic,
            "--add-config",
            ",".join(f"{k}={v}" for k, v in configs.items()),
        ],
        timeout=120,
    )


def wait_cleaned(broker: Broker, topic: str, ends: dict[int, int], timeout: float) -> float:
    """Poll until LogCleaner has cleaned every partition of `topic` up to `ends` (its active segment's
    base offset, the first uncleanable offset); returns time.perf_counter() when it saw that."""
    deadline = time.monotonic() + timeout
    while True:
        sections = {p: broker.cleaned_sections(f"{topic}-{p}") for p in ends}
        if all(s and max(e for _, e in s) >= ends[p] for p, s in sections.items()):
            return time.perf_counter()
        if not broker.running or time.monotonic() > deadline:
            raise RuntimeError(
                f"Kafka's LogCleaner did not clean {topic} up to {ends} within {timeout}s: {sections}\n"
                f"{broker.cleaner_log()[-4000:]}"
            )
        time.sleep(0.1)


# -- comparing the two results -----------------------------------------------------------------------------------
def survivors(spark, log_dir: Path, topic: str):
    """Every record of `topic` in `log_dir`: partition, offset, key, a hash of the value, timestamp."""
    return (
        spark.read.format("kafkalog")
        .option("topics", topic)
        .load(str(log_dir))
        .selectExpr(
            "partition", "offset", "key", "xxhash64(value) AS value_hash", "value IS NULL AS tombstone", "timestamp"
        )
    )


def compare(spark, kafka_dir: Path, ours_dir: Path, topic: str) -> dict:
    """Record counts per partition in both results, the records that are in one but not the other, and
    the segment files compared byte for byte, and batch by batch where they differ."""
    kafka, ours = survivors(spark, kafka_dir, topic), survivors(spark, ours_dir, topic)
    counts = {}
    for name, df in (("kafka", kafka), ("kafkalog", ours)):
        for row in df.groupBy("partition").agg({"*": "count", "offset": "max"}).collect():
            entry = counts.setdefault(row["partition"], {})
            entry[name] = row["count(1)"]
            entry["log_end_offset"] = row["max(offset)"] + 1  # the last record is in the active segment: kept
    only_kafka = kafka.exceptAll(ours).count()
    only_ours = ours.exceptAll(kafka).count()
    files = {}
    ours_parts = partition_dirs(ours_dir, topic)
    for suffix in (".log", ".index", ".timeindex"):
        same = total = 0
        for p, kdir in partition_dirs(kafka_dir, topic).items():
            k_files, o_files = segment_files(kdir, suffix), segment_files(ours_parts[p], suffix)
            total += len(set(k_files) | set(o_files))
            same += sum(1 for base in set(k_files) & set(o_files) if _sha(k_files[base]) == _sha(o_files[base]))
        files[suffix] = {"identical": same, "files": total}
    batches = {"batches": 0, "identical": 0, "same_header_and_records": 0, "different": 0, "not_compared": 0}
    for p, kdir in partition_dirs(kafka_dir, topic).items():
        k_files, o_files = segment_files(kdir), segment_files(ours_parts[p])
        for base in sorted(set(k_files) | set(o_files)):
            k_b = list(read_batches(k_files[base])) if base in k_files else []
            o_b = list(read_batches(o_files[base])) if base in o_files else []
            batches["batches"] += max(len(k_b), len(o_b))
            batches["different"] += abs(len(k_b) - len(o_b))
            for (k_head, k_raw), (o_head, o_raw) in zip(k_b, o_b):
                if k_raw == o_raw:
                    batches["identical"] += 1
                elif k_head != o_head:
                    batches["different"] += 1
                else:
                    k_plain, o_plain = records_section(k_head, k_raw), records_section(o_head, o_raw)
                    key = (
                        "not_compared"
                        if k_plain is None or o_plain is None
                        else "same_header_and_records"
                        if k_plain == o_plain
                        else "different"
                    )
                    batches[key] += 1
    return {
        "partitions": counts,
        "only_in_kafka": only_kafka,
        "only_in_kafkalog": only_ours,
        "files": files,
        "batches": batches,
    }


# a v2 record batch's header: base offset, length, leader epoch, magic, CRC, attributes, last offset delta,
# first and max timestamps, producer id and epoch, base sequence, record count (61 bytes)
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")


def read_batches(path: Path):
    """(header without length and CRC, batch bytes) of every v2 batch of a segment file."""
    data = path.read_bytes()
    pos = 0
    while pos + BATCH_HEADER.size <= len(data):
        fields = BATCH_HEADER.unpack_from(data, pos)
        end = pos + 12 + fields[1]
        if fields[3] != 2 or end > len(data):
            raise ValueError(f"{path}: no v2 batch at {pos}")
        yield fields[:1] + fields[2:4] + fields[5:], data[pos:end]
        pos = end


def records_section(header: tuple, raw: bytes) -> bytes | None:
    """A batch's records, uncompressed (None for a codec not compared here: snappy)."""
    import gzip

    import lz4.frame
    import zstandard

    payload, codec = raw[BATCH_HEADER.size :], header[3] & 7
    if codec == 0:
        return payload
    if codec == 1:
        return gzip.decompress(payload)
    if codec == 3:
        return lz4.frame.decompress(payload)
    if codec == 4:
        return zstandard.ZstdDecompressor().decompressobj().decompress(payload)
    return None


def _sha(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 * MIB):
            digest.update(chunk)
    return digest.hexdigest()


# -- the benchmark -------------------------------------------------------------------------------------------------
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="MiB of record batches to produce (default 1024)")
    parser.add_argument("--keys", type=int, default=1_000_000, help="distinct keys (default 1,000,000)")
    parser.add_argument("--small", action="store_true", help="a quick try: 50 MiB over 50,000 keys")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--compression", default="lz4")
    parser.add_argument(
        "--tombstone-ratio",
        type=float,
        default=0.0,
        help="share of tombstones (default 0: then no delete horizon depends on the clock, "
        "and the two results can be compared byte for byte)",
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--session-rounds",
        type=int,
        default=2,
        help="in-process compactions in one started session after the CLI's (0: none)",
    )
    parser.add_argument(
        "--tuning",
        action="append",
        default=[],
        metavar="NAME=INT",
        help="a kafkalog.tuning knob for the in-session rounds (not the CLI's), e.g. ONE_TASK_BYTES=0 to take "
        "a partition below 512 MiB by the path of larger ones; may be repeated",
    )
    parser.add_argument(
        "--window-rounds",
        type=int,
        default=0,
        help="then as many in the same session by the window path (tuning.LARGE_PARTITIONS=window), "
        "for partitions too large for one task (default 0: none)",
    )
    parser.add_argument("--dir", type=Path, help="working directory (default: a temporary one, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the working directory")
    parser.add_argument("--json", type=Path, help="also write the JSON result there")
    parser.add_argument(
        "--dedupe-buffer-mib",
        type=int,
        default=CLEANER_BUFFER // MIB,
        help="the broker's log.cleaner.dedupe.buffer.size in MiB (default 128, Kafka's)",
    )
    parser.add_argument(
        "--beyond-one-pass",
        action="store_true",
        help="more distinct keys than Kafka's cleaner maps in one pass: defaults to "
        + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in BEYOND_ONE_PASS.items())
        + ", and min.cleanable.dirty.ratio=0 so that Kafka's cleaner runs its passes back to back",
    )
    args = parser.parse_args(argv)
    if args.beyond_one_pass:  # its defaults, under whatever is given on the command line
        parser.set_defaults(**BEYOND_ONE_PASS)
        args = parser.parse_args(argv)
    run_with_broker(args, "kafkalog-kafka-cleaner-", run, render)


def run_with_broker(args, prefix: str, run, render) -> None:
    """What each Kafka benchmark does around its measurement: `--small` applied, a working directory
    (`--dir`, else a temporary one, removed unless `--keep`), a broker started in it and stopped
    whatever happens (SIGTERM included), then `run(args, base, tools, broker)`'s result rendered
    and reported (`--json`)."""
    if args.small:
        args.size_mib, args.keys = 50, 50_000
    exit_on_sigterm()
    base = args.dir or Path(tempfile.mkdtemp(prefix=prefix))
    base.mkdir(parents=True, exist_ok=True)
    broker = None
    try:
        tools, broker = start_kafka(base, dedupe_buffer=getattr(args, "dedupe_buffer_mib", CLEANER_BUFFER // MIB) * MIB)
        result = run(args, base, tools, broker)
    finally:
        if broker is not None:
            broker.close()
        if not args.keep and args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    report(render(args, result), result, args.json)


def run(args, base: Path, tools: KafkaTools, broker: Broker) -> dict:
    topic = "updates"
    segment_bytes = segment_bytes_for(args.size_mib, args.partitions)
    created = {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes), "min.compaction.lag.ms": str(WEEK_MS)}
    clean_now = {"min.compaction.lag.ms": "0"}
    if args.beyond_one_pass:
        clean_now["min.cleanable.dirty.ratio"] = "0"  # one pass after the other, until the range is clean
    result: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": machine(),
        "java": java_version(tools),
        "kafka_version": kafka_version(tools),
        "topic": topic,
        "partitions": args.partitions,
        "keys": args.keys,
        "compression": args.compression,
        "segment_bytes": segment_bytes,
        "tombstone_ratio": args.tombstone_ratio,
        "dedupe_buffer_bytes": args.dedupe_buffer_mib * MIB,
        "map_keys_per_pass": map_capacity(args.dedupe_buffer_mib * MIB),
        "beyond_one_pass": args.beyond_one_pass,
        "load": {},
    }
    say = lambda text: print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)  # noqa: E731

    broker.start()
    load = loadavg()
    produced = produce(
        tools,
        broker,
        topic,
        partitions=args.partitions,
        size_mib=args.size_mib,
        keys=args.keys,
        configs=created,
        compression=args.compression,
        tombstone_ratio=args.tombstone_ratio,
    )
    result["load"]["produce"] = [load, loadavg()]
    result["produced"] = produced
    broker.stop()
    nbytes, segments = log_bytes(broker.log_dir, topic)
    result.update(log_bytes=nbytes, segments=segments)
    say(
        f"produced {produced['records']:,} records in {produced['seconds']:.0f} s: {nbytes / MIB:,.0f} MiB of .log "
        f"in {segments} segments"
    )

    pristine, copy = base / "input", base / "kafkalog-cli"  # the stopped broker's log dir, before any cleaning
    shutil.copytree(broker.log_dir, pristine)
    shutil.copytree(pristine, copy)
    ends = {p: max(segment_files(d)) for p, d in partition_dirs(copy, topic).items()}  # active segments' bases

    # Kafka's LogCleaner
    broker.start()
    time.sleep(2)
    load = loadavg()
    with CpuSampler(broker.process.pid, broker_pid=broker.process.pid) as cpu:
        altering = time.perf_counter()
        alter_topic(tools, broker, topic, clean_now)
        altered = time.perf_counter()
        now_ms = int(time.time() * 1000)
        done = wait_cleaned(broker, topic, ends, timeout=7200)
    result["load"]["kafka"] = [load, loadavg()]
    stats = cleaner_stats(broker, topic)
    broker.stop()
    begun = [
        log_time(s)
        for s in re.findall(
            r"^\[([^\]]+)\] INFO Cleaner \d+: Beginning cleaning of log " + topic, broker.cleaner_log(), re.M
        )
    ]
    result["kafka"] = {
        "wall_seconds": done - altered,
        "cpu": cpu.by_kind(),
        "wall_seconds_with_config_command": done - altering,
        "logged_span_seconds": (
            max(log_time(s["logged_at"]) for s in stats) - min(begun)
            if stats and begun and all(s["logged_at"] for s in stats)
            else None
        ),
        "cleaner_seconds": sum(s["secs"] for s in stats),
        "cleaner_mib": sum(s["mb"] for s in stats),
        "passes": stats,
        "pass_count": len(stats),
        "passes_per_partition": passes_per_partition(stats),
    }
    say(f"Kafka's LogCleaner: {done - altered:.1f} s from the config change ({len(stats)} passes)")

    # kafkalog, the CLI as a user runs it
    settings = {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes), **clean_now}
    cli = [
        sys.executable,
        "-m",
        "kafkalog",
        "compact",
        str(copy),
        "--force",
        "--now",
        str(now_ms),
        "--topic",
        topic,
        "--master",
        args.master,
        "--report",
        str(base / "kafkalog-report.json"),
    ]
    for key, value in settings.items():
        cli += ["--topic-config", f"{topic}:{key}={value}"]
    result["kafkalog_command"] = " ".join(cli[1:]).replace(str(base), "$WORK")
    time.sleep(2)
    load = loadavg()
    started = time.perf_counter()
    with open(base / "kafkalog-cli.out", "w+") as out, open(base / "kafkalog-cli.err", "w+") as err:
        process = subprocess.Popen(cli, stdout=out, stderr=err, cwd=REPO)
        try:
            with CpuSampler(process.pid) as cpu:
                process.wait()
        finally:
            if process.poll() is None:
                process.kill()
        cli_seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        ran = subprocess.CompletedProcess(cli, process.returncode, out.read(), err.read())
    result["load"]["kafkalog_cli"] = [load, loadavg()]
    if ran.returncode != 0:
        raise RuntimeError(f"kafkalog compact exited {ran.returncode}:\n{ran.stdout[-3000:]}\n{ran.stderr[-3000:]}")
    result["kafkalog"] = {
        "cli_seconds": cli_seconds,
        "cli_cpu": cpu.by_kind(),
        "report": _report_totals(base / "kafkalog-report.json"),
    }
    say(f"kafkalog compact (CLI): {cli_seconds:.1f} s")

    # kafkalog in a started session (Spark's start not counted), on fresh copies of the same input
    from kafkalog import tuning
    from kafkalog.config import resolver_from
    from kafkalog.spark import local_session

    for knob in args.tuning:
        name, _, value = knob.partition("=")
        setattr(tuning, name, int(value))
    result["tuning"] = args.tuning
    started = time.perf_counter()
    spark = local_session("kafkalog-bench", args.master)
    spark.range(4).count()
    result["kafkalog"]["session_start_seconds"] = time.perf_counter() - started
    rounds, cpus = [], []
    try:
        config = resolver_from(topic_settings=[f"{topic}:{k}={v}" for k, v in settings.items()])
        for i in range(args.session_rounds):
            seconds, cpu, loads = timed_compaction(spark, pristine, base / "kafkalog-session", config, now_ms, topic)
            rounds.append(seconds)
            cpus.append(cpu)
            result["load"][f"kafkalog_session_{i + 1}"] = loads
            say(f"kafkalog compact (session round {i + 1}): {rounds[-1]:.1f} s")
        result["kafkalog"]["session_rounds"] = rounds
        result["kafkalog"]["session_cpu"] = cpus
        if args.window_rounds:
            result["kafkalog"].update(window_rounds(args, spark, pristine, base, config, now_ms, topic, result))
        result["comparison"] = compare(spark, broker.log_dir, copy, topic)
    finally:
        spark.stop()
    return result


def timed_compaction(spark, pristine: Path, work: Path, config, now_ms: int, topic: str) -> tuple:
    """One compaction in the started session of a fresh copy of `pristine` at `work`: (seconds, CPU by
    kind, the load average before and after)."""
    from kafkalog.operations.compact import compact

    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(pristine, work)
    time.sleep(2)
    load = loadavg()
    with CpuSampler(os.getpid()) as cpu:
        started = time.perf_counter()
        compact(spark, str(work), config, now_ms, force=True, topics=[topic])
        seconds = time.perf_counter() - started
    return seconds, cpu.by_kind(), [load, loadavg()]


def window_rounds(args, spark, pristine: Path, base: Path, config, now_ms: int, topic: str, result: dict) -> dict:
    """`--window-rounds`: compactions of fresh copies by the window path in the started session, their
    times and CPU, and whether they wrote the same files as the session's rounds (the last one's copy)."""
    from kafkalog import tuning

    rounds, cpus = [], []
    work = base / "kafkalog-window"
    default, tuning.LARGE_PARTITIONS = tuning.LARGE_PARTITIONS, "window"
    try:
        for i in range(args.window_rounds):
            seconds, cpu, loads = timed_compaction(spark, pristine, work, config, now_ms, topic)
            rounds.append(seconds)
            cpus.append(cpu)
            result["load"][f"kafkalog_window_{i + 1}"] = loads
            print(f"kafkalog compact (window path, round {i + 1}): {rounds[-1]:.1f} s", file=sys.stderr, flush=True)
    finally:
        tuning.LARGE_PARTITIONS = default
    session = base / "kafkalog-session"
    files = lambda root: {p.relative_to(root): _sha(p) for p in sorted(root.rglob("*")) if p.is_file()}  # noqa: E731
    return {"window_rounds": rounds, "window_cpu": cpus, "window_same_files": files(work) == files(session)}


def passes_per_partition(stats: list[dict]) -> dict[str, int]:
    """How many passes Kafka's cleaner made over each log: one statistics line ("Log cleaner thread 0
    cleaned log ...") a pass."""
    counts: dict[str, int] = {}
    for row in stats:
        counts[row["log"]] = counts.get(row["log"], 0) + 1
    return dict(sorted(counts.items()))


def _report_totals(path: Path) -> dict:
    """kafkalog's --report: records kept and removed per partition, by reason."""
    try:
        return {"records": json.loads(path.read_text()).get("records", [])}
    except (OSError, ValueError, AttributeError):
        return {}


def render(args, r: dict) -> list[str]:
    mb = r["log_bytes"] / 1e6
    k = r["kafka"]
    baseline = k["wall_seconds"]
    total = lambda cpu: f"{sum(cpu.values()):.1f} (JVM {cpu['jvm']:.1f}, Python {cpu['python']:.1f})"  # noqa: E731
    rows = [
        (
            'Kafka\'s LogCleaner, 1 thread: config change → last "cleaned log" line',
            baseline,
            f"{k['cpu']['broker']:.1f} (the broker)",
        ),
        ('Kafka\'s LogCleaner: its own time (sum of its "processed in" seconds)', k["cleaner_seconds"], ""),
        (
            f"`kafkalog compact` CLI, whole command with Spark's start ({args.master})",
            r["kafkalog"]["cli_seconds"],
            total(r["kafkalog"]["cli_cpu"]),
        ),
    ]
    for i, (s, cpu) in enumerate(zip(r["kafkalog"].get("session_rounds", []), r["kafkalog"].get("session_cpu", []))):
        rows.append(
            (
                f"`compact(force=True)` in a started session, round {i + 1}"
                + (" (the session's first)" if i == 0 else " (warm)"),
                s,
                total(cpu),
            )
        )
    for i, (s, cpu) in enumerate(zip(r["kafkalog"].get("window_rounds", []), r["kafkalog"].get("window_cpu", []))):
        rows.append((f"the same by the window path (every record through Spark), round {i + 1}", s, total(cpu)))
    produced = r["produced"]
    cmp_ = r["comparison"]
    b = cmp_["batches"]
    kept_kafka = sum(p.get("kafka", 0) for p in cmp_["partitions"].values())
    kept_ours = sum(p.get("kafkalog", 0) for p in cmp_["partitions"].values())
    # Kafka's "End size: N messages" against kafkalog's report: the records kept below the cleaned offset
    kafka_kept = {p["log"]: p["end_msgs"] for p in k["passes"]}
    ours_kept = {f"{x['topic']}-{x['partition']}": x["kept"] for x in r["kafkalog"]["report"].get("records", [])}
    agree = "agree" if kafka_kept == ours_kept else f"disagree (Kafka {kafka_kept}, kafkalog {ours_kept})"
    out = [
        f"{produced['records']:,} records ({produced['tombstones']:,} tombstones) over {r['keys']:,} keys in "
        f"{r['partitions']} partitions, {r['compression']}, {r['log_bytes'] / MIB:,.0f} MiB ({mb:,.0f} MB) of .log "
        f"in {r['segments']} segments of {r['segment_bytes'] // MIB} MiB; Kafka {r['kafka_version']} "
        f"broker on 127.0.0.1, {r['java']}; {r['machine']}; {r['date']}",
        "",
        "| run | seconds | MB/s of .log | × Kafka's cleaner (wall) | CPU seconds |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, s, cpu in rows:
        out.append(f"| {name} | {s:.1f} | {mb / s:.1f} | {baseline / s:.2f}x | {cpu} |")
    passes = ", ".join(
        f"{p['log']} {p['mb']:,.1f} MiB in {p['secs']:.1f} s ({p['rate']:.1f} MiB/s, buffer "
        f"{p['buffer']:.0f}%, {p['start_msgs']:,.0f} → {p['end_msgs']:,.0f} messages)"
        for p in k["passes"]
    )
    out += [
        "",
        f'Kafka\'s cleaner statistics (its MB are MiB): {passes}; from the first "Beginning cleaning" to '
        f"the last statistics line in its own log: {k['logged_span_seconds'] or float('nan'):.1f} s; with the "
        f"ConfigCommand JVM's own run: {k['wall_seconds_with_config_command']:.1f} s.",
        "Kafka's cleaner passes: "
        + ", ".join(f"{log} {n}" for log, n in k["passes_per_partition"].items())
        + f" (its map holds {r['map_keys_per_pass']:,} keys a pass: a {r['dedupe_buffer_bytes'] / MIB:g} MiB dedupe "
        "buffer, one cleaner thread); kafkalog cleans the whole range in one pass."
        + (" Both topics had min.cleanable.dirty.ratio=0 (--beyond-one-pass)." if r["beyond_one_pass"] else ""),
        f"kafkalog session start {r['kafkalog']['session_start_seconds']:.1f} s (not counted)."
        + (
            f" The window path's files the same as the session's: {r['kafkalog']['window_same_files']}."
            if "window_same_files" in r["kafkalog"]
            else ""
        ),
        "",
        f"Outputs: {kept_kafka:,} records kept by Kafka, {kept_ours:,} by kafkalog "
        f"({1 - kept_kafka / produced['records']:.0%} removed); records in one output but not the other: "
        f"{cmp_['only_in_kafka']:,} in Kafka's, {cmp_['only_in_kafkalog']:,} in kafkalog's; byte-identical files: "
        + ", ".join(f"{v['identical']}/{v['files']} {s}" for s, v in cmp_["files"].items())
        + f"; of {b['batches']:,} batches {b['identical']:,} byte-identical, {b['same_header_and_records']:,} with "
        f"the same header and the same records uncompressed but other compressed bytes, {b['different']:,} "
        f"different"
        + (f", {b['not_compared']:,} not compared (snappy)" if b["not_compared"] else "")
        + f"; the records each kept below the cleaned offset (Kafka's \"End size\", kafkalog's report) {agree}.",
        "",
        "load average (1/5/15 min) before → after: "
        + "; ".join(f"{phase} {fmt_load(*pair)}" for phase, pair in r["load"].items()),
    ]
    return out


if __name__ == "__main__":
    main()
