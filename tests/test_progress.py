"""Progress of the long commands: the reporter's lines and bars from a fake clock and fake task
counts, the Spark feed's counting from a fake status tracker, and the command line's progress on
stderr (and none with --quiet)."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from kafkalog.operations import progress
from kafkalog.operations.progress import Progress
from kafkalog.spark.progress import ConnectTasks, TrackedTasks, task_feed

from .conftest import REAL_FIXTURES

LOGGER = "kafkalog.progress"


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Feed:
    """Task counts as a test sets them (an exception: raised); counts its reads, remembers being closed."""

    def __init__(self):
        self.counts = (0, 0)
        self.reads = 0
        self.closed = False

    def __call__(self):
        self.reads += 1
        if isinstance(self.counts, Exception):
            raise self.counts
        return self.counts

    def close(self):
        self.closed = True


def lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


@pytest.fixture
def caplog_info(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    return caplog


@pytest.fixture(autouse=True)
def _restore_progress():
    """The command line sets how progress reports (and the level of kafkalog's log) for the process."""
    before, level = progress.current(), logging.getLogger("kafkalog").level
    yield
    progress._current = before
    logging.getLogger("kafkalog").setLevel(level)


# -- the reporter ------------------------------------------------------------------------------------------


def test_a_spark_phase_logs_its_start_its_tasks_at_most_every_interval_and_its_end(caplog_info):
    clock, feed = Clock(), Feed()
    reporter = Progress("log", interval=5.0, poll=3600, clock=clock)  # the test polls, not the poller thread
    with reporter.phase("compact", "rewrite", total=12, nbytes=45_000_000, feed=feed) as phase:
        for now, counts in [(101.0, (1, 8)), (104.9, (3, 8)), (105.0, (4, 8)), (109.0, (6, 8)), (110.0, (6, 8))]:
            clock.now, feed.counts = now, counts
            phase.poll()
        clock.now, feed.counts = 116.0, (8, 8)
    assert lines(caplog_info) == [
        "compact rewrite: started: 12 segments, 45.0 MB",
        "compact rewrite: 4/8 tasks (12 segments, 45.0 MB), 0.8 tasks/s, ETA 5 s",  # 4 tasks in 5 s
        "compact rewrite: 6/8 tasks (12 segments, 45.0 MB), 0.6 tasks/s, ETA 3 s",
        "compact rewrite: done in 16.0 s: 8/8 tasks (12 segments, 45.0 MB), 0.5 tasks/s",
    ]
    assert feed.closed


def test_a_driver_phase_counts_units_and_bytes_and_ends_with_the_plans_totals(caplog_info):
    clock = Clock()
    with Progress("log", interval=5.0, clock=clock).phase("compact", "swap", total=4, nbytes=4000) as phase:
        clock.now += 10
        phase.advance(1, 1000)
        phase.advance(1, 1000)  # within the interval of the last line: no line
        clock.now += 10
    assert lines(caplog_info) == [
        "compact swap: started: 4 segments, 4.0 kB",
        "compact swap: 1/4 segments, 1.0 kB/4.0 kB, 100 B/s, ETA 30 s",
        "compact swap: done in 20.0 s: 4/4 segments, 4.0 kB/4.0 kB, 200 B/s",
    ]


def test_a_phase_stopped_by_an_error_says_so_and_closes_its_feed(caplog_info):
    clock, feed = Clock(), Feed()
    with pytest.raises(ValueError):
        with Progress("log", poll=3600, clock=clock).phase("purge", "ledger", feed=feed):
            clock.now += 2
            raise ValueError("bad")
    assert lines(caplog_info) == ["purge ledger: started", "purge ledger: stopped after 2.0 s by ValueError"]
    assert feed.closed


def test_off_shows_nothing_and_reads_no_feed(caplog_info, capsys):
    feed = Feed()
    with Progress("off", poll=0.01).phase("compact", "rewrite", total=3, feed=feed) as phase:
        time.sleep(0.1)
        phase.advance()
    assert lines(caplog_info) == [] and capsys.readouterr().err == ""
    assert feed.reads == 0 and feed.closed


def test_a_feed_that_fails_fails_no_command(caplog_info):
    """The poller thread reads the feed, and a session going away makes it raise."""
    clock, feed = Clock(), Feed()
    feed.counts = RuntimeError("the SparkContext was shut down")
    with Progress("log", poll=0.01, clock=clock).phase("compact", "rewrite", total=2, feed=feed):
        time.sleep(0.1)
        clock.now += 1
    assert feed.reads >= 2 and feed.closed  # read by the thread, and once more at the end
    assert lines(caplog_info)[-1] == "compact rewrite: done in 1.0 s: 0/0 tasks (2 segments)"


def test_a_bar_shows_the_phase_and_its_counts_on_stderr(capsys):
    with Progress("bar").phase("retain", "plan", total=3, unit="partition") as phase:
        for _ in range(3):
            phase.advance()
    err = capsys.readouterr().err
    assert "retain plan" in err and "3/3" in err and "partitions/s" in err


def test_auto_writes_log_lines_where_stderr_is_no_terminal(caplog_info):
    assert not sys.stderr.isatty()  # pytest captures it
    assert Progress().phase("validate", "check").mode == "log"
    with pytest.raises(ValueError):
        Progress("loud")


def test_track_counts_each_item_done_as_the_loop_moves_on(caplog_info):
    clock = Clock()
    progress._current = Progress("log", interval=1.0, clock=clock)
    seen = []
    for item in progress.track(["a", "b", "c"], "retain", "apply", "partition"):
        seen.append(item)
        clock.now += 1
    assert seen == ["a", "b", "c"]
    assert lines(caplog_info) == [
        "retain apply: started: 3 partitions",
        "retain apply: 1/3 partitions, 1.0 partitions/s, ETA 2 s",
        "retain apply: 2/3 partitions, 1.0 partitions/s, ETA 1 s",
        "retain apply: 3/3 partitions, 1.0 partitions/s, ETA 0 s",
        "retain apply: done in 3.0 s: 3/3 partitions, 1.0 partitions/s",
    ]


# -- the Spark feed ------------------------------------------------------------------------------------------


class Tracker:
    """Spark's StatusTracker as far as the feed asks it: jobs (status, stages) and stages (tasks)."""

    def __init__(self):
        self.jobs: dict[int, SimpleNamespace] = {}
        self.stages: dict[int, SimpleNamespace] = {}
        self.grouped: set[int] = set()  # jobs run in a job group

    def job(self, job_id, status, *stages):
        self.jobs[job_id] = SimpleNamespace(status=status, stageIds=[s for s, _, _ in stages])
        for stage_id, done, total in stages:
            self.stages[stage_id] = SimpleNamespace(numCompletedTasks=done, numTasks=total)

    def getActiveJobsIds(self):
        return [j for j, info in self.jobs.items() if info.status == "RUNNING"]

    def getJobIdsForGroup(self, group):
        assert group is None
        return [j for j in self.jobs if j not in self.grouped]

    def getJobInfo(self, job_id):
        return self.jobs.get(job_id)

    def getStageInfo(self, stage_id):
        return self.stages.get(stage_id)


def test_the_status_tracker_feed_counts_the_tasks_of_the_jobs_started_after_it():
    tracker = Tracker()
    tracker.job(0, "SUCCEEDED", (0, 5, 5))
    tracker.job(1, "SUCCEEDED", (1, 3, 3))
    tracker.grouped.add(1)  # not listed without a group: found by its id
    feed = TrackedTasks(tracker)
    assert feed() == (0, 0)
    tracker.job(2, "SUCCEEDED", (2, 4, 4), (3, 0, 4))  # stage 3 skipped: its shuffle output existed
    tracker.job(3, "RUNNING", (4, 2, 6), (5, 0, 2))  # stage 5 waits for stage 4
    tracker.grouped.add(3)
    assert feed() == (4 + 2, 4 + 6 + 2)
    tracker.job(3, "SUCCEEDED", (4, 6, 6), (5, 2, 2))
    assert feed() == (12, 12)


def test_a_connect_session_is_fed_by_its_progress_handler_and_its_spark_context_is_never_touched():
    class ConnectSession:  # what pyspark.sql.connect's SparkSession offers a feed
        def __init__(self):
            self.handlers = []

        @property
        def sparkContext(self):
            raise AssertionError("a Spark Connect session has no SparkContext")

        def registerProgressHandler(self, handler):
            self.handlers.append(handler)

        def removeProgressHandler(self, handler):
            self.handlers.remove(handler)

    ConnectSession.__module__ = "pyspark.sql.connect.session"
    session = ConnectSession()
    feed = task_feed(session)
    assert isinstance(feed, ConnectTasks) and session.handlers == [feed.handle]
    stage = SimpleNamespace
    (handler,) = session.handlers
    handler(stages=[stage(num_tasks=4, num_completed_tasks=1)], inflight_tasks=3, operation_id="a", done=False)
    handler(stages=[stage(num_tasks=4, num_completed_tasks=4)], inflight_tasks=0, operation_id="a", done=True)
    handler(stages=[stage(num_tasks=2, num_completed_tasks=1)], inflight_tasks=1, operation_id="b", done=False)
    assert feed() == (5, 6)
    feed.close()
    assert session.handlers == []


# -- the command line ----------------------------------------------------------------------------------------


def _kafkalog(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkalog", *args], capture_output=True, text=True, timeout=120)


def test_watch_counts_the_tasks_of_a_lazy_scans_action(spark, caplog_info):
    from kafkalog.spark import plan_scan, read_records

    progress.set_mode("log")
    log_dir = REAL_FIXTURES / "broker-dirs" / "kafka-3.1.0"
    tasks = len(plan_scan(str(log_dir)).tasks)
    with progress.watch(spark):
        assert read_records(spark, str(log_dir)).count() > 0
    first, last = lines(caplog_info)[0], lines(caplog_info)[-1]
    assert first == "spark scan: started" and last.startswith("spark scan: done in ")
    done, total = map(int, re.search(r": (\d+)/(\d+) tasks", last).groups())
    assert done == total >= tasks  # the scan's, and the count's own


def test_validate_logs_progress_to_stderr_off_a_terminal_and_none_with_quiet():
    log_dir = REAL_FIXTURES / "broker-dirs" / "kafka-3.1.0"
    partition_dirs = [p for p in log_dir.iterdir() if p.is_dir() and re.fullmatch(r".+-\d+", p.name)]
    partitions = len(partition_dirs)
    size = progress._size(sum(f.stat().st_size for p in partition_dirs for f in p.glob("*.log")))
    shown = _kafkalog("validate", str(log_dir))
    quiet = _kafkalog("validate", "--quiet", str(log_dir))
    assert shown.returncode == quiet.returncode == 0 and shown.stdout == quiet.stdout
    progress_lines = [line for line in shown.stderr.splitlines() if line.startswith(LOGGER)]
    assert progress_lines[0] == f"{LOGGER}: validate check: started: {partitions} partitions, {size}"
    assert progress_lines[-1].startswith(f"{LOGGER}: validate check: done in ")
    assert f": {partitions}/{partitions} partitions, {size}/{size}" in progress_lines[-1]
    assert quiet.stderr == ""


def test_retain_quiet_prints_no_progress_but_still_its_errors(tmp_path):
    log_dir = REAL_FIXTURES / "broker-dirs" / "kafka-3.1.0"
    shown = _kafkalog("retain", "--dry-run", "--now", "1700000000000", str(log_dir))
    quiet = _kafkalog("retain", "--dry-run", "--now", "1700000000000", "--quiet", str(log_dir))
    assert shown.returncode == quiet.returncode == 0 and shown.stdout == quiet.stdout
    assert "retain plan: started" in shown.stderr and LOGGER not in quiet.stderr
    failed = _kafkalog("retain", "--quiet", str(tmp_path / "missing"))
    assert failed.returncode == 2 and f"kafkalog retain: {tmp_path / 'missing'}: " in failed.stderr


@pytest.mark.spark
def test_compact_logs_each_phase_with_the_plans_totals(spark, tmp_path, caplog_info):
    from kafkalog.cli import main

    log_dir, props, report = tmp_path / "in", tmp_path / "topics.properties", tmp_path / "report.json"
    assert main(["generate", str(log_dir), "--preset", "small", "--config-out", str(props)]) == 0
    args = ["compact", str(log_dir), "--config-file", str(props), "--force", "--output", str(tmp_path / "out")]
    assert main([*args, "--report", str(report)]) == 0
    planned = json.loads(report.read_text())
    chosen = [p for p in planned["partitions"] if p["chosen"]]
    scanned = [
        segment
        for p in chosen
        for segment in (log_dir / f"{p['topic']}-{p['partition']}").glob("*.log")
        if int(segment.stem) < p["firstUncleanableOffset"]
    ]
    shown = lines(caplog_info)
    started = {line.split(": started")[0]: line for line in shown if ": started" in line}
    # the preset's partitions are small: each is scanned, decided and rewritten in one task ("clean")
    assert list(started) == ["compact plan", "compact clean", "compact swap"]
    partitions = [p for p in log_dir.iterdir() if p.is_dir() and re.fullmatch(r".+-\d+", p.name)]
    assert started["compact plan"].endswith(f" {len(partitions)} partitions")
    assert started["compact clean"].endswith(
        f" {len(scanned)} segments, {progress._size(sum(s.stat().st_size for s in scanned))}"
    )
    sources = 0  # the bytes of each output segment's source segments: the first at its base offset, the next ones
    for o in planned["segments"]:
        logs = sorted((log_dir / f"{o['topic']}-{o['partition']}").glob("*.log"))
        first = [int(f.stem) for f in logs].index(o["baseOffset"])
        sources += sum(f.stat().st_size for f in logs[first : first + o["sourceSegments"]])
    assert started["compact swap"].endswith(f" {len(planned['segments'])} segments, {progress._size(sources)}")
    done = [line for line in shown if ": done in " in line]
    assert len(done) == 3 and all(re.search(r": (\d+)/\1 (tasks|segments|partitions)", line) for line in done)
    clean_done = next(line for line in done if line.startswith("compact clean"))
    assert re.search(r": [1-9]\d*/\d+ tasks", clean_done)  # the status tracker counted the tasks
