"""Key files of a purge: text, hex and base64 forms, and errors that name the line but not the key."""

from __future__ import annotations

import pytest

from kafkalog.storage.keylist import KeyListError, parse_key, parse_key_lines, read_key_file


def test_written_forms():
    assert parse_key("alice@example.com") == b"alice@example.com"
    assert parse_key("hex:00ff10") == b"\x00\xff\x10"
    assert parse_key("hex:") == b""
    assert parse_key("base64:AAAAAQ==") == b"\x00\x00\x00\x01"
    assert parse_key("text:hex:zz") == b"hex:zz"
    assert parse_key(" é ") == " é ".encode()  # spaces are part of a key
    for bad in ("hex:abc", "hex:zz", "base64:***"):
        with pytest.raises(ValueError):
            parse_key(bad)


def test_lines_crlf_bom_and_blank_lines():
    data = b"\xef\xbb\xbfalice\r\n\nhex:626f62\nbase64:Y2Fyb2w=\r\n"
    assert parse_key_lines(data) == [b"alice", b"bob", b"carol"]


def test_a_bad_line_is_named_by_number_and_position_never_by_content(tmp_path):
    path = tmp_path / "keys.txt"
    path.write_bytes(b"alice\nbob\nhex:secret-person\n")
    with pytest.raises(KeyListError) as info:
        read_key_file(str(path))
    err = info.value
    assert (err.file, err.position) == (str(path), 10) and "line 3" in str(err)
    assert "secret-person" not in str(err)
    path.write_bytes(b"ok\n\xff\xfe\n")
    with pytest.raises(KeyListError, match="line 2: not UTF-8"):
        read_key_file(str(path))
    with pytest.raises(KeyListError, match="no such key file"):
        read_key_file(str(tmp_path / "absent.txt"))


def test_a_line_of_only_whitespace_is_refused_and_a_key_of_spaces_has_its_forms():
    """Kafka takes any bytes as a key, but a line of spaces or tabs is likelier a stray line than a
    key: refused, naming the line. Such a key is written text: or hex:; the empty key hex: or base64:."""
    for data in (b"alice\n   \nbob\n", b"alice\n\t\r\nbob\n"):
        with pytest.raises(KeyListError, match="line 2: only whitespace") as info:
            parse_key_lines(data, file="keys.txt")
        assert info.value.position == 6 and info.value.file == "keys.txt"
    assert parse_key_lines(b"text:  \nhex:2020\nhex:\nbase64:\n\n") == [b"  ", b"  ", b"", b""]
    for blank in ("", " ", "\t"):  # the same in a table's string column
        with pytest.raises(ValueError, match="only whitespace"):
            parse_key(blank)
