"""The range path's offset map (rules/key_map.py): a partition cut into ranges, each range's keys mapped
alone (`key_winners`), the maps merged, and each range superseded with the winners held elsewhere
(`differing`), gives each record the fate a pass over the whole partition gives it (the KIP-280 model
of test_compaction_strategy), under every strategy."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.rules.compaction import EXPIRE_TOMBSTONE, supersede
from kafkalog.rules.key_map import WINNERS, differing, key_winners

from .test_compaction_strategy import STRATEGIES, fates, model, partitions


def keyed(table: pa.Table) -> pa.Table:
    return table.filter(pc.less_equal(table["fate"], EXPIRE_TOMBSTONE))


@settings(max_examples=200, deadline=None)
@given(partitions(), st.sampled_from(STRATEGIES), st.integers(1, 6))
def test_ranges_mapped_apart_and_merged_give_the_whole_partitions_fates(records, strategy, ranges):
    whole = fates(records, strategy)
    cut = [part for part in np.array_split(np.arange(len(records)), ranges) if len(part)]
    parts = [whole.take(pa.array(part)) for part in cut]
    local = [key_winners(keyed(part)) for part in parts]
    merged = key_winners(pa.concat_tables(local) if local else WINNERS.empty_table())
    assert sorted(merged.to_pylist(), key=lambda r: r["key"]) == sorted(
        key_winners(keyed(whole)).to_pylist(), key=lambda r: r["key"]
    )  # merging maps is mapping the union
    got = [f for part, own in zip(parts, local) for f in supersede(part, differing(own, merged)).tolist()]
    assert got == model(records, strategy)


def test_a_range_is_told_only_the_keys_it_does_not_win():
    local = key_winners(
        pa.table({"key": [b"a", b"b"], "rank": [0, 0], "version": [0, 0], "offset": [5, 2], "map_offset": [5, None]})
    )
    merged = key_winners(
        pa.concat_tables(
            [
                local,
                pa.table(
                    {"key": [b"b", b"c"], "rank": [0, 0], "version": [0, 0], "offset": [7, 9], "map_offset": [7, 9]}
                ).cast(WINNERS),
            ]
        )
    )
    told = differing(local, merged).to_pylist()
    assert told == [{"key": b"b", "rank": 0, "version": 0, "offset": 7, "map_offset": 7}]  # a wins here, c is not here
