"""The two ways a compaction cleans a partition write the same bytes: in one task (a partition of at
most ONE_TASK_BYTES: read once, decided and rewritten there) and the window path (scan tasks, the
window over keys, rewrite tasks), the latter with partitions read whole by a scan task and spread
over several. Each is forced (the bound set to 0 or beyond any partition) on the same log dir of
partitions that hold every case Kafka's cleaner oracle covers: transactions committed and aborted,
tombstones before and past the delete horizon (a second pass), min.compaction.lag.ms holding
segments back, legacy v0/v1 messages (kept as they are, and written as v2)."""

from __future__ import annotations

import shutil

import pytest

from kafkalog import tuning
from kafkalog.codec.compression import Codec
from kafkalog.config import resolver_from
from kafkalog.operations import compact as compact_module
from kafkalog.operations.compact import compact
from kafkalog.spark import compaction
from kafkalog.storage.logdir import LogDir

from ..reference.cleaner_model import CleanerConfig
from ..reference.scenarios import T0, LogBuilder
from .test_compaction_differential import DELETE_RETENTION_MS, SEGMENT_BYTES, random_partition, write_partition

LAG_MS = 8_500  # holds back the segments of the lag topic written after T0 + 1.5 s
NOW = T0 + 10_000
LATER = NOW + DELETE_RETENTION_MS + 1  # past the horizon the first pass gave tombstones and markers
RESOLVER = resolver_from(
    settings=[
        "cleanup.policy=compact",
        f"delete.retention.ms={DELETE_RETENTION_MS}",
        f"segment.bytes={SEGMENT_BYTES}",
        "index.interval.bytes=256",
        f"producer.id.expiration.ms={2**31 - 1}",
    ],
    topic_settings=[f"lag:min.compaction.lag.ms={LAG_MS}"],
)


def legacy_partition() -> list:
    """v0 and v1 messages, plain and in compressed wrappers, with superseded keys and tombstones,
    then v2 batches over the same keys (a log upgraded in place)."""
    log = LogBuilder(segment_bytes=SEGMENT_BYTES)
    for i in range(12):
        log.sleep(100)
        pairs = [(k, None if (i + k) % 5 == 0 else f"v{i}-{k}") for k in range(i % 4, i % 4 + 3)]
        log.legacy(pairs, magic=i % 2, codec=Codec.GZIP if i % 3 == 0 else Codec.NONE)
    for i in range(6):
        log.sleep(100)
        log.append([(k, f"w{i}-{k}") for k in range(i, i + 2)], codec=Codec.LZ4 if i % 2 else Codec.NONE)
    log.roll()
    return log.build()


def write_log_dir(root) -> None:
    config = CleanerConfig(
        delete_retention_ms=DELETE_RETENTION_MS, segment_bytes=SEGMENT_BYTES, index_interval_bytes=256
    )
    partitions = {"t-0": random_partition(1), "t-1": random_partition(2), "t-2": random_partition(3)}
    partitions |= {"lag-0": random_partition(4), "legacy-0": legacy_partition()}
    for name, segments in partitions.items():
        stage = root.parent / f"stage-{name}"
        write_partition(stage, segments, config)
        shutil.move(stage / "t-0", root / name)
        shutil.rmtree(stage)


