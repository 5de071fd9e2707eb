"""The public API's one shape (kafkalog/api.py), without Spark: the commands that run on the driver run
on a small generated log dir; the others' arguments are checked where they reach their operation (the
operation replaced by a recorder); each call of 0.1 warns, naming its new form, and does the same."""

from __future__ import annotations

import warnings

import pytest

import kafkalog
from kafkalog.config import ConfigResolver, resolver_from
from kafkalog.operations.generate import generate, small_preset
from kafkalog.rules.compaction_strategy import CompactionStrategy

NOW = 1_700_100_000_000
DAY = 86_400_000


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    path = tmp_path_factory.mktemp("api") / "log"
    return str(path), generate(str(path), small_preset(seed=5)).end_ms


@pytest.fixture(scope="module")
def log_dir(generated) -> str:
    return generated[0]


@pytest.fixture
def no_deprecation():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        yield


class Recorder:
    """Stands in for an operation: keeps its arguments, returns a result with to_dict()."""

    def __init__(self):
        self.calls: list[tuple[tuple, dict]] = []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return self

    def to_dict(self) -> dict:
        return {"calls": len(self.calls)}


@pytest.fixture
def record(monkeypatch):
    def replace(module: str, name: str) -> Recorder:
        recorder = Recorder()
        monkeypatch.setattr(f"kafkalog.operations.{module}.{name}", recorder)
        return recorder

    return replace


@pytest.fixture
def opened(monkeypatch):
    """LogDir.open replaced: a path "d" opens as "opened d" (the recorded plans' arguments show it)."""
    from kafkalog.storage.logdir import LogDir

    monkeypatch.setattr(LogDir, "open", classmethod(lambda cls, path: f"opened {path}"))


def test_the_front_door_gives_the_api():
    for name in ("compact", "plan", "retain", "purge", "validate", "export", "txn_report", "verify_purge"):
        assert getattr(kafkalog, name).__module__ == "kafkalog.api"


# -- the driver's commands, run ---------------------------------------------------------------------------


def test_retain_takes_config_as_a_mapping_and_now(generated, no_deprecation):
    from kafkalog.operations.retain import retain as operation

    log_dir, end_ms = generated
    settings = {"retention.ms": str(DAY), "cleanup.policy": "delete"}
    now = end_ms + 2 * DAY  # past a day's retention of every record, within Kafka's default week
    got = kafkalog.retain(None, log_dir, config=settings, now=now, dry_run=True).to_dict()
    expected = operation(log_dir, config=resolver_from(settings=["retention.ms=86400000", "cleanup.policy=delete"]),
                         now_ms=now, dry_run=True).to_dict()  # fmt: skip
    assert got == expected and got["nowMs"] == now
    assert got["totals"] != kafkalog.retain(None, log_dir, now=now, dry_run=True).to_dict()["totals"]  # config mattered


def test_validate_and_txn_report_run_without_spark(log_dir, no_deprecation):
    from kafkalog.operations.txn_report import txn_report as operation
    from kafkalog.operations.validate import validate_paths

    assert kafkalog.validate(None, log_dir).to_dict() == validate_paths([log_dir]).to_dict()
    report = kafkalog.txn_report(None, log_dir, now=NOW).to_dict()
    assert report == operation(log_dir, now_ms=NOW).to_dict() and report["nowMs"] == NOW
    opened = kafkalog.LogDir.open(log_dir)  # a log dir opened already: not listed again, the same reports
    assert kafkalog.validate(None, opened).to_dict() == validate_paths([log_dir]).to_dict()
    assert kafkalog.txn_report(None, opened, now=NOW).to_dict() == report
    assert any(p["aborted"] for p in report["partitions"])  # the small preset aborts transactions


def test_validate_reads_index_interval_bytes_from_config(record, no_deprecation):
    plan, run = record("validate", "plan_validate"), record("validate", "run_validate")
    kafkalog.validate(None, ["a", "b"], config={"index.interval.bytes": "512"}, deep=False)
    (args, kwargs), = plan.calls  # fmt: skip
    assert args == (["a", "b"],) and kwargs["deep"] is False
    assert kwargs["index_interval_bytes"]["any topic"] == 512
    assert run.calls == [((None, plan), {})]  # the run takes the plan, on the driver (no session)


# -- the Spark commands' arguments ----------------------------------------------------------------------


def test_compact_and_plan_hand_a_resolver_and_the_clock(record, no_deprecation):
    compact, run = record("compact", "plan_compact"), record("compact", "run_compact")
    spark = object()
    kafkalog.compact(spark, "dir", config={"cleanup.policy": "compact"}, now=NOW, topics=["t"])
    kafkalog.plan(spark, "dir", now=NOW)
    (args, kwargs), (plan_args, plan_kwargs) = compact.calls
    assert args[0] == "dir" and args[2] == NOW and kwargs == {"topics": ["t"]}
    assert args[1].for_topic("t").compact and not plan_args[1].for_topic("t").compact  # Kafka's default: delete
    assert plan_kwargs == {"dry_run": True}
    assert run.calls == [((spark, compact), {"fault": None})] * 2
    with pytest.raises(TypeError, match="a plan never writes"):
        kafkalog.plan(spark, "dir", dry_run=False)


