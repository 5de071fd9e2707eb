"""Where a repartitioned record goes, in which order, and where a consumer group resumes (no I/O).

The rules:
- placement: a keyed record goes to `toPositive(murmur2(key)) % N`, Kafka's
  BuiltInPartitioner.partitionForKey (murmur2 and toPositive restated from Kafka's Utils: seed
  0x9747b28c, m 0x5bd1e995, r 24, the tail bytes mixed in reverse, toPositive clears the sign bit);
  a record with a null key keeps `old partition % N`;
- order: a source partition is cut into blocks of `BLOCK_OFFSETS` offsets ([m·B, (m+1)·B)), and
  each block's records bound for one new partition into batches (`blocks`). A new partition's batches
  are those of its source partitions merged by the running maximum timestamp of the source up to
  each batch's first record (`block_carries` joins the blocks' own running maxima), ties broken by
  source partition, then source offset. A running maximum never decreases along a source partition,
  so the merge never reorders a source partition; and since a key lives in one source partition,
  each key's records keep their order too. Where timestamps rise along each source (CreateTime of
  one producer clock, LogAppendTime), this is a merge by timestamp, a batch at a time. Every cut is
  at fixed offsets, so the batches, their order and every new offset depend on the records alone:
  neither on the segments that hold them (replicas' differ) nor on how the tasks share the blocks;
- consumer groups: a group that committed offset c in source partition p has consumed the records of
  p below c. In each new partition it resumes at the first record it has not consumed (the new
  partition's end when it has consumed them all): nothing unconsumed is skipped, and what it reads
  again is only the consumed records placed after that first unconsumed one, which the merge of
  sources at different positions cannot avoid. A source partition the group never committed counts
  as not consumed at all (its records are read).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .compaction_strategy import CompactionStrategy, record_versions, superseded

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 of `data`, as the signed 32-bit int Java returns."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's Utils.toPositive: the int with its sign bit cleared (not its absolute value)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """BuiltInPartitioner.partitionForKey."""
    return to_positive(murmur2(key)) % num_partitions


def new_partition(key: bytes | None, old_partition: int, num_partitions: int) -> int:
    """Where a record goes: its key's partition, or for a null key its old partition modulo N."""
    if key is None:
        return old_partition % num_partitions
    return partition_for_key(key, num_partitions)


def murmur2_many(keys) -> np.ndarray:
    """`murmur2` of each key (a list of bytes or an Arrow binary array without nulls), as int64
    holding the signed 32-bit results: the keys of one length are hashed together, column by column,
    in numpy's uint32 arithmetic (which wraps as Java's int does), read from the Arrow buffers."""
    array = keys if isinstance(keys, pa.Array) else pa.array(keys, pa.binary())
    array = array.cast(pa.large_binary())
    n = len(array)
    out = np.empty(n, dtype=np.int64)
    if not n:
        return out
    offsets = np.frombuffer(array.buffers()[1], np.int64, n + 1, array.offset * 8)
    data = np.frombuffer(array.buffers()[2], np.uint8) if array.buffers()[2] is not None else np.empty(0, np.uint8)
    lengths = np.diff(offsets)
    m = np.uint32(_M)
    for length in np.unique(lengths).tolist():
        rows = np.flatnonzero(lengths == length)
        matrix = data[offsets[rows][:, None] + np.arange(length)] if length else np.empty((len(rows), 0), np.uint8)
        h = np.full(len(rows), (_SEED ^ length) & _MASK, dtype=np.uint32)
        whole = length - length % 4
        words = np.ascontiguousarray(matrix[:, :whole]).view("<u4")
        for column in range(words.shape[1]):
            k = words[:, column] * m
            k ^= k >> np.uint32(24)
            h = (h * m) ^ (k * m)
        tail = length % 4
        if tail == 3:
            h ^= matrix[:, whole + 2].astype(np.uint32) << np.uint32(16)
        if tail >= 2:
            h ^= matrix[:, whole + 1].astype(np.uint32) << np.uint32(8)
        if tail >= 1:
            h ^= matrix[:, whole].astype(np.uint32)
            h = h * m
        h ^= h >> np.uint32(13)
        h = h * m
        h ^= h >> np.uint32(15)
        out[rows] = h.view(np.int32)
    return out


def new_partitions(keys, old_partitions: np.ndarray, num_partitions: int) -> np.ndarray:
    """`new_partition` of each record (keys as a list of bytes or None, or an Arrow binary array),
    as an int32 array."""
    array = keys if isinstance(keys, pa.Array) else pa.array(keys, pa.binary())
    out = np.asarray(old_partitions, dtype=np.int64) % num_partitions
    keyed = pc.is_valid(array).to_numpy(zero_copy_only=False)
    if keyed.any():
        hashes = murmur2_many(array.filter(pa.array(keyed)) if not keyed.all() else array)
        out[keyed] = (hashes & 0x7FFFFFFF) % num_partitions
    return out.astype(np.int32)


# A block's offsets: every block's records bound for one new partition are batched on their own, so
# blocks are what tasks share out (about 80 MB of a log of 160-byte records). Part of the output's
# definition: a different size gives other batches and offsets.
BLOCK_OFFSETS = 1 << 19
NO_CARRY = int(np.iinfo(np.int64).min)  # before a source's first record: below every timestamp (v0's -1 too)


