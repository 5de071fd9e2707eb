"""`kafkalog compact`: one Kafka cleaning pass over a log directory (docs/architecture.md).

1. Plan (driver, metadata only; large producer-state replays on executors): per compacted partition,
   `LogToClean` from metadata, index tails and producer state: the cleanable range, dirty ratio,
   active producers, aborted transactions; the partitions Kafka's rules choose, and the work units
   to read of them.
2-5. A partition of at most `tuning.ONE_TASK_BYTES`: scanned, decided, grouped and rewritten in one task
   that reads each of its segments once (spark/compaction.clean_partition). A larger one, in ranges of
   its segments, a task each, its keys merged in parts on the executors (spark/ranges.py). Or, with
   `tuning.LARGE_PARTITIONS = "window"`, the larger ones:
2-3. Scan and decide (Spark, kafkalog/spark/compaction.py).
4. Group (driver): source segments into output segments, as Kafka's cleaner groups them.
5. Rewrite (executors): output segments packed into tasks write `.cleaned` files; untouched batches
   are copied byte for byte.
6. Commit (driver): the swap protocol per partition, then `cleaner-offset-checkpoint`.
7. Report: records by reason and the `.log` bytes removed, per partition and per output segment
   (docs/operations.md, "The compaction report").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from .. import tuning
from ..config import ConfigResolver
from ..errors import KafkaLogError
from ..rules.cleaner import LogToClean, log_to_clean
from ..rules.compaction import REASONS, CompactionPlan
from ..rules.partition_state import partition_state
from ..spark.compaction import (
    OutputSettings,
    batch_plans,
    clean_in_one_task,
    decide,
    one_task_jobs,
    partition_outputs,
    segment_files,
    segment_summaries,
)
from ..spark.errors import from_spark_error, raises_kafkalog_errors, returned_error
from ..spark.held import Cleaned
from ..spark.progress import task_feed
from ..spark.ranges import STAGING as RANGES_STAGING
from ..spark.ranges import clean_in_ranges
from ..spark.replay import replays
from ..spark.rewrite import write_outputs
from ..spark.session import started
from ..storage.destination import Checked, Destination, checked, destination
from ..storage.logdir import LogDir
from ..storage.naming import (
    CLEANER_OFFSET_CHECKPOINT,
    KRAFT_METADATA_NOT_REWRITTEN,
    LOG_START_OFFSET_CHECKPOINT,
    OFFSET_CHECKPOINT_FILES,
    REPLICATION_OFFSET_CHECKPOINT,
    is_kraft_metadata,
    partition_of_file,
)
from ..storage.outputs import OutputSegment, OutputStats, ensure_replaceable, remove_outputs, swap_in
from ..storage.partition import Partition
from ..storage.swap import FaultHook, needs_recovery, recover_partition
from . import progress
from .files import camel_keys

log = logging.getLogger("kafkalog")


def plan_compaction(
    log_dir: str,
    resolver: ConfigResolver,
    now: int,
    *,
    force: bool = False,
    topics=None,
    opened: LogDir | None = None,
    spark=None,
    listed: dict[tuple[str, int], Partition] | None = None,
) -> CompactionPlan:
    """Step 1 for every partition whose cleanup.policy contains compact (metadata only);
    `log_dir` a path or URI, `opened` the LogDir of it a caller opened already. The producer-state
    replays (every batch of a partition without a snapshot) run on the driver, or with `spark` on
    its executors, packed into tasks by the bytes they read; the plan is the same. `listed`: the
    partitions a caller opened already (they are not listed again)."""
    opened = opened or LogDir.open(log_dir)
    opened.check_topics(topics)
    checkpoints = {name: opened.read_checkpoint(name) for name in OFFSET_CHECKPOINT_FILES}
    plan = CompactionPlan(opened.path, now, str(log_dir), opened.fs.is_local)
    with progress.phase("compact", "plan", total=len(opened.topic_partitions), unit="partition") as counted:
        compacted = _compacted_partitions(plan, opened, resolver, topics, listed or {})
        replay = replays(spark, plan.root, plan.is_local, [p for p, _ in compacted])
        for part, config in compacted:
            try:
                plan.logs.append(_log_to_clean(part, checkpoints, config, now, force, replay))
                plan.segments[(part.topic, part.partition)] = part.segments
            except KafkaLogError as err:  # its metadata or producer state cannot be read: uncleanable
                plan.uncleanable[(part.topic, part.partition)] = err
            counted.advance()
    return plan


def _log_to_clean(part: Partition, checkpoints: dict, config, now: int, force: bool, replay) -> LogToClean:
    """What the cleaner's rules decide on, read from `part`'s files: the segments' metadata, its
    offsets and producer state (`replay` reads them: on the driver, or handed in from executors),
    its checkpoint entries (`checkpoints` maps a file name to its entries) and aborted transactions."""
    tp = (part.topic, part.partition)
    loaded = partition_state(
        part,
        replay,
        log_start_checkpoint=checkpoints[LOG_START_OFFSET_CHECKPOINT].get(tp),
        high_watermark_checkpoint=checkpoints[REPLICATION_OFFSET_CHECKPOINT].get(tp),
    )
    segments = [seg.meta(with_last_offset=False) for seg in part.segments]
    return log_to_clean(
        part.topic,
        part.partition,
        part.path,
        segments,
        loaded,
        checkpoints[CLEANER_OFFSET_CHECKPOINT].get(tp),
        part.aborted_txns(),
        config,
        now,
        force=force,
    )


def compacted_topics(opened: LogDir, resolver: ConfigResolver, topics=None) -> list[str]:
    """The topics of `opened` a pass plans: those of `topics` (default: every one) whose
    cleanup.policy contains compact; never KRaft's metadata log. Empty: the pass does nothing."""
    return sorted(
        t
        for t in opened.topics
        if (not topics or t in topics) and not is_kraft_metadata(t) and resolver.for_topic(t).compact
    )


