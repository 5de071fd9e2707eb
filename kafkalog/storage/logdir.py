"""A Kafka `log.dirs` directory: its partition directories and broker checkpoint files."""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypedDict

from ..config import did_you_mean
from ..config import parse_java_properties as parse_properties  # the one reader of .properties files
from ..errors import LogDirError
from .checkpoint import format_offset_checkpoint, parse_offset_checkpoint
from .fs import FileEntry, LogFileSystem, refused, unreadable
from .meta_properties import META_PROPERTIES, MetaProperties, read_meta_properties
from .naming import (
    LOG_START_OFFSET_CHECKPOINT,
    OFFSET_CHECKPOINT_FILES,
    REPLICATION_OFFSET_CHECKPOINT,
    illegal_partition_dir_reason,
    parse_partition_dir_name,
    parse_segment_file_name,
)
from .partition import Partition, first_of

LOCK_FILE = ".lock"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
# the files a log directory holds beside its partition directories
LOG_DIR_FILES = OFFSET_CHECKPOINT_FILES + (META_PROPERTIES, CLEAN_SHUTDOWN)

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class DirListing:
    """A directory given as a log directory, listed once: the one place a log directory is listed
    (`LogDir.open` takes what Kafka could have made of it; validate and dump read every directory
    named like a partition's, and report or dump those Kafka could not have made too)."""

    entries: list[FileEntry]

    @classmethod
    def of(cls, fs: LogFileSystem, path: str) -> DirListing:
        return cls(fs.list_dir(path))

    @property
    def partition_dirs(self) -> list[tuple[FileEntry, TopicPartition]]:
        """The directories named `<topic>-<partition>`, whatever the name's topic, in name order."""
        return [(e, tp) for e in self.entries if e.is_dir and (tp := parse_partition_dir_name(e.name)) is not None]

    def holds_log_dir_files(self) -> bool:
        """Whether it holds what a log directory holds: partition directories, meta.properties,
        checkpoint files."""
        return bool(self.partition_dirs) or any(e.name in LOG_DIR_FILES for e in self.entries)


class CheckpointedOffsets(TypedDict):
    """One partition's checkpointed offsets (None: the checkpoint names none), as keywords of
    rules.partition_state."""

    log_start_checkpoint: int | None
    high_watermark_checkpoint: int | None


@dataclass(frozen=True)
class OffsetCheckpoints:
    """What a broker loading a log dir reads of its partitions' offsets: the checkpointed log start
    offsets (log-start-offset-checkpoint) and high watermarks (replication-offset-checkpoint).
    `of(tp)` is one partition's, as rules.partition_state takes them."""

    log_starts: Mapping[TopicPartition, int]
    high_watermarks: Mapping[TopicPartition, int]

    @classmethod
    def of_files(cls, checkpoints: Mapping[str, Mapping[TopicPartition, int]]) -> OffsetCheckpoints:
        """From checkpoint files already read: their names and entries (an absent file has none)."""
        return cls(checkpoints.get(LOG_START_OFFSET_CHECKPOINT, {}), checkpoints.get(REPLICATION_OFFSET_CHECKPOINT, {}))

    def of(self, tp: TopicPartition) -> CheckpointedOffsets:
        return {
            "log_start_checkpoint": self.log_starts.get(tp),
            "high_watermark_checkpoint": self.high_watermarks.get(tp),
        }


LOCKED_BY_ANOTHER_PROCESS = (
    "the log directory is locked by another process (a running broker or another "
    "kafkalog run); stop it before modifying the log"
)