def test_purge_export_and_verify_purge_take_their_own_arguments_by_keyword(record, opened, no_deprecation):
    purge, run_purge = record("purge_plan", "plan_purge"), record("purge", "run_purge")
    export, run_export = record("export", "plan_export"), record("export", "run_export")
    verify, run_verify = record("purge_verify", "plan_verify_purge"), record("purge_verify", "run_verify_purge")
    spark, resolver = object(), ConfigResolver()
    kafkalog.purge(spark, ["a", "b"], keys=["k"], config=resolver, now=NOW, dry_run=True)
    assert purge.calls == [((["opened a", "opened b"], ["k"]), {"config": resolver, "now": NOW, "dry_run": True})]
    assert run_purge.calls == [((spark, purge), {"fault": None})]
    kafkalog.export(spark, "dir", topic="t", output="out", format="parquet")
    assert export.calls == [(("opened dir", "t", "out"), {"uri": "dir", "format": "parquet"})]
    kafkalog.export(spark, "dir", topic="t", output="out", config={"compaction.strategy": "timestamp"})
    assert export.calls[1][1]["latest_by"] == CompactionStrategy.of("timestamp", "")
    assert run_export.calls == [((spark, export), {})] * 2
    kafkalog.verify_purge(spark, ["a"], ledger="l", secret=b"s", run_id="r")
    assert verify.calls == [((["a"], "l", b"s"), {"run_id": "r"})]
    assert run_verify.calls == [((spark, verify), {})]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: kafkalog.purge(None, "dir"), "needs keys="),
        (lambda: kafkalog.export(None, "dir", topic="t"), "needs topic= and output="),
        (lambda: kafkalog.verify_purge(None, "dir", ledger="l"), "needs ledger= and secret="),
        (lambda: kafkalog.validate(None, "dir", now=NOW), r"validate\(\) reads no clock: now= would do nothing"),
        (lambda: kafkalog.export(None, "d", topic="t", output="o", now=NOW), r"export\(\) reads no clock"),
        (lambda: kafkalog.txn_report(None, "dir", config={}), r"txn_report\(\) depends on no topic configuration"),
        (lambda: kafkalog.verify_purge(None, "d", ledger="l", secret=b"s", config={}), "config= would do nothing"),
    ],
)
def test_an_argument_missing_or_doing_nothing_is_an_error(call, message):
    with pytest.raises(TypeError, match=message):
        call()


# -- the calls of 0.1 -----------------------------------------------------------------------------------


def test_compact_of_0_1_warns_and_does_the_same(record):
    compact, run = record("compact", "plan_compact"), record("compact", "run_compact")
    resolver = ConfigResolver()
    with pytest.warns(DeprecationWarning, match=r"call kafkalog\.compact\(spark, log_dir, config=resolver, now=now\)"):
        kafkalog.compact("spark", "dir", resolver, NOW, dry_run=True)
    with pytest.warns(DeprecationWarning):
        kafkalog.compact("spark", "dir", resolver=resolver, now=NOW)
    assert compact.calls == [(("dir", resolver, NOW), {"dry_run": True}), (("dir", resolver, NOW), {})]
    assert run.calls == [(("spark", compact), {"fault": None})] * 2


def test_purge_and_export_of_0_1_warn_and_do_the_same(record, opened):
    purge, export = record("purge_plan", "plan_purge"), record("export", "plan_export")
    run_purge, run_export = record("purge", "run_purge"), record("export", "run_export")
    with pytest.warns(DeprecationWarning, match=r"call kafkalog\.purge\(spark, log_dir, keys=keys\)"):
        kafkalog.purge("spark", "dir", ["k"], now=NOW)
    assert purge.calls == [((["opened dir"], ["k"]), {"config": None, "now": NOW})]
    assert run_purge.calls == [(("spark", purge), {"fault": None})]
    with pytest.warns(DeprecationWarning, match=r"call kafkalog\.export\(spark, log_dir, topic=topic, output=output\)"):
        kafkalog.export("spark", "dir", "t", "out", mode="changelog")
    assert export.calls == [(("opened dir", "t", "out"), {"uri": "dir", "mode": "changelog"})]
    assert run_export.calls == [(("spark", export), {})]


def test_retain_and_validate_of_0_1_warn_and_do_the_same(log_dir):
    now = NOW + 400 * DAY
    with pytest.warns(DeprecationWarning, match=r"call kafkalog\.retain\(spark_or_None, log_dir, config=, now=\)"):
        old = kafkalog.retain(log_dir, config={"retention.ms": str(DAY)}, now_ms=now, dry_run=True)
    new = kafkalog.retain(None, log_dir, config={"retention.ms": str(DAY)}, now=now, dry_run=True)
    assert old.to_dict() == new.to_dict()
    with pytest.warns(DeprecationWarning, match=r"call kafkalog\.validate\(spark, paths\)"):
        old = kafkalog.validate([log_dir], spark=None)
    assert old.to_dict() == kafkalog.validate(None, [log_dir]).to_dict()
