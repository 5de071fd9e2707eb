"""`kafkalog validate`'s checks of a segment's index files: the offset index (`.index`), the time
index (`.timeindex`) and the transaction index (`.txnindex`).

Two kinds of check. What a file shows on its own (length, a preallocated zero tail, Kafka's
sanity checks) is checked when it is loaded (`load_index`, `load_txn_index`, and `check_index_file`,
`check_txn_index_file` for a file given alone). What needs the `.log` is checked while the segment
is walked: `OffsetIndexCheck`, `TimeIndexCheck` and `TxnIndexCheck` are fed each batch (each
control marker, for the transaction index) in file order and hold only a cursor into the
entries, then `finish()` at the end of the segment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..codec.control import ControlType
from ..errors import KafkaLogError, UnreadableFileError
from ..rules.aborted_txn import AbortedTxn
from ..storage.index import OffsetIndex, TimeIndex
from ..storage.segment import LogSegment
from ..storage.txnindex import ENTRY_SIZE as TXN_ENTRY_SIZE
from ..storage.txnindex import TransactionIndex
from .validate_report import ERROR, INFO, WARNING, Findings

_OFFSET_ENTRY_SIZE = OffsetIndex.ENTRY.size  # 8
_TIME_ENTRY_SIZE = TimeIndex.ENTRY.size  # 12


# -- the files on their own ------------------------------------------------------------------------


def load_index(findings: Findings, seg: LogSegment, base: int | None, standalone: bool, kind: str, active: bool):
    """The segment's `.index` (`kind` ".index") or `.timeindex` (".timeindex") without its zero
    tail, after the checks of the file on its own; None where it is absent or unreadable. A missing
    index is reported for segments of a partition whose base offset is known (`base`)."""
    cls, prefix = (OffsetIndex, "index") if kind == ".index" else (TimeIndex, "timeindex")
    entry = seg.files.get(kind)
    if entry is None:
        if not standalone and base is not None:
            _missing_index(findings, seg, kind, prefix, active)
        return None
    findings.counts["index_files" if kind == ".index" else "time_index_files"] += 1
    try:
        data = seg.read(kind)
    except UnreadableFileError as err:
        findings.add_error("io.read", ERROR, err, entry.path)
        return None
    except OSError as err:
        findings.add("io.read", ERROR, f"cannot read: {err}", entry.path)
        return None
    assert data is not None  # the segment lists the file
    index = cls.from_bytes(data, seg.base_offset if base is None else base, file=entry.path)
    findings.counts["index_entries" if kind == ".index" else "time_index_entries"] += len(index.entries)
    return check_index_file(findings, index, prefix, entry.path, active)


def _missing_index(findings: Findings, seg: LogSegment, kind: str, prefix: str, active: bool) -> None:
    if active:
        findings.add(
            f"{prefix}.missing",
            INFO,
            f"the active segment has no {kind}: normal, Kafka creates it when it opens the segment",
            seg.path(kind),
        )
        return
    consequence = (
        "Kafka rebuilds it by recovering the segment on load"
        if kind == ".index"
        else "Kafka creates an empty one and does not rebuild it, so time retention falls back to the .log file's mtime"
    )
    findings.add(f"{prefix}.missing", WARNING, f"the inactive segment has no {kind}: {consequence}", seg.path(kind))


def check_index_file(findings: Findings, index, prefix: str, path: str, active: bool):
    """Length, zero tail and Kafka's sanity check of an offset or time index (`prefix` "index" or
    "timeindex"); returns the index without its zero tail."""
    size = index.ENTRY.size
    if index.trailing_bytes:
        findings.add(
            f"{prefix}.size",
            ERROR,
            f"{len(index.entries) * size + index.trailing_bytes} bytes is not a "
            f"multiple of the {size}-byte entry: {index.trailing_bytes} bytes of a partial entry",
            path,
            len(index.entries) * size,
        )
    first_zero = _zero_tail_start(index)
    if first_zero is not None:
        why = (
            "normal only for the active segment of a broker that did not stop cleanly"
            if active
            else "Kafka trims it when the segment rolls"
        )
        findings.add(
            f"{prefix}.zero_tail",
            WARNING if active else ERROR,
            f"{len(index.entries) - first_zero} all-zero entries at the end: a preallocated index that "
            f"was never trimmed ({why})",
            path,
            first_zero * size,
            index.base_offset,
        )
        index = replace(index, entries=index.entries[:first_zero])
    try:
        replace(index, trailing_bytes=0).sanity_check()
    except KafkaLogError as err:
        findings.add_error(f"{prefix}.sanity", ERROR, err, path)
    return index


def _zero_tail_start(index) -> int | None:
    """The number of the first entry of a preallocated all-zero tail, None without one. A single
    zero-valued last entry can be genuine; a longer run, or one after entries, is a tail."""
    zero = index._entry(index.base_offset, (0, 0))
    first_zero = len(index.entries)
    while first_zero > 0 and index.entries[first_zero - 1] == zero:
        first_zero -= 1
    if len(index.entries) - first_zero > 1 or 0 < first_zero < len(index.entries):
        return first_zero
    return None


def load_txn_index(findings: Findings, seg: LogSegment, base: int | None) -> TransactionIndex | None:
    """The segment's `.txnindex` after the checks of the file on its own; None where it is absent,
    unreadable or refused."""
    entry = seg.files.get(".txnindex")
    if entry is None:
        return None
    findings.counts["txn_index_files"] += 1
    try:
        data = seg.read(".txnindex")
    except UnreadableFileError as err:
        findings.add_error("io.read", ERROR, err, entry.path)
        return None
    except OSError as err:
        findings.add("io.read", ERROR, f"cannot read: {err}", entry.path)
        return None
    assert data is not None  # the segment lists the file
    return check_txn_index_file(findings, data, seg.base_offset if base is None else base, entry.path)


def check_txn_index_file(findings: Findings, data: bytes, base: int, path: str) -> TransactionIndex | None:
    """Length, entry versions and Kafka's sanity check of a `.txnindex`; None when Kafka refuses it."""
    if len(data) % TXN_ENTRY_SIZE:
        whole = len(data) - len(data) % TXN_ENTRY_SIZE
        findings.add(
            "txnindex.size",
            WARNING,
            f"{len(data)} bytes is not a multiple of the {TXN_ENTRY_SIZE}-byte "
            f"entry: Kafka ignores the {len(data) - whole} bytes of a partial entry",
            path,
            whole,
        )
    try:
        txn = TransactionIndex.from_bytes(data, base, file=path)
    except KafkaLogError as err:
        findings.add_error("txnindex.parse", ERROR, err, path)
        return None
    findings.counts["txn_index_entries"] += len(txn.entries)
    try:
        txn.sanity_check()
    except KafkaLogError as err:
        findings.add_error(
            "txnindex.sanity", ERROR, err, path, "Kafka's sanity check fails, so it recovers the segment on load: "
        )
    return txn


