"""The output segments of a rewrite (a compaction, a purge) as the driver handles them: what each
replaces and how its batches are rewritten (`OutputSegment`), what writing it wrote (`OutputStats`),
the check before anything is staged that the swap may replace its sources (`ensure_replaceable`),
Kafka's swap protocol that puts them in place (`swap_in`), and the staged files removed when a step
fails (`remove_outputs`). The writing itself runs in executor tasks (spark/rewrite.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from ..errors import KafkaLogError
from .fs import LogFileSystem
from .logdir import LogDir
from .naming import segment_file_name
from .rewrite import CLEANED, remove_staged
from .swap import SEGMENT_KINDS, FaultHook, replace_in_partitions


@dataclass(frozen=True)
class OutputSegment:
    """One output segment: the source segments it replaces, and how its batches are rewritten."""

    topic: str
    partition: int
    bases: tuple  # source segment base offsets, ascending; the output keeps the first
    delete_horizon_ms: int  # the horizon given to batches that need one (now + delete.retention.ms)
    index_interval_bytes: int
    aborted_txns: tuple = ()  # AbortedTxn entries that stay in .txnindex
    nbytes: int = 0  # the sources' bytes: what packs output segments into tasks
    legacy_as_v2: bool = False  # write legacy (v0/v1) batches as v2, as Kafka 4.x's cleaner does
    copy: int = 0  # which of the rewrite's log dirs holds the partition (a purge rewrites several copies)
    # the sources' files as the plan listed them, (base offset, {suffix: FileEntry}, next base offset)
    # each: the task then opens them without listing the partition (empty: it lists it)
    sources: tuple = ()
    hash_source: bool = False  # report the SHA-256 of its one source `.log`, hashed as it is rewritten

    @property
    def base_offset(self) -> int:
        return self.bases[0]


@dataclass(frozen=True)
class OutputStats:
    """What one rewrite task wrote: a row of the per-segment report."""

    topic: str
    partition: int
    base_offset: int
    source_segments: int
    records_in: int
    records_out: int
    bytes_in: int
    bytes_out: int
    batches_rewritten: int
    horizons_set: int
    copy: int = 0  # the output's log dir among the rewrite's (OutputSegment.copy)
    source_sha256: str | None = None  # with OutputSegment.hash_source: its source `.log`'s, as read

    def to_dict(self) -> dict:
        """The report's row: `copy`, an index into the run's own list of log dirs, and the source's
        hash (the evidence's) are left to the caller."""
        row = asdict(self)
        del row["copy"], row["source_sha256"]
        return row


def roots_of(log_dir: str | Sequence[str]) -> list[str]:
    """The log dirs of a rewrite: one path, or the several its outputs' `copy` numbers index."""
    return [log_dir] if isinstance(log_dir, str) else list(log_dir)


def remove_outputs(log_dir: str | Sequence[str], outputs: Sequence[OutputSegment]) -> None:
    """Delete every file the rewrite tasks staged (what a step between the rewrite and the swap
    calls when it fails too). A file that cannot be deleted stays for the
    next run, whose recovery deletes `.cleaned` files first; the error that failed the step is
    the one raised."""
    located = [LogFileSystem.for_path(root) for root in roots_of(log_dir)]
    for o in outputs:
        fs, root = located[o.copy]
        try:
            remove_staged(fs, fs.join(root, f"{o.topic}-{o.partition}"), o.base_offset, CLEANED)
        except (OSError, KafkaLogError):
            continue


def ensure_replaceable(opened: LogDir, outputs: Sequence[OutputSegment]) -> None:
    """Before anything is staged: refuse (FileAccessError, naming it) a directory the outputs are
    staged in, or a file their swap renames or deletes, that the system will not let change (a
    read-only filesystem, no permission, an immutable file), rather than fail half way through a swap."""
    fs = opened.fs
    for o in outputs:
        path = opened.partition_paths[o.topic, o.partition]
        fs.ensure_writable(path)
        for base in o.bases:
            for kind in (*SEGMENT_KINDS, ".snapshot"):
                fs.ensure_writable(fs.join(path, segment_file_name(base, kind)))


def swap_in(opened: LogDir, outputs: Sequence[OutputSegment], fault: FaultHook | None = None) -> None:
    """Step 6, on the driver: per partition, Kafka's swap protocol replaces the source segments
    with the `.cleaned` outputs; producer snapshots of segments merged away are deleted."""
    replacements: dict = {}
    for o in outputs:
        written, replaced = replacements.setdefault(opened.partition_paths[o.topic, o.partition], ([], []))
        written.append(o.base_offset)
        replaced.extend(o.bases)
    replace_in_partitions(opened.fs, replacements, **({} if fault is None else {"fault": fault}))
