"""The jars of `spark.jars.packages` resolved once and named by path after (kafkalog/spark/jars.py), and
`kafkalog jars fetch`: all without starting Spark."""

from __future__ import annotations

import json
import shutil

import pytest

from kafkalog.spark.jars import (
    JARS_DIR,
    PACKAGES,
    JarKey,
    JarsUnavailable,
    copy_jars,
    remember,
    resolved_jars,
    spark_build,
    with_cached_jars,
)

DELTA = "io.delta:delta-spark_4.2_2.13:4.4.0"
BUILD = ("4.2.1", "2.13")


@pytest.fixture
def ivy(tmp_path):
    """Three jars where Ivy's retrieve step puts them."""
    folder = tmp_path / "ivy" / "jars"
    folder.mkdir(parents=True)
    jars = [folder / name for name in ("io.delta_delta-spark_4.2_2.13-4.4.0.jar", "a-1.jar", "b-2.jar")]
    for i, jar in enumerate(jars):
        jar.write_bytes(b"PK" + bytes([i]))
    return [str(jar) for jar in jars]


def environ(tmp_path, **extra):
    return {"KAFKALOG_CACHE": str(tmp_path / "cache"), **extra}


def settings(**extra):
    return {"spark.master": "local[2]", PACKAGES: DELTA, **extra}


def test_a_first_start_resolves_through_ivy_and_a_later_one_names_the_jars_it_resolved(tmp_path, ivy):
    env = environ(tmp_path)
    first, key = with_cached_jars(settings(), BUILD, env)
    assert first == settings() and key == JarKey(DELTA, *BUILD)  # nothing kept yet: Ivy resolves
    spark_jars = ",".join(["file:/mine.jar"] + [f"file://{jar}" for jar in ivy])  # as Spark states them after
    remember(key, resolved_jars(spark_jars, given="file:/mine.jar"), str(tmp_path / "cache" / "jars"))
    later, again = with_cached_jars(settings(**{"spark.jars": "file:/mine.jar"}), BUILD, env)
    assert again is None and PACKAGES not in later
    assert later["spark.jars"].split(",") == ["file:/mine.jar", *ivy]  # the user's first, then Ivy's, in order
    assert later["spark.master"] == "local[2]"


@pytest.mark.parametrize(
    ("packages", "build"),
    [
        (DELTA, ("4.2.0", "2.13")),  # another Spark release
        (DELTA, ("4.2.1", "2.12")),  # another Scala
        ("io.delta:delta-spark_4.2_2.13:4.3.0", BUILD),  # other coordinates
        ("io.delta_delta-spark_4.2_2.13_4.4.0", BUILD),  # other coordinates whose file name is the same
    ],
)
def test_jars_kept_for_one_key_are_never_named_for_another(tmp_path, ivy, packages, build):
    env = environ(tmp_path)
    remember(JarKey(DELTA, *BUILD), ivy, str(tmp_path / "cache" / "jars"))
    kept, key = with_cached_jars(settings(**{PACKAGES: packages}), build, env)
    assert kept[PACKAGES] == packages and "spark.jars" not in kept and key == JarKey(packages, *build)


def test_settings_that_change_what_ivy_resolves_bypass_the_cache(tmp_path, ivy):
    env = environ(tmp_path)
    remember(JarKey(DELTA, *BUILD), ivy, str(tmp_path / "cache" / "jars"))
    given = settings(**{"spark.jars.repositories": "https://repo.example/maven"})
    assert with_cached_jars(given, BUILD, env) == (given, None)
    assert with_cached_jars(settings(), None, env) == (settings(), None)  # the Spark build unknown


def test_a_jar_gone_from_ivys_cache_resolves_again(tmp_path, ivy):
    env = environ(tmp_path)
    remember(JarKey(DELTA, *BUILD), ivy, str(tmp_path / "cache" / "jars"))
    (tmp_path / "ivy" / "jars" / "b-2.jar").unlink()
    assert with_cached_jars(settings(), BUILD, env) == (settings(), JarKey(DELTA, *BUILD))


