"""Retention offline (spec §7, §11.4): Kafka's deleteOldSegments, deleteRecords (KIP-107), consumed
retention (KIP-68), --truncate-below-start, --output, idempotence and crash safety.

The catalogue cases 83-97 and 100 (spec §10.10) are named after the UnifiedLogTest (ULT) tests they
mirror. Logs are written through PartitionWriter (the broker's append path); the high watermark
comes from replication-offset-checkpoint, as a stopped broker leaves it. Every result must validate
clean.
"""

from __future__ import annotations

import csv
import json
import os
import shutil

import pytest

from kafkalog.codec.compression import Codec
from kafkalog.codec.consumer_offsets import offset_commit_key, offset_commit_value
from kafkalog.codec.records import Record
from kafkalog.config import TopicConfig
from kafkalog.operations.generate import ConsumerOffsetsSpec, GeneratorSpec, TopicSpec, generate
from kafkalog.operations.retain import DeleteRecordsFileError, load_committed_offsets, parse_delete_records, retain
from kafkalog.operations.retain_partition import read_committed_offsets
from kafkalog.operations.retain_swap import recover
from kafkalog.operations.validate import validate_paths
from kafkalog.rules.retention import (
    CONSUMED_BREACH,
    LOG_START_OFFSET_BREACH,
    SIZE_BREACH,
    TIME_BREACH,
    CommittedOffsets,
    deletable_segments,
    delete_old_segments,
)
from kafkalog.rules.segment_meta import SegmentMeta
from kafkalog.storage.checkpoint import EpochEntry, parse_leader_epoch_checkpoint
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.log_writer import PartitionWriter
from kafkalog.storage.logdir import LogDir
from kafkalog.storage.naming import (
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    segment_file_name,
)
from kafkalog.storage.naming import INT64_MAX as LONG_MAX
from kafkalog.storage.partition import Partition
from kafkalog.storage.segment_writer import SegmentWriter
from kafkalog.storage.swap import in_flight_files

NOW = 1_700_000_000_000
TOPIC = "t"
TP = (TOPIC, 0)


class Crash(Exception):
    pass


# -- building logs ----------------------------------------------------------------------------------------


def write_partition(
    root,
    segments,
    *,
    topic=TOPIC,
    partition=0,
    epochs=None,
    producer_id=None,
    transactional=False,
    codec=Codec.NONE,
    legacy=False,
):
    """Write one partition under `root`. `segments` lists segments; each item of a segment is one
    batch: a timestamp (one record) or a list of timestamps (several records). `epochs` maps an
    offset to the leader epoch that starts there."""
    fs = LogFileSystem.for_path(str(root))[0]
    writer = PartitionWriter(
        fs, str(root), topic, partition, leader_epoch=None if legacy else 0, leader_epoch_cache=not legacy
    )
    sequence = 0
    for i, segment in enumerate(segments):
        if i:
            writer.roll()
        for item in segment:
            stamps = item if isinstance(item, list) else [item]
            if epochs and writer.log_end_offset in epochs:
                writer.become_leader(epochs[writer.log_end_offset])
            records = [Record(-1, ts, b"k%04d" % (writer.log_end_offset + j), b"value") for j, ts in enumerate(stamps)]
            if legacy:
                writer.append_legacy_records(records, magic=0, codec=codec)
            elif producer_id is not None:
                writer.append_records(
                    records,
                    codec=codec,
                    producer_id=producer_id,
                    producer_epoch=0,
                    base_sequence=sequence,
                    is_transactional=transactional,
                )
                sequence += len(records)
                if transactional:
                    writer.append_end_txn_marker(producer_id=producer_id, producer_epoch=0, commit=True)
            else:
                writer.append_records(records, codec=codec)
    return writer.close()


def set_checkpoints(root, tp, *, hw=None, log_start=None, cleaner=None, recovery=None):
    log_dir = LogDir.open(str(root))
    for name, value in (
        (REPLICATION_OFFSET_CHECKPOINT, hw),
        (LOG_START_OFFSET_CHECKPOINT, log_start),
        (CLEANER_OFFSET_CHECKPOINT, cleaner),
        (RECOVERY_POINT_CHECKPOINT, recovery),
    ):
        if value is not None:
            log_dir.update_checkpoint(name, {tp: value})


def make_log(tmp_path, segments, *, name="log", partitions=1, hw="end", log_start=None, cleaner=None, **kwargs):
    root = tmp_path / name
    root.mkdir()
    for p in range(partitions):
        written = write_partition(root, segments, partition=p, **kwargs)
        set_checkpoints(
            root,
            (TOPIC, p),
            hw=written.log_end_offset if hw == "end" else hw,
            log_start=log_start,
            cleaner=cleaner,
            recovery=written.log_end_offset,
        )
    return str(root)


def part(root, tp=TP):
    return LogDir.open(root).partition(*tp)


def bases(root, tp=TP):
    return [s.base_offset for s in part(root, tp).segments]


def log_start(root, tp=TP):
    first = bases(root, tp)[0]
    cp = LogDir.open(root).read_checkpoint(LOG_START_OFFSET_CHECKPOINT).get(tp)
    return max(first, cp if cp is not None else first)


def epochs(root, tp=TP):
    return parse_leader_epoch_checkpoint(part(root, tp).read_file(LEADER_EPOCH_CHECKPOINT).decode())


def data_records(root, tp=TP):
    """(offset, key, value, timestamp) of every data record of the partition."""
    out = []
    for segment in part(root, tp).segments:
        for _, batch in segment.batches():
            if not batch.is_control:
                out += [(r.offset, r.key, r.value, r.timestamp) for r in batch.records()]
    return out