def mismatch_message(what: str, found: list, built: list, interval: int) -> str:
    """The `index.mismatch` / `timeindex.mismatch` message: where `found` first differs from `built`."""
    for i, (a, b) in enumerate(zip(found, built)):
        if a != b:
            detail = f"entry {i} is {tuple(a)}, recovery builds {tuple(b)}"
            break
    else:
        detail = f"{len(found)} entries, recovery builds {len(built)}"
    return (
        f"{what} answers lookups correctly but is not what segment recovery builds with "
        f"index.interval.bytes={interval} ({detail}); Kafka's cleaner and append path write coarser entries"
    )


# -- against the .log, streaming ---------------------------------------------------------------------


class OffsetIndexCheck:
    """Lookup consistency of each entry (o, p): p is the start of a batch, every batch before p has
    lastOffset < o, and o is not above the segment's last offset. A lookup of offset x takes the
    entry with the greatest o <= x and reads batches forward from p, so an entry that breaks these
    sends it to the wrong place."""

    def __init__(self, findings: Findings, index: OffsetIndex):
        self.findings, self.index = findings, index
        self.by_position = _order(index.entries, lambda e: e.position)
        self.j = 0
        self.bad: set[int] = set()
        self.consistent = True

    def _bad(self, i: int, message: str) -> None:
        self.consistent = False
        self.bad.add(i)
        e = self.index.entries[i]
        self.findings.add(
            "index.entry",
            ERROR,
            f"entry {i} (offset {e.offset}, position {e.position}) {message}",
            self.index.file,
            i * _OFFSET_ENTRY_SIZE,
            e.offset,
        )

    def on_batch(self, pos: int, last_before: int | None) -> None:
        """The batch at byte `pos`; `last_before` is the highest last offset of the batches before it."""
        entries, order = self.index.entries, self.by_position
        while self.j < len(order) and entries[order[self.j]].position < pos:
            self._bad(
                order[self.j], "does not point at the start of a batch: a lookup would read from the middle of a batch"
            )
            self.j += 1
        while self.j < len(order) and entries[order[self.j]].position == pos:
            i = order[self.j]
            if last_before is not None and last_before >= entries[i].offset:
                self._bad(
                    i,
                    f"points at a batch after one whose last offset {last_before} is not below the entry's "
                    "offset: lookups of the offsets between would skip that data",
                )
            self.j += 1

    def finish(self, end_position: int, seg_last: int | None) -> None:
        entries, order = self.index.entries, self.by_position
        for i in order[self.j :]:
            self._bad(i, f"points at or after the end of the last whole batch (byte {end_position})")
        for i, entry in enumerate(entries):
            if i not in self.bad and (seg_last is None or entry.offset > seg_last):
                self._bad(i, f"is above the segment's last offset {seg_last}")


