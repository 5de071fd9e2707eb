"""Purge: every record of given keys leaves a log directory, offline, with every other record's
offset, bytes and batch kept, and an audit ledger that stores no key.

    from kafkalog.operations.purge import purge
    from kafkalog.storage.ledger import load_secret

    result = purge(spark, "/archive/kafka", "erase.txt", ledger="/audit/purges",
                   secret=load_secret("/etc/kafkalog/purge.secret"))
    print(result.summary())

The data flow is compaction's (docs/architecture.md) with purge's own decide step (spark/purge.py):

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
   in between would lose the audit of records already gone. With them, the segments table: each
   rewritten segment's SHA-256, records and bytes before and after, and the copy's broker id and
   directory id (spark/evidence.py), appended (a rerun's staged segments are rows of their own).
5. Commit (driver): the swap protocol per partition.
6. Remote tier (tiered storage, with `remote_storage`): the remote segments of the purged
   partitions go through steps 2 to 6 of their own (operations/purge_remote.py).
7. Verify (executors): the touched partitions are scanned again; the decide step must find
   nothing left to do (`PurgeVerificationError` otherwise). A run row goes to the run table.

A rerun of the same purge finds nothing to do: it rewrites nothing and adds no records rows.
Internal topics (names starting with `__`) are purged only when named in `topics`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .. import __version__
from ..config import ConfigResolver
from ..errors import ConfigError, KafkaLogError
from ..rules.retention import remote_log_enabled
from ..spark.errors import raises_kafkalog_errors
from ..spark.evidence import record_segments
from ..spark.ledger import write_ledger_records, write_ledger_run
from ..spark.progress import task_feed
from ..spark.purge import Decider, batch_plans, keys_frame, partition_report, where_filter
from ..spark.rewrite import OutputSegment, ensure_replaceable, remove_outputs, swap_in, write_outputs
from ..spark.scan import spark_schema
from ..spark.views import RECORDS_SCHEMA
from ..storage.destination import destination
from ..storage.keylist import DEFAULT_REASON, KEY_FORMATS
from ..storage.ledger import load_secret
from ..storage.logdir import LogDir
from ..storage.naming import KRAFT_METADATA_NOT_REWRITTEN, is_kraft_metadata
from ..storage.segment import LogSegment
from ..storage.swap import FaultHook, check_swaps, recover_partition
from . import clock, progress
from .files import camel_keys
from .purge_remote import RemotePurgeResult, purge_remote_tier
from .replicas import ReplicaCheck, check_replicas

# What a caller of the command needs beside it: the key list forms and the fingerprint secret.
__all__ = [
    "purge",
    "PurgeResult",
    "PurgeVerificationError",
    "keys_frame",
    "load_secret",
    "DEFAULT_REASON",
    "KEY_FORMATS",
]


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
    # topics whose remote log is enabled (tiered storage): what is already copied to remote storage
    # is purged only when the remote storage is given (`remote`)
    tiered_topics: list = field(default_factory=list)
    # which copies exist (KRaft metadata) and which were not given; ReplicaCheck(None): nothing says
    replicas: ReplicaCheck = field(default_factory=lambda: ReplicaCheck(None))
    remote: RemotePurgeResult | None = None  # the remote tier's purge (operations/purge_remote.py)

    def total(self, column: str) -> int:
        return sum(p[column] for p in self.partitions)

    @property
    def remaining(self) -> int:
        return self.total("remaining")

    def summary(self) -> str:
        verb = "would purge" if self.dry_run else "purged"
        text = (
            f"{verb} {self.total('removed')} records removed, {self.total('tombstoned')} tombstoned, "
            f"{self.total('redacted')} redacted in {len(self.partitions)} partitions"
        )
        if not self.dry_run:
            text += (
                f"; {len(self.outputs)} segments rewritten; ledger: {self.ledger_rows} rows added; "
                f"verified: {self.remaining} records of purged keys remain"
            )
        if self.remote is not None:
            text += f"; {self.remote.summary(self.dry_run)}"
        elif self.tiered_topics:
            text += (
                f"; WARNING: {', '.join(self.tiered_topics)} use tiered storage (remote.storage.enable=true): "
                "their segments already in remote storage were not purged (give --remote-storage-dir to purge "
                "them too)"
            )
        return f"{text}; {self.replicas.summary()}"

    def to_dict(self) -> dict:
        """The report (`kafkalog purge --report`), keys in camelCase as every report's."""
        return camel_keys(
            {
                "run_id": self.run_id,
                "now": self.now,
                "dry_run": self.dry_run,
                "log_dir": self.log_dir,
                "ledger_rows": self.ledger_rows,
                "partitions": self.partitions,
                "segments": [o.to_dict() for o in self.outputs],
                "tiered_topics": self.tiered_topics,
                "missing_replicas": self.replicas.missing_dicts(),
                "remote": None if self.remote is None else self.remote.to_dict(),
            }
        )


