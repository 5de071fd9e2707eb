"""A `KafkaLogError` raised in an executor task reaches the driver wrapped in Spark's own exception
(a Python worker's traceback inside a Java one); this turns it back into the kafkalog error it was."""
from __future__ import annotations

import functools
import re

from .. import errors

# The last line of the worker's traceback: "kafkalog.errors.CrcMismatchError: <message naming file and byte>"
_WORKER_ERROR = re.compile(r"kafkalog\.errors\.(\w+): (.+)")


def from_spark_error(err: BaseException) -> errors.KafkaLogError | None:
    """The kafkalog error an executor raised, if `err` carries one."""
    found = _WORKER_ERROR.findall(str(err))
    if not found:
        return None
    name, message = found[-1]
    cls = getattr(errors, name, errors.KafkaLogError)
    if not (isinstance(cls, type) and issubclass(cls, errors.KafkaLogError)):
        cls = errors.KafkaLogError
    try:
        return cls(message.strip())
    except TypeError:  # a subclass with a constructor of its own
        return errors.KafkaLogError(message.strip())


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
