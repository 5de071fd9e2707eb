"""`kafkalog export`: a topic as a table, as of any offset or time, into Delta, Iceberg or Parquet.

`topic_table` gives the DataFrame; `export` writes it. Two modes:

* `latest`: per (partition, key), the last record a read_committed consumer reads up to the as-of
  point, keys whose last record is a tombstone left out: the table a consumer that keeps the last
  value per key would hold (a KTable).
* `changelog`: every record a read_committed consumer reads, in offset order per partition.

What a read_committed consumer reads of a partition (docs/semantics.md, "Topics as tables"): offsets
from the log start offset up to the last stable offset (the high watermark, or the first offset of
the oldest open transaction below it), without control records and without records of aborted
transactions. The as-of point cuts that range further: `as_of_offset` is exclusive, as Spark's
`endingOffsets` (one offset for every partition, or {partition: offset}, -1 for the latest), and
`as_of_time` is the first offset whose timestamp is at or past it, as `offsetsForTimes` answers.

With `incremental`, the offsets a table holds are its note, committed with its data
(spark/tables.py): a run reads only what is past them and applies it in one commit (a MERGE on
(partition, key) for `latest`, an append for `changelog`); with nothing new it commits nothing.
A table already at the output is otherwise refused, as Spark's default save mode refuses it, unless
`overwrite` (a new version of it). A run that fails leaves the output as it was
(storage/tables/output.py).
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Mapping
from concurrent.futures import Future
from contextlib import ExitStack
from dataclasses import dataclass, field

from ..codec.schema_registry import SchemaRegistry
from ..errors import ConfigError, KafkaLogError
from ..rules.compaction_strategy import OFFSET, CompactionStrategy
from ..rules.partition_state import partition_state
from ..scan.inventory import log_dir_uri
from ..spark.errors import raises_kafkalog_errors
from ..spark.progress import task_feed
from ..spark.session import started
from ..spark.tables import FORMATS, merge_latest, read_note, table_schema, tasks_stopped, write_table
from ..spark.topic_table import PartitionRange, TopicLog, committed_records, latest_records
from ..storage import tables
from ..storage.destination import check_outside
from ..storage.logdir import LogDir
from ..storage.offsets_for_times import offset_for_timestamp
from ..storage.producer_state import replay_partition
from ..storage.tables import DELETED, TableError
from ..storage.tables import output as table_output
from . import progress
from .decoding import (
    Decoding,
    decoded,
    deleted_after_decoding,
    schema_registry,
    split_dead_letters,
)

MODES = ("latest", "changelog")
LATEST_OFFSET = -1  # in an as-of offset, as in Spark's endingOffsets: the partition's end


def as_of_offsets(value, partitions: list[int], topic: str) -> dict[int, int]:
    """An as-of offset for each partition from `value`: an int for every partition, or a mapping (or
    its JSON text) {partition: offset}, also nested under the topic as Spark's endingOffsets writes it
    ({"topic": {"0": 23}}). -1 is the partition's end. Every partition must be named."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ConfigError(f"as-of offset {value!r}: expected an offset or a JSON object") from None
    if isinstance(value, int) and not isinstance(value, bool):
        return dict.fromkeys(partitions, value)
    if not isinstance(value, Mapping):
        raise ConfigError(f"as-of offset {value!r}: expected an offset or a JSON object {{partition: offset}}")
    if set(value) == {topic} and isinstance(value[topic], Mapping):
        value = value[topic]
    try:
        offsets = {int(p): int(o) for p, o in value.items()}
    except (TypeError, ValueError):
        raise ConfigError(f"as-of offsets {value!r}: expected {{partition: offset}} with integers") from None
    missing, unknown = sorted(set(partitions) - set(offsets)), sorted(set(offsets) - set(partitions))
    if unknown:
        raise ConfigError(f"as-of offsets name partitions {unknown} that topic {topic} does not have here")
    if missing:
        raise ConfigError(f"as-of offsets leave out partitions {missing} of topic {topic}: give each one (-1: its end)")
    return offsets


def topic_log_dir(log_dir, topic: str) -> LogDir:
    """The log directory, refused when it holds no partition of `topic` (a listing, no Spark)."""
    log = log_dir if isinstance(log_dir, LogDir) else LogDir.open(str(log_dir))
    log.check_topics([topic])
    return log