@raises_kafkalog_errors
def purge(
    spark,
    log_dir: str,
    keys,
    *,
    ledger: str | None = None,
    secret: bytes | None = None,
    keys_format: str | None = None,
    topics: Iterable[str] | None = None,
    where: str | None = None,
    tombstone: bool = False,
    config: ConfigResolver | None = None,
    now: int | None = None,
    reason: str = DEFAULT_REASON,
    output: str | None = None,
    dry_run: bool = False,
    fault: FaultHook | None = None,
    follow_symlinks: bool = False,
    metadata: str | None = None,
    allow_missing_replicas: bool = False,
    remote_storage: str | None = None,
) -> PurgeResult:
    """Remove every record of `keys` (a DataFrame with a `key` column, a list of bytes or written
    forms, or the path of a key file or table, see `keys_frame`) and, with `where`, every record
    the Spark SQL expression over the records view selects, from `topics` (default: every topic
    but internal ones) of `log_dir`.

    `ledger`: the Delta table of purged records (required unless `dry_run`); `secret`: the key
    fingerprint secret (default: `load_secret()`, from KAFKALOG_PURGE_SECRET). `config`: topic
    configuration (cleanup.policy, delete.retention.ms, index.interval.bytes). `now`: the clock,
    epoch ms. `output`: purge a copy written there, `log_dir` untouched. `follow_symlinks`: in place,
    rewrite a partition directory that is a symbolic link where it leads (refused otherwise).
    `remote_storage` (tiered storage): the LocalTieredStorage directory (path or URI) whose remote
    segments of the purged partitions are purged too, in place (operations/purge_remote.py).
    `fault`: a test hook called in each rewrite task and at each swap step (spark/rewrite.py,
    storage/swap.py). `metadata`: a KRaft metadata log (a `__cluster_metadata-0` or the log dir
    holding one; default: the one in `log_dir`, if any): a replica of a purged topic's partition
    that the metadata names and `log_dir` does not hold is refused (ConfigError) before anything
    is written, or, with `allow_missing_replicas`, reported and recorded in the run table as not
    purged (operations/replicas.py)."""
    now = clock.now_ms(now)
    started, run_id = int(time.time() * 1000), uuid.uuid4().hex
    resolver = config or ConfigResolver()
    if not dry_run and ledger is None:
        raise ConfigError("a purge writes an audit ledger: give its path (--ledger)")
    if remote_storage is not None and output is not None:
        raise ConfigError(
            "--output purges a copy of the log dir, but the remote storage would be rewritten in place: "
            "purge copies of both, or neither"
        )
    secret = secret if secret is not None or dry_run else load_secret()
    key_df, key_count = keys_frame(spark, keys, keys_format, reason)  # bad keys fail before anything is written
    if where:  # and so does a bad expression: checked against the records view's columns
        where_filter(spark.createDataFrame([], spark_schema(RECORDS_SCHEMA)), where)
    replicas = check_replicas([log_dir], topics, metadata, allow_missing=allow_missing_replicas)
    with destination(log_dir, output, dry_run=dry_run, follow_symlinks=follow_symlinks) as target:
        result = _purge(
            spark,
            target.path,
            output or log_dir,
            key_df,
            key_count,
            run_id=run_id,
            now=now,
            started=started,
            ledger=ledger,
            secret=secret,
            topics=topics,
            where=where,
            tombstone=tombstone,
            resolver=resolver,
            reason=reason,
            dry_run=dry_run,
            fault=fault,
            replicas=replicas,
            remote_storage=remote_storage,
        )
    return result


