"""The options of `format("kafkalog")`: their names, their values, and what they select (no Spark).

Option names are case-insensitive, as Spark's are (Spark hands a Python data source its options
with lower-case names); a name kafkalog does not know is an error that names the closest one.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..config import did_you_mean
from ..errors import ConfigError

# kafkalog's own options (the data source's module documentation says what each does)
KAFKALOG_OPTIONS = (
    "topics",
    "partitions",
    "startingOffset",
    "endingOffset",
    "view",
    "maxBytesPerTask",
    "minPartitions",
    "packUnits",
    "verifyCrc",
    "pushdown",
    "remoteStorageDir",
)
# what Spark itself puts into the options: load(PATH) passes "path"
SPARK_OPTIONS = ("path",)
KNOWN_OPTIONS = KAFKALOG_OPTIONS + SPARK_OPTIONS


def checked(options: Mapping[str, object]) -> dict[str, str]:
    """The options with lower-case names (as Spark passes them); an unknown name is an error that
    suggests the closest known one."""
    known = {name.lower() for name in KNOWN_OPTIONS}
    lowered: dict[str, str] = {}
    for name, value in options.items():
        key = name.lower()
        if key not in known:
            raise ConfigError(f"unknown option {name!r} of the kafkalog data source{did_you_mean(name, KNOWN_OPTIONS)}")
        if key in lowered:
            raise ConfigError(f"option {name!r} is given twice (option names are case-insensitive)")
        lowered[key] = str(value)
    return lowered
