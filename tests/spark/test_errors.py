"""A kafkalog error as a task returns it (`worker_error`) or raises it (its traceback's text, with the
error as data in a Python worker) and as the driver reads it back (`from_spark_error`), without a
SparkSession: its class, file, line, byte, offset and message survive."""

from __future__ import annotations

import traceback

import pytest

from kafkalog.errors import (
    AS_DATA,
    ConfigError,
    CorruptBatchError,
    CorruptCheckpointError,
    CorruptIndexError,
    CorruptSnapshotError,
    CrcMismatchError,
    KafkaLogError,
    UnsupportedFormatError,
    print_notes,
)
from kafkalog.spark.errors import from_spark_error, worker_error
from kafkalog.storage.index import LogSegmentOffsetOverflowError


@pytest.mark.parametrize(
    "err",
    [
        UnsupportedFormatError("unknown magic byte 7: expected 0, 1 or 2", file="/d/t-0/0.log", position=6, offset=9),
        CorruptSnapshotError("CRC-32C mismatch, at 12", file="s3://bucket/kafka/t-1/00000000000000000005.snapshot"),
        KafkaLogError("no file, position or offset: only a message"),
        KafkaLogError("an offset alone", offset=-1),
    ],
)
def test_an_error_comes_back_as_it_was(err):
    back = from_spark_error(worker_error(err))
    assert type(back) is type(err)
    assert (back.file, back.position, back.offset, back.message) == (err.file, err.position, err.offset, err.message)


def test_an_error_class_outside_kafkalog_errors_comes_back_as_its_nearest_base_there():
    err = LogSegmentOffsetOverflowError("offset 2147483648 above the segment's base + 2^31 - 1", file="/d/t-0/0.log")
    back = from_spark_error(worker_error(err))
    assert type(back) is CorruptBatchError and str(back) == str(err)


def test_the_file_line_and_commas_of_an_error_come_back_whole():
    err = CorruptCheckpointError("expected 'N offset', got '1, 2: x'", file="/d/a, b/recovery-point-offset-checkpoint")
    err.line, err.position = 3, 17
    back = from_spark_error(worker_error(err))
    assert type(back) is CorruptCheckpointError
    assert (back.file, back.line, back.position, back.message) == (err.file, 3, 17, err.message)
    assert str(back) == str(err)


def _traceback_of(err: BaseException) -> str:
    try:
        raise err
    except BaseException:
        return traceback.format_exc()


def test_in_a_python_worker_the_traceback_carries_the_error_as_data(monkeypatch):
    monkeypatch.setenv("PYTHON_WORKER_FACTORY_SECRET", "s")
    err = CrcMismatchError("CRC 0x1 stored,\nCRC 0x2 computed", file="/d/t-0/0.log", position=61)
    err.offset = 5  # located after it was made, as the storage layer does: the data says it
    err.add_note("a note of someone else's")
    text = "org.apache.spark.api.python.PythonException: " + _traceback_of(err) + "\n\tat org.apache.spark.Foo"
    assert text.count(AS_DATA) == 1 and "a note of someone else's" in text
    back = from_spark_error(text)
    assert type(back) is CrcMismatchError and str(back) == str(err) and back.offset == 5


def test_on_the_driver_a_traceback_is_what_it_was(monkeypatch):
    monkeypatch.delenv("PYTHON_WORKER_FACTORY_SECRET", raising=False)
    err = KafkaLogError("bad", file="/d/t-0/0.log")
    err.add_note("kept")
    assert err.__notes__ == ["kept"]
    assert AS_DATA not in _traceback_of(err) and from_spark_error(_traceback_of(err)) is None


def test_a_located_copy_has_notes_of_its_own():
    err = KafkaLogError("bad")
    err.add_note("first")
    located = err.located(file="/d/t-0/0.log")
    located.add_note("second")
    assert (err.__notes__, located.__notes__) == (["first"], ["first", "second"])


def test_the_last_error_of_a_chain_is_the_one_that_comes_back(monkeypatch):
    monkeypatch.setenv("PYTHON_WORKER_FACTORY_SECRET", "s")
    try:
        try:
            raise CorruptIndexError("first", file="/d/t-0/0.index")
        except KafkaLogError as first:
            raise ConfigError("then") from first
    except KafkaLogError:
        text = traceback.format_exc()
    assert text.count(AS_DATA) == 2
    assert type(from_spark_error(text)) is ConfigError


@pytest.mark.parametrize(
    "text",
    [
        "kafkalog.errors.CrcMismatchError: /d/t-0/0.log, byte 6: a printed error alone is not data",
        AS_DATA + '{"error": "CrcMismatchError", "file": null',  # cut short
        AS_DATA + '{"error": "CrcMismatchError"}',  # no message
    ],
)
def test_text_without_the_error_as_data_is_no_kafkalog_error(text):
    assert from_spark_error(text) is None


def test_python_3_10_tracebacks_are_taught_to_print_notes(monkeypatch):
    class Python310Traceback(traceback.TracebackException):  # 3.10's keep no notes
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.__notes__ = None

    monkeypatch.setenv("PYTHON_WORKER_FACTORY_SECRET", "s")
    err = UnsupportedFormatError("magic 7", file="/d/t-0/0.log", position=16)
    assert AS_DATA not in "".join(Python310Traceback.from_exception(err).format())
    print_notes(Python310Traceback)
    text = "".join(Python310Traceback.from_exception(err).format())
    assert text.count(AS_DATA) == 1 and str(from_spark_error(text)) == str(err)

    class Python311Traceback(traceback.TracebackException):  # print them already: not twice
        pass

    print_notes(Python311Traceback)
    assert "".join(Python311Traceback.from_exception(err).format()).count(AS_DATA) == 1


def _fail_in_the_task(item):
    err = CorruptCheckpointError("expected 'N offset', got '1, 2'", file="/d/a, b/cleaner-offset-checkpoint")
    err.line, err.position = item, 40
    raise err


@pytest.mark.spark
def test_an_error_an_executor_raises_comes_back_as_it_was(spark):
    from kafkalog.spark.errors import raises_kafkalog_errors
    from kafkalog.spark.tasks import run_tasks

    with pytest.raises(CorruptCheckpointError) as raised:
        raises_kafkalog_errors(run_tasks)(spark, [[3]], _fail_in_the_task)
    back = raised.value
    assert (back.file, back.line, back.position) == ("/d/a, b/cleaner-offset-checkpoint", 3, 40)
    assert str(back) == "/d/a, b/cleaner-offset-checkpoint, line 3, byte 40: expected 'N offset', got '1, 2'"