def test_a_jars_dir_is_the_only_place_looked_in_and_what_it_lacks_is_one_line(tmp_path, ivy):
    remember(JarKey(DELTA, *BUILD), ivy, str(tmp_path / "cache" / "jars"))  # not looked at
    env = environ(tmp_path, **{JARS_DIR: str(tmp_path / "offline")})
    with pytest.raises(JarsUnavailable) as err:
        with_cached_jars(settings(), BUILD, env)
    assert f"{JARS_DIR}={tmp_path / 'offline'} holds no jars of {DELTA} for Spark 4.2.1" in str(err.value)
    assert "kafkalog jars fetch --to DIR" in str(err.value) and "\n" not in str(err.value)
    manifest = copy_jars(JarKey(DELTA, *BUILD), ivy, str(tmp_path / "offline"))
    (tmp_path / "offline" / "spark-4.2.1_2.13" / "io.delta_delta-spark_4.2_2.13_4.4.0" / "a-1.jar").unlink()
    with pytest.raises(JarsUnavailable, match=r"a-1\.jar.*a jar of io\.delta:delta-spark.* is missing"):
        with_cached_jars(settings(), BUILD, env)
    assert json.loads(open(manifest).read())["jars"][1] == "io.delta_delta-spark_4.2_2.13_4.4.0/a-1.jar"


def test_fetched_jars_are_found_wherever_their_directory_is_copied(tmp_path, ivy):
    copy_jars(JarKey(DELTA, *BUILD), ivy, str(tmp_path / "fetched"))
    shutil.rmtree(tmp_path / "ivy")  # the air-gapped machine has no Ivy cache
    shutil.move(tmp_path / "fetched", tmp_path / "elsewhere")
    found, key = with_cached_jars(settings(), BUILD, environ(tmp_path, **{JARS_DIR: str(tmp_path / "elsewhere")}))
    folder = tmp_path / "elsewhere" / "spark-4.2.1_2.13" / "io.delta_delta-spark_4.2_2.13_4.4.0"
    assert key is None and found["spark.jars"].split(",") == [str(folder / jar.split("/")[-1]) for jar in ivy]
    assert [open(jar, "rb").read() for jar in found["spark.jars"].split(",")] == [b"PK\x00", b"PK\x01", b"PK\x02"]


def test_only_local_jars_that_exist_are_kept(tmp_path, ivy):
    assert resolved_jars(",".join(f"file://{jar}" for jar in ivy)) == ivy
    assert resolved_jars(f"file://{ivy[0]},hdfs://nn/jars/x.jar") is None
    assert resolved_jars(f"file://{ivy[0]},file://{tmp_path}/gone.jar") is None
    assert resolved_jars("file:/mine.jar", given="file:/mine.jar") is None  # nothing resolved


def test_the_spark_build_is_the_one_in_spark_homes_jars(tmp_path):
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    (jars / "spark-sql_2.13-4.2.1.jar").touch()
    assert spark_build(str(tmp_path / "spark")) is None
    (jars / "spark-core_2.13-4.2.1.jar").touch()
    assert spark_build(str(tmp_path / "spark")) == ("4.2.1", "2.13")
    (jars / "spark-core_2.12-3.5.0.jar").touch()  # two builds: which one runs cannot be told
    assert spark_build(str(tmp_path / "spark")) is None
    assert spark_build(str(tmp_path / "none")) is None


def test_jars_fetch_writes_a_manifest_a_later_session_uses(tmp_path, ivy, monkeypatch, capsys):
    from kafkalog.cli import main
    from kafkalog.spark import session

    asked = []
    monkeypatch.setattr(session, "resolve", lambda packages, conf: asked.append(packages) or ivy)
    monkeypatch.setattr(session, "spark_build", lambda: BUILD)
    monkeypatch.setattr(session, "DELTA_ARTIFACTS", {"4.2": "delta-spark_4.2_2.13"})
    monkeypatch.setattr("pyspark.__version__", "4.2.1")
    monkeypatch.setenv("KAFKALOG_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(JARS_DIR, raising=False)
    assert main(["jars", "fetch", "--to", str(tmp_path / "to")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert asked == [DELTA] and lines[0] == f"3 jars (0.0 MB) of {DELTA} for Spark 4.2.1 (Scala 2.13)"
    assert lines[1] == f"manifest: {tmp_path}/to/spark-4.2.1_2.13/io.delta_delta-spark_4.2_2.13_4.4.0.json"
    assert main(["jars", "fetch"]) == 0  # into kafkalog's cache, naming Ivy's jars where they are
    found, _ = with_cached_jars(settings(), BUILD, {"KAFKALOG_CACHE": str(tmp_path / "cache")})
    assert found["spark.jars"].split(",") == ivy
