"""The offset map of a partition cut into segment ranges (the range path, spark/ranges.py), as pure
functions over Arrow tables.

Kafka's cleaner builds one `OffsetMap` over the dirty range of a partition, then rewrites. A range task
cannot: it sees only its segments. What it hands on instead is its **winners**: one row per distinct
key of its keyed data records (KEEP, KEEP_TOMBSTONE, EXPIRE_TOMBSTONE fates): the key's winning record
there by (rank, version, offset) under the partition's KIP-280 strategy (`superseded`), and the key's
latest offset in the cleanable dirty range there (`map_offset`, null where it has none). Winners merge
by the same rule (`key_winners` of their union is the union's), so the partition's are the merge of its
ranges'. The key is carried whole: no hash stands for it, so no collision can drop a record.

A range's records are then superseded (rules/ranges.range_fates, by `superseded`) with, beside its own rows, the
partition's winner of each key whose winner lies in another range (`differing`, made rows by
`winner_rows`): the rule's group of a key then holds the partition's winner and its latest map
offset, which is all `superseded` asks of the other ranges.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .compaction_strategy import superseded, winning

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


def key_winners(rows: pa.Table, tags: tuple[str, ...] = ()) -> pa.Table:
    """The WINNERS of `rows` (any table with WINNERS' columns: keyed `record_fates` rows, or winners
    to merge): per key, the row of highest (rank, version, offset) and the highest `map_offset`, and
    its columns `tags` after them. The keys are hashed once by Arrow (dictionary encoding), the rest
    is numpy over their codes."""
    carried = rows.select(list(tags))
    rows = rows.select(WINNERS.names).cast(WINNERS)
    if not rows.num_rows:
        return pa.schema([*WINNERS, *carried.schema]).empty_table()
    dictionary, code, rank, version, offset, _, latest = _by_key(rows)
    winners, at = _winners(dictionary, code, np.ones(len(code), bool), rank, version, offset, latest[code])
    for name in tags:
        winners = winners.append_column(carried.schema.field(name), carried[name].take(pa.array(at)))
    return winners


def range_map(fates: pa.Table, keyed: np.ndarray) -> tuple[np.ndarray, pa.Table, np.ndarray]:
    """Of a range's `record_fates` rows, taking only the `keyed` ones as keyed (the others as
    unkeyed): which are superseded within the range (as rules/compaction.supersede finds them), their
    `key_winners` and each row's key's number in the range (`code`, the winners' last column: the
    rows of a key can be told apart from others without their bytes), from one hashing of the keys."""
    encoded = pc.dictionary_encode(fates["key"].combine_chunks())
    code = encoded.indices.fill_null(len(encoded.dictionary)).to_numpy().astype(np.int64)  # null keys: never keyed
    rank, version, offset = (fates[c].to_numpy() for c in ("rank", "version", "offset"))
    in_map = keyed & (fates["map_offset"].fill_null(-1).to_numpy() >= 0)  # a record's map_offset is its offset
    gone, latest = superseded(code, keyed, in_map, rank, version, offset)
    winners, at = _winners(encoded.dictionary, code, keyed, rank, version, offset, latest)
    return gone, winners.append_column(pa.field("code", pa.int32()), pa.array(code[at], pa.int32())), code


def _winners(dictionary: pa.Array, code, keyed, rank, version, offset, latest) -> tuple[pa.Table, np.ndarray]:
    """WINNERS: per code of `keyed` rows, its row of highest (rank, version, offset) (`winning`; of
    rows alike in all three, any one) with `latest`, each row's key's highest map offset (-1: none);
    and the rows they are."""
    pick = _winning_rows(code, keyed, rank, version, offset, len(dictionary) + 1)
    rows = pick[pick >= 0]
    winners = pa.table(
        [
            dictionary.take(pa.array(code[rows])),
            pa.array(rank[rows], pa.int8()),
            pa.array(version[rows], pa.int64()),
            pa.array(offset[rows], pa.int64()),
            pa.array(latest[rows], pa.int64(), mask=latest[rows] < 0),
        ],
        schema=WINNERS,
    )
    return winners, rows


def _by_key(rows: pa.Table):
    """`rows`' keys hashed once (dictionary encoding): the dictionary, each row's key's number in it
    (`code`), its rank, version, offset and map offset (-1: none), and per code the highest map offset
    (-1: none)."""
    encoded = pc.dictionary_encode(rows["key"].combine_chunks())
    code = encoded.indices.to_numpy().astype(np.int64)
    mapped = rows["map_offset"].fill_null(-1).to_numpy()
    latest = np.full(len(encoded.dictionary), -1, np.int64)
    np.maximum.at(latest, code, mapped)
    rank, version, offset = (rows[c].to_numpy() for c in ("rank", "version", "offset"))
    return encoded.dictionary, code, rank, version, offset, mapped, latest


def _winning_rows(code, keyed, rank, version, offset, codes: int) -> np.ndarray:
    """Per code below `codes`, the row of `keyed` rows of highest (rank, version, offset) (`winning`;
    of rows alike in all three, any one); -1 where it has none."""
    best = np.flatnonzero(winning(code, keyed, rank, version, offset))
    pick = np.full(codes, -1, np.int64)
    pick[code[best]] = best
    return pick


def differing(local: pa.Table) -> pa.Table:
    """Of `local`, the WINNERS of several ranges told apart by further columns (a `range` at least),
    per row whose key's partition winner (`key_winners` of them all) or latest map offset is not the
    row's own: that winner and latest map offset, with the row's further columns: what each range's
    rewrite must be told. The keys are hashed once (dictionary encoding) and each row compared with
    its key's winner by their codes, not joined with the merged winners."""
    tags = local.column_names[len(WINNERS) :]
    if not local.num_rows:
        return local.slice(0, 0)
    dictionary, code, rank, version, offset, mapped, latest = _by_key(local)
    win = _winning_rows(code, np.ones(len(code), bool), rank, version, offset, len(dictionary))[code]
    told = np.flatnonzero(
        (rank[win] != rank) | (version[win] != version) | (offset[win] != offset) | (latest[code] != mapped)
    )
    at, latest = win[told], latest[code[told]]
    return pa.table(
        [
            local["key"].take(pa.array(told)),
            pa.array(rank[at], pa.int8()),
            pa.array(version[at], pa.int64()),
            pa.array(offset[at], pa.int64()),
            pa.array(latest, pa.int64(), mask=latest < 0),
            *[local[t].take(pa.array(told)) for t in tags],
        ],
        schema=local.schema,
    )


