"""A purge's plan, made on the driver without Spark (also the command line's check before Spark
starts): the log dirs opened once, each checked as a rewrite's, the partitions to purge listed
once, each copy's meta.properties read once, the replicas the KRaft metadata names checked (the
metadata log replayed once), the ledger, the remote storage and the tables checked. `run_purge`
(operations/purge.py) takes it and lists nothing of it again: under the locks it recovers
interrupted swaps, and lists anew only a partition that recovery changed, or the staged copy an
`--output` writes.

    from kafkalog.operations.purge import plan_purge, run_purge
    from kafkalog.storage.logdir import LogDir

    plan = plan_purge([LogDir.open("/b1/kafka-logs"), LogDir.open("/b2/kafka-logs")], "erase.txt",
                      ledger="/audit/purges", now=1_800_000_000_000)
    result = run_purge(spark, plan)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..config import ConfigResolver
from ..errors import ConfigError, LogDirError
from ..spark.purge import Copy, PurgeScope
from ..storage.destination import Checked, Destination, checked
from ..storage.keylist import DEFAULT_REASON
from ..storage.ledger import check_ledger, load_secret, log_dir_identity
from ..storage.logdir import LogDir
from ..storage.naming import KRAFT_METADATA_NOT_REWRITTEN, is_kraft_metadata
from ..storage.partition import Partition
from ..storage.swap import check_swaps, recover_partition
from . import clock
from .files import check_topic_settings
from .purge_tables import check_tables
from .purge_tables import check_topics as check_table_topics
from .replicas import ReplicaCheck, check_replicas


@dataclass(frozen=True)
class PurgePlan:
    """Everything a purge does, decided before it touches a file: the copies (`scope`: every log
    dir opened, its partitions to purge listed) and the options, checked."""

    scope: PurgeScope  # the inputs' copies, each named as the result names it (the input, or the output)
    keys: object  # a DataFrame, a list of keys, or the path of a key file or table (spark/purge.keys_frame)
    keys_format: str | None
    topics: Iterable[str] | None
    where: str | None
    tombstone: bool
    resolver: ConfigResolver
    now: int
    reason: str
    ledger: str | None
    secret: bytes | None
    output: str | None
    dry_run: bool
    follow_symlinks: bool
    replicas: ReplicaCheck  # which copies exist (KRaft metadata) and which were not given
    checked: tuple[Checked, ...]  # each log dir checked once, as the run's destinations take it
    remote_storage: str | None = None
    tables: Sequence = ()  # the exported tables to erase from, checked (operations/purge_tables.py)
    listed: tuple[Mapping[tuple[str, int], Partition], ...] = ()  # each copy's partitions, as the scope's
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)


def log_dirs_of(log_dir: str | Sequence[str], output: str | None = None) -> list[str]:
    """The log dirs of a purge, checked: at least one, none given twice, and `output` (a purged
    copy written elsewhere) only for one."""
    dirs = [log_dir] if isinstance(log_dir, str) else list(log_dir)
    if not dirs:
        raise ConfigError("a purge needs at least one log directory")
    seen: dict = {}
    for d in dirs:
        if seen.setdefault(log_dir_identity(d), d) is not d:
            raise ConfigError(f"log directory {d} is given twice (as {seen[log_dir_identity(d)]} too)")
    if output is not None and len(dirs) > 1:
        raise ConfigError(
            "--output takes one log directory: purge several copies in place, or each into an output of its own"
        )
    return dirs


def plan_purge(
    opened: LogDir | Sequence[LogDir],
    keys,
    *,
    keys_format: str | None = None,
    topics: Iterable[str] | None = None,
    where: str | None = None,
    tombstone: bool = False,
    config: ConfigResolver | None = None,
    now: int | None = None,
    reason: str = DEFAULT_REASON,
    ledger: str | None = None,
    secret: bytes | None = None,
    output: str | None = None,
    dry_run: bool = False,
    follow_symlinks: bool = False,
    metadata: str | None = None,
    allow_missing_replicas: bool = False,
    remote_storage: str | None = None,
    tables: Sequence[str] = (),
    key_column: str | None = None,
) -> PurgePlan:
    """The plan of a purge of `opened` (one log dir, or every copy's), checked before anything is
    written; the options are `purge`'s. Refuses (KafkaLogError, one line) what the run would refuse
    before it writes: a log dir a rewrite may not touch (storage/destination.py `preflight`: once,
    the run's destinations take the plan's Checked; the lock they take refuses one held since), a
    topic none holds, a replica the metadata names that is not given, a ledger, remote storage or
    table it could not write."""
    opened = [opened] if isinstance(opened, LogDir) else list(opened)
    log_dirs_of([o.uri for o in opened], output)
    checks = tuple(checked(o, output, dry_run=dry_run, follow_symlinks=follow_symlinks) for o in opened)
    scopes = _scopes(opened, topics)
    resolver = config or ConfigResolver()
    check_topic_settings(resolver, _together(opened))
    replicas = check_replicas(opened, topics, metadata, allow_missing=allow_missing_replicas)
    dirs = [o.uri for o in opened]
    if not dry_run and ledger is None:
        raise ConfigError("a purge writes an audit ledger: give its path (--ledger)")
    if ledger is not None:
        check_ledger(ledger, dirs, output, remote_storage)
    if remote_storage is not None and output is not None:
        raise ConfigError(
            "--output purges a copy of the log dir, but the remote storage would be rewritten in place: "
            "purge copies of both, or neither"
        )
    erasable = check_tables(tables, key_column, output)  # every table, before any lock or file
    check_table_topics(erasable, dirs, topics)
    listed = [_listed(o, scope) for o, scope in zip(opened, scopes)]
    copies = [
        Copy(o.uri, output or o.uri, o, {tp: p.segments for tp, p in parts.items()}, *broker_ids(o))
        for o, parts in zip(opened, listed)
    ]
    return PurgePlan(
        PurgeScope(tuple(copies)),
        keys,
        keys_format,
        topics,
        where,
        tombstone,
        resolver,
        clock.now_ms(now),
        reason,
        ledger,
        secret if secret is not None or dry_run else load_secret(),
        output,
        dry_run,
        follow_symlinks,
        replicas,
        checks,
        remote_storage,
        erasable,
        tuple(listed),
    )


def _listed(opened: LogDir, scope: Iterable[tuple[str, int]]) -> dict[tuple[str, int], Partition]:
    """The partitions of `scope`, each listed once, refused where a name cannot be trusted before an
    interrupted swap is recovered by it."""
    listed = {tp: opened.partition(*tp) for tp in scope}
    for part in listed.values():
        part.ensure_well_named()
    return listed


def settled(plan: PurgePlan, targets: Sequence[Destination]) -> PurgeScope:
    """The copies to rewrite, under the locks `targets` hold (each copy's destination: the input in
    place, or its staged output): interrupted swaps recovered once every leftover `.swap` of every
    copy passed its checks (a dry run, which writes nothing, refuses them). The plan's listings
    stand, checked once under the lock (`LogDir.ensure_unchanged`); a partition is listed again only where
    recovery changed it, and a staged output, a new directory, is listed once."""
    copies, listed = [], []
    for c, parts, target in zip(plan.scope.copies, plan.listed, targets):
        opened = c.opened if target.opened is c.opened else LogDir.open(target.path)
        listed.append(dict(parts) if opened is c.opened else _listed(opened, parts))
        copies.append((c, opened))
        if opened is c.opened and not plan.dry_run:
            opened.ensure_unchanged(parts.values(), CHANGED)
    if not plan.dry_run:
        for (_, opened), parts in zip(copies, listed):  # every leftover swap is checked before any is recovered
            for part in parts.values():
                check_swaps(opened.fs, part.path, part.listing)
        for (_, opened), parts in zip(copies, listed):
            for tp, part in list(parts.items()):
                if recover_partition(opened.fs, part.path, part.listing):
                    parts[tp] = opened.partition(*tp)
    for parts in listed:
        for part in parts.values():
            part.ensure_settled()
    return PurgeScope(
        tuple(
            replace(c, log_dir=target.path, opened=opened, segments={tp: p.segments for tp, p in parts.items()})
            for (c, opened), parts, target in zip(copies, listed, targets)
        )
    )


CHANGED = "another process used the log directory before the purge took its lock; run the purge again"


def broker_ids(opened: LogDir) -> tuple[int | None, str | None]:
    """The copy's node.id and directory.id, where its meta.properties has them. They only name the
    copy: a meta.properties Kafka would refuse (which `validate` reports) names none, and does not
    stop a purge, as it did not before copies were named."""
    try:
        meta = opened.read_meta()
    except LogDirError:
        return None, None
    return (None, None) if meta is None else (meta.node_id, meta.directory_id)


def _scopes(opened: list[LogDir], topics: Iterable[str] | None) -> list[list[tuple[str, int]]]:
    """The partitions to purge in each log dir: those of `topics`, else of every topic but the
    internal ones. A topic named must have a partition in one of the log dirs (a JBOD broker
    spreads a topic's partitions over its dirs)."""
    if topics is None:
        return [[tp for tp in o.topic_partitions if not tp[0].startswith("__")] for o in opened]
    wanted = set([topics] if isinstance(topics, str) else topics)
    refused = sorted(filter(is_kraft_metadata, wanted))
    if refused:
        raise ConfigError(
            f"purge refuses topic {refused[0]}: {KRAFT_METADATA_NOT_REWRITTEN}, nor does kafkalog rewrite it"
        )
    check_topics(opened, wanted)
    return [[tp for tp in o.topic_partitions if tp[0] in wanted] for o in opened]


def check_topics(opened: Sequence[LogDir], topics: Iterable[str] | None) -> None:
    """Refuse a topic the caller chose that has no partition in any of the log dirs (LogDir.check_topics)."""
    if len(opened) == 1:
        opened[0].check_topics(topics)
        return
    missing = sorted(set(topics or ()) - {t for o in opened for t in o.topics})
    if missing:
        raise ConfigError(f"no partition of topic {missing[0]!r} in any of the {len(opened)} log directories")


def _together(opened: Sequence[LogDir]) -> LogDir:
    """Every copy's partitions as one LogDir's, named after the first: the topics a configuration may name."""
    if len(opened) == 1:
        return opened[0]
    first = opened[0]
    return LogDir(first.fs, first.path, {tp: path for o in opened for tp, path in o.partition_paths.items()})
