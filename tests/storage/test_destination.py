"""Where rewriting commands write: --output staged beside its name and published whole, or nothing."""

from __future__ import annotations

import pytest

from kafkalog.errors import CrcMismatchError, LogDirError
from kafkalog.storage.destination import STAGING_SUFFIX, destination


@pytest.fixture
def log_dir(tmp_path):
    root = tmp_path / "in"
    (root / "t-0").mkdir(parents=True)
    (root / "t-0" / "00000000000000000000.log").write_bytes(b"x" * 10)
    (root / "meta.properties").write_text("version=0\n")
    return root


def test_output_is_staged_then_published_whole(log_dir, tmp_path):
    out = tmp_path / "out"
    with destination(str(log_dir), str(out)) as target:
        assert target.path == str(out) + STAGING_SUFFIX
        assert not out.exists()  # nothing under the output's name while it is being built
        assert (tmp_path / ("out" + STAGING_SUFFIX) / "t-0" / "00000000000000000000.log").read_bytes() == b"x" * 10
    assert (out / "t-0" / "00000000000000000000.log").read_bytes() == b"x" * 10
    assert not (tmp_path / ("out" + STAGING_SUFFIX)).exists()


def test_a_failed_run_leaves_no_output_and_names_the_inputs_file(log_dir, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(CrcMismatchError) as raised:
        with destination(str(log_dir), str(out)) as target:
            raise CrcMismatchError("bad", file=f"{target.path}/t-0/00000000000000000000.log", position=17, offset=3)
    assert str(raised.value) == f"{log_dir}/t-0/00000000000000000000.log, byte 17, offset 3: bad"
    assert not out.exists() and not (tmp_path / ("out" + STAGING_SUFFIX)).exists()


def test_any_failure_removes_the_staging_directory(log_dir, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with destination(str(log_dir), str(tmp_path / "out")):
            raise KeyboardInterrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


@pytest.mark.parametrize("where", ["in", "in/out", "in/t-0/out"])
def test_an_output_that_is_or_lies_inside_the_input_is_refused(log_dir, tmp_path, where):
    with pytest.raises(LogDirError, match="input"):
        with destination(str(log_dir), str(tmp_path / where)):
            pass
    assert sorted(p.name for p in log_dir.iterdir()) == ["meta.properties", "t-0"]


def test_an_output_inside_the_input_through_a_link_is_refused(log_dir, tmp_path):
    (tmp_path / "link").symlink_to(log_dir)
    with pytest.raises(LogDirError, match="inside the input"):
        with destination(str(log_dir), str(tmp_path / "link" / "out")):
            pass


def test_a_leftover_staging_directory_is_refused_not_reused(log_dir, tmp_path):
    (tmp_path / ("out" + STAGING_SUFFIX)).mkdir()
    with pytest.raises(LogDirError, match="did not finish"):
        with destination(str(log_dir), str(tmp_path / "out")):
            pass


def test_a_dry_run_and_an_in_place_run_use_the_input(log_dir, tmp_path):
    for dry_run, output in ((True, str(tmp_path / "out")), (False, None)):
        with destination(str(log_dir), output, dry_run=dry_run) as target:
            assert target.path == target.source == str(log_dir)
    assert not (tmp_path / "out").exists()