def nothing_to_compact(name: str, opened: LogDir, topics=None) -> str:
    """Why a pass over `opened` (called `name`) compacts nothing (no topic of `compacted_topics`),
    and how to say which topics are compacted: without a configuration every topic has Kafka's
    default cleanup.policy=delete."""
    chosen = sorted(t for t in opened.topics if (not topics or t in topics) and not is_kraft_metadata(t))
    if not chosen:
        return f"nothing to compact in {name}: it holds no partition kafkalog compacts"
    which = f"topic {chosen[0]} does not have" if len(chosen) == 1 else f"none of its {len(chosen)} topics has"
    return (
        f"nothing to compact in {name}: {which} cleanup.policy=compact in the configuration given "
        "(Kafka's default is delete). Give the topics' configuration: --config-file server.properties "
        "(or the output of kafka-configs.sh --describe --all), --topic-config-dir DIR, "
        "--topic-config TOPIC:cleanup.policy=compact, or --config cleanup.policy=compact for every topic"
    )


def _compacted_partitions(
    plan: CompactionPlan, opened: LogDir, resolver: ConfigResolver, topics, listed: dict
) -> list[tuple]:
    """(Partition, its topic's config) of each compacted partition with segments to plan, listed;
    KRaft's metadata partition goes to `plan.excluded`, a partition that cannot be listed or was left
    half swapped to `plan.uncleanable`. `listed`: partitions the caller opened already."""
    compacted = []
    for topic, partition in opened.topic_partitions:
        if is_kraft_metadata(topic):  # listed, never chosen, whatever the configuration; not even read
            if not topics or topic in topics:
                plan.excluded[(topic, partition)] = KRAFT_METADATA_NOT_REWRITTEN
            continue
        config = resolver.for_topic(topic)
        if not config.compact or (topics and topic not in topics):
            continue
        try:
            part = listed.get((topic, partition)) or opened.partition(topic, partition)
            part.ensure_well_named()
            part.ensure_settled()
        except KafkaLogError as err:
            plan.uncleanable[(topic, partition)] = err
            continue
        if part.segments:
            compacted.append((part, config))
    return compacted


