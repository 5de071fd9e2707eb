"""KIP-280's strategies (rules/compaction_strategy.py) against a model written from the KIP's text:
two records of a key compared at a time, the one the KIP keeps goes on to the next comparison.

Per key with a record in the cleanable dirty range, every keyed record but the KIP's winner is
superseded; a key without one keeps all its records; unkeyed records are never in a map. Checked for
a partition read whole (`supersede`) and for its records cut into chunks combined apart (`combine`,
the window path's map-side step), whose undecided rows the window then settles by the same model."""

from __future__ import annotations

from functools import reduce

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.rules.compaction import (
    COMBINED,
    EXPIRE_TOMBSTONE,
    FATES,
    FATES_OF,
    KEEP,
    KEEP_TOMBSTONE,
    SUPERSEDED,
    UNKEYED,
    combine,
    supersede,
)
from kafkalog.rules.compaction_strategy import OFFSET, CompactionStrategy, versions

STRATEGIES = [OFFSET, CompactionStrategy.of("timestamp"), CompactionStrategy.of("header", "v")]


def kept_of_two(a: dict, b: dict, strategy: CompactionStrategy) -> dict:
    """The KIP's comparison of two records of one key: which one compaction keeps."""
    later = a if a["offset"] > b["offset"] else b
    if strategy.name == "timestamp":
        if a["timestamp"] != b["timestamp"]:
            return a if a["timestamp"] > b["timestamp"] else b
        return later
    if strategy.name == "header":
        va, vb = (r["header"] if r["header"] is not None and len(r["header"]) == 8 else None for r in (a, b))
        if va is None and vb is None:
            return later
        if va is None or vb is None:  # only one has a version: it is kept, the other is anomalous
            return a if vb is None else b
        ia, ib = (int.from_bytes(v, "big", signed=True) for v in (va, vb))
        return later if ia == ib else a if ia > ib else b
    return later


def model(records: list[dict], strategy: CompactionStrategy) -> list[int]:
    keyed = [r for r in records if r["fate"] <= EXPIRE_TOMBSTONE]
    mapped = {r["key"] for r in keyed if r["dirty"]}
    winner = {}
    for key in mapped:
        winner[key] = reduce(lambda a, b: kept_of_two(a, b, strategy), [r for r in keyed if r["key"] == key])
    return [
        SUPERSEDED if r["fate"] <= EXPIRE_TOMBSTONE and r["key"] in winner and winner[r["key"]] is not r else r["fate"]
        for r in records
    ]


headers = st.one_of(
    st.none(), st.binary(max_size=9), st.integers(-3, 3).map(lambda v: v.to_bytes(8, "big", signed=True))
)


@st.composite
def partitions(draw):
    n = draw(st.integers(0, 40))
    first_dirty = draw(st.integers(0, n))
    records = []
    for offset in range(n):
        key = draw(st.sampled_from([None, b"a", b"b", b"c"]))
        fate = UNKEYED if key is None else draw(st.sampled_from([KEEP, KEEP, KEEP_TOMBSTONE, EXPIRE_TOMBSTONE]))
        records.append(
            {
                "key": key,
                "offset": offset,
                "fate": fate,
                "dirty": offset >= first_dirty,
                "timestamp": draw(st.sampled_from([-1, 0, 5, 7])),
                "header": draw(headers),
            }
        )
    return records


def narrow(records: list[dict]) -> pa.RecordBatch:
    """The narrow view's columns the strategies read, as the scan gives them."""
    size = [None if r["header"] is None else len(r["header"]) for r in records]
    value = [
        int.from_bytes(r["header"], "big", signed=True) if s == 8 else None for r, s in zip(records, size, strict=True)
    ]
    return pa.record_batch(
        [
            pa.array([r["timestamp"] for r in records], pa.int64()),
            pa.array(size, pa.int32()),
            pa.array(value, pa.int64()),
        ],
        names=["timestamp", "headerSize", "headerValue"],
    )