@dataclass
class LogDir:
    """A log directory. Partition directories are listed eagerly, opened on demand.

    A directory named like a partition (`<topic>-<partition>`) that Kafka could not have made -- a
    topic name outside Kafka's rule (`[a-zA-Z0-9._-]`, at most 249 characters, not `.` or `..`) or
    a partition number with leading zeros -- is not one of `partition_paths`, so reading the other
    partitions works as before. It is listed in `illegal_dirs` (path -> reason), which
    `ensure_legal_partition_dirs` turns into a refusal for the commands that rewrite the directory;
    `kafkalog validate` reports it.

    A partition directory that is a symbolic link is read through it, as Kafka reads it, and is
    listed in `linked_dirs` (link -> the directory it leads to): an in-place rewrite would change
    that directory, wherever it lies, so `ensure_no_linked_partition_dirs` refuses one unless the
    caller follows links on purpose."""

    fs: LogFileSystem
    path: str
    partition_paths: dict[TopicPartition, str] = field(default_factory=dict)
    illegal_dirs: dict[str, str] = field(default_factory=dict)
    linked_dirs: dict[str, str] = field(default_factory=dict)
    given: str | None = None  # the path or URI it was opened by (None: `path`, a local path)
    listing: DirListing | None = field(default=None, repr=False, compare=False)  # its root's, from `open`

    @classmethod
    def open(cls, path_or_uri: str) -> LogDir:
        fs, path = LogFileSystem.for_path(path_or_uri)
        if not fs.is_dir(path):
            raise LogDirError("log directory does not exist or is not a directory", file=path)
        listing = DirListing.of(fs, path)
        log_dir = cls(fs, path, given=str(path_or_uri), listing=listing)
        for entry, parsed in listing.partition_dirs:
            reason = illegal_partition_dir_reason(entry.name)
            if reason is not None:
                log_dir.illegal_dirs[entry.path] = reason
            else:
                log_dir.partition_paths[parsed] = entry.path
                target = fs.link_target(entry.path)
                if target is not None:
                    log_dir.linked_dirs[entry.path] = target
        if not log_dir.partition_paths and not log_dir.illegal_dirs:
            _refuse_partition_dir(fs, path, listing.entries)
        return log_dir

    def ensure_legal_partition_dirs(self) -> None:
        """Refuse to rewrite a log directory that holds a partition directory Kafka could not have
        made (see the class docstring), whichever topics the rewrite is about: the rewriting
        commands call this before anything is written or copied. The LogDirError names the first
        such directory (by path) and counts the others."""
        if not self.illegal_dirs:
            return
        path, reason, others = first_of(self.illegal_dirs, "directory", "directories")
        raise LogDirError(
            f"not a partition directory Kafka could have made: {reason}{others}. kafkalog does not "
            "rewrite a log directory holding one; rename it or move it out first",
            file=path,
        )

    def linked_dir_notes(self) -> list[str]:
        """One line per partition directory that is a symbolic link, naming the link and its target."""
        links = sorted(self.linked_dirs.items())
        return [f"partition directory {link} is a symbolic link to {target}" for link, target in links]

    def ensure_no_linked_partition_dirs(self) -> None:
        """Refuse an in-place rewrite of a log directory with a partition directory that is a
        symbolic link (see the class docstring); the LogDirError names the first link and its
        target, and counts the others."""
        if not self.linked_dirs:
            return
        link, target = min(self.linked_dirs.items())
        more = len(self.linked_dirs) - 1
        others = f" ({more} more such link{'s' if more > 1 else ''}; `kafkalog plan` lists them)" if more else ""
        raise LogDirError(
            f"the partition directory is a symbolic link to {target}{others}, which an in-place run "
            "would rewrite there; pass --follow-symlinks to do so (a broker follows such links too), "
            "or write the result with --output",
            file=link,
        )

    @property
    def topic_partitions(self) -> list[TopicPartition]:
        return sorted(self.partition_paths)

    @property
    def topics(self) -> set[str]:
        return {topic for topic, _ in self.partition_paths}

    def check_topics(self, topics: Iterable[str] | None) -> None:
        """Refuse a topic the caller chose (`--topic`) that has no partition here: a run would do
        nothing for it. The error names the closest topic the log directory holds."""
        missing = sorted(set(topics or ()) - self.topics)
        if missing:
            held = did_you_mean(missing[0], self.topics) if self.topics else "; it holds no partitions"
            raise LogDirError(f"no partition of topic {missing[0]!r} in this log directory{held}", file=self.path)

    def partition(self, topic: str, partition: int) -> Partition:
        try:
            path = self.partition_paths[(topic, partition)]
        except KeyError:
            raise LogDirError(f"no partition directory {topic}-{partition}", file=self.path) from None
        try:
            return Partition.open(self.fs, path)
        except FileNotFoundError:  # a plan's listing, and the directory removed since (a broker, an operator)
            if self.fs.exists(path):
                raise
            raise LogDirError(
                "the partition directory is gone since the log dir was listed (a broker or another tool changed "
                "it): run again",
                file=path,
            ) from None

    def partitions(self, topics: set[str] | None = None):
        for topic, partition in self.topic_partitions:
            if topics is None or topic in topics:
                yield self.partition(topic, partition)

    # -- checkpoint files ----------------------------------------------------------------------
    def read_checkpoint(self, name: str) -> dict[TopicPartition, int]:
        """The entries of a broker checkpoint file; an absent file has none."""
        path = self.fs.join(self.path, name)
        if not self.fs.exists(path):
            return {}
        return parse_offset_checkpoint(self.fs.read_bytes(path).decode("utf-8", "replace"), file=path)

    def offset_checkpoints(self) -> OffsetCheckpoints:
        """The checkpoints of the partitions' log start offsets and high watermarks, read once."""
        return OffsetCheckpoints.of_files(
            {name: self.read_checkpoint(name) for name in (LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT)}
        )

    def write_checkpoint(self, name: str, entries: dict[TopicPartition, int]) -> None:
        """Rewrite a checkpoint atomically (temporary file, then rename), as Kafka does."""
        path = self.fs.join(self.path, name)
        self.fs.write_atomic(path, format_offset_checkpoint(entries).encode("utf-8"))

    def update_checkpoint(self, name: str, updates: dict[TopicPartition, int | None]) -> None:
        """Set (or with None, remove) some partitions' entries and keep the others."""
        entries = self.read_checkpoint(name)
        for tp, offset in updates.items():
            if offset is None:
                entries.pop(tp, None)
            else:
                entries[tp] = offset
        self.write_checkpoint(name, entries)

    @property
    def uri(self) -> str:
        """The log directory as `open` takes it again (a URI stays a URI)."""
        return self.given or self.path

    def ensure_unchanged(self, parts: Iterable[Partition], advice: str, topics: set[str] | None = None) -> None:
        """What this listing found is what is there: the partition directories (of `topics`, default all)
        and the files of `parts`, partitions it opened. Were a directory to come or go, or a planned
        partition's files to change (another process used the log dir since), a run from this listing
        would lose what it did not see. Refused (LogDirError, with `advice`: run again to list again)."""
        again = LogDir.open(self.uri)
        if _of(again.partition_paths, topics) != _of(self.partition_paths, topics):
            raise LogDirError(f"partition directories came or went since the plan: {advice}", file=self.path)
        for part in parts:
            if listing_signature(self.fs.list_dir(part.path)) != listing_signature(part.listing):
                raise LogDirError(f"the partition's files changed since the plan: {advice}", file=part.path)

    @cached_property
    def _meta_file(self) -> bytes | None:
        """meta.properties's bytes, read once a LogDir: kafkalog never writes it into a log
        directory it reads (None without the file)."""
        path = self.fs.join(self.path, META_PROPERTIES)
        return self.fs.read_bytes(path) if self.fs.exists(path) else None

    def meta_properties(self) -> dict[str, str]:
        """meta.properties's keys and values as they stand, unchecked ({} without the file)."""
        data = self._meta_file
        return {} if data is None else parse_properties(data.decode("utf-8", "replace"))

    def read_meta(self) -> MetaProperties | None:
        """meta.properties checked as Kafka reads it (None without the file); LogDirError when
        Kafka would refuse it (see kafkalog.storage.meta_properties)."""
        data = self._meta_file
        return None if data is None else read_meta_properties(data, file=self.fs.join(self.path, META_PROPERTIES))

    # -- the broker's lock ------------------------------------------------------------------------
    @property
    def lock_path(self) -> str:
        return self.fs.join(self.path, LOCK_FILE)

    def ensure_unlocked(self) -> None:
        """Refuse to modify a directory whose `.lock` another live process holds: a running broker
        (Java's FileChannel.tryLock takes a POSIX record lock, fcntl/lockf), another kafkalog run
        (`locked` takes both kinds) or a tool that took it with flock(2) (`flock(1)`, some wrappers).
        On Linux the two kinds do not see each other, so both are tested.

        An existing `.lock` that nobody holds is normal: a stopped broker leaves it behind. The lock
        this process holds through `locked()` is not a reason to refuse (and the test leaves it
        held). Non-local filesystems (object stores, HDFS) have no such lock: nothing is checked."""
        path = self.lock_path
        if not self.fs.is_local or not os.path.exists(path) or _held_here(path):
            return
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as err:
            raise LogDirError(f"cannot open the broker's lock file to test it: {err.strerror}", file=path) from None
        try:
            # shared locks need only read access, and conflict with any exclusive holder
            _try_locks(fd, path, fcntl.LOCK_SH, keep=False)
        finally:
            os.close(fd)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold `<log dir>/.lock` for the length of the block, as a running broker holds it: an
        exclusive POSIX record lock (what Kafka's FileChannel.tryLock takes, so a broker started
        meanwhile refuses the directory) and an exclusive flock(2) lock (what flock(1) and other
        tools take). The file is created when absent, as Kafka creates it, and is left in place.

        Refused with a LogDirError when another process holds either kind (a broker, another
        kafkalog run), and when this process already holds it: POSIX record locks belong to a
        process, so a second lock from the same process would be granted, and the first release
        would drop both; a nested or concurrent rewrite of one directory from one process is
        therefore refused. Both locks are released when the block ends, normally or by an
        exception, and die with the process. `ensure_unlocked` inside the block leaves them held.

        On non-local filesystems (object stores, HDFS) there is no lock to take: the block runs
        unguarded, and keeping brokers and other writers away is up to the caller."""
        if not self.fs.is_local:
            yield
            return
        path = self.lock_path
        key = os.path.realpath(path)
        with _HELD_GUARD:
            if key in _HELD:
                raise LogDirError(
                    "this process already holds the log directory's lock (a rewrite of it is under "
                    "way); one rewrite of a directory at a time",
                    file=path,
                )
            _HELD.add(key)
        try:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as err:
                raise LogDirError(f"cannot open the broker's lock file: {err.strerror}", file=path) from None
            try:
                _try_locks(fd, path, fcntl.LOCK_EX, keep=True)
                yield
            finally:
                os.close(fd)  # drops the record lock and the flock lock together
        finally:
            with _HELD_GUARD:
                _HELD.discard(key)


# The `.lock` files (real paths) this process holds through LogDir.locked.
_HELD: set[str] = set()
_HELD_GUARD = threading.Lock()


def _held_here(path: str) -> bool:
    with _HELD_GUARD:
        return os.path.realpath(path) in _HELD


def _try_locks(fd: int, path: str, kind: int, *, keep: bool) -> None:
    """Take a flock(2) lock and a POSIX record lock of `kind` (LOCK_SH, LOCK_EX) on `fd` without
    waiting; unless `keep`, release each at once (a probe). LogDirError when another process holds
    a conflicting lock, or when the filesystem cannot lock at all (then nobody can tell whether a
    broker uses the directory)."""
    for name, lock in (("flock", fcntl.flock), ("POSIX record", fcntl.lockf)):
        try:
            lock(fd, kind | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise LogDirError(LOCKED_BY_ANOTHER_PROCESS, file=path) from None
            raise LogDirError(
                f"cannot take a {name} lock on the broker's lock file ({err.strerror}), so whether a "
                "broker uses the directory cannot be told; not modifying it",
                file=path,
            ) from None
        if not keep:
            lock(fd, fcntl.LOCK_UN)


def _copy_regular(fs: LogFileSystem, source: str, target: str) -> None:
    """shutil.copy2 of a regular file; another kind of file is refused as every read refuses it, and
    a source the system will not read is named as one (not as a refused write)."""
    import shutil

    fs.ensure_regular_file(source)
    try:
        shutil.copy2(source, target)
    except OSError as err:
        if err.filename == source and not err.filename2:  # opening the source: the target names itself
            raise unreadable(err, source) from err
        raise


def copy_log_dir(source: str, target: str) -> None:
    """Copy a whole log directory to `target`, which must not exist yet: the `--output` of the
    rewriting commands. The broker's `.lock` stays behind. Local copies keep file modification
    times, which Kafka's rules read (object stores keep their own)."""
    src_fs, src = LogFileSystem.for_path(source)
    dst_fs, dst = LogFileSystem.for_path(target)
    if not src_fs.is_dir(src):
        raise LogDirError("log directory does not exist or is not a directory", file=src)
    if dst_fs.exists(dst):
        raise LogDirError("the output directory already exists; choose a new one", file=dst)
    if src_fs.is_local and dst_fs.is_local:
        import shutil
        from concurrent.futures import ThreadPoolExecutor

        # a broker's directory is thousands of small files: copied several at a time, the waits on
        # the disk overlap (directories are made first, by copytree, in order)
        try:
            with ThreadPoolExecutor(8) as pool:
                copies: list = []
                shutil.copytree(
                    src,
                    dst,
                    ignore=shutil.ignore_patterns(LOCK_FILE),
                    copy_function=lambda a, b: copies.append(pool.submit(_copy_regular, src_fs, a, b)),
                )
            for copy in copies:
                copy.result()
        except OSError as err:  # a full disk names the file being written (shutil names it second)
            raise (refused(err, "write", err.filename2 or err.filename or dst) or err) from err
        return
    import pyarrow.fs as pafs

    dst_fs.make_dirs(dst)
    for info in src_fs.fs.get_file_info(pafs.FileSelector(src, recursive=True)):
        relative = info.path[len(src) :].lstrip("/")
        if info.type == pafs.FileType.Directory:
            dst_fs.make_dirs(dst_fs.join(dst, relative))
        elif relative != LOCK_FILE:
            if dst_fs.is_local:  # a listing may name a file before its directory
                dst_fs.make_dirs(os.path.dirname(dst_fs.join(dst, relative)))
            pafs.copy_files(
                info.path, dst_fs.join(dst, relative), source_filesystem=src_fs.fs, destination_filesystem=dst_fs.fs
            )


def _refuse_partition_dir(fs: LogFileSystem, path: str, entries) -> None:
    """A partition directory (named `<topic>-<partition>`, holding segment files and no partition
    directories) given where a log directory must be: every command would find no partition in it
    and do nothing, so it is refused, saying what to pass instead."""
    tp = parse_partition_dir_name(fs.name(path))
    if tp is not None and any(not e.is_dir and parse_segment_file_name(e.name) for e in entries):
        raise LogDirError(
            f"this is the directory of partition {tp[0]}-{tp[1]}, not a log directory: pass its parent, "
            "the log.dirs directory that holds it (with --topic to choose topics)",
            file=path,
        )


def _of(paths: Mapping[TopicPartition, str], topics: set[str] | None) -> dict[TopicPartition, str]:
    return {tp: path for tp, path in paths.items() if topics is None or tp[0] in topics}


def listing_signature(entries: Iterable[FileEntry]) -> list[tuple]:
    """What a directory's listing shows of its files: another process's change alters it."""
    return sorted((e.name, e.size, e.mtime_ms, e.is_dir) for e in entries)
