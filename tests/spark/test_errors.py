"""A kafkalog error as a task returns it (`worker_error`) and as the driver reads it back
(`from_spark_error`), without a SparkSession: its class, file, byte, offset and message survive."""

from __future__ import annotations

import pytest

from kafkalog.errors import CorruptBatchError, CorruptSnapshotError, KafkaLogError, UnsupportedFormatError
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