def files(root) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def passes(
    spark,
    root,
    monkeypatch,
    *,
    one_task: bool,
    task_bytes: int | None,
    legacy_as_v2: bool,
    records: int = 1 << 30,
    large: str = "window",
) -> list:
    """Two passes (now, then past the horizon), every partition by the path asked for (`large`: the
    path of partitions too large for one task; "ranges" in ranges of one output segment each);
    returns the reports (records per partition and per output segment) and how many partitions one
    task cleaned."""
    monkeypatch.setattr(tuning, "ONE_TASK_BYTES", 1 << 40 if one_task else 0)
    monkeypatch.setattr(tuning, "ONE_TASK_RECORDS", records)
    monkeypatch.setattr(tuning, "LARGE_PARTITIONS", large)
    monkeypatch.setattr(tuning, "RANGE_BYTES", 1)
    if task_bytes is not None:
        monkeypatch.setattr(tuning, "COMPACTION_TASK_BYTES", task_bytes)
    jobs = []
    planned = compact_module.one_task_jobs
    monkeypatch.setattr(compact_module, "one_task_jobs", lambda *a: jobs.append(planned(*a)) or jobs[-1])
    reports = []
    for now in (NOW, LATER):
        result = compact(spark, str(root), RESOLVER, now, force=True, legacy_as_v2=legacy_as_v2)
        reports.append((result.report, result.segments, len(jobs[-1])))
        LogDir.open(str(root)).write_checkpoint(
            "cleaner-offset-checkpoint", {tp: 0 for tp in LogDir.open(str(root)).topic_partitions}
        )
    return reports


@pytest.mark.parametrize("legacy_as_v2", [False, True])
def test_one_task_and_the_window_path_write_the_same_bytes(spark, tmp_path, monkeypatch, legacy_as_v2):
    source = tmp_path / "in"
    source.mkdir()
    write_log_dir(source)
    results = {}
    cases = (
        ("one task", True, None, 1 << 30, "window"),
        ("window", False, None, 1 << 30, "window"),
        ("spread", False, 1024, 1 << 30, "window"),
        ("ranges", False, None, 1 << 30, "ranges"),
        ("handed back", True, None, 1, "ranges"),
    )
    for name, one_task, task_bytes, records, large in cases:
        root = tmp_path / name.replace(" ", "-")
        shutil.copytree(source, root)
        with monkeypatch.context() as patched:
            reports = passes(
                spark,
                root,
                patched,
                one_task=one_task,
                task_bytes=task_bytes,
                legacy_as_v2=legacy_as_v2,
                records=records,
                large=large,
            )
        results[name] = (files(root), [r[:2] for r in reports], [r[2] for r in reports])
    assert results["one task"][2] == [5, 5] and results["window"][2] == results["spread"][2] == [0, 0]
    assert files(source) != results["one task"][0]  # the passes changed the log
    report = results["one task"][1]
    assert any(row["superseded"] and row["aborted_transaction"] for row in report[0][0])
    assert any(row["tombstone_expired"] for row in report[1][0])
    for name in ("window", "spread", "ranges", "handed back"):
        assert results[name][0] == results["one task"][0], name
        assert results[name][1] == report, name


def test_a_pass_lists_the_root_once_and_each_partition_at_most_twice(spark, tmp_path, monkeypatch):
    """On the driver: the log dir's root is listed once (the preflight's listing is the pass's),
    each partition directory once by the plan (recovery reads that listing) and once by the swap.
    The tasks list nothing (the next test)."""
    from collections import Counter

    from kafkalog.storage.fs import LogFileSystem

    root = tmp_path / "log"
    root.mkdir()
    write_log_dir(root)
    listed: Counter = Counter()
    real = LogFileSystem.list_dir
    monkeypatch.setattr(LogFileSystem, "list_dir", lambda fs, path: listed.update([path]) or real(fs, path))
    result = compact(spark, str(root), RESOLVER, NOW, force=True)
    assert result.outputs  # segments were swapped in
    partitions = {str(p) for p in root.iterdir() if p.is_dir()}
    assert listed[str(root)] == 1
    assert set(listed) == partitions | {str(root)}
    assert all(listed[p] <= 2 for p in partitions), listed
    swapped = {str(root / f"{t}-{p}") for t, p in result.outputs}
    assert {p: listed[p] for p in swapped} == dict.fromkeys(swapped, 2)