@dataclass
class CompactionResult:
    plan: CompactionPlan
    report: list[dict]  # per partition: records by reason, `.log` bytes removed
    segments: list[dict] = field(default_factory=list)  # per output segment: records and bytes in and out
    outputs: dict = field(default_factory=dict)  # (topic, partition) -> base offsets of the written segments
    log_dir: str = ""  # the log directory rewritten: the input, or --output
    dry_run: bool = False

    def to_dict(self) -> dict:
        """The report (`kafkalog compact --report`): why each partition was or was not chosen, records
        by reason and bytes removed per partition, and per output segment; keys in camelCase, as every report's."""
        return camel_keys(
            {
                "now": self.plan.now,
                "dry_run": self.dry_run,
                "log_dir": self.log_dir,
                "partitions": self.plan.partitions(),
                "records": self.report,
                "segments": self.segments,
            }
        )


@dataclass(frozen=True)
class CompactPlan:
    """A compaction pass as asked for, checked on the driver without Spark (`plan_compact`: also the
    command line's check before Spark starts): the log directory opened once, the topics that exist,
    and the compacted ones among them (none: the pass needs no Spark and says why). Which partitions
    are chosen, and their offsets, are planned by `run_compact` under the directory's lock
    (`plan_compaction`), since a plan made before it could be stale by the time it is applied."""

    checked: Checked  # the log directory opened once and checked once (storage/destination.checked)
    uri: str  # the log directory as given: a path or URI (executors open it by this name)
    resolver: ConfigResolver
    now: int
    compacted: tuple[str, ...]
    force: bool = False
    topics: tuple[str, ...] | None = None
    legacy_as_v2: bool = False


def plan_compact(
    log_dir: str | LogDir | Checked,
    resolver: ConfigResolver,
    now: int,
    *,
    force: bool = False,
    topics=None,
    dry_run: bool = False,
    output: str | None = None,
    legacy_as_v2: bool = False,
    follow_symlinks: bool = False,
) -> CompactPlan:
    """Step 0 of a pass over `log_dir` (a path, a URI, or a LogDir opened already: then not listed
    again): what a rewrite checks before it starts (storage/destination.preflight: once, the run
    takes the plan's Checked, as a Checked the command line made for the same options is taken
    here), and that the `topics` asked for are there. Raises the first KafkaLogError found; reads
    no segment."""
    target = checked(log_dir, output, dry_run=dry_run, follow_symlinks=follow_symlinks)
    target.opened.check_topics(topics)
    return CompactPlan(
        target,
        log_dir if isinstance(log_dir, str) else target.opened.uri,
        resolver,
        now,
        tuple(compacted_topics(target.opened, resolver, topics)),
        force=force,
        topics=tuple(topics) if topics else None,
        legacy_as_v2=legacy_as_v2,
    )


def run_compact(spark, plan: CompactPlan, *, fault: FaultHook | None = None) -> CompactionResult:
    """One Kafka cleaning pass as `plan` asks, in place with the swap protocol, or into `plan.output`,
    a complete copy of the log directory that leaves it untouched. A partition that cannot be read
    whole is uncleanable (KIP-346): it is left as it is, named in `plan.uncleanable` with its error,
    and the others are cleaned. `legacy_as_v2` writes every legacy (v0/v1) batch of the cleaned
    segments as v2, as Kafka 4.x's cleaner does. In place, a partition directory that is a symbolic link
    is refused unless `follow_symlinks` (then the directory it leads to is rewritten). `fault` is a
    test hook called at each commit step (see kafkalog/storage/swap.py). `spark` may be a Future of
    the session (`spark.session.start_session`): the copy for `output` is made while Spark starts.
    The root's listing is the plan's; each compacted partition is listed again under the lock (its
    recovery and plan), so that segments written since the plan are the ones cleaned."""
    checked = plan.checked  # its output, dry run and symbolic links are the pass's
    dry_run, output = checked.dry_run, None if checked.dry_run else checked.output
    with destination(checked, checked.output, dry_run=dry_run, follow_symlinks=checked.follow_symlinks) as target:
        result = _compact(
            spark,
            target,
            plan.resolver,
            plan.now,
            force=plan.force,
            topics=list(plan.topics) if plan.topics else None,
            dry_run=dry_run,
            fault=fault,
            legacy_as_v2=plan.legacy_as_v2,
        )
    result.log_dir, result.dry_run = (plan.uri if dry_run else output or plan.uri), dry_run
    return result


