"""Purge: every record of given keys leaves a log directory, offline, with every other record's
offset, bytes and batch kept, and an audit ledger that stores no key.

    from kafkalog.operations.purge import purge
    from kafkalog.storage.ledger import load_secret

    result = purge(spark, "/archive/kafka", "erase.txt", ledger="/audit/purges",
                   secret=load_secret("/etc/kafkalog/purge.secret"))
    print(result.summary())

`purge` is `run_purge(spark, plan_purge(...))`: the plan (operations/purge_plan.py) is made on the
driver without Spark, and is what the command line checks before Spark starts.

`purge(spark, ["/broker1/kafka-logs", "/broker2/kafka-logs"], ...)` purges every copy of the log (every
broker's replicas, JBOD dirs) in one run: one decision over all copies (spark/purge.py), nothing
swapped in any log dir until every copy's output is staged, the swaps then log dir after log dir
(docs/semantics.md, "Purge of several copies").

The data flow is compaction's (docs/architecture.md) with purge's own decide step (spark/purge.py):

1. Plan (driver, `plan_purge`): every log dir opened and checked, each partition listed once, the
   replicas the KRaft metadata names checked. Run (`run_purge`): every log dir under its lock,
   interrupted swaps recovered (`PurgeScope`).
2. Scan and decide (executors): the narrow scan of the plan's segments (keys, no values) joined with the keys; with
   `where`, the records view of the same topics filtered by that Spark SQL expression. Control
   batches never match. The scan reads every batch of each partition's last segment and tells its
   last offset: the log end offset of each copy of a partition (a purge never lowers it), which
   the driver would otherwise read from the segment's tail. A matched record is removed, except:
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
   directory id (spark/evidence.py), merged too: a rerun that stages the same rewrite again adds no
   row. Every table is checked writable before any copy is touched (`check_ledger`), and a rerun
   names the interrupted runs whose rows it completes (`resumes`: rows and no run row).
5. Commit (driver): the swap protocol per partition, one log dir after the other.
5a. Tables (with `tables`, before the swap): the rows of the purged records and keys leave every
   table kafkalog exported, and every file under it (operations/purge_tables.py); checked before
   anything else is written, each table's time travel to before the purge is gone.
6. Remote tier (tiered storage, with `remote_storage`): the remote segments of the purged
   partitions go through steps 2 to 6 of their own (operations/purge_remote.py).
7. Verify (executors): the touched partitions are listed and scanned again; the decide step must find
   nothing left to do (`PurgeVerificationError` otherwise). A run row goes to the run table.

A rerun of the same purge finds nothing to do: it rewrites nothing and adds no records rows.
Internal topics (names starting with `__`) are purged only when named in `topics`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import cast

from .. import __version__
from ..config import ConfigResolver
from ..errors import KafkaLogError
from ..rules.retention import remote_log_enabled
from ..scan.views import RECORDS_SCHEMA
from ..spark.compaction import segment_files
from ..spark.errors import raises_kafkalog_errors
from ..spark.evidence import record_segments
from ..spark.ledger import write_ledger_records, write_ledger_run
from ..spark.progress import task_feed
from ..spark.purge import Decider, PurgeScope, batch_plans, keys_frame, partition_report, where_filter
from ..spark.rewrite import write_outputs
from ..spark.scan import spark_schema
from ..storage.destination import destination
from ..storage.keylist import DEFAULT_REASON, KEY_FORMATS
from ..storage.ledger import check_ledger, load_secret, log_dir_identity, unfinished_runs
from ..storage.logdir import LogDir
from ..storage.outputs import OutputSegment, ensure_replaceable, remove_outputs, swap_in
from ..storage.swap import FaultHook
from . import progress
from .files import camel_keys
from .purge_plan import PurgePlan, check_topics, log_dirs_of, plan_purge, settled
from .purge_remote import RemotePurgeResult, purge_remote_tier
from .purge_tables import (
    TIME_TRAVEL_WARNING,
    erase_tables,
    purged_keys,
    purged_offsets,
    would_erase,
)
from .replicas import ReplicaCheck, differences_warning, identity_warning, replica_differences

log = logging.getLogger("kafkalog")

# What a caller of the command needs beside it: the key list forms and the fingerprint secret.
__all__ = [
    "purge",
    "plan_purge",
    "run_purge",
    "PurgePlan",
    "log_dirs_of",
    "check_topics",
    "check_ledger",
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
    log_dir: str  # the first of the copies' log dirs (the one, for a purge of one)
    partitions: list[dict]  # per copy and topic-partition: what was (or would be) purged, and the verification
    ledger_rows: int = 0
    outputs: list = field(default_factory=list)  # OutputStats of the rewritten segments
    # topics whose remote log is enabled (tiered storage): what is already copied to remote storage
    # is purged only when the remote storage is given (`remote`)
    tiered_topics: list = field(default_factory=list)
    # every copy purged: {log_dir, node_id, directory_id} (the ids from its meta.properties, None without)
    copies: list = field(default_factory=list)
    # which copies exist (KRaft metadata) and which were not given; ReplicaCheck(None): nothing says
    replicas: ReplicaCheck = field(default_factory=lambda: ReplicaCheck(None))
    remote: RemotePurgeResult | None = None  # the remote tier's purge (operations/purge_remote.py)
    # interrupted runs (their ledger rows written, no run row) over these log dirs that this run completed
    resumes: list = field(default_factory=list)
    # (topic, partition) -> its copies' offsets, where the copies differ (operations/replicas.py)
    differences: dict = field(default_factory=dict)
    tables: list = field(default_factory=list)  # per exported table: what was (or would be) erased (purge_tables.py)

    @property
    def all_replicas(self) -> bool | None:
        """Whether every copy of the purged partitions was given; None: not known (no KRaft metadata)."""
        return None if self.replicas.metadata is None else not self.replicas.missing

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
        if len(self.copies) > 1:
            text += f" of {len(self.copies)} log dirs ({', '.join(map(_copy_name, self.copies))})"
        if not self.dry_run:
            text += (
                f"; {len(self.outputs)} segments rewritten; ledger: {self.ledger_rows} rows added; "
                f"verified: {self.remaining} records of purged keys remain"
            )
        if self.resumes:
            text += f"; completes interrupted run {', '.join(self.resumes)} (its ledger rows are this purge's)"
        for warning in self.warnings():
            text += f"; {warning}"
        if self.tables:
            rows = sum(t["rowsRemoved"] for t in self.tables)
            text += f"; tables: {rows} rows {'would be ' if self.dry_run else ''}erased from {len(self.tables)} tables"
            text += f" (WARNING: {TIME_TRAVEL_WARNING})"
        if self.remote is not None:
            text += f"; {self.remote.summary(self.dry_run)}"
        elif self.tiered_topics:
            text += (
                f"; WARNING: {', '.join(self.tiered_topics)} use tiered storage (remote.storage.enable=true): "
                "their segments already in remote storage were not purged (give --remote-storage-dir to purge "
                "them too)"
            )
        return f"{text}; {self.replicas.summary()}"

    def warnings(self) -> list[str]:
        """What the copies' meta.properties and offsets say that the operator must know."""
        return [w for w in (identity_warning(self.copies), differences_warning(self.differences)) if w]

    def difference_rows(self) -> list[dict]:
        """`differences` as rows, one per copy of each partition whose copies differ (the run table's)."""
        return [o.to_dict(*tp) for tp, found in self.differences.items() for o in found]

    def to_dict(self) -> dict:
        """The report (`kafkalog purge --report`), keys in camelCase as every report's."""
        return camel_keys(
            {
                "run_id": self.run_id,
                "now": self.now,
                "dry_run": self.dry_run,
                "log_dir": self.log_dir,
                "copies": self.copies,
                "all_replicas": self.all_replicas,
                "ledger_rows": self.ledger_rows,
                "partitions": self.partitions,
                "segments": [
                    {**({"log_dir": self.copies[o.copy]["log_dir"]} if len(self.copies) > 1 else {}), **o.to_dict()}
                    for o in self.outputs
                ],
                "tiered_topics": self.tiered_topics,
                "missing_replicas": self.replicas.missing_dicts(),
                "replica_differences": self.difference_rows(),
                "resumes": self.resumes,
                "remote": None if self.remote is None else self.remote.to_dict(),
                "tables": self.tables,
            }
        )