def fates(records: list[dict], strategy: CompactionStrategy, tp: int = 0, whole: bool = True) -> pa.Table:
    rank, version, invalid = versions(narrow(records), strategy)
    n = len(records)
    keyed = [r["fate"] <= EXPIRE_TOMBSTONE for r in records]
    return pa.table(
        {
            "tp": pa.array([tp] * n, pa.int32()),
            "segment": pa.array([0] * n, pa.int32()),
            "position": pa.array([r["offset"] for r in records], pa.int64()),
            "offset": pa.array([r["offset"] for r in records], pa.int64()),
            "key": pa.array([r["key"] for r in records], pa.binary()),
            "recordSpanSize": pa.array([10] * n, pa.int32()),
            "fate": pa.array([r["fate"] for r in records], pa.int8()),
            "map_offset": pa.array(
                [r["offset"] if k and r["dirty"] else None for r, k in zip(records, keyed, strict=True)], pa.int64()
            ),
            "whole": pa.array([whole] * n),
            "rank": pa.array(rank),
            "version": pa.array(version),
            "invalid_header": pa.array(invalid),
        },
        schema=FATES,
    )


@settings(max_examples=200, deadline=None)
@given(partitions(), st.sampled_from(STRATEGIES))
def test_a_partition_read_whole_keeps_the_kips_winner_of_each_mapped_key(records, strategy):
    assert supersede(fates(records, strategy)).tolist() == model(records, strategy)


@settings(max_examples=150, deadline=None)
@given(partitions(), st.sampled_from(STRATEGIES), st.integers(1, 5))
def test_chunks_combined_apart_then_windowed_give_the_same_fates(records, strategy, chunks):
    """Each chunk (a scan task of the window path) decides what its records alone decide; the window
    then supersedes, among the undecided rows of a key, all but the highest (rank, version, offset)
    where the key is in a map: the result is `supersede`'s on the whole."""
    expected = model(records, strategy)
    cut = np.array_split(np.arange(len(records)), chunks)
    rows = []
    for part in cut:
        table = fates([records[i] for i in part], strategy, whole=False)
        out, _ = combine(table, {0}, 0)
        rows += pa.Table.from_batches(out, schema=COMBINED).to_pylist()
    counts = {reason: sum(r[reason] or 0 for r in rows if r["offset"] is None) for reason in FATES_OF}
    pending = [r for r in rows if r["offset"] is not None]
    for r in pending:
        same = [o for o in pending if o["key"] == r["key"]]
        mapped = any(o["map_offset"] is not None for o in same)
        best = max((o["rank"], o["version"], o["offset"]) for o in same)
        fate = SUPERSEDED if mapped and (r["rank"], r["version"], r["offset"]) < best else r["fate"]
        for reason, of in FATES_OF.items():
            counts[reason] += fate in of
    assert counts == {reason: sum(f in of for f in expected) for reason, of in FATES_OF.items()}


def test_blank_header_names_fall_back_to_offset_and_unknown_strategies_are_refused():
    assert CompactionStrategy.of("header", "  ") == OFFSET
    assert CompactionStrategy.of("header", "v").header_key == b"v"
    assert str(CompactionStrategy.of("header", "v")) == "header:v"
    assert CompactionStrategy.of("timestamp", "v").header_key is None
    with pytest.raises(ValueError):
        CompactionStrategy.of("version")


def test_a_header_not_8_bytes_is_absent_and_flagged():
    records = [
        {"key": b"k", "offset": 0, "fate": KEEP, "dirty": True, "timestamp": 0, "header": (9).to_bytes(8, "big")},
        {"key": b"k", "offset": 1, "fate": KEEP, "dirty": True, "timestamp": 0, "header": b"\x00" * 4},
        {"key": b"k", "offset": 2, "fate": KEEP, "dirty": True, "timestamp": 0, "header": None},
    ]
    strategy = CompactionStrategy.of("header", "v")
    table = fates(records, strategy)
    assert table["invalid_header"].to_pylist() == [False, True, False]
    # the one record with a version wins over the later ones without
    assert supersede(table).tolist() == [KEEP, SUPERSEDED, SUPERSEDED]
