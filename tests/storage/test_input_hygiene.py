"""Hostile log directories (issue 26 §3): special files, symbolic links, clashing segment names.

The commands run in a subprocess with a timeout wherever a regression would hang (a FIFO blocks
its reader until a writer comes), so that it fails instead.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kafkalog.errors import LogDirError
from kafkalog.operations.generate import generate, preset
from kafkalog.storage.fs import LogFileSystem

SEGMENT = "customers-0/00000000000000000060.log"


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("small") / "logs"
    generate(str(root), preset("small", seed=1))
    return root


def _copy(small, tmp_path):
    import shutil

    target = tmp_path / "logs"
    shutil.copytree(small, target)
    return target


def _cli(*args, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "kafkalog", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def _fifo(path):
    path.unlink()
    os.mkfifo(path)


def _unblock_later(fifo, seconds=5.0):
    """Open `fifo` for a moment after `seconds`: a reader stuck in opening it (a regression) then
    reads an empty file and the test fails instead of hanging."""
    import threading

    def touch():
        os.close(os.open(fifo, os.O_RDWR))  # O_RDWR never blocks on Linux

    timer = threading.Timer(seconds, touch)
    timer.daemon = True
    timer.start()
    return timer


def test_every_read_refuses_a_special_file_before_opening_it(tmp_path):
    fs, _ = LogFileSystem.for_path(str(tmp_path))
    os.mkfifo(tmp_path / "pipe")
    timers = [_unblock_later(tmp_path / "pipe") for _ in range(3)]
    for read in (fs.read_bytes, fs.open_input, lambda p: fs.read_range(p, 0, 1)):
        with pytest.raises(LogDirError, match=r"a FIFO \(named pipe\), not a regular file") as caught:
            read(str(tmp_path / "pipe"))
        assert caught.value.file == str(tmp_path / "pipe")
    with pytest.raises(LogDirError, match="a directory, not a regular file"):
        fs.read_bytes(str(tmp_path))
    for timer in timers:
        timer.cancel()


@pytest.mark.parametrize(
    "fifo, command",
    [
        (SEGMENT, "validate"),
        (SEGMENT, "dump"),
        ("cleaner-offset-checkpoint", "validate"),
        ("cleaner-offset-checkpoint", "retain"),
    ],
)
def test_a_fifo_in_the_log_dir_is_one_error_line_not_a_hang(small, tmp_path, fifo, command):
    log = _copy(small, tmp_path)
    _fifo(log / fifo)
    args = {
        "validate": ["validate", log],
        "dump": ["dump", log / SEGMENT],
        "retain": ["retain", log, "--now", "1700100000000", "--config", "retention.ms=1000"],
    }[command]
    done = _cli(*args)
    message = f"{log / fifo}: a FIFO (named pipe), not a regular file"
    if command == "validate":  # a finding: validate goes on with the rest
        assert done.returncode == 1 and "a FIFO (named pipe), not a regular file" in done.stdout
    else:
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [f"kafkalog {command}: {message}: kafkalog reads only regular files"]
    assert os.path.exists(log / fifo) and not os.path.isfile(log / fifo)


def test_an_output_copy_refuses_a_fifo_and_leaves_nothing(small, tmp_path):
    from kafkalog.storage.destination import STAGING_SUFFIX, destination

    log = _copy(small, tmp_path)
    _fifo(log / SEGMENT)
    out = tmp_path / "out"
    with pytest.raises(LogDirError, match="a FIFO"), destination(str(log), str(out)):
        pass
    assert not out.exists() and not (tmp_path / ("out" + STAGING_SUFFIX)).exists()
