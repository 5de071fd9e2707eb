"""kafkalog's public API: one shape for every command, the front door's (`import kafkalog`).

    result = kafkalog.compact(spark, "/var/lib/kafka/data", config={"cleanup.policy": "compact"}, now=ms)
    result.to_dict()

Each command is `kafkalog.X(spark, log_dir, *, config=..., now=..., **options) -> result`, its result
having `to_dict()`:

- `spark`: a SparkSession; None for the commands that run on the driver alone (retain, validate
  without one, txn_report);
- `log_dir`: a log directory's path or URI (several, as a list, for purge, validate and verify_purge);
- `config`: a `ConfigResolver` (`kafkalog.resolver_from`), a mapping of Kafka config names to values
  (as `--config name=value`), or None for Kafka's defaults;
- `now`: the clock of the rules, epoch ms; None: the wall clock;
- `options`: the command's own, as the operation in `kafkalog/operations/` names them.

A command whose result neither depends on a configuration nor reads a clock refuses `config=` or
`now=` rather than ignoring it. The calls of kafkalog 0.1 (`compact(spark, log_dir, resolver, now)`,
`retain(log_dir, config=, now_ms=)`, `purge(spark, log_dir, keys)`, `validate(paths, spark=)`,
`export(spark, log_dir, topic, output)`) still work for one release, with a DeprecationWarning naming
the call that replaces each.

A thin layer, one route from here and from the command line to the work: each function builds the
command's plan (`plan_X`, on the driver without Spark: what it was given, checked) and returns what
its run (`run_X(spark, plan)`) returns, as `kafkalog X` does.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from .config import ConfigResolver, resolver_of
from .operations import clock

Config = ConfigResolver | Mapping[str, str] | None
_MISSING: Any = object()  # an argument the 0.1 calls leave out


def compact(spark, log_dir, *legacy, config: Config = None, now: int | None = None, **options):
    """One Kafka cleaning pass over the compacted partitions of `log_dir` (CompactionResult).
    `options`: operations/compact.py's (topics, force, dry_run, output, legacy_as_v2, ...)."""
    from .operations.compact import plan_compact, run_compact

    if legacy or "resolver" in options:  # 0.1: compact(spark, log_dir, resolver, now)
        _deprecated("compact(spark, log_dir, resolver, now)", "compact(spark, log_dir, config=resolver, now=now)")
        config, now = _legacy_positional(legacy, options, ("resolver", "now"), (config, now))
    fault = options.pop("fault", None)
    return run_compact(spark, plan_compact(log_dir, resolver_of(config), clock.now_ms(now), **options), fault=fault)


def plan(spark, log_dir, *, config: Config = None, now: int | None = None, **options):
    """What a compaction would do, writing nothing: `kafkalog plan` (CompactionResult of a dry run)."""
    if "dry_run" in options:
        raise TypeError("plan() takes no dry_run: a plan never writes (compact() writes)")
    return compact(spark, log_dir, config=config, now=now, dry_run=True, **options)


def retain(spark, log_dir=_MISSING, *, config: Config = None, now: int | None = None, **options):
    """Kafka's retention over `log_dir` (RetentionReport). It runs on the driver: `spark` may be None.
    `options`: operations/retain.py's (topics, delete_records, committed_offsets, output, dry_run, ...)."""
    from .operations.retain import plan_retain, run_retain

    if log_dir is _MISSING or "now_ms" in options:  # 0.1: retain(log_dir, *, config, now_ms)
        _deprecated("retain(log_dir, config=, now_ms=)", "retain(spark_or_None, log_dir, config=, now=)")
        if log_dir is _MISSING:
            spark, log_dir = None, spark
        now = options.pop("now_ms", now)
    opened, uri = _opened(log_dir)
    fault = {"fault": options.pop("fault")} if "fault" in options else {}
    plan = plan_retain(opened, uri=uri, config=resolver_of(config), now_ms=clock.now_ms(now), **options)
    return run_retain(plan, **fault)


def purge(spark, log_dir, *legacy, keys=_MISSING, config: Config = None, now: int | None = None, **options):
    """Remove every record of `keys` from `log_dir` (one or several copies) (PurgeResult).
    `options`: operations/purge.py's (ledger, secret, keys_format, topics, tombstone, dry_run, ...)."""
    from .operations.purge import run_purge
    from .operations.purge_plan import log_dirs_of, plan_purge
    from .storage.logdir import LogDir

    if legacy:  # 0.1: purge(spark, log_dir, keys, *, config, now)
        _deprecated("purge(spark, log_dir, keys)", "purge(spark, log_dir, keys=keys)")
        (keys,) = _legacy_positional(legacy, {}, ("keys",), (keys,))
    if keys is _MISSING:
        raise TypeError("purge() needs keys=: the keys to purge (a file, table, or list)")
    opened = [LogDir.open(d) for d in log_dirs_of(log_dir, options.get("output"))]
    fault = options.pop("fault", None)
    plan = plan_purge(opened, keys, config=None if config is None else resolver_of(config), now=now, **options)
    return run_purge(spark, plan, fault=fault)


