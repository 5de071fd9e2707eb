"""`kafkalog validate`: check log directories, partition directories and segment files offline.

`plan_validate(paths)` finds what it is given (on the driver, without Spark: every path there, each
directory listed once) and `run_validate(spark_or_None, plan)` walks it, one partition at a time;
`validate_paths(paths)` is the two in one call. Every segment is streamed through
`LogSegment.reader()` (fixed-size chunks), so a 1 GiB log costs one chunk of memory plus the index
files of the segment being read. It returns a `ValidationReport`: a list of findings
(`Problem(check, severity, message, file, position, offset)`), counts of what was checked,
`to_json()`, `findings_table()`, a one-screen `summary()` and `exit_code`. Errors that stop it from
running at all (a path that does not exist) raise `KafkaLogError`; the CLI turns those into exit code
2. `validate_frame` gives the findings as a Spark DataFrame, `write_findings` as a Parquet file or
Delta table.

This module dispatches the paths (a log directory, as storage/logdir.py's `DirListing` lists it or
as a `LogDir` opened already holds it, a partition directory, a file given alone). What belongs to a
log directory (meta.properties, the offset checkpoints against each partition's offsets) is
`validate_logdir`. The report model is `validate_report`; a partition directory's checks are
`validate_partition`, one segment's walk `validate_segment`, the index files' checks
`validate_index`, and the producer-state replay with the snapshot and leader epoch comparisons
`validate_replay`.

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
  and deletes every later segment.
* ``info``: normal states worth knowing, never a problem: absent `.index`/`.timeindex` of the
  active segment (Kafka creates them; the `kafka-2.7.1-zk` fixture has them absent), an offset or
  time index that differs from what segment recovery would build but answers every lookup
  correctly (the cleaner writes coarser entries), checkpoint entries for partitions
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
  ``batch.control_flags``  a control batch without the transactional flag outside __cluster_metadata
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
                           before p has lastOffset ≥ o, or o is above the segment's last offset
  ``index.mismatch``       (info) lookup-consistent, but not what segment recovery builds
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
                           data left)
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
  ``kraft.snapshot``       a KRaft snapshot (`<offset>-<epoch>.checkpoint`, `bootstrap.checkpoint`)
                           KRaft cannot read: a batch's CRC, its structure, the header not first or
                           the footer not last (`validate_kraft`)
  ``kraft.snapshot_range`` `__cluster_metadata-0`'s snapshots against its log as KafkaMetadataLog loads
                           them: no snapshot at or above a log start above 0 (error), a snapshot outside
                           its epoch (error) or beyond the log (warning: Kafka truncates the log to it),
                           below the log start (info: deleted on load)
  ``kraft.quorum_state``   a `quorum-state` that is not the JSON object Kafka writes
  ``partition.leftover``   `.cleaned` / `.swap` / `.deleted` files: an interrupted swap or delete
                           (warning); an error where a `.swap` does not read whole, does not cover the
                           segments it replaces or has an index that does not match it (`swap.check_swaps`):
                           the message says what a broker starting on the directory would do
  ``partition.file_name``  a segment, index or snapshot file whose offset is not written in 20 digits
                           (two files may then claim one base offset)
  ``partition.orphan_index``  index files without a `.log` (Kafka deletes them on load)
  ``partition.empty``      (info) a partition directory without any `.log`
  ``logdir.not_a_log_dir`` a directory with neither partition directories nor Kafka's files
  ``io.read``              a file or directory that could not be read

`kafka-dump-log.sh --index-sanity-check` is ``index.sanity``/``timeindex.sanity``/``*.size``;
`--verify-index-only` is ``index.entry``/``timeindex.entry`` (which accept, as lookups do, the
coarse entries `--verify-index-only` calls mismatches) plus ``index.mismatch``/``timeindex.mismatch``.

Compacted partitions are those with an entry in the log dir's `cleaner-offset-checkpoint` (for a
partition directory given alone, its parent's), or all partitions with `compacted=True`. What the
cleaner leaves that a replay of the cleaned log does not reproduce is in docs/semantics.md
(producer state).

The producer-state replay starts from the snapshot at the first segment's base offset when there
is one. Without it, and with a first segment above offset 0, history before the log start is
unknown: then transaction-index first offsets and last stable offsets, and snapshot fields other
than the last batch's, are not compared.

A single `.log` file given alone is the last segment of an unknown partition: its base offset is
the number in its name (none for other names, such as saved fetch responses, whose offsets are
then only checked for order), and index files beside it are checked when present.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..errors import KafkaLogError, LogDirError, UnreadableFileError
from ..storage.checkpoint import parse_leader_epoch_checkpoint, parse_offset_checkpoint, parse_partition_metadata
from ..storage.fs import FileEntry, LogFileSystem
from ..storage.index import DEFAULT_INDEX_INTERVAL_BYTES, OffsetIndex, TimeIndex
from ..storage.logdir import DirListing, LogDir
from ..storage.meta_properties import META_PROPERTIES
from ..storage.naming import (
    LEADER_EPOCH_CHECKPOINT,
    OFFSET_CHECKPOINT_FILES,
    PARTITION_METADATA,
    parse_partition_dir_name,
    parse_segment_file_name,
)
from ..storage.partition import Partition
from ..storage.producer_state import ProducerStateManager
from ..storage.remote_log import RemoteStorage
from ..storage.segment import LogSegment
from ..storage.snapshot import ProducerSnapshot
from ..storage.tables import write_table
from . import progress
from .validate_index import check_index_file, check_txn_index_file
from .validate_kraft import check_kraft_file
from .validate_logdir import (
    check_checkpoint_ranges,
    check_meta_properties_file,
    read_checkpoints,
    report_unknown_partitions,
)
from .validate_partition import DirContext, PartitionChecks, PartitionResult
from .validate_replay import ReplayState
from .validate_report import ERROR, FINDINGS_SCHEMA, WARNING, Findings, ValidationReport
from .validate_segment import SegmentChecks, SegmentPlan

# What a path given to validate is, as the plan finds it
LOG_DIR, PARTITION_DIR, REMOTE_STORAGE, FILE = "log dir", "partition dir", "remote storage", "file"


@dataclass(frozen=True)
class ValidateTarget:
    """One path given to validate, found by the plan: what it is, and a directory's listing (listed
    once, here; `listing_error`: why it could not be, which the run reports as an `io.read` finding)."""

    fs: LogFileSystem
    path: str
    info: FileEntry
    kind: str
    listing: DirListing | None = None
    listing_error: OSError | None = None


@dataclass(frozen=True)
class ValidatePlan:
    """A validation as asked for, resolved on the driver without Spark (`plan_validate`: also the
    command line's check before anything runs): every path there, each one's kind, each directory
    listed once; what `run_validate` checks and how."""

    paths: tuple[str, ...]
    targets: tuple[ValidateTarget, ...]
    settings: _Settings
    fail_on: str = WARNING


def plan_validate(
    paths: str | LogDir | Iterable[str | LogDir],
    *,
    index_interval_bytes: int | Mapping[str, int] = DEFAULT_INDEX_INTERVAL_BYTES,
    deep: bool = True,
    fail_on: str = WARNING,
    compacted: bool | None = None,
    max_findings_per_check: int = 100,
    chunk_size: int | None = None,
) -> ValidatePlan:
    """What `run_validate` checks: `paths` (log directories, partition directories and segment, index,
    snapshot or checkpoint files, as paths or URIs, or log directories opened already, which are not
    listed again), each found and each directory listed. Raises LogDirError when a path does not exist
    (every path must exist before anything is reported); reads no file.

    `deep` decodes every record (decompressing) and compares producer snapshots with a replay;
    without it batches are checked by header and CRC only. `index_interval_bytes` is the topics'
    `index.interval.bytes` (one value, or topic -> value with Kafka's default for the others), used
    only for the informational comparison with rebuilt indexes.
    `compacted` forces (True/False) instead of reading `cleaner-offset-checkpoint`. At most
    `max_findings_per_check` findings are kept per (check, file); the others are counted in
    `report.suppressed`."""
    if fail_on not in (ERROR, WARNING):
        raise ValueError(f"fail_on must be 'error' or 'warning', not {fail_on!r}")
    given = [paths] if isinstance(paths, (str, LogDir)) else list(paths)
    targets = tuple(_target(p if isinstance(p, LogDir) else str(p)) for p in given)
    settings = _Settings(deep, chunk_size, compacted, index_interval_bytes, max_findings_per_check)
    return ValidatePlan(tuple(_given_name(p) for p in given), targets, settings, fail_on)


def _given_name(path: str | LogDir) -> str:
    return (path.given or path.path) if isinstance(path, LogDir) else str(path)


def _target(path_or_uri: str | LogDir) -> ValidateTarget:
    """What a path is: remote storage, a partition directory (a directory named `<topic>-<partition>`
    that holds no log-dir files: log dirs are often named like `kafka-logs-1`), a log directory, or a
    file given alone."""
    if isinstance(path_or_uri, LogDir):
        opened = path_or_uri
        info = opened.fs.info(opened.path)
        assert info is not None  # LogDir.open found it
        return ValidateTarget(
            opened.fs, opened.path, info, LOG_DIR, opened.listing or DirListing.of(opened.fs, opened.path)
        )
    fs, path, info = LogFileSystem.found(path_or_uri)
    if not info.is_dir:
        return ValidateTarget(fs, path, info, FILE)
    if RemoteStorage.is_remote_storage(fs, path):
        return ValidateTarget(fs, path, info, REMOTE_STORAGE)
    try:
        listing, error = DirListing.of(fs, path), None
    except OSError as err:
        listing, error = None, err
    named_as_partition = parse_partition_dir_name(fs.name(path)) is not None
    if named_as_partition and (listing is None or not listing.holds_log_dir_files()):
        return ValidateTarget(fs, path, info, PARTITION_DIR, listing)  # unlisted: its check says why
    return ValidateTarget(fs, path, info, LOG_DIR, listing, error)


def run_validate(spark, plan: ValidatePlan) -> ValidationReport:
    """The report of `plan`'s checks. With `spark` (None: on the driver), the partitions of a log
    directory are checked on its executors, packed into tasks by bytes; the report is the same."""
    report = ValidationReport(list(plan.paths), fail_on=plan.fail_on, deep=plan.settings.deep)
    partitions = plan.settings.checks(report)
    checks = _PathChecks(partitions.findings, partitions, plan.settings, spark)
    for target in plan.targets:
        report.counts["paths"] += 1
        fs, path = target.fs, target.path
        if target.kind == REMOTE_STORAGE:
            checks.remote_storage(fs, path)
        elif target.kind == PARTITION_DIR:
            entries = target.listing.entries if target.listing is not None else None
            partitions.check(fs, path, DirContext.of_parent(fs, path), entries)
        elif target.kind == LOG_DIR:
            checks.log_dir(fs, path, target.listing, target.listing_error)
        else:
            checks.single_file(fs, target.info)
    return report


def validate_paths(paths: Iterable[str | LogDir], *, spark=None, **options) -> ValidationReport:
    """Validate log directories, partition directories and segment (or index, snapshot,
    checkpoint) files: `run_validate(spark, plan_validate(paths, **options))`, which say what the
    arguments do. Raises LogDirError when a path does not exist."""
    return run_validate(spark, plan_validate(paths, **options))


def validate_frame(spark, paths: Iterable[str], **options):
    """The findings of `validate_paths(paths, spark=spark, **options)` as a DataFrame of
    FINDINGS_SCHEMA (check, severity, file, position, offset, message, count): every finding of the
    report, those of the partitions (checked on the executors) and those checked on the driver
    (meta.properties, checkpoint files and their ranges against each partition, remote storage,
    files given alone), one row each with count 1; then a row per (check, file, severity) whose
    findings beyond `max_findings_per_check` were counted, not kept, with count how many and no
    position or offset. No rows: nothing found (the exit code would be 0).

    The checks run when it is called, not in the frame's actions: the findings come back to the
    driver, where the report is made from them (its counts and exit code need them all), and the
    frame is that table (a local relation, bounded by the cap), so querying it twice reads the log
    once. DataFrames only: a Spark Connect session runs it too."""
    from ..spark.scan import spark_schema

    report = validate_paths(paths, spark=spark, **options)
    return spark.createDataFrame(report.findings_table(), spark_schema(FINDINGS_SCHEMA))


def write_findings(report: ValidationReport, path_or_uri: str, table_format: str = "parquet") -> None:
    """Write `report.findings_table()` to `path_or_uri` (a path or URI), replacing what is there: a
    Parquet file, or a Delta table (with the `deltalake` package; the table's history keeps the
    earlier runs' findings)."""
    if table_format not in ("parquet", "delta"):
        raise ValueError(f"table_format must be 'parquet' or 'delta', not {table_format!r}")
    write_table(path_or_uri, report.findings_table(), table_format, what="the findings")


@dataclass(frozen=True)
class _Settings:
    """How partitions are checked: what an executor needs to check one as the driver would."""

    deep: bool
    chunk_size: int | None
    compacted: bool | None
    index_interval_bytes: int | Mapping[str, int]
    max_findings_per_check: int

    def checks(self, report: ValidationReport) -> PartitionChecks:
        findings = Findings(report, self.max_findings_per_check)
        return PartitionChecks(
            findings,
            SegmentChecks(findings, deep=self.deep, chunk_size=self.chunk_size),
            compacted=self.compacted,
            index_interval_bytes=self.index_interval_bytes,
        )


class _PathChecks:
    """The checks of a log directory and of a file given alone; partition directories are
    `PartitionChecks`'."""

    def __init__(self, findings: Findings, partitions: PartitionChecks, settings: _Settings, spark=None):
        self.findings = findings
        self.partitions = partitions
        self.settings = settings
        self.spark = spark

    # -- log directories ----------------------------------------------------------------------------------
    def log_dir(self, fs: LogFileSystem, path: str, listing: DirListing | None, error: OSError | None) -> None:
        """A log directory, from the plan's listing (None: it could not be listed, for `error`)."""
        if listing is None:
            self.findings.add("io.read", ERROR, f"cannot list the directory: {error}", path)
            return
        names = {e.name: e for e in listing.entries}
        partition_dirs = listing.partition_dirs
        if not listing.holds_log_dir_files():
            self.findings.add(
                "logdir.not_a_log_dir",
                WARNING,
                "neither partition directories (<topic>-<partition>) nor Kafka's log-dir files "
                "(meta.properties, checkpoint files): nothing was validated",
                path,
            )
            return
        self.findings.counts["log_dirs"] += 1
        entry = names.get(META_PROPERTIES)
        if entry is not None and not entry.is_dir:
            check_meta_properties_file(self.findings, fs, entry.path)
        ctx, checkpoint_texts = read_checkpoints(self.findings, fs, names)
        checked = self._check_partitions(fs, [e.path for e, _ in partition_dirs], ctx)
        for (_, (topic, partition)), (partition_report, result) in zip(partition_dirs, checked):
            self.findings.merge(partition_report)
            if result is not None:
                check_checkpoint_ranges(self.findings, fs, path, ctx, checkpoint_texts, topic, partition, result)
        report_unknown_partitions(self.findings, fs, path, ctx, {tp for _, tp in partition_dirs})

    def _check_partitions(
        self, fs: LogFileSystem, paths: list[str], ctx: DirContext
    ) -> list[tuple[ValidationReport, PartitionResult | None]]:
        """Each partition's findings in a report of its own, and its offsets: on the driver, one
        after the other, or with a session on its executors (the work is the same)."""
        settings = self.settings

        def check(listed: tuple[str, list[FileEntry] | None]) -> tuple[ValidationReport, PartitionResult | None]:
            path, entries = listed
            report = ValidationReport([path], deep=settings.deep)
            return report, settings.checks(report).check(fs, path, ctx, entries)

        # each directory listed once, here: its .log bytes pack the tasks and count progress, and
        # its check reads the same listing (one LIST request a partition on an object store)
        listings = [(path, Partition.list_entries(fs, path)) for path in paths]
        sizes = {path: sum(e.size for e in entries or () if e.name.endswith(".log")) for path, entries in listings}
        totals = progress.totals(paths, sizes.__getitem__)
        if self.spark is None:
            checked = []
            with progress.phase("validate", "check", unit="partition", **totals) as counted:
                for listed in listings:
                    checked.append(check(listed))
                    counted.advance(1, sizes[listed[0]])
            return checked
        from ..spark.progress import task_feed
        from ..spark.scan import pack_tasks
        from ..spark.tasks import run_tasks

        tasks = pack_tasks(self.spark, listings, lambda listed: sizes[listed[0]])
        with progress.phase("validate", "check", unit="partition", feed=task_feed(self.spark), **totals):
            return run_tasks(self.spark, tasks, check)

    def remote_storage(self, fs: LogFileSystem, path: str) -> None:
        """A LocalTieredStorage directory (tiered storage): each remote partition's segments."""
        try:
            remote_partitions = RemoteStorage.at(fs, path).partitions()
        except KafkaLogError as err:
            self.findings.add_error("remote.layout", ERROR, err, path, "not LocalTieredStorage's layout: ")
            return
        for remote in remote_partitions:
            for file in remote.incomplete:
                self.findings.add(
                    "remote.incomplete_fileset",
                    WARNING,
                    "a remote segment without all of its files (a copy in progress or interrupted): not read",
                    file,
                )
            part = Partition(remote.fs, remote.path, remote.topic, remote.partition, segments=remote.segments)
            self.partitions.check_segments(part)

    # -- single files ---------------------------------------------------------------------------------------
    def single_file(self, fs: LogFileSystem, info: FileEntry) -> None:
        name = info.name
        parent = info.path.rsplit("/", 1)[0] if "/" in info.path else "."
        if name in OFFSET_CHECKPOINT_FILES or name == LEADER_EPOCH_CHECKPOINT or name == PARTITION_METADATA:
            self._single_checkpoint(fs, info)
            return
        if name == META_PROPERTIES:
            check_meta_properties_file(self.findings, fs, info.path)
            return
        if check_kraft_file(self.findings, fs, info):
            return
        parsed = parse_segment_file_name(name)
        if parsed is not None and parsed.state is None and parsed.kind == ".snapshot":
            self._single_snapshot(fs, info, parsed.base_offset)
            return
        if parsed is not None and parsed.state is None and parsed.kind != ".log":
            log = fs.info(fs.join(parent, f"{parsed.base_offset:020d}.log"))
            if log is None:
                self._single_index(fs, info, parsed.kind, parsed.base_offset)
                return
            info, parsed = log, parse_segment_file_name(log.name)  # an index file: check its segment
        if not name.endswith(".log") and (parsed is None or parsed.kind != ".log"):
            raise LogDirError(
                "not a log directory, partition directory, segment, index, snapshot or checkpoint file", file=info.path
            )
        self._single_segment(
            fs, info, parent, parsed.base_offset if parsed is not None and parsed.state is None else None
        )

    def _single_segment(self, fs: LogFileSystem, info: FileEntry, parent: str, base: int | None) -> None:
        """A `.log` given alone: the last segment of an unknown partition, with the index files
        beside it when its name gives a base offset."""
        segment = LogSegment(fs, parent, base or 0, {".log": info})
        if base is not None:
            for kind in (".index", ".timeindex", ".txnindex"):
                sibling = fs.info(fs.join(parent, f"{base:020d}{kind}"))
                if sibling is not None:
                    segment.files[kind] = sibling
        state = ReplayState(
            ProducerStateManager(base or 0), complete=not base, snapshots=[], epochs=None, epoch_file=None
        )
        topic = parse_partition_dir_name(fs.name(parent)) if base is not None else None
        plan = SegmentPlan(
            segment,
            base,
            None,
            True,
            standalone=True,
            index_interval_bytes=self.partitions.interval(topic.topic if topic else None),
        )
        try:
            self.partitions.segments.check(plan, state, exact_txn=False)
        except UnreadableFileError as err:
            self.findings.add_error("io.read", ERROR, err, info.path)
        except OSError as err:
            self.findings.add("io.read", ERROR, f"cannot read the segment: {err}", info.path)

    def _single_snapshot(self, fs: LogFileSystem, info: FileEntry, offset: int) -> None:
        self.findings.counts["snapshots"] += 1
        try:
            ProducerSnapshot.from_bytes(fs.read_bytes(info.path), offset, file=info.path)
        except KafkaLogError as err:
            self.findings.add("snapshot.parse", ERROR, err.message, info.path, err.position, offset)

    def _single_checkpoint(self, fs: LogFileSystem, info: FileEntry) -> None:
        self.findings.counts["checkpoint_files"] += 1
        text = fs.read_bytes(info.path).decode("utf-8", "replace")
        try:
            if info.name == LEADER_EPOCH_CHECKPOINT:
                parse_leader_epoch_checkpoint(text, file=info.path)
            elif info.name == PARTITION_METADATA:
                parse_partition_metadata(text, file=info.path)
            else:
                parse_offset_checkpoint(text, file=info.path)
        except KafkaLogError as err:
            check = {LEADER_EPOCH_CHECKPOINT: "leader_epoch.parse", PARTITION_METADATA: "partition_metadata.parse"}.get(
                info.name, "checkpoint.parse"
            )
            self.findings.add_error(check, ERROR, err, info.path)

    def _single_index(self, fs: LogFileSystem, info: FileEntry, kind: str, base: int) -> None:
        """An index file without its .log: only what can be checked from the file itself."""
        data = fs.read_bytes(info.path)
        if kind == ".txnindex":
            check_txn_index_file(self.findings, data, base, info.path)
            return
        cls, prefix = (OffsetIndex, "index") if kind == ".index" else (TimeIndex, "timeindex")
        check_index_file(self.findings, cls.from_bytes(data, base, file=info.path), prefix, info.path, active=True)
