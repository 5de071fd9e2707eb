"""The jars `spark.jars.packages` names (delta-spark's), resolved through Ivy once and then named by path.

Spark resolves `spark.jars.packages` through Ivy at every start: about 2 s and some 90 lines on stderr even
when every jar is in Ivy's cache, and Maven Central must answer. It then also copies each jar into the
session's files and puts each on the Python path. Given `spark.jars` (local paths) instead, Spark loads the
same jars into the same class loader and does none of that. So a session kafkalog starts remembers what Ivy
resolved, in a manifest keyed by the coordinates and by the Spark build the JVM runs (its version and
Scala's), and a later start with the same coordinates names those jars; a start that finds no manifest,
or a jar of it gone (Ivy's cache cleared), resolves through Ivy as before and writes the manifest anew.

The manifests live in `$KAFKALOG_JARS_DIR`, else `${KAFKALOG_CACHE:-~/.cache/kafkalog}/jars`:
`spark-<version>_<scala>/<coordinates>.json`, naming each jar by an absolute path (in Ivy's cache) or by
one relative to the manifest (`kafkalog jars fetch --to DIR` copies them there, for a machine that cannot
reach Maven Central). A directory set with `KAFKALOG_JARS_DIR` is the only place looked in: no manifest
there, or a jar missing, is a one-line `JarsUnavailable`, not a download.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

from ..errors import ConfigError

JARS_DIR = "KAFKALOG_JARS_DIR"  # a directory of manifests and jars kafkalog uses instead of Ivy
PACKAGES = "spark.jars.packages"
# settings that change what Ivy resolves for the same coordinates: a start with any of them resolves itself
RESOLUTION_SETTINGS = ("spark.jars.repositories", "spark.jars.ivySettings", "spark.jars.excludes")
_SPARK_CORE = re.compile(r"spark-core_(\d+\.\d+)-(.+)\.jar")


class JarsUnavailable(ConfigError):
    """The jars of `spark.jars.packages` are not where `KAFKALOG_JARS_DIR` says, or Ivy could not fetch them."""


@dataclass(frozen=True)
class JarKey:
    """What a resolution depends on: the coordinates, and the Spark build (version, Scala's binary version)."""

    packages: str
    spark: str
    scala: str

    def manifest(self, root: str) -> str:
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", self.packages)
        return os.path.join(root, f"spark-{self.spark}_{self.scala}", f"{name}.json")

    def __str__(self) -> str:
        return f"{self.packages} for Spark {self.spark} (Scala {self.scala})"


def jars_root(environ=os.environ) -> str:
    """Where manifests are read and written: `KAFKALOG_JARS_DIR`, else kafkalog's cache."""
    cache = environ.get("KAFKALOG_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "kafkalog")
    return environ.get(JARS_DIR) or os.path.join(cache, "jars")


def spark_build(spark_home: str | None = None) -> tuple[str, str] | None:
    """The Spark version and Scala binary version of the jars the JVM will run (`spark-core_<scala>-<version>.jar`
    in SPARK_HOME/jars, pyspark's by default); None when they cannot be told (nothing is then cached)."""
    if spark_home is None:
        from pyspark.find_spark_home import _find_spark_home

        spark_home = _find_spark_home()
    try:
        names = os.listdir(os.path.join(spark_home, "jars"))
    except OSError:
        return None
    found = {(m[2], m[1]) for m in map(_SPARK_CORE.fullmatch, names) if m}
    return found.pop() if len(found) == 1 else None


def jar_key(packages: str, build: tuple[str, str] | None) -> JarKey | None:
    return None if build is None else JarKey(packages, *build)


def read_manifest(key: JarKey, root: str) -> list[str] | None:
    """The jars (absolute paths) `root` holds for `key`; None when it holds no manifest of exactly that key."""
    path = key.manifest(root)
    try:
        with open(path, encoding="utf-8") as f:
            held = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(held, dict) or [held.get(k) for k in ("packages", "spark", "scala")] != [
        key.packages,
        key.spark,
        key.scala,
    ]:
        return None  # another key whose name maps to the same file
    base = os.path.dirname(path)
    return [os.path.join(base, jar) for jar in held.get("jars") or []] or None


def cached_jars(key: JarKey, environ=os.environ) -> list[str] | None:
    """The local jars of `key`, or None where Spark should resolve the coordinates through Ivy (kafkalog's
    cache has no manifest of them, or a jar it names is gone). In `KAFKALOG_JARS_DIR` either is an error."""
    root = jars_root(environ)
    jars = read_manifest(key, root)
    explicit = environ.get(JARS_DIR)
    if jars is None:
        if explicit:
            raise JarsUnavailable(
                f"{JARS_DIR}={explicit} holds no jars of {key} (`kafkalog jars fetch --to DIR` fetches them)",
                file=key.manifest(root),
            )
        return None
    missing = next((jar for jar in jars if not os.path.isfile(jar)), None)
    if missing is not None:
        if explicit:
            raise JarsUnavailable(f"a jar of {key} is missing (fetch them again)", file=missing)
        return None
    return jars


def remember(key: JarKey, jars: list[str], root: str) -> str:
    """Write the manifest of `key` in `root`, naming `jars` (absolute, or relative to the manifest's directory)
    in Spark's order: whole or not at all. Its path."""
    path = key.manifest(root)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"packages": key.packages, "spark": key.spark, "scala": key.scala, "jars": jars}, f, indent=1)
    os.replace(tmp, path)
    return path


