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
from kafkalog.rules.ranges import MAPPED, batch_key, key_parts, map_range, merge_part, range_fates

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
