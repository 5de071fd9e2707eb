"""How often a whole command-line run lists each directory and opens each file (issue 36: plan
once, run the plan), counted by strace over the run and every process it starts (Spark's JVM, its
Python workers): the system calls, not the functions that make them. One small test a command.

A listing is a directory read to its entries (the first getdents64 on a descriptor opened for
it); an open is an openat that succeeded. A source file is counted until the swap renames it
away, so the opens of a rewritten segment's new file (the verifying rescan) are not its source's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

STRACE = shutil.which("strace")
ROOT = Path(__file__).resolve().parents[1]

_CALL = re.compile(r"^(\d+\.\d+) (\w+)\((.*)\) += (-?\d+)")
_PATH = re.compile(r'"((?:[^"\\]|\\.)*)"')
_FD = re.compile(r"^(\d+)<(.*?)>,")


@dataclass
class Access:
    """Per path: how often it was listed and opened, and opened before it was first renamed away."""

    listed: Counter = field(default_factory=Counter)
    opened: Counter = field(default_factory=Counter)
    opened_before_rename: Counter = field(default_factory=Counter)

    def of(self, counts: Counter, paths) -> dict:
        return {str(p): counts[str(p)] for p in paths}


def counted_run(argv: list[str], tmp_path: Path, env: dict | None = None) -> Access:
    """Run `python -m kafkalog argv` under strace (every thread and child process, each into a file
    of its own: no call split over lines) and count its listings, opens and renames per path."""
    if STRACE is None:
        pytest.fail("strace is not installed: scripts/setup.sh installs it (apt-get install strace)")
    out = tmp_path / "strace"
    out.mkdir()
    command = [STRACE, "-f", "-ff", "-y", "-ttt", "--seccomp-bpf", "-o", str(out / "t")]
    command += ["-e", "trace=openat,getdents64,rename,renameat,renameat2"]
    run_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    done = subprocess.run(
        [*command, sys.executable, "-m", "kafkalog", *argv], env=run_env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return _count(sorted(_calls(out)))


def _calls(out: Path):
    """(time, thread file, call, arguments, result) of every finished call."""
    for trace in out.iterdir():
        for line in trace.read_text(errors="replace").splitlines():
            m = _CALL.match(line)
            if m:
                yield float(m[1]), trace.name, m[2], m[3], int(m[4])


def _count(calls) -> Access:
    access = Access()
    fresh: dict = {}  # (thread, fd) -> whether the descriptor is not read from yet
    renamed: set = set()
    for _, thread, call, args, result in calls:
        if call == "openat" and result >= 0:
            path = _PATH.search(args)[1]
            access.opened[path] += 1
            if path not in renamed:
                access.opened_before_rename[path] += 1
            fresh[thread, result] = True
        elif call == "getdents64":
            m = _FD.match(args)
            if m and fresh.get((thread, int(m[1])), True):
                access.listed[m[2]] += 1
                fresh[thread, int(m[1])] = False
        elif call.startswith("rename") and result == 0:
            renamed.add(_PATH.search(args)[1])
    return access


# -- purge ----------------------------------------------------------------------------------------------


def test_a_purge_of_three_copies_lists_each_root_twice_and_opens_each_source_log_twice(tmp_path):
    """Three brokers' copies of two partitions, the KRaft metadata log beside the first: the plan
    opens each log dir once, reads each meta.properties once and replays the metadata once; under
    the lock the run lists the root and each partition once more, to find what the plan listed.
    Each source `.log`, the last segment of a partition too, is read by the scan and by the rewrite
    (which hashes it for the ledger as it reads it): the log end offset is the last offset the scan
    read in the last segment, not the driver's read of its tail (before: 3 opens of the last).
    Each partition directory is listed by the plan, under the lock, by the swap and by the
    verifying rescan."""
    from .spark.test_purge_copies import write_copy
    from .storage.test_kraft_metadata import KRAFT_LOG, METADATA_DIR

    roots = [write_copy(tmp_path / name, node, batch=3 + node // 3) for name, node in (("a", 1), ("b", 2), ("c", 3))]
    shutil.copytree(KRAFT_LOG / METADATA_DIR, Path(roots[0]) / METADATA_DIR)
    partitions = [Path(r) / f"{topic}-0" for r in roots for topic in ("c", "d")]
    segments = {p: sorted(p.glob("*.log")) for p in partitions}
    metadata_logs = sorted((Path(roots[0]) / METADATA_DIR).glob("*.log"))
    (tmp_path / "keys.txt").write_text("k1\nk3\n")
    argv = ["purge", *roots, "--keys", str(tmp_path / "keys.txt"), "--ledger", str(tmp_path / "ledger")]
    argv += ["--topic", "c", "--topic", "d", "--now", "1800000000000", "--quiet"]
    access = counted_run(argv, tmp_path, {"KAFKALOG_PURGE_SECRET": "0123456789abcdef0123456789abcdef"})

    assert access.of(access.listed, roots) == {r: 2 for r in roots}
    metas = [Path(r) / "meta.properties" for r in roots]
    assert access.of(access.opened, metas) == {str(m): 1 for m in metas}
    # the metadata log: its last segment's tail (how far it reaches), and the replay from its snapshot
    assert max(access.opened[str(p)] for p in metadata_logs) == 2
    assert access.of(access.listed, partitions) == {str(p): 4 for p in partitions}
    for found in segments.values():
        assert len(found) > 1 and access.of(access.opened_before_rename, found) == {str(p): 2 for p in found}


# -- compact ----------------------------------------------------------------------------------------------


def test_a_compaction_in_place_lists_the_root_and_each_partition_twice_at_most_and_reads_each_log_twice(tmp_path):
    """A compacted topic of three segments, cleaned in place: the root and the partition directory
    listed for the plan (and the partition for its swap), each cleaned `.log` read by the plan (its
    first batch and tail) and by the one task that decides and rewrites it."""
    from .spark.test_purge_copies import write_copy

    root = write_copy(tmp_path / "a", 1, batch=2)
    partition = Path(root) / "c-0"
    *cleaned, active = sorted(partition.glob("*.log"))
    argv = ["compact", root, "--topic", "c", "--topic-config", "c:cleanup.policy=compact", "--force"]
    access = counted_run([*argv, "--now", "1800000000000", "--quiet"], tmp_path)

    assert access.listed[root] <= 2 and 1 <= access.listed[str(partition)] <= 2
    assert cleaned and access.of(access.opened_before_rename, cleaned) == {str(p): 2 for p in cleaned}


# -- export ----------------------------------------------------------------------------------------------


def test_an_export_lists_the_root_at_most_twice(tmp_path):
    """The command line opens the log dir once; the plan lists the topic's partitions and the scan
    reads the segments the plan holds, rather than finding them again from a path (before: 3)."""
    from .export_scenario import TOPIC, write_topic

    root = str(tmp_path / "logs")
    write_topic(root)
    output = tmp_path / "table"
    argv = ["export", root, "--topic", TOPIC, "--output", str(output), "--format", "parquet"]
    access = counted_run(argv, tmp_path)
    assert 1 <= access.listed[root] <= 2  # at least the one a run needs: the count sees the listings
    assert any(name.endswith(".parquet") for _, _, names in os.walk(output) for name in names)