def resolved_jars(spark_jars: str, given: str = "") -> list[str] | None:
    """The local paths of the jars Ivy resolved, from a started session's `spark.jars` (Spark puts them after
    the jars the settings `given`); None when one is not a local file (nothing is then remembered)."""
    own = set(filter(None, given.split(",")))
    urls = [url for url in spark_jars.split(",") if url and url not in own]
    paths = [unquote(urlparse(url).path) for url in urls if urlparse(url).scheme in ("file", "")]
    return paths if urls and len(paths) == len(urls) and all(map(os.path.isfile, paths)) else None


def with_cached_jars(settings: dict, build: tuple[str, str] | None, environ=os.environ) -> tuple[dict, JarKey | None]:
    """`settings` for a JVM kafkalog starts, with the jars of its `spark.jars.packages` named by path where
    they were resolved before; and the key to remember a resolution under, when Ivy will resolve."""
    packages = settings.get(PACKAGES)
    key = jar_key(packages, build) if packages else None
    if key is None or any(settings.get(name) for name in RESOLUTION_SETTINGS):
        return settings, None
    jars = cached_jars(key, environ)
    if jars is None:
        return settings, key
    local = {name: value for name, value in settings.items() if name != PACKAGES}
    local["spark.jars"] = ",".join(filter(None, (settings.get("spark.jars"), *jars)))
    return local, None


def copy_jars(key: JarKey, jars: list[str], to: str) -> str:
    """Copy `jars` beside the manifest `to` will hold for `key` (for a machine that cannot reach Maven
    Central), then write the manifest naming them relatively. Its path."""
    manifest = key.manifest(to)
    folder = os.path.splitext(os.path.basename(manifest))[0]
    target = os.path.join(os.path.dirname(manifest), folder)
    os.makedirs(target, exist_ok=True)
    for jar in jars:
        shutil.copy2(jar, os.path.join(target, os.path.basename(jar)))
    return remember(key, [f"{folder}/{os.path.basename(jar)}" for jar in jars], to)


def resolve(packages: str, conf: dict) -> list[str]:
    """Resolve `packages` through Ivy in a JVM of Spark's, started for that alone and stopped (no SparkContext):
    the local jars, in Spark's order. Ivy's report is left out of stderr as at any start (context.IvyReport)."""
    from .context import start_gateway

    try:
        gateway = start_gateway({**conf, PACKAGES: packages})
    except Exception as err:
        raise JarsUnavailable(
            f"Ivy could not fetch {packages} from Maven Central ({type(err).__name__}; Ivy's problems are above)"
        ) from None
    try:
        spark_jars = gateway.jvm.java.lang.System.getProperty("spark.jars") or ""
    finally:
        gateway.shutdown()
        gateway.proc.stdin.close()
        gateway.proc.wait(timeout=60)
    jars = resolved_jars(spark_jars)
    if jars is None:
        raise JarsUnavailable(f"Ivy resolved {packages} to no local jars: spark.jars={spark_jars!r}")
    return jars
