"""Checkpoint files (spec §4.9-§4.11, §4.13, §9.5; catalogue 97, 109)."""

import pytest

from kafkalog.errors import CorruptCheckpointError
from kafkalog.storage.checkpoint import (
    EpochEntry,
    PartitionMetadata,
    epochs_from_batches,
    format_leader_epoch_checkpoint,
    format_offset_checkpoint,
    format_partition_metadata,
    parse_leader_epoch_checkpoint,
    parse_offset_checkpoint,
    parse_partition_metadata,
    truncate_epochs_from_end,
    truncate_epochs_from_start,
)
from kafkalog.storage.naming import TopicPartition

# -- offset checkpoints ------------------------------------------------------------------------


def test_parse_offset_checkpoint_spec_example():
    assert parse_offset_checkpoint("0\n2\norders 0 1500\norders 1 42\n") == {
        TopicPartition("orders", 0): 1500,
        TopicPartition("orders", 1): 42,
    }


def test_parse_offset_checkpoint_empty_and_short_files_have_no_entries():
    assert parse_offset_checkpoint("") == {}
    assert parse_offset_checkpoint("0\n") == {}  # Kafka reads a missing count line as no entries
    assert parse_offset_checkpoint("0\n0\n") == {}


def test_parse_offset_checkpoint_splits_on_any_whitespace_run_and_java_line_breaks():
    text = "0\r\n3\r\na\t0  7\rb-c 12 9 \n__consumer_offsets 3 -1"
    assert parse_offset_checkpoint(text) == {("a", 0): 7, ("b-c", 12): 9, ("__consumer_offsets", 3): -1}


def test_parse_offset_checkpoint_repeated_partition_keeps_the_last_line():
    assert parse_offset_checkpoint("0\n2\nt 0 5\nt 0 9\n") == {("t", 0): 9}


@pytest.mark.parametrize(
    "text, line, position, message",
    [
        ("1\n0\n", 1, 0, "unrecognised version 1, expected 0"),
        ("x\n0\n", 1, 0, "expected the format version"),
        (" 0\n0\n", 1, 0, "expected the format version"),
        ("0\nn\n", 2, 2, "expected the entry count"),
        ("0\n-1\n", 2, 2, "expected the entry count"),
        ("0\n2\nt 0 5\n", 2, 2, "expected 2 entries, found 1"),
        ("0\n1\nt 0 5\nt 1 6\n", 2, 2, "expected 1 entries, found 2"),
        ("0\n1\nt 0\n", 3, 4, "expected 'topic partition offset'"),
        ("0\n1\nt 0 5 6\n", 3, 4, "expected 'topic partition offset'"),
        ("0\n1\n t 0 5\n", 3, 4, "expected 'topic partition offset'"),  # Java keeps the leading empty field
        ("0\n1\nt x 5\n", 3, 4, "expected 'topic partition offset'"),
        ("0\n1\nt 0 5.0\n", 3, 4, "expected 'topic partition offset'"),
        ("0\n1\nt 2147483648 5\n", 3, 4, "expected 'topic partition offset'"),
        ("0\n1\nt 0 9223372036854775808\n", 3, 4, "expected 'topic partition offset'"),
        ("0\n1\nt 0 5\n\n", 4, 10, "expected 'topic partition offset'"),  # a blank line is an entry line
        ("0\n2\nété 0 5\nt 0\n", 4, 14, "expected 'topic partition offset'"),  # positions count UTF-8 bytes
    ],
)
def test_parse_offset_checkpoint_malformed(text, line, position, message):
    with pytest.raises(CorruptCheckpointError, match=message) as caught:
        parse_offset_checkpoint(text, file="recovery-point-offset-checkpoint")
    error = caught.value
    assert error.file == "recovery-point-offset-checkpoint"
    assert error.position == position
    # a checkpoint has no record offsets: its errors name the line, as a field and in the text
    assert error.line == line
    assert str(error).startswith(f"recovery-point-offset-checkpoint, line {line}, byte {position}: ")


