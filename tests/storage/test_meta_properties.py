"""meta.properties as Kafka reads it (MetaProperties, MetaPropertiesVersion, MetaPropertiesEnsemble),
and `validate`'s `meta_properties.parse` findings."""

from __future__ import annotations

import shutil

import pytest

from kafkalog.cli import main
from kafkalog.errors import LogDirError
from kafkalog.operations.generate import generate, preset
from kafkalog.operations.validate import validate_paths
from kafkalog.storage.logdir import LogDir
from kafkalog.storage.meta_properties import (
    MetaProperties,
    check_meta_properties,
    load_properties,
    read_meta_properties,
)

from ..conftest import REAL_FIXTURES

BROKERS = REAL_FIXTURES / "broker-dirs"
REAL_META = sorted(BROKERS.glob("*/meta.properties"))

CLUSTER = "P4mWrUMKRvm3AylnZYNBaQ"
DIRECTORY = "7Dcvk0ffSRyW43vMnnNsPA"
V1 = f"#\n#Thu Jan 11 10:00:00 UTC 2024\nnode.id=3\ndirectory.id={DIRECTORY}\nversion=1\ncluster.id={CLUSTER}\n"


def issues(text: str | bytes) -> list[tuple[str, str]]:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return [(i.severity, i.message) for i in check_meta_properties(data)[1]]


def test_the_real_brokers_files_are_clean():
    assert len(REAL_META) >= 5
    for path in REAL_META:
        meta, found = check_meta_properties(path.read_bytes())
        assert found == [], path
        assert meta.version == 0 and meta.node_id is not None and meta.node_id >= 0, path
    assert read_meta_properties((BROKERS / "kafka-3.1.0" / "meta.properties").read_bytes()) == MetaProperties(
        0, 0, "P4mWrUMKRvm3AylnZYNBaQ", None
    )
    # confluent 5.1.2 wrote no cluster.id
    assert read_meta_properties((BROKERS / "confluent-5.1.2-lz4" / "meta.properties").read_bytes()) == MetaProperties(
        0, 1001, None, None
    )


def test_validate_finds_nothing_to_say_about_the_real_files():
    for path in REAL_META:
        report = validate_paths([str(path.parent)])
        assert report.counts["meta_properties"] == 1
        assert not [f for f in report.findings if f.check == "meta_properties.parse"], path
        assert not validate_paths([str(path)]).findings, path


def test_a_generated_log_dir_has_a_clean_meta_properties(tmp_path):
    generate(str(tmp_path / "logs"), preset("small", seed=1))
    assert LogDir.open(str(tmp_path / "logs")).read_meta().version == 0
    assert issues((tmp_path / "logs" / "meta.properties").read_bytes()) == []


def test_version_1_as_kafka_storage_format_writes_it():
    assert read_meta_properties(V1.encode()) == MetaProperties(1, 3, CLUSTER, DIRECTORY)
    assert issues(V1) == []


