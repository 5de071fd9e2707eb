"""A `KafkaLogError` raised in an executor task reaches the driver wrapped in Spark's own exception
(a Python worker's traceback inside a Java one); this turns it back into the kafkalog error it was."""

from __future__ import annotations

import functools
import re
from typing import Any

from .. import errors

# The last line of the worker's traceback: "kafkalog.errors.CrcMismatchError: <message naming file and byte>"
_WORKER_ERROR = re.compile(r"kafkalog\.errors\.(\w+): (.+)")
# KafkaLogError.__str__'s "FILE, byte N, offset M: message" (each part optional); a file is a path or URI.
_LOCATED = re.compile(
    r"(?:(?P<file>[^,:]*/[^,]*?|[a-z0-9+]+://[^,]*?)(?:, |(?=: )))?"
    r"(?:byte (?P<position>\d+)(?:, |(?=: )))?(?:offset (?P<offset>-?\d+)(?=: ))?"
    r"(?:: )?(?P<message>.+)",
    re.DOTALL,
)


def from_spark_error(err: BaseException | str) -> errors.KafkaLogError | None:
    """The kafkalog error an executor raised, if `err` (or its text) carries one."""
    found = _WORKER_ERROR.findall(str(err))
    if not found:
        return None
    name, text = found[-1]
    cls = getattr(errors, name, errors.KafkaLogError)
    if not (isinstance(cls, type) and issubclass(cls, errors.KafkaLogError)):
        cls = errors.KafkaLogError
    where = _LOCATED.fullmatch(text.strip())
    assert where is not None  # every part is optional but the message, which matches any non-blank text
    file, position, offset, message = where["file"], where["position"], where["offset"], where["message"]
    located: dict[str, Any] = dict(
        file=file, position=None if position is None else int(position), offset=None if offset is None else int(offset)
    )
    try:
        return cls(message, **located)
    except TypeError:  # a subclass with a constructor of its own
        return errors.KafkaLogError(message, **located)


def worker_error(err: errors.KafkaLogError) -> str:
    """`err` as a worker's traceback ends with it: what a task returns in place of raising, so that
    one item's error fails none of the others; `from_spark_error` turns it back into the error (a
    class defined elsewhere, into its nearest base in kafkalog.errors)."""
    cls = next(c for c in type(err).__mro__ if c.__module__ == errors.__name__)
    return f"kafkalog.errors.{cls.__name__}: {err}"


def raises_kafkalog_errors(function):
    """Decorate a function that runs Spark jobs: executors' kafkalog errors surface as themselves."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except errors.KafkaLogError:
            raise
        except Exception as err:
            converted = from_spark_error(err)
            if converted is None:
                raise
            raise converted from err

    return wrapper
