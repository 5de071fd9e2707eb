"""Corrupted input through every rewriting command (compact, retain, purge), in place and with
--output: a nonzero exit, one line on stderr naming the input's file, byte and offset, the input
byte-identical afterwards, and no output left where the run failed.

Each mutation damages one batch of a middle segment (not the active one) of a compacted topic:
the kinds of damage a hostile run found compaction silently compacting over."""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

import crc32c
import pytest

from kafkalog.cli import main
from kafkalog.errors import KafkaLogError
from tests import leftovers

T0 = 1_700_100_000_000
V2_CRC_AT, V2_ATTRIBUTES_AT, V2_COUNT_AT, V2_RECORDS_AT = 17, 21, 57, 61


def _batches(data: bytes) -> list[tuple[int, int]]:
    """(position, total size) of each batch of a segment."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
        out.append((pos, size))
        pos += size
    return out


def _recrc(data: bytearray, pos: int, size: int) -> None:
    """Make the batch's CRC match its (damaged) bytes: damage the CRC alone cannot catch."""
    struct.pack_into(">I", data, pos + V2_CRC_AT, crc32c.crc32c(bytes(data[pos + V2_ATTRIBUTES_AT : pos + size])))


def torn_tail(data: bytearray, batches) -> bytearray:
    return data[:-20]


def huge_length(data: bytearray, batches) -> bytearray:
    struct.pack_into(">i", data, batches[1][0] + 8, 2**31 - 1)
    return data


def bad_crc(data: bytearray, batches) -> bytearray:
    pos, size = batches[1]
    data[pos + size - 3] ^= 0xFF
    return data


def bad_record_count(data: bytearray, batches) -> bytearray:
    pos, size = batches[1]
    count = struct.unpack_from(">i", data, pos + V2_COUNT_AT)[0]
    struct.pack_into(">i", data, pos + V2_COUNT_AT, count + 1)
    _recrc(data, pos, size)
    return data


def bad_varint(data: bytearray, batches) -> bytearray:
    pos, size = batches[1]  # an uncompressed batch: its first record's length varint never ends
    data[pos + V2_RECORDS_AT : pos + V2_RECORDS_AT + 6] = b"\xff" * 6
    _recrc(data, pos, size)
    return data


def bad_compression(data: bytearray, batches) -> bytearray:
    pos, size = batches[1]  # an lz4 batch: its frame's payload garbled
    for i in range(pos + V2_RECORDS_AT + 8, pos + size):
        data[i] ^= 0x5A
    _recrc(data, pos, size)
    return data


def lowered_wrapper_offset(data: bytearray, batches) -> bytearray:
    """A v1 wrapper's offset (its last message's; outside the CRC) lowered by one: its messages now
    begin at the previous wrapper's last offset, which only decompressing them shows."""
    pos = batches[1][0]
    struct.pack_into(">q", data, pos, struct.unpack_from(">q", data, pos)[0] - 1)
    return data


MUTATIONS = {  # name -> (damage, the topic it damages)
    "torn_tail": (torn_tail, "plain"),
    "huge_length": (huge_length, "plain"),
    "bad_crc": (bad_crc, "plain"),
    "bad_record_count": (bad_record_count, "plain"),
    "bad_varint": (bad_varint, "plain"),
    "bad_compression": (bad_compression, "packed"),
    "lowered_wrapper_offset": (lowered_wrapper_offset, "legacy"),
}
# what retention decodes: only the batch that straddles the new log start offset. A lowered wrapper
# is CRC-valid, and retention drops or copies it whole, as it copies any CRC-valid batch.
RETAIN_MUTATIONS = sorted(set(MUTATIONS) - {"lowered_wrapper_offset"})


@pytest.fixture(scope="module")
def clean_log(tmp_path_factory) -> Path:
    """Three compacted topics with five segments or more each: `plain` uncompressed, `packed` lz4,
    `legacy` gzip v1 wrappers of two to six messages."""
    from kafkalog.operations.generate import GeneratorSpec, TopicSpec, generate

    path = tmp_path_factory.mktemp("bad-input") / "clean"
    generate(
        str(path),
        GeneratorSpec(
            seed=11,
            consumer_offsets=None,
            topics=[
                TopicSpec(
                    name,
                    records=300,
                    keys=40,
                    value_bytes=(20, 60),
                    codec=codec,
                    magic=magic,
                    batch_records=(2, 6),
                    cleanup_policy="compact",
                    segment_bytes=4096,
                )
                for name, codec, magic in (("plain", "none", 2), ("packed", "lz4", 2), ("legacy", "gzip", 1))
            ],
        ),
    )
    return path