def partition_ranges(log_dir, topic: str, *, as_of_offset=None, as_of_time: int | None = None) -> list[PartitionRange]:
    """What a read_committed consumer reads of each partition of `topic` up to the as-of point: from
    the log start offset to the least of the as-of point and the last stable offset, with the
    partition's aborted transactions (metadata only, on the driver)."""
    return _read_plan(topic_log_dir(log_dir, topic), topic, as_of_offset, as_of_time)[0]


def _read_plan(log: LogDir, topic: str, as_of_offset, as_of_time: int | None) -> tuple[list[PartitionRange], list]:
    """`partition_ranges` of the opened log dir, and the segments of the partitions, each partition
    opened once: the scan reads these segments and lists nothing again."""
    if as_of_offset is not None and as_of_time is not None:
        raise ConfigError("give an as-of offset or an as-of time, not both")
    parts = list(log.partitions({topic}))
    checkpoints = log.offset_checkpoints()
    cuts = as_of_offsets(as_of_offset, [p.partition for p in parts], topic) if as_of_offset is not None else {}
    ranges, segments = [], []
    for part in progress.track(parts, "export", "plan", "partition"):
        if part.irregular or any(e.name.endswith(".swap") for e in part.in_flight):
            # a half-done swap, or a segment's name that is not a regular file: the live files may
            # not be the log. Leftover `.deleted` and `.cleaned` files (a broker's cleaner leaves
            # `.deleted` ones for file.delete.delay.ms) are not part of the log: Kafka's loader
            # deletes them, and reading the live files is reading the log.
            part.ensure_settled()
        # what a broker loading the log dir computes: the last stable offset of its producer state
        end = partition_state(part, replay_partition, **checkpoints.of((part.topic, part.partition)))
        stop = end.last_stable_offset
        cut = cuts.get(part.partition, LATEST_OFFSET)
        if as_of_time is not None:
            found = offset_for_timestamp(part.segments, as_of_time, log_start_offset=end.log_start_offset)
            cut = LATEST_OFFSET if found is None else found
        if cut < LATEST_OFFSET:
            raise ConfigError(f"as-of offset {cut} of partition {part.partition}: expected -1 or an offset")
        if cut != LATEST_OFFSET:
            stop = min(stop, cut)
        aborted = tuple(part.aborted_txns())
        ranges.append(PartitionRange(part.partition, end.log_start_offset, max(stop, end.log_start_offset), aborted))
        segments += part.segments
    return ranges, segments


def _topic_log(log: LogDir, uri: str | None, topic: str, segments: list) -> TopicLog:
    """What the scan reads: `segments` of `log`, which executors reach at `uri` (default: its local path)."""
    return TopicLog(log_dir_uri(log) if uri is None else str(uri), topic, tuple(segments), log.fs.is_local)


def _check(mode: str, fmt: str | None = None) -> None:
    if mode not in MODES:
        raise ConfigError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")


def check_output(
    log_dir, output: str, fmt: str, *, overwrite: bool = False, incremental: bool = False, dead_letters=None
) -> bool:
    """Refuse an output export must not write, before anything is read (what the command line checks
    before Spark starts): one that is, lies in or holds the log directory (as for the rewriting
    commands); anything there but a table of `fmt` an export wrote (table_output.existing,
    read_note); a table already there, unless `overwrite` or `incremental`. The same for the
    dead-letter table `dead_letters`, which follows the table. Whether a table is there."""
    if overwrite and incremental:
        raise ConfigError("--overwrite writes the whole table again, --incremental only what is new: give one")
    if incremental and fmt == "parquet":
        raise ConfigError("parquet holds one-off snapshots: --incremental needs --format delta or iceberg")
    source = log_dir.path if isinstance(log_dir, LogDir) else str(log_dir)
    for path in filter(None, (output, dead_letters)):
        check_outside(source, path)
    if dead_letters and table_output.existing(dead_letters, fmt) and fmt != "parquet":
        read_note(dead_letters, fmt)
    if not table_output.existing(output, fmt):
        return False
    if fmt != "parquet":
        read_note(output, fmt)  # a table no export wrote is refused, whatever the options
    if not (overwrite or incremental):
        instead = "" if fmt == "parquet" else " (a new version of it), --incremental applies only what is new"
        raise ConfigError(f"a {fmt} table is there already: --overwrite replaces it{instead}", file=output)
    return True


