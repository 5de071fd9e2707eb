"""`kafkalog validate`: check log directories, partition directories and segment files offline.

`validate_paths(paths)` walks what it is given, one partition at a time, and streams every segment
through `LogSegment.reader()` (fixed-size chunks), so a 1 GiB log costs one chunk of memory plus
the index files of the segment being read. It returns a `ValidationReport`: a list of findings
(`Problem(check, severity, message, file, position, offset)`), counts of what was checked,
`to_json()`, a one-screen `summary()` and `exit_code`. Errors that stop it from running at all (a
path that does not exist) raise `KafkaLogError`; the CLI turns those into exit code 2.

Severities
----------
* ``error``: Kafka would refuse, truncate or lose data, or serve wrong results (bad CRC, broken
  structure, offsets out of order, an index entry that sends lookups to the wrong place, a
  transaction index that disagrees with the ABORT markers, a corrupt snapshot or checkpoint).
* ``warning``: Kafka copes on its own (it repairs, recreates or ignores the file on load) but the
  directory is not what a cleanly stopped broker leaves: a torn tail of the *last* segment (what an
  unclean shutdown leaves; recovery truncates it and nothing acknowledged is lost), a missing index
  of an inactive segment, a time index without its final entry, a preallocated index tail,
  leftovers of an interrupted swap, index files without a `.log`, stale snapshots.
  A truncated tail of any segment but the last is an ``error``: Kafka's recovery truncates there
  and deletes every later segment (spec §9.3).
* ``info``: normal states worth knowing, never a problem: absent `.index`/`.timeindex` of the
  active segment (Kafka creates them; the `kafka-2.7.1-zk` fixture has them absent), an offset or
  time index that differs from what segment recovery would build but answers every lookup
  correctly (the cleaner writes coarser entries, spec §4.4), checkpoint entries for partitions
  that are not in the directory, producers a snapshot no longer holds (expired).

`exit_code` is 1 when any finding is at least as severe as `fail_on` (default ``warning``), else 0.

Checks (the stable `check` names)
---------------------------------
Batches (every batch of every `.log`):
  ``batch.crc``            stored CRC-32C (v2) / CRC-32 (v0, v1) does not match (Kafka's ensureValid)
  ``batch.structure``      the batch walk cannot continue: size below 14, unknown magic, v2 batch
                           length below 49 (what Kafka's recovery truncates); the rest of the segment
                           is not read
  ``batch.header``         v2 header values Kafka never writes (negative lastOffsetDelta, record count)
  ``batch.records``        records do not decode (deep): bad varints, record count, sizes, decompression,
                           record offsets not strictly increasing inside [baseOffset, lastOffset]
  ``batch.control``        a control batch's record does not parse (key/value of the marker)
  ``segment.truncated_tail`` bytes after the last whole batch (invisible to Kafka's readers; recovery
                           truncates them)
  ``segment.zero_tail``    zero bytes after the last batch (a preallocated segment never trimmed)
Offsets:
  ``offsets.order``        a batch's first offset is not above the last offset before it (same or
                           earlier segment)
  ``offsets.segment_base`` the segment's first batch starts below the segment's base offset
  ``offsets.overflow``     lastOffset − segment base offset outside [0, 2^31−1]
  ``offsets.next_segment`` a batch reaches the next segment's base offset
Offset index (`.index`):
  ``index.missing``        no `.index` (info for the active segment, warning otherwise)
  ``index.size``           length not a multiple of 8
  ``index.zero_tail``      preallocated all-zero entries (warning for the active segment)
  ``index.sanity``         Kafka's sanityCheck (last offset below the base) and entries not strictly
                           increasing in offset and position
  ``index.entry``          an entry (o, p) that breaks lookups: p is not a batch boundary, a batch
                           before p has lastOffset ≥ o, or o is above the segment's last offset (§4.4)
  ``index.mismatch``       (info) lookup-consistent, but not what recovery builds (§4.6)
Time index (`.timeindex`):
  ``timeindex.missing``, ``timeindex.size``, ``timeindex.zero_tail``, ``timeindex.sanity``  as above
  ``timeindex.entry``      an entry's timestamp is not the max timestamp up to its offset, exceeds
                           the segment's max timestamp, or its offset is above the segment
  ``timeindex.final_entry`` an inactive segment's last entry is not its max timestamp (warning:
                           time retention then uses a smaller timestamp)
  ``timeindex.mismatch``   (info) consistent, but not what recovery builds
Transaction index (`.txnindex`):
  ``txnindex.size``        length not a multiple of 34 (Kafka ignores the partial entry)
  ``txnindex.parse``       an entry version Kafka refuses
  ``txnindex.sanity``      an entry's lastOffset below the segment base, or lastOffsets not increasing
  ``txnindex.entry``       an entry without an ABORT marker of its producer at lastOffset in the
                           segment, or for a transaction without data (Kafka completes no
                           transaction for a marker that follows no data of its producer, and
                           indexes none), or whose firstOffset / lastStableOffset differ from a
                           replay of producer state (these two not checked for compacted partitions)
  ``txnindex.missing_entry`` an ABORT marker of a transaction with data without its entry (not for
                           compacted partitions: the cleaner drops entries of transactions with no
                           data left, spec §5.7.2)
Producer snapshots (`.snapshot`):
  ``snapshot.parse``       version, size or CRC-32C wrong (Kafka deletes it and falls back)
  ``snapshot.range``       offset above the log end offset (error) or below the log start (warning)
  ``snapshot.state``       (deep) a producer whose batches are in the log has other values than a
                           replay of the log up to the snapshot's offset (for compacted partitions:
                           Kafka keeps snapshots through cleaning, so a snapshot may describe a
                           batch the cleaner removed, then only an older epoch is an error; a
                           rewritten batch's max timestamp may have changed; and an open
                           transaction's first offset may lie below the replay's, whose first
                           batches are gone, but not at or below the producer's previous batch)
  ``snapshot.producer_absent`` (info) producers of the log the snapshot does not hold (expired)
Partition and log directory files:
  ``checkpoint.parse``     a log-dir checkpoint file Kafka's CheckpointFile would refuse
  ``checkpoint.range``     recovery point > LEO; log start > HW or > LEO; HW > LEO; HW < log start;
                           cleaner checkpoint outside [log start, LEO] (warning: Kafka resets it)
  ``checkpoint.unknown_partition`` (info) entries for partitions not in the directory
  ``leader_epoch.parse``   leader-epoch-checkpoint malformed, epochs not increasing or start offsets
                           decreasing
  ``leader_epoch.range``   an entry starting above the log end offset
  ``leader_epoch.batches`` (warning) a v2 batch's partitionLeaderEpoch differs from the epoch the
                           checkpoint gives its offset
  ``partition_metadata.parse``  partition.metadata malformed
  ``partition.illegal_name`` a directory named `<topic>-<partition>` that Kafka could not have made: the
                           topic breaks Kafka's rule (`[a-zA-Z0-9._-]`, at most 249 characters, not `.`
                           or `..`) or the partition number has leading zeros. Its files are still
                           checked; the rewriting commands refuse the log directory
  ``meta_properties.parse`` meta.properties that Kafka refuses (error: not text, no known key, a
                           version that is not 0 or 1, broker.id/node.id not an int32 or negative,
                           version 1 without node.id or cluster.id, an empty cluster.id, a directory.id
                           that is not a UUID or is reserved) or that only some versions accept
                           (warning: no version, version 0 without broker.id, a cluster.id that is not
                           a base64url UUID)
  ``partition.leftover``   `.cleaned` / `.swap` / `.deleted` files: an interrupted swap or delete
  ``partition.orphan_index``  index files without a `.log` (Kafka deletes them on load)
  ``partition.empty``      (info) a partition directory without any `.log`
  ``logdir.not_a_log_dir`` a directory with neither partition directories nor Kafka's files
  ``io.read``              a file or directory that could not be read

`kafka-dump-log.sh --index-sanity-check` is ``index.sanity``/``timeindex.sanity``/``*.size``;
`--verify-index-only` is ``index.entry``/``timeindex.entry`` (which accept, as lookups do, the
coarse entries `--verify-index-only` calls mismatches) plus ``index.mismatch``/``timeindex.mismatch``.

Compacted partitions are those with an entry in the log dir's `cleaner-offset-checkpoint` (for a
partition directory given alone, its parent's), or all partitions with `compacted=True`.

The producer-state replay starts from the snapshot at the first segment's base offset when there
is one. Without it, and with a first segment above offset 0, history before the log start is
unknown: then transaction-index first offsets and last stable offsets, and snapshot fields other
than the last batch's, are not compared.

A single `.log` file given alone is the last segment of an unknown partition: its base offset is
the number in its name (none for other names, such as saved fetch responses, whose offsets are
then only checked for order), and index files beside it are checked when present.
"""
from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Sequence

