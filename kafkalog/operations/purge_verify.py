"""Verify a purge later: are the keys a ledger lists gone from every copy, as the files are now?

    from kafkalog.operations.purge_verify import verify_purge
    from kafkalog.storage.ledger import load_secret

    check = verify_purge(spark, ["/data/broker-1", "/data/broker-2"], "/audit/purges",
                         load_secret("/etc/kafkalog/purge.secret"))
    print(check.summary()); assert check.clean

The ledger stores each purged key only as its fingerprint (HMAC-SHA256 under the operator's secret),
and so does this check need no key list: one Spark job reads the keys of every copy (the narrow
view, no values), fingerprints each on the executors and joins them with the ledger's. Whoever holds
the ledger and the secret can run it, months after the purge, on the copies as they are then.

What it looks for: the fingerprints of the records rows a key matched (not those a `where`
expression matched: their keys were not asked to be purged), each in the topics of its run (its run
row's topics, every topic but internal ones when the run named none; a run without a run row, one
interrupted, the topics its rows name). What is allowed to stay: a tombstone (null value, no
headers, a v2 batch) of a key a run purged with `--tombstone` (a tombstoned row, or its run's
flag), which compaction removes after delete.retention.ms. Anything else with such a key is found,
and named by copy, partition and offset.

The secret is checked against the ledger's segments table (`secret_check`): a wrong secret would
fingerprint every key differently and find nothing. A ledger written before that table existed has
no check, and the summary says so.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from .. import tuning
from ..errors import KafkaLogError
from ..spark.errors import raises_kafkalog_errors
from ..spark.evidence import SCOPE_SCHEMA, find_fingerprints
from ..storage.ledger import (
    LedgerError,
    copy_identity,
    log_dir_identity,
    read_ledger_table,
    runs_path,
    secret_check,
    segments_path,
)
from ..storage.logdir import LogDir
from ..storage.tables.erase import table_dir
from .files import camel_keys
from .purge_tables import verify_tables


@dataclass
class PurgeCheck:
    """What `verify_purge` found: per copy and partition, and each record of a purged key."""

    ledger: str
    checked_at: int  # epoch ms
    fingerprints: int  # purged keys looked for
    runs: list[str]
    secret_checked: bool  # False: the ledger has no segments table to check the secret against
    partitions: list[dict]  # log_dir, broker_id, directory_id, topic, partition, records, found, tombstones
    # log_dir, broker_id, topic, partition, offset, fingerprint of each record found (the first
    # spark/evidence.LISTED_HITS; a partition's `found` counts them all, tombstones beyond unchecked)
    found: list[dict] = field(default_factory=list)
    # per table given (`--table`): table, files, values, found (files holding a purged key), files_found
    tables: list[dict] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not any(p["found"] for p in self.partitions) and not any(t["found"] for t in self.tables)

    def summary(self) -> str:
        copies = len({p["log_dir"] for p in self.partitions})
        records = sum(p["records"] for p in self.partitions)
        found = sum(p["found"] for p in self.partitions)
        text = (
            f"checked {records} records in {len(self.partitions)} partitions of {copies} log directories for "
            f"{self.fingerprints} purged keys of {len(self.runs)} runs: "
        )
        if found:
            bad = sorted({(p["log_dir"], p["topic"], p["partition"]) for p in self.partitions if p["found"]})
            text += f"FOUND {found} records of purged keys in {len(bad)} partitions"
        else:
            text += "no record of a purged key"
        if self.tables:
            bad_tables = [t["table"] for t in self.tables if t["found"]]
            files = sum(t["files"] for t in self.tables)
            text += f"; {len(self.tables)} tables ({files} files): " + (
                f"FOUND purged keys in {', '.join(bad_tables)}" if bad_tables else "no purged key"
            )
        kept = sum(p["tombstones"] for p in self.partitions)
        if kept:
            text += f"; {kept} tombstones of purged keys kept (--tombstone)"
        if not self.secret_checked:
            text += (
                "; WARNING: the ledger has no segments table (written before kafkalog kept one), so the "
                "secret could not be checked: with a wrong secret nothing would be found"
            )
        return text

    def to_dict(self) -> dict:
        return camel_keys(
            {
                "ledger": self.ledger,
                "checked_at": self.checked_at,
                "clean": self.clean,
                "fingerprints": self.fingerprints,
                "runs": self.runs,
                "secret_checked": self.secret_checked,
                "partitions": self.partitions,
                "found": self.found,
                "tables": self.tables,
            }
        )


@dataclass(frozen=True)
class VerifyPlan:
    """A purge's check as asked for, read on the driver without Spark (`plan_verify_purge`: also the
    command line's check before Spark starts): the ledger's purged keys and the secret checked
    against it, and each copy opened once with the topics to look in."""

    ledger: str
    secret: bytes
    secret_checked: bool  # False: the ledger has no segments table to check the secret against
    scopes: dict  # fingerprint -> (every topic but internal ones?, the topics named)
    tombstoned: set  # the fingerprints whose tombstones may stay
    runs: list[str]
    copies: dict  # log dir's identity -> (path, topics to look in, (broker id, directory id))
    tables: tuple[str, ...] = ()


def plan_verify_purge(
    log_dirs: Sequence[str | LogDir] | str | LogDir,
    ledger: str,
    secret: bytes,
    *,
    run_id: str | None = None,
    tables: Sequence[str] = (),
) -> VerifyPlan:
    """What `run_verify_purge` looks for, and where: the keys `ledger` lists as purged (only those of
    `run_id`, if given), checked to be fingerprinted under `secret`, in `log_dirs` (every copy: the log
    dirs of every broker, JBOD dirs included; paths, URIs or LogDirs opened already); and every file
    under each of `tables`. Raises a KafkaLogError (LedgerError, LogDirError) before any scan."""
    given = [log_dirs] if isinstance(log_dirs, (str, LogDir)) else list(log_dirs)
    if not given:
        raise KafkaLogError("give the log directories to verify")
    # the copies and tables first (a typo in a path), then the ledger
    opened = [(d, LogDir.open(d)) if isinstance(d, str) else (d.uri, d) for d in given]
    for path in tables:
        table_dir(path)
    secret_checked = _check_secret(ledger, secret)
    scopes, tombstoned, runs = _scopes(ledger, run_id)
    every = any(all_ for all_, _ in scopes.values())
    named: set = set().union(*(listed for _, listed in scopes.values()))
    copies = {}
    for path, log_dir in opened:
        topics = {t for t, _ in log_dir.topic_partitions}
        wanted = {t for t in topics if t in named or (every and not t.startswith("__"))}
        copies[log_dir_identity(path)] = (path, wanted, copy_identity(log_dir.meta_properties()))
    return VerifyPlan(ledger, secret, secret_checked, scopes, tombstoned, runs, copies, tuple(tables))


@raises_kafkalog_errors
def run_verify_purge(spark, plan: VerifyPlan) -> PurgeCheck:
    """One Spark job reads the keys of every copy of `plan` (the narrow view, no values), fingerprints
    each on the executors and joins them with the ledger's; then the tables' files
    (operations/purge_tables.py's `verify_tables`)."""
    scopes = plan.scopes
    scope = spark.createDataFrame([(fp, all_, sorted(listed)) for fp, (all_, listed) in scopes.items()], SCOPE_SCHEMA)
    partitions, hits = find_fingerprints(
        spark,
        {n: (p, t) for n, (p, t, _) in plan.copies.items()},
        scope,
        plan.secret,
        broadcast=len(scopes) <= tuning.BROADCAST_KEYS,
    )
    check = _report(plan.ledger, scopes, plan.runs, plan.secret_checked, plan.copies, partitions, hits, plan.tombstoned)
    check.tables = verify_tables(plan.tables, scopes, plan.secret)
    return check


def verify_purge(
    spark,
    log_dirs: Sequence[str] | str,
    ledger: str,
    secret: bytes,
    *,
    run_id: str | None = None,
    tables: Sequence[str] = (),
) -> PurgeCheck:
    """Scan `log_dirs` for the keys `ledger` lists as purged: `run_verify_purge` of
    `plan_verify_purge` (which say what the arguments do), in one call."""
    return run_verify_purge(spark, plan_verify_purge(log_dirs, ledger, secret, run_id=run_id, tables=tables))


def _check_secret(ledger: str, secret: bytes) -> bool:
    """True when the segments table confirms `secret` is the ledger's; False when there is no
    table to ask; LedgerError when it says the secret is another."""
    table = read_ledger_table(segments_path(ledger), ["secret_check"])
    if table is None or table.num_rows == 0:
        return False
    if secret_check(secret) not in set(table.column("secret_check").to_pylist()):
        raise LedgerError(
            "the secret is not this ledger's: its fingerprints would match no purged key (give the "
            "--secret-file the purge used)",
            file=segments_path(ledger),
        )
    return True


def _scopes(ledger: str, run_id: str | None) -> tuple[dict, set, list]:
    """(fingerprint -> (every topic but internal ones?, the topics named), the fingerprints whose
    tombstones may stay, the run ids) of the keys the ledger lists as purged."""
    rows = read_ledger_table(ledger, ["run_id", "topic", "matched_by", "action", "key_fingerprint"])
    if rows is None:
        raise LedgerError("no purge ledger (a Delta table) there", file=ledger)
    runs = read_ledger_table(runs_path(ledger), ["run_id", "topics", "tombstone"])
    run_rows = {r["run_id"]: r for r in ([] if runs is None else runs.to_pylist())}
    listed = rows.to_pylist()
    records = [r for r in listed if r["matched_by"] == "key" and r["key_fingerprint"]]
    if run_id is not None:
        if run_id not in run_rows and not any(r["run_id"] == run_id for r in listed):
            raise LedgerError(f"the ledger has no run {run_id}", file=ledger)
        records = [r for r in records if r["run_id"] == run_id]
    if not records:
        raise LedgerError("the ledger lists no purged key to look for (only records a --where matched)", file=ledger)
    scopes: dict = defaultdict(lambda: [False, set()])
    tombstoned = set()
    for r in records:
        scope, run = scopes[r["key_fingerprint"]], run_rows.get(r["run_id"])
        if run is not None and run["topics"] is None:
            scope[0] = True
        else:
            scope[1].update([r["topic"]] if run is None else run["topics"])
        if r["action"] == "tombstoned" or (run is not None and run["tombstone"]):
            tombstoned.add(r["key_fingerprint"])
    return {fp: (s[0], s[1]) for fp, s in scopes.items()}, tombstoned, sorted({r["run_id"] for r in records})


def _report(ledger, scopes, runs, secret_checked, copies, partitions, hits, tombstoned) -> PurgeCheck:
    """The per partition rows and the records found: a hit is a kept tombstone when its key may
    stay as one and it carries no headers (read from its batch on the driver: few), else found."""
    kept = _kept_tombstones(copies, [h for h in hits if h.tombstone and h.fingerprint in tombstoned])
    listed = defaultdict(list)
    for h in hits:
        if (h.log_dir, h.topic, h.partition, h.offset) not in kept:
            listed[(h.log_dir, h.topic, h.partition)].append(h)
    rows, found = [], []
    for p in sorted(partitions, key=lambda r: (r.log_dir, r.topic, r.partition)):
        broker, directory = copies[p.log_dir][2]
        tombstones = sum(1 for k in kept if k[:3] == (p.log_dir, p.topic, p.partition))
        offending = listed[(p.log_dir, p.topic, p.partition)]
        rows.append(
            {
                "log_dir": p.log_dir,
                "broker_id": broker,
                "directory_id": directory,
                "topic": p.topic,
                "partition": p.partition,
                "records": p.records,
                "found": p.hits - tombstones,
                "tombstones": tombstones,
                "first_offset": min(
                    [h.offset for h in offending] + [o for o in [p.first_offset] if o is not None], default=None
                ),
            }
        )
        found += [
            {
                "log_dir": h.log_dir,
                "broker_id": broker,
                "topic": h.topic,
                "partition": h.partition,
                "offset": h.offset,
                "fingerprint": h.fingerprint,
            }
            for h in offending
        ]
    return PurgeCheck(ledger, int(time.time() * 1000), len(scopes), runs, secret_checked, rows, found)


def _kept_tombstones(copies: dict, candidates) -> set:
    """(log_dir, topic, partition, offset) of the `candidates` (hits of tombstones a purge may keep)
    whose record has no headers: their batches read on the driver, each once."""
    wanted: dict = defaultdict(set)
    for h in candidates:
        wanted[(h.log_dir, h.topic, h.partition, h.segmentBaseOffset, h.position)].add(h.offset)
    kept = set()
    for (name, topic, partition, base, position), offsets in sorted(wanted.items()):
        segment = next(
            s for s in LogDir.open(copies[name][0]).partition(topic, partition).segments if s.base_offset == base
        )
        batch = segment.batch_at(position)
        kept |= {(name, topic, partition, r.offset) for r in batch.records() if r.offset in offsets and not r.headers}
    return kept