def visible(root, tp=TP):
    """The log as Kafka serves it: the log start offset and the data records from there on."""
    start = log_start(root, tp)
    return start, [r for r in data_records(root, tp) if r[0] >= start]


def tree(root, with_mtime=False):
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            if name == ".lock":
                continue
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                data = f.read()
            out[os.path.relpath(path, root)] = (data, os.stat(path).st_mtime_ns) if with_mtime else data
    return out


def assert_valid(root):
    report = validate_paths([root])
    assert report.exit_code == 0, report.summary()


def batch_size(root, tp=TP):
    segment = part(root, tp).segments[0]
    return next(segment.batches())[1].size


def delete_records_file(tmp_path, entries, name="delete.json"):
    path = tmp_path / name
    path.write_text(
        json.dumps({"partitions": [{"topic": t, "partition": p, "offset": o} for t, p, o in entries], "version": 1})
    )
    return str(path)


def run(root, now=NOW, **kwargs):
    return retain(root, now_ms=now, **kwargs)


def only(report, tp=TP):
    return next(p for p in report.partitions if p.tp == tp)


FIVE_OLD = [[NOW - 1000] * 5]


# -- catalogue 83-97, 100 ---------------------------------------------------------------------------------


def test_catalogue_83_ULT_testDeleteOldSegments(tmp_path):
    root = make_log(tmp_path, FIVE_OLD * 20, hw=None, epochs={90: 1})
    config = {"retention.ms": "999"}
    assert epochs(root) == [EpochEntry(0, 0), EpochEntry(1, 90)]
    report = run(root, config=config)  # no high watermark yet: nothing may go
    assert len(bases(root)) == 20 and log_start(root) == 0 and not only(report).deleted
    for hw in range(25, 31):
        set_checkpoints(root, TP, hw=hw)
        run(root, config=config)
        assert log_start(root) <= hw
        assert all(s.last_offset >= hw for s in (s.meta() for s in part(root).segments))
        assert_valid(root)
    set_checkpoints(root, TP, hw=100)
    report = run(root, config=config)
    assert bases(root) == [100] and part(root).segments[0].size == 0
    assert only(report).outcome.rolled_at == 100
    assert epochs(root) == [EpochEntry(1, 100)]
    assert log_start(root) == 100
    assert_valid(root)


def test_catalogue_84_ULT_shouldDeleteSizeBasedSegments(tmp_path):
    root = make_log(tmp_path, [[NOW] * 5] * 3)
    report = run(root, config={"retention.bytes": str(10 * batch_size(root))})
    assert bases(root) == [5, 10]
    assert [d.reason for d in only(report).deleted] == [SIZE_BREACH]
    assert_valid(root)


def test_catalogue_85_ULT_shouldNotDeleteSizeBasedSegmentsWhenUnderRetentionSize(tmp_path):
    root = make_log(tmp_path, [[NOW] * 5] * 3)
    report = run(root, config={"retention.bytes": str(15 * batch_size(root))})
    assert bases(root) == [0, 5, 10] and not only(report).changed


def test_catalogue_86_ULT_shouldDeleteTimeBasedSegmentsReadyToBeDeleted(tmp_path):
    root = make_log(tmp_path, [[10] * 5] * 3)
    report = run(root, config={"retention.ms": "10000"})
    plan = only(report)
    assert [d.reason for d in plan.deleted] == [TIME_BREACH] * 3
    assert bases(root) == [15] and part(root).segments[0].size == 0  # only the new, empty segment
    assert plan.outcome.rolled_at == 15 and log_start(root) == 15
    assert 15 in part(root).snapshots and epochs(root) == [EpochEntry(0, 15)]
    assert_valid(root)


def test_catalogue_87_ULT_shouldNotDeleteTimeBasedSegmentsWhenNoneReadyToBeDeleted(tmp_path):
    root = make_log(tmp_path, [[NOW] * 5] * 3)
    report = run(root, config={"retention.ms": str(7 * 24 * 3600 * 1000)})
    assert bases(root) == [0, 5, 10] and not only(report).changed


def test_catalogue_88_ULT_shouldNotDeleteSegmentsWhenPolicyDoesNotIncludeDelete(tmp_path):
    root = make_log(tmp_path, [[10] * 5] * 3, cleaner=0)
    report = run(root, config={"cleanup.policy": "compact", "retention.ms": "10000"})
    assert bases(root) == [0, 5, 10] and not only(report).changed


def test_catalogue_89_ULT_shouldDeleteSegmentsReadyToBeDeletedWhenCleanupPolicyIsCompactAndDelete(tmp_path):
    root = make_log(tmp_path, [[10] * 5] * 3, cleaner=0)
    report = run(root, config={"cleanup.policy": "compact,delete", "retention.ms": "10000"})
    assert bases(root) == [15] and len(only(report).deleted) == 3
    # the cleaner checkpoint is raised to the new log start offset (§7.5)
    assert LogDir.open(root).read_checkpoint(CLEANER_OFFSET_CHECKPOINT)[TP] == 15
    assert_valid(root)


def test_catalogue_90_ULT_shouldDeleteStartOffsetBreachedSegmentsWhenPolicyDoesNotIncludeDelete(tmp_path):
    root = make_log(tmp_path, [[10] * 5] * 3, log_start=5, cleaner=0)
    report = run(root, config={"cleanup.policy": "compact", "retention.ms": "10000"})
    assert [d.reason for d in only(report).deleted] == [LOG_START_OFFSET_BREACH]
    remaining = bases(root)
    assert remaining[0] <= 5 and all(b > 5 for b in remaining[1:])
    assert log_start(root) == 5 and LogDir.open(root).read_checkpoint(CLEANER_OFFSET_CHECKPOINT)[TP] == 5
    assert_valid(root)


