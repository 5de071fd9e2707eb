"""The range path's three steps (spark/ranges.py) as pure functions over Arrow tables: a partition cut
into segment ranges, each range's records mapped alone (`map_range`), their keys merged across the
ranges in parts (`merge_part`), and each range's records given their final fates (`range_fates`). A
range task takes its records in slices of whole batches (`slice_end`), each mapped and made final as
a range of its own (their outcomes joined: `joined_outcome`): what follows holds of any cut of the
partition's batches in file order, so that a task's memory follows the records of a slice.

A record superseded within its range stays superseded whatever the other ranges hold (its key's
winner there can only lose to a better one, and the key is in the map wherever it was there), so the
map step decides those records at once and stages the range's fates for the rewrite. What it cannot
decide alone is the rest of its keyed records (`pending`): the key's winner or latest map offset may
lie in another range, or a record may belong to a batch an aborted transaction discards (`doubtful`:
held back from the map until the partition's transaction tracker has run). The merge of a part of the
keys tells each range the partition's winners of its keys won elsewhere (rules/key_map.differing), and
the rewrite supersedes again only its pending records of those keys and of its doubtful ones. Keys
are compared whole: a hash (`key_parts`) only chooses the part a key is merged in; the merge's rows
carry each key's number in its range's map (`code`, a dictionary index there), by which the rewrite
tells the keys apart without hashing them again.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from .compaction import (
    ABORTED,
    CONTROL,
    EXPIRE_TOMBSTONE,
    MARKER,
    REASONS,
    SUPERSEDED,
    PartitionOutcome,
)
from .compaction_strategy import superseded
from .key_map import WINNERS, differing, key_winners, range_map, winner_rows


def range_of_groups(sizes: list[int], count: int) -> list[int]:
    """The range of each of a partition's output groups (their bytes `sizes`, in order) when it is cut into
    about `count` ranges of equal bytes: the range whose equal share holds the group's midpoint. A group is
    never cut, so one larger than a share takes it alone, and ranges are never skipped (a range starts at
    a group whose midpoint lies past the shares before it). By midpoints, not by where a group starts: a
    cut at the bytes before a group misses a share's end by the few bytes segments fall short of it."""
    total = sum(sizes)
    ranges: list[int] = []
    before = 0
    for size in sizes:
        share = min(int((before + size / 2) * count / total), count - 1) if total else 0
        ranges.append(0 if not ranges else ranges[-1] + (share > ranges[-1]))
        before += size
    return ranges


def slice_end(sizes, records: int) -> int:
    """How many of the leading batches (their record counts `sizes`, in file order) the next slice of a
    range takes when a slice holds at most `records` records: as many as fit, and at least one (a batch
    is never cut, so one larger than `records` is a slice alone)."""
    fit = int(np.searchsorted(np.cumsum(sizes), records, side="right"))
    return max(fit, 1) if len(sizes) else 0


def slice_sizes(sizes, records: int) -> list[int]:
    """The batches of each slice (`slice_end`, again and again) of a range whose batches hold `sizes` records."""
    sizes, out = np.asarray(sizes, np.int64), []
    while len(sizes):
        out.append(slice_end(sizes, records))
        sizes = sizes[out[-1] :]
    return out


def joined_outcome(outcomes: list[PartitionOutcome]) -> PartitionOutcome:
    """One PartitionOutcome of the outcomes of consecutive slices of a range (each of whole batches, in
    file order): their batch changes, and per source segment the sum of its slices' rows (a segment
    changes if it changes in one of them; its kept ABORT markers in file order)."""
    changes: dict = {}
    segments: dict[int, dict] = {}
    for outcome in outcomes:
        changes.update(outcome.changes)
        for row in outcome.segments:
            have = segments.get(row["segmentBaseOffset"])
            if have is None:
                segments[row["segmentBaseOffset"]] = dict(row, kept_txn_markers=list(row["kept_txn_markers"]))
                continue
            for name in (*REASONS, "bytes_removed", "invalid_headers"):
                have[name] += row[name]
            have["changed"] = have["changed"] or row["changed"]
            have["kept_txn_markers"] += row["kept_txn_markers"]
    return PartitionOutcome(changes, [segments[b] for b in sorted(segments)])


