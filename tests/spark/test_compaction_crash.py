"""Crash safety of a compaction: the job is killed at each stage of the rewrite and the swap (a fault
hook raises), then the directory recovers to the complete old or the complete new state, nothing is
lost, and a rerun finishes the work with the same bytes an uninterrupted run writes."""

from __future__ import annotations

import os
import shutil

import pytest

from kafkalog.config import resolver_from
from kafkalog.operations.compact import compact
from kafkalog.operations.generate import GeneratorSpec, TopicSpec, generate
from kafkalog.operations.validate import validate_paths
from kafkalog.storage.logdir import LogDir
from kafkalog.storage.swap import recover_partition

NOW = 1_700_000_000_000
RESOLVER = resolver_from(settings=["cleanup.policy=compact", "segment.bytes=4096", "index.interval.bytes=512"])


class Crash(Exception):
    pass


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """Two compacted partitions of several small segments, keys rewritten often, tombstones, transactions."""
    path = tmp_path_factory.mktemp("crash") / "log"
    generate(
        str(path),
        GeneratorSpec(
            seed=5,
            consumer_offsets=None,
            topics=[
                TopicSpec(
                    "accounts",
                    partitions=2,
                    records=600,
                    keys=40,
                    tombstone_ratio=0.1,
                    codec="zstd",
                    batch_records=(1, 6),
                    cleanup_policy="compact",
                    idempotent_producers=1,
                    transactional_producers=1,
                    abort_ratio=0.3,
                    segment_bytes=1500,
                    index_interval_bytes=512,
                )
            ],
        ),
    )
    return path


@pytest.fixture(scope="module")
def compacted(spark, source, tmp_path_factory):
    """What an uninterrupted run writes."""
    root = tmp_path_factory.mktemp("uninterrupted") / "log"
    shutil.copytree(source, root)
    compact(spark, str(root), RESOLVER, NOW)
    assert validate_paths([str(root)], index_interval_bytes=512).exit_code == 0
    return _snapshot(root)


def _snapshot(root) -> dict:
    """Every file's bytes, by path relative to the log dir (the broker's lock file aside)."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".lock"):
                path = os.path.join(d, f)
                out[os.path.relpath(path, root)] = open(path, "rb").read()
    return out


def _records(snapshot: dict, partition: str) -> dict:
    """Offset -> (key, value) of one partition, read back from its segment files."""
    from kafkalog.codec.reader import iter_batches

    out = {}
    for name in sorted(n for n in snapshot if n.startswith(partition + os.sep) and n.endswith(".log")):
        for batch in iter_batches(snapshot[name]):
            out.update({r.offset: (r.key, r.value) for r in batch.records()})
    return out


def _fault_at(step: str, nth: int):
    seen = []

    def hook(name, _file):
        if name == step:
            seen.append(name)
            if len(seen) == nth:
                raise Crash(step)

    return hook


# (step, occurrence): before the swap, mid-way through each swap stage, and after the swap but
# before cleaner-offset-checkpoint is written
PARTITIONS = ("accounts-0", "accounts-1")
CRASH_POINTS = [("rewritten", 1), ("swap-renamed", 2), ("old-deleted", 3), ("swap-completed", 2), ("swapped", 1)]


@pytest.mark.parametrize("step,nth", CRASH_POINTS, ids=[f"{s}-{n}" for s, n in CRASH_POINTS])
def test_a_crash_recovers_to_old_or_new_and_a_rerun_completes(spark, source, compacted, tmp_path, step, nth):
    root = tmp_path / "log"
    shutil.copytree(source, root)
    old = _snapshot(root)
    with pytest.raises(Crash):
        compact(spark, str(root), RESOLVER, NOW, fault=_fault_at(step, nth))
    log_dir = LogDir.open(str(root))
    for path in log_dir.partition_paths.values():
        recover_partition(log_dir.fs, path)  # what the broker's (and kafkalog's) loader does at start-up
    recovered = _snapshot(root)
    states = {}
    for partition in PARTITIONS:
        records = _records(recovered, partition)
        assert records in (_records(old, partition), _records(compacted, partition)), partition
        states[partition] = "old" if records == _records(old, partition) else "new"
    # compacted=True: a crash before cleaner-offset-checkpoint leaves a compacted log the validator
    # cannot recognise as one, and a compacted log keeps .txnindex entries as they were written
    assert validate_paths([str(root)], index_interval_bytes=512, compacted=True).exit_code == 0
    compact(spark, str(root), RESOLVER, NOW)  # the rerun
    if set(states.values()) == {"old"}:
        assert _snapshot(root) == compacted
    else:  # without cleaner-offset-checkpoint the rerun cleans the new segments again, and may merge them further
        rerun = _snapshot(root)
        assert all(_records(rerun, p) == _records(compacted, p) for p in PARTITIONS)
        assert validate_paths([str(root)], index_interval_bytes=512).exit_code == 0


def test_what_a_killed_range_pass_staged_goes_and_the_range_path_writes_the_same_bytes(
    spark, source, compacted, tmp_path, monkeypatch
):
    """A pass killed on the range path leaves its staging directory in the partition directory (Kafka's
    loader reads only files): the next compaction removes it, and the range path (a range per output
    segment) then writes what an uninterrupted run on the one-task path writes."""
    from kafkalog import tuning
    from kafkalog.spark.ranges import STAGING

    root = tmp_path / "log"
    shutil.copytree(source, root)
    leftover = root / PARTITIONS[0] / STAGING
    leftover.mkdir()
    (leftover / "fates-0.arrow").write_bytes(b"half a file")
    for name, value in {"ONE_TASK_BYTES": 0, "LARGE_PARTITIONS": "ranges", "RANGE_BYTES": 1}.items():
        monkeypatch.setattr(tuning, name, value)
    compact(spark, str(root), RESOLVER, NOW)
    assert _snapshot(root) == compacted
    assert not leftover.exists()