class TimeIndexCheck:
    """Each entry (T, o): T is the max timestamp of the batches up to o (and so at most the
    segment's max), o is in the segment; an inactive segment's index ends with an entry for the
    segment's max timestamp, which Kafka takes as the segment's largest timestamp."""

    def __init__(self, findings: Findings, index: TimeIndex):
        self.findings, self.index = findings, index
        self.by_offset = _order(index.entries, lambda e: e.offset)
        self.j = 0
        self.consistent = True

    def _bad(self, i: int, message: str, check: str = "timeindex.entry", severity: str = ERROR) -> None:
        self.consistent = False
        e = self.index.entries[i]
        self.findings.add(
            check,
            severity,
            f"entry {i} (timestamp {e.timestamp}, offset {e.offset}) {message}",
            self.index.file,
            i * _TIME_ENTRY_SIZE,
            e.offset,
        )

    def on_batch(self, first: int, last: int, max_before: int, max_after: int) -> None:
        """The batch [first, last]; `max_before` / `max_after`: the max timestamp before / with it."""
        entries, order = self.index.entries, self.by_offset
        while self.j < len(order) and entries[order[self.j]].offset < first:
            self._check(order[self.j], max_before, max_before)
            self.j += 1
        while self.j < len(order) and entries[order[self.j]].offset <= last:
            i = order[self.j]
            if entries[i].offset == last:
                self._check(i, max_after, max_after)
            else:  # an exact record offset inside the batch (older brokers)
                self._check(i, max_before, max_after)
            self.j += 1

    def _check(self, i: int, low: int, high: int) -> None:
        t = self.index.entries[i].timestamp
        if low <= t <= high and t >= 0:
            return
        expected = f"{low}" if low == high else f"in [{low}, {high}]"
        beyond = " (it exceeds every timestamp up to that offset)" if t > high else ""
        self._bad(i, f"does not hold the max timestamp up to its offset, {expected}{beyond}")

    def finish(self, seg_last: int | None, seg_max: int, final: bool) -> None:
        entries, order = self.index.entries, self.by_offset
        for i in order[self.j :]:
            beyond = f" and exceeds the segment's max timestamp {seg_max}" if entries[i].timestamp > seg_max else ""
            self._bad(i, f"is above the segment's last offset {seg_last}{beyond}")
        if final and seg_max >= 0 and (not entries or entries[-1].timestamp != seg_max):
            self.consistent = False  # incomplete: no mismatch info on top
            last = f"ends with timestamp {entries[-1].timestamp}" if entries else "is empty"
            self.findings.add(
                "timeindex.final_entry",
                WARNING,
                f"the inactive segment's time index {last}, not with the segment's max timestamp "
                f"{seg_max}: Kafka takes a segment's largest timestamp from this entry (time "
                "retention, compaction lag)",
                self.index.file,
                len(entries) * _TIME_ENTRY_SIZE if entries else 0,
                None,
            )


