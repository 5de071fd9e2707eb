"""One filesystem for local paths and object-store URIs (file://, s3://, gs://, hdfs://), on pyarrow.fs.

Also the names other tools give the same places: Hadoop's `s3a://` is S3 (`s3://`), Databricks'
`dbfs:/path` is its FUSE mount `/dbfs/path` on the driver and every node, and Azure's `abfs://` and
`abfss://` (`container@account.dfs.core.windows.net/path`) go through pyarrow's AzureFileSystem where
the installed pyarrow has it (it reads the account's credentials from the environment).

Paths inside a `LogFileSystem` are strings in that filesystem's own form ('/data/kafka' locally,
'bucket/kafka' on S3). Renames are atomic on local disks and HDFS; on object stores a rename is a
copy and a delete, which is why the swap protocol is recoverable at every step rather than relying
on atomic renames.
"""

from __future__ import annotations

import errno
import functools
import os
import posixpath
import stat
from typing import NamedTuple

import pyarrow as pa
import pyarrow.fs as pafs

from ..errors import FileAccessError, LogDirError, UnreadableFileError

# The system's refusals of a write (as opposed to a path that is not there, or a store that cannot
# rename): they become a FileAccessError naming the file, what was tried and why.
REFUSALS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES, errno.EPERM, errno.EROFS, errno.EIO})


def refused(err: OSError, doing: str, path: str) -> FileAccessError | None:
    """`err` as the FileAccessError of `doing` ("write", "rename to X", ...) to `path`; None when it
    is not a refusal."""
    if err.errno not in REFUSALS:
        return None
    return FileAccessError(f"cannot {doing}: {os.strerror(err.errno)} ({errno.errorcode[err.errno]})", file=path)


def _writes(doing: str):
    """A LogFileSystem method whose first argument is the path it changes: a refusal names it."""

    def decorate(method):
        @functools.wraps(method)
        def wrapper(self, path, *args, **kwargs):
            try:
                return method(self, path, *args, **kwargs)
            except OSError as err:
                raise (refused(err, doing.format(*args), path) or err) from err

        return wrapper

    return decorate


def unreadable(err: OSError, path: str) -> UnreadableFileError:
    """`err`, raised reading `path`, as the error that names the file and why."""
    why = f"{os.strerror(err.errno)} ({errno.errorcode.get(err.errno, err.errno)})" if err.errno else str(err)
    return UnreadableFileError(f"cannot read: {why}", file=path)


def _reads(method):
    """A LogFileSystem method reading the file its first argument names: a failure names the file."""

    @functools.wraps(method)
    def wrapper(self, path, *args, **kwargs):
        try:
            return method(self, path, *args, **kwargs)
        except OSError as err:
            raise unreadable(err, path) from err

    return wrapper


AZURE_SCHEMES = ("abfs", "abfss")


def pyarrow_uri(path_or_uri: str) -> str:
    """`path_or_uri` as pyarrow.fs names it: `s3a://` as `s3://`, `dbfs:/x` as the local `/dbfs/x`; a URI
    pyarrow cannot open here is refused with what to use instead."""
    scheme, sep, rest = path_or_uri.partition(":")
    scheme = scheme.lower()
    if scheme == "dbfs" and sep:
        return "/dbfs/" + rest.lstrip("/")  # dbfs:/x and dbfs:///x: Databricks' FUSE mount
    if scheme == "s3a" and rest.startswith("//"):
        return "s3:" + rest
    if scheme in AZURE_SCHEMES and rest.startswith("//") and not hasattr(pafs, "AzureFileSystem"):
        raise LogDirError(
            f"cannot open {path_or_uri}: this pyarrow ({pa.__version__}) has no AzureFileSystem; install "
            "pyarrow 16 or newer with Azure support, or give the container's mount path "
            "(a Databricks volume, /dbfs/mnt/..., or blobfuse2)",
            file=path_or_uri,
        )
    return path_or_uri


class FileEntry(NamedTuple):
    name: str
    path: str
    size: int
    mtime_ms: int
    is_dir: bool
    is_file: bool = True  # a regular file, or a link to one (not a directory, FIFO, socket or device)


