"""`kafkalog generate`: deterministic, realistic log directories, checked against Kafka's rules, a fresh
replay of the log, kafka-python's reader and the `__consumer_offsets` decoder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from kafka.record import MemoryRecords

from kafkalog.codec.batch import RecordBatch, TimestampType
from kafkalog.codec.compression import Codec
from kafkalog.codec.consumer_offsets import OffsetCommitKey, committed_offsets, decode_key, group_metadata
from kafkalog.codec.control import ControlType, control_record
from kafkalog.config import resolver_from
from kafkalog.errors import ConfigError, LogDirError
from kafkalog.operations.generate import (
    CONSUMER_OFFSETS_TOPIC,
    PRESETS,
    ConsumerOffsetsSpec,
    GeneratorSpec,
    TopicSpec,
    demo_preset,
    generate,
    generate_log_dir,
    java_string_hashcode,
    partition_for_group,
    preset,
    small_preset,
)
from kafkalog.storage.checkpoint import (
    EpochEntry,
    epochs_from_batches,
    parse_leader_epoch_checkpoint,
    parse_partition_metadata,
)
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.index import OffsetIndex, TimeIndex, build_indexes
from kafkalog.storage.logdir import LogDir, parse_properties
from kafkalog.storage.producer_state import ProducerStateManager
from kafkalog.storage.snapshot import ProducerSnapshot
from kafkalog.storage.txnindex import TransactionIndex


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """The small preset, seed 1: (path, summary)."""
    path = tmp_path_factory.mktemp("small") / "logs"
    return path, generate(str(path), small_preset(1))


@pytest.fixture(scope="module")
def small_again(tmp_path_factory):
    path = tmp_path_factory.mktemp("again") / "logs"
    return path, generate(str(path), small_preset(1))


@pytest.fixture(scope="module")
def small_seed_2(tmp_path_factory):
    path = tmp_path_factory.mktemp("seed2") / "logs"
    return path, generate(str(path), small_preset(2))


@pytest.fixture(scope="module")
def partitions(small):
    """Every partition of the small log dir with its segments' batches, decoded once."""
    log_dir = LogDir.open(str(small[0]))
    out = []
    for part in log_dir.partitions():
        segments = [(segment, [batch for _, batch in segment.batches()]) for segment in part.segments]
        out.append((part, segments))
    return out


def tree(root: Path) -> dict[str, tuple[bytes | None, int]]:
    """relative path -> (bytes or None for a directory, mtime in ns), the root included."""
    out = {".": (None, root.stat().st_mtime_ns)}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            out[str(path.relative_to(root))] = (None if path.is_dir() else path.read_bytes(), path.stat().st_mtime_ns)
    return out


# -- determinism ----------------------------------------------------------------------------------------


def test_the_same_seed_gives_identical_files_and_mtimes(small, small_again):
    first, second = tree(small[0]), tree(small_again[0])
    assert sorted(first) == sorted(second)
    for name in first:
        assert first[name] == second[name], name
    assert small[1].to_dict() | {"logDir": None} == small_again[1].to_dict() | {"logDir": None}


def test_a_different_seed_gives_different_data(small, small_seed_2):
    first, other = tree(small[0]), tree(small_seed_2[0])
    logs = [n for n in first if n.endswith(".log") and n in other and first[n][0]]
    assert logs and all(first[n][0] != other[n][0] for n in logs)
    assert small[1].cluster_id != small_seed_2[1].cluster_id
    assert small[1].topic_ids["orders"] != small_seed_2[1].topic_ids["orders"]


def test_an_object_store_gets_the_same_bytes(small):
    store = LogFileSystem(pafs._MockFileSystem())  # pyarrow's in-memory stand-in for S3 and friends
    generate("bucket/logs", small_preset(1), fs=store)
    local = tree(small[0])
    stored = {}
    for info in store.fs.get_file_info(pafs.FileSelector("bucket/logs", recursive=True)):
        name = info.path[len("bucket/logs/") :]
        stored[name] = None if info.type == pafs.FileType.Directory else store.read_bytes(info.path)
    assert stored == {name: data for name, (data, _) in local.items() if name != "."}


def test_mtimes_come_from_the_data_not_the_clock(small):
    path, summary = small
    for name, (_, mtime_ns) in tree(path).items():
        assert summary.start_ms <= mtime_ns // 1_000_000 <= summary.end_ms, name