def test_catalogue_91_ULT_testLogDeletionAfterDeleteRecords(tmp_path):
    root = make_log(tmp_path, [[NOW] * 5] * 3)
    for offset, segments in ((1, 3), (6, 2), (15, 1)):
        report = run(root, delete_records=delete_records_file(tmp_path, [(TOPIC, 0, offset)]))
        assert len(bases(root)) == segments and log_start(root) == offset
        assert report.delete_records_results == [
            {"topic": TOPIC, "partition": 0, "requestedOffset": offset, "offset": offset, "lowWatermark": offset}
        ]
        assert LogDir.open(root).read_checkpoint(LOG_START_OFFSET_CHECKPOINT)[TP] == offset
        assert_valid(root)


def test_catalogue_92_ULT_testRetentionIdempotency(tmp_path):
    root = make_log(tmp_path, [[NOW + 100], [NOW], [NOW + 100]])
    config = {"retention.ms": "900"}
    report = run(root, now=NOW + 901, config=config, delete_records=delete_records_file(tmp_path, [(TOPIC, 0, 1)]))
    # the log start offset rule removes the first segment, which unblocks the time rule for the second
    assert [d.reason for d in only(report).deleted] == [LOG_START_OFFSET_BREACH, TIME_BREACH]
    again = run(root, now=NOW + 901, config=config)
    assert not only(again).deleted and not only(again).changed
    assert bases(root) == [2]
    assert_valid(root)


def test_catalogue_93_ULT_testCannotDeleteSegmentsAtOrAboveHighWatermark(tmp_path):
    root = make_log(tmp_path, FIVE_OLD * 20, hw=0)
    config = {"retention.ms": "999"}
    for hw in range(0, 101):
        set_checkpoints(root, TP, hw=hw)
        run(root, config=config)
        remaining = bases(root)
        assert log_start(root) <= hw
        assert remaining[0] <= hw and all(b > hw for b in remaining[1:]), (hw, remaining)
    assert log_start(root) == 100 and bases(root) == [100] and part(root).segments[0].size == 0
    assert_valid(root)


def test_catalogue_94_ULT_testCannotIncrementLogStartOffsetPastHighWatermark(tmp_path):
    root = make_log(tmp_path, [[NOW] * 5] * 10, partitions=2, hw=25)
    report = run(root, delete_records=delete_records_file(tmp_path, [(TOPIC, 0, 26), (TOPIC, 1, 20)]))
    failed, done = report.delete_records_results
    assert failed["error"] == {
        "code": "OFFSET_OUT_OF_RANGE",
        "message": "Cannot increment the log start offset to 26 "
        "of partition t-0 since it is larger than the high watermark 25",
    }
    assert done["lowWatermark"] == 20 and report.delete_records_failed  # the other partition proceeds
    assert log_start(root, (TOPIC, 0)) == 0 and len(bases(root, (TOPIC, 0))) == 10
    assert log_start(root, (TOPIC, 1)) == 20 and bases(root, (TOPIC, 1))[0] == 20
    assert_valid(root)


def test_catalogue_95_ULT_testSegmentDeletionWithHighWatermarkInitialization(tmp_path):
    root = make_log(tmp_path, FIVE_OLD * 20, hw=25)
    report = run(root, config={"retention.ms": "999"})
    assert only(report).deleted and log_start(root) <= 25 and bases(root)[0] == 25
    assert_valid(root)


def _metas(sizes, step=5):
    return [SegmentMeta(i * step, size, NOW, i * step + step - 1 if size else None) for i, size in enumerate(sizes)]


def test_catalogue_96_ULT_testDeletableSegmentsFilter_and_testDeletableSegmentsIteration():
    with_empty_active = _metas([100] * 10 + [0])
    deletable = deletable_segments(with_empty_active, lambda s, n: True, high_watermark=50, log_end_offset=50)
    assert deletable == with_empty_active[:10]  # never the empty active segment
    appended = _metas([100] * 10 + [30])
    assert deletable_segments(appended, lambda s, n: True, high_watermark=55, log_end_offset=55) == appended
    calls = []
    deletable_segments(
        appended,
        lambda s, n: calls.append((s.base_offset, n and n.base_offset)) or True,
        high_watermark=55,
        log_end_offset=55,
    )
    assert calls == [(i * 5, i * 5 + 5) for i in range(10)] + [(50, None)]
    # and the scan stops at the first segment it may not delete
    assert (
        deletable_segments(appended, lambda s, n: s.base_offset != 20, high_watermark=55, log_end_offset=55)
        == appended[:4]
    )


@pytest.mark.parametrize(
    "boundary, before, after",
    [
        (
            7,
            [(0, 0), (1, 7), (2, 10)],
            [(0, 5), (1, 7), (2, 10)],
        ),  # shouldUpdateOffsetForLeaderEpochsWhenDeletingSegments
        (5, [(0, 0), (1, 5), (2, 10)], [(1, 5), (2, 10)]),  # shouldTruncateLeaderEpochsWhenDeletingSegments
    ],
)
def test_catalogue_97_ULT_shouldTruncateLeaderEpochsWhenDeletingSegments(tmp_path, boundary, before, after):
    root = make_log(tmp_path, [[NOW] * 5] * 3, epochs={boundary: 1, 10: 2})
    assert epochs(root) == [EpochEntry(*e) for e in before]
    run(root, config={"retention.bytes": str(10 * batch_size(root))})
    assert bases(root) == [5, 10] and epochs(root) == [EpochEntry(*e) for e in after]
    assert_valid(root)


