"""Retention of a Kafka log directory offline: `retain()`, the API behind `kafkalog retain`.

    from kafkalog.operations.retain import retain

    report = retain("/var/lib/kafka/data", now_ms=1_700_000_000_000, dry_run=True,
                    config={"retention.ms": "604800000"})
    print(report.summary())

What it does, per partition:
Kafka's deleteOldSegments -- log start offset breach, then for `cleanup.policy` with `delete` size
(`retention.bytes`) and time (`retention.ms`) breach, each a prefix scan that never passes the high
watermark, rolling a new empty segment when every segment goes; deleteRecords from the JSON file of
`kafka-delete-records.sh` (KIP-107); consumed retention (KIP-68, `retention.commitoffset.enable` and
`retention.commitoffset.ms`): segments older than the consumed time go once every consumer group of
the partition has committed past them, `retention.ms` remaining the forced backstop. Committed
offsets come from the log dir's own `__consumer_offsets`, or from a CSV, JSON, Parquet or Delta file
or table with columns group, topic, partition, offset. With `truncate_below_start`, records below the
log start offset also leave the segment that holds it (offsets preserved).

Spark is not needed: every decision is taken from segment metadata on the driver. Reading a Delta
table of committed offsets uses the `deltalake` package (the `spark` extra installs it).
"""

from __future__ import annotations

import fnmatch
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..config import ConfigResolver, TopicConfig, resolver_of
from ..errors import ConfigError, KafkaLogError
from ..rules.retention import (
    CommittedOffsets,
    DeleteRecordsError,
    RemoteLog,
    RetentionOutcome,
    effective_config,
    remote_log_enabled,
)
from ..storage.destination import destination
from ..storage.fs import LogFileSystem
from ..storage.logdir import LogDir
from ..storage.naming import KRAFT_METADATA_NOT_REWRITTEN, OFFSET_CHECKPOINT_FILES, is_kraft_metadata
from ..storage.partition import Partition
from ..storage.remote_log import RemoteLogView, open_remote_log
from ..storage.swap import FaultHook, check_swaps, no_fault
from ..storage.tables import TableError, detect_format, read_table
from . import clock, progress
from .retain_partition import (
    MISSING_HW_LOG_END,
    MISSING_HW_LOG_START,
    PartitionPlan,
    plan_partition,
    read_committed_offsets,
)
from .retain_swap import apply_in_place, ensure_changeable, recover

__all__ = [
    "retain",
    "plan_retain",
    "run_retain",
    "RetainPlan",
    "parse_delete_records",
    "load_delete_records",
    "load_committed_offsets",
    "group_filter",
    "CommittedOffsets",
    "RetentionReport",
    "DeleteRecordsError",
    "DeleteRecordsFileError",
    "MISSING_HW_LOG_START",
    "MISSING_HW_LOG_END",
]

log = logging.getLogger("kafkalog")

COMMITTED_COLUMNS = ("group", "topic", "partition", "offset")

ConfigFor = Callable[[str], TopicConfig]


class DeleteRecordsFileError(KafkaLogError):
    """A deleteRecords JSON file that kafka-delete-records.sh refuses (its message)."""


def retain(
    log_dir: str,
    *,
    fault: FaultHook = no_fault,
    **options,
) -> RetentionReport:
    """Apply retention to the log directory `log_dir` (a path or URI) and return the report:
    `run_retain` of `plan_retain` (its keyword arguments: `options`). `fault(step, name)`: a test
    hook called after each step of an in-place change."""
    return run_retain(plan_retain(LogDir.open(log_dir), uri=log_dir, **options), fault=fault)


@dataclass
class RetainPlan:
    """A retention run, checked before the log dir changes (`plan_retain`): the opened log dir, where
    it is reached (`uri`) and the run's inputs, read and checked. Each partition's plan is made by
    `run_retain`, under the broker's lock (in place) or on the copy (`output`): a plan made before
    the lock could be out of date by the time it is applied."""

    log_dir: LogDir
    uri: str
    config_for: ConfigFor
    now_ms: int
    topics: Iterable[str] | None = None
    delete_records: Mapping[tuple[str, int], int] | None = None
    truncate_below_start: bool = False
    committed: CommittedOffsets | Callable[[LogDir], CommittedOffsets] | None = None
    output: str | None = None
    dry_run: bool = False
    missing_high_watermark: str = MISSING_HW_LOG_START
    remote_storage: str | None = None
    follow_symlinks: bool = False


