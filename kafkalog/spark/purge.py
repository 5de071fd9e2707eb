"""A purge's decisions as a Spark plan (the command is kafkalog/operations/purge.py): the keys
as a DataFrame, the records they (or a `where` expression) match, what becomes of each, and the
batch plans of the rewrite."""

from __future__ import annotations

from collections.abc import Sequence

from ..codec.filter import BatchRetention
from ..errors import ConfigError
from ..storage.fs import LogFileSystem
from ..storage.keylist import DEFAULT_REASON, KEY_FORMATS, KeyListError, parse_key, read_key_file
from ..storage.logdir import LogDir
from .rewrite import removed_run
from .scan import narrow_scan, read_records

ACTIONS = ("removed", "tombstoned", "redacted")
BROADCAST_KEYS = 1_000_000  # a key list this long or shorter is broadcast to the scan's tasks


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
    `delta`). `keys_format` defaults from the path: a Delta table, `.parquet`, `.csv`, else text."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    if isinstance(keys, str):
        keys_format = keys_format or _guess_format(keys)
        if keys_format not in KEY_FORMATS:
            raise ConfigError(f"keys format must be one of {', '.join(KEY_FORMATS)}, not {keys_format!r}")
        if keys_format == "text":
            keys = read_key_file(keys)
        else:
            return _normalized(_read_key_table(spark, keys, keys_format), keys, reason), None
    if isinstance(keys, DataFrame):
        return _normalized(keys, "the keys DataFrame", reason), None
    values = sorted({parse_key(k) if isinstance(k, str) else bytes(k) for k in keys})
    df = spark.createDataFrame([(k,) for k in values], "key binary").withColumn("reason", F.lit(reason))
    return df, len(values)


def _guess_format(path: str) -> str:
    fs, local = LogFileSystem.for_path(path)
    if fs.is_dir(local):
        return "delta" if fs.exists(fs.join(local, "_delta_log")) else "parquet"
    lower = local.lower()
    return "parquet" if lower.endswith((".parquet", ".pq")) else "csv" if lower.endswith(".csv") else "text"


def _read_key_table(spark, path: str, keys_format: str):
    if keys_format == "parquet":
        return spark.read.parquet(path)
    if keys_format == "csv":
        return spark.read.option("header", True).csv(path)
    try:
        from deltalake import DeltaTable
    except ImportError:
        raise KeyListError("reading a Delta table needs the deltalake package", file=path) from None
    return spark.createDataFrame(DeltaTable(path).to_pyarrow_table())


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
            raise KeyListError(f"{bad} values of the `key` column are malformed hex: or base64: forms", file=source)
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


