"""The names other tools give the places a log dir lives: Hadoop's `s3a://` (S3, against moto's server),
Databricks' `dbfs:/` (its FUSE mount), Azure's `abfss://` (pyarrow's AzureFileSystem, or a refusal that
says what to use)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.fs as pafs
import pytest

from kafkalog.cli import main
from kafkalog.errors import LogDirError
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.logdir import LogDir, copy_log_dir

LOG = Path(__file__).resolve().parents[1] / "fixtures" / "coordinators-4.3.1" / "log"  # a real broker's


def test_s3a_is_s3(s3_server, capsys):
    s3_server.create_bucket("kafkalog-s3a")
    copy_log_dir(str(LOG), "s3a://kafkalog-s3a/log")  # written through s3a://, read back through s3://
    s3a, s3 = LogDir.open("s3a://kafkalog-s3a/log"), LogDir.open("s3://kafkalog-s3a/log")
    assert [p.name for p in s3a.partitions()] == [p.name for p in s3.partitions()] != []
    outputs = []
    for uri in ("s3a://kafkalog-s3a/log", "s3://kafkalog-s3a/log", str(LOG)):
        assert main(["dump", uri, "--records"]) == 0
        outputs.append(capsys.readouterr().out.replace(uri, "<root>").replace("kafkalog-s3a/log", "<root>"))
    assert outputs[0] == outputs[1] == outputs[2].replace(str(LOG), "<root>")


@pytest.mark.parametrize("uri", ["dbfs:/mnt/kafka/data", "dbfs:///mnt/kafka/data", "DBFS:/mnt/kafka/data/"])
def test_dbfs_is_databricks_fuse_mount(uri):
    fs, path = LogFileSystem.for_path(uri)
    assert fs.is_local and path == "/dbfs/mnt/kafka/data"


def test_abfss_opens_through_pyarrows_azure_filesystem():
    fs, path = LogFileSystem.for_path("abfss://archive@account.dfs.core.windows.net/kafka/data")
    assert isinstance(fs.fs, pafs.AzureFileSystem) and path == "archive/kafka/data"


def test_abfss_without_an_azure_filesystem_is_refused_saying_what_to_use(monkeypatch):
    monkeypatch.delattr(pafs, "AzureFileSystem")
    with pytest.raises(LogDirError) as refused:
        LogFileSystem.for_path("abfss://archive@account.dfs.core.windows.net/kafka/data")
    message = str(refused.value)
    assert "abfss://archive@account.dfs.core.windows.net/kafka/data" in message
    assert "has no AzureFileSystem" in message and "pyarrow 16 or newer" in message and "mount path" in message
