"""Purge: every record of given keys leaves a log directory, offline, with every other record's
offset, bytes and batch kept, and an audit ledger that stores no key (DESIGN.md: purge).

    from kafkalog.spark.purge import purge
    from kafkalog.storage.ledger import load_secret

    result = purge(spark, "/archive/kafka", "erase.txt", ledger="/audit/purges",
                   secret=load_secret("/etc/kafkalog/purge.secret"))
    print(result.summary())

The data flow is compaction's (DESIGN.md) with purge's own decide step:

1. Inventory (driver): interrupted swaps are recovered, a locked directory refused; the log end
   offset of each partition (a purge never lowers it).
2. Scan and decide (executors): the narrow scan (keys, no values) joined with the keys; with
   `where`, the records view of the same topics filtered by that Spark SQL expression. Control
   batches never match. A matched record is removed, except:
   * with `tombstone`, in a compacted topic, the latest record of each purged key stays as a
     tombstone (value and headers dropped) so consumers learn of the deletion; compaction removes
     it once its delete horizon (now + delete.retention.ms, set by this rewrite) has passed;
   * the last record of a v0/v1 partition stays with no key, value or headers ("redacted"): a
     legacy batch cannot stay empty (Kafka's cleaner fails there too), and without it the log end
     offset would drop below offsets consumers have read.
   An emptied batch stays as an empty batch when it has a producer id or is the partition's last.
   Kafka's cleaner keeps only each active producer's last batch; a purge keeps them all because it
   also rewrites delete-policy partitions and the active segment, whose `.txnindex` entries and
   producer snapshots a reload checks against the batches (transaction first offsets, last
   sequences). A re-encoded batch's max timestamp becomes its kept records' largest, as Kafka's
   rewrite sets it; producer snapshots keep the one they had, as after Kafka's cleaner.
3. Rewrite (executors): one output segment per touched source segment (spark/rewrite.py); batches
   without a purged record are copied byte for byte, untouched segments are not rewritten.
4. Ledger (spark/ledger.py: executors through delta-spark where the session has it, else the driver
   with deltalake): the rows are written *before* the swap (write-ahead), merged so that no row is
   written twice. A crash after it leaves rows for records still in the log; the rerun that
   recovers the directory purges them and adds no rows. Written after the swap instead, a crash
   in between would lose the audit of records already gone.
5. Commit (driver): the swap protocol per partition.
6. Verify (executors): the touched partitions are scanned again; the decide step must find
   nothing left to do (`PurgeVerificationError` otherwise). A run row goes to the run table.

A rerun of the same purge finds nothing to do: it rewrites nothing and adds no records rows.
Internal topics (names starting with `__`) are purged only when named in `topics`.
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from .. import __version__
from ..codec.filter import BatchRetention
from ..config import ConfigResolver
from ..errors import ConfigError, KafkaLogError
from ..storage.fs import LogFileSystem
from ..storage.keylist import DEFAULT_REASON, KEY_FORMATS, KeyListError, parse_key, read_key_file
from ..storage.ledger import load_secret
from ..storage.destination import destination
from ..storage.logdir import LogDir
from ..storage.naming import KRAFT_METADATA_NOT_REWRITTEN, is_kraft_metadata
from ..storage.swap import FaultHook, recover_partition
from .errors import raises_kafkalog_errors
from .ledger import write_ledger_records, write_ledger_run
from .rewrite import OutputSegment, swap_in, write_outputs
from .scan import RECORDS_SCHEMA, narrow_scan, read_records, spark_schema

ACTIONS = ("removed", "tombstoned", "redacted")
BROADCAST_KEYS = 1_000_000  # a key list this long or shorter is broadcast to the scan's tasks


class PurgeVerificationError(KafkaLogError):
    """The rescan after a purge found a record that should be gone."""


@dataclass
class PurgeResult:
    run_id: str
    now: int
    dry_run: bool
    log_dir: str
    partitions: list[dict]  # per topic-partition: what was (or would be) purged, and the verification
    ledger_rows: int = 0
    outputs: list = field(default_factory=list)  # OutputStats of the rewritten segments

    def total(self, column: str) -> int:
        return sum(p[column] for p in self.partitions)

    @property
    def remaining(self) -> int:
        return self.total("remaining")

    def summary(self) -> str:
        verb = "would purge" if self.dry_run else "purged"
        text = (f"{verb} {self.total('removed')} records removed, {self.total('tombstoned')} tombstoned, "
                f"{self.total('redacted')} redacted in {len(self.partitions)} partitions")
        if not self.dry_run:
            text += (f"; {len(self.outputs)} segments rewritten; ledger: {self.ledger_rows} rows added; "
                     f"verified: {self.remaining} records of purged keys remain")
        return text

    def to_dict(self) -> dict:
        return {"run_id": self.run_id, "now": self.now, "dry_run": self.dry_run, "log_dir": self.log_dir,
                "ledger_rows": self.ledger_rows, "partitions": self.partitions,
                "segments": [o.to_dict() for o in self.outputs]}


@raises_kafkalog_errors
def purge(spark, log_dir: str, keys, *, ledger: str | None = None, secret: bytes | None = None,
          keys_format: str | None = None, topics: Iterable[str] | None = None, where: str | None = None,
          tombstone: bool = False, config: ConfigResolver | None = None, now: int | None = None,
          reason: str = DEFAULT_REASON, output: str | None = None, dry_run: bool = False,
          fault: FaultHook | None = None) -> PurgeResult:
    """Remove every record of `keys` (a DataFrame with a `key` column, a list of bytes or written
    forms, or the path of a key file or table, see `keys_frame`) and, with `where`, every record
    the Spark SQL expression over the records view selects, from `topics` (default: every topic
    but internal ones) of `log_dir`.

    `ledger`: the Delta table of purged records (required unless `dry_run`); `secret`: the key
    fingerprint secret (default: `load_secret()`, from KAFKALOG_PURGE_SECRET). `config`: topic
    configuration (cleanup.policy, delete.retention.ms, index.interval.bytes). `now`: the clock,
    epoch ms. `output`: purge a copy written there, `log_dir` untouched. `fault`: a swap test hook."""
    now = int(time.time() * 1000) if now is None else int(now)
    started, run_id = int(time.time() * 1000), uuid.uuid4().hex
    resolver = config or ConfigResolver()
    if not dry_run and ledger is None:
        raise ConfigError("a purge writes an audit ledger: give its path (--ledger)")
    secret = secret if secret is not None or dry_run else load_secret()
    key_df, key_count = keys_frame(spark, keys, keys_format, reason)  # bad keys fail before anything is written
    if where:  # and so does a bad expression: checked against the records view's columns
        _where(spark.createDataFrame([], spark_schema(RECORDS_SCHEMA)), where)
    with destination(log_dir, output, dry_run=dry_run) as target:
        result = _purge(spark, target.path, output or log_dir, key_df, key_count, run_id=run_id, now=now,
                        started=started, ledger=ledger, secret=secret, topics=topics, where=where,
                        tombstone=tombstone, resolver=resolver, reason=reason, dry_run=dry_run, fault=fault)
    return result


@raises_kafkalog_errors  # inside the destination's block, so that it can name the input's files
def _purge(spark, log_dir: str, named: str, key_df, key_count, *, run_id: str, now: int, started: int, ledger,
           secret, topics, where, tombstone: bool, resolver: ConfigResolver, reason: str, dry_run: bool,
           fault) -> PurgeResult:
    """The purge of `log_dir`, the directory rewritten in place (the input, or the staged output),
    which the result and the ledger call `named` (the input, or the output's own name)."""
    opened, scope = _open(log_dir, topics, dry_run)
    decider = _Decider(spark, log_dir, key_df, key_count, where, tombstone, resolver, reason,
                       _log_end_offsets(opened, scope))
    matched, decided = decider.decide(sorted({t for t, _ in scope}))
    try:
        report = _partition_report(decided)
        if dry_run:
            return PurgeResult(run_id, now, dry_run, named, report)
        outputs = _output_segments(opened, decided, resolver, now)
        stats = write_outputs(spark, log_dir, outputs, _batch_plans(decided))
        rows = write_ledger_records(spark, ledger, decided.where(decided.action.isNotNull()), secret=secret,
                                    run_id=run_id, purged_at_ms=now, log_dir=named)
        swap_in(opened, outputs, fault)
    finally:
        matched.unpersist()
    result = PurgeResult(run_id, now, dry_run, named, report, rows, stats)
    _verify(decider, result, {(o.topic, o.partition) for o in outputs})
    write_ledger_run(spark, ledger, _run_row(result, started, key_df.count() if key_count is None else key_count,
                                             topics, where, tombstone))
    if result.remaining:
        first = next(p for p in result.partitions if p["remaining"])
        raise PurgeVerificationError(f"after the rewrite {result.remaining} records of purged keys remain, "
                                     f"{first['remaining']} in {first['topic']}-{first['partition']} (run "
                                     f"{run_id}; the ledger lists what was purged)", file=named)
    return result


def _where(records, where: str):
    """`records` filtered by the operator's expression; a typo is a ConfigError, not a traceback."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F
    try:
        return records.where(F.expr(where))
    except AnalysisException as err:
        raise ConfigError(f"--where is not a boolean Spark SQL expression over the records view "
                          f"({', '.join(records.columns)}): {err}") from None


def _open(log_dir: str, topics, dry_run: bool) -> tuple[LogDir, list]:
    """The log directory and the partitions to purge, settled: interrupted swaps recovered (a dry
    run, which writes nothing, refuses them)."""
    opened = LogDir.open(log_dir)
    scope = _scope(opened, topics)
    if not dry_run:
        for tp in scope:
            recover_partition(opened.fs, opened.partition_paths[tp])
    for tp in scope:
        opened.partition(*tp).ensure_settled()
    return opened, scope


# -- inputs ----------------------------------------------------------------------------------------

def keys_frame(spark, keys, keys_format: str | None = None, reason: str = DEFAULT_REASON):
    """The keys as a DataFrame (`key` binary, `reason` string) without duplicates, and their
    number when it is known without a Spark job (a local list or key file).

    `keys`: a DataFrame whose `key` column is binary (the bytes) or string (written forms, see
    storage/keylist.py), with an optional `reason` column; a list of bytes or written forms; or the
    path of a key file (`text`, one key per line) or table (`parquet`, `csv` with a header row,
    `delta`). `keys_format` defaults from the path: a Delta table, `.parquet`, `.csv`, else text."""
    from pyspark.sql import DataFrame, functions as F
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
    from pyspark.sql import functions as F, types as T
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
    return (df.where(F.col("key").isNotNull())
            .groupBy("key").agg(F.coalesce(F.min(why), F.lit(reason)).alias("reason")))


def _parse_keys(column):
    """Written forms to bytes with storage/keylist.py's parser (null where malformed)."""
    from pyspark.sql import functions as F

    def parse_or_null(text):
        try:
            return None if text is None else parse_key(text)
        except ValueError:
            return None
    return F.udf(parse_or_null, "binary")(column)


def _scope(opened: LogDir, topics: Iterable[str] | None) -> list[tuple[str, int]]:
    """The partitions to purge: those of `topics`, else of every topic but the internal ones."""
    if topics is None:
        return [tp for tp in opened.topic_partitions if not tp[0].startswith("__")]
    wanted = set([topics] if isinstance(topics, str) else topics)
    refused = sorted(filter(is_kraft_metadata, wanted))
    if refused:
        raise ConfigError(f"purge refuses topic {refused[0]}: {KRAFT_METADATA_NOT_REWRITTEN}, nor does kafkalog "
                          "rewrite it")
    return [tp for tp in opened.topic_partitions if tp[0] in wanted]


def _log_end_offsets(opened: LogDir, scope: Sequence[tuple[str, int]]) -> dict:
    """(topic, partition) -> log end offset: the end of the last batch of the last segment (its
    base offset when it is empty)."""
    ends = {}
    for tp in scope:
        segments = opened.partition(*tp).segments
        if segments:
            last = segments[-1].last_offset()
            ends[tp] = segments[-1].base_offset if last is None else last + 1
    return ends


# -- decide --------------------------------------------------------------------------------------------

class _Decider:
    """Step 2, shared by the purge and its verification: which records match, and what becomes of each."""

    def __init__(self, spark, log_dir, keys, key_count, where, tombstone, resolver, reason, log_ends):
        self.spark, self.log_dir, self.keys, self.where = spark, log_dir, keys, where
        self.broadcast = key_count is not None and key_count <= BROADCAST_KEYS
        self.tombstone, self.resolver, self.reason = tombstone, resolver, reason
        self.log_ends = spark.createDataFrame([(t, p, end) for (t, p), end in log_ends.items()],
                                              "topic string, partition int, log_end long")

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
        narrow = narrow_scan(self.spark, self.log_dir, topics=topics, partitions=numbers).where(~F.col("is_control"))
        if partitions is not None:
            chosen = self.spark.createDataFrame(sorted(partitions), "topic string, partition int")
            narrow = narrow.join(F.broadcast(chosen), ["topic", "partition"], "left_semi")
        keys = self.keys.withColumnRenamed("reason", "key_reason").withColumn("by_key", F.lit(True))
        rows = narrow.join(F.broadcast(keys) if self.broadcast else keys, "key", "left")
        hit = F.col("by_key").isNotNull()
        if self.where:
            selected = self._selected_by_where(topics, numbers).select(
                "topic", "partition", "offset", F.lit(True).alias("by_where"))
            rows = rows.join(selected, ["topic", "partition", "offset"], "left")
            hit = hit | F.col("by_where").isNotNull()
        return (rows.where(hit).join(F.broadcast(self.log_ends), ["topic", "partition"])
                .select("topic", "partition", "segment_base_offset", "batch_position", "batch_last_offset",
                        "offset", "timestamp", "key", "value_is_null", "producer_id", "magic", "log_end",
                        F.when(F.col("by_key").isNotNull(), "key").otherwise("where").alias("matched_by"),
                        F.coalesce(F.col("key_reason"), F.lit(self.reason)).alias("reason")))

    def _selected_by_where(self, topics: Sequence[str], partitions):
        from pyspark.sql import functions as F
        records = read_records(self.spark, self.log_dir, topics=topics, partitions=partitions) \
            .where(~F.col("is_control"))
        return _where(records, self.where)

    def _with_actions(self, matched, compacted: list[str]):
        """`matched` with `action`: removed, tombstoned (the latest record of a key in a compacted
        topic, with `tombstone`), redacted, or null where the record already is what the purge
        leaves (a tombstone without headers, a redacted last record)."""
        from pyspark.sql import Window, functions as F
        by_key = F.col("matched_by") == "key"
        latest = F.max(F.when(by_key, F.col("offset"))).over(Window.partitionBy("topic", "partition", "key"))
        rows = matched.withColumn("target", F.col("topic").isin(compacted) & by_key & (F.col("offset") == latest))
        with_headers = self._tombstones_with_headers(rows) if compacted else []
        headers = F.lit(False)
        if with_headers:
            flagged = self.spark.createDataFrame(with_headers, "topic string, partition int, offset long")
            rows = rows.join(F.broadcast(flagged.withColumn("has_headers", F.lit(True))),
                             ["topic", "partition", "offset"], "left")
            headers = F.coalesce(F.col("has_headers"), F.lit(False))
        clean_tombstone = F.col("value_is_null") & ~headers
        legacy_last = (F.col("magic") < 2) & (F.col("offset") + 1 == F.col("log_end"))
        redacted = F.col("key").isNull() & F.col("value_is_null")
        action = (F.when(F.col("target"), F.when(~clean_tombstone, "tombstoned"))
                  .when(legacy_last, F.when(~redacted, "redacted"))
                  .otherwise("removed"))
        return rows.withColumn("action", action)

    def _tombstones_with_headers(self, rows) -> list[tuple]:
        """The tombstone targets that already are tombstones but carry headers (which may hold
        personal data): few, read on the driver, batch by batch."""
        from pyspark.sql import functions as F
        candidates = (rows.where(F.col("target") & F.col("value_is_null") & (F.col("magic") >= 2))
                      .select("topic", "partition", "segment_base_offset", "batch_position", "offset").collect())
        wanted: dict = {}
        for r in candidates:
            wanted.setdefault((r.topic, r.partition, r.segment_base_offset, r.batch_position), set()).add(r.offset)
        opened = LogDir.open(self.log_dir)
        out = []
        for (topic, partition, base, position), offsets in sorted(wanted.items()):
            segment = next(s for s in opened.partition(topic, partition).segments if s.base_offset == base)
            _, batch = next(segment.batches(start=position))
            out += [(topic, partition, r.offset) for r in batch.records() if r.offset in offsets and r.headers]
        return out


def _partition_report(decided) -> list[dict]:
    from pyspark.sql import functions as F
    acts = F.col("action").isNotNull()
    counts = [F.sum(F.when(F.col("action") == a, 1).otherwise(0)).alias(a) for a in ACTIONS]
    rows = decided.groupBy("topic", "partition").agg(
        *counts,
        F.sum(F.when(acts, 0).otherwise(1)).alias("kept"),
        F.countDistinct(F.when(acts, F.struct("segment_base_offset", "batch_position"))).alias("batches"),
        F.countDistinct(F.when(acts, F.col("segment_base_offset"))).alias("segments"),
        F.countDistinct(F.when(F.col("matched_by") == "key", F.col("key"))).alias("keys")).collect()
    return [dict(r.asDict(), remaining=None) for r in sorted(rows, key=lambda r: (r.topic, r.partition))]


# -- rewrite ---------------------------------------------------------------------------------------------

def _batch_plans(decided):
    """One `PLAN_COLUMNS` row per batch with a purged record. An emptied batch stays when it has a
    producer id (producer and transaction state) or ends the partition (the log end offset)."""
    from pyspark.sql import functions as F

    def offsets(action: str):
        return F.collect_list(F.when(F.col("action") == action, F.col("offset"))).alias(action)
    keeps = (F.col("producer_id") >= 0) | (F.col("batch_last_offset") + 1 == F.col("log_end"))
    return (decided.where(F.col("action").isNotNull())
            .groupBy("topic", "partition", "segment_base_offset", "batch_position")
            .agg(*[offsets(a) for a in ACTIONS], F.max(keeps).alias("keeps"))
            .select("topic", "partition", "segment_base_offset", "batch_position", *ACTIONS,
                    F.when(F.col("keeps"), BatchRetention.RETAIN_EMPTY.value)
                    .otherwise(BatchRetention.DELETE_EMPTY.value).alias("retention")))


def _output_segments(opened: LogDir, decided, resolver: ConfigResolver, now: int) -> list[OutputSegment]:
    """One output per source segment with a purged record; its `.txnindex` entries all stay (a
    purge keeps every transaction marker and a batch of every transaction)."""
    touched = (decided.where(decided.action.isNotNull()).select("topic", "partition", "segment_base_offset")
               .distinct().collect())
    outputs = []
    for r in sorted(touched):
        config = resolver.for_topic(r.topic)
        segment = next(s for s in opened.partition(r.topic, r.partition).segments
                       if s.base_offset == r.segment_base_offset)
        outputs.append(OutputSegment(r.topic, r.partition, (r.segment_base_offset,),
                                     now + config.delete_retention_ms, config.index_interval_bytes,
                                     tuple(tuple(t) for t in segment.aborted_txns()),
                                     nbytes=segment.size))
    return outputs


# -- verify and report ----------------------------------------------------------------------------------

def _verify(decider: _Decider, result: PurgeResult, touched: set) -> None:
    """Rescan the touched partitions: `remaining` counts records the purge still finds to do."""
    from pyspark.sql import functions as F
    left = {}
    if touched:
        matched, decided = decider.decide(sorted({t for t, _ in touched}), touched)
        rows = decided.where(F.col("action").isNotNull()).groupBy("topic", "partition").count().collect()
        matched.unpersist()
        left = {(r.topic, r.partition): r["count"] for r in rows}
    for p in result.partitions:
        p["remaining"] = left.get((p["topic"], p["partition"]), 0)
    by_partition: dict = {}
    for o in result.outputs:
        entry = by_partition.setdefault((o.topic, o.partition), [0, 0])
        entry[0] += o.bytes_in
        entry[1] += o.bytes_out
    for p in result.partitions:
        p["bytes_before"], p["bytes_after"] = by_partition.get((p["topic"], p["partition"]), (0, 0))


def _run_row(result: PurgeResult, started: int, key_count: int, topics, where, tombstone) -> dict:
    return {"run_id": result.run_id, "started_at": started, "finished_at": int(time.time() * 1000),
            "purged_at": result.now, "log_dir": result.log_dir,
            "topics": None if topics is None else sorted([topics] if isinstance(topics, str) else topics),
            "keys": key_count, "where": bool(where), "tombstone": tombstone,
            "partitions": sum(1 for p in result.partitions if p["segments"]), "segments": len(result.outputs),
            "records_removed": result.total("removed"), "records_tombstoned": result.total("tombstoned"),
            "records_redacted": result.total("redacted"), "ledger_rows": result.ledger_rows,
            "remaining": result.remaining, "kafkalog_version": __version__}