def validate(spark, log_dir=_MISSING, /, *, config: Config = None, now: int | None = None, **options):
    """Check `log_dir` (a path, or a list of log dirs, partition dirs and files) as Kafka's loader
    would (ValidationReport); on Spark's executors with `spark`, else on the driver. `config`: each
    topic's index.interval.bytes. `options`: operations/validate.py's (deep, fail_on, compacted, ...)."""
    from .operations.validate import plan_validate, run_validate

    if log_dir is _MISSING or "spark" in options:  # 0.1: validate(paths, *, spark=None)
        _deprecated("validate(paths, spark=)", "validate(spark, paths)")
        if log_dir is _MISSING:
            spark, log_dir = options.pop("spark", None), spark
    _refuse("validate", now=now)
    if config is not None and "index_interval_bytes" not in options:
        options["index_interval_bytes"] = resolver_of(config).values_of("index.interval.bytes")
    return run_validate(spark, plan_validate(log_dir, **options))


def export(
    spark,
    log_dir,
    *legacy,
    topic: str = _MISSING,
    output: str = _MISSING,
    config: Config = None,
    now: int | None = None,
    **options,
):
    """Write `topic` of `log_dir` as a table at `output` (ExportResult). `config`: the topic's
    compaction.strategy picks each key's row (KIP-280) unless `latest_by` is given. `options`:
    operations/export.py's (format, mode, as_of_offset, as_of_time, incremental, overwrite, ...)."""
    from .operations.export import plan_export, run_export

    if legacy:  # 0.1: export(spark, log_dir, topic, output)
        _deprecated("export(spark, log_dir, topic, output)", "export(spark, log_dir, topic=topic, output=output)")
        topic, output = _legacy_positional(legacy, {}, ("topic", "output"), (topic, output))
    if topic is _MISSING or output is _MISSING:
        raise TypeError("export() needs topic= and output=")
    _refuse("export", now=now)
    if config is not None and "latest_by" not in options:
        from .rules.compaction_strategy import CompactionStrategy

        topic_config = resolver_of(config).for_topic(topic)
        options["latest_by"] = CompactionStrategy.of(
            topic_config.compaction_strategy, topic_config.compaction_strategy_header
        )
    opened, uri = _opened(log_dir)
    return run_export(spark, plan_export(opened, topic, output, uri=uri, **options))


def txn_report(spark, log_dir, *, config: Config = None, now: int | None = None, **options):
    """The transactions of every partition of `log_dir`: open, hanging, ended (TxnReport). It runs on
    the driver: `spark` may be None. `options`: topics, transaction_max_timeout_ms."""
    from .operations.txn_report import plan_txn_report, run_txn_report

    _refuse("txn_report", config=config)
    return run_txn_report(plan_txn_report(_opened(log_dir)[0], now_ms=clock.now_ms(now), **options))


def verify_purge(
    spark,
    log_dir,
    *,
    ledger: str = _MISSING,
    secret: bytes = _MISSING,
    config: Config = None,
    now: int | None = None,
    **options,
):
    """Look for the keys a purge's `ledger` lists in `log_dir` (every copy, as a list) (PurgeCheck).
    `options`: run_id, tables."""
    from .operations.purge_verify import plan_verify_purge, run_verify_purge

    if ledger is _MISSING or secret is _MISSING:
        raise TypeError("verify_purge() needs ledger= and secret=")
    _refuse("verify_purge", config=config, now=now)
    return run_verify_purge(spark, plan_verify_purge(log_dir, ledger, secret, **options))


def _opened(log_dir) -> tuple[Any, str | None]:
    """`log_dir` opened (a LogDir given is as it is), and the path or URI it was given as (None: a
    LogDir's own)."""
    from .storage.logdir import LogDir

    if isinstance(log_dir, LogDir):
        return log_dir, None
    return LogDir.open(str(log_dir)), str(log_dir)


def _refuse(command: str, **given) -> None:
    """Never silent: a `config=` or `now=` the command cannot use is an error, not ignored."""
    for name, value in given.items():
        if value is not None:
            what = "reads no clock" if name == "now" else "depends on no topic configuration"
            raise TypeError(f"{command}() {what}: {name}= would do nothing")


def _deprecated(old: str, new: str) -> None:
    warnings.warn(
        f"kafkalog.{old} is deprecated and goes in the next release: call kafkalog.{new}",
        DeprecationWarning,
        stacklevel=3,  # the caller of the API function
    )


def _legacy_positional(legacy: tuple, options: dict, names: tuple[str, ...], given: tuple) -> tuple:
    """The values of a 0.1 call's positional (or keyword) arguments `names`, after which the 0.1
    signature had its keyword-only ones; one given both ways is an error."""
    if len(legacy) > len(names):
        raise TypeError(f"too many positional arguments: after log_dir, {', '.join(names)} at most")
    values = list(given)
    for i, name in enumerate(names):
        old = legacy[i] if i < len(legacy) else options.pop(name, _MISSING)
        if old is _MISSING:
            continue
        if values[i] not in (None, _MISSING) and values[i] is not old:
            raise TypeError(f"{name} given twice: positionally and as a keyword")
        values[i] = old
    return tuple(values)
