"""Tiered storage (KIP-405) against a real Kafka 4.3.1 broker and Kafka's own LocalTieredStorage.

A broker of its own (tiered storage needs broker settings the shared one has not) copies a topic's
rolled segments into LocalTieredStorage and records them in `__remote_log_metadata`. With the
broker stopped, kafkalog reads the partition as remote and local segments together, and plans
retention with `local.retention.bytes`; then the broker, restarted with its retention check on,
deletes local segments itself. kafkalog's retention, applied to a copy taken before, must leave the
same local segments and the same `log-start-offset-checkpoint` as the broker did, and the partition
read as remote + local afterwards must still hold every record once.

Size retention rather than time: a time breach of the active segment makes Kafka roll it (so that
it can be uploaded and deleted later), which an offline tool cannot do; `local.retention.bytes`
above the active segment's size never breaches it.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from kafkalog.config import ConfigResolver
from kafkalog.operations.retain import retain
from kafkalog.operations.validate import validate_paths
from kafkalog.storage.logdir import LogDir
from kafkalog.storage.naming import LOG_START_OFFSET_CHECKPOINT
from kafkalog.storage.remote_log import RemoteStorage, tiered_segments

from .broker import Broker, KafkaTools, tiered_storage_overrides

SECRET = b"tiered-purge-test-secret-0123456"

TOPIC = "tiered"
RECORDS = 60
TOPIC_CONFIG = {
    "remote.storage.enable": "true",
    "internal.segment.bytes": "2048",  # segments of about 14 records
    "retention.ms": "-1",  # the remote log is kept: only local retention deletes anything
    "local.retention.bytes": "4096",  # about two segments stay local
}


@pytest.fixture(scope="module")
def tiered_broker(kafka_tools: KafkaTools, tmp_path_factory):
    jars = list(Path(kafka_tools.libs).glob("kafka-storage-*-test.jar"))
    if not jars:
        pytest.fail(
            f"no kafka-storage test jar (LocalTieredStorage) in {kafka_tools.libs}: rerun scripts/kafka-jars.sh "
            "(tests/kafka/pom.xml lists it)",
            pytrace=False,
        )
    base = tmp_path_factory.mktemp("tiered-broker")
    broker = Broker(kafka_tools, base / "broker", overrides=tiered_storage_overrides(base / "remote"))
    broker.remote_dir = base / "remote"
    try:
        broker.start()
        yield broker
    finally:
        broker.close()


def _local_bases(log_dir: Path, topic: str = TOPIC) -> list[int]:
    return sorted(int(p.name[:20]) for p in (log_dir / f"{topic}-0").glob("*.log"))


def _records(log_dir: Path, remote_dir: Path) -> list[tuple[int, bytes | None]]:
    local = LogDir.open(str(log_dir)).partition(TOPIC, 0)
    remote = RemoteStorage.open(str(remote_dir)).partition(TOPIC, 0)
    assert remote is not None
    segments = tiered_segments(remote.segments, local.segments)
    return [(r.offset, r.value) for s in segments for _, b in s.batches() for r in b.records()]


def _wait(condition, what: str, broker: Broker, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"the broker did not {what} within {timeout}s:\n{broker.diagnostics()}")
        time.sleep(0.5)


def test_remote_and_local_read_together_and_retention_is_the_brokers(tiered_broker: Broker, kafka_tools, tmp_path):
    broker = tiered_broker
    values = [f"value-{i:03d}-" + "x" * 100 for i in range(RECORDS)]
    run = {
        "topic": TOPIC,
        "partition": 0,
        "mode": "plain",
        "batch_size": 400,
        "groups": [{"end": "flush", "records": [{"key": f"k{i}", "value": v} for i, v in enumerate(values)]}],
    }
    acks = kafka_tools.produce(
        broker.bootstrap, topics=[{"name": TOPIC, "partitions": 1, "configs": TOPIC_CONFIG}], runs=[run]
    )
    assert [a["offset"] for a in acks[0]["groups"][0]] == list(range(RECORDS))
    log_dir, remote_dir = broker.log_dir, broker.remote_dir
    active = _local_bases(log_dir)[-1]
    assert active > 28, "expected several rolled segments"

    def all_rolled_uploaded() -> bool:  # RemoteLogManager copies every segment but the active one
        if not (remote_dir / "kafka-tiered-storage").is_dir():
            return False
        part = RemoteStorage.open(str(remote_dir)).partition(TOPIC, 0)
        return part is not None and part.highest_offset() == active - 1

    _wait(all_rolled_uploaded, "upload every rolled segment", broker)
    broker.stop()
    before = tmp_path / "before"
    shutil.copytree(log_dir, before)
    expected = [(i, v.encode()) for i, v in enumerate(values)]
    assert _records(before, remote_dir) == expected
    assert validate_paths([str(remote_dir)]).ok

    # kafkalog's plan, from the broker's __remote_log_metadata alone
    config = ConfigResolver(per_topic={TOPIC: TOPIC_CONFIG})
    plan = retain(str(before), config=config, topics=[TOPIC], dry_run=True).partitions[0]
    assert plan.remote is not None and plan.remote.highest_offset == active - 1
    assert plan.deleted and all(d.reason == "local.retention.bytes" for d in plan.deleted)
    assert plan.new_log_start_offset == 0 and LOG_START_OFFSET_CHECKPOINT not in plan.checkpoint_updates

    # the broker's own retention
    broker.properties.update({"log.retention.check.interval.ms": "1000", "log.initial.task.delay.ms": "0"})
    broker.write_config()
    broker.start()
    kept = [s.base_offset for s in plan.outcome.segments]
    _wait(lambda: _local_bases(log_dir) == kept, f"keep local segments {kept}", broker)
    time.sleep(3)  # a few more retention checks: the broker deletes nothing else
    broker.stop()
    assert _local_bases(log_dir) == kept

    # kafkalog's retention, in place on the copy: the same local segments and checkpoint as the broker's
    retain(str(before), config=config, topics=[TOPIC])
    assert _local_bases(before) == _local_bases(log_dir)
    checkpoint = {
        d: LogDir.open(str(d)).read_checkpoint(LOG_START_OFFSET_CHECKPOINT).get((TOPIC, 0)) for d in (log_dir, before)
    }
    assert checkpoint[log_dir] == checkpoint[before] == 0, checkpoint
    for d in (log_dir, before):
        assert _records(d, remote_dir) == expected
    assert validate_paths([str(before)]).ok


PURGED_TOPIC = "tiered-purge"
PURGED = (3, 17, 30, 41, 55)  # keys in the remote-only segments, in the ones still local too, in the active one


def test_purge_reaches_the_remote_tier_and_the_broker_serves_it(tiered_broker: Broker, kafka_tools, spark, tmp_path):
    """Keys purged offline from the local log and from LocalTieredStorage: the restarted broker serves
    the rewritten remote segments (every other record, in order, at its offset), and no purged key or
    value is left in any byte of any local or remote file."""
    from kafkalog.operations.purge import purge

    broker = tiered_broker
    if broker.running:
        broker.stop()
    # the broker's local retention on: uploaded segments leave the local log, and are read from remote
    broker.properties.update({"log.retention.check.interval.ms": "1000", "log.initial.task.delay.ms": "0"})
    broker.write_config()
    broker.start()
    # values of their own: the module's other topic holds "value-NNN-..." (the leftover check reads every file)
    records = [(f"key-{i:03d}", f"erasable-{i:03d}-" + "x" * 100) for i in range(RECORDS)]
    run = {
        "topic": PURGED_TOPIC,
        "partition": 0,
        "mode": "plain",
        "batch_size": 400,
        "groups": [{"end": "flush", "records": [{"key": k, "value": v} for k, v in records]}],
    }
    kafka_tools.produce(
        broker.bootstrap, topics=[{"name": PURGED_TOPIC, "partitions": 1, "configs": TOPIC_CONFIG}], runs=[run]
    )
    log_dir, remote_dir = broker.log_dir, broker.remote_dir
    active = _local_bases(log_dir, PURGED_TOPIC)[-1]

    def uploaded_and_deleted_locally() -> bool:
        if not (remote_dir / "kafka-tiered-storage").is_dir():
            return False
        part = RemoteStorage.open(str(remote_dir)).partition(PURGED_TOPIC, 0)
        return part is not None and part.highest_offset() == active - 1 and _local_bases(log_dir, PURGED_TOPIC)[0] > 0

    _wait(uploaded_and_deleted_locally, "upload every rolled segment and delete the first local ones", broker)
    task = {"kind": "read", "topic": PURGED_TOPIC, "isolation": "read_uncommitted"}
    # a read before the purge: the broker caches the remote segments' indexes in its log dir
    (read,) = kafka_tools.consume(broker.bootstrap, [task])
    assert [(r["offset"], r["key"]) for r in read["records"]] == [(i, k) for i, (k, _) in enumerate(records)]
    broker.stop()
    cache = log_dir / "remote-log-index-cache"
    assert any(cache.glob("0_*.index")), "expected the broker to cache the first remote segment's offset index"
    first_local = _local_bases(log_dir, PURGED_TOPIC)[0]
    assert PURGED[0] < first_local, "expected a purged key in a segment that is only in remote storage"

    purged_keys = [records[i][0].encode() for i in PURGED]
    result = purge(
        spark,
        str(log_dir),
        purged_keys,
        ledger=str(tmp_path / "ledger"),
        secret=SECRET,
        topics=[PURGED_TOPIC],
        config=ConfigResolver(per_topic={PURGED_TOPIC: TOPIC_CONFIG}),
        remote_storage=str(remote_dir),
    )
    assert result.remote is not None and result.remote.remaining == 0 and result.remaining == 0
    remote_starts = [s["start_offset"] for s in result.remote.segments]
    assert remote_starts and remote_starts[0] == 0, result.summary()

    def leftovers() -> list[str]:
        found = []
        for root in (log_dir, remote_dir):
            for path in sorted(p for p in root.rglob("*") if p.is_file()):
                data = path.read_bytes()
                found += [
                    f"{path}: {i}" for i in PURGED if records[i][0].encode() in data or records[i][1].encode() in data
                ]
        return found

    assert leftovers() == []
    stale = [s for s in result.remote.segments if (cache / f"{s['start_offset']}_{s['segment_id']}.index").exists()]
    assert stale == []  # the purge deleted the cached indexes of the segments it rewrote
    broker.start()
    # a fetch of remote data before the broker's remote log metadata cache has read
    # __remote_log_metadata is refused (ReplicaNotAvailableException, logged as an ERROR) and retried:
    # the read starts once the cache is ready, so that any ERROR below is about the rewritten segments
    _wait(lambda: "Initialized for all the" in broker.server_log(), "initialize its remote log metadata", broker)
    (read,) = kafka_tools.consume(broker.bootstrap, [task])
    got = [(r["offset"], r["key"], r["value"]) for r in read["records"]]
    assert got == [(i, k, v) for i, (k, v) in enumerate(records) if i not in PURGED]
    errors = [line for line in broker.server_log().splitlines() if "ERROR" in line and "emote" in line]
    assert errors == [], f"{errors}\n{broker.diagnostics()}"
    broker.stop()
    assert leftovers() == []  # nor after the broker read the remote segments (and cached their indexes)
    for segment in result.remote.segments:  # the indexes the broker cached again are the rewritten ones
        name = f"{segment['start_offset']:020d}-{segment['segment_id']}.index"
        (fileset,) = (remote_dir / "kafka-tiered-storage").glob(f"{PURGED_TOPIC}-0-*/{name}")
        cached = cache / f"{segment['start_offset']}_{segment['segment_id']}.index"
        assert not cached.exists() or cached.read_bytes() == fileset.read_bytes()