from ..codec.batch import INT32_MAX, RecordBatch
from ..codec.control import ControlType, control_record
from ..codec.legacy import LegacyBatch
from ..errors import CrcMismatchError, KafkaLogError, LogDirError
from ..storage.checkpoint import (EpochEntry, parse_leader_epoch_checkpoint, parse_offset_checkpoint,
                         parse_partition_metadata)
from ..storage.fs import FileEntry, LogFileSystem
from ..storage.index import DEFAULT_INDEX_INTERVAL_BYTES, BatchSummary, IndexBuilder, OffsetIndex, TimeIndex
from ..storage.meta_properties import META_PROPERTIES, check_meta_properties
from ..storage.naming import (CLEANER_OFFSET_CHECKPOINT, LEADER_EPOCH_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                     OFFSET_CHECKPOINT_FILES, PARTITION_METADATA, RECOVERY_POINT_CHECKPOINT,
                     REPLICATION_OFFSET_CHECKPOINT, illegal_partition_dir_reason, parse_partition_dir_name,
                     parse_segment_file_name)
from ..storage.partition import Partition
from ..storage.producer_state import NO_OFFSET, ProducerStateManager
from ..storage.segment import CHUNK_SIZE, LogSegment, locate
from ..storage.snapshot import ProducerSnapshot
from ..storage.txnindex import ENTRY_SIZE as TXN_ENTRY_SIZE
from ..storage.txnindex import AbortedTxn, TransactionIndex

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITIES = (ERROR, WARNING, INFO)
_RANK = {ERROR: 2, WARNING: 1, INFO: 0}
REPORT_VERSION = 1

CHECKS = (
    "batch.crc", "batch.structure", "batch.header", "batch.records", "batch.control",
    "segment.truncated_tail", "segment.zero_tail",
    "offsets.order", "offsets.segment_base", "offsets.overflow", "offsets.next_segment",
    "index.missing", "index.size", "index.zero_tail", "index.sanity", "index.entry", "index.mismatch",
    "timeindex.missing", "timeindex.size", "timeindex.zero_tail", "timeindex.sanity", "timeindex.entry",
    "timeindex.final_entry", "timeindex.mismatch",
    "txnindex.size", "txnindex.parse", "txnindex.sanity", "txnindex.entry", "txnindex.missing_entry",
    "snapshot.parse", "snapshot.range", "snapshot.state", "snapshot.producer_absent",
    "checkpoint.parse", "checkpoint.range", "checkpoint.unknown_partition",
    "leader_epoch.parse", "leader_epoch.range", "leader_epoch.batches",
    "partition_metadata.parse", "partition.leftover", "partition.orphan_index", "partition.empty",
    "partition.illegal_name", "meta_properties.parse",
    "logdir.not_a_log_dir", "io.read",
)

_LOG_DIR_MARKERS = OFFSET_CHECKPOINT_FILES + (META_PROPERTIES, ".kafka_cleanshutdown")


