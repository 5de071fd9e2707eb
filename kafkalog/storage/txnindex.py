"""The transaction index (.txnindex): one entry per aborted transaction whose ABORT marker is in
the segment."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import NamedTuple

from ..errors import CorruptIndexError, UnsupportedFormatError
from ..rules.aborted_txn import AbortedTxn

VERSION = 0
_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first offset, last offset, last stable offset
ENTRY_SIZE = _ENTRY.size  # 34


class TxnIndexSearchResult(NamedTuple):
    aborted_transactions: list[AbortedTxn]
    # True when an entry's LSO reaches the upper bound, so later segments need not be searched.
    is_complete: bool


@dataclass
class TransactionIndex:
    base_offset: int
    entries: list[AbortedTxn] = field(default_factory=list)
    file: str | None = field(default=None, compare=False)

    @classmethod
    def from_bytes(cls, data: bytes, base_offset: int, file: str | None = None) -> TransactionIndex:
        """Read every whole entry; a trailing partial entry is ignored, as Kafka's iterator does."""
        entries = []
        for position in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
            # Kafka reads only the first byte of the int16 version, as a signed byte.
            version = struct.unpack_from(">b", data, position)[0]
            if version > VERSION:
                raise UnsupportedFormatError(
                    f"aborted transaction version {version}, expected {VERSION}", file=file, position=position
                )
            entries.append(AbortedTxn(*_ENTRY.unpack_from(data, position)[1:]))
        return cls(base_offset, entries, file)

    def to_bytes(self) -> bytes:
        return b"".join(_ENTRY.pack(VERSION, *txn) for txn in self.entries)

    def append(self, txn: AbortedTxn) -> None:
        """Append an entry; markers are written in offset order, so last offsets must increase."""
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise CorruptIndexError(
                f"cannot append an aborted transaction with last offset {txn.last_offset}: "
                f"it is not above the current last offset {self.entries[-1].last_offset}",
                file=self.file,
                position=len(self.entries) * ENTRY_SIZE,
                offset=txn.last_offset,
            )
        self.entries.append(txn)

    def truncate_to(self, offset: int) -> None:
        """Remove the first entry whose last offset is ≥ `offset` and everything after it."""
        for i, txn in enumerate(self.entries):
            if txn.last_offset >= offset:
                del self.entries[i:]
                return

    def collect_aborted(self, fetch_offset: int, upper_bound: int) -> TxnIndexSearchResult:
        """Aborted transactions overlapping [fetch_offset, upper_bound), Kafka's collectAbortedTxns.

        The search is complete at the first entry whose last stable offset is ≥ `upper_bound`: no
        transaction recorded later can overlap the range.
        """
        aborted = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                aborted.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return TxnIndexSearchResult(aborted, True)
        return TxnIndexSearchResult(aborted, False)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError where Kafka's sanityCheck would (a marker below the segment's base
        offset; Kafka then recovers the segment), or if last offsets do not increase."""
        for i, txn in enumerate(self.entries):
            position = i * ENTRY_SIZE
            if txn.last_offset < self.base_offset:
                raise CorruptIndexError(
                    f"aborted transaction {tuple(txn)} has last offset {txn.last_offset}, "
                    f"below the segment base offset {self.base_offset}",
                    file=self.file,
                    position=position,
                    offset=txn.last_offset,
                )
            if i and txn.last_offset <= self.entries[i - 1].last_offset:
                raise CorruptIndexError(
                    f"aborted transaction {tuple(txn)} does not follow "
                    f"{tuple(self.entries[i - 1])}: last offsets must increase",
                    file=self.file,
                    position=position,
                    offset=txn.last_offset,
                )
