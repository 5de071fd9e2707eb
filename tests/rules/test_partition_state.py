"""PartitionState: a partition's offsets as a broker loading its log dir computes them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafkalog.rules.partition_state import partition_state


class _Producers:
    def __init__(self, first_unstable):
        self.first_unstable = first_unstable

    def first_unstable_offset(self):
        return self.first_unstable


def _part(*bases):
    return SimpleNamespace(topic="t", partition=3, segments=[SimpleNamespace(base_offset=b) for b in bases])


def _state(bases=(100, 200), log_end=250, unstable=None, **checkpoints):
    return partition_state(_part(*bases), lambda part: (_Producers(unstable), log_end), **checkpoints)


@pytest.mark.parametrize(
    "checkpoints, start, high_watermark, checkpointed",
    [
        ({}, 100, 250, False),  # nothing checkpointed: from the first segment to the log end
        ({"log_start_checkpoint": 120, "high_watermark_checkpoint": 240}, 120, 240, True),
        ({"log_start_checkpoint": 50}, 100, 250, False),  # never below the first local segment
        ({"high_watermark_checkpoint": 900}, 100, 250, True),  # never past the log end
        ({"log_start_checkpoint": 130, "high_watermark_checkpoint": 110}, 130, 130, True),  # nor below the start
    ],
)
def test_offsets_follow_unified_logs_rules(checkpoints, start, high_watermark, checkpointed):
    state = _state(**checkpoints)
    assert (state.log_start_offset, state.high_watermark, state.high_watermark_checkpointed) == (
        start,
        high_watermark,
        checkpointed,
    )
    assert (state.log_end_offset, state.local_log_start_offset, state.tp) == (250, 100, ("t", 3))
    assert state.last_stable_offset == high_watermark


def test_the_last_stable_offset_is_the_oldest_open_transaction_under_the_high_watermark():
    assert _state(unstable=210).last_stable_offset == 210
    assert _state(unstable=245, high_watermark_checkpoint=230).last_stable_offset == 230


def test_a_tiered_partitions_log_start_may_lie_in_remote_storage():
    state = _state(log_start_checkpoint=40, tiered=True)
    assert (state.log_start_offset, state.local_log_start_offset) == (40, 100)
    assert _state(tiered=True).log_start_offset == 100


def test_an_empty_partition_starts_and_ends_at_its_log_end():
    state = _state(bases=(), log_end=0)
    assert (state.log_start_offset, state.high_watermark, state.last_stable_offset) == (0, 0, 0)