def plan_retain(
    log_dir: LogDir,
    *,
    uri: str | None = None,
    config: ConfigResolver | Mapping[str, str] | None = None,
    now_ms: int | None = None,
    topics: Iterable[str] | None = None,
    delete_records: str | Mapping[tuple[str, int], int] | None = None,
    truncate_below_start: bool = False,
    committed_offsets: str | CommittedOffsets | Mapping[tuple[str, str, int], int | None] | None = None,
    include_groups: Sequence[str] = (),
    exclude_groups: Sequence[str] = (),
    output: str | None = None,
    dry_run: bool = False,
    missing_high_watermark: str = MISSING_HW_LOG_START,
    remote_storage: str | None = None,
    follow_symlinks: bool = False,
) -> RetainPlan:
    """Check the inputs of retention over the opened `log_dir` (`uri`: its path or URI; default: its
    path), reading the files they name, before anything changes.

    `config`: a ConfigResolver, or Kafka topic settings for every topic (`{"retention.ms": "1000"}`).
    `now_ms`: the clock (default: now). `topics`: only these topics. `delete_records`: the path of a
    kafka-delete-records.sh JSON file, or {(topic, partition): offset} (-1: the high watermark).
    `committed_offsets`: a CSV/JSON/Parquet/Delta path, a CommittedOffsets or a mapping
    {(group, topic, partition): offset}; default: the log dir's own `__consumer_offsets`, read only
    when a topic has consumed retention enabled. `include_groups`/`exclude_groups`: group name
    patterns (fnmatch). `output`: write a new log directory there, the input untouched; else in
    place (refused while a broker holds the directory's lock, and where a partition directory is a
    symbolic link unless `follow_symlinks`). `dry_run`: plan and report only.
    `missing_high_watermark`: "log-start" (Kafka: without a replication-offset-checkpoint entry
    nothing can be deleted) or "log-end" (trust the log end offset). `remote_storage`: a
    LocalTieredStorage directory holding the remote segments of topics with tiered storage, which
    (with the log dir's own `__remote_log_metadata`) tells which local segments are uploaded."""
    resolver = resolver_of(config)
    if missing_high_watermark not in (MISSING_HW_LOG_START, MISSING_HW_LOG_END):
        raise ConfigError(f"missing_high_watermark must be {MISSING_HW_LOG_START!r} or {MISSING_HW_LOG_END!r}")
    requests = load_delete_records(delete_records) if isinstance(delete_records, str) else delete_records
    keep = group_filter(include_groups, exclude_groups)
    committed: CommittedOffsets | Callable[[LogDir], CommittedOffsets]
    if committed_offsets is None:

        def committed(log_dir_):
            return read_committed_offsets(log_dir_).filtered(keep)
    elif isinstance(committed_offsets, CommittedOffsets):
        committed = committed_offsets.filtered(keep)
    elif isinstance(committed_offsets, str):
        committed = load_committed_offsets(committed_offsets).filtered(keep)
    else:
        committed = CommittedOffsets(dict(committed_offsets), "mapping").filtered(keep)
    return RetainPlan(
        log_dir,
        log_dir.path if uri is None else str(uri),
        config_function(resolver),
        clock.now_ms(now_ms),
        topics,
        requests,
        truncate_below_start,
        committed,
        output,
        dry_run,
        missing_high_watermark,
        remote_storage,
        follow_symlinks,
    )


def config_function(resolver: ConfigResolver) -> Callable:
    """topic -> effective TopicConfig; Kafka's internal topics stay compacted unless configured."""

    def config_for(topic: str):
        return effective_config(resolver.for_topic(topic), topic, resolver.per_topic.get(topic, {}))

    return config_for


def group_filter(include: Sequence[str] = (), exclude: Sequence[str] = ()) -> Callable[[str], bool]:
    """Keep groups matching any `include` pattern (all when none) and no `exclude` pattern."""
    include, exclude = _patterns(include), _patterns(exclude)

    def keep(group: str) -> bool:
        if include and not any(fnmatch.fnmatchcase(group, p) for p in include):
            return False
        return not any(fnmatch.fnmatchcase(group, p) for p in exclude)

    return keep


