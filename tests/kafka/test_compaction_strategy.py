"""KIP-280's `header` strategy through a real Apache Kafka 4.x broker: Kafka's own producer writes
records whose `version` header goes up and down (8 ASCII digits: 8 bytes whose big-endian value grows
with the number; some records have a 4-byte one, some none); the broker is stopped, kafkalog compacts
its log dir in place with compaction.strategy=header; the broker loads it with no recovery, and a
consumer reads exactly each key's winner below the first uncleanable offset, and everything from it on.
The broker's own cleaner is kept off the topic as docs/semantics.md says: min.compaction.lag.ms of a day
on the broker, the pass run with a clock two days ahead."""

from __future__ import annotations

import random
import time

import pytest

from kafkalog.config import resolver_from

from .broker import Broker, KafkaTools
from .test_roundtrip import (
    COMPACTED,
    DAY,
    SEGMENT_BYTES,
    Workload,
    assert_loaded_cleanly,
    assert_same_records,
    expected,
    read_all,
    segment_bases,
)

pytestmark = pytest.mark.spark


def precedence(sent) -> tuple:
    """The KIP's order of a key's records, highest kept: an 8-byte version above none, then the
    version, then the offset."""
    version = [v for k, v in sent.headers if k == "version"][-1:]
    if version and len(version[0].encode()) == 8:
        return (1, int.from_bytes(version[0].encode(), "big", signed=True), sent.offset)
    return (0, 0, sent.offset)


def test_a_header_compacted_log_loads_cleanly_and_consumers_read_the_winners(
    running_broker: Broker, kafka_tools: KafkaTools, spark, tmp_path
):
    from kafkalog.operations.compact import compact

    broker, tools, topic = running_broker, kafka_tools, "kip280-header"
    rng = random.Random(280)
    records = []
    for n in range(150):
        shape = n % 10
        headers = (
            [] if shape == 0 else [["version", "0007"]] if shape == 1 else [["version", f"{rng.randrange(60):08d}"]]
        )
        records.append({"key": f"key-{n % 8}", "value": f"v{n}", "headers": headers})
    work = Workload()
    groups = [{"records": records[i : i + 10]} for i in range(0, len(records), 10)]
    work.add({"topic": topic, "mode": "plain", "compression": "lz4", "groups": groups})
    configs = {**COMPACTED, "internal.segment.bytes": str(SEGMENT_BYTES)}
    work.produce(tools, broker, [{"name": topic, "partitions": 1, "configs": configs}])

    broker.stop()
    upper = segment_bases(broker.partition_dir(topic, 0))[-1]
    assert upper > 0, "no cleanable segment"
    settings = {**COMPACTED, "segment.bytes": str(SEGMENT_BYTES)}
    settings |= {"compaction.strategy": "header", "compaction.strategy.header": "version"}
    config = resolver_from(topic_settings=[f"{topic}:{k}={v}" for k, v in settings.items()])
    result = compact(spark, str(broker.log_dir), config, int(time.time() * 1000) + 2 * DAY)
    (row,) = result.report
    assert row["invalid_headers"] == sum(
        1 for r in work.sent if r.offset < upper and r.headers == [["version", "0007"]]
    )

    broker.start()
    assert_loaded_cleanly(broker)
    best: dict = {}
    for r in work.sent:
        if r.offset < upper and (r.key not in best or precedence(r) > precedence(best[r.key])):
            best[r.key] = r
    survivors = [r for r in work.sent if r.offset >= upper or best[r.key] is r]
    assert len(survivors) < len(work.sent) // 2
    # offset compaction would keep another record of some key: the strategy is what decided
    assert any(best[k].offset != max(r.offset for r in work.sent if r.key == k and r.offset < upper) for k in best)
    assert_same_records(read_all(tools, broker, [topic], "read_uncommitted"), expected(survivors), "after compaction")