class TxnIndexCheck:
    """The `.txnindex` against the segment's transaction markers and a replay of producer state."""

    def __init__(
        self, findings: Findings, index: TransactionIndex | None, path: str, exact: bool, replay_complete: bool
    ):
        self.findings, self.index, self.path = findings, index, path
        self.exact = exact  # not compacted: entries must equal what the replay computes
        self.replay_complete = replay_complete
        self.by_last = _order(index.entries if index is not None else [], lambda e: e.last_offset)
        self.j = 0

    def _bad(self, i: int, message: str) -> None:
        e = (self.index.entries if self.index is not None else [])[i]
        self.findings.add(
            "txnindex.entry", ERROR, f"entry {i} {tuple(e)} {message}", self.path, i * TXN_ENTRY_SIZE, e.last_offset
        )

    def on_marker(
        self, ctl, producer_id: int, expected: AbortedTxn | None, empty: bool, pos: int, log_path: str
    ) -> None:
        """`expected`: the entry the replay computes for an ABORT; `empty`: the replay knows no data of
        the marker's transaction (with an incomplete replay, data below the first segment may exist)."""
        entries = self.index.entries if self.index is not None else []
        while self.j < len(self.by_last) and entries[self.by_last[self.j]].last_offset < ctl.offset:
            self._no_marker(self.by_last[self.j])
            self.j += 1
        found = False
        while self.j < len(self.by_last) and entries[self.by_last[self.j]].last_offset == ctl.offset:
            i = self.by_last[self.j]
            found = True
            self.j += 1
            self._check_entry(i, entries[i], ctl, producer_id, expected, empty)
        if not found and self.exact and ctl.type == ControlType.ABORT and not empty:
            self.findings.add(
                "txnindex.missing_entry",
                ERROR,
                f"the ABORT marker of producer {producer_id} at offset {ctl.offset} ({log_path}, byte "
                f"{pos}) has no .txnindex entry: READ_COMMITTED consumers would read the aborted data",
                self.path,
                None,
                ctl.offset,
            )

    def _check_entry(
        self, i: int, e: AbortedTxn, ctl, producer_id: int, expected: AbortedTxn | None, empty: bool
    ) -> None:
        """Entry `i`, whose lastOffset is the offset of the marker `ctl`."""
        if ctl.type != ControlType.ABORT:
            self._bad(i, f"names offset {ctl.offset}, which holds a {ctl.type.name} marker, not an ABORT")
        elif e.producer_id != producer_id:
            self._bad(
                i, f"names producer {e.producer_id}, but the ABORT marker at {ctl.offset} is producer {producer_id}'s"
            )
        elif e.first_offset > e.last_offset:
            self._bad(i, f"has firstOffset {e.first_offset} above its lastOffset")
        elif self.exact and self.replay_complete and empty:
            self._bad(
                i,
                "is for a transaction without data: Kafka indexes no aborted transaction that wrote "
                "nothing (ProducerAppendInfo.appendEndTxnMarker completes none)",
            )
        elif (
            self.exact
            and self.replay_complete
            and expected is not None
            and (e.first_offset != expected.first_offset or e.last_stable_offset != expected.last_stable_offset)
        ):
            self._bad(
                i,
                f"differs from the replay of producer state: firstOffset {expected.first_offset}, "
                f"lastStableOffset {expected.last_stable_offset}",
            )

    def _no_marker(self, i: int) -> None:
        entries = self.index.entries if self.index is not None else []
        self._bad(i, f"has no ABORT marker at its lastOffset {entries[i].last_offset} in this segment")

    def finish(self) -> None:
        for i in self.by_last[self.j :]:
            self._no_marker(i)


def _order(entries: list, key) -> Sequence[int]:
    """Entry numbers in `key` order: a range (no memory) when the file is already in order, as it is
    unless sanity checks fail."""
    if all(key(entries[i - 1]) <= key(entries[i]) for i in range(1, len(entries))):
        return range(len(entries))
    return sorted(range(len(entries)), key=lambda i: (key(entries[i]), i))