def clamped_offsets(as_of_offset, ranges: list[PartitionRange], topic: str) -> dict[int, tuple[int, int]]:
    """The partitions whose as-of offset lies past the end a read_committed consumer reads to (its last
    stable offset), each said in a warning: {partition: (the as-of offset, the end read to)}."""
    if as_of_offset is None:
        return {}
    asked = as_of_offsets(as_of_offset, [r.partition for r in ranges], topic)
    clamped = {r.partition: (asked[r.partition], r.end) for r in ranges if asked[r.partition] > r.end}
    for partition, (offset, end) in sorted(clamped.items()):
        warnings.warn(
            f"kafkalog: as-of offset {offset} of {topic}-{partition} lies past its end: read up to {end} "
            "(the last stable offset)",
            stacklevel=3,
        )
    return clamped


def _rows(
    spark, log: TopicLog, ranges, mode: str, decoding: Decoding, registry, latest_by: CompactionStrategy = OFFSET
):
    """The table's rows, decoded. In latest mode each has `DELETED`: a tombstone is told before
    decoding (a JSON value `null` decodes to null too), a Debezium delete by its decoded op; each
    key's row is its last record by `latest_by` (KIP-280's strategies)."""
    if mode == "changelog":
        return decoded(spark, committed_records(spark, log, ranges), decoding, log.topic, registry)
    latest = latest_records(spark, log, ranges, strategy=latest_by)
    latest = latest.withColumn(DELETED, latest["value"].isNull())
    return deleted_after_decoding(decoded(spark, latest, decoding, log.topic, registry), decoding)


def topic_table(
    spark,
    log_dir,
    topic: str,
    *,
    mode: str = "latest",
    as_of_offset=None,
    as_of_time: int | None = None,
    decoding: Decoding | None = None,
    registry: SchemaRegistry | None = None,
    latest_by: CompactionStrategy = OFFSET,
    uri: str | None = None,
    **options,
):
    """The table of `topic` as a DataFrame (columns: key, value, topic, partition, offset, timestamp,
    timestampType, headers; `_operation` in changelog mode with an envelope; `_decodeError` and the
    raw `_rawKey`/`_rawValue` with ``on_decode_error="dead-letter"``), as of the as-of point;
    nothing is collected to the driver. `log_dir`: a path, URI or opened `LogDir` (`uri`: where
    executors reach an opened one on an object store). `options` are `Decoding`'s fields (or give
    `decoding`); `registry`: the schemas (default: `schema_registry`'s)."""
    _check(mode)
    decoding = decoding or Decoding(**options)
    log = topic_log_dir(log_dir, topic)
    if registry is None:
        registry = schema_registry(decoding, log)
    ranges, segments = _read_plan(log, topic, as_of_offset, as_of_time)
    clamped_offsets(as_of_offset, ranges, topic)
    rows = _rows(
        spark, _topic_log(log, _given_uri(log_dir, uri), topic, segments), ranges, mode, decoding, registry, latest_by
    )
    return rows if mode == "changelog" else rows.where(~rows[DELETED]).drop(DELETED)


def _given_uri(log_dir, uri: str | None) -> str | None:
    """Where executors reach the log dir: `uri`, or the path or URI it was given as."""
    return uri if uri is not None or isinstance(log_dir, LogDir) else str(log_dir)


@dataclass
class ExportResult:
    """What a run did: the offsets the table holds now ({partition: end}, exclusive), the ranges it
    read, whether it committed, and the as-of offsets past a partition's end ({partition: (as-of
    offset, end read to)})."""

    topic: str
    output: str
    format: str
    mode: str
    end_offsets: dict[int, int]
    ranges: list[PartitionRange] = field(default_factory=list)
    committed: bool = False
    incremental: bool = False
    dead_letter_path: str | None = None
    dead_letters: int = 0
    clamped: dict[int, tuple[int, int]] = field(default_factory=dict)
    latest_by: str = "offset"

    def to_dict(self) -> dict:
        return {
            "topic": self.topic,
            "output": self.output,
            "format": self.format,
            "mode": self.mode,
            "incremental": self.incremental,
            **({"latestBy": self.latest_by} if self.mode == "latest" else {}),
            "committed": self.committed,
            "endOffsets": {str(p): o for p, o in sorted(self.end_offsets.items())},
            "readOffsets": {str(r.partition): [r.start, r.end] for r in self.ranges},
            **(
                {"asOfPastEnd": {str(p): {"asOf": a, "end": e} for p, (a, e) in sorted(self.clamped.items())}}
                if self.clamped
                else {}
            ),
            **(
                {"deadLetters": self.dead_letters, "deadLetterTable": self.dead_letter_path}
                if self.dead_letter_path
                else {}
            ),
        }


