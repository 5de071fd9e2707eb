"""The offset map of a partition cut into segment ranges (the range path, spark/ranges.py), as pure
functions over Arrow tables.

Kafka's cleaner builds one `OffsetMap` over the dirty range of a partition, then rewrites. A range task
cannot: it sees only its segments. What it hands on instead is its **winners**: one row per distinct
key of its keyed data records (KEEP, KEEP_TOMBSTONE, EXPIRE_TOMBSTONE fates): the key's winning record
there by (rank, version, offset) under the partition's KIP-280 strategy (`superseded`), and the key's
latest offset in the cleanable dirty range there (`map_offset`, null where it has none). Winners merge
by the same rule (`key_winners` of their union is the union's), so the partition's are the merge of its
ranges'. The key is carried whole: no hash stands for it, so no collision can drop a record.

A range's records are then superseded (`rules/compaction.supersede`) with, beside its own rows, the
partition's winner of each key whose winner lies in another range (`differing`, made rows by
`winner_rows`): the rule's group of a key then holds the partition's winner and its latest map
offset, which is all `superseded` asks of the other ranges.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# one row per key: its winning record and its latest offset in the cleanable dirty range (null: none)
WINNERS = pa.schema(
    [
        ("key", pa.binary()),
        ("rank", pa.int8()),
        ("version", pa.int64()),
        ("offset", pa.int64()),
        ("map_offset", pa.int64()),
    ]
)


def key_winners(rows: pa.Table) -> pa.Table:
    """The WINNERS of `rows` (any table with WINNERS' columns: keyed `record_fates` rows, or winners
    to merge): per key, the row of highest (rank, version, offset) and the highest `map_offset`."""
    rows = rows.select(WINNERS.names).cast(WINNERS)
    if not rows.num_rows:
        return WINNERS.empty_table()
    if not (pc.any(pc.not_equal(rows["rank"], 0)).as_py() or pc.any(pc.not_equal(rows["version"], 0)).as_py()):
        # Kafka's order (rank and version 0): the latest offset wins, by Arrow's hash aggregation
        grouped = rows.group_by("key").aggregate([("offset", "max"), ("map_offset", "max")])
        n = grouped.num_rows
        return pa.table(
            [
                grouped["key"],
                pa.array(np.zeros(n, np.int8)),
                pa.array(np.zeros(n, np.int64)),
                grouped["offset_max"],
                grouped["map_offset_max"],
            ],
            schema=WINNERS,
        )
    encoded = pc.dictionary_encode(rows["key"].combine_chunks())
    code = encoded.indices.to_numpy().astype(np.int64)
    rank, version, offset = (rows[c].to_numpy() for c in ("rank", "version", "offset"))
    order = np.lexsort((offset, version, rank, code))  # each key's rows, its winner last
    last = order[np.append(code[order][1:] != code[order][:-1], True)]  # in code order
    latest = np.full(len(encoded.dictionary), -1, np.int64)
    np.maximum.at(latest, code, rows["map_offset"].fill_null(-1).to_numpy())
    return pa.table(
        [
            encoded.dictionary,
            pa.array(rank[last]),
            pa.array(version[last]),
            pa.array(offset[last]),
            pa.array(latest, mask=latest < 0),
        ],
        schema=WINNERS,
    )


def differing(local: pa.Table, merged: pa.Table) -> pa.Table:
    """The rows of `merged` (a partition's WINNERS) for the keys of `local` (a range's) whose
    winner or latest map offset is not the range's own: what the range's rewrite must be told.
    `local` may hold several ranges' WINNERS, told apart by a column `range`: the rows then carry it
    (one join for all of a partition's ranges)."""
    tag = ["range"] if "range" in local.column_names else []
    if not local.num_rows:
        return _tagged(tag).empty_table()
    joined = local.join(merged, "key", right_suffix="_merged")
    same = None
    for c in ("rank", "version", "offset", "map_offset"):
        equal = pc.fill_null(
            pc.equal(joined[c], joined[c + "_merged"]),
            pc.and_(pc.is_null(joined[c]), pc.is_null(joined[c + "_merged"])),
        )
        same = equal if same is None else pc.and_(same, equal)
    kept = joined.filter(pc.invert(same))
    columns = [kept["key"], *[kept[c + "_merged"] for c in WINNERS.names[1:]], *[kept[c] for c in tag]]
    return pa.table(columns, schema=_tagged(tag))


def _tagged(tag: list[str]) -> pa.Schema:
    return WINNERS.append(pa.field("range", pa.int32())) if tag else WINNERS


def winner_rows(winners: pa.Table) -> pa.Table:
    """Rows that stand, in a range's `superseded` groups, for the WINNERS of other ranges: the
    winning record (in the map where it is the key's latest map offset), and where the latest map
    offset is another record's, that record below every rank (it makes the key one in the map,
    and never wins)."""
    latest = winners["map_offset"].fill_null(-1).to_numpy()
    offset = winners["offset"].to_numpy()
    winner = pa.table(
        [
            winners["key"],
            winners["rank"],
            winners["version"],
            winners["offset"],
            pa.array(offset, mask=latest != offset),
        ],
        schema=WINNERS,
    )
    other = (latest >= 0) & (latest != offset)
    if not other.any():
        return winner
    n = int(other.sum())
    mapped = pa.table(
        [
            winners["key"].filter(pa.array(other)),
            pa.array(np.full(n, -1, np.int8)),
            pa.array(np.zeros(n, np.int64)),
            pa.array(latest[other]),
            pa.array(latest[other]),
        ],
        schema=WINNERS,
    )
    return pa.concat_tables([winner, mapped])
