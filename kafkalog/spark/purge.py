"""A purge's decisions as a Spark plan (the command is kafkalog/operations/purge.py): the keys
as a DataFrame, the records they (or a `where` expression) match, what becomes of each, and the
batch plans of the rewrite.

A purge works on one or more copies of a log (`PurgeScope`: the log dirs of every broker holding
a replica, JBOD dirs included), listed once on the driver. Every row of the decision carries its
`copy` (an index into the plan's copies); the keys are joined with the records of every copy at
once, and the rules that look beyond one record (a key's latest record, a legacy partition's last)
look at every copy of its partition, so that copies that agree before agree after."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import tuning
from ..codec.filter import BatchRetention
from ..errors import ConfigError
from ..scan.inventory import log_dir_uri
from ..scan.scan_plan import ScanFilter, plan_segments
from ..storage.keylist import DEFAULT_REASON, KEY_FORMATS, KeyListError, parse_key, read_key_file
from ..storage.logdir import LogDir
from ..storage.segment import LogSegment, log_end_offset
from ..storage.tables import detect_format
from .rewrite import removed_run
from .scan import SEGMENT_END, default_min_tasks, scan_dataframe
from .tables import read_table

ACTIONS = ("removed", "tombstoned", "redacted")


def where_filter(records, where: str):
    """`records` filtered by the operator's expression; a typo is a ConfigError, not a traceback."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    try:
        return records.where(F.expr(where))
    except AnalysisException as err:
        raise ConfigError(
            f"--where is not a boolean Spark SQL expression over the records view ({', '.join(records.columns)}): {err}"
        ) from None


# -- inputs ----------------------------------------------------------------------------------------


def keys_frame(spark, keys, keys_format: str | None = None, reason: str = DEFAULT_REASON):
    """The keys as a DataFrame (`key` binary, `reason` string) without duplicates, and their
    number when it is known without a Spark job (a local list or key file).

    `keys`: a DataFrame whose `key` column is binary (the bytes) or string (written forms, see
    storage/keylist.py), with an optional `reason` column; a list of bytes or written forms; or the
    path of a key file (`text`, one key per line) or table (`parquet`, `csv` with a header row,
    `delta`, read through spark/tables.py: delta-spark, or deltalake, either applying the deletion
    vectors of a table `export --incremental` wrote). `keys_format` defaults from the path
    (storage/tables' `detect_format`): a table's directory, `.parquet`, `.csv`, else text."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    if isinstance(keys, str):
        keys_format = keys_format or detect_format(keys, files=("parquet", "csv"), default="text")
        if keys_format not in KEY_FORMATS:
            raise ConfigError(f"keys format must be one of {', '.join(KEY_FORMATS)}, not {keys_format!r}")
        if keys_format == "text":
            keys = read_key_file(keys)
        else:
            return _normalized(read_table(spark, keys, keys_format), keys, reason), None
    if isinstance(keys, DataFrame):
        return _normalized(keys, "the keys DataFrame", reason), None
    values = sorted({parse_key(k) if isinstance(k, str) else bytes(k) for k in keys})
    df = spark.createDataFrame([(k,) for k in values], "key binary").withColumn("reason", F.lit(reason))
    return df, len(values)


def _normalized(df, source: str, reason: str):
    """`key` as bytes (string columns parsed as written forms; a form that does not parse is an
    error naming the table), `reason` defaulting to the run's, one row per key."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if "key" not in df.columns:
        raise KeyListError(f"a keys table needs a `key` column; it has {', '.join(df.columns)}", file=source)
    kind = df.schema["key"].dataType
    if isinstance(kind, T.StringType):
        df = df.withColumn("key_text", F.col("key")).withColumn("key", _parse_keys(F.col("key")))
        bad = df.where(F.col("key_text").isNotNull() & F.col("key").isNull()).count()
        if bad:
            raise KeyListError(
                f"{bad} values of the `key` column are malformed hex: or base64: forms, or empty or whitespace only "
                "(write those keys as text:..., hex:... or base64:...)",
                file=source,
            )
    elif not isinstance(kind, T.BinaryType):
        raise KeyListError(f"the `key` column must be binary or string, not {kind.simpleString()}", file=source)
    why = F.col("reason").cast("string") if "reason" in df.columns else F.lit(None)
    return df.where(F.col("key").isNotNull()).groupBy("key").agg(F.coalesce(F.min(why), F.lit(reason)).alias("reason"))


