"""The range path's steps below Spark (rules/ranges.py): a partition cut into ranges, each mapped alone
(`map_range`), its keys merged in parts chosen by a hash (`merge_part`), and each range's staged fates
made final (`range_fates`), gives each record the fate a pass over the whole partition gives it (the
KIP-280 model of test_compaction_strategy), under every strategy, with batches an aborted transaction
may discard held back and some of them discarded."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.rules.compaction import ABORTED
from kafkalog.rules.ranges import (
    MAPPED,
    batch_key,
    key_parts,
    map_range,
    merge_part,
    range_fates,
    range_of_groups,
    slice_end,
    slice_sizes,
)

from .test_compaction_strategy import STRATEGIES, fates, model, partitions


@settings(max_examples=150, deadline=None)
@given(partitions(), st.sampled_from(STRATEGIES), st.integers(1, 6), st.integers(1, 4), st.data())
def test_ranges_mapped_merged_in_parts_and_made_final_give_the_whole_partitions_fates(
    records, strategy, ranges, parts, data
):
    n = len(records)
    whole = fates(records, strategy)  # each record a batch of its own, at its offset
    doubtful = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    discarded = [i for i in range(n) if doubtful[i] and data.draw(st.booleans())]
    gone = batch_key(pa.array([0] * len(discarded), pa.int32()), pa.array(discarded, pa.int64()))
    cut = [part for part in np.array_split(np.arange(n), ranges) if len(part)]
    maps = [map_range(whole.take(pa.array(at)), doubtful[at], i) for i, at in enumerate(cut)]
    keys = pa.concat_tables([m for _, m in maps] or [MAPPED.empty_table()])
    part = key_parts(keys["key"], parts)
    told = [merge_part(keys.filter(pa.array(part == j)), gone) for j in range(parts)]
    got = []
    for i, (rows, _) in enumerate(maps):
        mine = pa.concat_tables([t.filter(pc.equal(t["range"], i)).drop_columns(["range"]) for t in told])
        got += range_fates(rows, mine, gone)["fate"].to_pylist()
    aborted = [dict(r, fate=ABORTED) if r["offset"] in discarded else r for r in records]
    assert got == model(aborted, strategy)


def test_a_keys_part_is_its_bytes_alone():
    keys = pa.array([b"", b"a", b"ab", b"ba", b"a" * 300, None, b"\x00", b"\x00\x00"], pa.binary())
    parts = key_parts(keys, 7)
    assert ((parts >= 0) & (parts < 7)).all()
    assert key_parts(keys.slice(3, 4), 7).tolist() == parts[3:7].tolist()  # wherever the array starts
    assert key_parts(pa.chunked_array([keys.slice(0, 2), keys.slice(2)]), 7).tolist() == parts.tolist()
    spread = key_parts(pa.array([str(i).encode() for i in range(10_000)]), 8)
    assert np.bincount(spread, minlength=8).min() > 1_000  # about even


def test_a_partition_is_cut_into_as_many_ranges_as_its_shares_even_where_segments_fall_short_of_one():
    # measured on a 2 GiB partition: segments a few KB short of RANGE_BYTES, 4 ranges wanted; a cut at
    # the bytes before each group made 3 (one range of two segments, twice a task's memory)
    assert range_of_groups([134168687, 134169761, 134192296, 134171357], 4) == [0, 1, 2, 3]
    assert range_of_groups([10, 1, 1, 1], 4) == [0, 1, 2, 3]  # a group larger than a share takes it alone
    assert range_of_groups([1, 1, 1, 1, 1, 1], 2) == [0, 0, 0, 1, 1, 1]
    assert range_of_groups([5], 4) == [0] and range_of_groups([], 2) == []
    assert range_of_groups([0, 0], 2) == [0, 0]  # empty groups: one range


@given(st.lists(st.integers(0, 1000), max_size=30), st.integers(1, 8))
def test_ranges_are_in_order_never_skipped_and_no_more_than_asked(sizes, count):
    ranges = range_of_groups(sizes, count)
    assert len(ranges) == len(sizes) and (not ranges or ranges[0] == 0)
    assert all(b - a in (0, 1) for a, b in zip(ranges, ranges[1:])) and max(ranges, default=0) < count


@given(st.lists(st.integers(0, 20), max_size=40), st.integers(1, 30))
def test_a_range_is_sliced_in_order_never_past_the_records_asked_but_for_one_larger_batch(sizes, records):
    cut = slice_sizes(sizes, records)
    assert sum(cut) == len(sizes) and all(n >= 1 for n in cut)  # every batch, once, in order: none skipped
    at = 0
    for n in cut:
        held = sum(sizes[at : at + n])
        assert held <= records or n == 1  # a batch is never cut: one larger than a slice is a slice alone
        assert at + n == len(sizes) or held + sizes[at + n] > records  # as many as fit
        assert slice_end(sizes[at:], records) == n
        at += n
