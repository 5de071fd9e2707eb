"""Keys and values of a records DataFrame decoded on executors (`mapInArrow`), into typed columns.

    registry = read_schemas_topic(...)          # or storage.schemas.load_schema_dir(...)
    df = decode_records(read_records(spark, log_dir, topics=["orders"]),
                        key=ValueFormat("string"),
                        value=ValueFormat("avro").for_topic("orders", is_key=False),
                        registry=registry, on_error="dead-letter")

The decoders (with the registry, and Protobuf schemas compiled once here on the driver) travel in
the task's closure; each executor builds its Avro readers and Protobuf classes once per schema id.
A key or value that does not decode fails the job with an UndecodableValueError naming topic,
partition and offset (``on_error="fail"``), or leaves the column null and says why in
``_decodeError`` (``on_error="dead-letter"``: the caller splits those rows off into a dead-letter
table). Nothing is dropped.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from ..codec.debezium import debezium_change, debezium_row_type
from ..codec.schema_registry import SchemaRegistry
from ..codec.value_format import ValueDecoder, ValueFormat
from ..codec.value_types import infer_json_type, merge_types, settle
from ..errors import KafkaLogError, UndecodableValueError
from ..storage.schemas import compile_protobuf_schemas

ON_ERROR = ("fail", "dead-letter")
ENVELOPES = ("debezium",)
DECODE_ERROR = "_decodeError"
OPERATION = "_operation"


def decode_records(
    df,
    key: ValueFormat | None = None,
    value: ValueFormat | None = None,
    *,
    registry: SchemaRegistry | None = None,
    on_error: str = "fail",
    envelope: str | None = None,
):
    """`df` (a records DataFrame: key, value, topic, partition, offset, ...) with `key` and `value`
    decoded by their formats (None: left as bytes). ``envelope="debezium"`` makes `value` the row a
    Debezium event carries and adds ``_operation`` (upsert or delete; a tombstone is a delete)."""
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema

    if on_error not in ON_ERROR:
        raise KafkaLogError(f"on_error must be one of {', '.join(ON_ERROR)}, not {on_error!r}")
    if envelope is not None and envelope not in ENVELOPES:
        raise KafkaLogError(f"unknown envelope {envelope!r}; known: {', '.join(ENVELOPES)}")
    if envelope is not None and value is None:
        raise KafkaLogError("a Debezium envelope needs a value format to decode the events with")
    if key is None and value is None:
        raise KafkaLogError("neither a key nor a value format: decoding would change nothing")
    formats = {"key": key, "value": value}
    missing = [column for column, fmt in formats.items() if fmt is not None and column not in df.columns]
    if missing:
        raise KafkaLogError(f"the DataFrame has no {' or '.join(missing)} column to decode (columns: {df.columns})")
    compiled = (
        compile_protobuf_schemas(registry)
        if registry is not None and any(f is not None and f.kind == "protobuf" for f in formats.values())
        else {}
    )
    decoders = {
        column: ValueDecoder(_with_json_type(df, column, fmt), registry, compiled)
        for column, fmt in formats.items()
        if fmt is not None
    }
    types = {column: d.arrow_type for column, d in decoders.items()}
    if envelope is not None:
        types["value"] = debezium_row_type(types["value"])

    fields = [
        T.StructField(f.name, from_arrow_type(types[f.name]) if f.name in types else f.dataType, True)
        for f in df.schema
    ]
    if envelope is not None:
        fields.append(T.StructField(OPERATION, T.StringType(), True))
    if on_error == "dead-letter":
        fields.append(T.StructField(DECODE_ERROR, T.StringType(), True))
    schema = T.StructType(fields)
    arrow_schema = to_arrow_schema(schema, timezone="UTC")  # mapInArrow passes timestamps in UTC

    def decode_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield _decode_batch(batch, decoders, types, envelope, on_error, arrow_schema)

    return df.mapInArrow(decode_batches, schema)


def json_format(spark, ddl: str) -> ValueFormat:
    """Plain JSON objects read into the struct of a Spark DDL string of fields (``"id BIGINT, name
    STRING"``), parsed by `spark` (a classic or a Connect session); other types: `ValueFormat`'s json_type."""
    from pyspark.sql.pandas.types import to_arrow_type

    return ValueFormat("json", json_type=to_arrow_type(spark.createDataFrame([], ddl).schema, timezone="UTC"))


def _decode_batch(
    batch: pa.RecordBatch,
    decoders: dict[str, ValueDecoder],
    types: dict[str, pa.DataType],
    envelope: str | None,
    on_error: str,
    schema: pa.Schema,
) -> pa.RecordBatch:
    errors: list[str | None] = [None] * batch.num_rows
    decoded: dict[str, pa.Array] = {}
    operations: list[str | None] = []
    for column, decoder in decoders.items():
        with_envelope = column == "value" and envelope is not None
        whole = None if with_envelope else _whole_column(decoder.format.kind, batch.column(column), types[column])
        if whole is not None:
            decoded[column] = whole
            continue
        values = []
        for row, data in enumerate(batch.column(column).to_pylist()):
            operation = None
            try:
                result = decoder.decode(data)
                if with_envelope:
                    operation, result = debezium_change(result)
            except UndecodableValueError as err:
                if on_error == "fail":
                    raise _located(err, batch, row, column) from None
                result = None
                errors[row] = errors[row] or f"{column}: {err}"
            values.append(result)
            if with_envelope:
                operations.append(operation)
        decoded[column] = pa.array(values, type=types[column])
    arrays = []
    for field in schema:
        if field.name in decoded:
            array = decoded[field.name]
        elif field.name == OPERATION:
            array = pa.array(operations, type=pa.string())
        elif field.name == DECODE_ERROR:
            array = pa.array(errors, type=pa.string())
        else:
            array = batch.column(field.name)
        arrays.append(array.cast(field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _whole_column(kind: str, column: pa.Array, arrow_type: pa.DataType) -> pa.Array | None:
    """Raw bytes as they are, UTF-8 strings by one Arrow cast (which checks the UTF-8), and JSON
    objects by Arrow's JSON reader (`_json_column`), without a Python value per row; None where that
    does not do (bad UTF-8, a value that is not a JSON object of the type: the column is then decoded
    row by row, which says which rows)."""
    if kind == "binary":
        return column
    if kind == "string":
        try:
            return column.cast(pa.string())
        except pa.ArrowInvalid:
            return None
    if kind == "json" and _json_readable(arrow_type):
        return _json_column(column, arrow_type)
    return None


# Types Arrow's JSON reader fills as `value_types.conform` does (numbers, booleans, strings, and
# structs and lists of them); a timestamp, decimal or binary field is left to the row-by-row decoder.
_JSON_LEAVES = (pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean, pa.types.is_string, pa.types.is_null)


def _json_readable(arrow_type: pa.DataType, top: bool = True) -> bool:
    if pa.types.is_struct(arrow_type):
        return all(_json_readable(field.type, False) for field in arrow_type)
    if top:
        return False  # the reader reads objects only
    if pa.types.is_list(arrow_type):
        return _json_readable(arrow_type.value_type, False)
    return any(test(arrow_type) for test in _JSON_LEAVES)


def _json_column(column: pa.Array, arrow_type: pa.StructType) -> pa.Array | None:
    """A column of JSON objects read as one newline-delimited document, nulls put back where they
    were; None when a value is not UTF-8, holds a line break or is blank, or the reader refuses the
    document or does not read one row per value (two objects in one value), so that each row is one value."""
    import pyarrow.compute as pc
    import pyarrow.json as pj

    present = column.filter(column.is_valid())
    if not len(present):
        return None
    try:
        present = present.cast(pa.string())  # checks the UTF-8, which Arrow's JSON reader does not
    except pa.ArrowInvalid:
        return None
    if pc.any(pc.match_substring_regex(present, r"[\r\n]|^\s*$")).as_py():
        return None
    options = pj.ParseOptions(explicit_schema=pa.schema(list(arrow_type)), unexpected_field_behavior="ignore")
    try:
        table = pj.read_json(pa.BufferReader("\n".join(present.to_pylist()).encode()), parse_options=options)
    except pa.ArrowInvalid:
        return None
    if table.num_rows != len(present):
        return None
    rows = pa.StructArray.from_arrays([table[f.name].combine_chunks() for f in arrow_type], fields=list(arrow_type))
    positions = pc.subtract(pc.cumulative_sum(column.is_valid().cast(pa.int64())), 1)
    return pc.if_else(
        column.is_valid(), rows.take(pc.max_element_wise(positions, 0)), pa.nulls(len(column), arrow_type)
    )


def _located(err: UndecodableValueError, batch: pa.RecordBatch, row: int, column: str) -> UndecodableValueError:
    where = {
        name: batch.column(name)[row].as_py() for name in ("topic", "partition", "offset") if name in batch.schema.names
    }
    located = UndecodableValueError(
        f"topic {where.get('topic')} partition {where.get('partition')}, {column}: {err}", offset=where.get("offset")
    )
    return located


def _with_json_type(df, column: str, fmt: ValueFormat) -> ValueFormat:
    """`fmt`, with plain JSON's type inferred from every value of `column` where none was given
    (one pass over the column on executors; values that are not JSON are left to decoding to report)."""
    from dataclasses import replace

    if fmt.kind != "json" or fmt.json_type is not None:
        return fmt

    def infer(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import json

        merged: pa.DataType = pa.null()
        for batch in batches:
            for data in batch.column(0).to_pylist():
                if data is None:
                    continue
                try:
                    merged = merge_types(merged, infer_json_type(json.loads(data)))
                except ValueError:
                    continue
        serialized = pa.schema([pa.field("t", merged)]).serialize().to_pybytes()
        yield pa.RecordBatch.from_pylist([{"type": serialized}], schema=pa.schema([("type", pa.binary())]))

    merged: pa.DataType = pa.null()
    for row in df.select(column).mapInArrow(infer, "type binary").collect():
        merged = merge_types(merged, pa.ipc.read_schema(pa.py_buffer(row["type"])).field("t").type)
    return replace(fmt, json_type=settle(merged))
