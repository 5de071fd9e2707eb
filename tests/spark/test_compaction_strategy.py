"""KIP-280's strategies through both compaction paths: a partition cleaned in one task, by the window
path read whole by one scan task, and spread over several scan tasks and chunks. Each path keeps, of
every key below the first uncleanable offset, exactly the winner the KIP's rules pick (the records
read back by kafka-python, not by kafkalog), writes the same bytes as the others, and the report
counts the version headers that are not 8 bytes."""

from __future__ import annotations

import random

import pytest

from kafkalog import tuning
from kafkalog.codec.batch import build_batch
from kafkalog.codec.compression import Codec
from kafkalog.codec.records import Record
from kafkalog.config import resolver_from
from kafkalog.operations.compact import compact

from ..reference.cleaner_model import CleanerConfig, split_batches
from ..reference.scenarios import T0, LogBuilder
from .test_compaction_differential import write_partition

TOPICS = {"off": "offset", "ts": "timestamp", "hdr": "header"}
RESOLVER = resolver_from(
    settings=["cleanup.policy=compact", "segment.bytes=4096", "index.interval.bytes=256"],
    topic_settings=[
        "ts:compaction.strategy=timestamp",
        "hdr:compaction.strategy=header",
        "hdr:compaction.strategy.header=version",
    ],
)


def version(value) -> bytes | None:
    return None if value is None else value if isinstance(value, bytes) else value.to_bytes(8, "big", signed=True)


def random_records(seed: int) -> list[list[Record]]:
    """Batches of keyed records (some tombstones, some unkeyed) whose timestamps and `version` headers
    go up and down: an 8-byte version, a 4-byte one, none, or two of which the last counts."""
    rng = random.Random(seed)
    batches, offset = [], 0
    for _ in range(rng.randrange(30, 45)):
        batch = []
        for _ in range(rng.choice([1, 3, 25])):  # 25: the vectorised scan reads the batch
            key = None if rng.random() < 0.05 else str(rng.randrange(15)).encode()
            value = None if key is not None and rng.random() < 0.1 else b"v%d" % offset
            shape = rng.random()
            if shape < 0.6:
                headers = (("other", b"x"), ("version", version(rng.randrange(-3, 8))))
            elif shape < 0.7:
                headers = (("version", b"\x00\x00\x00\x07"),)
            elif shape < 0.8:
                headers = (("version", version(99)), ("version", version(rng.randrange(8))))
            else:
                headers = ()
            batch.append(Record(offset, T0 + rng.randrange(-5000, 5000), key, value, headers))
            offset += 1
        batches.append(batch)
    return batches


def write_topic(root, topic: str, batches: list[list[Record]]) -> int:
    """The batches as partition `topic`-0; returns the first uncleanable offset (the active segment's base)."""
    log = LogBuilder(segment_bytes=4096)
    for i, records in enumerate(batches):
        log.append_batch(build_batch(records, codec=[Codec.NONE, Codec.LZ4, Codec.GZIP][i % 3]))
    log.roll()
    log.append_batch(build_batch([Record(log.log_end_offset, T0, b"1", b"active")]))
    segments = log.build()
    stage = root.parent / f"stage-{topic}"
    write_partition(stage, segments, CleanerConfig(segment_bytes=4096, index_interval_bytes=256))
    (stage / "t-0").rename(root / f"{topic}-0")
    return segments[-1].base_offset


def precedence(record: Record, strategy: str) -> tuple:
    """The KIP's order of two records of a key, highest kept: by timestamp, or by the last `version`
    header when it is 8 bytes (a record with one above a record without); then by offset."""
    if strategy == "timestamp":
        return (record.timestamp, record.offset)
    if strategy == "header":
        last = [v for k, v in record.headers if k == "version"][-1:]
        if last and last[0] is not None and len(last[0]) == 8:
            return (1, int.from_bytes(last[0], "big", signed=True), record.offset)
        return (0, 0, record.offset)
    return (record.offset,)