# what a map task stages for its range's rewrite, one row per record in file order: the columns the
# rewrite's outcome reads, its `record_fates` fate and whether it is superseded within the range, and
# where the record is pending (a keyed record not superseded there, or any keyed record of a key with
# doubtful ones) its key's number in the range (rules/key_map.range_map's `code`) and precedence;
# `doubtful`: of a batch an aborted transaction may discard
STAGED = pa.schema(
    [
        ("segment", pa.int32()),
        ("position", pa.int64()),
        ("offset", pa.int64()),
        ("recordSpanSize", pa.int32()),
        ("fate", pa.int8()),
        ("superseded", pa.bool_()),
        ("invalid_header", pa.bool_()),
        ("code", pa.int32()),
        ("rank", pa.int8()),
        ("version", pa.int64()),
        ("map_offset", pa.int64()),
        ("doubtful", pa.bool_()),
    ]
)
# what a map task hands the merge of one part of its keys: its WINNERS (batch null) and its doubtful
# keyed records (with their batch's segment and position), tagged with the range's number, each with
# its key's number in the range
MAPPED = WINNERS.append(pa.field("range", pa.int32())).append(pa.field("segment", pa.int32()))
MAPPED = MAPPED.append(pa.field("position", pa.int64())).append(pa.field("code", pa.int32()))
# what the merge tells a range of the partition's winners of its keys won elsewhere: WINNERS with
# the key's number in the range (its `code`) for its bytes
TOLD = pa.schema([("code", pa.int32()), *list(WINNERS)[1:]])


def batch_key(segment, position) -> pa.Array:
    """A batch's (segment number, position) as one int64, as `gone` lists the discarded batches."""
    return pc.add(pc.shift_left(pc.cast(segment, pa.int64()), 40), pc.cast(position, pa.int64()))


def map_range(fates: pa.Table, doubtful: np.ndarray, number: int) -> tuple[pa.Table, pa.Table]:
    """A range's `record_fates` rows (read with no batch discarded) and which are `doubtful`, as the
    map step gives them on: (STAGED rows for its rewrite, MAPPED rows tagged `number` for the merge)."""
    fate = fates["fate"].to_numpy()
    keyed = fate <= EXPIRE_TOMBSTONE
    sure = keyed & ~doubtful
    gone, winners, code = range_map(fates, sure)  # the held-back records out of the range's map
    keep = keyed & ~gone  # pending; and every keyed record of a key with doubtful ones, which decide again
    if doubtful.any():
        again = np.zeros(code.max() + 1, bool)
        again[code[keyed & doubtful]] = True
        keep |= keyed & again[code]
    staged = pa.table(
        [
            fates["segment"],
            fates["position"],
            fates["offset"],
            fates["recordSpanSize"],
            fates["fate"],
            pa.array(gone),
            fates["invalid_header"],
            pa.array(code, pa.int32(), mask=~keep),
            fates["rank"],
            fates["version"],
            fates["map_offset"],
            pa.array(doubtful),
        ],
        schema=STAGED,
    )
    held = keyed & doubtful
    rows = fates.filter(pa.array(held))
    n = winners.num_rows
    mapped = pa.concat_tables(
        [
            pa.table(
                [
                    *winners.select(WINNERS.names).columns,
                    pa.array(np.full(n, number, np.int32)),
                    pa.nulls(n, pa.int32()),
                    pa.nulls(n, pa.int64()),
                    winners["code"],
                ],
                schema=MAPPED,
            ),
            pa.table(
                [
                    *rows.select(WINNERS.names).cast(WINNERS).columns,
                    pa.array(np.full(rows.num_rows, number, np.int32)),
                    rows["segment"],
                    rows["position"],
                    pa.array(code[held], pa.int32()),
                ],
                schema=MAPPED,
            ),
        ]
    )
    return staged, mapped


def key_parts(keys: pa.Array | pa.ChunkedArray, parts: int) -> np.ndarray:
    """The part (0 to `parts` - 1) each key is merged in: its bytes' XXH64, the same in every process
    and version (Python's own hash is salted per process). Only a place: the merge compares whole keys."""
    if parts <= 1 or not len(keys):
        return np.zeros(len(keys), np.int64)
    data = pc.fill_null(keys, b"").to_numpy(zero_copy_only=False)
    hashes = np.fromiter(map(xxhash.xxh64_intdigest, data), np.uint64, len(data))  # no Python frame a key
    return (hashes % np.uint64(parts)).astype(np.int64)


