"""A class-data-sharing archive of the classes Spark's driver JVM loads (Java's dynamic AppCDS, Java 13+).

At every start the JVM reads, parses and verifies some 17,000 classes out of Spark's jars; mapped from an
archive written once, about 13,500 of them cost next to nothing (docs/benchmarks.md, "The CLI's fixed
cost"). The JVM of the first session the command line starts writes the archive as it exits
(`-XX:ArchiveClassesAtExit`), into `${KAFKALOG_CACHE:-~/.cache/kafkalog}/class-data/`, named by a digest
of what it depends on (the java binary and its JVM library, Spark's jars); later JVMs map it
(`-XX:SharedArchiveFile`).

Only a speed-up, never a failure: a JVM that cannot use the archive (another Java build, other jars, a
heap size that changes how classes are addressed) runs as without it; its warning, which the JVM prints
on stdout (the command's output), is turned off. A file that is not an archive is not named at all (the
JVM would then also give up its own archive of the JDK's classes). `KAFKALOG_CLASS_DATA=off` turns both
the use and the writing off.
"""

from __future__ import annotations

import atexit
import glob
import hashlib
import logging
import os

from ..storage.fs import process_gone
from .jars import spark_build

CLASS_DATA = "KAFKALOG_CLASS_DATA"
# Java 17 refuses a stale archive with a warning on stdout, and warns while writing one of classes it
# does not archive (some of Ivy's and log4j's): both would land in the command's output.
QUIET = "-Xlog:cds=off,cds+dynamic=off"
MAGIC = bytes.fromhex("a8ab0bf0")  # a dynamic archive's first bytes: 0xf00baba8, little-endian
WRITE_SECONDS = 600  # how long a command's end waits for its JVM to write the archive

log = logging.getLogger("kafkalog")


def archive_path(java: str, spark_home: str | None = None, environ=os.environ) -> str | None:
    """Where the archive of the JVM `java` runs with Spark's jars (pyspark's by default) is kept; None where
    the archive is off, or Spark's jars cannot be listed."""
    if environ.get(CLASS_DATA, "").lower() == "off":
        return None
    if spark_home is None:
        from pyspark.find_spark_home import _find_spark_home

        spark_home = _find_spark_home()
    build = spark_build(spark_home)
    jars = os.path.join(spark_home, "jars")
    try:
        parts = [_stat(jar) for jar in sorted(glob.glob(os.path.join(jars, "*.jar")))]
    except OSError:
        return None
    if build is None or not parts:
        return None
    real = os.path.realpath(java)
    home = os.path.dirname(os.path.dirname(real))
    parts += [_stat(real), *map(_stat, sorted(glob.glob(os.path.join(home, "lib", "*", "libjvm.so"))))]
    digest = hashlib.sha1("\n".join(parts).encode()).hexdigest()[:16]
    cache = environ.get("KAFKALOG_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "kafkalog")
    return os.path.join(cache, "class-data", f"spark-{build[0]}_{build[1]}-{digest}.jsa")


def _stat(path: str) -> str:
    st = os.stat(path)
    return f"{path}\t{st.st_size}\t{st.st_mtime_ns}"


def is_archive(path: str) -> bool:
    """Whether `path` holds a dynamic archive (a whole one: written under another name, then renamed)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def jvm_options(path: str | None, *, write: bool) -> tuple[str, str | None]:
    """The JVM options that map the archive at `path`; where there is none yet and `write`, those that
    write it as the JVM exits, under a name of this process's (to rename: `keep_at_exit`). The options,
    and that name (None: nothing is written)."""
    if path is None:
        return "", None
    if is_archive(path):
        log.debug("Spark's JVM maps the class-data archive %s", path)
        return f"-XX:SharedArchiveFile={path} {QUIET}", None
    if not write:
        return "", None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    except OSError as err:
        log.debug("no class-data archive is written (%s)", err)
        return "", None
    _remove_stale_parts(path)
    part = f"{path}.{os.getpid()}.part"
    return f"-XX:ArchiveClassesAtExit={part} {QUIET}", part


def _remove_stale_parts(path: str) -> None:
    """Remove what the JVMs of processes that ended before renaming it (killed) left of `path`."""
    for part in glob.glob(f"{glob.escape(path)}.*.part"):
        pid = part[len(path) + 1 : -len(".part")]
        if pid.isdigit() and process_gone(int(pid)):
            try:
                os.remove(part)
            except OSError:
                pass


def keep_at_exit(part: str, path: str) -> None:
    """As this process ends: stop the JVM that writes `part`, wait for it, and rename `part` to `path` when
    it is a whole archive (else remove it: the next command writes one again)."""
    log.info("Spark's classes are kept in a class-data archive for later starts (once): %s", path)
    atexit.register(_keep, part, path)


def _keep(part: str, path: str) -> None:
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    try:
        if gateway is not None:
            if SparkContext._active_spark_context is not None:
                SparkContext._active_spark_context.stop()
            gateway.shutdown()
            gateway.proc.stdin.close()  # the JVM exits at the end of its stdin, and writes the archive
            code = gateway.proc.wait(timeout=WRITE_SECONDS)
            if code == 0 and is_archive(part):
                os.replace(part, path)
                return
            log.debug("Spark's JVM exited with %s and wrote no class-data archive", code)
    except Exception as err:  # only a speed-up: the command's own result stands
        log.debug("the class-data archive was not kept: %s", err)
    try:
        os.remove(part)
    except OSError:
        pass