def _damaged(clean: Path, tmp_path: Path, mutation: str) -> tuple[Path, Path, int]:
    """A copy of the clean log with the second batch of a middle segment damaged (or the segment's
    end torn): (log dir, damaged file, the base offset of that second batch)."""
    import shutil

    damage, topic = MUTATIONS[mutation]
    root = tmp_path / "in"
    shutil.copytree(clean, root)
    segments = sorted((root / f"{topic}-0").glob("*.log"))
    assert len(segments) >= 4, "the fixture must have middle segments"
    target = segments[len(segments) // 2]
    data = bytearray(target.read_bytes())
    batches = _batches(bytes(data))
    second = struct.unpack_from(">q", data, batches[1][0])[0]
    target.write_bytes(bytes(damage(data, batches)))
    return root, target, second


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _error_line(capsys, command: str) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines, "no error was printed"
    assert not any("Traceback" in line or line.startswith("\tat ") for line in lines), lines
    return lines[-1]


def _assert_names(line: str, command: str, damaged: Path) -> None:
    """One line: `kafkalog <command>: ...<the input's file>, byte N, offset M: ...`."""
    assert line.startswith(f"kafkalog {command}: "), line
    assert f"{damaged}, byte " in line and ", offset " in line, line


@pytest.mark.parametrize("output", [False, True], ids=["in-place", "output"])
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_compact_leaves_a_partition_it_cannot_read_whole_uncleanable(
    spark, clean_log, tmp_path, capsys, mutation, output
):
    root, damaged, _ = _damaged(clean_log, tmp_path, mutation)
    before = _snapshot(root)
    out = tmp_path / "out"
    args = ["compact", str(root), "--config", "cleanup.policy=compact", "--force", "--now", str(T0)]
    code = main(args + (["--output", str(out)] if output else []))
    line = _error_line(capsys, "compact")
    assert code == 1, "a skipped partition must show in the exit code"
    _assert_names(line, "compact", damaged)
    assert f"{damaged.parent.name} is uncleanable" in line
    topic_dir = damaged.parent.name
    healthy = "packed-0" if topic_dir == "plain-0" else "plain-0"
    if output:
        assert _snapshot(root) == before  # the input is never touched
        written = _snapshot(out)
        assert {k: v for k, v in written.items() if k.startswith(topic_dir)} == {
            k: v for k, v in before.items() if k.startswith(topic_dir)
        }
        assert any(written.get(k) != v for k, v in before.items() if k.startswith(healthy)), (
            "the other partition was compacted"
        )
        assert not (tmp_path / "out.kafkalog-incomplete").exists()
    else:
        after = _snapshot(root)
        assert {k: v for k, v in after.items() if k.startswith(topic_dir)} == {
            k: v for k, v in before.items() if k.startswith(topic_dir)
        }
        assert any(after.get(k) != v for k, v in before.items() if k.startswith(healthy))


@pytest.mark.parametrize("output", [False, True], ids=["in-place", "output"])
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_purge_stops_whole_on_a_batch_it_cannot_read(spark, clean_log, tmp_path, capsys, mutation, output):
    """A purge that skipped a partition would leave the keys there: it refuses the whole run."""
    root, damaged, _ = _damaged(clean_log, tmp_path, mutation)
    before = _snapshot(root)
    keys, secret = tmp_path / "keys.txt", tmp_path / "secret"
    keys.write_text("key-1\nkey-2\n")
    secret.write_bytes(b"0123456789abcdef0123456789abcdef")
    out = tmp_path / "out"
    args = [
        "purge",
        str(root),
        "--keys",
        str(keys),
        "--ledger",
        str(tmp_path / "ledger"),
        "--secret-file",
        str(secret),
        "--now",
        str(T0),
    ]
    code = main(args + (["--output", str(out)] if output else []))
    assert code == 2
    _assert_names(_error_line(capsys, "purge"), "purge", damaged)
    assert _snapshot(root) == before
    assert not out.exists() and not (tmp_path / "out.kafkalog-incomplete").exists()
    assert not (tmp_path / "ledger").exists()


@pytest.mark.parametrize("output", [False, True], ids=["in-place", "output"])
@pytest.mark.parametrize("mutation", RETAIN_MUTATIONS)
def test_retain_stops_on_a_batch_it_must_read(clean_log, tmp_path, capsys, mutation, output):
    """Deleting records up to an offset inside the damaged batch, with --truncate-below-start,
    decodes that batch and copies the rest of its segment: damage stops the run before anything
    is written. (A CRC-valid batch that retention copies whole without decoding is copied as it is.)"""
    import json

    root, damaged, second = _damaged(clean_log, tmp_path, mutation)
    before = _snapshot(root)
    topic = damaged.parent.name.rsplit("-", 1)[0]
    requests = tmp_path / "delete.json"
    requests.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": second + 1}]})
    )
    out = tmp_path / "out"
    args = [
        "retain",
        str(root),
        "--delete-records",
        str(requests),
        "--truncate-below-start",
        "--now",
        str(T0),
        "--topic",
        topic,
    ]
    code = main(args + (["--output", str(out)] if output else []))
    assert code == 2
    _assert_names(_error_line(capsys, "retain"), "retain", damaged)
    assert _snapshot(root) == before
    assert not out.exists() and not (tmp_path / "out.kafkalog-incomplete").exists()


