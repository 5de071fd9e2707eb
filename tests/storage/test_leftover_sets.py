"""Leftovers whose meaning is not what Kafka's loader reads into them, and entries that are not
regular files under a segment's name (issue 40): what recovery, the swap and the listing do with
them, and what `retain` and `validate` say, run as a user runs them (no Spark: subprocesses).

The reproductions start, as the issue's do, from `kafkalog generate L --preset small --seed 1`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog.errors import KafkaLogError, LogDirError
from kafkalog.operations.generate import generate, preset
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.logdir import LogDir
from kafkalog.storage.partition import Partition
from kafkalog.storage.swap import SWAP_INTENT, recover_partition, replace_segments
from tests import leftovers

NOW = "1700100000000"
SWAPPED = 83  # orders-0's second segment: offsets 83-166
STRAY = "00000000000000000000.log.cleaned"


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("small") / "L"
    generate(str(root), preset("small", seed=1))
    return root


@pytest.fixture
def log(small, tmp_path) -> Path:
    target = tmp_path / "L"
    shutil.copytree(small, target)
    return target


def _cli(*args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kafkalog", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def _tree(root: Path) -> dict:
    """Every entry under `root`: a regular file's bytes, or what else it is."""
    tree = {}
    for p in sorted(root.rglob("*")):
        key = str(p.relative_to(root))
        tree[key] = p.read_bytes() if p.is_file() else ("link" if p.is_symlink() else "dir" if p.is_dir() else "other")
    return tree


def _offsets(partition: Path) -> set[int]:
    part = Partition.open(LogFileSystem.for_path(str(partition))[0], str(partition))
    return {o for _, b in part.batches() for o in range(b.base_offset, b.last_offset + 1)}


def _one_line(done: subprocess.CompletedProcess, command: str, *named: str) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("kafkalog.progress")]
    assert len(lines) == 1 and lines[0].startswith(f"kafkalog {command}: "), done.stderr
    for text in named:
        assert text in lines[0], lines[0]
    return lines[0]


def _mid_swap(partition: Path, kind: str = "valid", originals: str = "deleted") -> Path:
    """The issue's leftover set: a `.swap` of segment 83 (`kind`, tests/leftovers.py) with its
    originals `.deleted` (or live, or gone), beside a stray empty `.cleaned` below it."""
    swap, _, _ = leftovers.make_swap(partition, SWAPPED, kind, originals)
    (partition / STRAY).touch()
    return swap


# -- a .swap past its step 1 beside a stray .cleaned --------------------------------------------------


@pytest.mark.parametrize("originals", leftovers.ORIGINALS)
@pytest.mark.parametrize("kind", leftovers.KINDS)
def test_a_swap_beside_a_stray_cleaned_is_rolled_back_completed_or_refused_never_lost(log, kind, originals):
    """Kafka's loader deletes every `.swap` at or above a `.cleaned` base offset. Where the originals
    are live that loses nothing, and recovery does the same. Where they are `.deleted` or gone, the
    `.swap` may be the only copy: a valid one is completed, any other refused with nothing touched.
    An empty `.swap` whose originals are gone holds nothing to lose."""
    partition = log / "orders-0"
    everything = _offsets(partition)
    swap = _mid_swap(partition, kind, originals)
    before = _tree(log)
    fs, _ = LogFileSystem.for_path(str(partition))
    holds_nothing = (kind, originals) == ("empty", "gone")
    if originals != "live" and kind != "valid" and not holds_nothing:
        with pytest.raises(KafkaLogError) as refused:
            recover_partition(fs, str(partition))
        assert refused.value.file == str(swap)
        assert f"taking {STRAY} for an unfinished step 1" in refused.value.message
        assert "kafkalog does not complete such a swap" in refused.value.message
        assert _tree(log) == before
        return
    recover_partition(fs, str(partition))
    assert not [p for p in partition.iterdir() if p.suffix in (".swap", ".deleted", ".cleaned")]
    lost = set(range(SWAPPED, 167)) if holds_nothing else set()  # gone before recovery
    assert _offsets(partition) == everything - lost


def test_kafkalogs_own_swap_cut_in_step_1_beside_deleted_files_is_refused(log):
    """kafkalog's intent names a `.swap` still `.cleaned` (its step 1 had not ended), yet a `.deleted`
    file says a step 2 had begun: which files are the log cannot be told."""
    partition = log / "orders-0"
    name = f"{SWAPPED:020d}"
    shutil.copy(partition / f"{name}.log", partition / f"{name}.log.swap")
    shutil.copy(partition / f"{name}.index", partition / f"{name}.index.cleaned")
    intent = {f"{name}.log.swap": (partition / f"{name}.log").stat().st_size, f"{name}.index.swap": 80}
    (partition / SWAP_INTENT).write_text(json.dumps({"version": 1, "swaps": intent, "replaced": [SWAPPED]}))
    os.rename(partition / "00000000000000000000.timeindex", partition / "00000000000000000000.timeindex.deleted")
    before = _tree(log)
    with pytest.raises(LogDirError, match="which files are the log cannot be told") as refused:
        recover_partition(LogFileSystem.for_path(str(partition))[0], str(partition))
    assert refused.value.file == str(partition / f"{name}.index.cleaned")
    assert _tree(log) == before