def compact(
    spark,
    log_dir: str | LogDir,
    resolver: ConfigResolver,
    now: int,
    *,
    force: bool = False,
    topics=None,
    dry_run: bool = False,
    output: str | None = None,
    fault: FaultHook | None = None,
    legacy_as_v2: bool = False,
    follow_symlinks: bool = False,
) -> CompactionResult:
    """`run_compact` of `plan_compact` (which say what the arguments do), in one call."""
    plan = plan_compact(
        log_dir,
        resolver,
        now,
        force=force,
        topics=topics,
        dry_run=dry_run,
        output=output,
        legacy_as_v2=legacy_as_v2,
        follow_symlinks=follow_symlinks,
    )
    return run_compact(spark, plan, fault=fault)


@raises_kafkalog_errors  # inside the destination's block, so that it can name the input's files
def _compact(
    spark,
    target: Destination,
    resolver: ConfigResolver,
    now: int,
    *,
    force: bool,
    topics,
    dry_run: bool,
    fault: FaultHook | None,
    legacy_as_v2: bool,
) -> CompactionResult:
    """The pass over `target.path`, rewritten in place (the input, or the staged output)."""
    opened = target.opened or LogDir.open(target.path)
    if not compacted_topics(opened, resolver, topics):
        log.warning("compact: %s", nothing_to_compact(target.source, opened, topics))
    listed, damaged = _recovered(opened, resolver, target) if not dry_run else ({}, {})
    plan = plan_compaction(
        target.path, resolver, now, force=force, topics=topics, opened=opened, spark=spark, listed=listed
    )
    plan.uncleanable.update((tp, err) for tp, err in damaged.items() if not topics or tp[0] in topics)
    settings = {s.topic: OutputSettings.of(resolver.for_topic(s.topic), plan.now, legacy_as_v2) for s in plan.logs}
    jobs = one_task_jobs(plan, settings)
    if jobs and not dry_run:  # on the driver, before anything is staged: a segment any of them may replace
        ensure_replaceable(opened, _possible_outputs(jobs))
    spark = started(spark)  # the recovery and the plan above ran on the driver while Spark started
    cleaned = _clean_in_one_task(spark, plan, jobs, target, dry_run, fault)
    spread_back = {(c.topic, c.partition) for c in cleaned if c.spread}  # too many records for one task
    whole = {(job.log.topic, job.log.partition) for job in jobs} - spread_back
    try:
        if tuning.LARGE_PARTITIONS == "ranges":
            large = [s for s in plan.chosen if (s.topic, s.partition) not in whole]
            ranged = _clean_in_ranges(spark, plan, large, opened, target, settings, dry_run, fault)
            cleaned += ranged
            whole |= {(s.topic, s.partition) for s in large}
        spread = replace(plan, logs=[s for s in plan.logs if (s.topic, s.partition) not in whole])
        summaries, outputs, written = _clean_spread(spark, spread, opened, target, settings, dry_run, fault)
    except BaseException:
        remove_outputs(plan.root, [o for c in cleaned for o in c.outputs])
        raise
    summaries += [row for c in cleaned for row in c.segments]
    outputs += [o for c in cleaned for o in c.outputs]
    written += [w for c in cleaned for w in c.written]
    counts = [r for r in summaries if sum(r[k] for k in REASONS)]
    if not plan.chosen:
        return CompactionResult(plan, [])
    strategies = {(s.topic, s.partition): s.strategy for s in plan.chosen}
    if dry_run:
        return CompactionResult(plan, _partition_report(counts, None, strategies), _segment_report(counts, outputs, []))
    _fault(fault, "rewritten")
    with progress.phase("compact", "swap", **progress.totals(outputs, lambda o: o.nbytes)):
        swap_in(opened, outputs, fault)
        _fault(fault, "swapped")
    opened.update_checkpoint(CLEANER_OFFSET_CHECKPOINT, {(s.topic, s.partition): s.upper_bound for s in plan.chosen})
    log.info("compact: %d partitions cleaned, cleaner-offset-checkpoint updated", len(plan.chosen))
    result = CompactionResult(
        plan, _partition_report(counts, written, strategies), _segment_report(counts, outputs, written)
    )
    for o in outputs:
        result.outputs.setdefault((o.topic, o.partition), []).append(o.base_offset)
    return result


