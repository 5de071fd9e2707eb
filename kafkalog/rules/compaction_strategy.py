"""KIP-280's compaction strategies: which record of a key the offset map keeps.

Kafka's cleaner keeps each key's latest offset. KIP-280 ("Enhanced log compaction", KAFKA-7061;
accepted, never shipped) lets a topic keep the record of the highest *version* instead:

* ``offset``: the latest offset, Kafka's rule and the default;
* ``timestamp``: the highest record timestamp; on a tie, the highest offset;
* ``header``: the value of the record's last header of the key `compaction.strategy.header`, read
  as an 8-byte big-endian signed long; the highest wins, on a tie the highest offset; a record with
  that header beats one without; a header whose value is not 8 bytes counts as absent (and is
  counted); without the header on either, the highest offset. A blank header key means ``offset``.

A record's precedence is (rank, version, offset), compared in that order: `versions` gives the first
two per record (both 0 under ``offset``, so the offset alone decides) and `superseded` the records
that lose. kafkalog's reading of "per key": a key with a record in the cleanable dirty range (the
offset map's) keeps the one record of highest precedence among all its records below the first
uncleanable offset, clean or dirty; under ``offset`` that is always the latest in the dirty range,
Kafka's rule exactly (docs/semantics.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

STRATEGIES = ("offset", "timestamp", "header")


@dataclass(frozen=True)
class CompactionStrategy:
    """A topic's strategy (`compaction.strategy`) and, for ``header``, its header key."""

    name: str = "offset"
    header: str = ""

    @classmethod
    def of(cls, name: str, header: str = "") -> CompactionStrategy:
        """The strategy a topic's settings mean: ``header`` with a blank key falls back to ``offset``."""
        if name not in STRATEGIES:
            raise ValueError(f"unknown compaction strategy {name!r}: one of {', '.join(STRATEGIES)}")
        if name == "header" and not header.strip():
            return OFFSET
        return cls(name, header if name == "header" else "")

    @property
    def header_key(self) -> bytes | None:
        """The header key the narrow scan reads for this strategy, or None."""
        return self.header.encode() if self.name == "header" else None

    def __str__(self) -> str:
        return f"header:{self.header}" if self.name == "header" else self.name

    @property
    def superseded_by(self) -> str:
        """What supersedes a keyed record under this strategy, as the compaction report says it: a
        record of the same key with..."""
        if self.name == "timestamp":
            return "a higher timestamp, then a later offset"
        if self.name == "header":
            return f"a higher version in header {self.header!r} (8 bytes), then a later offset"
        return "a later offset"


OFFSET = CompactionStrategy()


def versions(batch: pa.RecordBatch, strategy: CompactionStrategy) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rank int8, version int64, invalid bool) of the narrow rows of `batch` under `strategy`:
    ``header`` ranks a record with an 8-byte header above one without (`invalid`: its last header of
    the key has another size) and versions it by that header's value (the narrow view's `headerSize`
    and `headerValue`); ``timestamp`` versions it by its timestamp."""
    n = batch.num_rows
    rank, version, invalid = np.zeros(n, np.int8), np.zeros(n, np.int64), np.zeros(n, bool)
    if strategy.name == "timestamp":
        version = batch["timestamp"].to_numpy()
    elif strategy.name == "header":
        size = batch["headerSize"].fill_null(-2).to_numpy()
        rank = (size == 8).astype(np.int8)
        version = batch["headerValue"].fill_null(0).to_numpy()
        invalid = (size != -2) & (size != 8)
    return rank, version, invalid


def superseded(
    group: np.ndarray,
    keyed: np.ndarray,
    in_map: np.ndarray,
    rank: np.ndarray,
    version: np.ndarray,
    offset: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Which rows lose, and each row's key's latest offset in the map (-1 where it has none):
    `group` numbers each row's (partition, key) from 0; a `keyed` row whose group has an `in_map`
    row (one in the cleanable dirty range) goes unless it is the group's keyed row of highest
    (rank, version, offset). Where every rank and version is 0 (``offset``) that is Kafka's offset
    map: older than the key's latest offset in the map."""
    groups = int(group.max()) + 1 if len(group) else 0
    latest = np.full(groups, -1, np.int64)
    np.maximum.at(latest, group[in_map], offset[in_map])
    if not (rank.any() or version.any()):
        return keyed & (offset < latest[group]), latest[group]
    return keyed & (latest[group] >= 0) & ~winning(group, keyed, rank, version, offset), latest[group]


def winning(group: np.ndarray, keyed: np.ndarray, rank: np.ndarray, version: np.ndarray, offset: np.ndarray):
    """Of each group's `keyed` rows, those of highest (rank, version, offset): one a group where
    offsets are unique (as `superseded` numbers groups). Of a key's keyed rows, those of its highest
    rank, of those the highest version, of those the highest offset: one maximum per key and column
    (a sort of every row costs more)."""
    groups = int(group.max()) + 1 if len(group) else 0
    best = keyed.copy()
    columns = (rank.astype(np.int64), version, offset) if rank.any() or version.any() else (offset,)
    for column in columns:
        top = np.full(groups, np.iinfo(np.int64).min, np.int64)
        np.maximum.at(top, group[best], column[best])
        best &= column == top[group]
    return best


def parse_latest_by(text: str) -> CompactionStrategy:
    """`export --latest-by`'s value: ``offset``, ``timestamp`` or ``header:NAME``."""
    name, _, header = text.partition(":")
    if name not in STRATEGIES or (name == "header") != bool(_) or (name == "header" and not header.strip()):
        raise ValueError(f"--latest-by {text}: expected offset, timestamp or header:NAME")
    return CompactionStrategy.of(name, header)


def record_versions(table: pa.Table, strategy: CompactionStrategy) -> tuple[np.ndarray, np.ndarray]:
    """(rank, version) of the rows of a records view (`timestamp`, `headers` as Spark's Kafka source
    has them) under `strategy`, as `versions` gives them of the narrow view."""
    import pyarrow.compute as pc

    n = table.num_rows
    rank, version = np.zeros(n, np.int8), np.zeros(n, np.int64)
    if strategy.name == "timestamp":
        version = table["timestamp"].combine_chunks().cast(pa.int64()).to_numpy()
    elif strategy.name == "header" and n:
        headers = table["headers"].combine_chunks()
        flat = pc.list_flatten(headers)
        match = pc.equal(flat.field("key"), strategy.header).fill_null(False).to_numpy(zero_copy_only=False)
        rows = pc.list_parent_indices(headers).to_numpy()[match]
        values = flat.field("value").filter(pa.array(match))
        last = len(rows) - 1 - np.unique(rows[::-1], return_index=True)[1]  # each row's last occurrence
        sizes = pc.binary_length(values).fill_null(-1).to_numpy()[last]
        eight = last[sizes == 8]
        rank[rows[eight]] = 1
        if len(eight):
            fixed = values.take(pa.array(eight)).cast(pa.binary(8))
            version[rows[eight]] = np.frombuffer(fixed.buffers()[1], ">i8", len(fixed), fixed.offset * 8)
    return rank, version
