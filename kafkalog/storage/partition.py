"""A partition directory `<topic>-<partition>`: its segments, snapshots and per-partition files."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import LogDirError
from ..rules.aborted_txn import AbortedTxn
from .fs import FileEntry, LogFileSystem
from .naming import (
    LEADER_EPOCH_CHECKPOINT,
    OFFSET_DIGITS,
    PARTITION_METADATA,
    QUORUM_STATE,
    parse_kraft_snapshot_name,
    parse_partition_dir_name,
    parse_segment_file_name,
)
from .segment import LogSegment


@dataclass
class Partition:
    """What a partition directory holds, listed without reading any segment body."""

    fs: LogFileSystem
    path: str
    topic: str
    partition: int
    segments: list[LogSegment] = field(default_factory=list)
    snapshots: dict[int, FileEntry] = field(default_factory=dict)
    in_flight: list[FileEntry] = field(default_factory=list)  # .cleaned, .swap, .deleted leftovers
    orphan_indexes: list[FileEntry] = field(default_factory=list)  # index files without a .log
    files: dict[str, FileEntry] = field(default_factory=dict)  # leader-epoch-checkpoint, partition.metadata
    kraft_snapshots: dict[tuple[int, int], FileEntry] = field(default_factory=dict)  # (end offset, epoch)
    misnamed: dict[str, str] = field(default_factory=dict)  # path -> why its name is not Kafka's
    listing: list[FileEntry] = field(default_factory=list)  # the directory's entries, as opened

    @classmethod
    def open(cls, fs: LogFileSystem, path: str, entries: list[FileEntry] | None = None) -> Partition:
        """The partition directory at `path`, from its listing (`entries`, when the caller listed it
        already)."""
        name = fs.name(path)
        parsed = parse_partition_dir_name(name)
        if parsed is None:
            raise LogDirError(f"{name!r} is not a partition directory name (expected <topic>-<partition>)", file=path)
        part = cls(fs, path, parsed[0], parsed[1])
        segments: dict[int, LogSegment] = {}
        indexes: list[tuple[int, FileEntry, str]] = []
        entries = fs.list_dir(path) if entries is None else entries
        part.listing = entries
        part.misnamed = _misnamed(entries)
        for entry in entries:
            if entry.is_dir:
                continue
            if entry.name in (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA, QUORUM_STATE):
                part.files[entry.name] = entry
                continue
            snapshot_id = parse_kraft_snapshot_name(entry.name)
            if snapshot_id is not None:
                part.kraft_snapshots[snapshot_id] = entry
                continue
            seg_name = parse_segment_file_name(entry.name)
            if seg_name is None:
                continue
            if seg_name.state:
                part.in_flight.append(entry)
            elif seg_name.kind == ".snapshot":
                part.snapshots[seg_name.base_offset] = entry
            elif seg_name.kind == ".log":
                segments.setdefault(
                    seg_name.base_offset,
                    LogSegment(fs, path, seg_name.base_offset, topic=part.topic, partition=part.partition),
                ).files[".log"] = entry
            else:
                indexes.append((seg_name.base_offset, entry, seg_name.kind))
        for base, entry, kind in indexes:
            if base in segments:
                segments[base].files[kind] = entry
            else:
                part.orphan_indexes.append(entry)
        part.segments = [segments[b] for b in sorted(segments)]
        for segment, following in zip(part.segments, part.segments[1:]):
            segment.next_base_offset = following.base_offset
        return part

    def ensure_well_named(self) -> None:
        """Refuse a partition with a segment, index or snapshot file whose base offset is not written
        in Kafka's 20 digits (`94.log`, or `0000000000000000094.log` beside `00000000000000000094.log`):
        two files may then claim one base offset, and a broker, which opens a segment's files by
        their 20-digit names, would not read what the name says. The commands that rewrite a
        partition call this before anything else (before an interrupted swap is recovered)."""
        if not self.misnamed:
            return
        path, reason = min(self.misnamed.items())
        more = len(self.misnamed) - 1
        others = f" ({more} more such file{'s' if more > 1 else ''}; `kafkalog validate` lists them)" if more else ""
        raise LogDirError(
            f"not a segment file name Kafka writes: {reason}{others}. kafkalog does not rewrite a "
            "partition whose file names it cannot trust; rename or remove the file",
            file=path,
        )

    def ensure_settled(self) -> None:
        """Refuse a partition that a rewrite left half swapped: its live files may not be the log."""
        if self.in_flight:
            names = ", ".join(sorted(e.name for e in self.in_flight)[:5])
            raise LogDirError(
                f"an interrupted rewrite left {len(self.in_flight)} file(s) ({names}); a kafkalog "
                f"rewrite (or a broker start) recovers it first, `kafkalog validate` reports it",
                file=self.path,
            )

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def active_segment(self) -> LogSegment | None:
        return self.segments[-1] if self.segments else None

    def segment_for(self, offset: int) -> LogSegment | None:
        """The segment whose range holds `offset` (the last one with base offset <= offset)."""
        found = None
        for segment in self.segments:
            if segment.base_offset > offset:
                break
            found = segment
        return found

    def batches(self):
        """(segment file, batch) of every batch, in log order."""
        for segment in self.segments:
            for _, batch in segment.batches():
                yield segment.log_path, batch

    def aborted_txns(self) -> list[AbortedTxn]:
        """The aborted transactions of the whole log, from its segments' `.txnindex` files, in order
        (what a read_committed fetch skips; UnifiedLog.collectAbortedTransactions)."""
        return [txn for segment in self.segments for txn in segment.aborted_txns()]

    def read_file(self, name: str) -> bytes | None:
        entry = self.files.get(name)
        return None if entry is None else self.fs.read_bytes(entry.path)


def _misnamed(entries: list[FileEntry]) -> dict[str, str]:
    """The segment, index and snapshot files (in flight or not) whose name is not the one Kafka
    gives their base offset, with the reason; Kafka's parser reads any decimal offset."""
    names = {entry.name for entry in entries if not entry.is_dir}
    misnamed = {}
    for entry in entries:
        parsed = None if entry.is_dir else parse_segment_file_name(entry.name)
        if parsed is None or entry.name == str(parsed):
            continue
        digits = len(entry.name) - len(parsed.kind) - len(parsed.state or "")
        clash = f"; {parsed} names the same base offset" if str(parsed) in names else ""
        misnamed[entry.path] = f"its base offset is written in {digits} digits, not {OFFSET_DIGITS}{clash}"
    return misnamed