def test_format_offset_checkpoint_is_sorted_with_a_trailing_newline():
    offsets = {("orders", 1): 42, ("__consumer_offsets", 10): 7, ("orders", 0): 1500, ("__consumer_offsets", 9): 3}
    text = format_offset_checkpoint(offsets)
    assert text == "0\n4\n__consumer_offsets 9 3\n__consumer_offsets 10 7\norders 0 1500\norders 1 42\n"
    assert parse_offset_checkpoint(text) == offsets
    assert format_offset_checkpoint({}) == "0\n0\n"


@pytest.mark.parametrize("topic", ["a b", "tab\tbed", "new\nline", " lead"])
def test_format_offset_checkpoint_refuses_what_kafka_cannot_read_back(topic):
    with pytest.raises(CorruptCheckpointError):
        format_offset_checkpoint({(topic, 0): 1})


# -- leader-epoch-checkpoint -------------------------------------------------------------------


def test_parse_leader_epoch_checkpoint_spec_example():
    assert parse_leader_epoch_checkpoint("0\n2\n0 0\n3 1200\n") == [EpochEntry(0, 0), EpochEntry(3, 1200)]
    assert parse_leader_epoch_checkpoint("") == []


def test_leader_epoch_checkpoint_round_trip():
    entries = [EpochEntry(0, 0), EpochEntry(1, 9), EpochEntry(3, 10), EpochEntry(5, 10)]
    text = format_leader_epoch_checkpoint(entries)
    assert text == "0\n4\n0 0\n1 9\n3 10\n5 10\n"
    assert parse_leader_epoch_checkpoint(text) == entries  # equal start offsets are allowed


@pytest.mark.parametrize(
    "text, line, position, message",
    [
        ("0\n2\n1 0\n1 5\n", 4, 8, "epoch 1 does not increase"),
        ("0\n2\n2 0\n1 5\n", 4, 8, "epoch 1 does not increase"),
        ("0\n2\n1 5\n2 4\n", 4, 8, "start offset 4 is below"),
        ("0\n1\n-1 5\n", 3, 4, "must not be negative"),
        ("0\n1\n1 -5\n", 3, 4, "must not be negative"),
        ("0\n1\n1 5 6\n", 3, 4, "expected 'epoch startOffset'"),
        ("0\n1\n2147483648 5\n", 3, 4, "expected 'epoch startOffset'"),
        ("1\n0\n", 1, 0, "unrecognised version 1"),
        ("0\n2\n1 5\n", 2, 2, "expected 2 entries, found 1"),
    ],
)
def test_parse_leader_epoch_checkpoint_malformed(text, line, position, message):
    with pytest.raises(CorruptCheckpointError, match=message) as caught:
        parse_leader_epoch_checkpoint(text, file="leader-epoch-checkpoint")
    assert caught.value.file == "leader-epoch-checkpoint"
    assert caught.value.position == position
    assert caught.value.line == line
    assert str(caught.value).startswith(f"leader-epoch-checkpoint, line {line}, byte {position}: ")


def test_format_leader_epoch_checkpoint_refuses_unordered_entries():
    with pytest.raises(CorruptCheckpointError, match="does not increase"):
        format_leader_epoch_checkpoint([(2, 0), (1, 5)])


def test_truncate_epochs_when_deleting_segments__ULT_shouldTruncateLeaderEpochsWhenDeletingSegments():
    entries = [EpochEntry(0, 0), EpochEntry(1, 5), EpochEntry(2, 10)]
    assert truncate_epochs_from_start(entries, 5) == [(1, 5), (2, 10)]


def test_update_offset_for_leader_epochs__ULT_shouldUpdateOffsetForLeaderEpochsWhenDeletingSegments():
    entries = [EpochEntry(0, 0), EpochEntry(1, 7), EpochEntry(2, 10)]
    assert truncate_epochs_from_start(entries, 5) == [(0, 5), (1, 7), (2, 10)]


def test_truncate_epochs_from_start_edges():
    entries = [EpochEntry(0, 0), EpochEntry(1, 7), EpochEntry(2, 10)]
    assert truncate_epochs_from_start(entries, 0) == [(0, 0), (1, 7), (2, 10)]
    assert truncate_epochs_from_start(entries, 100) == [(2, 100)]
    assert truncate_epochs_from_start([EpochEntry(3, 50)], 10) == [(3, 50)]
    assert truncate_epochs_from_start([], 10) == []