def _parse_keys(column):
    """Written forms to bytes with storage/keylist.py's parser (null where malformed)."""
    from pyspark.sql import functions as F

    def parse_or_null(text):
        try:
            return None if text is None else parse_key(text)
        except ValueError:
            return None

    return F.udf(parse_or_null, "binary")(column)


# -- decide --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Copy:
    """One copy of the log a purge rewrites: a log dir, its partitions to purge, listed once."""

    log_dir: str  # the directory rewritten in place (the input, or the staged output), as LogDir.open takes it
    name: str  # how the result names it: the input, or the output, as given (the ledger: its log_dir_identity)
    opened: LogDir
    segments: Mapping[tuple[str, int], list[LogSegment]]  # (topic, partition) -> its segments, listed
    node_id: int | None = None  # meta.properties's node.id (broker.id), where it has one
    directory_id: str | None = None  # meta.properties's directory.id, where it has one

    def log_ends(self) -> dict:
        """(topic, partition) -> log end offset: the end of the last batch of the last segment (its
        base offset when it is empty)."""
        return {tp: log_end_offset(segments) for tp, segments in self.segments.items() if segments}


@dataclass(frozen=True)
class PurgeScope:
    """What a purge reads, listed once on the driver: every copy's partitions and segments. The
    decide step scans these segments and the rewrite replaces them; nothing lists them again
    before the swap (the verifying rescan lists the touched partitions anew: it is the proof)."""

    copies: tuple[Copy, ...]

    @property
    def topics(self) -> list[str]:
        return sorted({t for c in self.copies for t, _ in c.segments})

    def segment(self, copy: int, topic: str, partition: int, base_offset: int) -> LogSegment:
        return next(s for s in self.copies[copy].segments[topic, partition] if s.base_offset == base_offset)

    def relisted(self, touched) -> PurgeScope:
        """The plan of the partitions in `touched` ((copy, topic, partition)), each listed anew."""
        copies = []
        for i, c in enumerate(self.copies):
            mine = sorted((t, p) for k, t, p in touched if k == i)
            copies.append(Copy(c.log_dir, c.name, c.opened, {tp: c.opened.partition(*tp).segments for tp in mine}))
        return PurgeScope(tuple(copies))


