"""The segments of a log directory as the scan planner and a DataFrame see them: storage's
`LogSegment`s, listed (`list_segments`) and their metadata as rows (`inventory_rows`, which
spark/scan.py's `segment_inventory` shows as a DataFrame).

Nothing here reads a segment body: a listing gives names, sizes and mtimes; the last entries of
the `.index` and `.timeindex` files and the batches after the last offset-index entry give the last
offset and the largest timestamp (LogSegment reads them, once). `IOStats` counts every read, so a
test can check that claim (and the scan reports what its tasks opened).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..storage.fs import LogFileSystem
from ..storage.logdir import LogDir
from ..storage.segment import LogSegment

# -- counting reads --------------------------------------------------------------------------------


class IOStats:
    """Opens and bytes read per file path."""

    def __init__(self) -> None:
        self.by_path: dict[str, list[int]] = {}

    def record(self, path: str, opens: int = 0, nbytes: int = 0) -> None:
        entry = self.by_path.setdefault(path, [0, 0])
        entry[0] += opens
        entry[1] += nbytes

    def merge(self, other: dict[str, list[int]] | dict[str, tuple[int, int]]) -> None:
        for path, (opens, nbytes) in other.items():
            self.record(path, opens, nbytes)

    def files(self, suffix: str = "") -> set[str]:
        """Paths (ending with `suffix`) that were opened or read."""
        return {p for p in self.by_path if p.endswith(suffix)}

    def bytes_read(self, suffix: str = "") -> int:
        return sum(n for p, (_, n) in self.by_path.items() if p.endswith(suffix))

    def as_dict(self) -> dict[str, tuple[int, int]]:
        return {p: (o, n) for p, (o, n) in self.by_path.items()}


class _CountingFile:
    def __init__(self, f, path: str, stats: IOStats):
        self._f, self._path, self._stats = f, path, stats

    def read_at(self, nbytes: int, offset: int):
        data = self._f.read_at(nbytes, offset)
        self._stats.record(self._path, 0, len(data))
        return data

    def read(self, nbytes: int | None = None):
        data = self._f.read() if nbytes is None else self._f.read(nbytes)
        self._stats.record(self._path, 0, len(data))
        return data

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


class CountingFileSystem(LogFileSystem):
    """A `LogFileSystem` that records in `stats` every file it opens and every byte it reads (every
    read of a LogFileSystem, `read_bytes` and `read_range` too, goes through `open_input`)."""

    def __init__(self, inner: LogFileSystem, stats: IOStats | None = None):
        super().__init__(inner.fs)
        self.stats = stats if stats is not None else IOStats()

    def open_input(self, path: str):
        self.stats.record(path, 1, 0)
        return _CountingFile(super().open_input(path), path, self.stats)


def open_log_dir(log_dir, stats: IOStats | None = None) -> LogDir:
    """A `LogDir` for a path, URI or `LogDir`; with `stats`, every read through it is counted."""
    opened = log_dir if isinstance(log_dir, LogDir) else LogDir.open(str(log_dir))
    if stats is not None:
        opened = LogDir(CountingFileSystem(opened.fs, stats), opened.path, dict(opened.partition_paths))
    return opened


def log_dir_uri(log_dir) -> str:
    """What executors pass to `LogFileSystem.for_path` to reach the same filesystem."""
    if isinstance(log_dir, LogDir):
        if log_dir.fs.is_local:
            return log_dir.path
        raise TypeError("pass an object-store log directory as its URI string, not as a LogDir")
    return str(log_dir)


# -- segments --------------------------------------------------------------------------------------


def _as_set(values, kind) -> frozenset | None:
    if values is None:
        return None
    if isinstance(values, (str, int)):
        values = [values]
    return frozenset(kind(v) for v in values)


def list_segments(
    log_dir,
    topics: Iterable[str] | str | None = None,
    partitions: Iterable[int] | int | None = None,
    *,
    stats: IOStats | None = None,
) -> list[LogSegment]:
    """The segments of `log_dir` (a path, URI or `LogDir`), in topic, partition and offset order,
    from the listing alone. `topics` and `partitions` (partition numbers, for every selected topic)
    narrow it; `stats` counts every read made through the segments. A partition where a segment's
    name is held by anything but a regular file is refused (`Partition.ensure_regular_files`): a scan
    that left that segment out would answer for a log that is not there."""
    opened = open_log_dir(log_dir, stats)
    topic_set, partition_set = _as_set(topics, str), _as_set(partitions, int)
    segments = []
    for topic, number in opened.topic_partitions:
        if (topic_set is None or topic in topic_set) and (partition_set is None or number in partition_set):
            part = opened.partition(topic, number)
            part.ensure_regular_files()
            segments.extend(part.segments)
    return segments


def max_timestamp(segment: LogSegment) -> int | None:
    """The largest timestamp the time index's last entry and the segment's tail batches show."""
    stamps = [t for t in (segment.time_index_max_timestamp(), segment.tail.max_timestamp) if t is not None and t >= 0]
    return max(stamps) if stamps else None


# -- the DataFrame ---------------------------------------------------------------------------------

INVENTORY_COLUMNS = (
    "topic",
    "partition",
    "baseOffset",
    "size",
    "path",
    "firstOffset",
    "lastOffset",
    "maxTimestamp",
    "isActive",
    "mtime",
)


def inventory_rows(segments: list[LogSegment]) -> list[tuple]:
    return [
        (
            s.topic,
            s.partition,
            s.base_offset,
            s.size,
            s.log_path,
            s.first_offset(),
            s.last_offset(),
            max_timestamp(s),
            s.is_active,
            s.mtime_ms,
        )
        for s in segments
    ]
