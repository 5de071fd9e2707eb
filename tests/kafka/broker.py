"""A real Apache Kafka 4.x broker and Kafka's own tools and Java clients, for the tests of tests/kafka.

Plain Python (no pytest): the fixtures in conftest.py and anyone at a prompt can use it.

    from tests.kafka.broker import Broker, KafkaTools, kafka_libs

    tools = KafkaTools(kafka_libs(), "/tmp/work")
    broker = Broker(tools, "/tmp/broker")      # server.properties, formatted storage
    broker.start()                             # java -cp '<libs>/*' kafka.Kafka server.properties
    tools.produce(broker.bootstrap, runs=[...], topics=[...])   # tests/kafka/Producer.java
    broker.stop()                              # SIGTERM: controlled shutdown, .kafka_cleanshutdown
    ... rewrite broker.log_dir with kafkalog ...
    broker.start(); broker.server_log()        # the log lines of this start only

The jars come from Maven Central through scripts/kafka-jars.sh (tests/kafka/pom.xml) into a cache
outside the checkout; scripts/test.sh exports their directory as KAFKALOG_KAFKA_LIBS.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path

from kafkalog.spark.class_data import QUIET, is_archive
from tests.ports import free_port

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
LIBS_ENV = "KAFKALOG_KAFKA_LIBS"
JARS_SCRIPT = REPO / "scripts" / "kafka-jars.sh"
HEAP = "-Xmx512m"

# Kafka's own log lines (4.x: org.apache.kafka.storage.internals.log.LogLoader, LogSegment,
# ProducerStateManager, UnifiedLog; kafka.log.LogManager). Each means the broker did not take a
# partition directory as it found it: it recovered, rebuilt, truncated or deleted something.
RECOVERY_LINES = {
    "Recovering unflushed segment": "LogLoader.recoverLog: a segment above the recovery point is re-read "
    "and its indexes rebuilt (no clean shutdown)",
    "Found invalid offset during recovery": "LogLoader.recoverLog: a segment is deleted and recreated empty",
    "Corruption found in segment": "LogLoader.recoverLog: a segment is truncated and the rest of the log deleted",
    "Found invalid messages in log segment": "LogSegment.recover: invalid bytes, truncated away",
    "Found a corrupted index file": "LogLoader.loadSegmentFiles: index sanity check failed, index rebuilt",
    "Could not find offset index file": "LogLoader.loadSegmentFiles: missing .index, rebuilt",
    "recovering segment and rebuilding index files": "LogLoader.loadSegmentFiles: an index is rebuilt",
    "Found an orphaned index file": "LogLoader.loadSegmentFiles: an index without its .log, deleted",
    "Deleting segments as part of log recovery": "LogLoader: segments deleted while recovering",
    "from interrupted swap operation": "LogLoader: a .swap file left by an interrupted swap",
    "by renaming from": "LogLoader: a .swap file renamed into place at load",
    "that is compacted but has not been deleted yet": "LogLoader: segments replaced by a .swap deleted at load",
    "Deleting all segments because logEndOffset": "LogLoader: log end offset below the log start offset",
    "Truncating to offset": "UnifiedLog.truncateTo: the log is cut back",
    "Failed to load producer snapshot": "ProducerStateManager: a .snapshot file could not be read",
    "since no clean shutdown file was found": "LogManager: the whole log dir is recovered",
    "Caught segment overflow error": "LogLoader: a segment split because its offsets overflow the index",
}

METADATA_LOG_LOADER = "[LogLoader partition=__cluster_metadata-0,"

# Kafka's log lines when a replica's log is cut back, or its fetch offset reset, to agree with its
# leader's (4.x: UnifiedLog.truncateTo, LogTruncation, AbstractFetcherThread, LeaderEpochFileCache).
# A follower that starts fetching checks its log end against the leader's epochs and, when they agree,
# logs "Truncating partition P with TruncationState(offset=<its log end>, ...)" and "Truncating to
# <log end> has no effect as the largest offset in the log is <log end - 1>": nothing is cut, and
# neither line is one of these.
TRUNCATION_LINES = {
    "Truncating to offset": "UnifiedLog.truncateTo: the log is cut back",
    "below high watermark": "UnifiedLog.truncateTo: the log is cut back below its high watermark",
    "Deleting segments as part of log truncation": "LogTruncation: segments deleted by a truncation",
    "Truncate fully and reset fetch offset": "AbstractFetcherThread: the follower's log is emptied",
    "Reset fetch offset for partition": "AbstractFetcherThread: the follower's offset is out of the leader's range",
    "caused truncation of conflicting entries": "LeaderEpochFileCache: leader epochs that diverge are dropped",
    "diverg": "a log diverging from its leader's",
}

# DumpLogSegments (org.apache.kafka.tools.DumpLogSegments in 4.x) reports problems on stdout with these;
# everything it prints on stderr is a problem too (its mismatch reports, a failed sanity check's
# exception, a corrupt snapshot), except its "Non-consecutive offsets" report (with --deep-iteration:
# records whose offsets are not consecutive, which is what a compacted log is made of).
DUMP_PROBLEMS = (
    "invalid bytes at the end of",  # trailing bytes after the last batch
    "isvalid: false",  # a batch's CRC does not match (case-insensitive)
    "Exception",
    "Error",
)
DUMP_NOT_PROBLEMS = ("Non-consecutive offsets in ", " is followed by ", "WARNING: Using incubator modules")


class KafkaJarsMissing(RuntimeError):
    """The Kafka jars are not there and scripts/kafka-jars.sh could not fetch them."""


def kafka_libs(fetch: bool = True) -> Path:
    """The directory of the Kafka jars: $KAFKALOG_KAFKA_LIBS when set (scripts/test.sh sets it to
    what scripts/kafka-jars.sh printed, or to "unavailable: ..." when that failed: no second try),
    else what scripts/kafka-jars.sh prints (it fetches them from Maven Central on first use).
    Raises KafkaJarsMissing."""
    named = os.environ.get(LIBS_ENV)
    if named:
        path = Path(named)
        if _has_kafka(path):
            return path
        raise KafkaJarsMissing(
            f"the Kafka jars could not be fetched: ${LIBS_ENV}={named!r} is no directory of "
            "Kafka jars (scripts/kafka-jars.sh's output says why)"
        )
    if not fetch:
        raise KafkaJarsMissing(f"the Kafka jars could not be fetched: ${LIBS_ENV} is not set")
    try:
        done = subprocess.run(["bash", str(JARS_SCRIPT)], capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise KafkaJarsMissing(f"the Kafka jars could not be fetched: {JARS_SCRIPT} did not run: {err}") from None
    path = Path(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 and done.stdout.strip() else None
    if path is None or not _has_kafka(path):
        raise KafkaJarsMissing(
            f"the Kafka jars could not be fetched (scripts/kafka-jars.sh exited {done.returncode}):\n"
            f"{done.stderr.strip()[-3000:]}"
        )
    return path


def _has_kafka(path: Path) -> bool:
    return path.is_dir() and any(path.glob("kafka_2.13-*.jar"))


# Kafka's reference remote storage manager (kafka-storage's test jar, in tests/kafka/pom.xml)
LOCAL_TIERED_STORAGE = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"


def tiered_storage_overrides(remote_dir: str | Path) -> dict[str, str]:
    """Broker settings for tiered storage (KIP-405) into LocalTieredStorage under `remote_dir` (it
    keeps `remote_dir/kafka-tiered-storage/`), with the topic-based metadata manager's topic on this
    one broker, copying every half second."""
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": LOCAL_TIERED_STORAGE,
        "rsm.config.dir": str(remote_dir),
        "remote.log.metadata.manager.listener.name": "PLAINTEXT",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
        "remote.log.manager.task.interval.ms": "500",
    }


def random_cluster_id() -> str:
    """A cluster id as `kafka-storage random-uuid` makes it: 16 random bytes, URL-safe base64 without
    padding, never starting with '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class JavaError(RuntimeError):
    """A Java program (tool or client) failed; the message has its output."""