def _copy_name(copy: dict) -> str:
    return copy["log_dir"] + ("" if copy["node_id"] is None else f" on broker {copy['node_id']}")


@raises_kafkalog_errors
def purge(
    spark,
    log_dir: str | Sequence[str],
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
    tables: Sequence[str] = (),
    key_column: str | None = None,
) -> PurgeResult:
    """Remove every record of `keys` (a DataFrame with a `key` column, a list of bytes or written
    forms, or the path of a key file or table, see `keys_frame`) and, with `where`, every record
    the Spark SQL expression over the records view selects, from `topics` (default: every topic
    but internal ones) of `log_dir`: one log dir, or several (every broker's copies of the
    partitions, JBOD dirs included), all purged by one decision with the same rules and `now`.

    `ledger`: the Delta table of purged records (required unless `dry_run`); `secret`: the key
    fingerprint secret (default: `load_secret()`, from KAFKALOG_PURGE_SECRET). `config`: topic
    configuration (cleanup.policy, delete.retention.ms, index.interval.bytes). `now`: the clock,
    epoch ms. `output`: purge a copy written there, `log_dir` (one) untouched. `follow_symlinks`: in place,
    rewrite a partition directory that is a symbolic link where it leads (refused otherwise).
    `remote_storage` (tiered storage): the LocalTieredStorage directory (path or URI) whose remote
    segments of the purged partitions are purged too, in place (operations/purge_remote.py).
    `fault`: a test hook called in each rewrite task and at each swap step (spark/rewrite.py,
    storage/swap.py). `metadata`: a KRaft metadata log (a `__cluster_metadata-0` or the log dir
    holding one; default: the one in `log_dir`, if any): a replica of a purged topic's partition
    that the metadata names and `log_dir` does not hold is refused (ConfigError) before anything
    is written, or, with `allow_missing_replicas`, reported and recorded in the run table as not
    purged (operations/replicas.py). `tables`: the paths of tables `export` wrote, whose rows of the
    purged records and keys are erased too, their older versions deleted (operations/purge_tables.py;
    `key_column`: the key column of a table no export wrote)."""
    dirs = log_dirs_of(log_dir, output)
    plan = plan_purge(
        [LogDir.open(d) for d in dirs],
        keys,
        keys_format=keys_format,
        topics=topics,
        where=where,
        tombstone=tombstone,
        config=config,
        now=now,
        reason=reason,
        ledger=ledger,
        secret=secret,
        output=output,
        dry_run=dry_run,
        follow_symlinks=follow_symlinks,
        metadata=metadata,
        allow_missing_replicas=allow_missing_replicas,
        remote_storage=remote_storage,
        tables=tables,
        key_column=key_column,
    )
    return run_purge(spark, plan, fault=fault)


