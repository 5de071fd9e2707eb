"""`kafkalog dump`'s decoders against Kafka 4.3.1's own DumpLogSegments on files real brokers wrote:
the KRaft metadata log and snapshots of tests/fixtures/kraft-4.3.1 (--cluster-metadata-decoder, and
the KRaft control records it always decodes), the `__consumer_offsets` partitions of the real broker
directories (--offsets-decoder), and tests/fixtures/coordinators-4.3.1 (captured from a 4.3.1 broker
by its capture.py: a KIP-848 consumer group, a share group, a transactional producer) with
--offsets-decoder, --transaction-log-decoder and --share-group-state-decoder. Every decoded field
must equal what Kafka prints."""

from __future__ import annotations

import json
import re
from pathlib import Path

from kafkalog.codec.coordinator_records import share_partition_start_offsets
from kafkalog.operations.dump import dump_paths
from kafkalog.operations.retain_partition import read_committed_offsets
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.logdir import LogDir
from kafkalog.storage.partition import Partition
from kafkalog.storage.remote_log import topic_id

from ..conftest import REAL_FIXTURES

METADATA = Path(__file__).resolve().parents[1] / "fixtures" / "kraft-4.3.1" / "log" / "__cluster_metadata-0"
BROKER_DIRS = REAL_FIXTURES / "broker-dirs"
COORDINATORS = Path(__file__).resolve().parents[1] / "fixtures" / "coordinators-4.3.1" / "log"

# Kafka's record lines: "| offset: N ... payload: {json}", "| offset: N ... LeaderChange: {json}",
# "SnapshotHeader {json}", and with --offsets-decoder "key: {json} payload: {json}".
_OFFSET = re.compile(r"^\| offset: (\d+) ")
_CONTROL = re.compile(r" (LeaderChange:|SnapshotHeader|SnapshotFooter|KRaftVersion|KRaftVoters:?) (\{.*\})$")


def _kafka_lines(kafka_tools, files, *options) -> dict[str, dict[int, str]]:
    """DumpLogSegments' record lines by file path and offset."""
    done = kafka_tools.dump_log_segments(files, extra=options)
    assert done.returncode == 0, done.stderr
    out: dict[str, dict[int, str]] = {}
    current = None
    for line in done.stdout.splitlines():
        if line.startswith("Dumping "):
            current = str(Path(line[len("Dumping ") :]).resolve())
            out[current] = {}
        match = _OFFSET.match(line)
        if match and current is not None:
            out[current][int(match.group(1))] = line
    return out


def _ours(paths, *, decoders) -> dict[str, dict[int, dict]]:
    out: dict[str, dict[int, dict]] = {}
    for obj in dump_paths([str(p) for p in paths], records=True, decoders=decoders):
        if obj["type"] in ("record", "control"):
            out.setdefault(str(Path(obj["file"]).resolve()), {})[obj["offset"]] = obj
    return out


def test_cluster_metadata_decoder_equals_kafka_on_the_log_its_snapshots_and_the_bootstrap(kafka_tools):
    files = sorted(METADATA.glob("*.log")) + sorted(METADATA.glob("*.checkpoint"))
    files.append(METADATA.parent / "bootstrap.checkpoint")
    assert len(files) == 5
    kafka = _kafka_lines(kafka_tools, files, "--cluster-metadata-decoder")
    ours = _ours(files, decoders=["cluster-metadata"])
    compared = {"record": 0, "control": 0}
    for name, lines in kafka.items():
        assert sorted(ours[name]) == sorted(lines), name
        for offset, line in lines.items():
            obj = ours[name][offset]
            if obj["type"] == "record":
                assert obj["payload"] == json.loads(line.split(" payload: ", 1)[1]), (name, offset)
            else:
                match = _CONTROL.search(line)
                assert match, line
                assert obj["payload"] == json.loads(match.group(2)), (name, offset)
            compared[obj["type"]] += 1
    # the log's leader change, and each snapshot's header and footer
    assert compared["control"] >= 5 and compared["record"] >= 40, compared


