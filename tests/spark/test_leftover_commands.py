"""compact and a two-dir purge agree with retain (tests/storage/test_leftover_sets.py) on issue 40's
leftover set (a `.swap` past its step 1 beside a stray `.cleaned`) and on a directory under a
segment file's name: the verified swap is completed, an unverified one refused, the directory's
partition left as it is before anything of it is staged."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kafkalog.cli import main
from tests.storage.test_leftover_sets import NOW, STRAY, SWAPPED, _mid_swap

from .test_bad_input import _error_line, _records, _snapshot

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("small") / "L"
    assert main(["generate", str(root), "--preset", "small", "--seed", "1"]) == 0
    return root


def _copy(small: Path, target: Path) -> Path:
    shutil.copytree(small, target)
    return target


def test_compact_completes_the_verified_swap_and_leaves_a_partition_with_a_directory_index(
    spark, small, tmp_path, capsys
):
    """orders-0 holds the issue's leftover set, orders-1 a directory named as its segment 80's
    `.timeindex`: orders-0 compacts as its clean copy does; orders-1 is uncleanable, named, and left
    byte for byte, with no `.deleted` file and no swap intent."""
    reference, hostile = _copy(small, tmp_path / "reference"), _copy(small, tmp_path / "hostile")
    _mid_swap(hostile / "orders-0")
    index = hostile / "orders-1" / "00000000000000000080.timeindex"
    index.unlink()
    index.mkdir()
    untouched = _snapshot(hostile / "orders-1")
    args = ["--config", "cleanup.policy=compact", "--topic", "orders", "--force", "--now", NOW]
    assert main(["compact", str(reference), *args]) == 0
    capsys.readouterr()
    assert main(["compact", str(hostile), *args]) == 1
    line = _error_line(capsys, "compact")
    assert line.startswith("kafkalog compact: orders-1 is uncleanable and was left as it is: "), line
    assert f"{index}: a directory holds the name of a segment file" in line, line
    assert _snapshot(hostile / "orders-1") == untouched and index.is_dir()
    assert not [p for p in (hostile / "orders-1").iterdir() if p.name.endswith(".deleted") or "intent" in p.name]
    assert _records(hostile / "orders-0") == _records(reference / "orders-0")


@pytest.mark.parametrize("kind", ["valid", "truncated_copy", "directory"])
def test_a_two_dir_purge_with_the_leftover_in_its_second_dir(spark, small, tmp_path, capsys, kind):
    """The verified swap is completed and both copies are purged alike; a `.swap` cut short, or a
    directory named as a segment's index, is refused before either copy changes: exit 2, one line
    naming it."""
    first, second = _copy(small, tmp_path / "a"), _copy(small, tmp_path / "b")
    if kind == "directory":
        swap = second / "orders-0" / f"{SWAPPED:020d}.index"
        swap.unlink()
        swap.mkdir()
    else:
        swap = _mid_swap(second / "orders-0", kind, "deleted")
    before = {first: _snapshot(first), second: _snapshot(second)}
    keys, secret = tmp_path / "keys.txt", tmp_path / "secret"
    keys.write_text("key-000015\nkey-000002\n")
    secret.write_bytes(b"0123456789abcdef0123456789abcdef")
    args = ["purge", str(first), str(second), "--keys", str(keys), "--ledger", str(tmp_path / "ledger")]
    code = main([*args, "--secret-file", str(secret), "--topic", "orders", "--now", NOW])
    if kind == "valid":
        assert code == 0
        purged = _records(first / "orders-0")
        assert _records(second / "orders-0") == purged
        assert len(purged) < 400 and not {k for k, _ in purged.values()} & {b"key-000015", b"key-000002"}
        return
    assert code == 2
    line = _error_line(capsys, "purge")
    if kind == "directory":
        assert f"{swap}: a directory holds the name of a segment file" in line, line
    else:
        assert f"{swap}, byte " in line and f"taking {STRAY} for an unfinished step 1" in line, line
    assert {first: _snapshot(first), second: _snapshot(second)} == before
