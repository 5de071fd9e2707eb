"""The class-data archive of Spark's classes (kafkalog/spark/class_data.py): where it is kept, the JVM
options that map or write it, and its renaming at a command's end; all without starting Spark."""

from __future__ import annotations

import os
import types

import pytest
from pyspark import SparkContext

from kafkalog.spark import class_data
from kafkalog.spark.class_data import MAGIC, archive_path, is_archive, jvm_options


@pytest.fixture
def spark_home(tmp_path):
    """A Spark home of two jars, and a Java whose JVM library sits where a JDK keeps it."""
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    (jars / "spark-core_2.13-4.2.1.jar").write_bytes(b"PK core")
    (jars / "scala-library-2.13.16.jar").write_bytes(b"PK scala")
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_bytes(b"java")
    (tmp_path / "jdk" / "lib" / "server").mkdir(parents=True)
    (tmp_path / "jdk" / "lib" / "server" / "libjvm.so").write_bytes(b"jvm")
    return tmp_path


def path_of(home, **environ):
    env = {"KAFKALOG_CACHE": str(home / "cache"), **environ}
    return archive_path(str(home / "jdk" / "bin" / "java"), str(home / "spark"), env)


def test_the_archive_is_named_by_the_spark_build_and_changes_with_a_jar_or_the_jvm(spark_home):
    first = path_of(spark_home)
    assert first.startswith(str(spark_home / "cache" / "class-data" / "spark-4.2.1_2.13-")) and first.endswith(".jsa")
    assert path_of(spark_home) == first
    (spark_home / "spark" / "jars" / "scala-library-2.13.16.jar").write_bytes(b"PK scala, another build")
    second = path_of(spark_home)
    assert second != first
    (spark_home / "jdk" / "lib" / "server" / "libjvm.so").write_bytes(b"a JDK update")
    assert path_of(spark_home) not in (first, second)
    assert path_of(spark_home, KAFKALOG_CLASS_DATA="off") is None
    (spark_home / "spark" / "jars" / "spark-core_2.13-4.2.1.jar").unlink()  # the build cannot be told
    assert path_of(spark_home) is None


def test_an_archive_is_mapped_quietly_and_one_missing_is_written_only_when_asked(spark_home):
    path = path_of(spark_home)
    assert jvm_options(path, write=False) == ("", None)
    options, part = jvm_options(path, write=True)
    assert part == f"{path}.{os.getpid()}.part"
    assert options == f"-XX:ArchiveClassesAtExit={part} {class_data.QUIET}"
    with open(path, "wb") as f:  # not an archive (a JVM named it would give up sharing the JDK's classes too)
        f.write(b"garbage")
    assert not is_archive(path) and jvm_options(path, write=False) == ("", None)
    with open(path, "wb") as f:
        f.write(MAGIC + b"rest")
    assert jvm_options(path, write=True) == (f"-XX:SharedArchiveFile={path} {class_data.QUIET}", None)
    assert jvm_options(None, write=True) == ("", None)


def test_what_a_killed_process_left_is_removed_and_a_running_ones_kept(spark_home):
    path = path_of(spark_home)
    os.makedirs(os.path.dirname(path))
    dead, running = f"{path}.999999999.part", f"{path}.{os.getppid()}.part"
    for part in (dead, running):
        with open(part, "wb") as f:
            f.write(MAGIC)
    jvm_options(path, write=True)
    assert not os.path.exists(dead) and os.path.exists(running)


class _Proc:
    """The JVM of a session: at the end of its stdin it writes `content` into `part` and exits with `code`."""

    def __init__(self, part, content, code):
        self.part, self.content, self.code = part, content, code
        self.stdin = types.SimpleNamespace(close=lambda: None)

    def wait(self, timeout):
        if self.content is not None:
            with open(self.part, "wb") as f:
                f.write(self.content)
        return self.code


@pytest.mark.parametrize(
    ("content", "code", "kept"),
    [(MAGIC + b"classes", 0, True), (MAGIC + b"cut short", 1, False), (b"not an archive", 0, False), (None, 0, False)],
)
def test_the_archive_is_renamed_only_when_the_jvm_wrote_a_whole_one(tmp_path, monkeypatch, content, code, kept):
    path, part = str(tmp_path / "a.jsa"), str(tmp_path / "a.jsa.1.part")
    stopped = []
    gateway = types.SimpleNamespace(shutdown=lambda: stopped.append(True), proc=_Proc(part, content, code))
    monkeypatch.setattr(SparkContext, "_gateway", gateway)
    monkeypatch.setattr(SparkContext, "_active_spark_context", None)
    class_data._keep(part, path)
    assert stopped == [True]
    assert is_archive(path) == kept
    assert not os.path.exists(part)
