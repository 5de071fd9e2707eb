"""kafkalog log-dirs, get-offsets and configs: Kafka's listing tools, of a log dir offline."""

from __future__ import annotations

import json
import shutil

import pytest

from kafkalog.cli import main
from kafkalog.operations.generate import generate_log_dir
from kafkalog.operations.listings import get_offsets, parse_time
from kafkalog.storage.logdir import LogDir
from kafkalog.storage.naming import LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("listings") / "log"
    generate_log_dir(str(path), preset_name="small", seed=3)
    return path


def _records(log: LogDir, topic: str, partition: int):
    return [
        r for _, batch in log.partition(topic, partition).batches() if not batch.is_control for r in batch.records()
    ]


def _run(capsys, *argv) -> list[str]:
    assert main(list(argv)) == 0
    return capsys.readouterr().out.splitlines()


def test_latest_is_the_high_watermark_and_earliest_the_log_start(log_dir, tmp_path, capsys):
    copy = tmp_path / "log"
    shutil.copytree(log_dir, copy)
    log = LogDir.open(str(copy))
    # the checkpoints move: the start past the first segment, the high watermark below the log end
    log.update_checkpoint(LOG_START_OFFSET_CHECKPOINT, {("orders", 0): 37})
    log.update_checkpoint(REPLICATION_OFFSET_CHECKPOINT, {("orders", 0): 300})
    lines = _run(capsys, "get-offsets", str(copy), "--topic", "orders")
    assert lines == ["orders:0:300", f"orders:1:{log.read_checkpoint(REPLICATION_OFFSET_CHECKPOINT)[('orders', 1)]}"]
    assert _run(capsys, "get-offsets", str(copy), "--topic", "ord.*", "--partitions", "0", "--time", "-2") == [
        "orders:0:37"
    ]
    # every partition, sorted as TopicPartition.toString sorts them (kafka-get-offsets' order)
    every = _run(capsys, "get-offsets", str(copy))
    assert [line.rsplit(":", 1)[0] for line in every] == [
        f"{t}:{p}" for t, p in sorted(log.topic_partitions, key=lambda tp: f"{tp[0]}-{tp[1]}")
    ]


def test_by_time_is_the_first_record_at_or_past_it_and_max_timestamp_the_first_largest(log_dir):
    log = LogDir.open(str(log_dir))
    records = _records(log, "customers", 0)
    for target in (records[0].timestamp - 1, records[57].timestamp, records[57].timestamp + 1):
        want = min(r.offset for r in records if r.timestamp >= target)
        assert [o.offset for o in get_offsets(str(log_dir), target, topic_pattern="customers")] == [want]
    # past every record: no answer, and kafka-get-offsets prints no line for it
    assert get_offsets(str(log_dir), records[-1].timestamp + 1, topic_pattern="customers") == []
    largest = max(r.timestamp for r in records)
    first_largest = min(r.offset for r in records if r.timestamp == largest)
    assert [o.offset for o in get_offsets(str(log_dir), parse_time("max-timestamp"), topic_pattern="customers")] == [
        first_largest
    ]


def test_times_and_topics_are_refused_with_what_to_give(log_dir, capsys):
    assert parse_time("Earliest") == -2 and parse_time("-4") == -4 and parse_time("1700000000000") == 1700000000000
    assert main(["get-offsets", str(log_dir), "--time", "yesterday"]) == 2
    assert "expected a timestamp (epoch ms) or one of latest (-1)" in capsys.readouterr().err
    assert main(["get-offsets", str(log_dir), "--topic", "ordres"]) == 2
    assert "matches no topic" in capsys.readouterr().err
    assert main(["get-offsets", str(log_dir), "--topic", "orders", "--partitions", "7"]) == 2


def test_log_dirs_describes_each_brokers_partitions_and_sizes(log_dir, capsys):
    (line,) = _run(capsys, "log-dirs", str(log_dir), "--topic", "orders")
    described = json.loads(line)
    assert described["version"] == 1 and [b["broker"] for b in described["brokers"]] == [0]
    (entry,) = described["brokers"][0]["logDirs"]
    assert entry["logDir"] == str(log_dir) and entry["error"] is None
    sizes = {p["partition"]: p["size"] for p in entry["partitions"]}
    assert sizes == {
        f"orders-{p}": sum(f.stat().st_size for f in (log_dir / f"orders-{p}").glob("*.log")) for p in (0, 1)
    }
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in entry["partitions"])


def test_configs_says_each_value_and_where_it_comes_from(log_dir, tmp_path, capsys):
    server = tmp_path / "server.properties"
    server.write_text(
        "log.retention.hours=5\ntopic.customers.cleanup.policy=compact\nmin.cleanable.dirty.ratio=0.2\n"
        "log.cleaner.compaction.strategy=timestamp\n"
    )
    lines = _run(capsys, "configs", str(log_dir), "--config-file", str(server), "--topic", "customers")
    assert lines[0] == "All configs for topic customers are:"
    assert "  cleanup.policy=compact source=topic" in lines
    assert "  retention.ms=18000000 source=broker:log.retention.hours" in lines
    assert "  min.cleanable.dirty.ratio=0.2 source=all-topics" in lines
    assert "  segment.bytes=1073741824 source=default" in lines
    assert "  compaction.strategy=timestamp source=broker:log.cleaner.compaction.strategy" in lines
    assert "  compaction.strategy.header= source=default" in lines
