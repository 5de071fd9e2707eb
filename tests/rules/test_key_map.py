"""The range path's offset map (rules/key_map.py): a partition cut into ranges, each range's keys mapped
alone (`key_winners`), the maps merged, and each range superseded with the winners held elsewhere
(`differing`, beside its own records as `winner_rows`), gives each record the fate a pass over the
whole partition gives it (the KIP-280 model of test_compaction_strategy), under every strategy."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.rules.compaction import EXPIRE_TOMBSTONE, KEEP, supersede
from kafkalog.rules.key_map import WINNERS, differing, key_winners, winner_rows

from .test_compaction_strategy import STRATEGIES, fates, model, partitions


def keyed(table: pa.Table) -> pa.Table:
    return table.filter(pc.less_equal(table["fate"], EXPIRE_TOMBSTONE))


def tagged(winners: pa.Table, number: int) -> pa.Table:
    return winners.append_column("range", pa.array(np.full(winners.num_rows, number, np.int32)))


def beside(part: pa.Table, winners: pa.Table) -> np.ndarray:
    """`supersede` of a range's rows with `winner_rows` of the winners it is told (KEEP) beside them."""
    rows = winner_rows(winners)
    fate = pa.array(np.full(rows.num_rows, KEEP, np.int8))
    both = pa.concat_tables([part.select([*WINNERS.names, "fate"]), rows.append_column("fate", fate)])
    return supersede(both)[: part.num_rows]


def mine(told: pa.Table, number: int) -> pa.Table:
    return told.filter(pc.equal(told["range"], number)).drop_columns(["range"])


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
    told = differing(
        pa.concat_tables([tagged(own, i) for i, own in enumerate(local)] or [tagged(WINNERS.empty_table(), 0)])
    )
    got = [f for i, part in enumerate(parts) for f in beside(part, mine(told, i)).tolist()]
    assert got == model(records, strategy)


def test_a_range_is_told_only_the_keys_it_does_not_win():
    local = key_winners(
        pa.table({"key": [b"a", b"b"], "rank": [0, 0], "version": [0, 0], "offset": [5, 2], "map_offset": [5, None]})
    )
    other = pa.table(
        {
            "key": [b"b", b"c", b"a"],
            "rank": [0, 0, 0],
            "version": [0, 0, 0],
            "offset": [7, 9, 3],
            "map_offset": [7, 9, 6],
        }
    ).cast(WINNERS)
    told = differing(pa.concat_tables([tagged(local, 0), tagged(other, 1)]))
    assert mine(told, 0).to_pylist() == [
        {"key": b"a", "rank": 0, "version": 0, "offset": 5, "map_offset": 6},  # a wins here, its latest is not here
        {"key": b"b", "rank": 0, "version": 0, "offset": 7, "map_offset": 7},
    ]  # c is not here
    assert mine(told, 1).to_pylist() == [{"key": b"a", "rank": 0, "version": 0, "offset": 5, "map_offset": 6}]