def _patterns(values: Sequence[str]) -> list[str]:
    out = []
    for value in values:
        out += [p.strip() for p in value.split(",") if p.strip()]
    return out


# -- kafka-delete-records.sh's JSON file ----------------------------------------------------------------------


def parse_delete_records(text: str, file: str | None = None) -> dict[tuple[str, int], int]:
    """`{"partitions":[{"topic":..,"partition":..,"offset":..}],"version":1}` -> {(topic, partition):
    offset}, refused with kafka-delete-records.sh's messages (the version is optional, 1 only;
    duplicate partitions are refused)."""

    def fail(message: str):
        return DeleteRecordsFileError(message, file=file)

    if not text.strip():
        raise fail("The input string shouldn't be empty")
    try:
        data = json.loads(text)
    except ValueError:
        raise fail("The input string is not a valid JSON") from None
    if not isinstance(data, dict):
        raise fail(f"Expected JSON object, received {json.dumps(data)}")
    version = data.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool):
        raise fail(f"Expected `Integer` value, received {json.dumps(version)}")
    if version != 1:
        raise fail(f"Not supported version field value {version}")
    if "partitions" not in data:
        raise fail("Missing partitions field")
    partitions = data["partitions"]
    if not isinstance(partitions, list):
        raise fail(f"Expected JSON array, received {json.dumps(partitions)}")
    out: dict[tuple[str, int], int] = {}
    duplicates = []
    for entry in partitions:
        if not isinstance(entry, dict):
            raise fail(f"Expected JSON object, received {json.dumps(entry)}")
        for name in ("topic", "partition", "offset"):
            if name not in entry:
                raise fail(f"No such field exists: `{name}`")
        topic, partition, offset = entry["topic"], entry["partition"], entry["offset"]
        if not isinstance(topic, str):
            raise fail(f"Expected `String` value, received {json.dumps(topic)}")
        if not _is_int(partition, 32):
            raise fail(f"Expected `Integer` value, received {json.dumps(partition)}")
        if not _is_int(offset, 64):
            raise fail(f"Expected `Long` value, received {json.dumps(offset)}")
        key = (topic, partition)
        if key in out and f"{topic}-{partition}" not in duplicates:
            duplicates.append(f"{topic}-{partition}")
        out[key] = offset
    if duplicates:
        raise fail(f"Offset json file contains duplicate topic partitions: {','.join(duplicates)}")
    return out