def _recovered(opened: LogDir, resolver: ConfigResolver, target: Destination) -> tuple[dict, dict]:
    """Each compacted partition of `opened`, listed once, an interrupted swap in it finished or
    rolled back (only where its listing shows one, from that listing): ({tp: Partition} for the
    plan, {tp: error} of the partitions whose leftover swap failed its checks, left as they are)."""
    listed: dict[tuple[str, int], Partition] = {}
    damaged: dict[tuple[str, int], KafkaLogError] = {}
    for tp in opened.topic_partitions:
        if not resolver.for_topic(tp[0]).compact:
            continue
        listed[tp] = part = opened.partition(*tp)
        if any(e.name == RANGES_STAGING and not e.is_file for e in part.listing):  # a crashed range-path pass's
            opened.fs.delete_dir(opened.fs.join(part.path, RANGES_STAGING))
        # a partition with misnamed or irregular files is not recovered: the plan makes it uncleanable
        if part.misnamed or part.irregular or not needs_recovery(part.listing):
            continue
        try:
            if recover_partition(opened.fs, part.path, part.listing):
                listed[tp] = opened.partition(*tp)  # as recovered
        except KafkaLogError as err:
            damaged[tp] = target.relocate(err)
    return listed, damaged


def _clean_spread(spark, plan: CompactionPlan, opened: LogDir, target: Destination, settings, dry_run: bool, fault):
    """Steps 2 to 5 of the partitions too large for one task (the window path): (segment
    summaries, output segments, OutputStats written); nothing written with `dry_run`."""
    decision = _decide_cleanable(spark, plan, target)
    if decision is None:
        return [], [], []
    decided, outcomes, rows = decision
    try:
        summaries = [row.asDict() for row in rows]
        outputs = _output_segments(plan, settings, summaries)
        if dry_run:
            return summaries, outputs, []
        ensure_replaceable(opened, outputs)
        log.info("compact: rewriting %d output segments on executors", len(outputs))
        rewritten = progress.totals(outputs, lambda o: o.nbytes)
        with progress.phase("compact", "rewrite", **rewritten, feed=task_feed(spark)):
            return summaries, outputs, write_outputs(spark, plan.root, outputs, batch_plans(outcomes), fault)
    finally:
        for df in (outcomes, decided):
            df.unpersist()


def _clean_in_one_task(spark, plan: CompactionPlan, jobs, target: Destination, dry_run: bool, fault) -> list[Cleaned]:
    """Steps 2 to 5 of the partitions cleaned in one task each (spark/compaction.py); with
    `dry_run`, nothing written. A partition whose batches cannot be read whole becomes uncleanable
    on its own; a rewrite that fails fails the pass, every staged file removed first."""
    if not jobs:
        return []
    log.info("compact: %d partitions cleaned in one task each", len(jobs))
    totals = progress.totals([s for job in jobs for s in plan.scanned(job.log)], lambda s: s.size)
    try:
        with progress.phase("compact", "clean", **totals, feed=task_feed(spark)):
            results = clean_in_one_task(spark, plan, jobs, write=not dry_run, fault=fault)
    except BaseException:  # a task that died rather than returned its error: whatever it staged goes
        remove_outputs(plan.root, _possible_outputs(jobs))
        raise
    return _settled(plan, results, target)


