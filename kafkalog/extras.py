"""The optional packages kafkalog imports only where an option needs them, and the extra of
pyproject.toml that installs each. A missing one is a one-line error naming what to install: the
command line asks before Spark starts (`require`), the library where it imports the package (`imported`).
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from .errors import MissingExtraError

# module -> the extra that brings it (tests/test_package.py checks each against pyproject.toml)
EXTRAS = {
    "pyspark": "spark",
    "pyiceberg": "iceberg",
    "deltalake": "delta",
    "fastavro": "formats",
    "google.protobuf": "formats",
    "grpc_tools": "formats",
    "cryptography": "evidence",
    "grpc": "connect",  # a Spark Connect client's transport
}


def missing(module: str, what: str, file: str | None = None) -> MissingExtraError:
    """The error of `what` (an option, a command, a table) without `module`."""
    return MissingExtraError(
        f"{what} needs the {module} package, which is not installed: pip install 'kafkalog[{EXTRAS[module]}]'",
        file=file,
    )


def available(module: str) -> bool:
    """Whether `module` can be imported, found without importing it (cheap before Spark starts)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # its parent package is missing, or an import of it failed before
        return False


def require(module: str, what: str, file: str | None = None) -> None:
    """Refuse `what` with `missing` unless `module` is installed."""
    if not available(module):
        raise missing(module, what, file)


def imported(module: str, what: str, file: str | None = None) -> ModuleType:
    """`module`, imported; `missing` when it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise missing(module, what, file) from None
