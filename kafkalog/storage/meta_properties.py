"""`meta.properties`: the identity a broker writes into each of its log directories.

Not part of the log format, but a broker refuses to start on a log directory whose file it cannot
read. The rules are Kafka's (`MetaProperties`, `MetaPropertiesVersion`, `MetaPropertiesEnsemble` in
`metadata/.../properties` since 3.7; `RawMetaProperties` in 2.8-3.6, `BrokerMetadataCheckpoint`
before):

* ``version`` 0 (ZooKeeper brokers, and KRaft clusters migrated from ZooKeeper): ``broker.id`` and
  ``cluster.id`` are both optional since 2.8 (brokers up to 2.7 required ``version`` and a
  non-negative ``broker.id``; ``cluster.id`` appeared in 0.10.1);
* ``version`` 1 (KRaft, written by `kafka-storage format`): ``node.id`` and ``cluster.id`` are required;
* either version may hold ``directory.id`` (3.7+, JBOD in KRaft): a base64url UUID that is not one
  of the reserved ids (most significant 64 bits 0, least significant below 100).

Kafka reads the file with `java.util.Properties.load` (so a value keeps trailing blanks, which
`Integer.parseInt` then refuses), parses ``version`` after trimming it and the ids without. A file
without ``version`` is read as version 0 by Kafka 2.8 and later.

`check_meta_properties(data)` returns what it could read and every problem found, each with its
severity and the byte position of its line; `read_meta_properties` raises on the first error.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass

from ..config import load_properties
from ..errors import LogDirError

META_PROPERTIES = "meta.properties"
VERSION, BROKER_ID, NODE_ID, CLUSTER_ID, DIRECTORY_ID = "version", "broker.id", "node.id", "cluster.id", "directory.id"
KNOWN_KEYS = (VERSION, BROKER_ID, NODE_ID, CLUSTER_ID, DIRECTORY_ID)

ERROR, WARNING = "error", "warning"

_INT = re.compile(r"[+-]?[0-9]+")  # Integer.parseInt, ASCII digits
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_BASE64URL = re.compile(r"([A-Za-z0-9_-]*)(=*)")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")  # \t \n \f \r are whitespace to Properties


@dataclass(frozen=True)
class MetaProperties:
    """A readable meta.properties. `node_id` is `broker.id` in version 0, `node.id` in version 1."""

    version: int
    node_id: int | None
    cluster_id: str | None
    directory_id: str | None


@dataclass(frozen=True)
class MetaPropertiesIssue:
    severity: str  # ERROR: Kafka refuses the file (or no Kafka wrote it); WARNING: some Kafka versions cope
    message: str
    position: int | None = None  # byte position of the line concerned


def read_meta_properties(data: bytes, *, file: str | None = None) -> MetaProperties:
    """The file's content; LogDirError naming `file` and the line's byte position on the first error."""
    meta, issues = check_meta_properties(data)
    for issue in issues:
        if issue.severity == ERROR:
            raise LogDirError(f"meta.properties: {issue.message}", file=file, position=issue.position)
    assert meta is not None
    return meta


def check_meta_properties(data: bytes) -> tuple[MetaProperties | None, list[MetaPropertiesIssue]]:
    """What Kafka would read from `data`, and every problem of it. The MetaProperties is None when
    an error leaves nothing Kafka would accept."""
    issues: list[MetaPropertiesIssue] = []

    def error(message: str, position: int | None = None) -> None:
        issues.append(MetaPropertiesIssue(ERROR, message, position))

    def warning(message: str, position: int | None = None) -> None:
        issues.append(MetaPropertiesIssue(WARNING, message, position))

    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as err:
        error(f"not a text file: byte {err.start} is not valid UTF-8 (Kafka writes the file in ASCII)", err.start)
        return None, issues
    control = _CONTROL.search(text)
    if control is not None:
        at = len(text[: control.start()].encode("utf-8"))
        error(f"not a text file: control character {control.group()!r} at byte {at}", at)
        return None, issues
    try:
        props = load_properties(text)
    except ValueError as err:
        error(str(err.args[0]), err.args[1] if len(err.args) > 1 else None)
        return None, issues
    if not any(k in props for k in KNOWN_KEYS):
        error(
            "holds none of version, broker.id, node.id, cluster.id: not a meta.properties Kafka wrote"
            + ("" if props else " (the file is empty or only comments)")
        )
        return None, issues

    ok = True
    if VERSION not in props:
        warning("no version: Kafka 2.8 and later read the file as version 0, earlier brokers refuse it")
        version = 0
    else:
        raw, pos = props[VERSION]
        number = _parse_int(raw.strip())
        if number is None:
            error(f"version {raw!r} is not a number; Kafka refuses the file", pos)
            return None, issues
        if number not in (0, 1):
            error(f"unknown version {number}; Kafka knows versions 0 and 1 and refuses the file", pos)
            return None, issues
        version = number

    node_id = None
    id_key = BROKER_ID if version == 0 else NODE_ID
    if id_key in props:
        raw, pos = props[id_key]
        node_id = _parse_int(raw)
        if node_id is None:
            error(f"{id_key} {raw!r} is not a base-10 int32; Kafka refuses the file", pos)
            ok = False
        elif node_id < 0:
            error(f"{id_key} {node_id} is negative: no broker has a negative id", pos)
            ok = False
    elif version == 0:
        warning(
            "version 0 without broker.id: Kafka 2.8 and later take the id from the broker's configuration, "
            "earlier brokers refuse the file"
        )
    else:
        error("version 1 without node.id; Kafka refuses the file")
        ok = False

    cluster_id = None
    if CLUSTER_ID in props:
        cluster_id, pos = props[CLUSTER_ID]
        if not cluster_id.strip():
            error("cluster.id is empty; a broker refuses it as not its cluster's id", pos)
            ok = False
        elif _uuid_problem(cluster_id) is not None:
            warning(
                f"cluster.id {cluster_id!r} is not the 22-character base64url UUID Kafka generates "
                f"({_uuid_problem(cluster_id)})",
                pos,
            )
    elif version == 1:
        error("version 1 without cluster.id; Kafka refuses the file")
        ok = False

    directory_id = None
    if DIRECTORY_ID in props:
        directory_id, pos = props[DIRECTORY_ID]
        problem = _uuid_problem(directory_id)
        if problem is not None:
            error(f"directory.id {directory_id!r} is not a UUID ({problem}); Kafka refuses the file", pos)
            ok = False
        elif _reserved_directory_id(directory_id):
            error(
                f"directory.id {directory_id!r} is one of Kafka's reserved directory ids; Kafka refuses the file", pos
            )
            ok = False
    meta = MetaProperties(version, node_id, cluster_id, directory_id) if ok else None
    return meta, issues


def _parse_int(text: str) -> int | None:
    """Integer.parseInt: an optional sign and decimal digits, within int32; None otherwise."""
    if not _INT.fullmatch(text):
        return None
    value = int(text)
    return value if _INT32_MIN <= value <= _INT32_MAX else None


def _uuid_bytes(text: str) -> bytes | None:
    """Uuid.fromString: at most 24 characters of base64url (padding optional) decoding to 16 bytes."""
    if len(text) > 24:
        return None
    m = _BASE64URL.fullmatch(text)
    if m is None:
        return None
    core, padding = m.groups()
    missing = -len(core) % 4
    if len(core) % 4 == 1 or (padding and len(padding) != missing):
        return None
    decoded = base64.urlsafe_b64decode(core + "=" * missing)
    return decoded if len(decoded) == 16 else None


def _uuid_problem(text: str) -> str | None:
    if len(text) > 24:
        return f"{len(text)} characters, at most 24"
    if _BASE64URL.fullmatch(text) is None:
        return "characters outside base64url"
    if _uuid_bytes(text) is None:
        return "does not decode to 16 bytes"
    return None


def _reserved_directory_id(text: str) -> bool:
    """DirectoryId.reserved: most significant 64 bits zero and least significant below 100."""
    raw = _uuid_bytes(text)
    return raw is not None and int.from_bytes(raw[:8], "big") == 0 and int.from_bytes(raw[8:], "big", signed=True) < 100