def test_catalogue_100_ULT_testGetFirstBatchTimestampForSegments(tmp_path):
    fs = LogFileSystem.for_path(str(tmp_path))[0]
    d = tmp_path / "t-0"
    d.mkdir()
    for base in (0, 1):
        SegmentWriter(fs, str(d), base).close()
    assert [s.first_batch_timestamp() for s in Partition.open(fs, str(d)).segments] == [LONG_MAX, LONG_MAX]
    root = make_log(tmp_path, [[1000], [2000]])
    assert [s.first_batch_timestamp() for s in part(root).segments] == [1000, 2000]


# -- timestamps, high watermark, the pure pass --------------------------------------------------------------


def test_time_retention_falls_back_to_the_log_files_mtime_without_timestamps(tmp_path):
    root = make_log(tmp_path, [[-1] * 3] * 3, legacy=True)
    for segment, age in zip(part(root).segments, (5000, 4000, 10)):
        os.utime(segment.log_path, ns=((NOW - age) * 10**6,) * 2)
    meta = part(root).segments[0].meta()
    assert not meta.timestamp_from_index and meta.largest_timestamp == NOW - 5000
    report = run(root, config={"retention.ms": "3000"})
    assert [d.segment.timestamp_from_index for d in only(report).deleted] == [False, False]
    assert bases(root) == [6]
    assert_valid(root)


def test_largest_timestamp_is_the_time_index_last_entry_not_the_mtime(tmp_path):
    root = make_log(tmp_path, [[NOW - 5000, NOW - 100], [NOW]])
    segment = part(root).segments[0]
    os.utime(segment.log_path, ns=(NOW * 10**6,) * 2)
    meta = segment.meta()
    assert (meta.largest_timestamp, meta.timestamp_from_index, meta.last_offset) == (NOW - 100, True, 1)


def test_without_a_high_watermark_kafka_deletes_nothing_unless_told_to_trust_the_log_end(tmp_path):
    root = make_log(tmp_path, FIVE_OLD * 3, hw=None)
    plan = only(run(root, config={"retention.ms": "10"}, dry_run=True))
    assert plan.high_watermark == 0 and not plan.deleted
    plan = only(run(root, config={"retention.ms": "10"}, dry_run=True, missing_high_watermark="log-end"))
    assert plan.high_watermark == 15 and len(plan.deleted) == 3


def test_a_future_timestamp_blocks_time_retention_of_everything_after_it():
    segments = [
        SegmentMeta(0, 10, NOW - 10_000, 4),
        SegmentMeta(5, 10, NOW + 50_000, 9),
        SegmentMeta(10, 10, NOW - 10_000, 14),
    ]
    outcome = delete_old_segments(
        segments,
        config=TopicConfig(retention_ms=1000),
        log_start_offset=0,
        log_end_offset=15,
        high_watermark=15,
        now_ms=NOW,
    )
    assert [d.segment.base_offset for d in outcome.deleted] == [0] and outcome.log_start_offset == 5


def test_internal_topics_stay_compacted_under_a_delete_default(tmp_path):
    root = tmp_path / "log"
    root.mkdir()
    written = write_partition(root, [[10] * 3] * 2, topic="__consumer_offsets")
    set_checkpoints(root, ("__consumer_offsets", 0), hw=written.log_end_offset)
    assert not only(run(str(root), config={"retention.ms": "10"}), ("__consumer_offsets", 0)).changed


# -- deleteRecords ------------------------------------------------------------------------------------------