@raises_kafkalog_errors  # inside the destination's block, so that it can name the input's files
def _purge(
    spark,
    log_dir: str,
    named: str,
    key_df,
    key_count,
    *,
    run_id: str,
    now: int,
    started: int,
    ledger,
    secret,
    topics,
    where,
    tombstone: bool,
    resolver: ConfigResolver,
    reason: str,
    dry_run: bool,
    fault,
    replicas: ReplicaCheck,
    remote_storage: str | None = None,
) -> PurgeResult:
    """The purge of `log_dir`, the directory rewritten in place (the input, or the staged output),
    which the result and the ledger call `named` (the input, or the output's own name)."""
    opened, scope = _open(log_dir, topics, dry_run)
    tiered = sorted({t for t, _ in scope if remote_log_enabled(resolver.for_topic(t), t)})
    segments = {tp: opened.partition(*tp).segments for tp in scope}
    decider = Decider(spark, log_dir, key_df, key_count, where, tombstone, resolver, reason, _log_end_offsets(segments))
    matched, decided = decider.decide(sorted({t for t, _ in scope}))
    try:
        scanned = progress.totals([s for listed in segments.values() for s in listed], lambda s: s.size)
        with progress.phase("purge", "scan and decide", **scanned, feed=task_feed(spark)):
            report = partition_report(decided)
        if dry_run:
            remote = _remote(
                decider, opened, remote_storage, scope, resolver, now, dry_run, ledger, secret, run_id, fault
            )
            return PurgeResult(
                run_id, now, dry_run, named, report, tiered_topics=tiered, replicas=replicas, remote=remote
            )
        outputs = _output_segments(opened, decided, resolver, now)
        ensure_replaceable(opened, outputs)
        output_totals = progress.totals(outputs, lambda o: o.nbytes)
        with progress.phase("purge", "rewrite", **output_totals, feed=task_feed(spark)):
            stats = write_outputs(spark, log_dir, outputs, batch_plans(decided), fault)
        with progress.phase("purge", "ledger", feed=task_feed(spark)):
            try:
                rows = write_ledger_records(
                    spark,
                    ledger,
                    decided.where(decided.action.isNotNull()),
                    secret=secret,
                    run_id=run_id,
                    purged_at_ms=now,
                    log_dir=named,
                )
                record_segments(
                    spark,
                    ledger,
                    opened,
                    log_dir,
                    outputs,
                    stats,
                    named=named,
                    run_id=run_id,
                    purged_at_ms=now,
                    secret=secret,
                )
            except BaseException:  # nothing is swapped in: the staged segments go
                remove_outputs(log_dir, outputs)
                raise
        with progress.phase("purge", "swap", **output_totals):
            swap_in(opened, outputs, fault)
    finally:
        matched.unpersist()
    remote = _remote(decider, opened, remote_storage, scope, resolver, now, dry_run, ledger, secret, run_id, fault)
    result = PurgeResult(run_id, now, dry_run, named, report, rows, stats, tiered, replicas, remote)
    touched = {(o.topic, o.partition) for o in outputs}
    with progress.phase("purge", "verify", total=len(touched), unit="partition", feed=task_feed(spark)):
        _verify(decider, result, touched)
    write_ledger_run(
        spark,
        ledger,
        _run_row(result, started, key_df.count() if key_count is None else key_count, topics, where, tombstone),
    )
    if result.remaining:
        first = next(p for p in result.partitions if p["remaining"])
        raise PurgeVerificationError(
            f"after the rewrite {result.remaining} records of purged keys remain, "
            f"{first['remaining']} in {first['topic']}-{first['partition']} (run "
            f"{run_id}; the ledger lists what was purged)",
            file=named,
        )
    return result