# -- a rewrite task that fails, whatever the reason -------------------------------------------------


def _failing_rewrite(kind: str, partition_dir: str):
    """A fault hook that fails the rewrite tasks of one partition's outputs (the others write theirs,
    which the failed run must remove too): a bug (RuntimeError) or a full disk (OSError ENOSPC)."""

    def fault(step: str, path: str) -> None:
        if step == "rewrite" and f"/{partition_dir}/" in path:
            if kind == "ENOSPC":
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
            raise RuntimeError("injected into the rewrite")

    return fault


def _purge_args(root: Path, tmp_path: Path) -> list[str]:
    keys, secret = tmp_path / "keys.txt", tmp_path / "secret"
    keys.write_text("".join(f"key-{k:06d}\n" for k in range(0, 40, 3)))  # in every segment of every topic
    secret.write_bytes(b"0123456789abcdef0123456789abcdef")
    ledger = str(tmp_path / "ledger")
    return ["purge", str(root), "--keys", str(keys), "--ledger", ledger, "--secret-file", str(secret)]


@pytest.mark.parametrize("kind", ["RuntimeError", "ENOSPC"])
@pytest.mark.parametrize("command", ["purge", "compact"])
def test_a_failing_rewrite_task_leaves_the_input_as_it_was(
    spark, clean_log, tmp_path, capsys, monkeypatch, command, kind
):
    """Whatever fails a rewrite task, the run stops whole: every staged file of every partition is
    removed, one line names a file, exit 2, the input byte for byte as it was."""
    import functools
    import shutil

    import kafkalog.operations.compact
    import kafkalog.operations.purge

    module = kafkalog.operations.purge if command == "purge" else kafkalog.operations.compact
    run = f"run_{command}"  # what the command line calls with the plan it made
    monkeypatch.setattr(module, run, functools.partial(getattr(module, run), fault=_failing_rewrite(kind, "packed-0")))
    root = tmp_path / "in"
    shutil.copytree(clean_log, root)
    before = _snapshot(root)
    if command == "purge":
        args = _purge_args(root, tmp_path)
    else:
        args = ["compact", str(root), "--config", "cleanup.policy=compact", "--force"]
    code = main([*args, "--now", str(T0)])
    line = _error_line(capsys, command)
    assert code == 2, line
    assert line.startswith(f"kafkalog {command}: {root}/packed-0/"), line
    assert ("No space left on device (ENOSPC)" if kind == "ENOSPC" else "RuntimeError: injected") in line, line
    assert _snapshot(root) == before
    assert not (tmp_path / "ledger").exists()


def test_a_failing_range_rewrite_leaves_the_input_as_it_was(spark, clean_log, tmp_path, capsys, monkeypatch):
    """The same on the range path (a range per output segment): the ranges that wrote theirs, of the
    failing partition and of the others, have their staged files removed too."""
    import functools
    import shutil

    import kafkalog.operations.compact as module
    from kafkalog import tuning

    for name, value in {"ONE_TASK_BYTES": 0, "LARGE_PARTITIONS": "ranges", "RANGE_BYTES": 1}.items():
        monkeypatch.setattr(tuning, name, value)
    monkeypatch.setattr(
        module, "run_compact", functools.partial(module.run_compact, fault=_failing_rewrite("ENOSPC", "packed-0"))
    )
    root = tmp_path / "in"
    shutil.copytree(clean_log, root)
    before = _snapshot(root)
    code = main(["compact", str(root), "--config", "cleanup.policy=compact", "--force", "--now", str(T0)])
    line = _error_line(capsys, "compact")
    assert code == 2 and line.startswith(f"kafkalog compact: {root}/packed-0/"), line
    assert _snapshot(root) == before