def _note(topic: str, mode: str, ends: Mapping[int, int], key_format: str) -> dict:
    """What the table holds, and how its keys were decoded (a purge compares keys as bytes or text)."""
    ends_ = {str(p): o for p, o in sorted(ends.items())}
    return {"topic": topic, "mode": mode, "endOffsets": ends_, "keyFormat": key_format}


def _since(ranges: list[PartitionRange], note: dict, topic: str, mode: str) -> list[PartitionRange]:
    """The ranges past the offsets a table's note says it holds."""
    if note.get("topic") != topic or note.get("mode") != mode:
        raise ConfigError(
            f"the table holds topic {note.get('topic')!r} in {note.get('mode')} mode, not {topic!r} in {mode} mode: "
            "choose another --output"
        )
    held = {int(p): int(o) for p, o in note["endOffsets"].items()}
    since = []
    for r in ranges:
        done = held.get(r.partition, 0)
        if r.end < done:
            raise ConfigError(
                f"partition {r.partition}: the table holds offsets up to {done}, past the as-of point {r.end}: "
                "an incremental run only moves forward (export without --incremental to rewrite it)"
            )
        if r.start > done:
            warnings.warn(
                f"kafkalog: partition {r.partition} of {topic} starts at {r.start}, past the {done} the table holds: "
                f"offsets {done} to {r.start} were deleted before this run read them",
                stacklevel=3,
            )
        since.append(PartitionRange(r.partition, max(r.start, done), r.end, r.aborted))
    return since


@dataclass
class ExportPlan:
    """Everything an export decides on the driver before Spark starts (`plan_export`), which
    `run_export` carries out: the segments the scan reads (`log`), the ranges it reads of each
    partition (past the offsets the table holds, in an incremental run), the offsets the table will
    hold (`end_offsets`), and how keys and values decode. `note`: the note of the table an
    incremental run adds to (None: the whole table is written)."""

    log: TopicLog
    output: str
    format: str
    mode: str
    end_offsets: dict[int, int]
    ranges: list[PartitionRange]
    decoding: Decoding
    registry: SchemaRegistry | None
    latest_by: CompactionStrategy = OFFSET
    incremental: bool = False
    note: dict | None = None
    clamped: dict[int, tuple[int, int]] = field(default_factory=dict)

    @property
    def topic(self) -> str:
        return self.log.topic

    @property
    def has_new_records(self) -> bool:
        return any(r.end > r.start for r in self.ranges)

    @property
    def up_to_date(self) -> bool:
        """An incremental run that finds nothing past the table's note: it commits nothing, and needs no Spark."""
        return self.note is not None and not self.has_new_records