def test_one_task_reads_each_segment_once_and_lists_nothing(tmp_path, monkeypatch):
    """Below Spark: the task of each partition opens each scanned segment's `.log` once and reads
    its bytes once, reads no other file, lists no directory, and writes what it decided."""
    from kafkalog.operations.compact import plan_compaction
    from kafkalog.scan.inventory import CountingFileSystem, IOStats
    from kafkalog.storage.fs import LogFileSystem

    root = tmp_path / "log"
    root.mkdir()
    write_log_dir(root)
    plan = plan_compaction(str(root), RESOLVER, NOW, force=True)
    settings = {s.topic: compaction.OutputSettings.of(RESOLVER.for_topic(s.topic), NOW) for s in plan.logs}
    jobs = compaction.one_task_jobs(plan, settings)
    assert len(jobs) == len(plan.chosen) == 5
    monkeypatch.setattr(LogFileSystem, "list_dir", lambda *a: pytest.fail("a task listed a directory"))
    stats = IOStats()
    fs = CountingFileSystem(LogFileSystem.for_path(str(root))[0], stats)
    cleaned = [compaction.clean_partition(fs, str(root), job, NOW, 1 << 30, write=True) for job in jobs]
    assert all(c.error is None for c in cleaned) and sum(len(c.written) for c in cleaned) > 0
    scanned = {seg.log_path: seg.size for s in plan.chosen for seg in plan.scanned(s)}
    assert stats.as_dict() == {path: (1, size) for path, size in scanned.items()}
    staged = {str(p.relative_to(root)) for p in root.rglob("*.log.cleaned")}
    assert staged == {f"{o.topic}-{o.partition}/{o.base_offset:020d}.log.cleaned" for c in cleaned for o in c.outputs}


def test_a_partition_of_more_records_than_one_task_holds_is_handed_back(tmp_path):
    """Past tuning.ONE_TASK_RECORDS a task hands its partition back once it has read the batch
    headers: nothing decided, nothing written (the window path then cleans it, as the first test's
    "handed back" case shows)."""
    from kafkalog.operations.compact import plan_compaction
    from kafkalog.storage.fs import LogFileSystem

    root = tmp_path / "log"
    root.mkdir()
    write_log_dir(root)
    plan = plan_compaction(str(root), RESOLVER, NOW, force=True)
    settings = {s.topic: compaction.OutputSettings.of(RESOLVER.for_topic(s.topic), NOW) for s in plan.logs}
    fs = LogFileSystem.for_path(str(root))[0]
    for job in compaction.one_task_jobs(plan, settings):
        records = sum(seg.last_offset() - seg.base_offset + 1 for seg in plan.scanned(job.log))  # at least
        fits, handed_back = (compaction.clean_partition(fs, str(root), job, NOW, n, write=True) for n in (1 << 30, 1))
        assert records > 1 and (fits.spread, handed_back.spread) == (False, True), job.log.topic
        assert handed_back.error is None and not handed_back.outputs and not handed_back.segments


def test_the_window_paths_rewrite_opens_the_plans_files_without_listing(tmp_path, monkeypatch):
    """A rewrite task of the window path is handed its sources' files (`OutputSegment.sources`, from
    the plan): it writes its output from them and lists no directory."""
    from kafkalog.operations.compact import plan_compaction
    from kafkalog.spark.rewrite import rewrite_output
    from kafkalog.storage.fs import LogFileSystem

    root = tmp_path / "log"
    root.mkdir()
    write_log_dir(root)
    plan = plan_compaction(str(root), RESOLVER, NOW, force=True)
    (log,) = [s for s in plan.chosen if s.topic == "legacy"]
    files = {f[0]: f for f in compaction.segment_files(plan.segments[log.topic, log.partition])}
    settings = compaction.OutputSettings.of(RESOLVER.for_topic(log.topic), NOW, legacy_as_v2=True)
    outputs = compaction.partition_outputs(log, settings, set(), set(), files)
    assert outputs and all(o.sources for o in outputs)
    monkeypatch.setattr(LogFileSystem, "list_dir", lambda *a: pytest.fail("a rewrite task listed a directory"))
    written = [rewrite_output(str(root), o, {}) for o in outputs]
    assert sum(w.records_in for w in written) == sum(w.records_out for w in written) > 0
    assert all((root / "legacy-0" / f"{o.base_offset:020d}.log.cleaned").exists() for o in outputs)