class LogFileSystem:
    """The filesystem operations kafkalog needs, and nothing else."""

    def __init__(self, fs: pafs.FileSystem):
        self.fs = fs
        self.is_local = isinstance(fs, pafs.LocalFileSystem)

    @classmethod
    def for_path(cls, path_or_uri: str) -> tuple[LogFileSystem, str]:
        """The filesystem of a local path or URI, and the path inside it."""
        given = os.fspath(path_or_uri)
        text = pyarrow_uri(given)
        if "://" not in text:
            return cls(pafs.LocalFileSystem()), os.path.abspath(text)
        try:
            fs, path = pafs.FileSystem.from_uri(text)
        except (ValueError, OSError, pa.ArrowException) as err:
            raise LogDirError(f"cannot open {given}: {err}", file=given) from None
        return cls(fs), path.rstrip("/")

    @classmethod
    def found(cls, path_or_uri: str) -> tuple[LogFileSystem, str, FileEntry]:
        """`for_path`, and what is at that path: a LogDirError where nothing is."""
        fs, path = cls.for_path(path_or_uri)
        info = fs.info(path)
        if info is None:
            raise LogDirError("no such file or directory", file=path)
        return fs, path, info

    @staticmethod
    def join(*parts: str) -> str:
        return posixpath.join(*parts)

    @staticmethod
    def name(path: str) -> str:
        return posixpath.basename(path.rstrip("/"))

    def info(self, path: str) -> FileEntry | None:
        info = self.fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            return None
        return _entry(info)

    def exists(self, path: str) -> bool:
        return self.fs.get_file_info(path).type != pafs.FileType.NotFound

    def is_dir(self, path: str) -> bool:
        return self.fs.get_file_info(path).type == pafs.FileType.Directory

    def link_target(self, path: str) -> str | None:
        """Where the symbolic link at `path` leads in the end (its real path), or None when `path`
        is not a link (object stores have none)."""
        if self.is_local and os.path.islink(path):
            return os.path.realpath(path)
        return None

    def list_dir(self, path: str) -> list[FileEntry]:
        """The entries of a directory, sorted by name."""
        infos = self.fs.get_file_info(pafs.FileSelector(path, allow_not_found=False))
        return sorted((_entry(i) for i in infos), key=lambda e: e.name)

    def read_bytes(self, path: str) -> bytes:
        with self.open_input(path) as f:
            return f.read()

    def read_range(self, path: str, start: int, length: int) -> bytes:
        with self.open_input(path) as f:
            return f.read_at(length, start)

    @_reads
    def open_input(self, path: str):
        """Every read of kafkalog's opens its file here, and only a regular file is opened. A file the
        system will not read (permissions, EIO), now or while it is read, is an UnreadableFileError
        naming it."""
        self.ensure_regular_file(path)
        return _Input(self.fs.open_input_file(path), path)

    def ensure_regular_file(self, path: str) -> None:
        """LogDirError unless `path` is a regular file (or a link to one), or does not exist (the open
        says so). Opening a FIFO blocks until a writer comes, reading a device may never end:
        a log directory holds neither, so one is refused before it is opened. Object stores hold only
        files."""
        if not self.is_local:
            return
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return
        if not stat.S_ISREG(mode):
            raise LogDirError(f"{_file_kind(mode)}, not a regular file: kafkalog reads only regular files", file=path)

    def kind(self, path: str) -> str:
        """What the entry at `path`, which is not a regular file, is: "a directory", "a FIFO (named
        pipe)", ... (through a symbolic link, "a symbolic link to a directory", ...)."""
        if not self.is_local:
            return "a directory" if self.is_dir(path) else "not a regular file"
        try:
            kind = _file_kind(os.stat(path).st_mode)
        except OSError:
            return "a symbolic link to nothing" if os.path.islink(path) else "not a regular file"
        return f"a symbolic link to {kind}" if os.path.islink(path) else kind

    @_writes("write")
    def write_bytes(self, path: str, data: bytes) -> None:
        with self.fs.open_output_stream(path) as f:
            f.write(data)
        self.fsync(path)

    def write_atomic(self, path: str, data: bytes) -> None:
        """Write `path.tmp`, then rename it over `path`: what Kafka does for checkpoint files. A
        failure leaves `path` as it was, and no `path.tmp`."""
        tmp = path + ".tmp"
        try:
            self.write_bytes(tmp, data)
            self.rename(tmp, path)
        except BaseException:
            if self.exists(tmp):
                self.fs.delete_file(tmp)
            raise

    def ensure_writable(self, path: str) -> None:
        """Refuse, with a FileAccessError naming it, a file or directory the system will not let
        kafkalog replace, rename or delete: on a read-only filesystem, without write permission, or
        immutable (`chattr +i`; Kafka opens its own files for writing too). Local disks only: an
        object store tells only when written to."""
        if not self.is_local or os.access(path, os.W_OK) or not os.path.lexists(path):
            return
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            why = f"{os.strerror(errno.EROFS)} (EROFS)"
        else:
            why = "not writable (no write permission, or an immutable file: EACCES, EPERM)"
        raise FileAccessError(f"cannot change it: {why}; nothing was changed", file=path)

    @_writes("create")
    def open_output(self, path: str):
        return _OutputStream(self.fs.open_output_stream(path), path)

    @_writes("rename it to {0}")
    def rename(self, src: str, dst: str) -> None:
        self.fs.move(src, dst)

    @_writes("delete")
    def delete(self, path: str) -> None:
        self.fs.delete_file(path)

    @_writes("delete")
    def delete_dir(self, path: str) -> None:
        self.fs.delete_dir(path)

    @_writes("create the directory")
    def make_dirs(self, path: str) -> None:
        self.fs.create_dir(path, recursive=True)

    @_writes("set the modification time")
    def set_mtime(self, path: str, mtime_ms: int) -> None:
        """Set a file's modification time; object stores keep their own, so only local files change."""
        if self.is_local:
            os.utime(path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))

    @_writes("sync")
    def fsync(self, path: str) -> None:
        """Make a written file durable on a local disk (object stores are durable once closed)."""
        if self.is_local:
            _fsync(path)

    @_writes("sync")
    def sync_dir(self, path: str) -> None:
        """fsync a directory so that renames in it survive a crash (local disks only)."""
        if self.is_local:
            _fsync(path)