def test_out_of_order_create_times_are_generated(partitions):
    timestamps = [
        r.timestamp
        for part, segments in partitions
        if part.topic == "orders"
        for b in all_batches(segments)
        for r in b.records()
    ]
    assert any(later < earlier for earlier, later in zip(timestamps, timestamps[1:]))


def test_generating_into_a_non_empty_directory_is_refused(tmp_path):
    (tmp_path / "x").write_text("")
    with pytest.raises(LogDirError):
        generate(str(tmp_path), small_preset())
    assert [p.name for p in tmp_path.iterdir()] == ["x"]


@pytest.mark.parametrize(
    "topic, message",
    [
        (TopicSpec("t", codec="brotli"), "codec"),
        (TopicSpec("t", magic=1, codec="zstd"), "zstd needs magic 2"),
        (TopicSpec("t", magic=0, headers=1), "no headers"),
        (TopicSpec("t", magic=1, idempotent_producers=1), "need magic 2"),
        (TopicSpec("t", magic=0, timestamp_type="LogAppendTime"), "no timestamp type"),
        (TopicSpec("t", keys=0, cleanup_policy="compact"), "without keys"),
        (TopicSpec("bad name"), "topic names"),
        (TopicSpec(CONSUMER_OFFSETS_TOPIC), "ConsumerOffsetsSpec"),
        (TopicSpec("t", batch_records=(0, 3)), "batch_records"),
        (TopicSpec("t", abort_ratio=1.5), "ratios"),
        (TopicSpec("t", plain_producer=False), "at least one producer"),
        (TopicSpec("t", segment_bytes=10), "minimums"),
    ],
)
def test_specs_kafka_would_refuse_are_refused_before_writing(tmp_path, topic, message):
    with pytest.raises(ConfigError, match=message):
        generate(str(tmp_path / "out"), GeneratorSpec(topics=[topic]))
    assert not (tmp_path / "out").exists()


def test_spec_round_trips_through_plain_data():
    spec = small_preset(5)
    assert GeneratorSpec.from_dict(spec.to_dict()) == spec
    with pytest.raises(ConfigError, match="unknown"):
        GeneratorSpec.from_dict({"topics": [{"name": "t", "colour": "red"}]})


# -- every segment as Kafka would check it ------------------------------------------------------------------


def test_every_batch_decodes_with_a_valid_crc_and_offsets_increase(partitions):
    for _part, segments in partitions:
        previous_last = None
        for i, (segment, batches) in enumerate(segments):
            next_base = segments[i + 1][0].base_offset if i + 1 < len(segments) else None
            if batches:
                assert batches[0].base_offset >= segment.base_offset, segment.log_path
            for batch in batches:
                assert batch.is_valid(), (segment.log_path, batch)
                records = batch.records()
                assert len(records) == batch.records_count
                if previous_last is not None:
                    assert batch.base_offset > previous_last, (segment.log_path, batch)
                assert [r.offset for r in records] == sorted({r.offset for r in records})
                assert next_base is None or batch.last_offset < next_base
                previous_last = batch.last_offset


def test_segments_roll_at_segment_bytes(partitions, small):
    configs = small[1].topic_configs
    for part, segments in partitions:
        limit = int(configs[part.topic]["segment.bytes"])
        for segment, batches in segments:
            assert segment.size <= limit or len(batches) == 1, segment.log_path
        # these topics append one batch at a time and never roll on time: each segment but the last
        # rolled because its next batch would have overflowed it
        if part.topic in ("customers", "orders", "payments"):
            assert len(segments) >= 3, part.name
            for (segment, _), (_, next_batches) in zip(segments, segments[1:]):
                assert segment.size + next_batches[0].size > limit, segment.log_path


def test_indexes_equal_what_recovery_builds(partitions, small):
    configs = small[1].topic_configs
    for part, segments in partitions:
        interval = int(configs[part.topic]["index.interval.bytes"])
        for segment, batches in segments:
            offset_index, time_index = build_indexes(batches, segment.base_offset, interval)
            assert segment.read(".index") == offset_index.to_bytes(), segment.log_path
            assert segment.read(".timeindex") == time_index.to_bytes(), segment.log_path
            OffsetIndex.from_bytes(segment.read(".index"), segment.base_offset).sanity_check()
            TimeIndex.from_bytes(segment.read(".timeindex"), segment.base_offset).sanity_check()