def test_a_failing_ledger_write_leaves_the_input_as_it_was(spark, clean_log, tmp_path, capsys, monkeypatch):
    """The ledger is written between the rewrite and the swap: when it cannot be, the staged
    segments go too."""
    import shutil

    import kafkalog.operations.purge as module
    from kafkalog.errors import FileAccessError

    ledger = tmp_path / "ledger"

    def full_disk(*args, **kwargs):
        raise FileAccessError("cannot write: No space left on device (ENOSPC)", file=str(ledger))

    monkeypatch.setattr(module, "write_ledger_records", full_disk)
    root = tmp_path / "in"
    shutil.copytree(clean_log, root)
    before = _snapshot(root)
    assert main([*_purge_args(root, tmp_path), "--now", str(T0)]) == 2
    assert _error_line(capsys, "purge") == f"kafkalog purge: {ledger}: cannot write: No space left on device (ENOSPC)"
    assert _snapshot(root) == before


@pytest.mark.parametrize("command", ["purge", "compact"])
def test_an_immutable_segment_stops_the_run_before_anything_is_staged(
    spark, clean_log, tmp_path, capsys, monkeypatch, command
):
    """A segment the swap would rename but cannot (immutable, as `os.access` reports it even to
    root): one line naming it, exit 2, nothing staged or swapped (a swap would stop half way)."""
    import shutil

    root = tmp_path / "in"
    shutil.copytree(clean_log, root)
    immutable = str(sorted((root / "packed-0").glob("*.log"))[0])
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: path != immutable and real_access(path, mode, **kw))
    before = _snapshot(root)
    if command == "purge":
        args = _purge_args(root, tmp_path)
    else:
        args = ["compact", str(root), "--config", "cleanup.policy=compact", "--force"]
    assert main([*args, "--now", str(T0)]) == 2
    line = _error_line(capsys, command)
    assert line.startswith(f"kafkalog {command}: {immutable}: cannot change it: ") and "immutable" in line, line
    assert _snapshot(root) == before


# -- property: any damage to a small log, through the whole compaction pass ------------------------


def _records(partition_dir: Path) -> dict:
    """offset -> (key, value) of every record, read through kafkalog's storage layer."""
    from kafkalog.storage.fs import LogFileSystem
    from kafkalog.storage.partition import Partition

    fs, path = LogFileSystem.for_path(str(partition_dir))
    return {
        r.offset: (r.key, r.value)
        for s in Partition.open(fs, path).segments
        for _, b in s.batches()
        for r in b.records()
        if not b.is_control
    }


@pytest.fixture(scope="module")
def tiny_log(tmp_path_factory) -> Path:
    from kafkalog.operations.generate import GeneratorSpec, TopicSpec, generate

    path = tmp_path_factory.mktemp("tiny") / "log"
    generate(
        str(path),
        GeneratorSpec(
            seed=5,
            consumer_offsets=None,
            topics=[
                TopicSpec(
                    "t",
                    records=120,
                    keys=15,
                    value_bytes=(8, 24),
                    batch_records=(1, 5),
                    cleanup_policy="compact",
                    segment_bytes=1500,
                ),
                TopicSpec(  # v1 wrappers of two to five messages: their offsets are outside the CRC
                    "v1",
                    records=120,
                    keys=15,
                    value_bytes=(8, 24),
                    codec="gzip",
                    magic=1,
                    batch_records=(2, 5),
                    cleanup_policy="compact",
                    segment_bytes=1000,
                ),
            ],
        ),
    )
    return path


def _examples() -> int:
    import os

    return int(os.environ.get("KAFKALOG_BAD_INPUT_EXAMPLES", "12"))


from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# beside the damaged segment, a leftover of an interrupted swap made of another segment, itself damaged:
# a `.swap` over the live segment, a `.swap` whose originals are `.deleted` (past step 2), a `.cleaned`
# file, or the `.deleted` original of an intact `.swap`
PLACES = ["none", "swap", "swap+deleted", "cleaned", "deleted"]


