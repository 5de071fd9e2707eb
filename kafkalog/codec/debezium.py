"""Debezium's change-event envelope: what a decoded value says happened to its key's row.

A Debezium value is ``{"before", "after", "source", "op", "ts_ms", ...}``; with the JSON converter's
``schemas.enable=true`` it comes wrapped as ``{"schema": ..., "payload": {...}}``. ``op`` is ``c``
(create), ``r`` (read, a snapshot), ``u`` (update) or ``d`` (delete). After a delete Debezium writes
a tombstone (the key with a null value) so that compaction can drop the key: a null value is a delete
too. ``t`` (truncate) and ``m`` (message) events concern no one key, and are refused.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..errors import KafkaLogError, UndecodableValueError

UPSERT = "upsert"
DELETE = "delete"
_UPSERT_OPS = frozenset({"c", "r", "u"})


def debezium_change(value: Any) -> tuple[str, Any]:
    """(UPSERT, the row after) or (DELETE, the row before, None for a tombstone) of a decoded value."""
    if value is None:
        return DELETE, None
    envelope = _unwrap(value)
    if not isinstance(envelope, dict) or "op" not in envelope:
        raise UndecodableValueError("not a Debezium change event: no 'op' field")
    op = envelope["op"]
    if op in _UPSERT_OPS:
        if envelope.get("after") is None:
            raise UndecodableValueError(f"Debezium event with op {op!r} and no 'after' row")
        return UPSERT, envelope["after"]
    if op == "d":
        return DELETE, envelope.get("before")
    raise UndecodableValueError(f"Debezium event with op {op!r}: only c, r, u and d change one key's row")


def debezium_row_type(envelope: pa.DataType) -> pa.DataType:
    """The type of the rows inside envelopes of type `envelope` (its `after` field)."""
    if pa.types.is_struct(envelope) and envelope.get_field_index("payload") >= 0:
        if envelope.get_field_index("schema") >= 0:
            envelope = envelope.field("payload").type
    if not pa.types.is_struct(envelope) or envelope.get_field_index("after") < 0:
        raise KafkaLogError(f"not a Debezium envelope type (no 'after' field): {envelope}")
    return envelope.field("after").type


def _unwrap(value: Any) -> Any:
    if isinstance(value, dict) and "payload" in value and "schema" in value and "op" not in value:
        return value["payload"]
    return value