def _clean_in_ranges(
    spark, plan: CompactionPlan, logs, opened: LogDir, target: Destination, settings, dry_run: bool, fault
) -> list[Cleaned]:
    """Steps 2 to 5 of the partitions `logs`, too large for one task, by the range path
    (spark/ranges.py); with `dry_run`, nothing written. Errors as `_clean_in_one_task`'s."""
    if not logs:
        return []
    log.info("compact: %d partitions cleaned in segment ranges", len(logs))
    scanned = [seg for s in logs for seg in plan.scanned(s)]
    possible = [OutputSegment(seg.topic, seg.partition, (seg.base_offset,), 0, 0) for seg in scanned]
    if not dry_run:  # on the driver, before anything is staged
        ensure_replaceable(opened, possible)
    try:
        with progress.phase("compact", "clean", **progress.totals(scanned, lambda s: s.size), feed=task_feed(spark)):
            results = clean_in_ranges(spark, plan, logs, settings, write=not dry_run, fault=fault)
    except BaseException:  # a task that died rather than returned its error: whatever it staged goes
        remove_outputs(plan.root, possible)
        raise
    return _settled(plan, results, target)


def _settled(plan: CompactionPlan, results: list[Cleaned], target: Destination) -> list[Cleaned]:
    """The partitions of `results` cleaned: one whose batches cannot be read whole becomes uncleanable
    (what other tasks staged of it removed); a rewrite that failed fails the pass, every staged file
    removed first."""
    errors = {(c.topic, c.partition): (c, returned_error(c.error)) for c in results if c.error is not None}
    failed = next((err for c, err in errors.values() if not c.decided), None)
    if failed is not None:  # a rewrite failed: the pass stops, nothing staged left
        remove_outputs(plan.root, [o for c in results for o in c.outputs])
        raise target.relocate(failed)
    for tp, (c, err) in errors.items():
        remove_outputs(plan.root, c.outputs)
        _uncleanable(plan, tp, target.relocate(err))
    return [c for c in results if c.error is None]


def _possible_outputs(jobs) -> list[OutputSegment]:
    """Every output segment the jobs could have staged: one at each of their scanned segments."""
    return [
        OutputSegment(job.log.topic, job.log.partition, (base,), 0, 0) for job in jobs for base, _, _ in job.segments
    ]


def _uncleanable(plan: CompactionPlan, tp, err: KafkaLogError) -> bool:
    """Make the chosen partition `tp` uncleanable (KIP-346), saying so; False when it is not chosen."""
    if not plan.mark_uncleanable(tp, err):
        return False
    log.warning("compact: %s-%d is uncleanable and is left as it is: %s", tp[0], tp[1], err)
    return True


def _decide_cleanable(spark, plan: CompactionPlan, target: Destination):
    """Steps 2 and 3 over the chosen partitions cleaned by the window path: (decided, outcomes,
    segment summaries), the first two cached; None when no partition is chosen. A partition whose
    batches cannot be read whole becomes uncleanable and the pass is decided again without it, as
    Kafka's cleaner marks a partition uncleanable and goes on with the others (KIP-346)."""
    while plan.chosen:
        log.info("compact: %d of %d compacted partitions chosen; deciding", len(plan.chosen), len(plan.logs))
        scanned = plan.scanned()
        totals = progress.totals(scanned, lambda s: s.size)
        decided, outcomes = decide(spark, plan)  # lazy: the scan and decide run in segment_summaries's jobs
        try:
            with progress.phase("compact", "scan and decide", **totals, feed=task_feed(spark)):
                return decided, outcomes, segment_summaries(decided, outcomes)
        except Exception as err:
            for df in (outcomes, decided):
                df.unpersist()
            found = err if isinstance(err, KafkaLogError) else from_spark_error(err)
            if found is None:
                raise
            found = target.relocate(found)
            if not _uncleanable(plan, partition_of_file(found.file) if found.file else None, found):
                raise
    return None


