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

from ..errors import ConfigError
from ..rules.partition_state import partition_state
from ..spark.tables import FORMATS, merge_latest, read_note, table_schema, write_table
from ..spark.topic_table import PartitionRange, committed_records, decode_columns, latest_per_key
from ..storage.logdir import LogDir
from ..storage.naming import LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from ..storage.offsets_for_times import offset_for_timestamp
from ..storage.producer_state import replay_partition
from ..storage.tables import DELETED

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
    high_watermarks = log.read_checkpoint(REPLICATION_OFFSET_CHECKPOINT)
    log_starts = log.read_checkpoint(LOG_START_OFFSET_CHECKPOINT)
    cuts = as_of_offsets(as_of_offset, [p.partition for p in parts], topic) if as_of_offset is not None else {}
    ranges = []
    for part in parts:
        if any(e.name.endswith(".swap") for e in part.in_flight):
            # a half-done swap: the live files may not be the log. Leftover `.deleted` and `.cleaned`
            # files (a broker's cleaner leaves `.deleted` ones for file.delete.delay.ms) are not part
            # of the log: Kafka's loader deletes them, and reading the live files is reading the log.
            part.ensure_settled()
        tp = (part.topic, part.partition)
        # what a broker loading the log dir computes: the last stable offset of its producer state
        end = partition_state(
            part,
            replay_partition,
            log_start_checkpoint=log_starts.get(tp),
            high_watermark_checkpoint=high_watermarks.get(tp),
        )
        stop = end.last_stable_offset
        cut = cuts.get(part.partition, LATEST_OFFSET)
        if as_of_time is not None:
            found = offset_for_timestamp(part.segments, as_of_time, log_start_offset=end.log_start_offset)
            cut = LATEST_OFFSET if found is None else found
        if cut < LATEST_OFFSET:
            raise ConfigError(f"as-of offset {cut} of partition {part.partition}: expected -1 or an offset")
        if cut != LATEST_OFFSET:
            stop = min(stop, cut)
        aborted = tuple(txn for segment in part.segments for txn in segment.aborted_txns())
        ranges.append(PartitionRange(part.partition, end.log_start_offset, max(stop, end.log_start_offset), aborted))
    return ranges


def _check(mode: str, fmt: str | None = None) -> None:
    if mode not in MODES:
        raise ConfigError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")


def _rows(spark, log_dir, topic: str, ranges, mode: str, *, tombstones: bool):
    records = committed_records(spark, str(log_dir), topic, ranges)
    if mode == "changelog":
        return records
    latest = latest_per_key(records)
    return latest if tombstones else latest.where("value IS NOT NULL")


def topic_table(
    spark,
    log_dir,
    topic: str,
    *,
    mode: str = "latest",
    as_of_offset=None,
    as_of_time: int | None = None,
    key_format: str = "binary",
    value_format: str = "binary",
    key_schema=None,
    value_schema=None,
):
    """The table of `topic` as a DataFrame (columns: key, value, topic, partition, offset, timestamp,
    timestampType, headers), as of the as-of point; nothing is collected to the driver."""
    _check(mode)
    ranges = partition_ranges(log_dir, topic, as_of_offset=as_of_offset, as_of_time=as_of_time)
    rows = _rows(spark, log_dir, topic, ranges, mode, tombstones=False)
    return decode_columns(
        rows, key_format=key_format, value_format=value_format, key_schema=key_schema, value_schema=value_schema
    )


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

    def to_dict(self) -> dict:
        return {
            "topic": self.topic,
            "output": self.output,
            "format": self.format,
            "mode": self.mode,
            "incremental": self.incremental,
            "committed": self.committed,
            "endOffsets": {str(p): o for p, o in sorted(self.end_offsets.items())},
            "readOffsets": {str(r.partition): [r.start, r.end] for r in self.ranges},
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
    key_format: str = "binary",
    value_format: str = "binary",
    key_schema=None,
    value_schema=None,
) -> ExportResult:
    """Write the table of `topic` (see `topic_table`) to `output` as `format`, in one commit that notes
    the offsets it holds. With `incremental`, a table an earlier export wrote gets only the records
    past its note: upserts and deletes in one MERGE (`latest`), or appended (`changelog`); a run with
    nothing new commits nothing. There JSON keys and values are parsed with the table's schema where
    none is given (a field new since the table was written is not added: export it again whole)."""
    _check(mode, format)
    if incremental and format == "parquet":
        raise ConfigError("parquet holds one-off snapshots: --incremental needs --format delta or iceberg")
    ranges = partition_ranges(log_dir, topic, as_of_offset=as_of_offset, as_of_time=as_of_time)
    ends = {r.partition: r.end for r in ranges}
    result = ExportResult(topic, output, format, mode, ends, ranges, incremental=incremental)
    # a table that is there but no export wrote is refused, also when it would be overwritten
    note = read_note(spark, output, format) if format != "parquet" else None
    if not incremental:
        note = None  # the whole table again, as a new version of it

    def decoded(rows):
        return decode_columns(
            rows, key_format=key_format, value_format=value_format, key_schema=key_schema, value_schema=value_schema
        )

    if note is None:  # the whole table
        write_table(
            spark,
            decoded(_rows(spark, log_dir, topic, ranges, mode, tombstones=False)),
            output,
            format,
            _note(topic, mode, ends),
        )
        result.committed = True
        return result
    since = _since(ranges, note, topic, mode)
    result.ranges = since
    # JSON without a given schema is parsed with the table's, not one inferred from the new records
    # alone, so that the MERGE or append meets the columns the table has
    held = table_schema(output, format)
    if key_format == "json" and key_schema is None:
        key_schema = held["key"].dataType
    if value_format == "json" and value_schema is None:
        value_schema = held["value"].dataType
    if not any(r.end > r.start for r in since):
        return result  # nothing new: no commit
    changes = _rows(spark, log_dir, topic, since, mode, tombstones=True)
    if mode == "changelog":
        write_table(spark, decoded(changes), output, format, _note(topic, mode, ends), append=True)
    else:  # a tombstone is told before decoding: a decoded value is null also for the JSON text `null`
        merge_latest(
            spark,
            decoded(changes.withColumn(DELETED, changes["value"].isNull())),
            output,
            format,
            _note(topic, mode, ends),
        )
    result.committed = True
    return result
