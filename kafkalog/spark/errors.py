"""A `KafkaLogError` raised in an executor task reaches the driver wrapped in Spark's own exception
(a Python worker's traceback inside a Java one); this turns it back into the kafkalog error it was.

In a Python worker every KafkaLogError prints itself as data under its traceback's last line (a note:
`errors.AS_DATA` and a JSON object of its class, file, line, byte, offset and message); the driver
reads the last such note of the text back, not the error's printed message."""

from __future__ import annotations

import functools
from collections.abc import Callable

from .. import errors


def from_spark_error(err: BaseException | str) -> errors.KafkaLogError | None:
    """The kafkalog error an executor raised, if `err` (or its text) carries one (the last, when
    errors are chained: the one the task raised)."""
    text = str(err)
    at = text.rfind(errors.AS_DATA)
    if at < 0:
        return None
    try:
        return errors.from_data(text[at + len(errors.AS_DATA) :])
    except (ValueError, KeyError):  # not what as_data writes: Spark's own error is the one to see
        return None


# what Spark says when a task's Python worker dies under it (a signal: most often the kernel's OOM killer)
WORKER_DIED = "Python worker exited unexpectedly (crashed)"


def died_error(err: BaseException | str) -> errors.KafkaLogError | None:
    """A one-line error for a Spark job that failed because a task's Python worker was killed, which
    carries no kafkalog error to show: Spark's own text is a page of Java stack."""
    if WORKER_DIED not in str(err):
        return None
    return errors.KafkaLogError(
        "a Spark task's Python worker was killed mid-task (by a signal; most often the kernel's out-of-memory "
        "killer: dmesg names it); the run stopped, and can be run again (with more memory per worker, or "
        "fewer cores sharing it)"
    )


def worker_error(err: errors.KafkaLogError) -> str:
    """`err` as data (`KafkaLogError.as_data`, one line): what a task returns in place of raising, so
    that one item's error fails none of the others; `from_spark_error` turns it back into the error
    (a class defined elsewhere, into its nearest base in kafkalog.errors)."""
    return err.as_data()


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


def returned_error(text: str) -> errors.KafkaLogError:
    """The kafkalog error a task returned as `worker_error` text."""
    err = from_spark_error(text)
    assert err is not None  # worker_error's text always names one
    return err


def collected(job: Callable[[], list], what: str, cleanup: Callable[[], None]) -> list:
    """The rows of `job()`, a Spark action whose tasks return their errors as data in an `error`
    column (`worker_error`) so that one item's error fails none of the others. Where a task died
    rather than returned (or the job was stopped), or a row carries an error, `cleanup()` runs first;
    then the error is raised as the kafkalog error it was, or, for a task that died without one, as a
    one-line KafkaLogError saying that `what` failed."""
    try:
        rows = job()
    except BaseException as err:
        cleanup()
        if not isinstance(err, Exception):
            raise
        first_line = next(iter(str(err).strip().splitlines()), type(err).__name__)
        raise from_spark_error(err) or errors.KafkaLogError(f"{what} failed: {first_line}") from err
    failed = next((row.error for row in rows if row.error is not None), None)
    if failed is not None:
        cleanup()
        raise returned_error(failed)
    return rows
