"""Schemas from a directory of files named by id, and Protobuf schemas compiled by protoc."""

from __future__ import annotations

import json

import pytest

from kafkalog.codec.schema_registry import RegisteredSchema, SchemaRegistry, read_schemas_topic
from kafkalog.errors import SchemaRegistryError
from kafkalog.storage.schemas import compile_protobuf, load_schema_dir


def test_a_schema_directory_gives_each_file_its_id_and_type(tmp_path):
    (tmp_path / "1.avsc").write_text('"string"')
    (tmp_path / "2.proto").write_text('syntax = "proto3"; message M { int32 a = 1; }')
    (tmp_path / "3.json").write_text('{"type": "integer"}')
    registry = load_schema_dir(str(tmp_path))
    assert {i: s.schema_type for i, s in registry.by_id.items()} == {1: "AVRO", 2: "PROTOBUF", 3: "JSON"}
    assert registry.schema(3).schema == '{"type": "integer"}'


@pytest.mark.parametrize("name", ["orders.avsc", "1.avro", "notes.txt"])
def test_a_file_not_named_by_id_and_type_is_an_error_not_skipped(tmp_path, name):
    (tmp_path / "1.avsc").write_text('"string"')
    (tmp_path / name).write_text("x")
    with pytest.raises(SchemaRegistryError, match=f"{name}: not a schema file"):
        load_schema_dir(str(tmp_path))


def test_protoc_errors_name_the_schema_id_and_references_stay_in_their_directory():
    bad = RegisteredSchema(4, "PROTOBUF", 'syntax = "proto3"; message M { int32 a = 1 }')
    with pytest.raises(SchemaRegistryError, match="protoc cannot compile schema id 4: .*schema id 4:1:"):
        compile_protobuf(SchemaRegistry(schemas=[bad]), bad)


def test_a_reference_name_cannot_leave_the_compile_directory():
    def record(subject, schema_id, refs=()):
        key = json.dumps({"keytype": "SCHEMA", "subject": subject, "version": 1}).encode()
        value = {"id": schema_id, "schema": "x", "schemaType": "PROTOBUF", "references": list(refs)}
        return key, json.dumps(value).encode()

    registry = read_schemas_topic(
        [record("dep", 2), record("top", 1, [{"name": "../escape.proto", "subject": "dep", "version": 1}])]
    )
    with pytest.raises(SchemaRegistryError, match="reference name '../escape.proto' leaves its directory"):
        compile_protobuf(registry, registry.schema(1))
    cyclic = read_schemas_topic([record("self", 3, [{"name": "self.proto", "subject": "self", "version": 1}])])
    with pytest.raises(SchemaRegistryError, match="references itself"):
        compile_protobuf(cyclic, cyclic.schema(3))


def test_the_schemas_partition_of_a_log_dir_is_replayed_and_a_bad_record_is_located(tmp_path):
    from kafkalog.codec.records import Record
    from kafkalog.storage.fs import LogFileSystem
    from kafkalog.storage.log_writer import PartitionWriter
    from kafkalog.storage.schemas import read_schemas_partition

    key = json.dumps({"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1}).encode()
    value = json.dumps({"subject": "s", "version": 1, "id": 9, "schema": '"string"'}).encode()
    fs = LogFileSystem.for_path(str(tmp_path))[0]
    writer = PartitionWriter(fs, str(tmp_path), "_schemas", 0, segment_bytes=1 << 20, segment_ms=1 << 40, now_ms=1)
    writer.append_records([Record(0, 1, key, value), Record(1, 1, b'{"keytype":"NOOP","magic":0}', None)])
    writer.append_records([Record(2, 1, b"{broken", None)])
    writer.close()
    with pytest.raises(SchemaRegistryError) as raised:
        read_schemas_partition(str(tmp_path))
    assert raised.value.offset == 2 and raised.value.file.endswith("_schemas-0/00000000000000000000.log")
    assert "key is not JSON" in raised.value.message


def test_a_transactional_batch_in_the_schemas_partition_is_refused(tmp_path):
    from kafkalog.codec.records import Record
    from kafkalog.storage.fs import LogFileSystem
    from kafkalog.storage.log_writer import PartitionWriter
    from kafkalog.storage.schemas import read_schemas_partition

    fs = LogFileSystem.for_path(str(tmp_path))[0]
    writer = PartitionWriter(fs, str(tmp_path), "_schemas", 0, segment_bytes=1 << 20, segment_ms=1 << 40, now_ms=1)
    noop = Record(0, 1, b'{"keytype":"NOOP","magic":0}', None)
    writer.append_records([noop], producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True)
    writer.close()
    with pytest.raises(SchemaRegistryError, match="a transactional batch in the schemas topic") as raised:
        read_schemas_partition(str(tmp_path))
    assert raised.value.offset == 0