def test_dump_lists_the_snapshots_and_the_quorum_state():
    objs = list(dump_paths([str(METADATA)]))
    snapshots = [(o["endOffset"], o["epoch"]) for o in objs if o["type"] == "snapshot"]
    assert snapshots == [(18, 1), (21, 1)]
    (state,) = [o for o in objs if o["type"] == "quorumState"]
    assert json.loads((METADATA / "quorum-state").read_text()) == {
        k: v for k, v in state.items() if k not in ("type", "file")
    }


def _compare_coordinator_records(kafka_tools, files, decoder: str) -> int:
    """Kafka's "key: {...} payload: {...}" of every record against ours; the number compared."""
    kafka = _kafka_lines(kafka_tools, files, f"--{decoder}-decoder")
    ours = _ours(files, decoders=[decoder])
    compared = 0
    for name, lines in kafka.items():
        for offset, line in lines.items():
            if " key: " not in line:
                continue
            key_text, _, value_text = line.split(" key: ", 1)[1].partition(" payload: ")
            payload = ours[name][offset]["payload"]
            key = json.loads(key_text)
            assert payload["key"] == {"type": int(key["type"]), "data": key["data"]}, (name, offset)
            if value_text == "<DELETE>":
                assert payload["value"] is None
            else:
                value = json.loads(value_text)
                assert payload["value"] == {"version": int(value["version"]), "data": value["data"]}, (name, offset)
            compared += 1
    return compared


def test_offsets_decoder_equals_kafka_on_real_consumer_offsets_partitions(kafka_tools):
    old = [f for f in sorted(BROKER_DIRS.glob("*/__consumer_offsets-*/*.log")) if f.stat().st_size]
    assert _compare_coordinator_records(kafka_tools, old, "offsets") >= 200
    # Kafka 4.3.1's: a KIP-848 consumer group's and a share group's records (types 3 to 15)
    files = [COORDINATORS / "__consumer_offsets-0" / "00000000000000000000.log"]
    assert _compare_coordinator_records(kafka_tools, files, "offsets") >= 25
    types = {
        o["payload"]["key"]["type"]
        for o in dump_paths([str(f) for f in files], records=True, decoders=["offsets"])
        if o["type"] == "record"
    }
    assert {1, 3, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15} <= types


def test_transaction_log_and_share_group_state_decoders_equal_kafka(kafka_tools):
    txn = [COORDINATORS / "__transaction_state-0" / "00000000000000000000.log"]
    assert _compare_coordinator_records(kafka_tools, txn, "transaction-log") >= 7
    share = [COORDINATORS / "__share_group_state-0" / "00000000000000000000.log"]
    assert _compare_coordinator_records(kafka_tools, share, "share-group-state") >= 5


def test_share_partition_start_offsets_equal_what_kafkas_admin_reports():
    part = Partition.open(*LogFileSystem.for_path(str(COORDINATORS / "__share_group_state-0")))
    starts = share_partition_start_offsets(part.batches())
    expected = json.loads((COORDINATORS.parent / "expected.json").read_text())["shareGroup"]["startOffsets"]
    orders_id = topic_id(Partition.open(*LogFileSystem.for_path(str(COORDINATORS / "orders-0"))))
    assert starts == {("sg", orders_id, int(p)): offset for p, offset in expected.items()}
    # and consumed retention sees the share group beside the KIP-848 consumer group
    committed = read_committed_offsets(LogDir.open(str(COORDINATORS))).offsets
    groups = json.loads((COORDINATORS.parent / "expected.json").read_text())["consumerGroupCommitted"]
    assert committed == {
        **{("cg", "orders", int(p)): offset for p, offset in groups.items()},
        **{("sg", "orders", int(p)): offset for p, offset in expected.items()},
    }
