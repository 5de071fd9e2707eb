"""A record-count bomb (issue 26): a batch of millions of tiny records, well under the decompression
limit, once took `validate` and `dump --records` past 300 s and 1.3 GB. A batch is now refused
beyond MAX_RECORDS_PER_BATCH records, and one at the cap is read in bounded time and memory.

The commands run in a child process under a timeout and an address-space limit
(resource.setrlimit), so that a regression fails instead of exhausting the machine."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time

import pytest

from kafkalog.codec.batch import MIN_RECORD_SIZE, RecordBatch, build_batch_of_section
from kafkalog.codec.compression import MAX_RECORDS_PER_BATCH, Codec
from kafkalog.codec.varint import write_varint
from kafkalog.errors import CorruptBatchError, DecompressionLimitError

# Runs `kafkalog ARGS...` with at most 1 GiB of address space (a record costs ~0.5 KB decoded: an
# unbounded decode of the bomb would need about 12 GiB).
CHILD = """
import resource, sys
limit = 1 << 30
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from kafkalog.cli import main
sys.exit(main(sys.argv[1:]))
"""
NULL_RECORD = b"\x06\x00\x00\x00\x01\x01\x00"  # length 6, attributes, deltas 0, null key and value, no headers


def _batch(count: int, section: bytes, codec: int = Codec.GZIP) -> bytes:
    return build_batch_of_section(
        section,
        count,
        base_offset=0,
        codec=codec,
        last_offset_delta=count - 1,
        timestamp_type=0,
        base_timestamp=1_700_000_000_000,
        max_timestamp=1_700_000_000_000,
        partition_leader_epoch=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        is_transactional=False,
        is_control=False,
        has_delete_horizon=False,
    )


def _null_records(count: int) -> bytes:
    """`count` records with null key and value at offset deltas 0, 1, 2, ..."""
    out = bytearray()
    for delta in range(count):
        body = bytearray(b"\x00\x00")
        write_varint(body, delta)
        body += b"\x01\x01\x00"
        write_varint(out, len(body))
        out += body
    return bytes(out)


def _log(tmp_path, batch: bytes):
    segment = tmp_path / "logs" / "bomb-0" / "00000000000000000000.log"
    segment.parent.mkdir(parents=True)
    segment.write_bytes(batch)
    return segment


def _run(*args, timeout=120):
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *map(str, args)], capture_output=True, text=True, timeout=timeout
    )
    return done, time.monotonic() - started


def test_the_bomb_is_refused_in_one_line_before_it_is_decoded(tmp_path):
    """The hostile run's batch: 25 million null records, gzip (built here with one record pattern;
    its decompressed size, 175 MB, is under the 256 MiB limit)."""
    count = 25_000_000
    segment = _log(tmp_path, _batch(count, NULL_RECORD * count))
    done, seconds = _run("validate", tmp_path / "logs", "--quiet", "--json")
    assert done.returncode == 1, done.stderr
    [error] = [f for f in json.loads(done.stdout)["findings"] if f["severity"] == "error"]
    assert (error["check"], error["position"], error["offset"]) == ("batch.records", 57, 0)
    assert f"the batch declares {count} records; kafkalog decodes at most {MAX_RECORDS_PER_BATCH}" in error["message"]
    assert seconds < 30
    done, seconds = _run("dump", segment, "--records")
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"kafkalog dump: {segment}, byte 57, offset 0: the batch declares {count} records; kafkalog decodes at "
        f"most {MAX_RECORDS_PER_BATCH} records of one batch (docs/semantics.md)"
    ]
    assert seconds < 30


def test_a_batch_at_the_cap_is_read_in_bounded_time_and_memory(tmp_path):
    """The most a batch may hold: validate and dump finish under 1 GiB of address space, and their
    time grows with the records (a quarter of them takes well under the whole's time)."""
    segment = _log(tmp_path, _batch(MAX_RECORDS_PER_BATCH, _null_records(MAX_RECORDS_PER_BATCH)))
    done, whole = _run("validate", tmp_path / "logs", "--quiet")
    assert done.returncode == 0, done.stderr
    done, _ = _run("dump", segment, "--records")
    assert done.returncode == 0 and done.stdout.count('"type":"record"') == MAX_RECORDS_PER_BATCH
    quarter = tmp_path / "quarter"
    quarter.mkdir()
    _log(quarter, _batch(MAX_RECORDS_PER_BATCH // 4, _null_records(MAX_RECORDS_PER_BATCH // 4)))
    done, part = _run("validate", quarter / "logs", "--quiet")
    assert done.returncode == 0 and part < whole


def test_a_count_the_records_cannot_hold_is_refused_before_decoding():
    """7 bytes a record at least: a count above what the decompressed bytes hold is corrupt."""
    batch = RecordBatch(_batch(1000, NULL_RECORD * 10))
    with pytest.raises(CorruptBatchError, match="declares 1000 records, but its 70 decompressed bytes of records hold"):
        batch.records()
    assert len(NULL_RECORD) == MIN_RECORD_SIZE
    over = RecordBatch(_batch(MAX_RECORDS_PER_BATCH + 1, b""))
    with pytest.raises(DecompressionLimitError, match="kafkalog decodes at most") as caught:
        over.records()
    assert struct.unpack_from(">i", over.buf, caught.value.position)[0] == MAX_RECORDS_PER_BATCH + 1
