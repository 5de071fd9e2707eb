"""Where a rewriting command (compact, retain, purge) writes: the log directory itself, under the
broker's lock, or a new log directory at `--output` that appears under its name only when whole.

An output is built under a staging name beside it (`<output>.kafkalog-incomplete`) and renamed
into place at the end; a run that fails removes it. So a directory at the output's name is always
complete, and a leftover staging directory (a killed run) says in its name what it is. Errors
raised while working on a staged copy of the input name the input's file, not the copy's.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..errors import FileAccessError, KafkaLogError, LogDirError
from .fs import LogFileSystem
from .logdir import LogDir, copy_log_dir

STAGING_SUFFIX = ".kafkalog-incomplete"

log = logging.getLogger("kafkalog")


@dataclass(frozen=True)
class Destination:
    """`path`: the log directory the command rewrites in place (the input, or the staging copy of
    it), and `source`: the input, both as paths or URIs that `LogDir.open` takes."""

    path: str
    source: str
    opened: LogDir | None = field(default=None, compare=False)  # `path` opened, when the preflight opened it

    def relocate(self, err: KafkaLogError) -> KafkaLogError:
        """`err` naming the input's file where it names the staging copy's (errors name files as
        their filesystem does: without a URI's scheme); but a refusal to write names the file
        written, the copy's, which is on the output's disk."""
        staged, source = _inner(self.path), _inner(self.source)
        if isinstance(err, FileAccessError) or err.file is None or staged == source or not err.file.startswith(staged):
            return err
        return err.located(file=source + err.file[len(staged) :])


def check_output(log_dir: str, output: str) -> tuple[LogFileSystem, str]:
    """The output's filesystem and path, refused where it would overwrite or contain the input:
    it must not exist (or be an empty directory) and must not lie inside the log directory."""
    in_fs, source = LogFileSystem.for_path(log_dir)
    fs, path = LogFileSystem.for_path(output)
    if fs.exists(path) and (not fs.is_dir(path) or fs.list_dir(path)):
        if _same(in_fs, source, fs, path):
            raise LogDirError("the output is the input log directory; omit --output to rewrite in place", file=path)
        raise LogDirError("the output must not exist or be an empty directory; choose a new one", file=path)
    check_outside(log_dir, output)
    check_no_staging(fs, path)
    return fs, path


def check_outside(log_dir: str, path_or_uri: str, what: str = "the output") -> None:
    """Refuse `path_or_uri` (`what` it is: the output, the ledger) where it is the log directory,
    lies inside it or holds it: a run would write among the files it reads, or replace them."""
    in_fs, source = LogFileSystem.for_path(log_dir)
    fs, path = LogFileSystem.for_path(path_or_uri)
    if in_fs.is_local != fs.is_local:
        return
    out, log_path = _real(fs, path), _real(in_fs, source)
    if out == log_path:
        raise LogDirError(f"{what} is the input log directory; choose a directory outside it", file=path)
    if _inside(out, log_path):
        raise LogDirError(
            f"{what} lies inside the input log directory {source}; choose a directory outside it", file=path
        )
    if _inside(log_path, out):
        raise LogDirError(f"{what} holds the input log directory {source}; choose another", file=path)


def check_no_staging(fs: LogFileSystem, path: str) -> None:
    """Refuse to start while a staging directory of `path` is there: an earlier run that did not finish."""
    staging = path + STAGING_SUFFIX
    if fs.exists(staging):
        raise LogDirError(
            "an earlier run that did not finish left this staging directory; remove it (it is an "
            "incomplete copy) and run again",
            file=staging,
        )


def preflight(
    log_dir: str | LogDir, output: str | None, *, dry_run: bool = False, follow_symlinks: bool = False
) -> LogDir:
    """What a rewrite checks before it starts, without writing anything (also what the CLI checks
    before Spark starts): the log directory (a path or URI, or opened: then not listed again) holds
    only partition directories Kafka could have made; an `output` is allowed (check_output); an
    in-place rewrite's directory is not locked by another process, and has no partition directory
    that is a symbolic link unless `follow_symlinks`. Returns the opened log directory."""
    opened = LogDir.open(log_dir) if isinstance(log_dir, str) else log_dir
    log_dir = opened.uri
    opened.ensure_legal_partition_dirs()
    if not dry_run and output is not None:
        check_output(log_dir, output)
    elif not dry_run and not opened.fs.is_local:
        raise LogDirError(
            "an object store has no atomic rename (a rename is a copy and a delete), so an in-place "
            "rewrite could not recover from a crash; write the result with --output",
            file=log_dir,
        )
    elif not dry_run:
        if not follow_symlinks:
            opened.ensure_no_linked_partition_dirs()
        opened.ensure_unlocked()
    return opened


@dataclass(frozen=True)
class Checked:
    """A log directory that passed `preflight` for a rewrite with these options, as a plan carries
    it: `destination` takes it without checking it again (the lock it takes still refuses a lock
    held since)."""

    opened: LogDir
    output: str | None = None
    dry_run: bool = False
    follow_symlinks: bool = False


def checked(
    log_dir: str | LogDir | Checked, output: str | None, *, dry_run: bool = False, follow_symlinks: bool = False
) -> Checked:
    """`log_dir` checked by `preflight` for a rewrite with these options: a Checked for the same
    options as it is (checked once per command), anything else now."""
    if isinstance(log_dir, Checked):
        if (log_dir.output, log_dir.dry_run, log_dir.follow_symlinks) == (output, dry_run, follow_symlinks):
            return log_dir
        log_dir = log_dir.opened
    opened = preflight(log_dir, output, dry_run=dry_run, follow_symlinks=follow_symlinks)
    return Checked(opened, output, dry_run, follow_symlinks)


@contextmanager
def destination(
    log_dir: str | LogDir | Checked, output: str | None, *, dry_run: bool = False, follow_symlinks: bool = False
) -> Iterator[Destination]:
    """The directory to rewrite, for the length of the block, once `preflight` passes (`checked`: a
    plan's Checked for these options is not checked again): `log_dir`
    opened (the plan's, not listed again), or a path or URI (opened here). In place
    (`output` None): the log directory, under its `.lock` for the whole block (LogDir.locked: refused while a broker or
    another kafkalog run holds it, and a broker started meanwhile cannot open it). With `output`:
    a staging directory, filled with a copy of the input, renamed to `output` when the block ends
    normally and removed when it raises. A dry run
    writes nothing: the input itself. A partition directory that is a symbolic link (which only a
    dry run, an `output` or `follow_symlinks` lets through) is named in a warning: where the run
    reads, or writes, through it."""
    opened = checked(log_dir, output, dry_run=dry_run, follow_symlinks=follow_symlinks).opened
    log_dir = opened.uri
    source = _uri(log_dir, opened.path)
    if output is not None and not dry_run:
        consequence = "read through it: --output copies what it leads to"
    elif not follow_symlinks:
        consequence = "an in-place run refuses it without --follow-symlinks"
    else:
        consequence = f"{'an in-place run would rewrite' if dry_run else 'rewritten'} there (--follow-symlinks)"
    for note in opened.linked_dir_notes():
        log.warning("%s: %s", note, consequence)
    if dry_run:
        yield Destination(source, source, opened)
        return
    if output is None:
        with opened.locked():
            yield Destination(source, source, opened)
        return
    fs, path = LogFileSystem.for_path(output)
    staging = path + STAGING_SUFFIX
    target = Destination(_uri(output, staging), source)
    try:
        copy_log_dir(log_dir, target.path)
        yield target
    except KafkaLogError as err:
        _remove(fs, staging)
        raise target.relocate(err) from err
    except BaseException:
        _remove(fs, staging)
        raise
    _publish(fs, staging, path)


def _publish(fs: LogFileSystem, staging: str, path: str) -> None:
    """Rename the whole staging directory to the output's name (a copy on stores without renames)."""
    if fs.exists(path):  # an empty directory the caller made for us
        fs.delete_dir(path)
    if fs.is_local:
        os.rename(staging, path)
        fs.sync_dir(os.path.dirname(path))
        return
    try:
        fs.rename(staging, path)
    except (NotImplementedError, OSError):
        import pyarrow.fs as pafs

        pafs.copy_files(staging, path, source_filesystem=fs.fs, destination_filesystem=fs.fs)
        fs.delete_dir(staging)


def _remove(fs: LogFileSystem, path: str) -> None:
    if fs.exists(path):
        fs.delete_dir(path)


def _uri(given: str, path: str) -> str:
    """`path` (in the filesystem of `given`) in the form `given` was: a URI stays a URI."""
    if "://" not in given:
        return path
    scheme = given.split("://", 1)[0]
    return f"{scheme}://{path}"


def _inner(path_or_uri: str) -> str:
    """A path or URI as its filesystem names files: without the scheme."""
    return path_or_uri.split("://", 1)[1].rstrip("/") if "://" in path_or_uri else path_or_uri


def _real(fs: LogFileSystem, path: str) -> str:
    return os.path.realpath(path) if fs.is_local else path.rstrip("/")


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _same(a_fs: LogFileSystem, a: str, b_fs: LogFileSystem, b: str) -> bool:
    return a_fs.is_local == b_fs.is_local and _real(a_fs, a) == _real(b_fs, b)
