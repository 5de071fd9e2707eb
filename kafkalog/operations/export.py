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
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..codec.schema_registry import SchemaRegistry
from ..errors import ConfigError
from ..rules.compaction_strategy import OFFSET, CompactionStrategy
from ..rules.partition_state import partition_state
from ..spark.tables import FORMATS, merge_latest, read_note, table_schema, write_table
from ..spark.topic_table import PartitionRange, committed_records, latest_records
from ..storage import tables
from ..storage.logdir import LogDir
from ..storage.offsets_for_times import offset_for_timestamp
from ..storage.producer_state import replay_partition
from ..storage.tables import DELETED
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
    if not any(t == topic for t, _ in log.topic_partitions):
        raise ConfigError(f"no partition of topic {topic!r} here", file=log.path)
    return log


def partition_ranges(log_dir, topic: str, *, as_of_offset=None, as_of_time: int | None = None) -> list[PartitionRange]:
    """What a read_committed consumer reads of each partition of `topic` up to the as-of point: from
    the log start offset to the least of the as-of point and the last stable offset, with the
    partition's aborted transactions (metadata only, on the driver)."""
    if as_of_offset is not None and as_of_time is not None:
        raise ConfigError("give an as-of offset or an as-of time, not both")
    log = topic_log_dir(log_dir, topic)
    parts = list(log.partitions({topic}))
    checkpoints = log.offset_checkpoints()
    cuts = as_of_offsets(as_of_offset, [p.partition for p in parts], topic) if as_of_offset is not None else {}
    ranges = []
    for part in parts:
        if any(e.name.endswith(".swap") for e in part.in_flight):
            # a half-done swap: the live files may not be the log. Leftover `.deleted` and `.cleaned`
            # files (a broker's cleaner leaves `.deleted` ones for file.delete.delay.ms) are not part
            # of the log: Kafka's loader deletes them, and reading the live files is reading the log.
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
    return ranges


def _check(mode: str, fmt: str | None = None) -> None:
    if mode not in MODES:
        raise ConfigError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")


def _rows(
    spark, log_dir, topic: str, ranges, mode: str, decoding: Decoding, registry, latest_by: CompactionStrategy = OFFSET
):
    """The table's rows, decoded. In latest mode each has `DELETED`: a tombstone is told before
    decoding (a JSON value `null` decodes to null too), a Debezium delete by its decoded op; each
    key's row is its last record by `latest_by` (KIP-280's strategies)."""
    if mode == "changelog":
        return decoded(spark, committed_records(spark, str(log_dir), topic, ranges), decoding, topic, registry)
    latest = latest_records(spark, str(log_dir), topic, ranges, strategy=latest_by)
    latest = latest.withColumn(DELETED, latest["value"].isNull())
    return deleted_after_decoding(decoded(spark, latest, decoding, topic, registry), decoding)


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
    **options,
):
    """The table of `topic` as a DataFrame (columns: key, value, topic, partition, offset, timestamp,
    timestampType, headers; `_operation` in changelog mode with an envelope; `_decodeError` and the
    raw `_rawKey`/`_rawValue` with ``on_decode_error="dead-letter"``), as of the as-of point;
    nothing is collected to the driver. `options` are `Decoding`'s fields (or give `decoding`);
    `registry`: the schemas (default: `schema_registry`'s)."""
    _check(mode)
    decoding = decoding or Decoding(**options)
    if registry is None:
        registry = schema_registry(decoding, log_dir)
    ranges = partition_ranges(log_dir, topic, as_of_offset=as_of_offset, as_of_time=as_of_time)
    rows = _rows(spark, log_dir, topic, ranges, mode, decoding, registry, latest_by)
    return rows if mode == "changelog" else rows.where(~rows[DELETED]).drop(DELETED)


@dataclass
class ExportResult:
    """What a run did: the offsets the table holds now ({partition: end}, exclusive), the ranges it
    read, and whether it committed."""

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
                {"deadLetters": self.dead_letters, "deadLetterTable": self.dead_letter_path}
                if self.dead_letter_path
                else {}
            ),
        }