# -- the report ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Problem:
    """One finding. `position` is a byte position in `file` (for index files: of the entry),
    `offset` the Kafka offset concerned; either is None where it does not apply."""
    check: str
    severity: str
    message: str
    file: str | None = None
    position: int | None = None
    offset: int | None = None

    def to_dict(self) -> dict:
        return {"check": self.check, "severity": self.severity, "message": self.message, "file": self.file,
                "position": self.position, "offset": self.offset}

    def __str__(self) -> str:
        where = [self.file or "-"]
        if self.position is not None:
            where.append(f"byte {self.position}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{self.severity.upper():7} {self.check}: {', '.join(where)}: {self.message}"


@dataclass
class ValidationReport:
    paths: list[str]
    findings: list[Problem] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    # (check, file, severity) -> findings left out of `findings` beyond the per-file cap
    suppressed: Counter = field(default_factory=Counter)
    fail_on: str = WARNING
    deep: bool = True  # records were decoded

    @property
    def problems(self) -> list[Problem]:
        """The findings that are problems (errors and warnings); infos are not."""
        return [p for p in self.findings if p.severity != INFO]

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.findings if p.severity == ERROR]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.findings if p.severity == WARNING]

    @property
    def infos(self) -> list[Problem]:
        return [p for p in self.findings if p.severity == INFO]

    def severity_counts(self) -> dict[str, int]:
        counts = Counter(p.severity for p in self.findings)
        for (_, _, severity), n in self.suppressed.items():
            counts[severity] += n
        return {s: counts.get(s, 0) for s in SEVERITIES}

    @property
    def exit_code(self) -> int:
        """0 when no finding reaches `fail_on`, else 1."""
        threshold = _RANK[self.fail_on]
        counts = self.severity_counts()
        return 1 if any(counts[s] for s in SEVERITIES if _RANK[s] >= threshold) else 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def to_dict(self) -> dict:
        return {
            "version": REPORT_VERSION, "paths": list(self.paths), "exitCode": self.exit_code,
            "failOn": self.fail_on, "deep": self.deep, "severities": self.severity_counts(),
            "counts": dict(sorted(self.counts.items())),
            "findings": [p.to_dict() for p in self.findings],
            "suppressed": [{"check": c, "file": f, "severity": s, "count": n}
                           for (c, f, s), n in sorted(self.suppressed.items(), key=lambda kv: tuple(map(str, kv[0])))],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def summary(self, max_lines: int = 20) -> str:
        """A readable report that fits one screen: totals, then the most severe findings."""
        c = self.counts
        sev = self.severity_counts()
        status = "OK" if self.exit_code == 0 else "PROBLEMS FOUND"
        lines = [f"kafkalog validate: {status} (exit {self.exit_code})",
                 f"  checked {c['partitions']} partitions, {c['segments']} segments, {c['batches']} batches"
                 f" ({c['records'] if self.deep else 'records not decoded'}"
                 f"{' records' if self.deep else ''}), {_size(c['log_bytes'])}; {c['index_files']} .index,"
                 f" {c['time_index_files']} .timeindex, {c['txn_index_files']} .txnindex,"
                 f" {c['snapshots']} snapshots, {c['checkpoint_files']} checkpoint files",
                 f"  {sev[ERROR]} errors, {sev[WARNING]} warnings, {sev[INFO]} infos"]
        by_check = Counter((p.severity, p.check) for p in self.findings)
        for (_, check, severity), n in self.suppressed.items():
            by_check[(severity, check)] += n
        if by_check:
            ordered = sorted(by_check.items(), key=lambda kv: (-_RANK[kv[0][0]], kv[0][1]))
            lines.append("  by check: " + ", ".join(f"{check} ({severity}) ×{n}" for (severity, check), n in ordered))
        # problems first, most severe first; infos only a few, they are not problems
        shown = sorted((p for p in self.findings if p.severity != INFO), key=lambda p: -_RANK[p.severity])
        shown += self.infos[:max(0, min(5, max_lines - len(shown)))]
        root = _common_root(self.paths)
        for p in shown[:max_lines]:
            if root and p.file and p.file.startswith(root):
                p = replace(p, file=p.file[len(root):].lstrip("/") or p.file)
            lines.append("  " + _shorten(_printable(str(p)), 160))
        hidden = len(self.findings) - min(len(shown), max_lines) + sum(self.suppressed.values())
        if hidden > 0:
            lines.append(f"  ... and {hidden} more findings (see the JSON report)")
        return "\n".join(lines)


def _common_root(paths: list[str]) -> str:
    """The directory the validated paths share, to print file names relative to it."""
    import os
    local = [os.path.abspath(p) for p in paths if "://" not in p]
    if not local or len(local) != len(paths):
        return ""
    root = os.path.commonpath(local)
    return root if os.path.isdir(root) else os.path.dirname(root)


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _printable(text: str) -> str:
    """`text` with control characters escaped (a directory name with a newline stays on one line)."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


# -- entry point ------------------------------------------------------------------------------------

def validate_paths(paths: Iterable[str], *,
                   index_interval_bytes: int | Mapping[str, int] = DEFAULT_INDEX_INTERVAL_BYTES,
                   deep: bool = True, fail_on: str = WARNING, compacted: bool | None = None,
                   max_findings_per_check: int = 100, chunk_size: int = CHUNK_SIZE) -> ValidationReport:
    """Validate log directories, partition directories and segment (or index, snapshot,
    checkpoint) files.

    `deep` decodes every record (decompressing) and compares producer snapshots with a replay;
    without it batches are checked by header and CRC only. `index_interval_bytes` is the topics'
    `index.interval.bytes` (one value, or topic -> value with Kafka's default for the others), used
    only for the informational comparison with rebuilt indexes.
    `compacted` forces (True/False) instead of reading `cleaner-offset-checkpoint`. At most
    `max_findings_per_check` findings are kept per (check, file); the others are counted in
    `report.suppressed`. Raises LogDirError when a path does not exist.
    """
    if fail_on not in (ERROR, WARNING):
        raise ValueError(f"fail_on must be 'error' or 'warning', not {fail_on!r}")
    paths = [str(p) for p in paths]
    report = ValidationReport(paths, fail_on=fail_on, deep=deep)
    validator = _Validator(report, index_interval_bytes=index_interval_bytes, deep=deep, compacted=compacted,
                           max_findings=max_findings_per_check, chunk_size=chunk_size)
    resolved = []
    for path_or_uri in paths:  # every path must exist before anything is reported
        fs, path = LogFileSystem.for_path(path_or_uri)
        info = fs.info(path)
        if info is None:
            raise LogDirError("no such file or directory", file=path)
        resolved.append((fs, path, info))
    for fs, path, info in resolved:
        report.counts["paths"] += 1
        if info.is_dir:
            if _is_partition_dir(fs, path):
                validator.partition_dir(fs, path, _DirContext.of_parent(fs, path))
            else:
                validator.log_dir(fs, path)
        else:
            validator.single_file(fs, info)
    return report


def _is_partition_dir(fs: LogFileSystem, path: str) -> bool:
    """A directory named `<topic>-<partition>` is a partition directory unless it holds what a log
    directory holds (partition directories, meta.properties, checkpoint files): log dirs are often
    named like `kafka-logs-1`."""
    if parse_partition_dir_name(fs.name(path)) is None:
        return False
    try:
        entries = fs.list_dir(path)
    except OSError:
        return True  # reported when the partition is opened
    return not any(e.name in _LOG_DIR_MARKERS or (e.is_dir and parse_partition_dir_name(e.name) is not None)
                   for e in entries)


# -- what a partition's checks know about its log dir --------------------------------------------

@dataclass
class _DirContext:
    checkpoints: dict[str, dict] = field(default_factory=dict)  # file name -> {(topic, partition): offset}

    @classmethod
    def of_parent(cls, fs: LogFileSystem, partition_path: str) -> "_DirContext":
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
class _PartitionResult:
    log_start: int | None = None
    log_end: int | None = None


@dataclass
class _SegmentPlan:
    """How one segment is to be checked."""
    segment: LogSegment
    base: int | None  # None: a file whose name gives no base offset
    next_base: int | None
    is_last: bool
    standalone: bool  # a file given alone, not inside a partition being validated
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES


class _ReplayState:
    """Per partition: the producer-state replay, the offsets seen so far, the checks that span segments."""

    def __init__(self, manager: ProducerStateManager, complete: bool,
                 snapshots: list[tuple[FileEntry, ProducerSnapshot]], epochs: list[EpochEntry] | None,
                 epoch_file: str | None):
        self.manager = manager
        self.complete = complete  # the replay knows every transaction open at its start
        self.snapshots = snapshots  # to compare, ascending offset
        self.next_snapshot = 0
        self.seen_pids: set[int] = set()
        self.last_offset: int | None = None  # the highest last offset of any batch so far
        self.last_file: str | None = None
        self.epochs = epochs
        self.epoch_starts = [e.start_offset for e in epochs] if epochs else []
        self.epoch_file = epoch_file
        self.epoch_text = ""
        self.epoch_mismatches = 0
        self.epoch_first_mismatch: tuple | None = None
        self.log_start = 0
        self.compacted = False  # snapshots may describe batches the cleaner has since removed
        # compacted partitions only: where each producer's open transaction may have begun
        self.floor_default = -1  # below the first segment's base offset
        self.last_of_producer: dict[int, int] = {}  # last offset of the producer's latest batch
        self.txn_floor: dict[int, int] = {}  # producer -> last offset of its batch before its open transaction
        self._was_open = False

    def before_batch(self, pid: int) -> None:
        producer = self.manager.producers.get(pid)
        self._was_open = producer is not None and producer.current_txn_first_offset != NO_OFFSET

    def after_batch(self, pid: int, last: int) -> None:
        producer = self.manager.producers.get(pid)
        if not self._was_open and producer is not None and producer.current_txn_first_offset != NO_OFFSET:
            self.txn_floor[pid] = self.last_of_producer.get(pid, self.floor_default)
        self.last_of_producer[pid] = last

    def txn_start_cleaned(self, pid: int, stored: int, replayed: int) -> bool:
        """A snapshot's currentTxnFirstOffset `stored` below the replay's: the transaction's first
        batches were removed by the cleaner after the snapshot was taken (Kafka's cleaner keeps
        snapshots as they are, and a replay starts the transaction at its first batch left). It must
        still lie after the producer's previous batch, which is not part of the transaction."""
        floor = self.txn_floor.get(pid)
        return floor is not None and NO_OFFSET not in (stored, replayed) and floor < stored < replayed


# -- the walk ------------------------------------------------------------------------------------

class _Validator:
    def __init__(self, report: ValidationReport, *, index_interval_bytes: int | Mapping[str, int], deep: bool,
                 compacted: bool | None, max_findings: int, chunk_size: int):
        self.report = report
        self.intervals = index_interval_bytes
        self.deep = deep
        self.compacted = compacted
        self.max_findings = max_findings
        self.chunk_size = chunk_size
        self._per_key: Counter = Counter()

    def _interval(self, topic: str | None) -> int:
        if isinstance(self.intervals, Mapping):
            return self.intervals.get(topic, DEFAULT_INDEX_INTERVAL_BYTES)
        return self.intervals

    # -- findings ---------------------------------------------------------------------------------
    def add(self, check: str, severity: str, message: str, file: str | None = None,
            position: int | None = None, offset: int | None = None) -> None:
        assert check in CHECKS and severity in SEVERITIES, (check, severity)
        key = (check, file)
        self._per_key[key] += 1
        if self._per_key[key] > self.max_findings:
            self.report.suppressed[(check, file, severity)] += 1
            return
        self.report.findings.append(Problem(check, severity, message, file, position, offset))

    def add_error(self, check: str, severity: str, err: KafkaLogError, file: str | None = None,
                  prefix: str = "") -> None:
        self.add(check, severity, prefix + err.message, err.file or file, err.position, err.offset)

    # -- log directories --------------------------------------------------------------------------
    def log_dir(self, fs: LogFileSystem, path: str) -> None:
        try:
            entries = fs.list_dir(path)
        except OSError as err:
            self.add("io.read", ERROR, f"cannot list the directory: {err}", path)
            return
        names = {e.name: e for e in entries}
        partition_dirs = [e for e in entries if e.is_dir and parse_partition_dir_name(e.name) is not None]
        if not partition_dirs and not any(n in names for n in _LOG_DIR_MARKERS):
            self.add("logdir.not_a_log_dir", WARNING,
                     "neither partition directories (<topic>-<partition>) nor Kafka's log-dir files "
                     "(meta.properties, checkpoint files): nothing was validated", path)
            return
        self.report.counts["log_dirs"] += 1
        entry = names.get(META_PROPERTIES)
        if entry is not None and not entry.is_dir:
            self._meta_properties(fs, entry.path)
        ctx = _DirContext()
        checkpoint_texts: dict[str, str] = {}
        for name in OFFSET_CHECKPOINT_FILES:
            entry = names.get(name)
            if entry is None or entry.is_dir:
                continue
            self.report.counts["checkpoint_files"] += 1
            try:
                text = fs.read_bytes(entry.path).decode("utf-8", "replace")
                ctx.checkpoints[name] = parse_offset_checkpoint(text, file=entry.path)
                checkpoint_texts[name] = text
            except KafkaLogError as err:
                self.add_error("checkpoint.parse", ERROR, err, entry.path,
                               "Kafka's CheckpointFile refuses this file: ")
            except OSError as err:
                self.add("io.read", ERROR, f"cannot read: {err}", entry.path)
        present = set()
        for entry in partition_dirs:
            topic, partition = parse_partition_dir_name(entry.name)
            present.add((topic, partition))
            result = self.partition_dir(fs, entry.path, ctx)
            if result is not None:
                self._check_checkpoint_ranges(fs, path, ctx, checkpoint_texts, topic, partition, result)
        for name, offsets in ctx.checkpoints.items():
            unknown = sorted(tp for tp in offsets if tp not in present)
            if unknown:
                shown = ", ".join(f"{t}-{p}" for t, p in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
                self.add("checkpoint.unknown_partition", INFO,
                         f"{len(unknown)} entries for partitions that have no directory here ({shown}); "
                         "Kafka ignores them", fs.join(path, name))

    def _check_checkpoint_ranges(self, fs, dir_path, ctx: _DirContext, texts: dict[str, str], topic: str,
                                 partition: int, result: _PartitionResult) -> None:
        leo, start = result.log_end, result.log_start
        if leo is None:
            return

        def where(name):
            file = fs.join(dir_path, name)
            return file, _checkpoint_line_position(texts.get(name, ""), topic, partition)

        tp = f"{topic}-{partition}"
        recovery = ctx.get(RECOVERY_POINT_CHECKPOINT, topic, partition)
        if recovery is not None and recovery > leo:
            self.add("checkpoint.range", ERROR, f"{tp}: recovery point {recovery} is above the log end offset {leo}: "
                     "data the broker had flushed is missing", *where(RECOVERY_POINT_CHECKPOINT), offset=recovery)
        log_start_cp = ctx.get(LOG_START_OFFSET_CHECKPOINT, topic, partition)
        hw = ctx.get(REPLICATION_OFFSET_CHECKPOINT, topic, partition)
        if log_start_cp is not None and log_start_cp > leo:
            self.add("checkpoint.range", ERROR, f"{tp}: log start offset {log_start_cp} is above the log end offset "
                     f"{leo}: Kafka would delete every segment on load", *where(LOG_START_OFFSET_CHECKPOINT),
                     offset=log_start_cp)
        if hw is not None:
            if hw > leo:
                self.add("checkpoint.range", ERROR, f"{tp}: high watermark {hw} is above the log end offset {leo}: "
                         "committed data is missing", *where(REPLICATION_OFFSET_CHECKPOINT), offset=hw)
            if start is not None and hw < start:
                self.add("checkpoint.range", ERROR, f"{tp}: high watermark {hw} is below the log start offset {start}",
                         *where(REPLICATION_OFFSET_CHECKPOINT), offset=hw)
        cleaner = ctx.get(CLEANER_OFFSET_CHECKPOINT, topic, partition)
        if cleaner is not None and ((start is not None and cleaner < start) or cleaner > leo):
            self.add("checkpoint.range", WARNING, f"{tp}: cleaner checkpoint {cleaner} is outside [log start {start}, "
                     f"log end {leo}]; Kafka resets it", *where(CLEANER_OFFSET_CHECKPOINT), offset=cleaner)

    # -- partition directories ----------------------------------------------------------------------
    def partition_dir(self, fs: LogFileSystem, path: str, ctx: _DirContext) -> _PartitionResult | None:
        reason = illegal_partition_dir_reason(fs.name(path))
        if reason is not None:
            self.add("partition.illegal_name", ERROR, f"not a partition directory Kafka could have made: {reason}; "
                     "kafkalog's rewriting commands refuse this log directory", path)
        try:
            part = Partition.open(fs, path)
        except KafkaLogError as err:
            self.add_error("io.read", ERROR, err, path)
            return None
        except OSError as err:
            self.add("io.read", ERROR, f"cannot list the partition directory: {err}", path)
            return None
        self.report.counts["partitions"] += 1
        for entry in part.in_flight:
            self.add("partition.leftover", WARNING,
                     "left by an interrupted cleaner swap, segment split or asynchronous delete; Kafka's loader "
                     "completes or rolls back the swap (spec §9.3)", entry.path)
        for entry in part.orphan_indexes:
            self.add("partition.orphan_index", WARNING, "index file without a .log; Kafka deletes it on load",
                     entry.path)
        if not part.segments:
            self.add("partition.empty", INFO, "no .log segment; Kafka creates an empty one at the log start offset",
                     path)
        # per-partition files
        epochs, epoch_file, epoch_text = None, None, ""
        entry = part.files.get(LEADER_EPOCH_CHECKPOINT)
        if entry is not None:
            epoch_file = entry.path
            self.report.counts["checkpoint_files"] += 1
            try:
                epoch_text = fs.read_bytes(entry.path).decode("utf-8", "replace")
                epochs = parse_leader_epoch_checkpoint(epoch_text, file=entry.path)
            except KafkaLogError as err:
                self.add_error("leader_epoch.parse", ERROR, err, entry.path)
            except OSError as err:
                self.add("io.read", ERROR, f"cannot read: {err}", entry.path)
        entry = part.files.get(PARTITION_METADATA)
        if entry is not None:
            self.report.counts["checkpoint_files"] += 1
            try:
                parse_partition_metadata(fs.read_bytes(entry.path).decode("utf-8", "replace"), file=entry.path)
            except KafkaLogError as err:
                self.add_error("partition_metadata.parse", ERROR, err, entry.path)
            except OSError as err:
                self.add("io.read", ERROR, f"cannot read: {err}", entry.path)
        # snapshots: parse all (small), seed the replay from the one at the first segment's base
        snapshots = self._read_snapshots(fs, part)
        first_base = part.segments[0].base_offset if part.segments else None
        seed = next((s for e, s in snapshots if s.offset == first_base), None)
        if seed is not None:
            manager, complete = ProducerStateManager.from_snapshot(seed), True
        else:
            manager, complete = ProducerStateManager(first_base or 0), not first_base
        to_compare = [(e, s) for e, s in snapshots if seed is None or s.offset > seed.offset]
        state = _ReplayState(manager, complete, to_compare, epochs, epoch_file)
        state.epoch_text = epoch_text
        log_start_cp = ctx.get(LOG_START_OFFSET_CHECKPOINT, part.topic, part.partition)
        if first_base is not None:
            state.log_start = max(first_base, log_start_cp if log_start_cp is not None else first_base)
        compacted = self.compacted
        if compacted is None:
            compacted = ctx.get(CLEANER_OFFSET_CHECKPOINT, part.topic, part.partition) is not None
        state.compacted = compacted
        state.floor_default = (first_base or 0) - 1
        log_end = None
        for i, segment in enumerate(part.segments):
            nxt = part.segments[i + 1].base_offset if i + 1 < len(part.segments) else None
            plan = _SegmentPlan(segment, segment.base_offset, nxt, nxt is None, standalone=False,
                                index_interval_bytes=self._interval(part.topic))
            try:
                log_end = self.segment(plan, state, exact_txn=not compacted)
            except OSError as err:
                self.add("io.read", ERROR, f"cannot read the segment: {err}", segment.log_path)
        # the end of the log: what remains to compare, and the offsets everything must lie within
        result = _PartitionResult()
        if part.segments:
            result.log_start = state.log_start
            result.log_end = log_end
            self._compare_snapshots(state, None)
            self._check_snapshot_ranges(snapshots, result)
            self._finish_epochs(state, result)
        return result

    def _read_snapshots(self, fs: LogFileSystem, part: Partition) -> list[tuple[FileEntry, ProducerSnapshot]]:
        out = []
        for offset, entry in sorted(part.snapshots.items()):
            self.report.counts["snapshots"] += 1
            try:
                out.append((entry, ProducerSnapshot.from_bytes(fs.read_bytes(entry.path), offset, file=entry.path)))
            except KafkaLogError as err:
                self.add("snapshot.parse", ERROR, "Kafka deletes this snapshot on load and falls back to an older "
                         f"one: {err.message}", entry.path, err.position, offset)
            except OSError as err:
                self.add("io.read", ERROR, f"cannot read: {err}", entry.path)
        return out

    def _check_snapshot_ranges(self, snapshots, result: _PartitionResult) -> None:
        for entry, snap in snapshots:
            if result.log_end is not None and snap.offset > result.log_end:
                self.add("snapshot.range", ERROR, f"snapshot offset {snap.offset} is above the log end offset "
                         f"{result.log_end}: the log has lost data the broker had", entry.path, offset=snap.offset)
            elif result.log_start is not None and snap.offset < result.log_start:
                self.add("snapshot.range", WARNING, f"snapshot offset {snap.offset} is below the log start offset "
                         f"{result.log_start}: stale, Kafka deletes it on load", entry.path, offset=snap.offset)

    def _finish_epochs(self, state: _ReplayState, result: _PartitionResult) -> None:
        if state.epochs and result.log_end is not None:
            for i, e in enumerate(state.epochs):
                if e.start_offset > result.log_end:
                    self.add("leader_epoch.range", ERROR, f"epoch {e.epoch} starts at {e.start_offset}, above the log "
                             f"end offset {result.log_end}: the log has lost data written in that epoch",
                             state.epoch_file, _line_position(state.epoch_text, i + 2), e.start_offset)
        if state.epoch_mismatches:
            offset, epoch, expected, file, position = state.epoch_first_mismatch
            more = f" ({state.epoch_mismatches - 1} more batches disagree)" if state.epoch_mismatches > 1 else ""
            self.add("leader_epoch.batches", WARNING,
                     f"the batch at offset {offset} ({file}, byte {position}) has partitionLeaderEpoch {epoch} but "
                     f"the checkpoint gives {expected}{more}", state.epoch_file, None, offset)

    # -- single files -------------------------------------------------------------------------------
    def single_file(self, fs: LogFileSystem, info: FileEntry) -> None:
        name = info.name
        parent = info.path.rsplit("/", 1)[0] if "/" in info.path else "."
        if name in OFFSET_CHECKPOINT_FILES or name == LEADER_EPOCH_CHECKPOINT or name == PARTITION_METADATA:
            self._single_checkpoint(fs, info)
            return
        if name == META_PROPERTIES:
            self._meta_properties(fs, info.path)
            return
        parsed = parse_segment_file_name(name)
        if parsed is not None and parsed.state is None and parsed.kind == ".snapshot":
            self.report.counts["snapshots"] += 1
            try:
                ProducerSnapshot.from_bytes(fs.read_bytes(info.path), parsed.base_offset, file=info.path)
            except KafkaLogError as err:
                self.add("snapshot.parse", ERROR, err.message, info.path, err.position, parsed.base_offset)
            return
        if parsed is not None and parsed.state is None and parsed.kind != ".log":
            log = fs.info(fs.join(parent, f"{parsed.base_offset:020d}.log"))
            if log is None:
                self._single_index(fs, info, parsed.kind, parsed.base_offset)
                return
            info, parsed = log, parse_segment_file_name(log.name)
        if not name.endswith(".log") and (parsed is None or parsed.kind != ".log"):
            raise LogDirError("not a log directory, partition directory, segment, index, snapshot or "
                              "checkpoint file", file=info.path)
        base = parsed.base_offset if parsed is not None and parsed.state is None else None
        segment = LogSegment(fs, parent, base or 0, {".log": info})
        if base is not None:
            for kind in (".index", ".timeindex", ".txnindex"):
                sibling = fs.info(fs.join(parent, f"{base:020d}{kind}"))
                if sibling is not None:
                    segment.files[kind] = sibling
        state = _ReplayState(ProducerStateManager(base or 0), complete=not base, snapshots=[], epochs=None,
                             epoch_file=None)
        topic = parse_partition_dir_name(fs.name(parent)) if base is not None else None
        try:
            self.segment(_SegmentPlan(segment, base, None, True, standalone=True,
                                      index_interval_bytes=self._interval(topic.topic if topic else None)),
                         state, exact_txn=False)
        except OSError as err:
            self.add("io.read", ERROR, f"cannot read the segment: {err}", info.path)

    def _meta_properties(self, fs: LogFileSystem, path: str) -> None:
        self.report.counts["meta_properties"] += 1
        try:
            data = fs.read_bytes(path)
        except OSError as err:
            self.add("io.read", ERROR, f"cannot read: {err}", path)
            return
        _, issues = check_meta_properties(data)
        for issue in issues:
            self.add("meta_properties.parse", ERROR if issue.severity == "error" else WARNING, issue.message, path,
                     issue.position)

    def _single_checkpoint(self, fs: LogFileSystem, info: FileEntry) -> None:
        self.report.counts["checkpoint_files"] += 1
        text = fs.read_bytes(info.path).decode("utf-8", "replace")
        try:
            if info.name == LEADER_EPOCH_CHECKPOINT:
                parse_leader_epoch_checkpoint(text, file=info.path)
            elif info.name == PARTITION_METADATA:
                parse_partition_metadata(text, file=info.path)
            else:
                parse_offset_checkpoint(text, file=info.path)
        except KafkaLogError as err:
            check = {LEADER_EPOCH_CHECKPOINT: "leader_epoch.parse",
                     PARTITION_METADATA: "partition_metadata.parse"}.get(info.name, "checkpoint.parse")
            self.add_error(check, ERROR, err, info.path)

    def _single_index(self, fs: LogFileSystem, info: FileEntry, kind: str, base: int) -> None:
        """An index file without its .log: only what can be checked from the file itself."""
        data = fs.read_bytes(info.path)
        if kind == ".txnindex":
            self._txn_file_checks(data, base, info.path)
            return
        cls, prefix = (OffsetIndex, "index") if kind == ".index" else (TimeIndex, "timeindex")
        index = cls.from_bytes(data, base, file=info.path)
        self._index_file_checks(index, prefix, info.path, active=True)

    # -- one segment ----------------------------------------------------------------------------------
    def segment(self, plan: _SegmentPlan, state: _ReplayState, exact_txn: bool) -> int | None:
        """Check one segment and its index files; returns the log end offset after it."""
        seg, base = plan.segment, plan.base
        path = seg.log_path
        counts = self.report.counts
        counts["segments"] += 1
        counts["log_bytes"] += seg.size
        active = plan.is_last
        oidx = self._load_index(seg, plan, OffsetIndex, ".index", "index", active)
        tidx = self._load_index(seg, plan, TimeIndex, ".timeindex", "timeindex", active)
        txn = self._load_txn_index(seg, base)
        ocheck = _OffsetIndexCheck(self, oidx) if oidx is not None else None
        tcheck = _TimeIndexCheck(self, tidx) if tidx is not None else None
        xcheck = _TxnIndexCheck(self, txn, seg.path(".txnindex"), exact_txn and not plan.standalone,
                                state.complete) if (txn is not None or (exact_txn and not plan.standalone)) else None
        builder = IndexBuilder(base, plan.index_interval_bytes, path) if base is not None else None
        seg_last = None  # the highest last offset in this segment
        max_ts = -1
        first = True
        walk_end = 0  # where the last whole batch read ends
        reader = seg.reader(chunk_size=self.chunk_size)
        try:
            for pos, batch in reader:
                counts["batches"] += 1
                is_v2 = isinstance(batch, RecordBatch)
                # CRC (Kafka's ensureValid)
                try:
                    batch.verify()
                except CrcMismatchError as err:
                    self.add_error("batch.crc", ERROR, locate(err, path, pos, batch), prefix="" if plan.standalone else (
                        "Kafka's recovery would truncate the segment here"
                        + ("" if plan.is_last else " and delete every later segment") + ": "))
                last = batch.last_offset
                first_offset, decoded = self._first_offset(batch, pos, path)
                walk_end = pos + batch.size
                if is_v2:
                    self._check_v2_header(batch, pos, path)
                # offsets
                if state.last_offset is not None and first_offset <= state.last_offset:
                    where = "in this segment" if state.last_file == path else f"in {state.last_file}"
                    self.add("offsets.order", ERROR, f"batch [{first_offset}, {last}] does not start above the last "
                             f"offset {state.last_offset} of an earlier batch {where}", path, pos, first_offset)
                if base is not None:
                    if first and first_offset < base:
                        self.add("offsets.segment_base", ERROR, f"the first batch starts at offset {first_offset}, "
                                 f"below the segment's base offset {base}", path, pos, first_offset)
                    if not 0 <= last - base <= INT32_MAX:
                        self.add("offsets.overflow", ERROR, f"last offset {last} minus the segment base {base} is "
                                 "outside [0, 2^31-1]: Kafka cannot index it (LogSegmentOffsetOverflow)",
                                 path, pos, last)
                if plan.next_base is not None and last >= plan.next_base:
                    self.add("offsets.next_segment", ERROR, f"last offset {last} reaches the next segment's base "
                             f"offset {plan.next_base}", path, pos, last)
                # index checks, streaming
                prev_seg_last, prev_max_ts = seg_last, max_ts
                batch_max_ts = batch.max_timestamp
                if ocheck is not None:
                    ocheck.on_batch(pos, prev_seg_last)
                if tcheck is not None:
                    tcheck.on_batch(first_offset, last, prev_max_ts, max(prev_max_ts, batch_max_ts))
                if builder is not None:
                    try:
                        builder.append(BatchSummary(pos, batch.size, last, batch_max_ts))
                    except (KafkaLogError, ValueError):
                        builder = None  # the offset checks above name the cause
                seg_last = last if seg_last is None else max(seg_last, last)
                max_ts = max(max_ts, batch_max_ts)
                # records and control records
                ctl = None
                if self.deep and decoded:
                    self._check_records(batch, pos, path, first_offset, last)
                if is_v2 and batch.is_control:
                    try:
                        ctl = control_record(batch)
                    except KafkaLogError as err:
                        self.add_error("batch.control", ERROR, locate(err, path, pos, batch),
                                       prefix="control record does not parse: ")
                # producer state, transactions, snapshots, leader epochs
                self._compare_snapshots(state, first_offset)
                self._check_epoch(state, batch, pos, path)
                completed, replayed = None, False
                if is_v2 and batch.has_producer_id:
                    state.seen_pids.add(batch.producer_id)
                    if state.compacted:
                        state.before_batch(batch.producer_id)
                if not (is_v2 and batch.is_control and ctl is None and batch.records_count != 0):
                    try:
                        completed, replayed = state.manager.append(batch), True
                    except KafkaLogError:
                        completed = None  # reported by batch.control / batch.records
                else:
                    state.manager.map_end_offset = last + 1
                if is_v2 and batch.has_producer_id and state.compacted:
                    state.after_batch(batch.producer_id, last)
                if xcheck is not None and ctl is not None and ctl.type in (ControlType.ABORT, ControlType.COMMIT):
                    expected = None
                    if completed is not None and completed.is_aborted:
                        expected = state.manager.aborted_txn(completed)
                    # a marker the replay applied without completing a transaction: it had no data
                    xcheck.on_marker(ctl, batch.producer_id, expected, replayed and completed is None, pos, path)
                state.last_offset = last if state.last_offset is None else max(state.last_offset, last)
                state.last_file = path
                first = False
        except KafkaLogError as err:
            err = err.located(file=path)
            if not self._zero_tail(seg, walk_end, plan):
                self.add("batch.structure", ERROR,
                         f"{err.message}; the {seg.size - walk_end} bytes from byte {walk_end} on cannot be read and "
                         f"Kafka's recovery truncates them{'' if plan.is_last else ' and deletes every later segment'}",
                         err.file, err.position, err.offset)
        tail = reader.truncated_tail
        if tail is not None:
            declared = (f", the batch there declares {tail.declared_size} bytes" if tail.declared_size is not None
                        else "")
            severity = WARNING if plan.is_last else ERROR
            consequence = ("Kafka's readers ignore them and recovery truncates them" if plan.is_last else
                           "recovery truncates them and deletes every later segment")
            self.add("segment.truncated_tail", severity,
                     f"{tail.length} bytes after the last whole batch{declared}; {consequence}",
                     path, tail.position, state.last_offset + 1 if state.last_offset is not None else None)
        end_position = walk_end
        # what needs the whole segment
        if ocheck is not None:
            ocheck.finish(end_position, seg_last)
        if tcheck is not None:
            tcheck.finish(seg_last, max_ts, final=not active)
        if builder is not None:
            pre_final = list(builder.time_index.entries)
            built_offsets, built_times = builder.finish()
            if ocheck is not None and ocheck.consistent and oidx.entries != built_offsets.entries:
                self.add("index.mismatch", INFO, _mismatch("offset index", oidx.entries, built_offsets.entries,
                                                          plan.index_interval_bytes), oidx.file)
            if (tcheck is not None and tcheck.consistent and tidx.entries != built_times.entries
                    and not (active and tidx.entries == pre_final)):
                self.add("timeindex.mismatch", INFO, _mismatch("time index", tidx.entries, built_times.entries,
                                                              plan.index_interval_bytes), tidx.file)
        if xcheck is not None:
            xcheck.finish()
        if seg_last is None:  # an empty segment: the log ends at its base offset
            return seg.base_offset if state.last_offset is None else max(seg.base_offset, state.last_offset + 1)
        return state.last_offset + 1

    # -- batches ------------------------------------------------------------------------------------
    def _first_offset(self, batch, pos: int, path: str) -> tuple[int, bool]:
        """The batch's first offset, and False when a legacy wrapper does not decode (reported here)."""
        if isinstance(batch, LegacyBatch):
            try:
                return batch.base_offset, True  # decodes a compressed wrapper (cached for records())
            except KafkaLogError as err:
                self.add_error("batch.records", ERROR, locate(err, path, pos, batch),
                               prefix="compressed wrapper does not decode: ")
                return batch.last_offset, False
        return batch.base_offset, True

    def _check_v2_header(self, batch: RecordBatch, pos: int, path: str) -> None:
        if batch.last_offset_delta < 0:
            self.add("batch.header", ERROR, f"lastOffsetDelta {batch.last_offset_delta} is negative", path, pos + 23,
                     batch.base_offset)
        if batch.records_count < 0:
            self.add("batch.header", ERROR, f"recordsCount {batch.records_count} is negative", path, pos + 57,
                     batch.base_offset)
        elif batch.last_offset_delta >= 0 and batch.records_count > batch.last_offset_delta + 1:
            self.add("batch.header", ERROR, f"recordsCount {batch.records_count} does not fit the offset range "
                     f"[{batch.base_offset}, {batch.last_offset}]", path, pos + 57, batch.base_offset)

    def _check_records(self, batch, pos: int, path: str, first_offset: int, last: int) -> None:
        try:
            records = batch.records()
        except KafkaLogError as err:
            self.add_error("batch.records", ERROR, locate(err, path, pos, batch), prefix="records do not decode: ")
            return
        self.report.counts["records"] += len(records)
        previous = None
        for record in records:
            if (previous is not None and record.offset <= previous) or not first_offset <= record.offset <= last:
                self.add("batch.records", ERROR, f"record offset {record.offset} is not strictly increasing inside "
                         f"the batch's range [{first_offset}, {last}]", path, pos, record.offset)
                return
            previous = record.offset

    def _zero_tail(self, seg: LogSegment, start: int, plan: _SegmentPlan) -> bool:
        """A walk that stopped at zero bytes running to the end of the file: a preallocated, untrimmed
        segment. Reported as such (and read in chunks, so a 1 GiB preallocation costs nothing)."""
        if start >= seg.size:
            return False
        with seg.fs.open_input(seg.log_path) as f:
            pos = start
            while pos < seg.size:
                chunk = f.read_at(min(self.chunk_size, seg.size - pos), pos)
                if not chunk or chunk.count(0) != len(chunk):
                    return False
                pos += len(chunk)
        severity = WARNING if plan.is_last else ERROR
        self.add("segment.zero_tail", severity, f"{seg.size - start} zero bytes after the last batch: a preallocated "
                 "segment that was never trimmed (Kafka reads them as a corrupt batch; recovery truncates them)",
                 seg.log_path, start, None)
        return True

    # -- producer snapshots and leader epochs during the walk -----------------------------------------
    def _compare_snapshots(self, state: _ReplayState, next_first_offset: int | None) -> None:
        """Compare the snapshots whose offset the replay has reached (every batch below it applied)."""
        while state.next_snapshot < len(state.snapshots):
            entry, snap = state.snapshots[state.next_snapshot]
            if next_first_offset is not None and snap.offset > next_first_offset:
                return
            state.next_snapshot += 1
            if next_first_offset is None and state.last_offset is not None and snap.offset > state.last_offset + 1:
                continue  # above the log end: snapshot.range reports it
            if self.deep:
                self._compare_snapshot(state, entry, snap)

    def _compare_snapshot(self, state: _ReplayState, entry: FileEntry, snap: ProducerSnapshot) -> None:
        in_snapshot = {e.producer_id: e for e in snap.entries}
        absent = []
        for pid in sorted(state.seen_pids):
            replayed = state.manager.producers.get(pid)
            if replayed is None:
                continue
            stored = in_snapshot.get(pid)
            if stored is None:
                absent.append(pid)
                continue
            expected = replayed.to_entry()
            self.report.counts["snapshot_producers_compared"] += 1
            fields = expected._fields if state.complete else ("producer_epoch", "last_sequence", "last_offset",
                                                               "offset_delta", "timestamp")
            if not state.complete and expected.last_offset < 0:
                continue
            if state.compacted and stored.last_offset > expected.last_offset:
                # the snapshot describes a batch the cleaner has since removed: it may only be ahead
                fields = [f for f in ("producer_epoch",) if getattr(stored, f) < getattr(expected, f)]
            else:
                if state.compacted or stored.timestamp > expected.timestamp:
                    # a rewrite (the cleaner, a purge) sets a rewritten batch's max timestamp to its
                    # kept records' largest; the snapshot keeps the one it had, as Kafka leaves it
                    fields = [f for f in fields if f != "timestamp"]
                if state.compacted and "current_txn_first_offset" in fields and state.txn_start_cleaned(
                        pid, stored.current_txn_first_offset, expected.current_txn_first_offset):
                    fields.remove("current_txn_first_offset")
            diffs = [f"{f} {getattr(stored, f)} (replay: {getattr(expected, f)})" for f in fields
                     if getattr(stored, f) != getattr(expected, f)]
            if diffs:
                i = snap.entries.index(stored)
                self.add("snapshot.state", ERROR, f"producer {pid}: " + ", ".join(diffs), entry.path,
                         10 + 46 * i, snap.offset)
        if absent:
            shown = ", ".join(map(str, absent[:5])) + (", ..." if len(absent) > 5 else "")
            self.add("snapshot.producer_absent", INFO, f"{len(absent)} producers with batches below offset "
                     f"{snap.offset} are not in the snapshot ({shown}): expired, as Kafka drops producers idle "
                     "for producer.id.expiration.ms", entry.path, None, snap.offset)

    def _check_epoch(self, state: _ReplayState, batch, pos: int, path: str) -> None:
        if not state.epochs or not isinstance(batch, RecordBatch) or batch.partition_leader_epoch < 0:
            return
        if batch.last_offset < state.log_start:
            return  # below the log start: Kafka has truncated the epochs of that data from the cache
        offset = max(batch.base_offset, state.log_start)
        i = bisect_right(state.epoch_starts, offset) - 1
        expected = state.epochs[i].epoch if i >= 0 else None
        if expected != batch.partition_leader_epoch:
            state.epoch_mismatches += 1
            if state.epoch_first_mismatch is None:
                state.epoch_first_mismatch = (offset, batch.partition_leader_epoch,
                                              "no epoch" if expected is None else f"epoch {expected}", path, pos)

    # -- index files ------------------------------------------------------------------------------------
    def _load_index(self, seg: LogSegment, plan: _SegmentPlan, cls, suffix: str, prefix: str, active: bool):
        entry = seg.files.get(suffix)
        if entry is None:
            if plan.standalone or plan.base is None:
                return None
            if active:
                self.add(f"{prefix}.missing", INFO, f"the active segment has no {suffix}: normal, Kafka creates it "
                         "when it opens the segment", seg.path(suffix))
            else:
                consequence = ("Kafka rebuilds it by recovering the segment on load" if suffix == ".index" else
                               "Kafka creates an empty one and does not rebuild it, so time retention falls back to "
                               "the .log file's mtime")
                self.add(f"{prefix}.missing", WARNING, f"the inactive segment has no {suffix}: {consequence}",
                         seg.path(suffix))
            return None
        self.report.counts["index_files" if suffix == ".index" else "time_index_files"] += 1
        try:
            data = seg.fs.read_bytes(entry.path)
        except OSError as err:
            self.add("io.read", ERROR, f"cannot read: {err}", entry.path)
            return None
        index = cls.from_bytes(data, seg.base_offset if plan.base is None else plan.base, file=entry.path)
        self.report.counts["index_entries" if suffix == ".index" else "time_index_entries"] += len(index.entries)
        return self._index_file_checks(index, prefix, entry.path, active)

    def _index_file_checks(self, index, prefix: str, path: str, active: bool):
        """Length, zero tail and Kafka's sanity check; returns the index without its zero tail."""
        size = index.ENTRY.size
        if index.trailing_bytes:
            self.add(f"{prefix}.size", ERROR, f"{len(index.entries) * size + index.trailing_bytes} bytes is not a "
                     f"multiple of the {size}-byte entry: {index.trailing_bytes} bytes of a partial entry",
                     path, len(index.entries) * size)
        zero = index._entry(index.base_offset, (0, 0))
        first_zero = len(index.entries)
        while first_zero > 0 and index.entries[first_zero - 1] == zero:
            first_zero -= 1
        if len(index.entries) - first_zero > 1 or 0 < first_zero < len(index.entries):
            n = len(index.entries) - first_zero
            why = ("normal only for the active segment of a broker that did not stop cleanly" if active else
                   "Kafka trims it when the segment rolls")
            self.add(f"{prefix}.zero_tail", WARNING if active else ERROR,
                     f"{n} all-zero entries at the end: a preallocated index that was never trimmed ({why})",
                     path, first_zero * size, index.base_offset)
            index = replace(index, entries=index.entries[:first_zero])
        try:
            replace(index, trailing_bytes=0).sanity_check()
        except KafkaLogError as err:
            self.add_error(f"{prefix}.sanity", ERROR, err, path)
        return index

    def _load_txn_index(self, seg: LogSegment, base: int | None) -> TransactionIndex | None:
        entry = seg.files.get(".txnindex")
        if entry is None:
            return None
        self.report.counts["txn_index_files"] += 1
        try:
            data = seg.fs.read_bytes(entry.path)
        except OSError as err:
            self.add("io.read", ERROR, f"cannot read: {err}", entry.path)
            return None
        return self._txn_file_checks(data, seg.base_offset if base is None else base, entry.path)

    def _txn_file_checks(self, data: bytes, base: int, path: str) -> TransactionIndex | None:
        if len(data) % TXN_ENTRY_SIZE:
            whole = len(data) - len(data) % TXN_ENTRY_SIZE
            self.add("txnindex.size", WARNING, f"{len(data)} bytes is not a multiple of the {TXN_ENTRY_SIZE}-byte "
                     f"entry: Kafka ignores the {len(data) - whole} bytes of a partial entry", path, whole)
        try:
            txn = TransactionIndex.from_bytes(data, base, file=path)
        except KafkaLogError as err:
            self.add_error("txnindex.parse", ERROR, err, path)
            return None
        self.report.counts["txn_index_entries"] += len(txn.entries)
        try:
            txn.sanity_check()
        except KafkaLogError as err:
            self.add_error("txnindex.sanity", ERROR, err, path,
                           "Kafka's sanity check fails, so it recovers the segment on load: ")
        return txn


# -- streaming index checks --------------------------------------------------------------------------

class _OffsetIndexCheck:
    """Lookup consistency of each entry (o, p), spec §4.4: p is the start of a batch, every batch
    before p has lastOffset < o, and o is not above the segment's last offset."""

    def __init__(self, v: _Validator, index: OffsetIndex):
        self.v, self.index = v, index
        self.by_position = _order(index.entries, lambda e: e.position)
        self.j = 0
        self.bad: set[int] = set()
        self.consistent = True

    def _bad(self, i: int, message: str) -> None:
        self.consistent = False
        self.bad.add(i)
        e = self.index.entries[i]
        self.v.add("index.entry", ERROR, f"entry {i} (offset {e.offset}, position {e.position}) {message}",
                   self.index.file, i * 8, e.offset)

    def on_batch(self, pos: int, last_before: int | None) -> None:
        entries, order = self.index.entries, self.by_position
        while self.j < len(order) and entries[order[self.j]].position < pos:
            self._bad(order[self.j], "does not point at the start of a batch: a lookup would read from the middle "
                      "of a batch")
            self.j += 1
        while self.j < len(order) and entries[order[self.j]].position == pos:
            i = order[self.j]
            if last_before is not None and last_before >= entries[i].offset:
                self._bad(i, f"points at a batch after one whose last offset {last_before} is not below the entry's "
                          "offset: lookups of the offsets between would skip that data")
            self.j += 1

    def finish(self, end_position: int, seg_last: int | None) -> None:
        entries, order = self.index.entries, self.by_position
        for i in order[self.j:]:
            self._bad(i, f"points at or after the end of the last whole batch (byte {end_position})")
        for i, entry in enumerate(entries):
            if i not in self.bad and (seg_last is None or entry.offset > seg_last):
                self._bad(i, f"is above the segment's last offset {seg_last}")


class _TimeIndexCheck:
    """Each entry (T, o): T is the max timestamp of the batches up to o (and so at most the
    segment's max), o is in the segment; an inactive segment ends with its max timestamp (§4.5)."""

    def __init__(self, v: _Validator, index: TimeIndex):
        self.v, self.index = v, index
        self.by_offset = _order(index.entries, lambda e: e.offset)
        self.j = 0
        self.consistent = True

    def _bad(self, i: int, message: str, check: str = "timeindex.entry", severity: str = ERROR) -> None:
        self.consistent = False
        e = self.index.entries[i]
        self.v.add(check, severity, f"entry {i} (timestamp {e.timestamp}, offset {e.offset}) {message}",
                   self.index.file, i * 12, e.offset)

    def on_batch(self, first: int, last: int, max_before: int, max_after: int) -> None:
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
        for i in order[self.j:]:
            beyond = f" and exceeds the segment's max timestamp {seg_max}" if entries[i].timestamp > seg_max else ""
            self._bad(i, f"is above the segment's last offset {seg_last}{beyond}")
        if final and seg_max >= 0 and (not entries or entries[-1].timestamp != seg_max):
            self.consistent = False  # incomplete: no mismatch info on top
            last = f"ends with timestamp {entries[-1].timestamp}" if entries else "is empty"
            self.v.add("timeindex.final_entry", WARNING,
                       f"the inactive segment's time index {last}, not with the segment's max timestamp {seg_max}: "
                       "Kafka takes a segment's largest timestamp from this entry (time retention, compaction lag)",
                       self.index.file, len(entries) * 12 if entries else 0, None)


class _TxnIndexCheck:
    """The `.txnindex` against the segment's transaction markers and a replay of producer state."""

    def __init__(self, v: _Validator, index: TransactionIndex | None, path: str, exact: bool, replay_complete: bool):
        self.v, self.index, self.path = v, index, path
        self.exact = exact  # not compacted: entries must equal what the replay computes
        self.replay_complete = replay_complete
        self.by_last = _order(index.entries if index is not None else [], lambda e: e.last_offset)
        self.j = 0

    def _bad(self, i: int, message: str) -> None:
        e = self.index.entries[i]
        self.v.add("txnindex.entry", ERROR, f"entry {i} {tuple(e)} {message}", self.path, i * TXN_ENTRY_SIZE,
                   e.last_offset)

    def on_marker(self, ctl, producer_id: int, expected: AbortedTxn | None, empty: bool, pos: int,
                  log_path: str) -> None:
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
            e = entries[i]
            if ctl.type != ControlType.ABORT:
                self._bad(i, f"names offset {ctl.offset}, which holds a {ctl.type.name} marker, not an ABORT")
            elif e.producer_id != producer_id:
                self._bad(i, f"names producer {e.producer_id}, but the ABORT marker at {ctl.offset} is producer "
                          f"{producer_id}'s")
            elif e.first_offset > e.last_offset:
                self._bad(i, f"has firstOffset {e.first_offset} above its lastOffset")
            elif self.exact and self.replay_complete and empty:
                self._bad(i, "is for a transaction without data: Kafka indexes no aborted transaction that wrote "
                          "nothing (ProducerAppendInfo.appendEndTxnMarker completes none)")
            elif self.exact and self.replay_complete and expected is not None and (
                    e.first_offset != expected.first_offset or e.last_stable_offset != expected.last_stable_offset):
                self._bad(i, f"differs from the replay of producer state: firstOffset {expected.first_offset}, "
                          f"lastStableOffset {expected.last_stable_offset}")
        if not found and self.exact and ctl.type == ControlType.ABORT and not empty:
            self.v.add("txnindex.missing_entry", ERROR,
                       f"the ABORT marker of producer {producer_id} at offset {ctl.offset} ({log_path}, byte {pos}) "
                       "has no .txnindex entry: READ_COMMITTED consumers would read the aborted data", self.path,
                       None, ctl.offset)

    def _no_marker(self, i: int) -> None:
        self._bad(i, f"has no ABORT marker at its lastOffset {self.index.entries[i].last_offset} in this segment")

    def finish(self) -> None:
        for i in self.by_last[self.j:]:
            self._no_marker(i)


# -- helpers --------------------------------------------------------------------------------------------

def _order(entries: list, key) -> Sequence[int]:
    """Entry numbers in `key` order: a range (no memory) when the file is already in order, as it is
    unless sanity checks fail."""
    if all(key(entries[i - 1]) <= key(entries[i]) for i in range(1, len(entries))):
        return range(len(entries))
    return sorted(range(len(entries)), key=lambda i: (key(entries[i]), i))


def _mismatch(what: str, found: list, built: list, interval: int) -> str:
    for i, (a, b) in enumerate(zip(found, built)):
        if a != b:
            detail = f"entry {i} is {tuple(a)}, recovery builds {tuple(b)}"
            break
    else:
        detail = f"{len(found)} entries, recovery builds {len(built)}"
    return (f"{what} answers lookups correctly but is not what segment recovery builds with "
            f"index.interval.bytes={interval} ({detail}); Kafka's cleaner and append path write coarser entries")


def _checkpoint_line_position(text: str, topic: str, partition: int) -> int | None:
    """The byte position of the line for (topic, partition) in an offset checkpoint."""
    position = 0
    for line in text.splitlines(keepends=True):
        fields = line.split()
        if len(fields) == 3 and fields[0] == topic and fields[1] == str(partition):
            return position
        position += len(line.encode("utf-8"))
    return None


def _line_position(text: str, n: int) -> int | None:
    """The byte position of the 0-based line `n` of `text`."""
    position = 0
    for i, line in enumerate(text.splitlines(keepends=True)):
        if i == n:
            return position
        position += len(line.encode("utf-8"))
    return None