class Decider:
    """Step 2 of a purge, shared by the purge and its verification: which records match, and what becomes of each."""

    def __init__(self, spark, plan: PurgeScope, keys, key_count, where, tombstone, resolver, reason):
        self.spark, self.plan, self.keys, self.where = spark, plan, keys, where
        self.broadcast = key_count is not None and key_count <= tuning.BROADCAST_KEYS
        self.tombstone, self.resolver, self.reason = tombstone, resolver, reason
        # the log ends before the purge (a purge never lowers one), known once the first `decide`
        # has scanned: the verification judges by them too
        self.log_ends: Any = None  # a DataFrame: (copy, topic, partition, log_end)

    def decide(self, plan: PurgeScope | None = None):
        """(matched, decided) over the segments of `plan` (default: the purge's): the matched
        records, cached (unpersist `matched` when done), and the same with their `action`.

        The first call scans at once, into the cache: its tasks read every batch of each last
        segment and tell its last offset (the cache's `SEGMENT_END` rows, taken out here), which
        gives the log ends (`_learn_log_ends`) without the driver reading the segment's tail, a
        third read beside the scan's and the rewrite's."""
        from pyspark.sql import functions as F

        plan = plan or self.plan
        first = self.log_ends is None
        matched = self._matched(plan, segment_ends=first).cache()
        records = matched
        if first:
            try:
                self._learn_log_ends(plan, matched.where(F.col(SEGMENT_END).isNotNull()).collect())
            except BaseException:
                matched.unpersist()
                raise
            records = matched.where(F.col(SEGMENT_END).isNull()).drop(SEGMENT_END)
        compacted = [t for t in plan.topics if self.tombstone and self.resolver.for_topic(t).compact]
        return matched, self._with_actions(plan, records, compacted)

    def _learn_log_ends(self, plan: PurgeScope, told: list) -> None:
        """Each copy's log ends (Copy.log_ends), from the last segments' last offsets the scan told
        (`told`: rows of `copy` and `SEGMENT_END`); a last segment no task read to its end (an empty
        one) reads its own tail."""
        found = {(r.copy, *r[SEGMENT_END][:3]): r[SEGMENT_END].last_offset for r in told}
        for i, c in enumerate(plan.copies):
            for (topic, partition), segments in c.segments.items():
                key = (i, topic, partition, segments[-1].base_offset) if segments else None
                if key in found:
                    segments[-1].scanned(found[key])
        self.log_ends = self.spark.createDataFrame(
            [(i, t, p, end) for i, c in enumerate(plan.copies) for (t, p), end in c.log_ends().items()],
            "copy int, topic string, partition int, log_end long",
        )

    def _scan(self, plan: PurgeScope, view: str, segment_ends: bool = False):
        """`view` of every copy's planned segments, each row with its `copy`: the tasks of all copies
        in one DataFrame, so that one join matches the keys against all of them. `segment_ends`:
        with scan_dataframe's rows that tell the segments' last offsets (their `isControl` null)."""
        from pyspark.sql import functions as F

        frames = []
        for i, c in enumerate(plan.copies):
            segments = [s for listed in c.segments.values() for s in listed]
            scan_plan = plan_segments(
                log_dir_uri(c.log_dir),
                segments,
                ScanFilter(),
                is_local=c.opened.fs.is_local,
                min_tasks=default_min_tasks(self.spark),
            )
            scanned = scan_dataframe(self.spark, scan_plan, view, segment_ends=segment_ends)
            frames.append(scanned.withColumn("copy", F.lit(i)))
        union = frames[0]
        for frame in frames[1:]:
            union = union.unionByName(frame)
        return union.where(~F.coalesce(F.col("isControl"), F.lit(False)))

    def _matched(self, plan: PurgeScope, segment_ends: bool = False):
        """The data records the keys or `where` select in the plan's segments, with their batch, copy
        and why they matched (with `segment_ends`, and `_scan`'s rows that tell the segments' ends)."""
        from pyspark.sql import functions as F

        narrow = self._scan(plan, "narrow", segment_ends)
        keys = self.keys.withColumnRenamed("reason", "key_reason").withColumn("by_key", F.lit(True))
        rows = narrow.join(F.broadcast(keys) if self.broadcast else keys, "key", "left")
        hit = F.col("by_key").isNotNull()
        if self.where:
            selected = where_filter(self._scan(plan, "records"), self.where).select(
                "copy", "topic", "partition", "offset", F.lit(True).alias("by_where")
            )
            rows = rows.join(selected, ["copy", "topic", "partition", "offset"], "left")
            hit = hit | F.col("by_where").isNotNull()
        told = [F.col(SEGMENT_END)] if segment_ends else []
        if segment_ends:  # the rows that tell the segments' ends stay, for `decide` to take out
            hit = hit | F.col(SEGMENT_END).isNotNull()
        return rows.where(hit).select(
            "copy",
            "topic",
            "partition",
            "segmentBaseOffset",
            "position",
            "lastOffset",
            "offset",
            "timestamp",
            "key",
            "valueIsNull",
            "producerId",
            "magic",
            F.when(F.col("by_key").isNotNull(), "key").otherwise("where").alias("matched_by"),
            F.coalesce(F.col("key_reason"), F.lit(self.reason)).alias("reason"),
            *told,
        )

    def _with_actions(self, plan: PurgeScope, matched, compacted: list[str]):
        """`matched` with `action`: removed, tombstoned (the latest record of a key in a compacted
        topic, with `tombstone`), redacted, or null where the record already is what the purge
        leaves (a tombstone without headers, a redacted last record).

        The latest record of a key is the latest in any copy of its partition, and a legacy
        partition's last record is the last of any copy: a copy that lags behind (a follower)
        then keeps no record of the key where another copy keeps its tombstone, and each copy's
        records over the offsets they share stay the same."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        by_key = F.col("matched_by") == "key"
        latest = F.max(F.when(by_key, F.col("offset"))).over(Window.partitionBy("topic", "partition", "key"))
        matched = matched.join(F.broadcast(self.log_ends), ["copy", "topic", "partition"])
        rows = matched.withColumn("target", F.col("topic").isin(compacted) & by_key & (F.col("offset") == latest))
        with_headers = self._tombstones_with_headers(plan, rows) if compacted else []
        headers = F.lit(False)
        if with_headers:
            flagged = self.spark.createDataFrame(with_headers, "copy int, topic string, partition int, offset long")
            rows = rows.join(
                F.broadcast(flagged.withColumn("has_headers", F.lit(True))),
                ["copy", "topic", "partition", "offset"],
                "left",
            )
            headers = F.coalesce(F.col("has_headers"), F.lit(False))
        ends = self.log_ends.groupBy("topic", "partition").agg(F.collect_set("log_end").alias("log_ends"))
        rows = rows.join(F.broadcast(ends), ["topic", "partition"])
        clean_tombstone = F.col("valueIsNull") & ~headers
        legacy_last = (F.col("magic") < 2) & F.array_contains(F.col("log_ends"), F.col("offset") + 1)
        redacted = F.col("key").isNull() & F.col("valueIsNull")
        action = (
            F.when(F.col("target"), F.when(~clean_tombstone, "tombstoned"))
            .when(legacy_last, F.when(~redacted, "redacted"))
            .otherwise("removed")
        )
        return rows.withColumn("action", action).drop("log_ends")

    def _tombstones_with_headers(self, plan: PurgeScope, rows) -> list[tuple]:
        """The tombstone targets that already are tombstones but carry headers (which may hold
        personal data): few, read on the driver, batch by batch, from the plan's segments."""
        from pyspark.sql import functions as F

        candidates = (
            rows.where(F.col("target") & F.col("valueIsNull") & (F.col("magic") >= 2))
            .select("copy", "topic", "partition", "segmentBaseOffset", "position", "offset")
            .collect()
        )
        wanted: dict = {}
        for r in candidates:
            wanted.setdefault((r.copy, r.topic, r.partition, r.segmentBaseOffset, r.position), set()).add(r.offset)
        out = []
        for (copy, topic, partition, base, position), offsets in sorted(wanted.items()):
            batch = plan.segment(copy, topic, partition, base).batch_at(position)
            out += [(copy, topic, partition, r.offset) for r in batch.records() if r.offset in offsets and r.headers]
        return out