def _note(topic: str, mode: str, ends: Mapping[int, int]) -> dict:
    return {"topic": topic, "mode": mode, "endOffsets": {str(p): o for p, o in sorted(ends.items())}}


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
    decoding: Decoding | None = None,
    registry: SchemaRegistry | None = None,
    latest_by: CompactionStrategy = OFFSET,
    **options,
) -> ExportResult:
    """Write the table of `topic` (see `topic_table`) to `output` as `format`, in one commit that notes
    the offsets it holds. With `incremental`, a table an earlier export wrote gets only the records
    past its note: upserts and deletes in one MERGE (`latest`), or appended (`changelog`); a run with
    nothing new commits nothing. There JSON keys and values are parsed with the table's schema where
    none is given (a field new since the table was written is not added: export it again whole).
    `options` are `Decoding`'s fields (or give `decoding`; `registry` as in `topic_table`). With
    ``on_decode_error="dead-letter"`` the records that do not decode are written, as their bytes and
    why, to the table `dead_letter_path` (same format; appended by an incremental run), before the
    table itself; none there, none written. `latest_by`: which record of a key is its row in latest mode, by
    offset or by a KIP-280 strategy (`export --latest-by`, the topic's compaction.strategy by default)."""
    _check(mode, format)
    decoding = decoding or Decoding(**options)
    if incremental and format == "parquet":
        raise ConfigError("parquet holds one-off snapshots: --incremental needs --format delta or iceberg")
    if registry is None:
        registry = schema_registry(decoding, log_dir)
    ranges = partition_ranges(log_dir, topic, as_of_offset=as_of_offset, as_of_time=as_of_time)
    ends = {r.partition: r.end for r in ranges}
    result = ExportResult(topic, output, format, mode, ends, ranges, incremental=incremental, latest_by=str(latest_by))
    result.dead_letter_path = decoding.dead_letter_path(output)
    # a table that is there but no export wrote is refused, also when it would be overwritten
    note = read_note(spark, output, format) if format != "parquet" else None
    if not incremental:
        note = None  # the whole table again, as a new version of it
    if note is not None and mode == "latest" and latest_by != OFFSET:
        raise ConfigError(
            f"--latest-by {latest_by}: an incremental run merges the new records' rows over the table's by "
            "offset, and cannot compare their versions with the rows the table holds: export the table again "
            "whole (without --incremental), or use --latest-by offset"
        )
    if note is not None:
        result.ranges = ranges = _since(ranges, note, topic, mode)
        if not any(r.end > r.start for r in ranges):
            return result  # nothing new: no commit
        # JSON without a given schema is parsed with the table's, not one inferred from the new records
        # alone, so that the MERGE or append meets the columns the table has
        decoding = decoding.with_table_schema(table_schema(output, format))
    rows = _rows(spark, log_dir, topic, ranges, mode, decoding, registry, latest_by)
    if note is None and mode == "latest":
        rows = rows.where(~rows[DELETED]).drop(DELETED)
    rows, cached = _write_dead_letters(spark, rows, result, format, append=note is not None)
    new_note = _note(topic, mode, ends)
    try:
        if note is None:  # the whole table
            write_table(spark, rows, output, format, new_note)
        elif mode == "changelog":
            write_table(spark, rows, output, format, new_note, append=True)
        else:
            merge_latest(spark, rows, output, format, new_note, records=sum(r.end - r.start for r in ranges))
    finally:
        if cached is not None:
            cached.unpersist()
    result.committed = True
    return result


def _write_dead_letters(spark, rows, result: ExportResult, fmt: str, *, append: bool):
    """(the rows that decoded, the DataFrame to unpersist after the table's commit); those that did
    not are written to the dead-letter table first (a run that then fails leaves them there, and its
    rerun writes them again: a dead letter may repeat)."""
    path = result.dead_letter_path
    if path is None:
        return rows, None
    rows = rows.persist()  # decoded once, for the dead letters' count, their table and the table
    good, dead = split_dead_letters(rows)
    result.dead_letters = dead.count()
    if result.dead_letters:
        exists = append and tables.notes(path, fmt) is not None
        write_table(spark, dead, path, fmt, {"deadLettersOf": result.output, "topic": result.topic}, append=exists)
        warnings.warn(
            f"kafkalog: {result.dead_letters} records did not decode: they are in the dead-letter table {path}",
            stacklevel=3,
        )
    return good, rows