def _drawn_damage(data, raw: bytes, label: str) -> tuple[bytes, str]:
    """`raw` with damage as hypothesis draws it: bytes overwritten, with or without a matching CRC (v2),
    the file cut short, or a batch's offset (outside the CRC) lowered by one; and which it is."""
    out = bytearray(raw)
    kind = data.draw(st.sampled_from(["overwrite", "overwrite+crc", "cut", "lowered offset"]), label=f"{label}: kind")
    at = data.draw(st.integers(0, len(out) - 1), label=f"{label}: byte")
    pos, size = next(b for b in _batches(raw) if b[0] <= at < b[0] + b[1])
    if kind == "cut":
        return bytes(out[:at]), kind
    if kind == "lowered offset":
        struct.pack_into(">q", out, pos, struct.unpack_from(">q", out, pos)[0] - 1)
        return bytes(out), kind
    out[at : at + 4] = data.draw(st.binary(min_size=1, max_size=4), label=f"{label}: bytes")
    v2 = out[pos + 16] == 2  # the magic byte, where both formats keep it
    if kind == "overwrite+crc" and v2 and pos + size <= len(out) and at >= pos + V2_ATTRIBUTES_AT:
        _recrc(out, pos, size)
    return bytes(out), kind


def _pairs(data: bytes) -> list:
    """The (key, value) of every data record of a segment's bytes, sorted."""
    from kafkalog.codec.reader import iter_batches

    return sorted((r.key or b"", r.value or b"") for b in iter_batches(data) if not b.is_control for r in b.records())


def _place(segment: Path, raw: bytes, place: str) -> None:
    """A leftover of `place`'s kind made of `segment`, with the damaged bytes `raw`."""
    if place in ("swap+deleted", "deleted"):
        (segment.parent / (segment.name + ".swap")).write_bytes(segment.read_bytes() if place == "deleted" else raw)
        for f in list(segment.parent.glob(segment.stem + ".*")):
            if f.suffix in (".log", ".index", ".timeindex", ".txnindex"):
                f.rename(f.parent / (f.name + ".deleted"))
        if place == "deleted":
            (segment.parent / (segment.name + ".deleted")).write_bytes(raw)
        return
    (segment.parent / (segment.name + "." + place)).write_bytes(raw)


def _settled(root: Path, scratch: Path) -> tuple[dict, KafkaLogError | None]:
    """What recovery makes of `root` (done on a copy): its files, or the error that refuses it."""
    import shutil

    from kafkalog.storage.fs import LogFileSystem
    from kafkalog.storage.swap import recover_partition

    shutil.copytree(root, scratch)
    try:
        recover_partition(LogFileSystem.for_path(str(scratch))[0], str(scratch / "t-0"))
    except KafkaLogError as err:
        return _snapshot(root), err
    return _snapshot(scratch), None


def _damaged_tiny_log(tiny_log: Path, tmp_path_factory, data, partition: str = "t-0") -> Path:
    """A copy of the tiny log with damage anywhere in a non-active segment of `partition`
    (`_drawn_damage`)."""
    import shutil

    root = tmp_path_factory.mktemp("damage") / "log"
    shutil.copytree(tiny_log, root)
    segments = sorted((root / partition).glob("*.log"))[:-1]  # not the active one
    target = data.draw(st.sampled_from(segments), label="segment")
    target.write_bytes(_drawn_damage(data, target.read_bytes(), "segment")[0])
    return root


def _readable_records(root: Path, partition: str = "t-0") -> dict | None:
    """`_records` of a partition of the tiny log, or None where kafkalog's reader refuses it."""
    try:
        return _records(root / partition)
    except KafkaLogError:
        return None


def _assert_failed_whole(err: KafkaLogError, root: Path, before: dict) -> None:
    """A run that failed: one error naming a file, and the input byte for byte as it was (so no
    staged `.cleaned`, `.swap`, `.deleted` or `.tmp` file is left in it)."""
    assert err.file, str(err)
    assert "\n" not in str(err)
    assert _snapshot(root) == before