def test_the_issues_reproduction_through_retain(log):
    """`retain L --now 1700100000000` on the issue's leftover set: the verified swap is completed
    (orders-0 keeps its 400 records, segment 83 as it was); with its last bytes cut, exit 2, one line
    naming the `.swap` and the stray `.cleaned`, the log dir byte for byte as it was."""
    original = (log / "orders-0" / f"{SWAPPED:020d}.log").read_bytes()
    damaged = log.parent / "damaged"
    shutil.copytree(log, damaged)
    _mid_swap(log / "orders-0")
    done = _cli("retain", log, "--now", NOW)
    assert done.returncode == 0, done.stderr
    assert _offsets(log / "orders-0") == set(range(400))
    assert (log / "orders-0" / f"{SWAPPED:020d}.log").read_bytes() == original

    swap = _mid_swap(damaged / "orders-0", "truncated_copy")
    before = _tree(damaged)
    done = _cli("retain", damaged, "--now", NOW)
    assert done.returncode == 2
    _one_line(done, "retain", str(swap), STRAY, "may be the only copy")
    assert _tree(damaged) == before


# -- only regular files are segments, indexes and leftovers -------------------------------------------


def _irregular(path: Path, kind: str) -> str:
    """Put `kind` of entry at `path` (a file there goes); what the refusal calls it."""
    if path.exists():
        path.unlink()
    target = path.parent.parent / f"elsewhere-{path.name}"
    if kind == "directory":
        path.mkdir()
        return "a directory"
    if kind == "fifo":
        os.mkfifo(path)
        return "a FIFO (named pipe)"
    if kind == "link to a directory":
        target.mkdir()
        path.symlink_to(target)
        return "a symbolic link to a directory"
    os.mkfifo(target)
    path.symlink_to(target)
    return "a symbolic link to a FIFO (named pipe)"


KINDS = ["directory", "fifo", "link to a directory", "link to a fifo"]
NAMES = [f"{SWAPPED:020d}.index", f"{SWAPPED:020d}.log", f"{SWAPPED:020d}.log.deleted", f"{SWAPPED:020d}.txnindex"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("kind", KINDS)
def test_retain_refuses_a_partition_where_a_segment_name_is_not_a_regular_file(log, kind, name):
    """Before anything changes, in any partition: orders-1 would be retained too."""
    entry = log / "orders-0" / name
    what = _irregular(entry, kind)
    before = _tree(log)
    done = _cli("retain", log, "--now", NOW, "--config", "retention.bytes=20000")
    assert done.returncode == 2
    _one_line(done, "retain", f"{entry}: {what} holds the name of a segment file", "only regular files")
    assert _tree(log) == before


def test_the_listing_the_swap_and_recovery_refuse_an_entry_that_is_not_a_regular_file(log):
    partition = log / "orders-0"
    entry = partition / f"{SWAPPED:020d}.timeindex"
    _irregular(entry, "directory")
    (partition / f"{SWAPPED:020d}.log.cleaned").write_bytes((partition / f"{SWAPPED:020d}.log").read_bytes())
    fs, _ = LogFileSystem.for_path(str(log))
    part = Partition.open(fs, str(partition))
    assert part.irregular == {str(entry): "a directory"}
    assert ".timeindex" not in part.segment_for(SWAPPED).files  # not read as the segment's index
    before = _tree(log)
    for refused in (
        part.ensure_well_named,
        lambda: recover_partition(fs, str(partition)),
        lambda: replace_segments(fs, str(partition), [SWAPPED], [SWAPPED]),
    ):
        with pytest.raises(LogDirError, match="a directory holds the name of a segment file") as caught:
            refused()
        assert caught.value.file == str(entry)
        assert _tree(log) == before


@pytest.mark.parametrize("suffix", [".txnindex", ".timeindex"])
def test_validate_reports_a_fifo_index_as_an_error_and_goes_on(log, suffix):
    partition = log / "customers-0"
    entry = partition / f"00000000000000000060{suffix}"
    _irregular(entry, "fifo")
    done = _cli("validate", log)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert f"ERROR   partition.not_regular: customers-0/{entry.name}: a FIFO (named pipe), not a regular" in done.stdout
    assert "checked 11 partitions" in done.stdout


# -- overlapping segments ---------------------------------------------------------------------------


@pytest.mark.parametrize("copy", [300, 200], ids=["above", "below"])
@pytest.mark.parametrize("dry_run", [False, True], ids=["apply", "dry-run"])
def test_retain_refuses_overlapping_segments(log, copy, dry_run):
    """orders-0's segment 251 (offsets 251-336) copied as segment 300 or 200: Kafka would count its
    bytes twice, and retention.bytes=20000 would delete segment 167 too. Refused, nothing changed."""
    partition = log / "orders-0"
    shutil.copy(partition / "00000000000000000251.log", partition / f"{copy:020d}.log")
    before = _tree(log)
    done = _cli("retain", log, "--now", NOW, "--config", "retention.bytes=20000", *(["--dry-run"] if dry_run else []))
    assert done.returncode == 2
    below = partition / ("00000000000000000251.log" if copy == 300 else "00000000000000000167.log")
    _one_line(done, "retain", f"{below}, offset ", "the segments overlap")
    assert _tree(log) == before


def test_segments_that_do_not_overlap_pass(small):
    opened = LogDir.open(str(small))
    for part in opened.partitions():
        part.ensure_segments_apart()