def _remote(decider, opened, remote_storage, scope, resolver, now, dry_run, ledger, secret, run_id, fault):
    """The remote tier's purge, when the remote storage is given (operations/purge_remote.py)."""
    if remote_storage is None:
        return None
    with progress.phase("purge", "remote tier", feed=task_feed(decider.spark)):
        return purge_remote_tier(
            decider,
            opened,
            remote_storage,
            scope,
            resolver,
            now=now,
            dry_run=dry_run,
            ledger=ledger,
            secret=secret,
            run_id=run_id,
            fault=fault,
        )


def _open(log_dir: str, topics, dry_run: bool) -> tuple[LogDir, list]:
    """The log directory and the partitions to purge, settled: interrupted swaps recovered once every
    leftover `.swap` passed its checks (a dry run, which writes nothing, refuses them)."""
    opened = LogDir.open(log_dir)
    scope = _scope(opened, topics)
    for tp in scope:  # before an interrupted swap is recovered by names it cannot trust
        opened.partition(*tp).ensure_well_named()
    if not dry_run:
        for tp in scope:  # every leftover swap is checked before any partition is recovered
            check_swaps(opened.fs, opened.partition_paths[tp])
        for tp in scope:
            recover_partition(opened.fs, opened.partition_paths[tp])
    for tp in scope:
        opened.partition(*tp).ensure_settled()
    return opened, scope


def _scope(opened: LogDir, topics: Iterable[str] | None) -> list[tuple[str, int]]:
    """The partitions to purge: those of `topics`, else of every topic but the internal ones."""
    if topics is None:
        return [tp for tp in opened.topic_partitions if not tp[0].startswith("__")]
    wanted = set([topics] if isinstance(topics, str) else topics)
    refused = sorted(filter(is_kraft_metadata, wanted))
    if refused:
        raise ConfigError(
            f"purge refuses topic {refused[0]}: {KRAFT_METADATA_NOT_REWRITTEN}, nor does kafkalog rewrite it"
        )
    opened.check_topics(wanted)
    return [tp for tp in opened.topic_partitions if tp[0] in wanted]


def _log_end_offsets(segments_of: Mapping[tuple[str, int], list[LogSegment]]) -> dict:
    """(topic, partition) -> log end offset: the end of the last batch of the last segment (its
    base offset when it is empty)."""
    ends = {}
    for tp, segments in segments_of.items():
        if segments:
            last = segments[-1].last_offset()
            ends[tp] = segments[-1].base_offset if last is None else last + 1
    return ends


def _output_segments(opened: LogDir, decided, resolver: ConfigResolver, now: int) -> list[OutputSegment]:
    """One output per source segment with a purged record; its `.txnindex` entries all stay (a
    purge keeps every transaction marker and a batch of every transaction)."""
    touched = (
        decided.where(decided.action.isNotNull()).select("topic", "partition", "segmentBaseOffset").distinct().collect()
    )
    outputs = []
    for r in sorted(touched):
        config = resolver.for_topic(r.topic)
        segment = next(
            s for s in opened.partition(r.topic, r.partition).segments if s.base_offset == r.segmentBaseOffset
        )
        outputs.append(
            OutputSegment(
                r.topic,
                r.partition,
                (r.segmentBaseOffset,),
                now + config.delete_retention_ms,
                config.index_interval_bytes,
                tuple(tuple(t) for t in segment.aborted_txns()),
                nbytes=segment.size,
            )
        )
    return outputs


# -- verify and report ----------------------------------------------------------------------------------


def _verify(decider: Decider, result: PurgeResult, touched: set) -> None:
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
    return {
        "run_id": result.run_id,
        "started_at": started,
        "finished_at": int(time.time() * 1000),
        "purged_at": result.now,
        "log_dir": result.log_dir,
        "topics": None if topics is None else sorted([topics] if isinstance(topics, str) else topics),
        "keys": key_count,
        "where": bool(where),
        "tombstone": tombstone,
        "partitions": sum(1 for p in result.partitions if p["segments"]),
        "segments": len(result.outputs),
        "records_removed": result.total("removed"),
        "records_tombstoned": result.total("tombstoned"),
        "records_redacted": result.total("redacted"),
        "ledger_rows": result.ledger_rows,
        "remaining": result.remaining,
        "missing_replicas": result.replicas.missing_dicts(),
        "kafkalog_version": __version__,
    }