@dataclass
class DumpResult:
    """What DumpLogSegments printed for some files."""

    args: list
    stdout: str
    stderr: str
    returncode: int

    @property
    def problems(self) -> list[str]:
        """Lines that report a problem: on stderr every line but DUMP_NOT_PROBLEMS, on stdout the
        lines with one of DUMP_PROBLEMS; and a non-zero exit code."""
        found = [
            line for line in self.stderr.splitlines() if line.strip() and not any(p in line for p in DUMP_NOT_PROBLEMS)
        ]
        found += [line for line in self.stdout.splitlines() if any(p.lower() in line.lower() for p in DUMP_PROBLEMS)]
        if self.returncode != 0:
            found.append(f"exit code {self.returncode}")
        return found

    def timestamp_mismatches(self) -> list[tuple[str, int, int]]:
        """DumpLogSegments' "Found timestamp mismatch in :FILE" reports (--verify-index-only or a
        plain time index dump): (time index file, index timestamp, log timestamp) each. DumpLogSegments
        takes the log timestamp from the records of the batch the entry names, so an empty batch
        (count 0, kept by compaction for its producer's sequence numbers) shows -1."""
        out, current = [], None
        for line in self.stderr.splitlines():
            if line.startswith("Found timestamp mismatch in :"):
                current = line.split(":", 1)[1]
            elif current and line.startswith("  Index timestamp: "):
                index_ts, log_ts = line[len("  Index timestamp: ") :].split(", log timestamp: ")
                out.append((current, int(index_ts), int(log_ts)))
            else:
                current = None
        return out