def merge_part(mapped: pa.Table, gone: pa.Array) -> pa.Table:
    """The merge of one part of a partition's keys: `mapped`, the MAPPED rows of those keys from all
    its ranges; `gone`, the `batch_key`s of the batches whose records the transaction tracker
    discarded. Returns, tagged `range`, each range's TOLD rows (rules/key_map.differing): the
    partition's winners of its keys that it does not win itself, each key by its number in the range."""
    held = mapped["segment"].is_valid()
    if pc.any(held).as_py():
        out = pc.and_(held, pc.is_in(batch_key(mapped["segment"], mapped["position"]), gone))
        mapped = mapped.filter(pc.invert(out))
        held = mapped["segment"].is_valid()
        redo = set(mapped.filter(held)["range"].to_pylist())  # ranges whose kept held-back records join their map
        mine = pc.is_in(mapped["range"], pa.array(sorted(redo), pa.int32()))
        again = []
        for r in sorted(redo):
            rows = key_winners(mapped.filter(pc.equal(mapped["range"], r)), ("code",))
            again.append(rows.add_column(len(WINNERS), "range", pa.array(np.full(rows.num_rows, r, np.int32))))
        mapped = pa.concat_tables([mapped.filter(pc.invert(mine)).select([*WINNERS.names, "range", "code"]), *again])
    told = differing(mapped.select([*WINNERS.names, "range", "code"]))
    return told.select([*TOLD.names, "range"])


def range_fates(staged: pa.Table, told: pa.Table, gone: pa.Array) -> pa.Table:
    """A range's STAGED rows given their final fates (`record_fates` and `supersede` columns as the
    rewrite's outcome reads them): its records of `gone` batches aborted (markers removed), those
    superseded within the range superseded, and its pending records of the keys `told` (its rows of
    the merge, TOLD) or doubtful superseded again with the partition's winners."""
    fate = staged["fate"].to_numpy()
    discarded = pc.is_in(batch_key(staged["segment"], staged["position"]), gone).to_numpy(zero_copy_only=False)
    if discarded.any():  # as record_fates marks the records of a discarded batch
        fate = np.where(discarded, np.where(fate == CONTROL, np.int8(MARKER), np.int8(ABORTED)), fate).astype(np.int8)
        invalid = staged["invalid_header"].to_numpy(zero_copy_only=False) & ~discarded
        staged = staged.set_column(staged.schema.get_field_index("invalid_header"), "invalid_header", pa.array(invalid))
    pending = staged["code"].is_valid().to_numpy(zero_copy_only=False) & (fate <= EXPIRE_TOMBSTONE)
    doubtful = pending & staged["doubtful"].to_numpy(zero_copy_only=False)
    final = np.where(staged["superseded"].to_numpy(zero_copy_only=False), np.int8(SUPERSEDED), fate).astype(np.int8)
    if told.num_rows or doubtful.any():
        redo, gone_again = _superseded_again(staged, pending, doubtful, told)
        final[redo] = np.where(gone_again, np.int8(SUPERSEDED), fate[redo])
    return staged.set_column(staged.schema.get_field_index("fate"), "fate", pa.array(final, pa.int8()))


def _superseded_again(staged: pa.Table, pending, doubtful, told: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Which of a range's STAGED rows are superseded again (`redo`: its `pending` ones of the keys
    `told` and of its `doubtful` ones), and of those which go, as rules/compaction.supersede decides
    them with `told`'s winner rows beside them: numpy over the keys' numbers in the range (`code`),
    no key hashed."""
    rows = winner_rows(told)
    code = staged["code"].fill_null(-1).to_numpy()
    theirs = rows["code"].to_numpy()
    again = np.zeros(max(code.max(initial=-1), theirs.max(initial=-1)) + 1, bool)
    again[theirs] = True
    again[code[doubtful]] = True
    redo = pending & again[np.maximum(code, 0)]
    at = np.flatnonzero(redo)

    def column(name: str) -> np.ndarray:
        return np.concatenate([staged[name].fill_null(-1).to_numpy()[at], rows[name].fill_null(-1).to_numpy()])

    group = column("code").astype(np.int64)
    keyed = np.ones(len(group), bool)  # pending records are keyed, told winners KEEP
    gone, _ = superseded(group, keyed, column("map_offset") >= 0, column("rank"), column("version"), column("offset"))
    return redo, gone[: len(at)]
