"""The `_schemas` topic replayed as Schema Registry replays it: registrations, soft and hard deletes."""

from __future__ import annotations

import json

import pytest

from kafkalog.codec.schema_registry import SchemaReference, SchemasTopicReader, read_schemas_topic
from kafkalog.errors import SchemaRegistryError, UndecodableValueError


def key(keytype: str, subject: str | None = None, version: int | None = None) -> bytes:
    fields: dict = {"keytype": keytype, "magic": 1 if keytype == "SCHEMA" else 0}
    if subject is not None:
        fields["subject"] = subject
    if version is not None:
        fields["version"] = version
    return json.dumps(fields).encode()


def schema(subject: str, version: int, schema_id: int, text: str = '"string"', **extra) -> tuple[bytes, bytes]:
    value = {"subject": subject, "version": version, "id": schema_id, "schema": text, "deleted": False, **extra}
    return key("SCHEMA", subject, version), json.dumps(value).encode()


def test_registrations_give_schemas_by_id_and_versions_by_subject():
    registry = read_schemas_topic(
        [
            (key("NOOP"), None),
            (key("CONFIG"), b'{"compatibilityLevel":"BACKWARD"}'),
            schema("orders-value", 1, 11, '{"type":"record","name":"O","fields":[]}'),
            schema("orders-value", 2, 12, 'syntax = "proto3";', schemaType="PROTOBUF"),
            (key("MODE", "orders-value"), b'{"mode":"READWRITE"}'),
        ]
    )
    assert registry.schema(11).schema_type == "AVRO"  # schemaType absent: Avro
    assert registry.schema(12).schema_type == "PROTOBUF"
    assert registry.latest("orders-value").schema.id == 12
    assert registry.version("orders-value", 1).schema.id == 11


def test_a_soft_deleted_version_still_decodes_by_id_and_a_hard_deleted_one_does_not():
    k1, v1 = schema("t-value", 1, 21)
    k2, v2 = schema("t-value", 2, 22)
    soft = json.dumps({**json.loads(v1), "deleted": True}).encode()
    registry = read_schemas_topic([(k1, v1), (k2, v2), (k1, soft), (k2, None)])
    assert registry.schema(21).id == 21  # soft-deleted: the id is still served
    assert registry.version("t-value", 1).deleted
    with pytest.raises(UndecodableValueError, match="schema id 22 is not in the registry"):
        registry.schema(22)
    with pytest.raises(SchemaRegistryError, match="no live version"):
        registry.latest("t-value")


def test_an_id_shared_by_two_subjects_lives_while_one_of_them_keeps_it():
    a, b = schema("a-value", 1, 5), schema("b-value", 3, 5)
    registry = read_schemas_topic([a, b, (a[0], None)])
    assert registry.schema(5).id == 5
    assert registry.latest("b-value").version == 3


def test_delete_subject_soft_deletes_up_to_its_version_and_clear_subject_drops_them():
    records = [schema("s", 1, 1), schema("s", 2, 2), schema("s", 3, 3)]
    reader = SchemasTopicReader()
    for k, v in records:
        reader.apply(k, v)
    reader.apply(key("DELETE_SUBJECT", "s"), b'{"subject":"s","version":2}')
    registry = reader.registry()
    assert [registry.version("s", n).deleted for n in (1, 2, 3)] == [True, True, False]
    assert registry.schema(1).id == 1
    reader.apply(key("CLEAR_SUBJECT", "s"), b'{"subject":"s"}')
    registry = reader.registry()
    with pytest.raises(UndecodableValueError):
        registry.schema(1)
    assert registry.latest("s").version == 3


def test_a_subject_in_another_context_does_not_answer_for_the_default_contexts_ids():
    registry = read_schemas_topic([schema(":.staging:orders-value", 1, 1)])
    with pytest.raises(UndecodableValueError):
        registry.schema(1)
    assert registry.latest(":.staging:orders-value").schema.id == 1


def test_references_are_resolved_transitively_dependencies_first():
    registry = read_schemas_topic(
        [
            schema("base", 1, 1),
            schema("mid", 1, 2, references=[{"name": "base.proto", "subject": "base", "version": 1}]),
            schema("top", 1, 3, references=[{"name": "mid.proto", "subject": "mid", "version": 1}]),
        ]
    )
    top = registry.schema(3)
    assert top.references == (SchemaReference("mid.proto", "mid", 1),)
    assert [(name, s.id) for name, s in registry.referenced(top)] == [("base.proto", 1), ("mid.proto", 2)]


@pytest.mark.parametrize(
    "record, what",
    [
        ((b"not json", None), "key is not JSON"),
        ((key("SURPRISE"), b"{}"), "unknown _schemas key type 'SURPRISE'"),
        ((key("SCHEMA", "s", 1), b'{"subject":"s","version":1,"schema":"x"}'), "no integer id"),
        ((key("SCHEMA", "s"), b"{}"), "'version' is missing"),
        ((None, b"{}"), "without a key"),
    ],
)
def test_a_record_the_registry_would_not_read_is_an_error_naming_the_record(record, what):
    with pytest.raises(SchemaRegistryError, match=f"_schemas record 1: .*{what}"):
        read_schemas_topic([schema("s", 1, 1), record])
