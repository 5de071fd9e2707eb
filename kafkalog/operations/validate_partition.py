"""`kafkalog validate`'s checks of one partition directory: its listing (leftovers of an interrupted
swap or delete, index files without a `.log`), its own files (leader-epoch-checkpoint,
partition.metadata, producer snapshots), then its segments in order (`validate_segment`), sharing
one replay of producer state (`validate_replay`). What a partition's checks need of its log
directory (the checkpoint files) is a `DirContext`.

Compacted partitions are those with an entry in the log dir's `cleaner-offset-checkpoint`, unless
`compacted` says otherwise for all of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import KafkaLogError, UnreadableFileError
from ..rules.partition_state import loaded_log_start
from ..storage.checkpoint import (
    EpochEntry,
    parse_leader_epoch_checkpoint,
    parse_offset_checkpoint,
    parse_partition_metadata,
)
from ..storage.fs import FileEntry, LogFileSystem
from ..storage.index import DEFAULT_INDEX_INTERVAL_BYTES
from ..storage.naming import (
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    OFFSET_CHECKPOINT_FILES,
    PARTITION_METADATA,
    illegal_partition_dir_reason,
    is_kraft_metadata,
)
from ..storage.partition import Partition
from ..storage.producer_state import ProducerStateManager
from ..storage.snapshot import ProducerSnapshot
from ..storage.swap import check_swaps
from .validate_kraft import check_kraft
from .validate_replay import ReplayState, compare_snapshots, finish_epochs
from .validate_report import ERROR, INFO, WARNING, Findings
from .validate_segment import SegmentChecks, SegmentPlan


@dataclass
class DirContext:
    """What a partition's checks know about its log dir: its offset checkpoint files."""

    checkpoints: dict[str, dict] = field(default_factory=dict)  # file name -> {(topic, partition): offset}

    @classmethod
    def of_parent(cls, fs: LogFileSystem, partition_path: str) -> DirContext:
        """For a partition directory given alone: its parent's checkpoints, read quietly (the parent
        is not being validated, so its files are context only)."""
        parent = partition_path.rstrip("/").rsplit("/", 1)[0] if "/" in partition_path else "."
        ctx = cls()
        for name in OFFSET_CHECKPOINT_FILES:
            path = fs.join(parent, name)
            try:
                if fs.exists(path):
                    ctx.checkpoints[name] = parse_offset_checkpoint(fs.read_bytes(path).decode("utf-8", "replace"))
            except (KafkaLogError, OSError):
                pass
        return ctx

    def get(self, name: str, topic: str, partition: int) -> int | None:
        return self.checkpoints.get(name, {}).get((topic, partition))


@dataclass
class PartitionResult:
    """The offsets the partition's log spans, which the log dir's checkpoints must lie within."""

    log_start: int | None = None
    log_end: int | None = None


@dataclass
class _EpochFile:
    """The partition's leader-epoch-checkpoint: its entries (None: absent or refused), path and text."""

    entries: list[EpochEntry] | None = None
    path: str | None = None
    text: str = ""