def test_delete_records_minus_one_is_the_high_watermark_and_policy_and_unknown_partitions_fail(tmp_path):
    root = tmp_path / "log"
    root.mkdir()
    for topic in ("t", "c"):
        written = write_partition(root, [[NOW] * 5] * 3, topic=topic)
        set_checkpoints(root, (topic, 0), hw=12)
    report = run(str(root), delete_records=delete_records_file(tmp_path, [("t", 0, -1), ("gone", 0, 1), ("t", 1, 0)]))
    results = {(r["topic"], r["partition"]): r for r in report.delete_records_results}
    assert results[("t", 0)]["offset"] == 12 and results[("t", 0)]["lowWatermark"] == 12
    assert bases(str(root)) == [10] and log_start(str(root)) == 12
    assert results[("gone", 0)]["error"]["code"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert results[("t", 1)]["error"]["message"] == "This server does not host this topic-partition."
    # a compacted topic refuses (PolicyViolationException), checked with the topic's own config
    report = retain(
        str(root), now_ms=NOW, config=_resolver_with("c", "cleanup.policy", "compact"), delete_records={("c", 0): 3}
    )
    assert report.delete_records_results[0]["error"] == {
        "code": "POLICY_VIOLATION",
        "message": "Records of partition c-0 can not be deleted due to the configured policy",
    }
    assert log_start(str(root), ("c", 0)) == 0 and written.log_end_offset == 15


def _resolver_with(topic, name, value):
    from kafkalog.config import resolver_from

    return resolver_from(topic_settings=[f"{topic}:{name}={value}"])


@pytest.mark.parametrize(
    "text, message",
    [
        (
            '{"partitions":[{"topic":"t","partition":0,"offset":1},{"topic":"t","partition":0,"offset":2}]}',
            "Offset json file contains duplicate topic partitions: t-0",
        ),
        ('{"partitions":[],"version":2}', "Not supported version field value 2"),
        ('{"version":1}', "Missing partitions field"),
        ("{not json", "The input string is not a valid JSON"),
        ('{"partitions":[{"topic":"t","offset":1}]}', "No such field exists: `partition`"),
    ],
)
def test_delete_records_file_refused_with_the_tools_messages(text, message):
    with pytest.raises(DeleteRecordsFileError) as err:
        parse_delete_records(text)
    assert err.value.message == message


def test_delete_records_file_accepts_the_tools_format():
    assert parse_delete_records('{"partitions":[{"topic":"a-b","partition":3,"offset":-1}],"version":1}') == {
        ("a-b", 3): -1
    }


# -- --truncate-below-start ------------------------------------------------------------------------------------


def _truncation_log(tmp_path, name="log"):
    root = tmp_path / name
    root.mkdir()
    fs = LogFileSystem.for_path(str(root))[0]
    w = PartitionWriter(fs, str(root), TOPIC, 0, leader_epoch=0)

    def plain(n, codec=Codec.NONE):
        w.append_records(
            [Record(-1, NOW + w.log_end_offset + i, b"p%d" % (w.log_end_offset + i), b"x" * 20) for i in range(n)],
            codec=codec,
        )

    sequence = [0]

    def idempotent(n):
        w.append_records(
            [Record(-1, NOW + w.log_end_offset + i, b"i%d" % (w.log_end_offset + i), b"y" * 20) for i in range(n)],
            producer_id=7,
            producer_epoch=0,
            base_sequence=sequence[0],
        )
        sequence[0] += n

    plain(3)
    idempotent(2)
    w.roll()  # segment 5
    idempotent(2)  # 5-6
    plain(2)  # 7-8
    w.append_records(
        [Record(-1, NOW, b"tx", b"z")], producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True
    )  # 9
    w.append_end_txn_marker(producer_id=9, producer_epoch=0, commit=False)  # 10
    plain(6, codec=Codec.GZIP)  # 11-16, straddles 14
    idempotent(3)  # 17-19
    w.roll()  # segment 20
    plain(3)
    written = w.close()
    set_checkpoints(root, TP, hw=written.log_end_offset, recovery=written.log_end_offset)
    return str(root)


def test_truncate_below_start_removes_records_below_the_log_start_keeping_offsets(tmp_path):
    root = _truncation_log(tmp_path)
    before = data_records(root)
    report = run(root, delete_records={TP: 14}, truncate_below_start=True)
    plan = only(report)
    assert [d.segment.base_offset for d in plan.deleted] == [0] and plan.truncation.base_offset == 5
    assert bases(root) == [5, 20] and log_start(root) == 14
    after = data_records(root)
    assert all(r[0] >= 14 for r in after)
    assert after == [r for r in before if r[0] >= 14]  # same offsets, keys, values, timestamps
    batches = [b for _, b in part(root).segments[0].batches()]
    straddling = next(b for b in batches if b.base_offset == 11)
    assert straddling.codec == Codec.GZIP and straddling.last_offset == 16
    assert [r.offset for r in straddling.records()] == [14, 15, 16]
    # producer batches below the start stay as empty batches (producer state), markers stay
    assert [(b.base_offset, b.records_count) for b in batches if b.base_offset < 11] == [(5, 0), (9, 0), (10, 1)]
    assert plan.truncation.records_removed == 2 + 2 + 1 + 3  # in segment 5; segment 0 is deleted whole
    assert_valid(root)
    again = run(root, truncate_below_start=True)
    assert not only(again).changed


def test_truncate_below_start_splices_large_batches_as_it_reencodes_them(tmp_path, monkeypatch):
    """Batches of SPLICE_THRESHOLD records or more take the splice path (codec/filter.py): an
    idempotent batch below the start empties, a plain batch across it keeps the records from the
    start on, with the same bytes as when every batch is re-encoded."""
    from kafkalog.codec import filter as filter_module

    n = filter_module.SPLICE_THRESHOLD
    logs = {}
    for label, threshold in (("splice", n), ("reencode", 10**9)):
        monkeypatch.setattr(filter_module, "SPLICE_THRESHOLD", threshold)
        root = tmp_path / label
        root.mkdir()
        w = PartitionWriter(LogFileSystem.for_path(str(root))[0], str(root), TOPIC, 0, leader_epoch=0)
        w.append_records(
            [Record(-1, NOW + i, b"i%d" % i, b"y" * 20) for i in range(n)],
            producer_id=7,
            producer_epoch=0,
            base_sequence=0,
        )  # 0 .. n-1
        w.append_records(
            [Record(-1, NOW + n + i, b"p%d" % i, b"x" * 20) for i in range(n)], codec=Codec.LZ4
        )  # n .. 2n-1, straddles the start
        w.roll()
        w.append_records([Record(-1, NOW + 2 * n, b"last", b"z")])
        written = w.close()
        set_checkpoints(root, TP, hw=written.log_end_offset, recovery=written.log_end_offset)
        before = data_records(str(root))
        report = run(str(root), delete_records={TP: n + 3}, truncate_below_start=True)
        assert only(report).truncation.records_removed == n + 3
        assert data_records(str(root)) == [r for r in before if r[0] >= n + 3]
        assert_valid(str(root))
        logs[label] = (root / "t-0" / segment_file_name(0, ".log")).read_bytes()
    assert logs["splice"] == logs["reencode"]


def test_without_truncate_below_start_the_partly_covered_segment_is_kept_whole(tmp_path):
    root = _truncation_log(tmp_path)
    run(root, delete_records={TP: 14})
    assert log_start(root) == 14 and min(r[0] for r in data_records(root)) == 5
    assert_valid(root)


# -- consumed retention (KIP-68) -------------------------------------------------------------------------------

GROUPS = ("fast", "mid", "slow")


@pytest.fixture(scope="module")
def consumed_log(tmp_path_factory):
    root = tmp_path_factory.mktemp("consumed") / "log"
    spec = GeneratorSpec(
        seed=3,
        topics=[
            TopicSpec(
                "events",
                partitions=2,
                records=300,
                keys=20,
                batch_records=(1, 3),
                segment_bytes=2048,
                index_interval_bytes=256,
            )
        ],
        consumer_offsets=ConsumerOffsetsSpec(partitions=2, groups=GROUPS, commit_rounds=3),
    )
    summary = generate(str(root), spec)
    return str(root), summary


def _copy(src, tmp_path, name="copy"):
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return str(dst)


def _consumed_config(consumed_ms=60_000, retention_ms=10 * 24 * 3600 * 1000):
    return {
        "retention.ms": str(retention_ms),
        "retention.commitoffset.enable": "true",
        "retention.commitoffset.ms": str(consumed_ms),
    }


def _segment_facts(root, tp):
    """(base, last offset, largest timestamp) of each segment, from its batches (not its indexes)."""
    out = []
    for segment in part(root, tp).segments:
        batches = [b for _, b in segment.batches()]
        out.append((segment.base_offset, max(b.last_offset for b in batches), max(b.max_timestamp for b in batches)))
    return out


def test_consumed_retention_deletes_only_what_every_group_consumed(consumed_log, tmp_path):
    src, summary = consumed_log
    root = _copy(src, tmp_path)
    now = summary.end_ms
    report = run(root, now=now, config=_consumed_config())
    for p in (0, 1):
        tp = ("events", p)
        commits = {g: summary.commits[(g, "events", p)].offset for g in GROUPS}
        assert len(set(commits.values())) == 3  # the groups are at different offsets
        low = min(commits.values())
        facts = _segment_facts(src, tp)
        expected = []
        for base, last, largest in facts[:-1]:
            if last < low and now - largest > 60_000:
                expected.append(base)
            else:
                break
        plan = only(report, tp)
        assert expected and [d.segment.base_offset for d in plan.deleted] == expected
        assert {d.reason for d in plan.deleted} == {CONSUMED_BREACH}
        assert plan.consumed.applied and plan.consumed.min_committed_offset == low
        assert plan.consumed.groups == commits
        # the slowest group holds back what is old enough but not consumed by it
        held = {g.group: g for g in plan.consumed.holding_back}
        slow = min(commits, key=commits.get)
        assert slow in held and held[slow].from_offset == low
        assert not plan.consumed.would_lose
        assert bases(root, tp)[0] == plan.new_log_start_offset
    assert_valid(root)


def test_forced_retention_is_the_backstop_and_names_the_groups_that_lose_data(consumed_log, tmp_path):
    src, summary = consumed_log
    root = _copy(src, tmp_path)
    now = summary.end_ms
    report = run(root, now=now, config=_consumed_config(consumed_ms=60_000, retention_ms=80_000))
    for p in (0, 1):
        tp = ("events", p)
        commits = {g: summary.commits[(g, "events", p)].offset for g in GROUPS}
        plan = only(report, tp)
        forced = [d for d in plan.deleted if d.reason == TIME_BREACH]
        assert forced, plan.to_dict()
        losers = {g.group: g for g in plan.consumed.would_lose}
        expected = {g for g, o in commits.items() if o < forced[-1].upper_bound}
        assert set(losers) == expected and expected
        for g in expected:
            assert losers[g].committed_offset == commits[g] and losers[g].to_offset == forced[-1].upper_bound
    assert_valid(root)


def test_a_group_with_an_unknown_offset_blocks_consumed_retention(consumed_log, tmp_path):
    src, summary = consumed_log
    path = tmp_path / "offsets.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["group", "topic", "partition", "offset"])
        for p in (0, 1):
            w.writerow(["a", "events", p, 1000])
        w.writerow(["b", "events", 0, 1000])  # b has no offset for partition 1
        w.writerow(["c", "other", 0, ""])  # another topic: does not matter here
    report = run(src, now=summary.end_ms, config=_consumed_config(), committed_offsets=str(path), dry_run=True)
    p0, p1 = only(report, ("events", 0)), only(report, ("events", 1))
    assert p0.consumed.applied and p0.deleted
    assert not p1.consumed.applied and not p1.deleted
    assert p1.consumed.unknown_groups == ["b"] and "b" in p1.consumed.reason and "not known" in p1.consumed.reason
    assert [g.group for g in p1.consumed.holding_back] == ["b"]  # a has consumed everything
    # an empty offset is unknown too
    with open(path, "a", newline="") as f:
        csv.writer(f).writerow(["c", "events", 0, ""])
    report = run(src, now=summary.end_ms, config=_consumed_config(), committed_offsets=str(path), dry_run=True)
    assert not only(report, ("events", 0)).consumed.applied
    assert only(report, ("events", 0)).consumed.unknown_groups == ["c"]


def test_offsets_from_consumer_offsets_equal_those_given_as_a_file(consumed_log, tmp_path):
    src, summary = consumed_log
    expected = {k: v.offset for k, v in summary.commits.items()}
    from_log = read_committed_offsets(LogDir.open(src))
    assert from_log.offsets == expected
    rows = from_log.to_rows()
    csv_path, json_path, parquet_path = tmp_path / "o.csv", tmp_path / "o.json", tmp_path / "o.parquet"
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["group", "topic", "partition", "offset"])
        w.writeheader()
        w.writerows(rows)
    json_path.write_text(json.dumps({"commits": rows}))
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), parquet_path)
    for path in (csv_path, json_path, parquet_path):
        assert load_committed_offsets(str(path)).offsets == expected, path
    try:
        from deltalake import write_deltalake
    except ImportError:
        pass
    else:
        write_deltalake(str(tmp_path / "delta"), pa.Table.from_pylist(rows))
        assert load_committed_offsets(str(tmp_path / "delta")).offsets == expected
    config = _consumed_config()
    from_dir = run(src, now=summary.end_ms, config=config, dry_run=True)
    from_file = run(src, now=summary.end_ms, config=config, dry_run=True, committed_offsets=str(csv_path))
    assert [p.to_dict() for p in from_dir.partitions] == [p.to_dict() for p in from_file.partitions]