def partition_report(decided) -> list[dict]:
    from pyspark.sql import functions as F

    acts = F.col("action").isNotNull()
    counts = [F.sum(F.when(F.col("action") == a, 1).otherwise(0)).alias(a) for a in ACTIONS]
    rows = (
        decided.groupBy("copy", "topic", "partition")
        .agg(
            *counts,
            F.sum(F.when(acts, 0).otherwise(1)).alias("kept"),
            F.countDistinct(F.when(acts, F.struct("segmentBaseOffset", "position"))).alias("batches"),
            F.countDistinct(F.when(acts, F.col("segmentBaseOffset"))).alias("segments"),
            F.countDistinct(F.when(F.col("matched_by") == "key", F.col("key"))).alias("keys"),
        )
        .collect()
    )
    return [dict(r.asDict(), remaining=None) for r in sorted(rows, key=lambda r: (r.copy, r.topic, r.partition))]


# -- rewrite ---------------------------------------------------------------------------------------------


def batch_plans(decided):
    """One `PLAN_COLUMNS` row per batch with a purged record. An emptied batch stays when it has a
    producer id (producer and transaction state) or ends the partition (the log end offset)."""
    from pyspark.sql import functions as F

    def offsets(action: str):  # the records that go as runs (removed_run), the others as offsets
        offset = removed_run(F.col("offset")) if action == "removed" else F.col("offset")
        return F.collect_list(F.when(F.col("action") == action, offset)).alias(action)

    keeps = (F.col("producerId") >= 0) | (F.col("lastOffset") + 1 == F.col("log_end"))
    return (
        decided.where(F.col("action").isNotNull())
        .groupBy("copy", "topic", "partition", "segmentBaseOffset", "position")
        .agg(*[offsets(a) for a in ACTIONS], F.max(keeps).alias("keeps"))
        .select(
            "copy",
            "topic",
            "partition",
            "segmentBaseOffset",
            "position",
            *ACTIONS,
            F.when(F.col("keeps"), BatchRetention.RETAIN_EMPTY.value)
            .otherwise(BatchRetention.DELETE_EMPTY.value)
            .alias("retention"),
        )
    )