def all_batches(segments):
    return [batch for _, batches in segments for batch in batches]


def test_producer_snapshots_agree_with_a_fresh_replay(partitions):
    checked = 0
    for part, segments in partitions:
        batches = all_batches(segments)
        segment_bases = {segment.base_offset for segment, _ in segments}
        last_end = batches[-1].last_offset + 1 if batches else None
        for offset, entry in part.snapshots.items():
            assert offset in segment_bases or offset == last_end, entry.path  # rolls and the shutdown
            manager = ProducerStateManager(segments[0][0].base_offset)
            for batch in batches:
                if batch.last_offset < offset:
                    manager.append(batch)
            manager.map_end_offset = offset
            on_disk = ProducerSnapshot.from_bytes(part.fs.read_bytes(entry.path), offset, file=entry.path)
            assert on_disk == manager.snapshot(), entry.path
            checked += 1
        if batches:
            assert last_end in part.snapshots, part.name  # clean shutdown
    assert checked > 20


def test_txn_indexes_equal_a_fresh_replay_and_some_lso_points_at_another_open_transaction(partitions):
    manager_entries = []
    for _part, segments in partitions:
        manager = ProducerStateManager()
        for segment, batches in segments:
            expected = []
            for batch in batches:
                completed = manager.append(batch)
                if completed is not None and completed.is_aborted:
                    expected.append(manager.aborted_txn(completed))
            data = segment.read(".txnindex")
            assert (data is None) == (not expected), segment.log_path  # the file exists only for aborts
            on_disk = TransactionIndex.from_bytes(data or b"", segment.base_offset)
            on_disk.sanity_check()
            assert on_disk.entries == expected, segment.log_path
            manager_entries += expected
    assert len(manager_entries) >= 10
    # interleaved transactions: an abort while another producer's transaction was open
    assert any(txn.last_stable_offset < txn.last_offset for txn in manager_entries)
    assert any(txn.last_stable_offset == txn.last_offset + 1 for txn in manager_entries)


def test_leader_epoch_checkpoints_are_consistent_with_the_batches(partitions):
    for part, segments in partitions:
        batches = all_batches(segments)
        data = part.read_file("leader-epoch-checkpoint")
        if part.topic.startswith("legacy"):
            assert data is None  # no epoch cache for the old formats
            continue
        entries = parse_leader_epoch_checkpoint(data.decode())
        start = segments[0][0].base_offset
        # the leader's assignment at its start, then what recovery derives from the batches
        assert entries == epochs_from_batches(
            [(b.partition_leader_epoch, b.base_offset) for b in batches], [EpochEntry(0, start)]
        ), part.name
        for batch in batches:
            current = [e for e in entries if e.start_offset <= batch.base_offset][-1]
            assert batch.partition_leader_epoch == current.epoch
    orders = next(
        parse_leader_epoch_checkpoint(p.read_file("leader-epoch-checkpoint").decode())
        for p, _ in partitions
        if p.name == "orders-0"
    )
    assert [e.epoch for e in orders] == [0, 1, 2]


# -- what the small preset holds -----------------------------------------------------------------------------


def test_the_small_preset_covers_every_format_and_feature(partitions):
    by_topic = {}
    for part, segments in partitions:
        by_topic.setdefault(part.topic, []).extend(all_batches(segments))
    codecs = {b.codec for batches in by_topic.values() for b in batches}
    assert codecs == {Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD}
    assert {b.magic for b in by_topic["legacy-v0"]} == {0} and {b.magic for b in by_topic["legacy-v1"]} == {1}
    assert all(b.timestamp_type == TimestampType.LOG_APPEND_TIME for b in by_topic["clicks"])
    records = [r for b in by_topic["customers"] for r in b.records()]
    assert any(r.value is None for r in records) and all(r.key is not None for r in records)
    assert any(r.headers for b in by_topic["orders"] for r in b.records())
    assert all(r.key is None for b in by_topic["clicks"] for r in b.records())
    markers = [control_record(b).type for b in by_topic["payments"] if b.is_control]
    assert ControlType.ABORT in markers and ControlType.COMMIT in markers
    assert {b.producer_id for b in by_topic["payments"] if b.is_transactional} == {1003, 1004, 1005}
    assert any(b.producer_id >= 0 and not b.is_transactional for b in by_topic["payments"])