@settings(max_examples=_examples(), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_compaction_over_any_damage_is_uncleanable_or_loses_no_latest_value(spark, tiny_log, tmp_path_factory, data):
    """Damage anywhere in a non-active segment (bytes overwritten, with or without a matching CRC, or
    the file cut short), and in a leftover of an interrupted swap made of another one (`.swap`,
    `.cleaned`, `.deleted`): compaction either leaves the partition uncleanable, byte for byte as it
    was (as recovery leaves it, where the leftover passed recovery's checks), with an error naming a
    file of it, a byte and an offset; or it reads the recovered log whole, and then keeps exactly the
    latest record of every key, with its value, and nothing that was not there. A leftover `.swap`
    that recovery refuses leaves the partition uncleanable and untouched."""

    from kafkalog.config import resolver_from
    from kafkalog.operations.compact import compact

    root = _damaged_tiny_log(tiny_log, tmp_path_factory, data)
    scratch = root.parent
    place = data.draw(st.sampled_from(PLACES), label="leftover")
    if place != "none":  # of another segment, one whose bytes are whole
        whole_ones = [
            s
            for s in sorted((root / "t-0").glob("*.log"))[:-1]
            if s.read_bytes() == (tiny_log / "t-0" / s.name).read_bytes()
        ]
        assert whole_ones, "the fixture must have two segments to damage"
        other = data.draw(st.sampled_from(whole_ones), label="leftover of")
        whole = other.read_bytes()
        damaged, how = _drawn_damage(data, whole, "leftover")
        _place(other, damaged, place)
    before = _snapshot(root)
    settled, refused = _settled(root, scratch / "recovered")
    event(f"leftover {place}: {'refused' if refused else 'recovered'}")
    if place.startswith("swap") and refused is None and how != "overwrite+crc":
        # the completed .swap is a copy of `other` whose damage no CRC hides: it must hold every record
        swapped_in = (scratch / "recovered" / "t-0" / other.name).read_bytes()
        assert _pairs(swapped_in) == _pairs(whole), "recovery completed a .swap that loses records"
    recovered = root if refused else scratch / "recovered"
    active_base = int(sorted((recovered / "t-0").glob("*.log"))[-1].stem)
    source = _readable_records(recovered)
    resolver = resolver_from(settings=["cleanup.policy=compact"])
    result = compact(spark, str(root), resolver, now=T0, force=True, topics=["t"])  # not the tiny log's v1 topic
    err = result.plan.uncleanable.get(("t", 0))
    if refused is not None:
        assert err is not None and err.message == refused.message, "a .swap recovery refuses was completed"
        assert _snapshot(root) == before
    if err is not None:
        assert _snapshot(root) == settled
        assert (
            err.file and Path(err.file).parent == root / "t-0" and err.position is not None and err.offset is not None
        ), str(err)
        return
    # read whole by the compaction: then the input reads whole too, and the cleaned part of the
    # output holds the latest record of each key below the active segment, and only those
    assert source is not None, "compaction read a log that kafkalog's reader refuses"
    kept = _records(root / "t-0")
    latest = {}
    for offset, (key, _) in sorted(source.items()):
        if offset < active_base:
            latest[key] = offset
    for key, offset in latest.items():
        assert kept.get(offset) == source[offset], f"the latest record of {key!r} (offset {offset}) was lost"
    assert all(source.get(o) == r for o, r in kept.items()), "a record that was not in the input appeared"
    assert all(latest[r[0]] == o for o, r in kept.items() if o < active_base)


PURGED_KEYS = [b"key-000001", b"key-000004"]


@settings(
    max_examples=max(1, _examples() // 2), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_purge_over_any_damage_fails_whole_or_removes_exactly_the_keys(spark, tiny_log, tmp_path_factory, data):
    """The same damage through an in-place purge: it either fails with one error naming a file, the
    input byte for byte as it was and no ledger written; or it read the damaged log whole, and then
    exactly the records of the purged keys are gone."""
    from kafkalog.operations.purge import purge

    partition = data.draw(st.sampled_from(["t-0", "v1-0"]), label="partition")
    root = _damaged_tiny_log(tiny_log, tmp_path_factory, data, partition)
    before, source = _snapshot(root), _readable_records(root, partition)
    ledger = root.parent / "ledger"
    try:
        purge(spark, str(root), PURGED_KEYS, ledger=str(ledger), secret=b"s" * 32, now=T0)
    except KafkaLogError as err:
        _assert_failed_whole(err, root, before)
        assert not ledger.exists()
        return
    assert source is not None, "purge read a log that kafkalog's reader refuses"
    kept = {o: r for o, r in source.items() if r[0] not in PURGED_KEYS}
    last = max(source)
    if partition == "v1-0" and source[last][0] in PURGED_KEYS:  # a legacy partition's last record stays, redacted
        kept[last] = (None, None)
    assert _records(root / partition) == kept


@settings(max_examples=_examples(), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_retention_over_any_damage_fails_whole_or_keeps_the_log_above_its_start(tiny_log, tmp_path_factory, data):
    """The same damage through an in-place retain that deletes records up to an offset drawn
    anywhere in the log and truncates below it (what decodes the segment holding it): it either
    fails with one error naming a file and the input byte for byte as it was; or every record
    readable at or above the new log start offset is as it was."""
    from kafkalog.operations.retain import retain

    partition = data.draw(st.sampled_from(["t-0", "v1-0"]), label="partition")
    root = _damaged_tiny_log(tiny_log, tmp_path_factory, data, partition)
    before, source = _snapshot(root), _readable_records(root, partition)
    start = data.draw(st.integers(0, 130), label="delete records up to")
    try:
        report = retain(str(root), now_ms=T0, delete_records={(partition[:-2], 0): start}, truncate_below_start=True)
    except KafkaLogError as err:
        _assert_failed_whole(err, root, before)
        return
    (retained,) = [p for p in report.partitions if f"{p.topic}-{p.partition}" == partition]
    if source is not None:  # a segment retention does not read may stay damaged; a readable log stays readable
        new_start = retained.new_log_start_offset
        assert {o: r for o, r in _records(root / partition).items() if o >= new_start} == {
            o: r for o, r in source.items() if o >= new_start
        }


# -- a leftover .swap through every rewriting command and validate -----------------------------------

SWAPS = [(kind, originals) for kind in leftovers.KINDS for originals in leftovers.ORIGINALS]
DAMAGED_SWAPS = [c for c in SWAPS if not leftovers.completes(*c)]


@pytest.fixture(scope="module")
def swap_log(tmp_path_factory) -> Path:
    """One compacted topic with a partition for each kind of leftover `.swap` and place of its
    originals (tests/leftovers.py), each of a few small segments."""
    from kafkalog.operations.generate import GeneratorSpec, TopicSpec, generate

    path = tmp_path_factory.mktemp("swaps") / "log"
    generate(
        str(path),
        GeneratorSpec(
            seed=3,
            consumer_offsets=None,
            topics=[
                TopicSpec(
                    "t",
                    partitions=len(SWAPS),
                    records=80,
                    keys=12,
                    value_bytes=(8, 24),
                    batch_records=(1, 4),
                    cleanup_policy="compact",
                    segment_bytes=700,
                )
            ],
        ),
    )
    return path


def _with_swaps(clean: Path, tmp_path: Path, swaps: list[tuple[str, str]]) -> tuple[Path, list[tuple]]:
    """A copy of `clean` whose partition t-i has a leftover `.swap` of kind swaps[i] at its second
    segment: (log dir, [(the .swap, the byte and the offset a refusal names)])."""
    import shutil

    root = tmp_path / "in"
    shutil.copytree(clean, root)
    made = []
    for i, (kind, originals) in enumerate(swaps):
        segments = sorted((root / f"t-{i}").glob("*.log"))
        assert len(segments) >= 3, "the fixture must have a segment before and after the swapped one"
        made.append(leftovers.make_swap(root / f"t-{i}", int(segments[1].stem), kind, originals))
    return root, made


def _of(snapshot: dict, partition: str) -> dict:
    return {k: v for k, v in snapshot.items() if k.startswith(partition + "/")}


def _refusal(line: str, command: str, swap: Path, byte: int, offset: int) -> None:
    """One line naming the `.swap` (the input's), its byte and offset, and that it is not completed."""
    assert line.startswith(f"kafkalog {command}: "), line
    assert f"{swap}, byte {byte}, offset {offset}: " in line, line
    assert "kafkalog does not complete such a swap and leaves the partition as it is" in line, line


@pytest.mark.parametrize("output", [False, True], ids=["in-place", "output"])
def test_compact_leaves_a_partition_with_a_damaged_swap_uncleanable_and_completes_a_valid_one(
    spark, swap_log, tmp_path, capsys, output
):
    """One pass over a partition per kind of leftover `.swap`: each damaged one is uncleanable, named
    by its `.swap`, byte and offset, and left byte for byte; the valid ones are completed and cleaned."""
    root, swaps = _with_swaps(swap_log, tmp_path, SWAPS)
    before = _snapshot(root)
    out = tmp_path / "out"
    args = ["compact", str(root), "--config", "cleanup.policy=compact", "--force", "--now", str(T0)]
    code = main(args + (["--output", str(out)] if output else []))
    assert code == 1, "the damaged partitions show in the exit code"
    lines = [line for line in capsys.readouterr().err.splitlines() if " is uncleanable " in line]
    assert len(lines) == len(DAMAGED_SWAPS), lines
    after = _snapshot(out if output else root)
    for i, ((kind, originals), (swap, byte, offset)) in enumerate(zip(SWAPS, swaps)):
        mine = [line for line in lines if f"t-{i} is uncleanable and was left as it is: " in line]
        if leftovers.completes(kind, originals):
            assert not mine
            assert not [k for k in _of(after, f"t-{i}") if k.endswith((".swap", ".deleted", ".cleaned"))]
            assert _of(after, f"t-{i}") != _of(before, f"t-{i}")
            continue
        assert len(mine) == 1, (kind, originals, lines)
        assert f"{swap}, byte {byte}, offset {offset}: " in mine[0], mine[0]
        assert _of(after, f"t-{i}") == _of(before, f"t-{i}"), (kind, originals)
    if output:
        assert _snapshot(root) == before


def _valid_leftover_first(root: Path) -> None:
    """A `.cleaned` leftover in t-0, which recovery deletes: where a damaged `.swap` in a later
    partition is found only after t-0 was recovered, the input would change."""
    log = sorted((root / "t-0").glob("*.log"))[0]
    (root / "t-0" / (log.name + ".cleaned")).write_bytes(log.read_bytes())


@pytest.mark.parametrize("kind,originals", DAMAGED_SWAPS)
def test_retain_stops_on_a_damaged_swap_before_it_writes_anything(swap_log, tmp_path, capsys, kind, originals):
    root, swaps = _with_swaps(swap_log, tmp_path, [("valid", "live"), (kind, originals)])
    _valid_leftover_first(root)
    before = _snapshot(root)
    assert main(["retain", str(root), "--now", str(T0), "--config", "retention.ms=-1"]) == 2
    _refusal(_error_line(capsys, "retain"), "retain", *swaps[1])
    assert _snapshot(root) == before


def test_retain_completes_valid_swaps(swap_log, tmp_path):
    root, _ = _with_swaps(swap_log, tmp_path, [("valid", o) for o in leftovers.ORIGINALS] + [("empty", "gone")])
    assert main(["retain", str(root), "--now", str(T0), "--config", "retention.ms=-1"]) == 0
    assert not [p for p in root.rglob("*") if p.suffix in (".swap", ".deleted", ".cleaned")]


@pytest.mark.parametrize("output", [False, True], ids=["in-place", "output"])
def test_the_issues_empty_swap_stops_retain_with_the_directory_byte_identical(tmp_path, capsys, output):
    """Issue 26's reproduction: an empty `.swap` beside customers-0's segment 60 of the small preset."""
    base, config = tmp_path / "base", tmp_path / "base.properties"
    assert main(["generate", str(base), "--preset", "small", "--seed", "1", "--config-out", str(config)]) == 0
    swap = base / "customers-0" / "00000000000000000060.log.swap"
    swap.write_bytes(b"")
    before = _snapshot(base)
    out = tmp_path / "out"
    args = ["retain", str(base), "--config-file", str(config), "--now", "1700100000000"]
    assert main(args + (["--output", str(out)] if output else [])) == 2
    line = _error_line(capsys, "retain")
    _refusal(line, "retain", swap, 0, 60)
    assert "Kafka would replace 00000000000000000060.log, " in line and "with a 0-byte segment" in line, line
    assert _snapshot(base) == before
    assert not out.exists() and not (tmp_path / "out.kafkalog-incomplete").exists()


@pytest.mark.parametrize("kind,originals", DAMAGED_SWAPS)
def test_purge_stops_on_a_damaged_swap_before_it_writes_anything(spark, swap_log, tmp_path, capsys, kind, originals):
    root, swaps = _with_swaps(swap_log, tmp_path, [("valid", "live"), (kind, originals)])
    _valid_leftover_first(root)
    before = _snapshot(root)
    assert main(_purge_args(root, tmp_path) + ["--now", str(T0)]) == 2
    _refusal(_error_line(capsys, "purge"), "purge", *swaps[1])
    assert _snapshot(root) == before
    assert not (tmp_path / "ledger").exists()


def test_validate_reports_each_damaged_swap_as_an_error_and_a_valid_one_as_a_warning(swap_log, tmp_path):
    from kafkalog.operations.validate import validate_paths

    root, swaps = _with_swaps(swap_log, tmp_path, SWAPS)
    report = validate_paths([str(root)])
    found = {(Path(p.file).parent.name, p.severity) for p in report.findings if p.check == "partition.leftover"}
    for i, ((kind, originals), (swap, byte, offset)) in enumerate(zip(SWAPS, swaps)):
        if leftovers.completes(kind, originals):
            assert (f"t-{i}", "error") not in found and (f"t-{i}", "warning") in found, (kind, originals)
            continue
        (error,) = [
            p
            for p in report.findings
            if p.check == "partition.leftover" and p.severity == "error" and Path(p.file) == swap
        ]
        assert (error.position, error.offset) == (byte, offset), (kind, originals, error)
        assert "Kafka would replace" in error.message or "the segments it replaces are gone" in error.message
    assert report.exit_code == 1