class _Input:
    """A file `open_input` gives: a failure to read it names its file."""

    def __init__(self, file, path: str):
        self.file, self.path = file, path

    def read(self, *args):
        try:
            return self.file.read(*args)
        except OSError as err:
            raise unreadable(err, self.path) from err

    def read_at(self, length: int, position: int):
        try:
            return self.file.read_at(length, position)
        except OSError as err:
            raise unreadable(err, self.path) from err

    def __getattr__(self, name):
        return getattr(self.file, name)

    def __enter__(self) -> _Input:
        return self

    def __exit__(self, *exc) -> None:
        self.file.close()


class _OutputStream:
    """A stream `open_output` gives: a refusal to write or close it (a full disk) names its file."""

    def __init__(self, stream, path: str):
        self.stream, self.path = stream, path

    def write(self, data) -> int:
        try:
            return self.stream.write(data)
        except OSError as err:
            raise (refused(err, "write", self.path) or err) from err

    def close(self) -> None:
        try:
            self.stream.close()
        except OSError as err:
            raise (refused(err, "write", self.path) or err) from err

    def __enter__(self) -> _OutputStream:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def process_gone(pid: int) -> bool:
    """Whether no process `pid` runs on this host: what a process named by its pid left (a staging
    directory, a part of a file) is stale once it is gone, killed before it removed it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's
        return False
    return False


def _entry(info: pafs.FileInfo) -> FileEntry:
    mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else 0
    kind = info.type
    return FileEntry(
        info.base_name, info.path, info.size or 0, mtime, kind == pafs.FileType.Directory, kind == pafs.FileType.File
    )


def _file_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((name for test, name in kinds if test(mode)), "a special file")


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class HeldFileSystem(LogFileSystem):
    """`inner`, but the files of `held` (path -> bytes) are read from memory: a task that reads a
    segment several ways (its batches, its records, its rewrite) reads it from the disk once.
    Everything else (writes, listings, other files) goes to `inner`'s filesystem."""

    def __init__(self, inner: LogFileSystem, held: dict[str, bytes]):
        super().__init__(inner.fs)
        self.inner, self.held = inner, held

    def open_input(self, path: str):
        data = self.held.get(path)
        return self.inner.open_input(path) if data is None else pa.BufferReader(data)


class HashingFileSystem(LogFileSystem):
    """`inner`, but the files of `paths` are hashed (SHA-256) as they are read, and read to their
    end when closed: a task that reads a file anyway learns its hash without opening it again
    (`sha256(path)`: None while it is not read whole, or when it was read out of order)."""

    def __init__(self, inner: LogFileSystem, paths):
        super().__init__(inner.fs)
        self.inner = inner
        self.digests: dict[str, str | None] = dict.fromkeys(paths)

    def open_input(self, path: str):
        opened = self.inner.open_input(path)
        return _HashingInput(opened, path, self.digests) if path in self.digests else opened

    def sha256(self, path: str) -> str | None:
        return self.digests.get(path)


class _HashingInput:
    """An input whose reads (from the start, in order; one may read again the end of the one before)
    feed a SHA-256, which is stored in `digests` once the input is closed, the rest read first."""

    CHUNK = 1 << 20

    def __init__(self, opened, path: str, digests: dict):
        import hashlib

        self.opened, self.path, self.digests = opened, path, digests
        self.digest, self.upto, self.in_order = hashlib.sha256(), 0, True

    def _fed(self, data, position: int):
        end = position + len(data)
        if position > self.upto:  # a gap: the hash cannot be had from these reads
            self.in_order = False
        elif self.in_order and end > self.upto:
            self.digest.update(memoryview(data)[self.upto - position :])
            self.upto = end
        return data

    def read_at(self, length: int, position: int):
        return self._fed(self.opened.read_at(length, position), position)

    def read(self, *args):
        position = self.opened.tell()
        return self._fed(self.opened.read(*args), position)

    def __getattr__(self, name):
        return getattr(self.opened, name)

    def __enter__(self) -> _HashingInput:
        return self

    def __exit__(self, kind, *exc) -> None:
        try:
            if kind is None and self.in_order:
                while block := self.opened.read_at(self.CHUNK, self.upto):
                    self._fed(block, self.upto)
                self.digests[self.path] = self.digest.hexdigest()
        finally:
            self.opened.__exit__(kind, *exc)