def test_idempotent_sequences_continue_per_producer_and_partition(partitions):
    checked = 0
    for part, segments in partitions:
        last_sequence = {}
        for batch in all_batches(segments):
            if isinstance(batch, RecordBatch) and batch.has_producer_id and not batch.is_control:
                expected = last_sequence.get(batch.producer_id, -1) + 1
                assert batch.base_sequence == expected, (part.name, batch)
                last_sequence[batch.producer_id] = batch.last_sequence
                checked += 1
    assert checked > 100


def test_summary_and_broker_files_match_the_partitions(small, partitions):
    path, summary = small
    ends = {}
    for part, segments in partitions:
        batches = all_batches(segments)
        ends[(part.topic, part.partition)] = batches[-1].last_offset + 1 if batches else segments[0][0].base_offset
        metadata = parse_partition_metadata(part.read_file("partition.metadata").decode())
        assert metadata.topic_id == summary.topic_ids[part.topic]
        written = summary.partitions[(part.topic, part.partition)]
        assert written.log_end_offset == written.high_watermark == ends[(part.topic, part.partition)]
        assert [s.base_offset for s in written.segments] == [s.base_offset for s, _ in segments]
    assert set(ends) == set(summary.partitions)
    log_dir = LogDir.open(str(path))
    assert log_dir.read_checkpoint("recovery-point-offset-checkpoint") == ends
    assert log_dir.read_checkpoint("replication-offset-checkpoint") == ends
    assert log_dir.read_checkpoint("log-start-offset-checkpoint") == {}  # every log starts at its first segment
    assert (path / "cleaner-offset-checkpoint").read_bytes() == b""
    assert (path / ".lock").read_bytes() == b""
    assert (path / ".kafka_cleanshutdown").read_text().startswith('{"version":0,"brokerEpoch":')
    props = parse_properties((path / "meta.properties").read_text())
    assert props == {"version": "0", "broker.id": "0", "cluster.id": summary.cluster_id}
    assert len(summary.cluster_id) == 22
    assert sum(1 for tp in summary.partitions if tp.topic == CONSUMER_OFFSETS_TOPIC) == 3
    assert summary.to_dict()["partitions"][0]["topic"] == CONSUMER_OFFSETS_TOPIC


# -- an independent reader: kafka-python ---------------------------------------------------------------------


def test_kafka_python_reads_the_same_records(partitions):
    count = 0
    for _part, segments in partitions:
        for segment, batches in segments:
            ours = [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for b in batches for r in b.records()]
            theirs = []
            records = MemoryRecords(segment.read(".log"))
            while (batch := records.next_batch()) is not None:
                assert batch.validate_crc(), segment.log_path
                for r in batch:
                    timestamp = -1 if r.timestamp is None else r.timestamp
                    theirs.append((r.offset, timestamp, r.key, r.value, tuple(r.headers)))
            assert ours == theirs, segment.log_path
            count += len(ours)
    assert count > 2500


# -- __consumer_offsets ---------------------------------------------------------------------------------------


def test_consumer_offsets_hold_exactly_the_intended_commits(small, partitions):
    summary = small[1]
    records = []
    for part, segments in partitions:
        if part.topic != CONSUMER_OFFSETS_TOPIC:
            continue
        for batch in all_batches(segments):
            assert not batch.is_control and batch.producer_id == -1
            for record in batch.records():
                key = decode_key(record.key)
                # Kafka's coordinator keeps each group in one partition
                assert part.partition == partition_for_group(key.group, 3)
                records.append(record)
    commits = committed_offsets(records)
    assert commits == summary.commits
    groups = {group for group, _, _ in commits}
    assert groups == {"billing", "analytics", "audit"}  # "retired" was deleted: tombstones
    assert set(group_metadata(records)) == groups
    assert any(isinstance(decode_key(r.key), OffsetCommitKey) and r.value is None for r in records)
    ends = {tp: p.log_end_offset for tp, p in summary.partitions.items()}
    consumed = {(t, p) for _, t, p in commits}
    assert consumed == {tp for tp in ends if tp.topic != CONSUMER_OFFSETS_TOPIC}
    for (_group, topic, partition), value in commits.items():
        assert 0 <= value.offset <= ends[(topic, partition)]
        assert value.version == 3 and summary.start_ms <= value.commit_timestamp <= summary.end_ms
    assert all(v.offset == ends[(t, p)] for (g, t, p), v in commits.items() if g == "billing")  # caught up
    assert any(v.offset < ends[(t, p)] for (g, t, p), v in commits.items() if g == "audit")  # lagging
    # the leader epoch of the committed position, as a consumer reports it
    assert {v.leader_epoch for (g, t, p), v in commits.items() if t == "orders" and g == "billing"} == {2}
    assert {v.leader_epoch for (g, t, p), v in commits.items() if t.startswith("legacy")} == {-1}