def blocks(start: int, end: int, size: int = BLOCK_OFFSETS) -> list[tuple[int, int]]:
    """The blocks of offsets [start, end): [max(start, m·size), min(end, (m+1)·size)) for each m."""
    if end <= start:
        return []
    return [(max(start, m * size), min(end, (m + 1) * size)) for m in range(start // size, (end - 1) // size + 1)]


def block_carries(maxima: Mapping[tuple[int, int], int]) -> dict[tuple[int, int], int]:
    """(source, block) -> the greatest timestamp of the source's records before the block, from each
    block's greatest (`maxima`; NO_CARRY where none is before it)."""
    carries: dict[tuple[int, int], int] = {}
    running: dict[int, int] = {}
    for source, block in sorted(maxima):
        carries[source, block] = running.get(source, NO_CARRY)
        running[source] = max(running.get(source, NO_CARRY), maxima[source, block])
    return carries


def running_max(timestamps: np.ndarray, carry: int) -> np.ndarray:
    """The merge key of a run of one source partition's records in offset order: the greatest
    timestamp seen so far, starting from `carry` (the greatest before the run)."""
    ts = np.asarray(timestamps, dtype=np.int64)
    return np.maximum.accumulate(np.maximum(ts, carry)) if len(ts) else ts


class GroupResume:
    """Where one group resumes in one new partition, fed the partition's records in new-offset order,
    chunk by chunk (`feed`), so that a task holds a chunk, not the partition. `committed`: the group's
    committed offset per source partition (absent: nothing consumed there)."""

    def __init__(self, committed: Mapping[int, int]):
        self._limits = np.zeros(max(committed, default=-1) + 1, dtype=np.int64)
        for partition, offset in committed.items():
            self._limits[partition] = offset
        self.resume: int | None = None  # the first unconsumed record's new offset, once met
        self.reread = 0  # consumed records at or after it

    def feed(self, sources: np.ndarray, source_offsets: np.ndarray, new_offsets: np.ndarray) -> None:
        if not len(new_offsets):
            return
        sources = np.asarray(sources, dtype=np.int64)
        known = sources < len(self._limits)
        limits = np.where(known, self._limits[np.where(known, sources, 0)], 0) if len(self._limits) else 0
        consumed = np.asarray(source_offsets) < limits
        if self.resume is None:
            unconsumed = np.flatnonzero(~consumed)
            if not len(unconsumed):
                return
            first = int(unconsumed[0])
            self.resume = int(new_offsets[first])
            consumed = consumed[first:]
        self.reread += int(np.count_nonzero(consumed))

    def result(self, end: int) -> tuple[int, int]:
        """(the offset to resume at, the records read again): the end when all was consumed."""
        return (end, 0) if self.resume is None else (self.resume, self.reread)


class Compaction:
    """`--compact`: Kafka's compaction of one new partition, decided while its records are read in
    their new order (`feed`, chunk by chunk), for a second read to keep (`survivors`). All of a new
    partition is its cleanable dirty range: each key keeps its one record of highest precedence under
    the topic's strategy (the latest new offset under ``offset``: rules/compaction_strategy.py's
    `superseded`, as Kafka's offset map), a record without a key goes (the cleaner refuses to keep
    one), and a winning tombstone stays unless its source batch's delete horizon is past `now` (as
    the cleaner keeps it; one never cleaned has none). The task holds one row per key of the
    partition, as Kafka's offset map holds one entry per key; chunks are combined with the winners so
    far once they are as many rows as those winners (each row is combined a bounded number of times)."""

    def __init__(self, strategy: CompactionStrategy, now: int):
        self.strategy, self.now = strategy, now
        self.held: pa.Table | None = None  # the winners so far: key, rank, version, position, expired
        self.chunk: list[pa.Table] = []
        self.rows = 0
        self.total = 0  # records fed
        self.unkeyed = 0

    def feed(self, rows: pa.RecordBatch) -> None:
        """The next records in new-offset order (key, valueIsNull, timestamp (ms), deleteHorizonMs, and
        headers for a strategy by header)."""
        positions = np.arange(self.total, self.total + rows.num_rows, dtype=np.int64)
        self.total += rows.num_rows
        keyed = pc.is_valid(rows["key"]).to_numpy(zero_copy_only=False)
        self.unkeyed += int(np.count_nonzero(~keyed))
        rows = rows.filter(pa.array(keyed))
        table = pa.Table.from_batches([rows])
        rank, version = record_versions(table, self.strategy)
        horizon = rows["deleteHorizonMs"]
        expired = rows["valueIsNull"].to_numpy(zero_copy_only=False) & (
            horizon.fill_null(np.iinfo(np.int64).max).to_numpy() <= self.now
        )
        self.chunk.append(_winners_table(rows["key"], rank, version, positions[keyed], expired))
        self.rows += rows.num_rows
        if self.rows >= max(self.held.num_rows if self.held is not None else 0, 1 << 16):
            self._combine()

    def _combine(self) -> None:
        if not self.chunk:
            return
        table = pa.concat_tables([*(() if self.held is None else (self.held,)), *self.chunk]).combine_chunks()
        self.chunk, self.rows = [], 0
        code = pc.dictionary_encode(table["key"]).combine_chunks().indices.to_numpy().astype(np.int64)
        every = np.ones(table.num_rows, bool)
        columns = (table[c].to_numpy() for c in ("rank", "version", "position"))
        gone, _ = superseded(code, every, every, *columns)
        self.held = table.filter(pa.array(~gone))

    def survivors(self) -> np.ndarray:
        """Per record fed, in order: whether it stays."""
        self._combine()
        keep = np.zeros(self.total, bool)
        if self.held is None:
            return keep
        winners = self.held.filter(pc.invert(self.held["expired"]))
        keep[winners["position"].to_numpy()] = True
        return keep


def _winners_table(keys, rank, version, position, expired) -> pa.Table:
    return pa.Table.from_arrays(
        [keys, pa.array(rank, pa.int8()), pa.array(version, pa.int64()), pa.array(position), pa.array(expired)],
        names=["key", "rank", "version", "position", "expired"],
    )
