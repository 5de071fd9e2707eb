"""Every notebook in notebooks/ runs top to bottom in a Jupyter kernel of this environment, and shows
what it says it shows.

Each notebook runs in its own temporary working directory (its sample log directories go there) with
its own kernel and Spark JVM; two run at a time (`executed`), since much of a notebook's time is its
kernel's and JVM's start. A last cell, added here and not in the notebook, prints what the notebook computed
as JSON; the checks below compare it with what the generator wrote, and dry runs with what was applied.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
from ipykernel.kernelspec import write_kernel_spec
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell

from kafkalog.operations.generate import generate, preset
from kafkalog.spark.compaction import REASONS

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
PLOTLESS = {"05-topic-as-table"}  # shows tables, draws nothing; every other notebook plots
KERNEL = "kafkalog-test"
CELL_TIMEOUT = 180  # seconds; generous for a shared machine, a notebook takes well under a minute
NOTEBOOKS_AT_ONCE = 2


def _code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def _images(nb) -> int:
    return sum("image/png" in o.get("data", {}) for c in _code_cells(nb) for o in c.outputs)


# -- what each notebook must have computed ----------------------------------------------------------------


def check_explore(facts: dict, nb, tmp_path: Path) -> None:
    expected = generate(str(tmp_path / "expected"), preset("small", seed=facts["seed"]))
    records: dict[str, int] = {}
    for tp, count in expected.records.items():
        records[tp.topic] = records.get(tp.topic, 0) + count
    assert {r["topic"]: r["records"] for r in facts["per_topic"]} == records
    assert facts["segments"] == {f"{tp.topic}-{tp.partition}": len(p.segments) for tp, p in expected.partitions.items()}
    keys = {r["topic"]: r for r in facts["key_stats"]}
    assert "clicks" not in keys  # the generator writes clicks without keys
    assert keys["customers"]["tombstones"] > 0 and keys["orders"]["tombstones"] == 0
    assert all(r["superseded"] > 0 and r["duplicated_keys"] <= r["distinct_keys"] for r in keys.values())
    txns = {(r["topic"], r["partition"]): r for r in facts["transactions"]}
    assert set(txns) == {("payments", 0), ("payments", 1)}
    for tp, row in txns.items():
        assert row["abort markers"] == len(expected.partitions[tp].aborted_txns) > 0
        assert row["aborted"] > 0 and row["committed"] > 0 and row.get("open", 0) == 0
    assert _images(nb) == 3


def check_compaction(facts: dict, nb, tmp_path: Path) -> None:
    assert all(facts["chosen"]) and not any(facts["chosen_again"])

    def records_of(rows) -> list:
        return [{k: v for k, v in r.items() if k != "bytes_removed"} for r in rows]

    assert records_of(facts["applied_report"]) == records_of(facts["report"])  # the dry run said what the pass did
    # bytes: the pass reports what the files lost; the dry run an estimate, never more than was there
    lost = {f"{r['topic']}-{r['partition']}": r["bytes_removed"] for r in facts["applied_report"]}
    estimated = {f"{r['topic']}-{r['partition']}": r["bytes_removed"] for r in facts["report"]}
    removed = {(r["topic"], r["partition"]): sum(r[k] for k in REASONS if k != "kept") for r in facts["report"]}
    assert all(n > 0 for n in removed.values())
    assert {(r["topic"], r["partition"]) for r in facts["report"] if r["aborted_transaction"]} == {
        ("stock", 0),
        ("stock", 1),
    }
    before, after = facts["before"], facts["after"]
    for (topic, partition), n in removed.items():
        label = f"{topic}-{partition}"
        assert before["records"][label] - after["records"][label] == n
        assert before["bytes"][label] - after["bytes"][label] == lost[label] > 0
        assert 0 < estimated[label] <= before["bytes"][label]
    assert facts["validation_ok"] and facts["validation_errors"] == 0
    assert _images(nb) == 1


def check_gdpr_purge(facts: dict, nb, tmp_path: Path) -> None:
    requested = facts["requested"]  # the records of the requested keys in the input, as the notebook found them
    places: dict = defaultdict(set)  # key -> {(topic, partition, offset)}
    for r in requested:
        places[r["key"]].add((r["topic"], r["partition"], r["offset"]))
    per_partition: dict = defaultdict(int)
    for r in requested:
        per_partition[(r["topic"], r["partition"])] += 1
    # the sample's keys are in every keyed topic (zstd, lz4 and transactional gzip batches); one key is nowhere
    assert {topic for topic, _ in per_partition} == {"customers", "orders", "payments"}
    assert set(places) < set(facts["keys"])
    counts = ("topic", "partition", "removed", "tombstoned", "redacted", "kept", "batches", "segments", "keys")
    assert [{c: p[c] for c in counts} for p in facts["applied"]] == [
        {c: p[c] for c in counts} for p in facts["dry"]
    ]  # the dry run said what the purge did
    assert {(p["topic"], p["partition"]): p["removed"] for p in facts["dry"]} == per_partition
    assert all(p["remaining"] == p["tombstoned"] == p["redacted"] == p["kept"] == 0 for p in facts["applied"])
    # the keys are gone from the output; every other record is unchanged at its offset; no log end moved
    assert facts["left"] == 0
    before = {(r["topic"], r["partition"]): r for r in facts["before"]}
    after = {(r["topic"], r["partition"]): r for r in facts["after"]}
    assert set(before) == set(after) and ("clicks", 0) in before
    for tp, b in before.items():
        assert b["of_keys"] == per_partition.get(tp, 0) and after[tp]["of_keys"] == 0
        assert after[tp]["records"] == b["records"] - b["of_keys"]
        assert after[tp]["others_digest"] == b["others_digest"] is not None
        assert after[tp]["log_end_offset"] == b["log_end_offset"]
    assert facts["validation_ok"] and facts["validation_errors"] == 0
    # the ledger: a row per purged record, no key anywhere, and fingerprints that group rows as keys do
    ledger = facts["ledger"]
    assert len(ledger) == facts["ledger_rows"] == len(requested) and "key" not in ledger[0]
    assert not any(key in value for row in ledger for value in row.values() for key in facts["keys"])
    by_fingerprint: dict = defaultdict(set)
    for r in ledger:
        by_fingerprint[r["key_fingerprint"]].add((r["topic"], int(r["partition"]), int(r["offset"])))
    assert all(re.fullmatch("[0-9a-f]{64}", f) for f in by_fingerprint)
    assert sorted(map(sorted, by_fingerprint.values())) == sorted(map(sorted, places.values()))
    # find(): with the secret, one key's rows, and only its
    assert {(r["topic"], r["partition"], r["offset"]) for r in facts["found"]} == places[facts["example"]]
    assert len({r["key_fingerprint"] for r in facts["found"]}) == 1
    assert _images(nb) == 1


def check_consumed_retention(facts: dict, nb, tmp_path: Path) -> None:
    expected = generate(str(tmp_path / "expected"), preset("small", seed=facts["seed"]))
    assert {(r["group"], r["topic"], r["partition"]): r["offset"] for r in facts["committed"]} == {
        key: value.offset for key, value in expected.commits.items()
    }
    # billing keeps up with every topic and "retired" was deleted: the two lagging groups hold data back
    assert facts["holding"] == ["analytics", "audit"] and facts["slowest"] == "audit"
    assert facts["applied_totals"] == facts["dry_totals"] and facts["dry_totals"]["segmentsDeleted"] > 0
    assert facts["without_slowest_totals"]["segmentsDeleted"] > facts["dry_totals"]["segmentsDeleted"]
    assert facts["unread_lost"] == 0
    assert facts["validation_ok"] and facts["validation_errors"] == 0
    assert _images(nb) == 1


# notebook -> (a Python expression the notebook's kernel prints as JSON, the check of it)
def check_topic_as_table(facts: dict, nb, tmp_path: Path) -> None:
    assert facts["committed"] and facts["delta_rows"] == facts["table_rows"] > 0
    assert facts["log_rows"] > facts["table_rows"]  # superseded records and tombstones are no rows
    assert 0 < facts["then_rows"] and facts["then_max_ms"] < facts["as_of"] and facts["changed"] > 0


CHECKS = {
    "01-explore-a-log": (
        "{'seed': SEED, 'per_topic': per_topic.to_dict('records'),"
        " 'segments': segments.groupby('topic_partition').size().to_dict(),"
        " 'key_stats': key_stats.to_dict('records'),"
        " 'transactions': transactions.reset_index().to_dict('records')}",
        check_explore,
    ),
    "02-compaction": (
        "{'chosen': [p['chosen'] for p in dry.plan.partitions()], 'report': dry.report,"
        " 'applied_report': result.report, 'before': before.to_dict(), 'after': after.to_dict(),"
        " 'validation_ok': validation.ok, 'validation_errors': len(validation.errors),"
        " 'chosen_again': again['chosen'].tolist()}",
        check_compaction,
    ),
    "03-gdpr-purge": (
        "{'keys': [k.decode() for k in per_key['key']],"
        " 'requested': requested[['topic', 'partition', 'offset']].assign("
        "key=requested['key'].map(bytes.decode)).to_dict('records'),"
        " 'dry': dry.partitions, 'applied': result.partitions, 'left': left,"
        " 'before': before.reset_index().to_dict('records'), 'after': after.reset_index().to_dict('records'),"
        " 'validation_ok': validation.ok, 'validation_errors': len(validation.errors),"
        " 'ledger_rows': result.ledger_rows, 'ledger': this_run.astype(str).to_dict('records'),"
        " 'example': example.decode(), 'found': hits[['topic', 'partition', 'offset', 'key_fingerprint']]"
        ".to_dict('records')}",
        check_gdpr_purge,
    ),
    "04-consumed-retention": (
        "{'seed': SEED, 'committed': committed[['group', 'topic', 'partition', 'offset']].to_dict('records'),"
        " 'holding': sorted(set(holding['group'])), 'slowest': slowest, 'dry_totals': dry.totals(),"
        " 'without_slowest_totals': without.totals(), 'applied_totals': applied.totals(),"
        " 'unread_lost': len(unread_lost), 'validation_ok': validation.ok,"
        " 'validation_errors': len(validation.errors)}",
        check_consumed_retention,
    ),
    "05-topic-as-table": (
        "{'log_rows': log_rows, 'table_rows': table_rows, 'delta_rows': delta_rows, 'then_rows': then_rows,"
        " 'as_of': AS_OF, 'then_max_ms': then_max_ms, 'changed': changed.count(), 'log_dir': LOG_DIR,"
        " 'committed': result.committed}",
        check_topic_as_table,
    ),
}


# -- what each plot must show ------------------------------------------------------------------------------

# A first cell, added here: `plt.show()` also records, for each axes of the figures it shows, what a
# reader sees (tick labels, legend, whether the legend lies over a bar), drawn as the notebook draws it.
RECORD_PLOTS = """
import matplotlib.pyplot as _plt