def test_java_string_hashcode_and_group_placement():
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("hello") == 99162322
    assert java_string_hashcode("é€😀") == 233 * 31**3 + 0x20AC * 31**2 + 0xD83D * 31 + 0xDE00
    assert java_string_hashcode("polygenelubricants") == -(2**31)  # Utils.abs maps it to 0
    assert partition_for_group("polygenelubricants", 50) == 0
    assert partition_for_group("hello", 50) == 99162322 % 50
    assert partition_for_group("billing", 3) == abs(java_string_hashcode("billing")) % 3


# -- presets and the command line ---------------------------------------------------------------------------


def test_the_demo_preset_has_what_the_readme_shows(tmp_path):
    summary = generate(str(tmp_path / "demo"), demo_preset(7))
    parts = summary.partitions
    configs = summary.topic_configs
    assert configs["customers"]["cleanup.policy"] == "compact"
    assert sum(1 for tp in parts if tp.topic == CONSUMER_OFFSETS_TOPIC) == 50
    assert all(len(parts[("clickstream", p)].segments) >= 20 for p in range(3))  # a month, a segment a day
    assert sum(len(parts[("payments", p)].aborted_txns) for p in range(3)) > 10
    log_dir = LogDir.open(str(tmp_path / "demo"))
    tombstones = sum(
        1
        for segment in log_dir.partition("customers", 0).segments
        for _, batch in segment.batches()
        for r in batch.records()
        if r.value is None
    )
    assert tombstones > 50
    assert summary.commits and all(group != "old-dashboard" for group, _, _ in summary.commits)


def test_presets_are_named():
    assert set(PRESETS) == {"demo", "small"}
    assert preset("small", 3) == small_preset(3)
    with pytest.raises(ConfigError):
        preset("huge")


def test_command_line_options(tmp_path):
    result = generate_log_dir(
        str(tmp_path / "out"),
        preset_name="small",
        seed=3,
        records=20,
        offsets_partitions=2,
        config_out=str(tmp_path / "topics.properties"),
    ).to_dict()
    resolver = resolver_from(parse_properties((tmp_path / "topics.properties").read_text()))
    assert resolver.for_topic("customers").compact and not resolver.for_topic("orders").compact
    assert resolver.for_topic("clicks").message_timestamp_type == "LogAppendTime"
    assert resolver.for_topic("legacy-v0").segment_bytes == 4096
    assert resolver.for_topic(CONSUMER_OFFSETS_TOPIC).compact
    assert result["seed"] == 3
    assert {p["records"] for p in result["partitions"] if p["topic"] != CONSUMER_OFFSETS_TOPIC} == {20}
    assert sum(1 for p in result["partitions"] if p["topic"] == CONSUMER_OFFSETS_TOPIC) == 2


def test_a_spec_file_and_hanging_transactions(tmp_path):
    spec = GeneratorSpec(
        seed=4,
        topics=[
            TopicSpec(
                "txn",
                records=60,
                plain_producer=False,
                transactional_producers=2,
                hanging_transactions=True,
                transaction_batches=(50, 50),
            )
        ],
        consumer_offsets=ConsumerOffsetsSpec(partitions=1, groups=("g",), group_metadata=False),
    )
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec.to_dict()))
    result = generate_log_dir(str(tmp_path / "out"), spec_file=str(path)).to_dict()
    txn = next(p for p in result["partitions"] if p["topic"] == "txn")
    assert txn["lastStableOffset"] == 0 < txn["highWatermark"] == 60  # both transactions still open


def test_kafkalog_validate_finds_nothing_to_report(small):
    from kafkalog.operations.validate import validate_paths

    path, summary = small
    intervals = {topic: int(config["index.interval.bytes"]) for topic, config in summary.topic_configs.items()}
    report = validate_paths([str(path)], index_interval_bytes=intervals)
    assert report.findings == [] and report.exit_code == 0
