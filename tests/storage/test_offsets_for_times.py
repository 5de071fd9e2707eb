"""`LogSegment.find_offset_by_timestamp`, Kafka's offsetsForTimes within a segment: through the time
and offset indexes, the same offset as a walk over every record."""

from __future__ import annotations

import pytest

from kafkalog.operations.generate import generate, preset
from kafkalog.storage.logdir import LogDir


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("times") / "log"
    generate(str(path), preset("small", seed=5))
    return path


def walk(segment, timestamp: int, starting_offset: int) -> int | None:
    """The first offset at or above `starting_offset` whose record's timestamp is at least `timestamp`."""
    for _, batch in segment.batches():
        for record in batch.records():
            if record.offset >= starting_offset and record.timestamp >= timestamp:
                return record.offset
    return None


def test_the_indexes_find_what_a_walk_over_every_record_finds(log_dir):
    segments = LogDir.open(str(log_dir)).partition("orders", 1).segments
    assert len(segments) > 2
    checked = 0
    for segment in segments:
        assert segment.files[".timeindex"].size > 0
        stamps = sorted({r.timestamp for _, b in segment.batches() for r in b.records()})
        middle = segment.base_offset + 10
        for at in stamps[:: max(1, len(stamps) // 15)] + [stamps[0] - 1, stamps[-1], stamps[-1] + 1]:
            for start in (segment.base_offset, middle):
                assert segment.find_offset_by_timestamp(at, start) == walk(segment, at, start)
                checked += 1
    assert checked > 50


def test_a_preallocated_zero_tail_of_the_time_index_is_not_an_entry(log_dir):
    part = LogDir.open(str(log_dir)).partition("orders", 0)
    segment = part.segments[-1]  # the active segment: a broker preallocates its indexes
    path = segment.files[".timeindex"].path
    stamps = sorted({r.timestamp for _, b in segment.batches() for r in b.records()})
    expected = {at: walk(segment, at, segment.base_offset) for at in stamps[::7]}
    with open(path, "ab") as f:
        f.write(bytes(12 * 40))
    grown = LogDir.open(str(log_dir)).partition("orders", 0).segments[-1]
    assert {at: grown.find_offset_by_timestamp(at, grown.base_offset) for at in expected} == expected
