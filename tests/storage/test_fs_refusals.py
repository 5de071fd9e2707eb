"""The filesystem's refusals (a full disk, a read-only filesystem or file, an immutable file) become
one FileAccessError naming the file and what was tried; other OSErrors stay what they were."""

from __future__ import annotations

import errno

import pytest

from kafkalog.errors import FileAccessError
from kafkalog.storage.fs import LogFileSystem


def test_a_full_disk_names_the_file_written():
    fs, _ = LogFileSystem.for_path("/dev")
    with pytest.raises(FileAccessError, match=r"^/dev/full: cannot write: No space left on device \(ENOSPC\)$"):
        fs.write_bytes("/dev/full", b"x")
    with pytest.raises(FileAccessError, match=r"^/dev/full: cannot write: .*\(ENOSPC\)$"):
        with fs.open_output("/dev/full") as out:
            out.write(b"x" * 100_000)


@pytest.mark.parametrize("code", [errno.EPERM, errno.EROFS, errno.EACCES])
def test_a_refused_rename_or_delete_names_the_file(tmp_path, monkeypatch, code):
    fs, root = LogFileSystem.for_path(str(tmp_path))
    path = fs.join(root, "00000000000000000000.log")
    fs.write_bytes(path, b"")

    class Refusing:  # pyarrow's filesystem, as an immutable file or a read-only directory answers
        def move(self, *args):
            raise OSError(code, "refused")

        delete_file = move

    monkeypatch.setattr(fs, "fs", Refusing())
    name = errno.errorcode[code]
    with pytest.raises(FileAccessError, match=rf"^{path}: cannot rename it to {path}.deleted: .* \({name}\)$"):
        fs.rename(path, path + ".deleted")
    with pytest.raises(FileAccessError, match=rf"^{path}: cannot delete: .* \({name}\)$"):
        fs.delete(path)


def test_a_missing_file_is_not_a_refusal(tmp_path):
    fs, root = LogFileSystem.for_path(str(tmp_path))
    with pytest.raises(FileNotFoundError):
        fs.rename(fs.join(root, "absent"), fs.join(root, "other"))
