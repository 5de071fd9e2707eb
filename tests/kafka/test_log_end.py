"""The log end offset as Kafka's own log loading sets it (UnifiedLog.create on the Kafka jars, no
broker: tests/kafka/LogEnd.java), against kafkalog's one place for it (`storage/segment.log_end_offset`)
and the PartitionState every command takes, on the logs where readers used to disagree: an empty last
segment whose base offset lies past the previous segment's end (a cleaner removed the tail, then the
log rolled), a log of no segments, a last batch emptied by compaction, a compressed legacy wrapper."""

from __future__ import annotations

import shutil
from pathlib import Path

from kafkalog.codec.batch import build_batch, build_empty_batch
from kafkalog.codec.compression import Codec
from kafkalog.codec.legacy import build_legacy_batch
from kafkalog.codec.records import Record
from kafkalog.rules.partition_state import partition_state
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.partition import Partition
from kafkalog.storage.producer_state import replay_partition
from kafkalog.storage.segment import log_end_offset

from .broker import KafkaTools

HERE = Path(__file__).parent


def _records(offsets) -> list[Record]:
    return [Record(o, 1_700_000_000_000 + o, b"k%d" % (o % 3), b"v") for o in offsets]


def _logs() -> dict[str, dict[int, bytes]]:
    """Partition name -> {segment base offset: .log bytes}."""
    return {
        "rolled-0": {0: build_batch(_records(range(6))), 10: b""},  # 6-9 cleaned away, then rolled at 10
        "rolled_twice-0": {0: build_batch(_records(range(4))), 7: build_batch(_records([7])), 20: b""},
        "none-0": {},
        "emptied-0": {  # an idempotent producer's batch that compaction emptied: its offsets still count
            0: build_batch(_records(range(3)))
            + build_empty_batch(
                base_offset=3, last_offset_delta=2, max_timestamp=1, producer_id=7, producer_epoch=0, base_sequence=0
            ),
        },
        "legacy-0": {0: build_legacy_batch(_records(range(5)), magic=1, codec=Codec.GZIP)},
    }


def test_kafkas_log_loading_and_kafkalog_agree_on_the_log_end_offset(kafka_tools: KafkaTools, tmp_path):
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for name, segments in _logs().items():
        part = ours / name
        part.mkdir(parents=True)
        for base, data in segments.items():
            (part / f"{base:020d}.log").write_bytes(data)
    shutil.copytree(ours, theirs)  # Kafka's loading writes (indexes, a snapshot): it gets a copy

    names = sorted(p.name for p in ours.iterdir())
    done = kafka_tools.java([str(HERE / "LogEnd.java"), *(str(theirs / n) for n in names)])
    kafka = {Path(d).name: int(end) for d, _, end in (line.split() for line in done.stdout.splitlines())}
    assert sorted(kafka) == names, done.stdout

    kafkalog = {}
    for name in names:
        part = Partition.open(*LogFileSystem.for_path(str(ours / name)))
        ends = {
            log_end_offset(part.segments),
            replay_partition(part)[1],
            partition_state(part, replay_partition).log_end_offset,
        }
        assert len(ends) == 1, (name, ends)  # every reader of the log end agrees
        kafkalog[name] = ends.pop()
    assert kafkalog == kafka
    assert kafka["rolled-0"] == 10 and kafka["rolled_twice-0"] == 20  # the cases that differed
    assert kafka["emptied-0"] == 6 and kafka["legacy-0"] == 5 and kafka["none-0"] == 0