def plan_export(
    log_dir: LogDir,
    topic: str,
    output: str,
    *,
    uri: str | None = None,
    format: str = "delta",
    mode: str = "latest",
    as_of_offset=None,
    as_of_time: int | None = None,
    incremental: bool = False,
    overwrite: bool = False,
    decoding: Decoding | None = None,
    registry: SchemaRegistry | None = None,
    latest_by: CompactionStrategy = OFFSET,
    **options,
) -> ExportPlan:
    """Check and plan the export of `topic` from the opened `log_dir` to `output`, without Spark
    (what the command line does before Spark starts): the output (`check_output`), the schemas
    (`schema_registry`, unless `registry` is given), what a read_committed consumer reads of each
    partition up to the as-of point, and, in an incremental run, the note of the table there. `uri`:
    where executors reach the log dir (default: its local path; give an object store's URI). The
    other arguments are `export`'s."""
    _check(mode, format)
    log_dir.check_topics([topic])
    decoding = decoding or Decoding(**options)
    if registry is None:
        registry = schema_registry(decoding, log_dir)
    dead_letters = decoding.dead_letter_path(output)
    again = {"overwrite": overwrite, "incremental": incremental}
    existed = check_output(log_dir if uri is None else uri, output, format, **again, dead_letters=dead_letters)
    ranges, segments = _read_plan(log_dir, topic, as_of_offset, as_of_time)
    plan = ExportPlan(
        _topic_log(log_dir, uri, topic, segments),
        output,
        format,
        mode,
        {r.partition: r.end for r in ranges},
        ranges,
        decoding,
        registry,
        latest_by,
        incremental,
    )
    plan.clamped = clamped_offsets(as_of_offset, ranges, topic)
    plan.note = read_note(output, format) if incremental and existed else None  # else the whole table
    if plan.note is not None and mode == "latest" and latest_by != OFFSET:
        raise ConfigError(
            f"--latest-by {latest_by}: an incremental run merges the new records' rows over the table's by "
            "offset, and cannot compare their versions with the rows the table holds: export the table again "
            "whole (without --incremental), or use --latest-by offset"
        )
    if plan.note is not None:
        plan.ranges = _since(ranges, plan.note, topic, mode)
        if plan.has_new_records:
            # JSON without a given schema is parsed with the table's, not one inferred from the new records
            # alone, so that the MERGE or append meets the columns the table has
            plan.decoding = decoding.with_table_schema(table_schema(output, format))
    return plan


def run_export(spark, plan: ExportPlan) -> ExportResult:
    """Carry out `plan`: write the table in one commit that notes the offsets it holds (see
    `export`); an incremental run with nothing new commits nothing. `spark`: a session, or the
    Future of one starting (spark/session.py's `start_session`), awaited only when there is
    something to write (None will do for a plan `up_to_date`)."""
    result = ExportResult(
        plan.topic,
        plan.output,
        plan.format,
        plan.mode,
        plan.end_offsets,
        plan.ranges,
        incremental=plan.incremental,
        dead_letter_path=plan.decoding.dead_letter_path(plan.output),
        clamped=plan.clamped,
        latest_by=str(plan.latest_by),
    )
    if plan.up_to_date:
        return result
    if isinstance(spark, Future) and not spark.done():
        with progress.phase("export", "wait for Spark to start", total=1, unit="session"):
            spark.result()
    spark = started(spark)
    rows = _rows(spark, plan.log, plan.ranges, plan.mode, plan.decoding, plan.registry, plan.latest_by)
    if plan.note is None and plan.mode == "latest":
        rows = rows.where(~rows[DELETED]).drop(DELETED)
    totals = {"total": sum(r.end > r.start for r in plan.ranges), "unit": "partition"}
    with progress.phase("export", "write", **totals, feed=task_feed(spark)), ExitStack() as written:
        target = written.enter_context(table_output.writing(plan.output, plan.format))
        try:
            _write(spark, rows, target, result, plan.note, written, plan.decoding.key_format)
        except BaseException as err:
            tasks_stopped(spark)  # before the files a failed commit added are taken back
            if isinstance(err, Exception) and not isinstance(err, KafkaLogError):  # Spark's, the writers'
                raise TableError(
                    f"the export failed ({_cause(err)}); the output is left as it was", file=plan.output
                ) from err
            raise
    result.committed = True
    return result


