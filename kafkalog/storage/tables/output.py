"""Where `export` writes a table, so that a run that fails leaves its output as it was.

* A new table (nothing at the output, or an empty directory) is written whole under the staging
  name beside it (`<output>.kafkalog-incomplete`, storage/destination.py's) and renamed into place
  once its commit is in; a run that fails removes the staging directory. Delta names its files
  relative to the table, so the table moves with its directory; Iceberg's metadata names them by
  absolute path, so a staged Iceberg table is written with its final location
  (tables/iceberg.py maps that to the staging directory).
* An existing Delta or Iceberg table gets one more commit (`_delta_log/<N>.json`,
  `metadata/v<N>.metadata.json`). Its writers first put data files, deletion vectors and manifests
  in the table's directory, which no reader takes for data until a commit names them. A run that
  fails before its commit removes every file and directory it added: the table is byte for byte
  as it was. One that fails after its commit (a checkpoint after it) leaves the new version whole.
* A Parquet directory has no commits: one replaced (`--overwrite`) is written staged, then the old
  one is moved aside (`<output>.kafkalog-replaced`), the new one into place, and the old deleted.

What a kill -9 can leave, and how the next run treats it: the staging directory (refused, named:
remove it, it is an incomplete table); a Parquet directory moved aside (refused, named: rename it
back if the output is missing, else remove it); in an existing table, files no commit names
(readers skip them; Delta's VACUUM and Iceberg's orphan-file removal delete them; the next run
works from the last commit). Never a table at the output's name that is not whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow.fs as pafs

from ..destination import STAGING_SUFFIX, _publish, _remove, _uri, check_no_staging
from ..fs import LogFileSystem
from .formats import NOTE_FILE, TableError

REPLACED_SUFFIX = ".kafkalog-replaced"
# The file whose appearance is a commit: then the table's new version is whole
_COMMITS = {
    "delta": re.compile(r"/_delta_log/\d{20}\.json$"),
    "iceberg": re.compile(r"/metadata/v\d+\.metadata\.json$"),
}
_DELTA_COMMIT = re.compile(r"\d{20}\.(json|checkpoint(\.\d+\.\d+)?\.parquet)$")
_PARQUET_FILE = re.compile(rf"(.*\.parquet|_SUCCESS|\..*\.crc|{re.escape(NOTE_FILE)})$")  # with export's note


def existing(output: str, fmt: str) -> bool:
    """Whether a table of `fmt` is at `output` (False: nothing, or an empty directory). Anything
    else there is refused: a file, a directory of other files, another format's table, or the
    leftovers of a run that did not finish."""
    fs, path = LogFileSystem.for_path(output)
    check_no_staging(fs, path)
    if fs.exists(path + REPLACED_SUFFIX):
        raise TableError(
            f"an earlier run that did not finish moved the previous output aside here: rename it back to "
            f"{path} if that is missing, else remove it",
            file=path + REPLACED_SUFFIX,
        )
    if not fs.exists(path):
        return False
    if not fs.is_dir(path):
        raise TableError("a file, not a table's directory: choose another --output", file=path)
    entries = fs.list_dir(path)
    if not entries:
        return False
    if fmt == "delta":
        log = fs.join(path, "_delta_log")
        found = fs.is_dir(log) and any(_DELTA_COMMIT.match(e.name) for e in fs.list_dir(log))
    elif fmt == "iceberg":
        found = fs.exists(fs.join(path, "metadata", "version-hint.text"))
    else:
        found = all(not e.is_dir and _PARQUET_FILE.match(e.name) for e in entries)
    if not found:
        raise TableError(f"holds files but no {fmt} table: choose another --output, or empty it", file=path)
    return True


@contextmanager
def writing(output: str, fmt: str) -> Iterator[str]:
    """Where to write the table at `output` (a path or URI) in the block: the staging directory of a
    new table or of a Parquet directory replaced, else the table itself. Published when the block
    ends normally; when it raises, the output is left as it was (see the module's docstring)."""
    fs, path = LogFileSystem.for_path(output)
    if not existing(output, fmt) or fmt == "parquet":
        staging = path + STAGING_SUFFIX
        try:
            yield _uri(output, staging)
            _put_in_place(fs, staging, path)
        except BaseException:
            _remove(fs, staging)
            raise
        return
    before = _files(fs, path)
    try:
        yield output
    except BaseException:
        added = _files(fs, path) - before
        if not any(_COMMITS[fmt].search(p) for p, _ in added):
            _take_back(fs, added)
        raise


def _put_in_place(fs: LogFileSystem, staging: str, path: str) -> None:
    """Rename the staged table to `path`, the directory there (a Parquet one replaced) moved aside
    meanwhile, and back if the rename fails."""
    if not (fs.exists(path) and fs.list_dir(path)):
        _publish(fs, staging, path)
        return
    aside = path + REPLACED_SUFFIX
    fs.rename(path, aside)
    try:
        _publish(fs, staging, path)
    except BaseException:
        fs.rename(aside, path)
        raise
    fs.delete_dir(aside)


def _files(fs: LogFileSystem, path: str) -> set[tuple[str, bool]]:
    """Every file and directory under `path`, with whether it is a directory."""
    infos = fs.fs.get_file_info(pafs.FileSelector(path, recursive=True))
    return {(i.path, i.type == pafs.FileType.Directory) for i in infos}


def _take_back(fs: LogFileSystem, added: set[tuple[str, bool]]) -> None:
    """Delete what a failed commit added: its files, then its directories, deepest first."""
    for path, is_dir in sorted(added, key=lambda entry: (entry[1], -entry[0].count("/"))):
        if is_dir:
            _remove(fs, path)
        elif fs.exists(path):
            fs.delete(path)