def test_truncate_epochs_from_end():
    entries = [EpochEntry(0, 0), EpochEntry(1, 7), EpochEntry(2, 10)]
    assert truncate_epochs_from_end(entries, 10) == [(0, 0), (1, 7)]  # an entry starting at the end goes
    assert truncate_epochs_from_end(entries, 11) == entries
    assert truncate_epochs_from_end(entries, 7) == [(0, 0)]
    assert truncate_epochs_from_end(entries, 0) == []
    assert truncate_epochs_from_end(entries, -1) == entries  # undefined end offset


def test_recovery_rebuilds_epoch_cache__LST_testRecoveryRebuildsEpochCache():
    batches = [(0, 104), (1, 106), (1, 108), (2, 110)]
    assert epochs_from_batches(batches) == [(0, 104), (1, 106), (2, 110)]


def test_epochs_from_batches_skips_missing_and_older_epochs_and_truncates_stale_entries():
    assert epochs_from_batches([(-1, 0), (-1, 5), (3, 9), (2, 12), (3, 15)]) == [(3, 9)]
    # A cached entry at or after the new epoch's start offset is dropped, as LeaderEpochFileCache.assign does.
    cached = [EpochEntry(0, 0), EpochEntry(1, 50)]
    assert epochs_from_batches([(4, 40)], cached) == [(0, 0), (4, 40)]
    assert epochs_from_batches([(4, 60)], cached) == [(0, 0), (1, 50), (4, 60)]


# -- partition.metadata ------------------------------------------------------------------------

TOPIC_ID = "ATcW5sJxQuO79ERkNYiecQ"


def test_partition_metadata_round_trip_without_trailing_newline():
    text = format_partition_metadata(TOPIC_ID)
    assert text == "version: 0\ntopic_id: ATcW5sJxQuO79ERkNYiecQ"
    assert parse_partition_metadata(text) == PartitionMetadata(0, TOPIC_ID)


def test_partition_metadata_reader_is_as_lenient_as_kafka():
    assert parse_partition_metadata(f"version: 0\ntopic_id: {TOPIC_ID}\n") == (0, TOPIC_ID)
    assert parse_partition_metadata(f"version:\t 0\r\ntopic_id:  {TOPIC_ID}==\nignored") == (0, TOPIC_ID)
    assert parse_partition_metadata(f"v: 0\nid: {TOPIC_ID}") == (0, TOPIC_ID)  # labels are not checked


@pytest.mark.parametrize(
    "text, position, message",
    [
        ("", 0, "empty file"),
        ("version: 1\ntopic_id: ATcW5sJxQuO79ERkNYiecQ", 0, "unrecognised version 1"),
        ("version:0\ntopic_id: ATcW5sJxQuO79ERkNYiecQ", 0, "expected 'version: <int>'"),
        ("version: x\ntopic_id: ATcW5sJxQuO79ERkNYiecQ", 0, "expected 'version: <int>'"),
        ("version: 0\n", 11, "line 2, byte 11: missing"),
        ("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", 11, "all-zero topic id"),
        ("version: 0\ntopic_id: ATcW5sJxQuO79ERkNYiec", 11, "expected 'topic_id"),
        ("version: 0\ntopic_id: ATcW5sJxQuO79ERkNYie+Q", 11, "expected 'topic_id"),
        ("version: 0\ntopic_id: 0137-16e2-7142-e3bb-bdf4", 11, "expected 'topic_id"),
    ],
)
def test_partition_metadata_malformed(text, position, message):
    with pytest.raises(CorruptCheckpointError, match=message) as caught:
        parse_partition_metadata(text, file="partition.metadata")
    assert (caught.value.file, caught.value.position) == ("partition.metadata", position)


@pytest.mark.parametrize("topic_id", ["AAAAAAAAAAAAAAAAAAAAAA", "short", ""])
def test_format_partition_metadata_refuses_invalid_ids(topic_id):
    with pytest.raises(CorruptCheckpointError):
        format_partition_metadata(topic_id)