def _is_int(value, bits: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(1 << (bits - 1)) <= value < (1 << (bits - 1))


def load_delete_records(path_or_uri: str) -> dict[tuple[str, int], int]:
    fs, path = LogFileSystem.for_path(path_or_uri)
    return parse_delete_records(fs.read_bytes(path).decode("utf-8"), file=path)


# -- committed offsets from a file or table ---------------------------------------------------------------------


def load_committed_offsets(path_or_uri: str) -> CommittedOffsets:
    """Committed offsets from CSV (a header row naming group, topic, partition, offset), JSON (a list
    of objects, an object with a "commits" or "offsets" list, or JSON Lines), Parquet (a file or a
    directory of files) or a Delta table (a directory with `_delta_log`, read with `deltalake`).
    An empty or negative offset is an offset that is not known."""
    fs, path = LogFileSystem.for_path(path_or_uri)
    if not fs.exists(path):
        raise KafkaLogError("no such file or directory", file=path)
    try:
        fmt = detect_format(path_or_uri)
    except TableError:
        raise KafkaLogError(
            "committed offsets: expected a .csv, .json, .jsonl or .parquet file, a Parquet directory or a Delta table",
            file=path,
        ) from None
    if fmt == "json":  # a list of objects, or an object holding one, as well as JSON Lines
        rows = _json_rows(fs.read_bytes(path).decode("utf-8"), path)
    else:
        rows = read_table(path_or_uri, fmt).to_pylist()
    return CommittedOffsets(_offsets_from_rows(rows, path), path_or_uri)


def _offsets_from_rows(rows: Iterable[Mapping], path: str) -> dict[tuple[str, str, int], int | None]:
    out: dict[tuple[str, str, int], int | None] = {}
    for i, row in enumerate(rows):
        missing = [c for c in COMMITTED_COLUMNS if c not in row]
        if missing:
            raise KafkaLogError(
                f"row {i + 1}: missing column(s) {', '.join(missing)}; expected {', '.join(COMMITTED_COLUMNS)}",
                file=path,
            )
        try:
            group, topic, partition = str(row["group"]), str(row["topic"]), int(row["partition"])
            raw = row["offset"]
            offset = None if raw is None or str(raw).strip() == "" else int(raw)
        except (TypeError, ValueError):
            raise KafkaLogError(f"row {i + 1}: partition and offset must be integers: {dict(row)}", file=path) from None
        out[(group, topic, partition)] = offset if offset is None or offset >= 0 else None
    return out


def _json_rows(text: str, path: str) -> list[dict]:
    stripped = text.strip()
    try:
        data = json.loads(stripped) if stripped else []
    except ValueError:
        try:
            data = [json.loads(line) for line in stripped.splitlines() if line.strip()]
        except ValueError as err:
            raise KafkaLogError(f"not JSON nor JSON Lines: {err}", file=path) from None
    if isinstance(data, dict):
        data = data.get("commits", data.get("offsets"))
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise KafkaLogError("expected a list of {group, topic, partition, offset} objects", file=path)
    return data


# -- the report and the run over a log directory -------------------------------------------------------


@dataclass
class RetentionReport:
    log_dir: str
    output: str | None
    dry_run: bool
    now_ms: int
    partitions: list[PartitionPlan] = field(default_factory=list)
    committed_offsets: CommittedOffsets | None = None
    delete_records_unknown: list[tuple[str, int, int]] = field(default_factory=list)
    delete_records_unselected: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def delete_records_results(self) -> list[dict]:
        """One line per requested partition, as kafka-delete-records.sh reports them."""
        out = []
        for plan in self.partitions:
            if plan.delete_records is not None:
                out.append({"topic": plan.topic, "partition": plan.partition, **plan.delete_records.to_dict()})
        for topic, partition, offset in self.delete_records_unknown:
            out.append(
                {
                    "topic": topic,
                    "partition": partition,
                    "requestedOffset": offset,
                    "error": {
                        "code": "UNKNOWN_TOPIC_OR_PARTITION",
                        "message": "This server does not host this topic-partition.",
                    },
                }
            )
        for topic, partition, offset in self.delete_records_unselected:
            out.append(
                {
                    "topic": topic,
                    "partition": partition,
                    "requestedOffset": offset,
                    "error": {"code": "NOT_SELECTED", "message": f"topic {topic} is not among the selected topics"},
                }
            )
        return sorted(out, key=lambda r: (r["topic"], r["partition"]))

    @property
    def delete_records_failed(self) -> bool:
        return any("error" in r for r in self.delete_records_results)

    def totals(self) -> dict:
        by_reason: dict[str, int] = {}
        for plan in self.partitions:
            for d in plan.deleted:
                by_reason[d.reason] = by_reason.get(d.reason, 0) + 1
        return {
            "partitions": len(self.partitions),
            "partitionsChanged": sum(p.changed for p in self.partitions),
            "segmentsDeleted": sum(len(p.deleted) for p in self.partitions),
            "bytesDeleted": sum(d.segment.size for p in self.partitions for d in p.deleted),
            "segmentsRolled": sum(p.outcome.rolled_at is not None for p in self.partitions),
            "segmentsTruncated": sum(p.truncation is not None for p in self.partitions),
            "recordsTruncated": sum(p.truncation.records_removed for p in self.partitions if p.truncation),
            "snapshotsDeleted": sum(len(p.snapshots_to_delete) for p in self.partitions),
            "deletedByReason": by_reason,
        }

    def to_dict(self) -> dict:
        co = self.committed_offsets
        return {
            "version": 1,
            "logDir": self.log_dir,
            "output": self.output,
            "dryRun": self.dry_run,
            "nowMs": self.now_ms,
            "committedOffsets": None
            if co is None
            else {"source": co.source, "groups": co.groups, "entries": len(co.offsets)},
            "totals": self.totals(),
            "deleteRecords": self.delete_records_results,
            "partitions": [p.to_dict() for p in self.partitions],
        }

    def all_data_deleted(self) -> list[str]:
        """A line for each partition that keeps no record (PartitionPlan.deletes_all_data): a wrong
        clock or setting shows here, in the summary of a dry run and before a run deletes."""
        return [p.all_data_deleted_line(self.now_ms, self.dry_run) for p in self.partitions if p.deletes_all_data]

    def summary(self, max_partitions: int = 40) -> str:
        t = self.totals()
        mode = "dry run" if self.dry_run else (f"written to {self.output}" if self.output else "in place")
        lines = [
            f"retain {self.log_dir} ({mode}, now={clock.stamp(self.now_ms)}): {t['partitionsChanged']} of "
            f"{t['partitions']} partitions change, {t['segmentsDeleted']} segments ({t['bytesDeleted']} bytes) deleted"
            + (f", {t['segmentsRolled']} rolled" if t["segmentsRolled"] else "")
            + (
                f", {t['recordsTruncated']} records truncated below the log start offset"
                if t["segmentsTruncated"]
                else ""
            )
        ]
        lines += [f"WARNING: {line}" for line in self.all_data_deleted()]
        shown = [
            p
            for p in self.partitions
            if p.changed or p.skipped or p.remote or (p.consumed and p.consumed.enabled and p.consumed.reason)
        ]
        for plan in shown[:max_partitions]:
            reasons = ", ".join(f"{n} by {r}" for r, n in plan.to_dict()["deletedByReason"].items())
            line = (
                f"  {plan.topic}-{plan.partition}: log start {plan.log_start_offset} -> "
                f"{plan.new_log_start_offset}, {len(plan.deleted)} of {len(plan.segments)} segments deleted"
                + (f" ({reasons})" if reasons else "")
            )
            if plan.skipped:
                line = f"  {plan.topic}-{plan.partition}: skipped: {plan.skipped}"
            lines.append(line)
            if plan.remote is not None:
                lines += [f"    {note}" for note in plan.notes if note.startswith("tiered storage")]
            c = plan.consumed
            if c is not None and c.enabled and c.reason:
                lines.append(f"    consumed retention: {c.reason}")
            if c is not None:
                for g in c.holding_back:
                    lines.append(
                        f"    group {g.group} (offset {g.committed_offset}) holds back offsets "
                        f"[{g.from_offset}, {g.to_offset}) in {g.segments} segment(s)"
                    )
                for g in c.would_lose:
                    lines.append(
                        f"    group {g.group} (offset {g.committed_offset}) loses unconsumed offsets "
                        f"[{g.from_offset}, {g.to_offset}) to forced retention"
                    )
        if len(shown) > max_partitions:
            lines.append(f"  ... {len(shown) - max_partitions} more partitions (the JSON report lists all)")
        if self.delete_records_results:
            lines.append("Records delete operation completed:")
            for r in self.delete_records_results:
                if "error" in r:
                    lines.append(f"partition: {r['topic']}-{r['partition']}\terror: {r['error']['message']}")
                else:
                    lines.append(f"partition: {r['topic']}-{r['partition']}\tlow_watermark: {r['lowWatermark']}")
        return "\n".join(lines)


INTERRUPTED = (
    "an interrupted rewrite left .cleaned/.swap/.deleted files or index files without a .log; a run "
    "without --dry-run recovers them first"
)


def run_retain(plan: RetainPlan, *, fault: FaultHook = no_fault) -> RetentionReport:
    """Retention over the plan's log directory: plan every selected partition, then apply in place,
    or in a complete copy at `output` (the input untouched), or (`dry_run`) only report.

    `committed` is read from the log dir (when it is a function) only when some selected topic has
    consumed retention enabled. Interrupted swaps are recovered first. Every partition is planned
    before any is changed, so unreadable input changes nothing (storage/destination.py: the
    broker's lock, and an output that appears under its name only when whole). `fault(step, name)`
    is called after each step of an in-place change (a test hook that may raise)."""
    dry_run, now_ms = plan.dry_run, plan.now_ms
    with destination(plan.uri, plan.output, dry_run=dry_run, follow_symlinks=plan.follow_symlinks) as target:
        copied = target.path != target.source  # with an output: the copy, retained in place
        log_dir = LogDir.open(target.path) if copied else plan.log_dir
        report, work = _plan(log_dir, plan)
        report.log_dir, report.output = target.source, plan.output
        for line in [] if dry_run else report.all_data_deleted():  # a dry run's summary says it
            log.warning("retain: %s", line)
        if not dry_run:
            for part, partition_plan in work:  # a file that cannot be changed stops the run before any changes
                ensure_changeable(part, partition_plan, log_dir)
            for part, partition_plan in progress.track(work, "retain", "apply", "partition"):
                apply_in_place(part, partition_plan, log_dir, now_ms=now_ms, fault=fault)
        return report


def _plan(log_dir: LogDir, run: RetainPlan) -> tuple[RetentionReport, list]:
    """Recover (unless a dry run) and plan every selected partition: the report, and the
    (partition, plan) pairs to apply."""
    wanted = None if run.topics is None else set(run.topics)
    now_ms, dry_run, committed = run.now_ms, run.dry_run, run.committed
    log_dir.check_topics(wanted)
    selected = {tp for tp in log_dir.topic_partitions if wanted is None or tp[0] in wanted}
    requests = dict(run.delete_records or {})
    report = RetentionReport(log_dir.path, None, dry_run, now_ms)
    report.delete_records_unknown = sorted(
        (t, p, o)
        for (t, p), o in requests.items()  # a broker: not a topic
        if (t, p) not in log_dir.partition_paths or is_kraft_metadata(t)
    )
    report.delete_records_unselected = sorted(
        (t, p, o)
        for (t, p), o in requests.items()
        if (t, p) in log_dir.partition_paths and (t, p) not in selected and not is_kraft_metadata(t)
    )
    configs = {topic: run.config_for(topic) for topic in sorted({t for t, _ in selected})}
    if callable(committed):
        wants = any(c.delete and c.retention_commitoffset_enable for c in configs.values())
        committed = committed(log_dir) if wants else None
    report.committed_offsets = committed
    checkpoints = {name: log_dir.read_checkpoint(name) for name in OFFSET_CHECKPOINT_FILES}
    tiered = any(remote_log_enabled(configs[t], t) for t, _ in selected)
    remote_view = open_remote_log(log_dir, run.remote_storage) if tiered else None
    parts = {tp: log_dir.partition(*tp) for tp in sorted(selected)}
    for tp, part in parts.items():  # before an interrupted swap is recovered by names it cannot trust
        if not is_kraft_metadata(tp[0]):
            part.ensure_well_named()
    if not dry_run:  # every leftover swap is checked before any partition is recovered
        for tp, part in parts.items():
            if part.in_flight and not is_kraft_metadata(tp[0]):
                check_swaps(log_dir.fs, part.path)
    work = []
    for tp in progress.track(sorted(selected), "retain", "plan", "partition"):
        part = parts[tp]
        if is_kraft_metadata(tp[0]):  # reported, never retained
            report.partitions.append(_skipped(tp, part, configs[tp[0]], KRAFT_METADATA_NOT_REWRITTEN))
            continue
        recovered = []
        if part.in_flight or part.orphan_indexes:
            if dry_run:
                report.partitions.append(_skipped(tp, part, configs[tp[0]], INTERRUPTED))
                continue
            recovered = recover(log_dir.fs, part.path)
            part = log_dir.partition(*tp)
        plan = plan_partition(
            part,
            config=configs[tp[0]],
            checkpoints=checkpoints,
            now_ms=now_ms,
            delete_records=requests.get(tp),
            truncate_below_start=run.truncate_below_start,
            committed=committed,
            missing_high_watermark=run.missing_high_watermark,
            remote=_remote_log(part, configs[tp[0]], remote_view),
        )
        if plan.segments_change:  # retention by size or offset counts on segments that do not overlap
            part.ensure_segments_apart()
        plan.recovered = recovered
        report.partitions.append(plan)
        work.append((part, plan))
    return report, work


def _remote_log(part: Partition, config: TopicConfig, view: RemoteLogView | None) -> RemoteLog | None:
    """The remote log of a partition whose topic has tiered storage (None: it has not). Nothing
    known of it is Kafka's state before its remote log manager has run: nothing uploaded."""
    if view is None or not remote_log_enabled(config, part.topic):
        return None
    highest = view.highest_offset(part)
    return RemoteLog(-1 if highest is None else highest, copy_enabled=not config.remote_log_copy_disable)


def _skipped(tp: tuple[str, int], part: Partition, config: TopicConfig, why: str) -> PartitionPlan:
    return PartitionPlan(tp[0], tp[1], part.path, config, [], 0, 0, 0, "", RetentionOutcome([], [], 0), skipped=why)