def test_groups_can_be_included_or_excluded(consumed_log):
    src, summary = consumed_log
    config = _consumed_config()
    tp = ("events", 0)
    commits = {g: summary.commits[(g, "events", 0)].offset for g in GROUPS}
    slow = min(commits, key=commits.get)
    everyone = only(run(src, now=summary.end_ms, config=config, dry_run=True), tp)
    without_slow = only(run(src, now=summary.end_ms, config=config, dry_run=True, exclude_groups=[slow]), tp)
    only_fast = only(run(src, now=summary.end_ms, config=config, dry_run=True, include_groups=["fa*"]), tp)
    assert set(without_slow.consumed.groups) == set(GROUPS) - {slow} and set(only_fast.consumed.groups) == {"fast"}
    assert len(everyone.deleted) <= len(without_slow.deleted) <= len(only_fast.deleted)
    assert len(everyone.deleted) < len(only_fast.deleted)


def test_consumer_offsets_replay_skips_aborted_transactions_and_keeps_log_order(tmp_path):
    root = tmp_path / "log"
    root.mkdir()
    fs = LogFileSystem.for_path(str(root))[0]
    w = PartitionWriter(fs, str(root), "__consumer_offsets", 0)

    def commit(group, offset, **kwargs):
        value = None if offset is None else offset_commit_value(offset, -1, "", NOW)
        w.append_records([Record(-1, NOW, offset_commit_key(group, TOPIC, 0), value)], **kwargs)

    txn = {"producer_epoch": 0, "is_transactional": True}
    commit("g1", 10)
    commit("g2", 20, producer_id=5, base_sequence=0, **txn)
    commit("g3", 30, producer_id=6, base_sequence=0, **txn)
    commit("g4", 50, producer_id=7, base_sequence=0, **txn)
    commit("g4", 40)  # later in the log than the transactional 50: wins when that one commits
    w.append_end_txn_marker(producer_id=5, producer_epoch=0, commit=True)
    w.append_end_txn_marker(producer_id=6, producer_epoch=0, commit=False)
    w.append_end_txn_marker(producer_id=7, producer_epoch=0, commit=True)
    commit("g5", 1)
    commit("g5", None)  # a tombstone: the commit is deleted
    commit("g6", 60, producer_id=8, base_sequence=0, **txn)  # never ends: does not count
    w.close()
    assert read_committed_offsets(LogDir.open(str(root))).offsets == {
        ("g1", TOPIC, 0): 10,
        ("g2", TOPIC, 0): 20,
        ("g4", TOPIC, 0): 40,
    }