def _fault(hook: FaultHook | None, step: str) -> None:
    if hook is not None:
        hook(step, "")


def _output_segments(
    plan: CompactionPlan, settings: dict[str, OutputSettings], summaries: list[dict]
) -> list[OutputSegment]:
    """Step 4 (driver) for the partitions of the window path: each one's source segments grouped
    into output segments (`partition_outputs`), from its segments' summaries."""
    changed: dict[tuple[str, int], set[int]] = {}
    kept: dict[tuple[str, int], set[int]] = {}
    for r in summaries:
        tp = (r["topic"], r["partition"])
        kept.setdefault(tp, set()).update(r["kept_txn_markers"])
        if r["changed"]:
            changed.setdefault(tp, set()).add(r["segmentBaseOffset"])
    return [
        o
        for s in plan.chosen
        for o in partition_outputs(
            s,
            settings[s.topic],
            kept.get((s.topic, s.partition), set()),
            changed.get((s.topic, s.partition), set()),
            {f[0]: f for f in segment_files(plan.segments[s.topic, s.partition])},
        )
    ]


# -- step 7: report -----------------------------------------------------------------------------------


def _partition_report(counts: list, written: list[OutputStats] | None, strategies: dict) -> list[dict]:
    """Per partition: records by reason, and the `.log` bytes removed: those its files lost (bytes
    in minus out of each segment `written`, as Kafka's CleanerStats counts bytes read and written),
    or in a dry run (`written` None) the decisions' estimate (rules/compaction.estimated_bytes_removed);
    with a KIP-280 strategy (`strategies` by partition), what superseded its records."""
    out: dict = {}

    def entry(topic: str, partition: int) -> dict:
        zeros = {k: 0 for k in (*REASONS, "bytes_removed", "invalid_headers")}
        superseded_by = strategies[topic, partition].superseded_by
        return out.setdefault(
            (topic, partition), {"topic": topic, "partition": partition, **zeros, "superseded_by": superseded_by}
        )

    for r in counts:
        row = entry(r["topic"], r["partition"])
        for k in REASONS:
            row[k] += r[k]
        if written is None:
            row["bytes_removed"] += r["bytes_removed"] or 0
        # KIP-280: keyed records whose version header is not 8 bytes (ranked as without one)
        row["invalid_headers"] += r.get("invalid_headers") or 0
    for w in written or ():
        entry(w.topic, w.partition)["bytes_removed"] += w.bytes_in - w.bytes_out
    return [out[k] for k in sorted(out)]


def _segment_report(counts: list, outputs: list[OutputSegment], written: list[OutputStats]) -> list[dict]:
    """Per output segment: its sources, records by reason, and (once written) records and file bytes
    in and out."""
    owner = {(o.topic, o.partition, b): o for o in outputs for b in o.bases}
    stats = {(w.topic, w.partition, w.base_offset): w.to_dict() for w in written}
    out = {}
    for o in outputs:
        key = (o.topic, o.partition, o.base_offset)
        out[key] = {
            "topic": o.topic,
            "partition": o.partition,
            "base_offset": o.base_offset,
            "source_segments": len(o.bases),
            **{k: 0 for k in REASONS},
        }
        out[key].update({k: v for k, v in stats.get(key, {}).items() if k not in out[key]})
    for r in counts:
        owning = owner.get((r["topic"], r["partition"], r["segmentBaseOffset"]))
        if owning is not None:
            for k in REASONS:
                out[(owning.topic, owning.partition, owning.base_offset)][k] += r[k]
    return [out[k] for k in sorted(out)]
