"""How often a whole command-line run lists the log directory (issue 36: plan once, run the plan).

Counted with strace on the real process and its children where strace is installed (every
`openat` of the directory with O_DIRECTORY: Python's scandir, pyarrow's and the JVM's listings all
open it so), else in-process, through `LogFileSystem.list_dir`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from kafkalog.storage.fs import LogFileSystem
from tests.export_scenario import TOPIC, write_topic

_OPENDIR = re.compile(r'openat\([^,]*, "([^"]+)", [^)]*O_DIRECTORY')


def directory_listings(argv: list[str], directory: str, tmp_path, request) -> int:
    """How many times `kafkalog argv` lists `directory`; the run must succeed."""
    strace = shutil.which("strace")
    if strace is None:
        return _listed_in_process(argv, directory, request)
    trace = tmp_path / "strace.out"
    command = [strace, "-f", "-qq", "-o", str(trace), "-e", "trace=openat,getdents64"]
    done = subprocess.run(
        [*command, sys.executable, "-m", "kafkalog", *argv], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    wanted = os.path.realpath(directory)
    opened = (_OPENDIR.search(line) for line in trace.read_text().splitlines())
    return sum(1 for m in opened if m is not None and os.path.realpath(m[1]) == wanted)


def _listed_in_process(argv: list[str], directory: str, request) -> int:
    from kafkalog.cli import main

    request.getfixturevalue("spark")  # the command line uses the session running
    real, count = LogFileSystem.list_dir, [0]

    def counted(fs, path, *args, **kwargs):
        count[0] += os.path.realpath(path) == os.path.realpath(directory)
        return real(fs, path, *args, **kwargs)

    monkeypatch = request.getfixturevalue("monkeypatch")
    monkeypatch.setattr(LogFileSystem, "list_dir", counted)
    assert main(argv) == 0
    return count[0]


def test_an_export_lists_the_root_at_most_twice(tmp_path, request):
    """The command line opens the log dir once; the plan lists the topic's partitions and the scan
    reads the segments the plan holds, rather than finding them again from a path (before: 3)."""
    root = str(tmp_path / "logs")
    write_topic(root)
    output = tmp_path / "table"
    argv = ["export", root, "--topic", TOPIC, "--output", str(output), "--format", "parquet"]
    listings = directory_listings(argv, root, tmp_path, request)
    assert 1 <= listings <= 2  # at least the one a run needs: the count sees the listings
    assert any(name.endswith(".parquet") for _, _, names in os.walk(output) for name in names)