_kafkalog_plots, _kafkalog_show = [], _plt.show


def _kafkalog_record_and_show(*args, **kwargs):
    for number in _plt.get_fignums():
        figure = _plt.figure(number)
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        for ax in figure.axes:
            legend = ax.get_legend()
            box = legend.get_window_extent(renderer) if legend is not None else None
            _kafkalog_plots.append({
                "title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
                "ticks": [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()],
                "series": len(ax.get_legend_handles_labels()[1]),
                "legend": legend is not None,
                "covers": box is not None and any(box.overlaps(p.get_window_extent(renderer)) for p in ax.patches),
            })
    return _kafkalog_show(*args, **kwargs)


_plt.show = _kafkalog_record_and_show
"""
PLAIN_NUMBER = re.compile(r"[-\u2212]?[\d.,]+(e[-+]?\d+)?")


def check_plots(plots: list[dict]) -> None:
    """Bytes carry their unit (kB, MB...), and every axes with several series has a legend of its own
    that covers none of its bars."""
    assert plots
    for ax in plots:
        if re.search("bytes|size", " ".join((ax["title"], ax["xlabel"], ax["ylabel"]))):
            assert not [t for t in ax["ticks"] if PLAIN_NUMBER.fullmatch(t)], ax
            assert any(t.endswith("B") for t in ax["ticks"]), ax
        if ax["series"] > 1:
            assert ax["legend"] and not ax["covers"], ax


# -- running ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kernel_specs(tmp_path_factory) -> KernelSpecManager:
    """A kernelspec that starts this interpreter. The default `python3` spec could resolve to a user's
    or the system's Jupyter kernel, which has neither kafkalog nor this environment's pyspark."""
    kernels = tmp_path_factory.mktemp("kernels")
    write_kernel_spec(str(kernels / KERNEL))
    specs = KernelSpecManager(kernel_dirs=[str(kernels)])
    assert specs.get_kernel_spec(KERNEL).argv[0] == sys.executable
    return specs


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_checked_in_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert all(not c.outputs and c.execution_count is None for c in _code_cells(nb)), (
        "clear the notebook's outputs before checking it in"
    )


def run_notebook(path: Path, kernel_specs: KernelSpecManager, workdir: Path):
    """The notebook at `path` run in a new kernel in `workdir`, with the cells added here: the first
    records the plots, the last two print what it computed and its plots as JSON."""
    nb = nbformat.read(path, as_version=4)
    probe, _ = CHECKS.get(path.stem, (None, None))
    nb.cells.insert(0, new_code_cell(RECORD_PLOTS))
    if probe:
        nb.cells.append(new_code_cell(f"import json\nprint(json.dumps({probe}, default=str))"))
    nb.cells.append(new_code_cell("import json\nprint(json.dumps(_kafkalog_plots))"))
    workdir.mkdir()
    km = KernelManager(kernel_name=KERNEL, kernel_spec_manager=kernel_specs)
    # Raises CellExecutionError, naming the cell and its traceback, at the first cell that fails.
    NotebookClient(nb, km=km, timeout=CELL_TIMEOUT, resources={"metadata": {"path": str(workdir)}}).execute()
    return nb


@pytest.fixture(scope="module")
def executed(kernel_specs, tmp_path_factory):
    """{notebook's stem: (its working directory, its run to come: the notebook with its outputs)}: every
    notebook started, NOTEBOOKS_AT_ONCE at a time, when the module's first run test asks; the module's end
    waits for those still running."""
    with pytest.MonkeyPatch.context() as env:
        # The kernels inherit this environment: let ipykernel pick its inline plot backend, and let
        # local_session start Spark in local mode rather than join a gateway or master named here; the
        # purge sample uses its demo secret, not one this environment may hold.
        for name in ("MPLBACKEND", "PYSPARK_GATEWAY_PORT", "SPARK_REMOTE", "MASTER", "KAFKALOG_PURGE_SECRET"):
            env.delenv(name, raising=False)
        pool = ThreadPoolExecutor(max_workers=NOTEBOOKS_AT_ONCE, thread_name_prefix="notebook")
        started: dict[str, tuple[Path, Future]] = {}
        # the longest first, so that the two lanes end together
        for path in sorted(NOTEBOOKS, key=lambda p: p.stem not in ("01-explore-a-log", "03-gdpr-purge")):
            workdir = tmp_path_factory.mktemp(path.stem) / "work"
            started[path.stem] = (workdir, pool.submit(run_notebook, path, kernel_specs, workdir))
        try:
            yield started
        finally:
            pool.shutdown(wait=True)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(path, executed, tmp_path):
    workdir, run = executed[path.stem]
    nb = run.result()
    _, check = CHECKS.get(path.stem, (None, None))
    assert (workdir / "sample-notebooks").is_dir()  # the sample went to the working directory
    if check:
        facts = json.loads("".join(o.text for o in nb.cells[-2].outputs if o.get("name") == "stdout"))
        check(facts, nb, tmp_path)
    plots = json.loads("".join(o.text for o in nb.cells[-1].outputs if o.get("name") == "stdout"))
    if path.stem in PLOTLESS:
        assert not plots, plots
    else:
        check_plots(plots)