def winner_rows(winners: pa.Table) -> pa.Table:
    """Rows that stand, in a range's `superseded` groups, for the WINNERS of other ranges: the
    winning record (in the map where it is the key's latest map offset), and where the latest map
    offset is another record's, that record below every rank (it makes the key one in the map,
    and never wins). The key is `winners`' first column, whatever it is (its bytes, or its number
    in the range: rules/ranges.TOLD); the rows have WINNERS' other columns after it."""
    schema = pa.schema([winners.schema.field(0), *list(WINNERS)[1:]])
    latest = winners["map_offset"].fill_null(-1).to_numpy()
    offset = winners["offset"].to_numpy()
    winner = pa.table(
        [
            winners.column(0),
            winners["rank"],
            winners["version"],
            winners["offset"],
            pa.array(offset, mask=latest != offset),
        ],
        schema=schema,
    )
    other = (latest >= 0) & (latest != offset)
    if not other.any():
        return winner
    n = int(other.sum())
    mapped = pa.table(
        [
            winners.column(0).filter(pa.array(other)),
            pa.array(np.full(n, -1, np.int8)),
            pa.array(np.zeros(n, np.int64)),
            pa.array(latest[other]),
            pa.array(latest[other]),
        ],
        schema=schema,
    )
    return pa.concat_tables([winner, mapped])
