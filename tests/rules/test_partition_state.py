"""PartitionState: a partition's offsets as a broker loading its log dir computes them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafkalog.rules.partition_state import UNNAMED_AT_LOG_START, loaded_log_start, partition_state


class _Producers:  # module level: a state pickles with it
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
    # LogManager takes 0 where the checkpoint names no log start offset; LogLoader keeps it for a tiered log
    assert _state(tiered=True).log_start_offset == 0


def test_an_empty_partition_starts_and_ends_at_its_log_end():
    state = _state(bases=(), log_end=0)
    assert (state.log_start_offset, state.high_watermark, state.last_stable_offset) == (0, 0, 0)


def test_a_known_log_end_offset_replays_only_when_the_producer_state_is_asked_for():
    replays = []

    def replay(part):
        replays.append(part)
        return _Producers(205), 999  # its log end offset is not the one taken

    state = partition_state(_part(100, 200), replay, log_end_offset=250, high_watermark_checkpoint=240)
    assert (state.log_end_offset, state.high_watermark, replays) == (250, 240, [])
    assert state.last_stable_offset == 205 and state.producers is state.producers and len(replays) == 1


def test_a_partition_the_checkpoint_does_not_name_can_be_taken_as_the_broker_loads_it():
    state = _state(log_start_checkpoint=120, unnamed_high_watermark=UNNAMED_AT_LOG_START)
    assert (state.high_watermark, state.high_watermark_checkpointed) == (120, False)  # 0, raised to the log start
    with pytest.raises(ValueError):
        _state(unnamed_high_watermark="log-middle")


@pytest.mark.parametrize(
    "checkpointed, tiered, start",
    [(None, False, 100), (40, False, 100), (140, False, 140), (None, True, 0), (40, True, 40)],
)
def test_the_loaded_log_start_offset(checkpointed, tiered, start):
    assert loaded_log_start(checkpointed, 100, tiered=tiered) == start


def _replay(part):  # a module function, as storage's replay_partition
    return _Producers(None), 250


def test_a_state_pickles_replayed_or_not():
    import pickle

    eager = partition_state(_part(100), _replay)
    lazy = partition_state(_part(100), _replay, log_end_offset=250)
    for state in (eager, lazy):
        copy = pickle.loads(pickle.dumps(state))
        assert (copy.log_end_offset, copy.last_stable_offset) == (250, 250)