@raises_kafkalog_errors
def run_purge(spark, plan: PurgePlan, *, fault: FaultHook | None = None) -> PurgeResult:
    """Run `plan` (plan_purge's): the keys read (and `where` checked) before anything is written,
    every log dir under its lock (or staged) until every copy is done. `fault`: a test hook called
    in each rewrite task and at each swap step (spark/rewrite.py, storage/swap.py)."""
    started = int(time.time() * 1000)
    # bad keys fail before anything is written
    key_df, key_count = keys_frame(spark, plan.keys, plan.keys_format, plan.reason)
    if plan.where:  # and so does a bad expression: checked against the records view's columns
        where_filter(spark.createDataFrame([], spark_schema(RECORDS_SCHEMA)), plan.where)
    with ExitStack() as held:  # every log dir under its lock (or staged) until every copy is done
        targets = [
            held.enter_context(destination(c, plan.output, dry_run=plan.dry_run, follow_symlinks=plan.follow_symlinks))
            for c in plan.checked  # checked by the plan, not again; the lock still refuses one taken since
        ]
        return _purge(spark, plan, settled(plan, targets), key_df, key_count, started=started, fault=fault)


@raises_kafkalog_errors  # inside the destinations' blocks, so that they can name the input's files
def _purge(spark, plan: PurgePlan, scope: PurgeScope, key_df, key_count, *, started: int, fault) -> PurgeResult:
    """The purge of every copy of `scope` (the plan's, settled under the locks: each copy's
    directory rewritten in place -- the input, or the staged output --, and the name the result and
    the ledger give it -- the input, or the output's own)."""
    run_id, now, resolver = plan.run_id, plan.now, plan.resolver
    ledger, secret = cast(str, plan.ledger), cast(bytes, plan.secret)  # plan_purge: both, unless a dry run
    dry_run, replicas, tables = plan.dry_run, plan.replicas, plan.tables
    copies = [{"log_dir": c.name, "node_id": c.node_id, "directory_id": c.directory_id} for c in scope.copies]
    resumes = [] if dry_run else unfinished_runs(ledger, [log_dir_identity(c.name) for c in scope.copies])
    identity = identity_warning(copies)
    if identity:
        log.warning("%s", identity)
    tiered = sorted({t for t in scope.topics if remote_log_enabled(resolver.for_topic(t), t)})
    decider = Decider(spark, scope, key_df, key_count, plan.where, plan.tombstone, resolver, plan.reason)
    matched = None
    try:
        scanned = progress.totals([s for c in scope.copies for ss in c.segments.values() for s in ss], lambda s: s.size)
        with progress.phase("purge", "scan and decide", **scanned, feed=task_feed(spark)):
            matched, decided = decider.decide()  # scans at once: the log ends are what the scan read
            report = partition_report(decided)
            offsets, keys = (purged_offsets(decided, tables), purged_keys(key_df)) if tables else ({}, [])
        differences = replica_differences(scope.copies)  # by the log ends the scan told
        if differences:
            log.warning("%s", differences_warning(differences))
        if dry_run:
            remote = _remote(decider, scope, plan, fault)
            return PurgeResult(
                run_id,
                now,
                dry_run,
                scope.copies[0].name,
                _labelled(report, copies),
                tiered_topics=tiered,
                copies=copies,
                replicas=replicas,
                remote=remote,
                differences=differences,
                tables=would_erase(tables, offsets, keys),
            )
        outputs = _output_segments(scope, decided, resolver, now)
        for i, c in enumerate(scope.copies):  # every copy's, before anything is staged
            ensure_replaceable(c.opened, [o for o in outputs if o.copy == i])
        output_totals = progress.totals(outputs, lambda o: o.nbytes)
        roots = [c.log_dir for c in scope.copies]
        with progress.phase("purge", "rewrite", **output_totals, feed=task_feed(spark)):
            stats = write_outputs(spark, roots, outputs, batch_plans(decided), fault)
        with progress.phase("purge", "ledger", feed=task_feed(spark)):
            try:
                rows = write_ledger_records(
                    spark,
                    ledger,
                    _with_copy_columns(spark, decided.where(decided.action.isNotNull()), scope),
                    secret=secret,
                    run_id=run_id,
                    purged_at_ms=now,
                )
                record_segments(
                    spark, ledger, scope.copies, outputs, stats, run_id=run_id, purged_at_ms=now, secret=secret
                )
            except BaseException:  # nothing is swapped in: the staged segments go
                remove_outputs(roots, outputs)
                raise
        erased = []
        if tables:  # before the swap: a crash leaves the log's records for the rerun to decide again
            with progress.phase("purge", "tables", total=len(tables), unit="table"):
                try:
                    erased = erase_tables(
                        tables,
                        offsets,
                        keys,
                        ledger=ledger,
                        secret=secret,
                        run_id=run_id,
                        purged_at_ms=now,
                        fault=fault,
                    )
                except BaseException:
                    remove_outputs(roots, outputs)
                    raise
        with progress.phase("purge", "swap", **output_totals):
            for i, c in enumerate(scope.copies):  # one log dir after the other (docs/semantics.md)
                swap_in(c.opened, [o for o in outputs if o.copy == i], fault)
    finally:
        if matched is not None:
            matched.unpersist()
    remote = _remote(decider, scope, plan, fault)
    result = PurgeResult(
        run_id,
        now,
        dry_run,
        scope.copies[0].name,
        report,
        rows,
        stats,
        tiered,
        copies,
        replicas,
        remote,
        resumes,
        differences=differences,
        tables=erased,
    )
    touched = {(o.copy, o.topic, o.partition) for o in outputs}
    with progress.phase("purge", "verify", total=len(touched), unit="partition", feed=task_feed(spark)):
        _verify(decider, scope, result, touched)
    result.partitions = _labelled(result.partitions, copies)
    write_ledger_run(
        spark,
        ledger,
        _run_row(result, started, key_df.count() if key_count is None else key_count, plan),
    )
    if result.remaining:
        first = next(p for p in result.partitions if p["remaining"])
        raise PurgeVerificationError(
            f"after the rewrite {result.remaining} records of purged keys remain, "
            f"{first['remaining']} in {first['topic']}-{first['partition']} (run "
            f"{run_id}; the ledger lists what was purged)",
            file=first.get("log_dir", result.log_dir),
        )
    return result


