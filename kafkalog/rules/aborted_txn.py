"""Kafka's AbortedTxn: one aborted transaction, as a `.txnindex` entry records it (storage/txnindex
reads and writes the entries) and the cleaner's transaction tracker takes it."""

from __future__ import annotations

from typing import NamedTuple


class AbortedTxn(NamedTuple):
    """An aborted transaction: its data spans [first_offset, last_offset], the ABORT marker is at
    `last_offset`, and `last_stable_offset` was the partition's LSO when the abort was written."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
