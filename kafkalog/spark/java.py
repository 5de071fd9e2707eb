"""The Java that Spark's JVM will run on, found where pyspark's launcher (bin/spark-class) looks
($JAVA_HOME/bin/java, else `java` on PATH) and checked before kafkalog starts it. Without one, or with
one older than Spark 4 runs on, pyspark fails with a JAVA_GATEWAY_EXITED traceback of some 40 lines;
here it is one line saying what was found, where kafkalog looked and what to install.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Mapping

from ..errors import ConfigError

MIN_JAVA = 17  # Spark 4 runs on Java 17 and 21: its classes, the launcher's included, are built for 17
INSTALL = (
    f"install Java {MIN_JAVA} or newer (e.g. apt-get install openjdk-{MIN_JAVA}-jre-headless, "
    f"brew install openjdk@{MIN_JAVA}, or https://adoptium.net) and set JAVA_HOME to it"
)
_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')  # `java -version`: "17.0.15", "21", "1.8.0_392"


class JavaError(ConfigError):
    """No Java where Spark's launcher looks, or one too old for Spark."""


def find_java(environ: Mapping[str, str]) -> tuple[str | None, str]:
    """The java bin/spark-class runs (None: none there), and where it looked."""
    home = environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        found = java if os.path.isfile(java) and os.access(java, os.X_OK) else None
        return found, f"$JAVA_HOME/bin/java, JAVA_HOME={home}"
    return shutil.which("java", path=environ.get("PATH", "")), f"PATH={environ.get('PATH', '')}, JAVA_HOME unset"


def check_java(environ: Mapping[str, str] = os.environ) -> str:
    """The java Spark will run on; JavaError when there is none, or it is older than MIN_JAVA."""
    java, looked = find_java(environ)
    if java is None:
        raise JavaError(
            f"Java was not found where Spark looks for it ({looked}); Spark needs Java {MIN_JAVA}+: {INSTALL}"
        )
    version = java_version(java)
    if version is not None and version < MIN_JAVA:
        raise JavaError(
            f"Java {version} is too old for Spark, which needs Java {MIN_JAVA}+ (found through {looked}): {INSTALL}",
            file=java,
        )
    return java


@functools.cache
def java_version(java: str) -> int | None:
    """The major version `java -version` states (1.8 is 8), or None when it states none kafkalog knows
    how to read (Spark then tries it)."""
    try:
        run = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise JavaError(f"Java does not run ({err}); {INSTALL}", file=java) from None
    match = _VERSION.search(run.stderr + run.stdout)
    if match is None:
        return None
    major = int(match[1])
    return int(match[2]) if major == 1 and match[2] else major