class ClassData:
    """Class-data-sharing archives (Java's dynamic AppCDS, as kafkalog/spark/class_data.py keeps Spark's) of
    the JVMs started here, in `directory`: one per kind of start (its JVM options, class path and main
    class). The first start of a kind writes its archive as its JVM exits; later starts map it and read
    some thousands of Kafka's and Scala's classes no more out of the jars (DumpLogSegments on one
    segment: 0.4 s of CPU rather than 0.8; CONTRIBUTING.md has the suite's times). Only a speed-up: a
    JVM that cannot map an archive runs as without it, and an archive not written whole is removed (a
    later start of its kind writes it)."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._writing: set[Path] = set()

    def options(self, kind: list[str], *, write: bool = True) -> tuple[list[str], Path | None]:
        """The JVM options of a start of `kind`, and the part file its JVM writes (None: none), which
        `ended` keeps or removes once the JVM exited. One start of a kind at a time writes."""
        path = self.directory / f"{hashlib.sha1(chr(0).join(kind).encode()).hexdigest()[:16]}.jsa"
        if is_archive(str(path)):
            return [f"-XX:SharedArchiveFile={path}", QUIET], None
        with self._lock:
            if not write or path in self._writing:
                return [], None
            self._writing.add(path)
        part = path.with_name(f"{path.name}.part")
        return [f"-XX:ArchiveClassesAtExit={part}", QUIET], part

    def ended(self, part: Path | None, *, whole: bool) -> None:
        """The JVM that wrote `part` exited (`whole`: as it should): its archive is kept when it is one."""
        if part is None:
            return
        path = part.with_suffix("")
        if whole and is_archive(str(part)):
            os.replace(part, path)
        else:
            part.unlink(missing_ok=True)
        with self._lock:
            self._writing.discard(path)


class KafkaTools:
    """Kafka's Java programs on the jars of `libs`: DumpLogSegments, StorageTool, and this directory's
    Producer.java, Consumer.java and ClusterAdmin.java (Java's single-source launcher). `work_dir`
    holds the specs, the tools' log4j2 configuration and the class-data archives of the tools' and the
    brokers' JVMs (`ClassData`)."""

    def __init__(self, libs: str | Path, work_dir: str | Path, java: str = "java"):
        self.libs = Path(libs)
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.java_bin = java
        self.tools_log4j = self.work_dir / "tools-log4j2.properties"
        self.tools_log4j.write_text(TOOLS_LOG4J)
        self._counter = 0
        self._classes = None
        self.class_data = ClassData(self.work_dir / "class-data")

    @property
    def classpath(self) -> str:
        return str(self.libs / "*")

    def _java_command(
        self, args_and_classpath: tuple[list[str], str], heap: str = "-Xmx256m", *, write_class_data: bool = True
    ) -> tuple[list[str], Path | None]:
        """The command line, and the class-data archive's part file its JVM writes (`ClassData.options`)."""
        args, classpath = args_and_classpath
        options = [self.java_bin, heap, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
        class_data, part = self.class_data.options([*options, classpath, args[0]], write=write_class_data)
        return [
            *options,
            *class_data,
            f"-Dlog4j2.configurationFile={self.tools_log4j}",
            "-cp",
            classpath,
            *args,
        ], part

    def java(
        self,
        args: list[str],
        classpath: str | None = None,
        *,
        timeout: float = 300,
        check: bool = True,
        heap: str = "-Xmx256m",
    ) -> subprocess.CompletedProcess:
        """Run a Java main class (or a source file) on the Kafka jars; JavaError when it fails."""
        command, part = self._java_command((args, classpath or self.classpath), heap)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as err:
            self.class_data.ended(part, whole=False)
            raise JavaError(
                f"{' '.join(args[:3])} ran longer than {timeout}s:\n{_tail(err.stdout)}\n{_tail(err.stderr)}"
            ) from None
        self.class_data.ended(part, whole=done.returncode == 0)
        if check and done.returncode != 0:
            raise JavaError(
                f"{' '.join(str(a) for a in args[:3])} exited {done.returncode}:\n"
                f"stdout: {_tail(done.stdout)}\nstderr: {_tail(done.stderr)}"
            )
        return done

    # -- Kafka's tools -----------------------------------------------------------------------------------
    def dump_log_segments(
        self,
        files,
        *,
        deep_iteration: bool = False,
        index_sanity_check: bool = False,
        verify_index_only: bool = False,
        print_data_log: bool = False,
        extra: tuple = (),
    ) -> DumpResult:
        """`kafka-dump-log.sh --files F1,F2,...` with the given options."""
        args = ["org.apache.kafka.tools.DumpLogSegments", "--files", ",".join(str(f) for f in files)]
        args += ["--deep-iteration"] if deep_iteration else []
        args += ["--index-sanity-check"] if index_sanity_check else []
        args += ["--verify-index-only"] if verify_index_only else []
        args += ["--print-data-log"] if print_data_log else []
        args += list(extra)
        done = self.java(args, check=False)
        return DumpResult(args, done.stdout, done.stderr, done.returncode)

    # -- the Java clients of this directory ----------------------------------------------------------------
    def produce(
        self, bootstrap: str, runs: list[dict], topics: list[dict] = (), *, alter_topics: list[dict] = ()
    ) -> list[dict]:
        """Producer.java (see its header for the spec): returns, per run, {"groups": [[{partition,
        offset, timestamp}, ...], ...]}. `alter_topics` ([{"name", "configs"}]) are set on existing
        topics, and seen applied, before the first run."""
        spec = {"bootstrap": bootstrap, "topics": list(topics), "runs": runs}
        if alter_topics:
            spec["alter_topics"] = list(alter_topics)
        return self._client("Producer.java", spec)["runs"]

    def produce_async(self, bootstrap: str, runs: list[dict], topics: list[dict] = ()) -> RunningClient:
        """Producer.java in the background (for a producer that lives across a broker restart, see
        "wait_for" and "signal" in its header); `.wait()` returns what produce() would."""
        path = self._spec_file("Producer.java", {"bootstrap": bootstrap, "topics": list(topics), "runs": runs})
        command, _ = self._java_command(self._client_args("Producer.java", path), write_class_data=False)
        out = open(path.with_suffix(".out"), "w+")
        err = open(path.with_suffix(".err"), "w+")
        process = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        return RunningClient(process, out, err, lambda result: result["runs"])

    def consume(self, bootstrap: str, tasks: list[dict]) -> list[dict]:
        """Consumer.java (see its header): the results of `tasks` in order."""
        return self._client("Consumer.java", {"bootstrap": bootstrap, "tasks": tasks})["results"]

    def admin(self, bootstrap: str, tasks: list[dict]) -> list[dict]:
        """ClusterAdmin.java (see its header): the results of `tasks` in order."""
        return self._client("ClusterAdmin.java", {"bootstrap": bootstrap, "tasks": tasks})["results"]

    def _client(self, source: str, spec: dict) -> dict:
        path = self._spec_file(source, spec)
        done = self.java(*self._client_args(source, path))
        return json.loads(done.stdout.strip().splitlines()[-1])

    def _spec_file(self, source: str, spec: dict) -> Path:
        self._counter += 1
        path = self.work_dir / f"{Path(source).stem.lower()}-{self._counter}.json"
        path.write_text(json.dumps(spec))
        return path

    def _client_args(self, source: str, spec_path: Path) -> tuple[list[str], str]:
        classes = self._compiled()
        if classes:  # the classes javac made once: no compilation per run
            return [Path(source).stem, str(spec_path)], f"{classes}{os.pathsep}{self.classpath}"
        return [str(HERE / source), str(spec_path)], self.classpath  # the single-source launcher compiles it

    def _compiled(self) -> Path | None:
        """Producer.java, Consumer.java and ClusterAdmin.java compiled once by javac (when the JDK has it
        beside java) into work_dir/clients.jar, else None (then the single-source launcher runs them).
        A jar, not the directory javac wrote: a JVM's class path with a directory of classes in it
        neither writes nor maps a class-data archive (`ClassData`)."""
        if self._classes is None:
            self._classes = False
            javac = shutil.which("javac") if self.java_bin == "java" else None
            if javac:
                out = self.work_dir / "classes"
                done = subprocess.run(
                    [
                        javac,
                        "-nowarn",
                        "-cp",
                        self.classpath,
                        "-d",
                        str(out),
                        str(HERE / "Producer.java"),
                        str(HERE / "Consumer.java"),
                        str(HERE / "ClusterAdmin.java"),
                    ],
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                if done.returncode == 0:
                    jar = self.work_dir / "clients.jar"
                    with zipfile.ZipFile(jar, "w") as packed:
                        for path in sorted(out.rglob("*.class")):
                            packed.write(path, path.relative_to(out).as_posix())
                    self._classes = jar
        return self._classes or None


class RunningClient:
    """A client program running in the background (KafkaTools.produce_async)."""

    def __init__(self, process: subprocess.Popen, out, err, unwrap):
        self.process, self._out, self._err, self._unwrap = process, out, err, unwrap

    def wait(self, timeout: float = 300):
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)
        self._out.seek(0)
        self._err.seek(0)
        stdout, stderr = self._out.read(), self._err.read()
        self._out.close()
        self._err.close()
        if self.process.returncode != 0:
            raise JavaError(
                f"{self.process.args[-2]} exited {self.process.returncode}:\nstdout: {_tail(stdout)}\n"
                f"stderr: {_tail(stderr)}"
            )
        return self._unwrap(json.loads(stdout.strip().splitlines()[-1]))

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)


def _tail(text, n: int = 4000) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return (text or "")[-n:]


class Broker:
    """One KRaft node, broker and controller (`process.roles=broker,controller`), on 127.0.0.1.

    `base_dir` gets server.properties, the log.dirs directory `data/` (which also holds
    `__cluster_metadata-0`, as a combined node's first log dir does) and `logs/` (server.log,
    log-cleaner.log, controller.log, state-change.log, console.log). The ports are chosen once
    and kept across restarts. `overrides` are more server.properties entries (or None to drop one);
    with `process.roles` overridden, the node is a broker or a controller only (tests/kafka/cluster.py).
    `heap` is the JVM's -Xmx option."""

    def __init__(
        self,
        tools: KafkaTools,
        base_dir: str | Path,
        *,
        node_id: int = 1,
        overrides: dict | None = None,
        format_storage: bool = True,
        heap: str = HEAP,
    ):
        self.tools = tools
        self.heap = heap
        self.base_dir = Path(base_dir)
        self.log_dir = self.base_dir / "data"
        self.logs_dir = self.base_dir / "logs"
        self.config_path = self.base_dir / "server.properties"
        self.log4j_path = self.base_dir / "log4j2.properties"
        self.node_id = node_id
        self.port = free_port()
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.cluster_id = random_cluster_id()
        self.process: subprocess.Popen | None = None
        self.starts = 0
        self._server_log_mark = 0
        self._cleaner_log_mark = 0
        self._console = None
        self._class_data_part: Path | None = None
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(exist_ok=True)
        self.properties = self.default_properties()
        self.configure(overrides or {})
        if format_storage:
            self.format()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def default_properties(self) -> dict[str, str]:
        return {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": f"{self.node_id}@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            "num.partitions": "1",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "2",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "2",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "group.consumer.heartbeat.interval.ms": "500",
            "group.consumer.min.heartbeat.interval.ms": "500",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "log.cleaner.threads": "1",
            "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
            "log.cleaner.backoff.ms": "1000",
            # the broker applies no retention of its own while the tests run (they compare kafkalog's
            # retention with the rule, on topics whose retention the broker would apply otherwise)
            "log.retention.check.interval.ms": "3600000",
            "log.initial.task.delay.ms": "3600000",
        }

    def configure(self, overrides: dict) -> None:
        """Set server.properties entries (None drops one) and write the file."""
        for key, value in overrides.items():
            if value is None:
                self.properties.pop(key, None)
            else:
                self.properties[key] = str(value)
        self.write_config()

    def write_config(self) -> None:
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        self.log4j_path.write_text(BROKER_LOG4J)

    def format(self) -> None:
        """kafka-storage.sh format -t <cluster id> -c server.properties (static quorum)."""
        self.tools.java(
            ["kafka.tools.StorageTool", "format", "--cluster-id", self.cluster_id, "--config", str(self.config_path)],
            timeout=120,
        )

    # -- running ---------------------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def server_log_path(self) -> Path:
        return self.logs_dir / "server.log"

    @property
    def cleaner_log_path(self) -> Path:
        return self.logs_dir / "log-cleaner.log"

    @property
    def serving_port(self) -> int:
        """The port that accepts connections once the node serves: a broker's, else (a controller
        only) its controller listener's."""
        return self.port if "broker" in self.properties["process.roles"].split(",") else self.controller_port

    def start(self, timeout: float = 120) -> None:
        """Start the broker and wait until it serves: Kafka's "Kafka Server started" line in this
        start's server.log, and its port accepting connections."""
        self.launch()
        self.wait_started(timeout)

    def launch(self) -> None:
        """Start the JVM and return at once (a cluster starts its nodes in parallel: a broker serves
        only once the controller quorum does)."""
        if self.running:
            raise RuntimeError("the broker is already running")
        self._server_log_mark = _size(self.server_log_path)
        self._cleaner_log_mark = _size(self.cleaner_log_path)
        self.starts += 1
        if self._console:
            self._console.close()
        self._console = open(self.logs_dir / "console.log", "ab")
        self._console.write(f"\n==== start {self.starts} ====\n".encode())
        self._console.flush()
        options = [self.tools.java_bin, self.heap, "-Xms128m", "-XX:+UseG1GC"]
        # a controller only (cluster.py's) starts once: the archive it would write would serve no start
        class_data, self._class_data_part = self.tools.class_data.options(
            [*options, self.tools.classpath, "kafka.Kafka"], write=self.serving_port == self.port
        )
        command = [
            *options,
            *class_data,
            "-XX:MaxGCPauseMillis=20",
            "-XX:+ExplicitGCInvokesConcurrent",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.log4j_path}",
            f"-Dkafka.logs.dir={self.logs_dir}",
            "-cp",
            self.tools.classpath,
            "kafka.Kafka",
            str(self.config_path),
        ]
        self.process = subprocess.Popen(
            command, stdout=self._console, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )

    def wait_started(self, timeout: float = 120) -> None:
        """Wait until the launched JVM serves (see `start`)."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.running:
                raise RuntimeError(
                    f"the Kafka broker exited with {self.process.returncode} while starting:\n{self.diagnostics()}"
                )
            if "Kafka Server started" in self.server_log() and _port_open(self.serving_port):
                return
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"the Kafka broker did not start within {timeout}s:\n{self.diagnostics()}")
            time.sleep(0.2)

    def stop(self, timeout: float = 120) -> bool:
        """Controlled shutdown (SIGTERM, as kafka-server-stop.sh sends) and wait for the JVM to exit.
        Returns whether the broker left `.kafka_cleanshutdown` in its log dir."""
        if not self.running:
            return self.clean_shutdown_marker
        self.begin_stop()
        return self.wait_stopped(timeout)

    def begin_stop(self) -> None:
        """Send SIGTERM and return at once (a cluster stops its brokers in parallel)."""
        self.process.send_signal(signal.SIGTERM)

    def wait_stopped(self, timeout: float = 120) -> bool:
        """Wait for the JVM `begin_stop` signalled to exit (see `stop`)."""
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(
                f"the Kafka broker did not stop within {timeout}s of SIGTERM:\n{self.diagnostics()}"
            ) from None
        stopped = self.process.returncode in (0, 143, -signal.SIGTERM)
        self._exited(whole=stopped)
        if not stopped:
            raise RuntimeError(f"the Kafka broker exited with {self.process.returncode}:\n{self.diagnostics()}")
        return self.clean_shutdown_marker

    def restart(self, timeout: float = 120) -> None:
        self.stop(timeout)
        self.start(timeout)

    def kill(self) -> None:
        if self.running:
            self.process.kill()
            self.process.wait(30)
        self._exited(whole=False)

    def _exited(self, *, whole: bool) -> None:
        """The JVM exited (`whole`: as it should): the class-data archive it wrote, if any, kept or removed."""
        self.tools.class_data.ended(self._class_data_part, whole=whole)
        self._class_data_part = None

    def close(self) -> None:
        """Stop the broker (controlled shutdown when it can, else killed)."""
        try:
            self.stop(60)
        except RuntimeError:
            self.kill()
        self._exited(whole=False)  # a JVM that ended while starting
        if self._console:
            self._console.close()
            self._console = None

    @property
    def clean_shutdown_marker(self) -> bool:
        return (self.log_dir / ".kafka_cleanshutdown").exists()

    # -- what the broker logged --------------------------------------------------------------------------------
    def server_log(self, since_start: bool = True) -> str:
        """server.log, by default only what this (or the last) start wrote."""
        return _read_from(self.server_log_path, self._server_log_mark if since_start else 0)

    def cleaner_log(self, since_start: bool = True) -> str:
        return _read_from(self.cleaner_log_path, self._cleaner_log_mark if since_start else 0)

    def cleaned_sections(self, name: str, since_start: bool = True) -> list[tuple[int, int]]:
        """The dirty sections [start, end) Kafka's LogCleaner reported for the log `name` ("topic-N"),
        from its "Log cleaner thread %d cleaned log %s (dirty section = [%d, %d])" lines (LogCleaner's
        CleanerThread.recordStats), oldest first. Its logger, LogCleaner$CleanerThread, is no child of
        the loggers BROKER_LOG4J sends to log-cleaner.log, so the line is in server.log: both are read."""
        marker = f" cleaned log {name} (dirty section = ["
        out = []
        for line in (self.cleaner_log(since_start) + "\n" + self.server_log(since_start)).splitlines():
            if marker in line:
                start, end = line.split(marker, 1)[1].split("]", 1)[0].split(",")
                out.append((int(start), int(end)))
        return out

    def wait_until_cleaned(self, name: str, timeout: float = 60, since_start: bool = True) -> list[tuple[int, int]]:
        """Wait until Kafka's LogCleaner logged that it cleaned the log `name` ("topic-N"); returns
        `cleaned_sections(name)`. RuntimeError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.cleaned_sections(name, since_start)
            if found:
                return found
            if not self.running or time.monotonic() > deadline:
                raise RuntimeError(
                    f"Kafka's LogCleaner did not clean {name} within {timeout}s; log-cleaner.log:\n"
                    f"{self.cleaner_log(since_start)[-4000:]}"
                )
            time.sleep(0.2)

    def recovery_lines(self, since_start: bool = True, ignore: tuple = (METADATA_LOG_LOADER,)) -> list[str]:
        """server.log lines (of this start) that say the broker recovered, rebuilt, truncated or
        deleted something at load (RECOVERY_LINES), with the reason each pattern stands for. Lines
        holding one of `ignore` are left out: by default the KRaft metadata log's, which Kafka
        always opens as not cleanly shut down (KafkaMetadataLog), so that every start of an
        untouched broker logs "Recovering unflushed segment 0 ... for __cluster_metadata-0"."""
        return self._lines_meaning(RECOVERY_LINES, since_start, ignore)

    def truncation_lines(self, since_start: bool = True) -> list[str]:
        """server.log lines (of this start) that say a replica's log was cut back or its fetch offset
        reset to agree with its leader's (TRUNCATION_LINES), with the reason each pattern stands for."""
        return self._lines_meaning(TRUNCATION_LINES, since_start, ())

    def _lines_meaning(self, patterns: dict, since_start: bool, ignore: tuple) -> list[str]:
        """server.log lines holding one of `patterns` (any case) and none of `ignore`, each with its meaning."""
        found = []
        for line in self.server_log(since_start).splitlines():
            if any(i in line for i in ignore):
                continue
            for pattern, meaning in patterns.items():
                if pattern.lower() in line.lower():
                    found.append(f"{line}  <- {meaning}")
        return found

    def diagnostics(self) -> str:
        console = _read_from(self.logs_dir / "console.log", 0)
        return f"--- console.log (tail) ---\n{console[-3000:]}\n--- server.log (tail) ---\n{self.server_log()[-6000:]}"

    def partition_dir(self, topic: str, partition: int) -> Path:
        return self.log_dir / f"{topic}-{partition}"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