@pytest.mark.parametrize(
    "text, expected",
    [
        ("version=0\nbroker.id : 5\n", MetaProperties(0, 5, None, None)),  # ':' and blanks around it
        ("version 0\nbroker.id\t7\n", MetaProperties(0, 7, None, None)),  # a blank separates too
        ("version=0\r\nbroker.id=\\u0031\\u0032\r\n", MetaProperties(0, 12, None, None)),  # escapes, CRLF
        ("version=0\nbroker.id=1\ncluster.id=P4mWrUMKRv\\\n    m3AylnZYNBaQ\n", MetaProperties(0, 1, CLUSTER, None)),
        (
            "! comment\n   # another\n\nversion= 1 \nnode.id=+4\ncluster.id=" + CLUSTER,
            MetaProperties(1, 4, CLUSTER, None),
        ),
        ("version=0\nbroker.id=1\nbroker.id=2\n", MetaProperties(0, 2, None, None)),  # the last one wins
        ("version=1\nnode.id=3\ncluster.id=" + CLUSTER + "\nbroker.id=junk\n", MetaProperties(1, 3, CLUSTER, None)),
    ],
)
def test_properties_are_read_as_java_reads_them(text, expected):
    assert read_meta_properties(text.encode()) == expected
    assert issues(text) == []


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "none of version, broker.id"),
        (b"# only a comment\n", "none of version, broker.id"),
        (b"hello world\nfoo=bar\n", "none of version, broker.id"),
        (b"version=0\nbroker.id=1\xff\n", "not valid UTF-8"),
        (b"\x00\x01\x02version=0\nbroker.id=1", "control character"),
        (b"version=2\nnode.id=1\ncluster.id=" + CLUSTER.encode(), "unknown version 2"),
        (b"version=-1\nbroker.id=1", "unknown version -1"),
        (b"version=one\nbroker.id=1", "version 'one' is not a number"),
        (b"version=1\ncluster.id=" + CLUSTER.encode(), "version 1 without node.id"),
        (b"version=1\nnode.id=1\n", "version 1 without cluster.id"),
        (b"version=1\nnode.id=x1\ncluster.id=" + CLUSTER.encode(), "node.id 'x1' is not a base-10 int32"),
        (b"version=1\nnode.id=2147483648\ncluster.id=" + CLUSTER.encode(), "node.id '2147483648' is not"),
        (b"version=0\nbroker.id=0 \n", "broker.id '0 ' is not a base-10 int32"),  # Integer.parseInt does not trim
        (b"version=0\nbroker.id=-3\n", "broker.id -3 is negative"),
        (b"version=0\nbroker.id=1\ncluster.id=\n", "cluster.id is empty"),
        (b"version=0\nbroker.id=1\ndirectory.id=not-a-uuid!\n", "directory.id 'not-a-uuid!' is not a UUID"),
        (b"version=0\nbroker.id=1\ndirectory.id=AAAA\n", "does not decode to 16 bytes"),
        (b"version=0\nbroker.id=1\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAAAAAAAA\n", "at most 24"),
        (b"version=0\nbroker.id=1\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\n", "reserved"),  # MIGRATING (0, 0)
        (b"version=0\nbroker.id=1\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAQ\n", "reserved"),  # UNASSIGNED (0, 1)
        (b"version=0\nbroker.id=\\u00zz\n", "malformed \\uxxxx"),
    ],
)
def test_garbage_is_an_error(data, message):
    found = issues(data)
    assert any(sev == "error" and message in text for sev, text in found), found
    with pytest.raises(LogDirError, match="meta.properties: ") as err:
        read_meta_properties(data, file="/x/meta.properties")
    assert err.value.file == "/x/meta.properties"


@pytest.mark.parametrize(
    "text, message",
    [
        ("broker.id=1\ncluster.id=" + CLUSTER, "no version"),
        ("version=0\ncluster.id=" + CLUSTER, "version 0 without broker.id"),
        ("version=0\nbroker.id=1\ncluster.id=my-cluster", "not the 22-character base64url UUID"),
    ],
)
def test_what_only_some_kafka_versions_accept_is_a_warning(text, message):
    found = issues(text)
    assert [sev for sev, _ in found] == ["warning"] and message in found[0][1]
    read_meta_properties(text.encode())  # no error


def test_findings_name_the_byte_position_of_their_line():
    data = "#\n#caf\u00e9 time\nversion=0\nbroker.id=abc\n".encode()
    _, found = check_meta_properties(data)
    assert [(i.severity, i.position) for i in found] == [("error", data.index(b"broker.id"))]
    props = load_properties(data.decode())
    assert props["version"] == ("0", data.index(b"version"))


def test_validate_reports_a_broken_meta_properties(tmp_path, capsys):
    log_dir = tmp_path / "logs"
    shutil.copytree(BROKERS / "kafka-snappy", log_dir)
    meta = log_dir / "meta.properties"
    meta.write_bytes(b"#\nversion=7\nbroker.id=0\n")
    report = validate_paths([str(log_dir)])
    found = [f for f in report.findings if f.check == "meta_properties.parse"]
    assert [(f.severity, f.file, f.position) for f in found] == [("error", str(meta), 2)]
    assert "unknown version 7" in found[0].message
    assert report.exit_code == 1
    assert [f.check for f in validate_paths([str(meta)]).findings] == ["meta_properties.parse"]
    assert main(["validate", str(log_dir)]) == 1
    out = capsys.readouterr().out
    assert "ERROR   meta_properties.parse: meta.properties, byte 2: unknown version 7" in out
    with pytest.raises(LogDirError, match="unknown version 7"):
        LogDir.open(str(log_dir)).read_meta()
    # a warning only: the exit code follows --fail-on
    meta.write_text("broker.id=0\n")
    assert validate_paths([str(log_dir)], fail_on="error").exit_code == 0
    assert validate_paths([str(log_dir)]).exit_code == 1
    meta.unlink()  # no file at all is normal (Kafka 0.8 wrote none)
    assert not [f for f in validate_paths([str(log_dir)]).findings if f.check == "meta_properties.parse"]
    assert LogDir.open(str(log_dir)).read_meta() is None
