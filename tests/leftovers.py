"""Leftover `.swap` files of every kind, made from a partition's own segment: what the swap checks
(kafkalog/storage/swap.py) must refuse, and a valid one they must complete. Shared by the tests of
recovery (tests/storage/test_swap.py) and of the commands that recover (tests/spark/test_bad_input.py)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

# the kinds of `.swap`, damaged or not, and where the originals of the segment it names are
DAMAGED = ["empty", "torn_length", "truncated_copy", "garbage_positive", "garbage_negative"]
KINDS = DAMAGED + ["valid"]
ORIGINALS = ["live", "deleted", "gone"]


def completes(kind: str, originals: str) -> bool:
    """Whether recovery completes the swap: a valid one always; an empty one when nothing of the
    segment it names is left to compare it with (as for the segment retention rolls)."""
    return kind == "valid" or (kind, originals) == ("empty", "gone")


def _batch_ends(data: bytes) -> list[int]:
    ends, pos = [], 0
    while pos + 12 <= len(data):
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
        ends.append(pos)
    return ends


def make_swap(partition: Path, base: int, kind: str, originals: str) -> tuple[Path, int, int]:
    """A `<base>.log.swap` of `kind` beside the live segment `base` (at least two batches, the last
    more than 10 bytes), whose files stay live, become `.deleted` or are gone (`originals`). Returns
    the `.swap` and the (byte, offset) a refusal of it names (the offset that starts the damage)."""
    log = partition / f"{base:020d}.log"
    real = log.read_bytes()
    ends = _batch_ends(real)
    assert len(ends) >= 2 and ends[-1] == len(real), "the segment must hold at least two whole batches"
    second, last = struct.unpack_from(">q", real, ends[0])[0], struct.unpack_from(">q", real, ends[-2])[0]
    swap = partition / f"{base:020d}.log.swap"
    if kind == "empty":
        data, where = b"", (0, base)
    elif kind == "torn_length":  # the second batch declares a length past the end of the file
        data = bytearray(real)
        struct.pack_into(">i", data, ends[0] + 8, 2**31 - 13)
        data, where = bytes(data), (ends[0], second)
    elif kind == "truncated_copy":  # the first bytes of the real segment: its last batch is cut
        data, where = real[:-10], (ends[-2], last)
    elif kind == "garbage_positive":  # a magic byte no format has
        data, where = struct.pack(">qi", base, 40) + b"\xab" * 40, (16, base)
    elif kind == "garbage_negative":
        data, where = struct.pack(">qi", base, -7) + b"\x00" * 40, (8, base)
    else:  # "valid": a rewrite that changed nothing, with its indexes
        data, where = real, (0, base)
        for suffix in (".index", ".timeindex"):
            index = partition / f"{base:020d}{suffix}"
            if index.exists():
                (partition / f"{base:020d}{suffix}.swap").write_bytes(index.read_bytes())
    swap.write_bytes(data)
    for name in os.listdir(partition):
        if name.startswith(f"{base:020d}.") and name.endswith((".log", ".index", ".timeindex", ".txnindex")):
            if originals == "deleted":
                os.rename(partition / name, partition / (name + ".deleted"))
            elif originals == "gone":
                os.remove(partition / name)
    return swap, *where