# The broker's logging: Kafka 4.x's config/log4j2.yaml, as a properties file, into ${kafka.logs.dir};
# files are appended to, so a restart keeps the earlier starts' lines (Broker.server_log() reads from
# the position this start began at).
BROKER_LOG4J = """\
status = warn
name = kafkalog-tests-broker
property.logs = ${sys:kafka.logs.dir}
property.pattern = [%d] %p %m (%c)%n

appender.server.type = File
appender.server.name = server
appender.server.fileName = ${logs}/server.log
appender.server.append = true
appender.server.layout.type = PatternLayout
appender.server.layout.pattern = ${pattern}

appender.cleaner.type = File
appender.cleaner.name = cleaner
appender.cleaner.fileName = ${logs}/log-cleaner.log
appender.cleaner.append = true
appender.cleaner.layout.type = PatternLayout
appender.cleaner.layout.pattern = ${pattern}

appender.controller.type = File
appender.controller.name = controller
appender.controller.fileName = ${logs}/controller.log
appender.controller.append = true
appender.controller.layout.type = PatternLayout
appender.controller.layout.pattern = ${pattern}

appender.state.type = File
appender.state.name = state
appender.state.fileName = ${logs}/state-change.log
appender.state.append = true
appender.state.layout.type = PatternLayout
appender.state.layout.pattern = ${pattern}

rootLogger.level = INFO
rootLogger.appenderRef.server.ref = server

logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = INFO
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.network.name = kafka.network.RequestChannel$
logger.network.level = WARN

logger.controller.name = org.apache.kafka.controller
logger.controller.level = INFO
logger.controller.additivity = false
logger.controller.appenderRef.controller.ref = controller

logger.cleaner.name = org.apache.kafka.storage.internals.log.LogCleaner
logger.cleaner.level = INFO
logger.cleaner.additivity = false
logger.cleaner.appenderRef.cleaner.ref = cleaner
logger.cleanerManager.name = org.apache.kafka.storage.internals.log.LogCleanerManager
logger.cleanerManager.level = INFO
logger.cleanerManager.additivity = false
logger.cleanerManager.appenderRef.cleaner.ref = cleaner
logger.cleanerThread.name = org.apache.kafka.storage.internals.log.Cleaner
logger.cleanerThread.level = INFO
logger.cleanerThread.additivity = false
logger.cleanerThread.appenderRef.cleaner.ref = cleaner
logger.oldCleaner.name = kafka.log.LogCleaner
logger.oldCleaner.level = INFO
logger.oldCleaner.additivity = false
logger.oldCleaner.appenderRef.cleaner.ref = cleaner

logger.stateChange.name = state.change.logger
logger.stateChange.level = INFO
logger.stateChange.additivity = false
logger.stateChange.appenderRef.state.ref = state
"""

# Kafka's tools and the Java clients: warnings and errors only, on stderr.
TOOLS_LOG4J = """\
status = warn
name = kafkalog-tests-tools
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = stderr
"""
