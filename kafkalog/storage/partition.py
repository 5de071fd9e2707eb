"""A partition directory `<topic>-<partition>`: its segments, snapshots and per-partition files."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import LogDirError
from .fs import FileEntry, LogFileSystem
from .naming import (
    LEADER_EPOCH_CHECKPOINT,
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
        for entry in fs.list_dir(path) if entries is None else entries:
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

    def read_file(self, name: str) -> bytes | None:
        entry = self.files.get(name)
        return None if entry is None else self.fs.read_bytes(entry.path)