def expected_offsets(batches: list[list[Record]], upper: int, strategy: str) -> list[int]:
    records = [r for batch in batches for r in batch]
    best: dict = {}
    for r in records:
        if r.key is not None and (r.key not in best or precedence(r, strategy) > precedence(best[r.key], strategy)):
            best[r.key] = r
    return sorted(
        [r.offset for r in records if r.key is not None and best[r.key] is r] + [upper]  # the active segment's record
    )


def read_back(root, topic: str) -> tuple[list[int], bytes]:
    part = root / f"{topic}-0"
    data = b"".join(p.read_bytes() for p in sorted(part.glob("*.log")))
    return [r.offset for batch in split_batches(data) for r in batch.records()], data


PATHS = {
    "one task": {"ONE_TASK_BYTES": 1 << 40},
    "window, read whole": {"ONE_TASK_BYTES": 0, "LARGE_PARTITIONS": "window"},
    "window, spread": {
        "ONE_TASK_BYTES": 0,
        "LARGE_PARTITIONS": "window",
        "COMPACTION_TASK_BYTES": 2048,
        "COMBINE_ROWS": 10,
    },
    "ranges": {"ONE_TASK_BYTES": 0, "LARGE_PARTITIONS": "ranges", "RANGE_BYTES": 1, "RANGE_RECORDS": 7},
}


def test_each_path_keeps_the_kips_winner_of_every_key(spark, tmp_path, monkeypatch):
    source = tmp_path / "in"
    source.mkdir()
    batches = random_records(7)
    uppers = {topic: write_topic(source, topic, batches) for topic in TOPICS}
    written = {}
    for path, knobs in PATHS.items():
        with monkeypatch.context() as patched:
            for name, value in knobs.items():
                patched.setattr(tuning, name, value)
            out = tmp_path / path.replace(" ", "-").replace(",", "")
            result = compact(spark, str(source), RESOLVER, T0 + 60_000, force=True, output=str(out))
        report = {row["topic"]: row for row in result.report}
        for topic, strategy in TOPICS.items():
            offsets, data = read_back(out, topic)
            assert offsets == expected_offsets(batches, uppers[topic], strategy), (path, topic)
            written.setdefault(topic, set()).add(data)
        invalid = sum(
            1 for b in batches for r in b if r.key is not None and precedence(r, "header")[0] == 0 and r.headers
        )
        assert report["hdr"]["invalid_headers"] == invalid > 0, path
        assert report["ts"]["invalid_headers"] == report["off"]["invalid_headers"] == 0
    assert all(len(datas) == 1 for datas in written.values()), "the paths wrote different bytes"
    # the strategies do choose differently on this data
    assert len({tuple(expected_offsets(batches, 0, s)) for s in TOPICS.values()}) == 3


@pytest.mark.parametrize("one_task", [True, False])
def test_export_latest_by_keeps_each_keys_winner(spark, tmp_path, monkeypatch, one_task):
    """`export --latest-by`: a key's row is the record the strategy keeps (tombstones delete it), in a
    partition one task reads whole and in ranges of a few records (a key's records in several)."""
    from kafkalog.operations.export import topic_table
    from kafkalog.rules.compaction_strategy import parse_latest_by

    monkeypatch.setattr(tuning, "ONE_TASK_BYTES", 1 << 40 if one_task else 0)
    monkeypatch.setattr(tuning, "LATEST_TASK_RECORDS", 1 << 40 if one_task else 5)  # a map full every 5 keys
    monkeypatch.setattr(tuning, "RANGE_BYTES", 1024)
    source = tmp_path / "in"
    source.mkdir()
    batches = random_records(11)
    upper = write_topic(source, "t", batches)
    every = [r for batch in batches for r in batch] + [Record(upper, T0, b"1", b"active")]
    for latest_by, strategy in (("offset", "offset"), ("timestamp", "timestamp"), ("header:version", "header")):
        best: dict = {}
        for r in every:
            if r.key is not None and (r.key not in best or precedence(r, strategy) > precedence(best[r.key], strategy)):
                best[r.key] = r
        rows = topic_table(spark, str(source), "t", latest_by=parse_latest_by(latest_by)).collect()
        got = sorted((row["key"], row["offset"]) for row in rows)
        assert got == sorted((k, r.offset) for k, r in best.items() if r.value is not None), latest_by