def export(
    spark,
    log_dir,
    topic: str,
    output: str,
    *,
    format: str = "delta",
    mode: str = "latest",
    as_of_offset=None,
    as_of_time: int | None = None,
    incremental: bool = False,
    overwrite: bool = False,
    decoding: Decoding | None = None,
    registry: SchemaRegistry | None = None,
    latest_by: CompactionStrategy = OFFSET,
    **options,
) -> ExportResult:
    """Write the table of `topic` (see `topic_table`) to `output` as `format`, in one commit that notes
    the offsets it holds: `run_export` of `plan_export`. `log_dir`: a path, URI or opened `LogDir`. A
    table already there is refused unless `overwrite` (a new version of it)
    or `incremental`: then a table an earlier export wrote gets only the records past its note:
    upserts and deletes in one MERGE (`latest`), or appended (`changelog`); a run with nothing new
    commits nothing. There JSON keys and values are parsed with the table's schema where none is
    given (a field new since the table was written is not added: export it again whole). A run that
    fails leaves the output as it was (storage/tables/output.py). `spark`: a session, or the Future
    of one starting (spark/session.py's `start_session`), awaited once the plan is made.
    `options` are `Decoding`'s fields (or give `decoding`; `registry` as in `topic_table`). With
    ``on_decode_error="dead-letter"`` the records that do not decode are written, as their bytes and
    why, to the table `dead_letter_path` (same format; appended by an incremental run), in the
    same run; none there, none written. `latest_by`: which record of a key is its row in latest mode, by
    offset or by a KIP-280 strategy (`export --latest-by`, the topic's compaction.strategy by default)."""
    log = log_dir if isinstance(log_dir, LogDir) else LogDir.open(str(log_dir))
    plan = plan_export(
        log,
        topic,
        output,
        uri=_given_uri(log_dir, None),
        format=format,
        mode=mode,
        as_of_offset=as_of_offset,
        as_of_time=as_of_time,
        incremental=incremental,
        overwrite=overwrite,
        decoding=decoding,
        registry=registry,
        latest_by=latest_by,
        **options,
    )
    return run_export(spark, plan)


_CAUSE = re.compile(r"^(?:[\w$]+\.)*(\w+(?:Error|Exception)): (.+)$", re.MULTILINE)


def _cause(err: BaseException) -> str:
    """One line of why a write failed: the last `SomeError: message` line of its text (Spark's holds
    the Java and Python stacks), else its first line."""
    found = _CAUSE.findall(str(err))
    name, text = found[-1] if found else (type(err).__name__, (str(err).splitlines() or [""])[0])
    return f"{name}: {text[:300]}"


@raises_kafkalog_errors
def _write(
    spark, rows, target: str, result: ExportResult, note: dict | None, written: ExitStack, key_format: str
) -> None:
    """The table's rows (the dead letters to theirs first) to `target`, where `result.output` is written;
    `key_format` how its keys were decoded, for its note."""
    rows = _write_dead_letters(spark, rows, result, append=note is not None, written=written)
    new_note = _note(result.topic, result.mode, result.end_offsets, key_format)
    if note is None:  # the whole table
        write_table(spark, rows, target, result.format, new_note)
    elif result.mode == "changelog":
        write_table(spark, rows, target, result.format, new_note, append=True)
    else:
        records = sum(r.end - r.start for r in result.ranges)
        merge_latest(spark, rows, target, result.format, new_note, records=records)


def _write_dead_letters(spark, rows, result: ExportResult, *, append: bool, written: ExitStack):
    """The rows that decoded; those that did not are written to the dead-letter table first, which is
    published with the table, or left as it was when the table's commit fails. An append to an existing
    one commits before the table's, and its note says the offsets it holds the dead letters of: a run
    after one that failed or was killed between the two commits leaves out those already there."""
    path, fmt = result.dead_letter_path, result.format
    if path is None:
        return rows
    rows = rows.persist()  # decoded once, for the dead letters' count, their table and the table
    written.callback(rows.unpersist)
    good, dead = split_dead_letters(rows)
    held = _dead_letters_held(path, fmt) if append else None
    for partition, end in (held or {}).items():
        dead = dead.where((dead["partition"] != partition) | (dead["offset"] >= end))
    result.dead_letters = dead.count()
    if result.dead_letters:
        ends = {p: max(end, (held or {}).get(p, 0)) for p, end in result.end_offsets.items()}
        note = {
            "deadLettersOf": result.output,
            "topic": result.topic,
            "endOffsets": {str(p): o for p, o in ends.items()},
        }
        target = written.enter_context(table_output.writing(path, fmt))
        write_table(spark, dead, target, fmt, note, append=held is not None)
        warnings.warn(
            f"kafkalog: {result.dead_letters} records did not decode: they are in the dead-letter table {path}",
            stacklevel=3,
        )
    return good


def _dead_letters_held(path: str, fmt: str) -> dict[int, int] | None:
    """{partition: end}: the dead-letter table at `path` holds the dead letters of the offsets below
    these ({} where its notes do not say); None where there is no table."""
    texts = tables.notes(path, fmt)
    if texts is None:
        return None
    for text in texts:
        note = tables.parse_note(text, fmt) or {}
        if "endOffsets" in note:
            return {int(p): int(o) for p, o in note["endOffsets"].items()}
    return {}