def test_committed_offsets_per_partition_know_the_groups_of_the_topic():
    offsets = CommittedOffsets({("a", "t", 0): 5, ("a", "t", 1): 6, ("b", "t", 0): 7, ("c", "u", 0): 1})
    assert offsets.for_partition("t", 1) == {"a": 6, "b": None}
    assert offsets.for_partition("u", 0) == {"c": 1}


# -- --output, idempotence, determinism --------------------------------------------------------------------------


def test_output_leaves_the_input_byte_identical_and_equals_the_in_place_result(consumed_log, tmp_path):
    src, summary = consumed_log
    before = tree(src, with_mtime=True)
    config = _consumed_config(retention_ms=80_000)
    out = str(tmp_path / "out")
    report = run(
        src,
        now=summary.end_ms,
        config=config,
        output=out,
        truncate_below_start=True,
        delete_records={("events", 1): 200},
    )
    assert report.totals()["segmentsDeleted"] > 0
    assert tree(src, with_mtime=True) == before
    assert_valid(out)
    in_place = _copy(src, tmp_path, "in-place")
    run(in_place, now=summary.end_ms, config=config, truncate_below_start=True, delete_records={("events", 1): 200})
    assert tree(out) == tree(in_place)
    # the same input and --now give the same bytes
    again = str(tmp_path / "out2")
    run(
        src,
        now=summary.end_ms,
        config=config,
        output=again,
        truncate_below_start=True,
        delete_records={("events", 1): 200},
    )
    assert tree(again) == tree(out)


def test_output_must_be_new(consumed_log, tmp_path):
    from kafkalog.errors import LogDirError

    src, summary = consumed_log
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(LogDirError, match="must not exist"):
        run(src, output=str(tmp_path / "full"))