def _remote(decider, scope: PurgeScope, plan: PurgePlan, fault):
    """The remote tier's purge, when the remote storage is given (operations/purge_remote.py): one
    remote copy, which every broker's copies share."""
    if plan.remote_storage is None:
        return None
    with progress.phase("purge", "remote tier", feed=task_feed(decider.spark)):
        return purge_remote_tier(
            decider,
            [c.opened for c in scope.copies],
            plan.remote_storage,
            sorted({tp for c in scope.copies for tp in c.segments}),
            plan.resolver,
            now=plan.now,
            dry_run=plan.dry_run,
            ledger=plan.ledger,
            secret=plan.secret,
            run_id=plan.run_id,
            fault=fault,
        )


def _output_segments(scope: PurgeScope, decided, resolver: ConfigResolver, now: int) -> list[OutputSegment]:
    """One output per source segment with a purged record, of the scope's segments; its `.txnindex`
    entries all stay (a purge keeps every transaction marker and a batch of every transaction)."""
    touched = (
        decided.where(decided.action.isNotNull())
        .select("copy", "topic", "partition", "segmentBaseOffset")
        .distinct()
        .collect()
    )
    outputs = []
    for r in sorted(touched):
        config = resolver.for_topic(r.topic)
        segment = scope.segment(r.copy, r.topic, r.partition, r.segmentBaseOffset)
        outputs.append(
            OutputSegment(
                r.topic,
                r.partition,
                (r.segmentBaseOffset,),
                now + config.delete_retention_ms,
                config.index_interval_bytes,
                tuple(tuple(t) for t in segment.aborted_txns()),
                nbytes=segment.size,
                copy=r.copy,
                sources=tuple(segment_files([segment])),  # as listed: the rewrite task lists nothing
                hash_source=True,  # the evidence's hash of the source, taken as the rewrite reads it
            )
        )
    return outputs


