"""The keys a purge erases, as an operator writes them: one key per line of a text file.

    alice@example.com        the line's UTF-8 bytes (without the line break; spaces count)
    hex:00000001             bytes in hexadecimal
    base64:AAAAAQ==          bytes in standard base64
    text:hex:abc             the rest of the line as UTF-8: a text key that starts like a prefix

Empty lines are skipped. A line of only whitespace (spaces, tabs) is refused: Kafka takes any
bytes as a key, spaces too, but such a line is far likelier a stray one than a key, and a purge
must erase what was meant, so a key of whitespace is written `text:` then the spaces, or in hex:
(`hex:20`). The empty key, valid in Kafka (zero bytes, not a null key), is written `hex:` or
`base64:` only. The same forms are read from a string column of a table (where an empty or
whitespace-only value is refused likewise); a binary column holds the key bytes themselves.
"""

from __future__ import annotations

import base64
import binascii

from ..errors import KafkaLogError
from .fs import LogFileSystem

KEY_FORMATS = ("text", "parquet", "csv", "delta")  # a key file, or a table with a `key` column
DEFAULT_REASON = "erasure request"  # the ledger's reason for a key that gives none


class KeyListError(KafkaLogError):
    """A key that does not parse; names the file, the line and its byte position."""


def parse_key(text: str) -> bytes:
    """A key's bytes from its written form; ValueError when a hex or base64 form is malformed, or a
    plain form is empty or whitespace (see the module's docstring)."""
    if text.startswith("hex:"):
        try:
            return binascii.unhexlify(text[4:])
        except binascii.Error:
            raise ValueError("not an even number of hexadecimal digits after 'hex:'") from None
    if text.startswith("base64:"):
        try:
            return base64.b64decode(text[7:], validate=True)
        except binascii.Error:
            raise ValueError("not valid base64 after 'base64:'") from None
    if text.startswith("text:"):
        return text[5:].encode("utf-8")
    if not text.strip():
        raise ValueError(
            "only whitespace: write a key of spaces as text:<the spaces> or hex:20..., the empty key as hex:, "
            "or delete the line"
        )
    return text.encode("utf-8")


def parse_key_lines(data: bytes, file: str | None = None) -> list[bytes]:
    """The keys of a key file's bytes, in file order. Errors name the line, never its content:
    a key is what the purge is meant to make disappear."""
    keys = []
    position = 3 if data.startswith(b"\xef\xbb\xbf") else 0  # a UTF-8 byte order mark is not part of a key
    for number, raw in enumerate(data[position:].split(b"\n"), start=1):
        line = raw[:-1] if raw.endswith(b"\r") else raw
        if line:
            try:
                keys.append(parse_key(line.decode("utf-8")))
            except UnicodeDecodeError:
                raise KeyListError(
                    f"line {number}: not UTF-8 text (write binary keys as hex: or base64:)",
                    file=file,
                    position=position,
                ) from None
            except ValueError as err:
                raise KeyListError(f"line {number}: {err}", file=file, position=position) from None
        position += len(raw) + 1
    return keys


def read_key_file(path_or_uri: str) -> list[bytes]:
    fs, path = LogFileSystem.for_path(path_or_uri)
    if not fs.exists(path):
        raise KeyListError("no such key file", file=path)
    return parse_key_lines(fs.read_bytes(path), file=path)