class Decider:
    """Step 2 of a purge, shared by the purge and its verification: which records match, and what becomes of each."""

    def __init__(self, spark, log_dir, keys, key_count, where, tombstone, resolver, reason, log_ends):
        self.spark, self.log_dir, self.keys, self.where = spark, log_dir, keys, where
        self.broadcast = key_count is not None and key_count <= BROADCAST_KEYS
        self.tombstone, self.resolver, self.reason = tombstone, resolver, reason
        self.log_ends = spark.createDataFrame(
            [(t, p, end) for (t, p), end in log_ends.items()], "topic string, partition int, log_end long"
        )

    def decide(self, topics: Sequence[str], partitions=None):
        """(matched, decided): the matched records, cached (unpersist `matched` when done), and
        the same with their `action`."""
        matched = self._matched(topics, partitions).cache()
        compacted = [t for t in topics if self.tombstone and self.resolver.for_topic(t).compact]
        return matched, self._with_actions(matched, compacted)

    def _matched(self, topics: Sequence[str], partitions):
        """The data records the keys or `where` select in `topics` (and, if given, only the
        (topic, partition) pairs of `partitions`), with their batch and why they matched."""
        from pyspark.sql import functions as F

        numbers = None if partitions is None else sorted({p for _, p in partitions})  # the scan prunes by these
        narrow = self._scan("narrow", topics, numbers).where(~F.col("isControl"))
        if partitions is not None:
            chosen = self.spark.createDataFrame(sorted(partitions), "topic string, partition int")
            narrow = narrow.join(F.broadcast(chosen), ["topic", "partition"], "left_semi")
        keys = self.keys.withColumnRenamed("reason", "key_reason").withColumn("by_key", F.lit(True))
        rows = narrow.join(F.broadcast(keys) if self.broadcast else keys, "key", "left")
        hit = F.col("by_key").isNotNull()
        if self.where:
            selected = self._selected_by_where(topics, numbers).select(
                "topic", "partition", "offset", F.lit(True).alias("by_where")
            )
            rows = rows.join(selected, ["topic", "partition", "offset"], "left")
            hit = hit | F.col("by_where").isNotNull()
        return (
            rows.where(hit)
            .join(F.broadcast(self.log_ends), ["topic", "partition"])
            .select(
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
                "log_end",
                F.when(F.col("by_key").isNotNull(), "key").otherwise("where").alias("matched_by"),
                F.coalesce(F.col("key_reason"), F.lit(self.reason)).alias("reason"),
            )
        )

    def _selected_by_where(self, topics: Sequence[str], partitions):
        from pyspark.sql import functions as F

        return where_filter(self._scan("records", topics, partitions).where(~F.col("isControl")), self.where)

    def _scan(self, view: str, topics: Sequence[str], partitions):
        """The `narrow` or `records` view of the records to decide (a remote tier's decider reads
        other segments: spark/remote_purge.py)."""
        scan = narrow_scan if view == "narrow" else read_records
        return scan(self.spark, self.log_dir, topics=topics, partitions=partitions)

    def _with_actions(self, matched, compacted: list[str]):
        """`matched` with `action`: removed, tombstoned (the latest record of a key in a compacted
        topic, with `tombstone`), redacted, or null where the record already is what the purge
        leaves (a tombstone without headers, a redacted last record)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        by_key = F.col("matched_by") == "key"
        latest = F.max(F.when(by_key, F.col("offset"))).over(Window.partitionBy("topic", "partition", "key"))
        rows = matched.withColumn("target", F.col("topic").isin(compacted) & by_key & (F.col("offset") == latest))
        with_headers = self._tombstones_with_headers(rows) if compacted else []
        headers = F.lit(False)
        if with_headers:
            flagged = self.spark.createDataFrame(with_headers, "topic string, partition int, offset long")
            rows = rows.join(
                F.broadcast(flagged.withColumn("has_headers", F.lit(True))), ["topic", "partition", "offset"], "left"
            )
            headers = F.coalesce(F.col("has_headers"), F.lit(False))
        clean_tombstone = F.col("valueIsNull") & ~headers
        legacy_last = (F.col("magic") < 2) & (F.col("offset") + 1 == F.col("log_end"))
        redacted = F.col("key").isNull() & F.col("valueIsNull")
        action = (
            F.when(F.col("target"), F.when(~clean_tombstone, "tombstoned"))
            .when(legacy_last, F.when(~redacted, "redacted"))
            .otherwise("removed")
        )
        return rows.withColumn("action", action)

    def _tombstones_with_headers(self, rows) -> list[tuple]:
        """The tombstone targets that already are tombstones but carry headers (which may hold
        personal data): few, read on the driver, batch by batch."""
        from pyspark.sql import functions as F

        candidates = (
            rows.where(F.col("target") & F.col("valueIsNull") & (F.col("magic") >= 2))
            .select("topic", "partition", "segmentBaseOffset", "position", "offset")
            .collect()
        )
        wanted: dict = {}
        for r in candidates:
            wanted.setdefault((r.topic, r.partition, r.segmentBaseOffset, r.position), set()).add(r.offset)
        opened = LogDir.open(self.log_dir)
        out = []
        for (topic, partition, base, position), offsets in sorted(wanted.items()):
            segment = next(s for s in opened.partition(topic, partition).segments if s.base_offset == base)
            _, batch = next(segment.batches(start=position))
            out += [(topic, partition, r.offset) for r in batch.records() if r.offset in offsets and r.headers]
        return out


def partition_report(decided) -> list[dict]:
    from pyspark.sql import functions as F

    acts = F.col("action").isNotNull()
    counts = [F.sum(F.when(F.col("action") == a, 1).otherwise(0)).alias(a) for a in ACTIONS]
    rows = (
        decided.groupBy("topic", "partition")
        .agg(
            *counts,
            F.sum(F.when(acts, 0).otherwise(1)).alias("kept"),
            F.countDistinct(F.when(acts, F.struct("segmentBaseOffset", "position"))).alias("batches"),
            F.countDistinct(F.when(acts, F.col("segmentBaseOffset"))).alias("segments"),
            F.countDistinct(F.when(F.col("matched_by") == "key", F.col("key"))).alias("keys"),
        )
        .collect()
    )
    return [dict(r.asDict(), remaining=None) for r in sorted(rows, key=lambda r: (r.topic, r.partition))]


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
        .groupBy("topic", "partition", "segmentBaseOffset", "position")
        .agg(*[offsets(a) for a in ACTIONS], F.max(keeps).alias("keeps"))
        .select(
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