class PartitionChecks:
    """The checks of one partition directory. `compacted` forces (True/False) instead of the log
    dir's cleaner-offset-checkpoint; `index_interval_bytes` is one value or topic -> value."""

    def __init__(
        self,
        findings: Findings,
        segments: SegmentChecks,
        *,
        compacted: bool | None,
        index_interval_bytes: int | Mapping[str, int] = DEFAULT_INDEX_INTERVAL_BYTES,
    ):
        self.findings = findings
        self.segments = segments
        self.compacted = compacted
        self.intervals = index_interval_bytes

    def interval(self, topic: str | None) -> int:
        """The topic's index.interval.bytes (Kafka's default for a topic not in a mapping)."""
        if isinstance(self.intervals, Mapping):
            return (
                self.intervals.get(topic, DEFAULT_INDEX_INTERVAL_BYTES)
                if topic is not None
                else DEFAULT_INDEX_INTERVAL_BYTES
            )
        return self.intervals

    def check(
        self, fs: LogFileSystem, path: str, ctx: DirContext, entries: list[FileEntry] | None = None
    ) -> PartitionResult | None:
        """Check the partition directory at `path` (`entries`: its listing, when the caller listed it
        already); None when it cannot be listed."""
        reason = illegal_partition_dir_reason(fs.name(path))
        if reason is not None:
            self.findings.add(
                "partition.illegal_name",
                ERROR,
                f"not a partition directory Kafka could have made: "
                f"{reason}; kafkalog's rewriting commands refuse this log directory",
                path,
            )
        part = self._open(fs, path, entries)
        if part is None:
            return None
        self.findings.counts["partitions"] += 1
        self._check_listing(part, path)
        epochs = self._read_leader_epochs(part)
        self._check_partition_metadata(part)
        snapshots = self._read_snapshots(fs, part)
        state, compacted = self._start_replay(part, ctx, snapshots, epochs)
        log_end = self._check_segments(part, state, compacted)
        # the end of the log: what remains to compare, and the offsets everything must lie within
        result = PartitionResult()
        if part.segments:
            result.log_start = state.log_start
            result.log_end = log_end
            compare_snapshots(self.findings, state, None, self.segments.deep)
            self._check_snapshot_ranges(snapshots, result)
            finish_epochs(self.findings, state, result.log_end)
        if is_kraft_metadata(part.topic):
            check_kraft(self.findings, part, result.log_end, epochs.entries)
        return result

    def check_segments(self, part: Partition) -> None:
        """Segments that are not a partition directory's (a remote partition of tiered storage, its
        files named by segment id): each segment and its indexes, in offset order, with one replay of
        producer state; no checkpoint files, snapshots or leader epochs beside them."""
        self.findings.counts["partitions"] += 1
        state, compacted = self._start_replay(part, DirContext(), [], _EpochFile())
        self._check_segments(part, state, compacted)

    def _open(self, fs: LogFileSystem, path: str, entries: list[FileEntry] | None) -> Partition | None:
        try:
            return Partition.open(fs, path, entries)
        except KafkaLogError as err:
            self.findings.add_error("io.read", ERROR, err, path)
        except OSError as err:
            self.findings.add("io.read", ERROR, f"cannot list the partition directory: {err}", path)
        return None

    def _check_listing(self, part: Partition, path: str) -> None:
        for file, reason in sorted(part.misnamed.items()):
            self.findings.add(
                "partition.file_name",
                ERROR,
                f"not a segment file name Kafka writes: {reason}; a broker opens a segment's files by "
                "their 20-digit names, and kafkalog does not rewrite this partition",
                file,
            )
        for file, kind in sorted(part.irregular.items()):
            self.findings.add(
                "partition.not_regular",
                ERROR,
                f"{kind}, not a regular file, holds a segment file's name: Kafka's loader skips it, and "
                "kafkalog neither reads it nor rewrites this partition",
                file,
            )
        damaged = self._check_swaps(part, path)
        for entry in part.in_flight:
            if entry.path == damaged:
                continue
            self.findings.add(
                "partition.leftover",
                WARNING,
                "left by an interrupted cleaner swap, segment split or asynchronous delete; Kafka's "
                "loader completes or rolls back the swap (spec §9.3)",
                entry.path,
            )
        for entry in part.orphan_indexes:
            self.findings.add(
                "partition.orphan_index", WARNING, "index file without a .log; Kafka deletes it on load", entry.path
            )
        if not part.segments:
            self.findings.add(
                "partition.empty", INFO, "no .log segment; Kafka creates an empty one at the log start offset", path
            )

    def _check_swaps(self, part: Partition, path: str) -> str | None:
        """A leftover `.swap` that kafkalog's recovery refuses (`swap.check_swaps`) is an ERROR saying
        what a broker starting on the directory would do; returns the file it names."""
        if not any(e.name.endswith(".swap") for e in part.in_flight):
            return None
        try:
            check_swaps(part.fs, path)
        except UnreadableFileError as err:
            self.findings.add_error("io.read", ERROR, err, path)
        except KafkaLogError as err:
            self.findings.add_error("partition.leftover", ERROR, err, path)
            return err.file
        except OSError as err:
            self.findings.add("io.read", ERROR, f"cannot read the leftovers of an interrupted swap: {err}", path)
        return None

    def _read_leader_epochs(self, part: Partition) -> _EpochFile:
        epochs = _EpochFile()
        entry = part.files.get(LEADER_EPOCH_CHECKPOINT)
        if entry is None:
            return epochs
        epochs.path = entry.path
        self.findings.counts["checkpoint_files"] += 1
        try:
            epochs.text = part.fs.read_bytes(entry.path).decode("utf-8", "replace")
            epochs.entries = parse_leader_epoch_checkpoint(epochs.text, file=entry.path)
        except UnreadableFileError as err:
            self.findings.add_error("io.read", ERROR, err, entry.path)
        except KafkaLogError as err:
            self.findings.add_error("leader_epoch.parse", ERROR, err, entry.path)
        except OSError as err:
            self.findings.add("io.read", ERROR, f"cannot read: {err}", entry.path)
        return epochs

    def _check_partition_metadata(self, part: Partition) -> None:
        entry = part.files.get(PARTITION_METADATA)
        if entry is None:
            return
        self.findings.counts["checkpoint_files"] += 1
        try:
            parse_partition_metadata(part.fs.read_bytes(entry.path).decode("utf-8", "replace"), file=entry.path)
        except UnreadableFileError as err:
            self.findings.add_error("io.read", ERROR, err, entry.path)
        except KafkaLogError as err:
            self.findings.add_error("partition_metadata.parse", ERROR, err, entry.path)
        except OSError as err:
            self.findings.add("io.read", ERROR, f"cannot read: {err}", entry.path)

    def _read_snapshots(self, fs: LogFileSystem, part: Partition) -> list[tuple[FileEntry, ProducerSnapshot]]:
        """Every producer snapshot that parses (they are small), ascending offset."""
        out = []
        for offset, entry in sorted(part.snapshots.items()):
            self.findings.counts["snapshots"] += 1
            try:
                out.append((entry, ProducerSnapshot.from_bytes(fs.read_bytes(entry.path), offset, file=entry.path)))
            except UnreadableFileError as err:
                self.findings.add_error("io.read", ERROR, err, entry.path)
            except KafkaLogError as err:
                self.findings.add(
                    "snapshot.parse",
                    ERROR,
                    f"Kafka deletes this snapshot on load and falls back to an older one: {err.message}",
                    entry.path,
                    err.position,
                    offset,
                )
            except OSError as err:
                self.findings.add("io.read", ERROR, f"cannot read: {err}", entry.path)
        return out

    def _start_replay(
        self, part: Partition, ctx: DirContext, snapshots: list[tuple[FileEntry, ProducerSnapshot]], epochs: _EpochFile
    ) -> tuple[ReplayState, bool]:
        """The replay, seeded from the snapshot at the first segment's base offset when there is one
        (the later snapshots are compared with it), and whether the partition is compacted."""
        first_base = part.segments[0].base_offset if part.segments else None
        seed = next((s for e, s in snapshots if s.offset == first_base), None)
        if seed is not None:
            manager, complete = ProducerStateManager.from_snapshot(seed), True
        else:
            manager, complete = ProducerStateManager(first_base or 0), not first_base
        to_compare = [(e, s) for e, s in snapshots if seed is None or s.offset > seed.offset]
        state = ReplayState(manager, complete, to_compare, epochs.entries, epochs.path)
        state.epoch_text = epochs.text
        if first_base is not None:  # as the broker loads it; the log end offset is the scan's
            checkpointed = ctx.get(LOG_START_OFFSET_CHECKPOINT, part.topic, part.partition)
            state.log_start = loaded_log_start(checkpointed, first_base)
        compacted = self.compacted
        if compacted is None:
            compacted = ctx.get(CLEANER_OFFSET_CHECKPOINT, part.topic, part.partition) is not None
        state.compacted = compacted
        state.floor_default = (first_base or 0) - 1
        return state, compacted

    def _check_segments(self, part: Partition, state: ReplayState, compacted: bool) -> int | None:
        """Every segment in order; returns the log end offset (None without segments)."""
        log_end = None
        for i, segment in enumerate(part.segments):
            nxt = part.segments[i + 1].base_offset if i + 1 < len(part.segments) else None
            plan = SegmentPlan(
                segment,
                segment.base_offset,
                nxt,
                nxt is None,
                standalone=False,
                index_interval_bytes=self.interval(part.topic),
            )
            try:
                log_end = self.segments.check(plan, state, exact_txn=not compacted)
            except UnreadableFileError as err:
                self.findings.add_error("io.read", ERROR, err, segment.log_path)
            except OSError as err:
                self.findings.add("io.read", ERROR, f"cannot read the segment: {err}", segment.log_path)
        return log_end

    def _check_snapshot_ranges(
        self, snapshots: list[tuple[FileEntry, ProducerSnapshot]], result: PartitionResult
    ) -> None:
        for entry, snap in snapshots:
            if result.log_end is not None and snap.offset > result.log_end:
                self.findings.add(
                    "snapshot.range",
                    ERROR,
                    f"snapshot offset {snap.offset} is above the log end "
                    f"offset {result.log_end}: the log has lost data the broker had",
                    entry.path,
                    offset=snap.offset,
                )
            elif result.log_start is not None and snap.offset < result.log_start:
                self.findings.add(
                    "snapshot.range",
                    WARNING,
                    f"snapshot offset {snap.offset} is below the log start "
                    f"offset {result.log_start}: stale, Kafka deletes it on load",
                    entry.path,
                    offset=snap.offset,
                )
