"""Schemas from a reachable Schema Registry (`HttpSchemaRegistry`), against a small HTTP server in the
test that answers as Schema Registry's REST API does (its paths, its JSON, its error bodies)."""

from __future__ import annotations

import json
import pickle
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

import pytest

from kafkalog.codec.confluent import frame
from kafkalog.codec.value_format import ValueDecoder, ValueFormat
from kafkalog.errors import ConfigError, SchemaRegistryError, UndecodableValueError
from kafkalog.storage.schemas import HttpSchemaRegistry, compile_protobuf_schemas
from tests.codec.test_value_format import ADDRESS, COMMON_PROTO, ORDER, ORDER_V1, ORDERS_PROTO, avro_bytes

ADDRESS_REF = [{"name": "shop.Address", "subject": "address", "version": 1}]
COMMON_REF = [{"name": "common.proto", "subject": "common", "version": 1}]
# (subject, version, id, schema text, schemaType or None for AVRO, references)
VERSIONS = [
    ("address", 1, 1, json.dumps(ADDRESS), None, []),
    ("orders-value", 1, 2, json.dumps(ORDER_V1), None, ADDRESS_REF),
    ("common", 1, 10, COMMON_PROTO, "PROTOBUF", []),
    ("pb-orders-value", 1, 11, ORDERS_PROTO, "PROTOBUF", COMMON_REF),
]


def _schema_body(schema: str, schema_type: str | None, refs: list) -> dict:
    # as the registry answers: schemaType only where not AVRO, references only where there are some
    body: dict = {"schema": schema}
    if schema_type:
        body["schemaType"] = schema_type
    if refs:
        body["references"] = refs
    return body


class Registry(BaseHTTPRequestHandler):
    requests: list[str] = []
    failing = False  # answer every request with the registry's 500

    def do_GET(self):  # noqa: N802 (http.server's name)
        type(self).requests.append(self.path)
        parts = [unquote(p) for p in self.path.strip("/").split("/")]
        found = None
        if self.failing:
            return self._send(500, {"error_code": 50001, "message": "Error in the backend data store"})
        if parts[:2] == ["schemas", "ids"] and len(parts) == 3:
            found = next((_schema_body(*v[3:]) for v in VERSIONS if str(v[2]) == parts[2]), None)
            missing = {"error_code": 40403, "message": f"Schema {parts[2]} not found"}
        elif parts[0] == "subjects" and len(parts) == 4 and parts[2] == "versions":
            mine = [v for v in VERSIONS if v[0] == parts[1]]
            pick = mine[-1:] if parts[3] == "latest" else [v for v in mine if str(v[1]) == parts[3]]
            if pick:
                subject, version, schema_id, *rest = pick[0]
                found = {"subject": subject, "version": version, "id": schema_id, **_schema_body(*rest)}
            missing = {"error_code": 40402 if mine else 40401, "message": "Version not found."}
        else:
            missing = {"error_code": 404, "message": "HTTP 404 Not Found"}
        self._send(200, found) if found is not None else self._send(404, missing)

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):  # quiet
        pass


@pytest.fixture
def registry_url():
    Registry.requests, Registry.failing = [], False
    server = ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_avro_values_decode_with_schemas_asked_once_per_id(registry_url):
    registry = HttpSchemaRegistry(registry_url + "/")
    decoder = ValueDecoder(ValueFormat("avro").for_topic("orders", is_key=False), registry)
    named: dict = {}
    import fastavro

    fastavro.parse_schema(ADDRESS, named_schemas=named)
    value = frame(2, avro_bytes(ORDER_V1, ORDER, named))
    assert [decoder.decode(value) for _ in range(3)][2]["ship_to"] == {"city": "Lyon"}
    # the reader schema by subject (latest), its reference by subject and version; then nothing more
    assert Registry.requests == ["/subjects/orders-value/versions/latest", "/subjects/address/versions/1"]
    # an id the registry does not know is a value that does not decode (a dead letter), not a failed run
    value, why = decoder.decode_or_error(frame(99, b"\x00"))
    assert value is None and why == f"schema id 99 is not in the Schema Registry at {registry_url}"
    assert Registry.requests[-1] == "/schemas/ids/99"


def test_protobuf_schemas_are_compiled_as_values_name_them(registry_url):
    registry = HttpSchemaRegistry(registry_url)
    compiled = compile_protobuf_schemas(registry)
    decoder = ValueDecoder(ValueFormat("protobuf", schema_id=11), registry, compiled)
    assert decoder.decode(frame(11, b"\x0a\x03o-1", (0,)))["id"] == "o-1"
    assert Registry.requests == ["/schemas/ids/11", "/subjects/common/versions/1"]
    assert list(compiled) == [11]
    # Spark ships the decoder to its executors: it pickles with what it has asked for
    shipped = pickle.loads(pickle.dumps(decoder))
    assert shipped.decode(frame(11, b"\x0a\x03o-2", (0,)))["id"] == "o-2"
    assert len(Registry.requests) == 2


def test_a_registry_that_fails_or_cannot_be_reached_is_one_line_naming_it(registry_url):
    Registry.failing = True
    with pytest.raises(SchemaRegistryError) as failed:
        HttpSchemaRegistry(registry_url).schema(1)
    assert str(failed.value) == (
        f"the Schema Registry at {registry_url}: GET /schemas/ids/1: HTTP 500 Error in the backend data store"
    )
    with pytest.raises(SchemaRegistryError, match="has no version latest of 'nope-value'"):
        Registry.failing = False
        HttpSchemaRegistry(registry_url).latest("nope-value")
    closed = "http://127.0.0.1:9"  # the discard port: nothing listens there
    unreachable = f"^cannot reach the Schema Registry at {closed}: GET /schemas/ids/1: "
    with pytest.raises(SchemaRegistryError, match=unreachable):
        HttpSchemaRegistry(closed, timeout=5).schema(1)
    with pytest.raises(UndecodableValueError):
        HttpSchemaRegistry(registry_url).schema(7)


def test_the_export_option_takes_one_source_of_schemas_and_an_http_url():
    from kafkalog.operations.decoding import Decoding, schema_registry

    with pytest.raises(ConfigError, match="one of --schema-dir or --schema-registry, not several"):
        Decoding(value_format="avro", schema_dir="/s", schema_registry_url="http://r:8081")
    with pytest.raises(ConfigError, match="expected an http:// or https:// URL"):
        Decoding(value_format="avro", schema_registry_url="r:8081")
    with pytest.raises(ConfigError, match="--schema-registry is for avro, protobuf or json-schema"):
        Decoding(value_format="json", schema_registry_url="http://r:8081")
    registry = schema_registry(Decoding(value_format="avro", schema_registry_url="http://r:8081"), "/no/log/dir")
    assert isinstance(registry, HttpSchemaRegistry) and registry.url == "http://r:8081"