def _with_copy_columns(spark, purged, scope: PurgeScope):
    """`purged` with the ledger's name of each row's log dir and its broker (spark/ledger.py's COPY_COLUMNS)."""
    from pyspark.sql import functions as F

    names = spark.createDataFrame(
        [(i, log_dir_identity(c.name), c.node_id) for i, c in enumerate(scope.copies)],
        "copy int, log_dir string, node_id int",
    )
    return purged.join(F.broadcast(names), "copy")


# -- verify and report ----------------------------------------------------------------------------------


def _verify(decider: Decider, scope: PurgeScope, result: PurgeResult, touched: set) -> None:
    """Rescan the touched partitions of every copy, listed anew: `remaining` counts records the
    purge still finds to do."""
    from pyspark.sql import functions as F

    left = {}
    if touched:
        matched, decided = decider.decide(scope.relisted(touched))
        rows = decided.where(F.col("action").isNotNull()).groupBy("copy", "topic", "partition").count().collect()
        matched.unpersist()
        left = {(r.copy, r.topic, r.partition): r["count"] for r in rows}
    for p in result.partitions:
        p["remaining"] = left.get((p["copy"], p["topic"], p["partition"]), 0)
    by_partition: dict = {}
    for o in result.outputs:
        entry = by_partition.setdefault((o.copy, o.topic, o.partition), [0, 0])
        entry[0] += o.bytes_in
        entry[1] += o.bytes_out
    for p in result.partitions:
        p["bytes_before"], p["bytes_after"] = by_partition.get((p["copy"], p["topic"], p["partition"]), (0, 0))


def _labelled(partitions: list[dict], copies: list[dict]) -> list[dict]:
    """The report's rows: each row's copy named by its log dir and broker where there are several
    (one log dir's rows stay as they were)."""
    out = []
    for p in partitions:
        copy = copies[p.pop("copy")]
        out.append(p if len(copies) == 1 else {"log_dir": copy["log_dir"], "node_id": copy["node_id"], **p})
    return out


def _run_row(result: PurgeResult, started: int, key_count: int, plan: PurgePlan) -> dict:
    topics = plan.topics
    return {
        "run_id": result.run_id,
        "started_at": started,
        "finished_at": int(time.time() * 1000),
        "purged_at": result.now,
        "log_dir": result.log_dir,
        "log_dirs": [c["log_dir"] for c in result.copies],
        "topics": None if topics is None else sorted([topics] if isinstance(topics, str) else topics),
        "keys": key_count,
        "where": bool(plan.where),
        "tombstone": plan.tombstone,
        "partitions": sum(1 for p in result.partitions if p["segments"]),
        "segments": len(result.outputs),
        "records_removed": result.total("removed"),
        "records_tombstoned": result.total("tombstoned"),
        "records_redacted": result.total("redacted"),
        "ledger_rows": result.ledger_rows,
        "remaining": result.remaining,
        "missing_replicas": result.replicas.missing_dicts(),
        "kafkalog_version": __version__,
        "resumes": result.resumes,
        "replica_differences": result.difference_rows(),
    }
