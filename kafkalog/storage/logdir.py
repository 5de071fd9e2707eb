"""A Kafka `log.dirs` directory: its partition directories and broker checkpoint files (spec §4.1, §4.10)."""
from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass, field

from ..errors import LogDirError
from .checkpoint import format_offset_checkpoint, parse_offset_checkpoint
from .fs import LogFileSystem
from .naming import parse_partition_dir_name
from .partition import Partition

META_PROPERTIES = "meta.properties"
LOCK_FILE = ".lock"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"

TopicPartition = tuple[str, int]


@dataclass
class LogDir:
    """A log directory. Partition directories are listed eagerly, opened on demand."""
    fs: LogFileSystem
    path: str
    partition_paths: dict[TopicPartition, str] = field(default_factory=dict)

    @classmethod
    def open(cls, path_or_uri: str) -> "LogDir":
        fs, path = LogFileSystem.for_path(path_or_uri)
        if not fs.is_dir(path):
            raise LogDirError("log directory does not exist or is not a directory", file=path)
        log_dir = cls(fs, path)
        for entry in fs.list_dir(path):
            parsed = parse_partition_dir_name(entry.name) if entry.is_dir else None
            if parsed is not None:
                log_dir.partition_paths[parsed] = entry.path
        return log_dir

    @property
    def topic_partitions(self) -> list[TopicPartition]:
        return sorted(self.partition_paths)

    def partition(self, topic: str, partition: int) -> Partition:
        try:
            return Partition.open(self.fs, self.partition_paths[(topic, partition)])
        except KeyError:
            raise LogDirError(f"no partition directory {topic}-{partition}", file=self.path) from None

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

    def meta_properties(self) -> dict[str, str]:
        path = self.fs.join(self.path, META_PROPERTIES)
        if not self.fs.exists(path):
            return {}
        return parse_properties(self.fs.read_bytes(path).decode("utf-8", "replace"))

    # -- the broker's lock ------------------------------------------------------------------------
    def ensure_unlocked(self) -> None:
        """Refuse to modify a directory whose `.lock` a live process (a running broker) holds.

        An existing `.lock` that nobody holds is normal: a stopped broker leaves it behind."""
        path = self.fs.join(self.path, LOCK_FILE)
        if not self.fs.is_local or not os.path.exists(path):
            return
        # Java's FileChannel.tryLock takes a POSIX record lock, which flock() would not see: lockf.
        with open(path, "rb+") as f:
            try:
                fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise LogDirError("the log directory is locked by a running process (a broker?); "
                                  "stop it before modifying the log", file=path) from None
            fcntl.lockf(f, fcntl.LOCK_UN)


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties lines (key=value or key: value, # and ! comments); enough for meta.properties
    and Kafka-style config files."""
    props = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for i, ch in enumerate(line):
            if ch in "=:":
                props[line[:i].strip()] = line[i + 1:].strip()
                break
        else:
            props[line] = ""
    return props


def copy_log_dir(source: str, target: str) -> None:
    """Copy a whole log directory to `target`, which must not exist yet: the `--output` of the
    rewriting commands. Local copies keep file modification times, which Kafka's rules read."""
    src_fs, src = LogFileSystem.for_path(source)
    dst_fs, dst = LogFileSystem.for_path(target)
    if not src_fs.is_dir(src):
        raise LogDirError("log directory does not exist or is not a directory", file=src)
    if dst_fs.exists(dst):
        raise LogDirError("the output directory already exists; choose a new one", file=dst)
    if src_fs.is_local and dst_fs.is_local:
        import shutil
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns(LOCK_FILE))
        return
    import pyarrow.fs as pafs
    pafs.copy_files(src, dst, source_filesystem=src_fs.fs, destination_filesystem=dst_fs.fs)

