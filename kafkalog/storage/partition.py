"""A partition directory `<topic>-<partition>`: its segments, snapshots and per-partition files."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import KafkaLogError, LogDirError
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
    irregular: dict[str, str] = field(default_factory=dict)  # path -> what holds a segment file's name
    listing: list[FileEntry] = field(default_factory=list)  # the directory's entries, as opened

    @staticmethod
    def list_entries(fs: LogFileSystem, path: str) -> list[FileEntry] | None:
        """A partition directory's entries, as `open` takes them; None when it cannot be listed
        (`open` then lists it again and says why)."""
        try:
            return fs.list_dir(path)
        except OSError:
            return None

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
            if not entry.is_file:
                if parse_segment_file_name(entry.name) is not None:
                    part.irregular[entry.path] = fs.kind(entry.path)
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
        their 20-digit names, would not read what the name says. Also refuse one where such a name,
        or a leftover's, is not a regular file (`ensure_regular_files`). The commands that rewrite a
        partition call this before anything else (before an interrupted swap is recovered)."""
        self.ensure_regular_files()
        if not self.misnamed:
            return
        path, reason, others = first_of(self.misnamed, "file", "files")
        raise LogDirError(
            f"not a segment file name Kafka writes: {reason}{others}. kafkalog does not rewrite a "
            "partition whose file names it cannot trust; rename or remove the file",
            file=path,
        )

    def ensure_regular_files(self) -> None:
        """Refuse a partition where a segment, index, snapshot or leftover (`.cleaned`, `.swap`,
        `.deleted`) name is held by anything but a regular file: a directory, a FIFO, a socket, a
        device, a symbolic link to one. Kafka's loader skips such an entry (File.isFile), so the
        segment it names is not the log a broker would load, and a swap would rename it and then
        fail to delete it, half done. kafkalog does not rewrite or recover such a partition."""
        if not self.irregular:
            return
        path, kind, others = first_of(self.irregular, "entry", "entries")
        raise LogDirError(
            f"{kind} holds the name of a segment file{others}; only regular files are segments, indexes and "
            "leftovers of a swap. kafkalog does not rewrite this partition; move the entry out of it",
            file=path,
        )

    def ensure_settled(self) -> None:
        """Refuse a partition that a rewrite left half swapped, or where a segment file's name is not
        a regular file (`ensure_regular_files`): its live files may not be the log."""
        self.ensure_regular_files()
        if self.in_flight:
            names = ", ".join(sorted(e.name for e in self.in_flight)[:5])
            raise LogDirError(
                f"an interrupted rewrite left {len(self.in_flight)} file(s) ({names}); a kafkalog "
                f"rewrite (or a broker start) recovers it first, `kafkalog validate` reports it",
                file=self.path,
            )

    def ensure_segments_apart(self) -> None:
        """Refuse a partition whose segments overlap: a segment whose first batch starts below its
        base offset, or whose last offset reaches the next segment's base offset (a segment copied
        under another name holds both). Kafka's loader reads neither on a clean start; it counts such
        a segment's bytes in the log's size, so retention.bytes would delete a segment more than the
        log holds, and segment recovery fails on it (a batch below the base offset cannot be
        indexed, and the split Kafka then tries refuses a segment that does not overflow). A tail
        that cannot be read is left to the commands that read it."""
        for segment in self.segments:
            try:
                first, following = segment.first_offset(), segment.next_base_offset
                last = segment.last_offset() if following is not None else None
            except KafkaLogError:
                continue
            if first is not None and first < segment.base_offset:
                why, at = f"its first batch starts at offset {first}, below the segment's base offset", first
            elif last is not None and following is not None and last >= following:
                why, at = f"it holds offsets up to {last}, at or above the next segment's base offset {following}", last
            else:
                continue
            raise LogDirError(
                f"{why}: the segments overlap (a segment copied under another name?), and Kafka would "
                "count the same records twice; kafkalog does not change this partition. `kafkalog validate` "
                "shows the offsets of each segment",
                file=segment.log_path,
                offset=at,
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


def first_of(found: dict[str, str], one: str, many: str) -> tuple[str, str, str]:
    """The first path of `found` (path -> why it is refused), its reason, and what a refusal naming
    it says of the others: " (2 more such files; `kafkalog validate` lists them)", or ""."""
    path, reason = min(found.items())
    more = len(found) - 1
    return (
        path,
        reason,
        f" ({more} more such {one if more == 1 else many}; `kafkalog validate` lists them)" if more else "",
    )


def _misnamed(entries: list[FileEntry]) -> dict[str, str]:
    """The segment, index and snapshot files (in flight or not) whose name is not the one Kafka
    gives their base offset, with the reason; Kafka's parser reads any decimal offset."""
    names = {entry.name for entry in entries if entry.is_file}
    misnamed = {}
    for entry in entries:
        parsed = parse_segment_file_name(entry.name) if entry.is_file else None
        if parsed is None or entry.name == str(parsed):
            continue
        digits = len(entry.name) - len(parsed.kind) - len(parsed.state or "")
        clash = f"; {parsed} names the same base offset" if str(parsed) in names else ""
        misnamed[entry.path] = f"its base offset is written in {digits} digits, not {OFFSET_DIGITS}{clash}"
    return misnamed