def test_a_second_run_does_nothing(consumed_log, tmp_path):
    src, summary = consumed_log
    root = _copy(src, tmp_path)
    config = _consumed_config(retention_ms=80_000)
    first = run(root, now=summary.end_ms, config=config, truncate_below_start=True)
    assert first.totals()["partitionsChanged"] > 0
    snapshot = tree(root, with_mtime=True)
    second = run(root, now=summary.end_ms, config=config, truncate_below_start=True)
    assert second.totals()["partitionsChanged"] == 0 and not any(p.changed for p in second.partitions)
    assert tree(root, with_mtime=True) == snapshot


def test_dry_run_changes_nothing(consumed_log):
    src, summary = consumed_log
    before = tree(src, with_mtime=True)
    report = run(src, now=summary.end_ms, config={"retention.ms": "1"}, dry_run=True)
    assert report.totals()["segmentsDeleted"] > 0 and tree(src, with_mtime=True) == before


# -- crash safety ---------------------------------------------------------------------------------------------


def _crash_scenarios(tmp_path, name):
    if name == "roll":
        root = make_log(tmp_path, [[10] * 5] * 3, name=name)
        # without a producer snapshot at the log end offset, the roll writes one
        snapshot = os.path.join(root, "t-0", segment_file_name(15, ".snapshot"))
        original = open(snapshot, "rb").read()
        os.remove(snapshot)
        return root, {"config": {"retention.ms": "10000"}}, original
    root = _truncation_log(tmp_path, name)
    return root, {"delete_records": {TP: 14}, "truncate_below_start": True}, None


@pytest.mark.parametrize("scenario", ["roll", "truncate"])
def test_a_crash_at_any_step_recovers_to_the_old_or_the_new_log(tmp_path, scenario):
    template, kwargs, original_snapshot = _crash_scenarios(tmp_path, scenario)
    old = visible(template)
    reference = _copy(template, tmp_path, "reference")
    steps = []
    run(reference, fault=lambda step, name: steps.append((step, name)), **kwargs)
    new = visible(reference)
    assert new != old and len(steps) > 5
    final = tree(reference)
    if original_snapshot is not None:
        assert (
            open(os.path.join(reference, "t-0", segment_file_name(15, ".snapshot")), "rb").read() == original_snapshot
        )
    outcomes = set()
    for i, step in enumerate(steps):
        root = _copy(template, tmp_path, f"crash{i}")
        seen = []

        def fault(step_name, file_name, seen=seen, i=i):
            seen.append(step_name)
            if len(seen) == i + 1:
                raise Crash(step_name)

        with pytest.raises(Crash):
            run(root, fault=fault, **kwargs)
        fs = LogFileSystem.for_path(root)[0]
        recover(fs, os.path.join(root, "t-0"))
        assert not in_flight_files(fs, os.path.join(root, "t-0"))
        assert_valid(root)
        state = visible(root)
        assert state in (old, new), step
        outcomes.add(state == new)
        run(root, **kwargs)  # the next run finishes the job
        assert tree(root) == final, step
    assert outcomes == {False, True}


# -- real broker directories ------------------------------------------------------------------------------------


@pytest.mark.parametrize("broker", ["confluent-5.1.2-lz4", "kafka-3.1.0", "kafka-2.7.1-zk"])
def test_committed_offsets_of_real_brokers_match_an_independent_decode(real_fixtures, broker):
    """kafka-python reads the records, the coordinator's replay decodes them; retention's offline
    reader must find the same committed offsets."""
    from kafka.record import MemoryRecords

    from kafkalog.codec.consumer_offsets import committed_offsets

    root = real_fixtures / "broker-dirs" / broker
    expected = {}
    for directory in sorted(root.glob("__consumer_offsets-*")):
        records = []
        for segment in sorted(directory.glob("*.log"), key=lambda p: int(p.stem)):
            batches = MemoryRecords(segment.read_bytes())
            while (batch := batches.next_batch()) is not None:
                assert not batch.is_control_batch and not batch.is_transactional
                records += [(r.key, r.value) for r in batch]
        expected.update({k: v.offset for k, v in committed_offsets(records).items()})
    assert expected or broker != "confluent-5.1.2-lz4"
    assert read_committed_offsets(LogDir.open(str(root))).offsets == expected


def test_a_real_broker_dir_retains_to_a_valid_copy(real_fixtures, tmp_path):
    src = real_fixtures / "broker-dirs" / "kafka-gzip-idempotent"
    out = str(tmp_path / "out")
    # no timestamps in its time index: the .log file's mtime (the checkout's) is the segment's time
    now = max(s.mtime_ms for s in part(str(src), ("lsx1", 0)).segments) + 2000
    report = run(str(src), now=now, config={"retention.ms": "1000"}, output=out)
    plan = only(report, ("lsx1", 0))
    assert plan.outcome.rolled_at == plan.log_end_offset and bases(out, ("lsx1", 0)) == [plan.log_end_offset]
    assert_valid(out)


def test_an_interrupted_swap_in_the_input_is_recovered_in_the_output_copy(tmp_path):
    root = make_log(tmp_path, [[10] * 5] * 3)
    leftover = os.path.join(root, "t-0", segment_file_name(0, ".log.cleaned"))
    shutil.copy(os.path.join(root, "t-0", segment_file_name(0, ".log")), leftover)
    before = tree(root, with_mtime=True)
    dry = run(root, config={"retention.ms": "10000"}, dry_run=True)
    assert "interrupted" in only(dry).skipped
    out = str(tmp_path / "out")
    report = run(root, config={"retention.ms": "10000"}, output=out)
    assert only(report).recovered == [f"deleted {segment_file_name(0, '.log.cleaned')}"]
    assert tree(root, with_mtime=True) == before
    assert bases(out) == [15] and log_start(out) == 15
    assert_valid(out)
