"""Transaction index (spec §4.7; catalogue 117)."""

import struct

import pytest

from kafkalog.errors import CorruptIndexError, UnsupportedFormatError
from kafkalog.rules.aborted_txn import AbortedTxn
from kafkalog.storage.txnindex import ENTRY_SIZE, TransactionIndex, TxnIndexSearchResult

TXNS = [AbortedTxn(0, 0, 10, 11), AbortedTxn(1, 5, 15, 13), AbortedTxn(2, 18, 35, 25), AbortedTxn(3, 32, 50, 40)]


def _index(txns=TXNS, base_offset=0) -> TransactionIndex:
    index = TransactionIndex(base_offset)
    for txn in txns:
        index.append(txn)
    return index


def test_collect_aborted_transactions__TXIT_testCollectAbortedTransactions():
    index = _index()
    assert index.collect_aborted(0, 100) == TxnIndexSearchResult(TXNS, False)
    assert index.collect_aborted(0, 32) == TxnIndexSearchResult(TXNS[:3], True)
    assert index.collect_aborted(0, 35) == TxnIndexSearchResult(TXNS, True)
    assert index.collect_aborted(10, 35) == TxnIndexSearchResult(TXNS, True)
    assert index.collect_aborted(11, 35) == TxnIndexSearchResult(TXNS[1:], True)
    assert index.collect_aborted(20, 41) == TxnIndexSearchResult(TXNS[2:], False)


def test_truncate__TXIT_testTruncate():
    txns = [AbortedTxn(0, 0, 10, 2), AbortedTxn(1, 5, 15, 16), AbortedTxn(2, 18, 35, 25), AbortedTxn(3, 32, 50, 40)]
    index = _index(txns)
    index.truncate_to(51)
    assert index.collect_aborted(0, 100).aborted_transactions == txns
    index.truncate_to(50)
    assert index.collect_aborted(0, 100).aborted_transactions == txns[:3]
    index.truncate_to(0)
    assert index.collect_aborted(0, 100).aborted_transactions == []


def test_sanity_check__TXIT_testSanityCheck():
    data = _index().to_bytes()
    TransactionIndex.from_bytes(data, 0).sanity_check()
    reopened = TransactionIndex.from_bytes(data, 100, file="00000000000000000100.txnindex")
    with pytest.raises(CorruptIndexError, match="below the segment base offset 100") as caught:
        reopened.sanity_check()
    assert (caught.value.file, caught.value.position, caught.value.offset) == ("00000000000000000100.txnindex", 0, 10)


def test_sanity_check_reports_non_increasing_last_offsets():
    data = TransactionIndex(0, [AbortedTxn(1, 0, 20, 21), AbortedTxn(2, 5, 20, 21)]).to_bytes()
    with pytest.raises(CorruptIndexError, match="must increase") as caught:
        TransactionIndex.from_bytes(data, 0).sanity_check()
    assert caught.value.position == ENTRY_SIZE


def test_position_set_correctly_when_opened__TXIT_testPositionSetCorrectlyWhenOpened():
    reopened = TransactionIndex.from_bytes(_index().to_bytes(), 0)
    another = AbortedTxn(3, 50, 60, 55)
    reopened.append(another)
    assert reopened.entries == TXNS + [another]
    assert reopened.to_bytes() == _index(TXNS + [another]).to_bytes()


@pytest.mark.parametrize("last_offset", [15, 10])
def test_last_offset_must_increase__TXIT_testLastOffsetMustIncrease_testLastOffsetCannotDecrease(last_offset):
    index = _index([AbortedTxn(1, 5, 15, 13)])
    with pytest.raises(CorruptIndexError) as caught:
        index.append(AbortedTxn(0, 0, last_offset, 11))
    assert caught.value.position == ENTRY_SIZE


def test_aborted_txn_serde__TXIT_testAbortedTxnSerde():
    txn = AbortedTxn(producer_id=983493, first_offset=137, last_offset=299, last_stable_offset=200)
    data = TransactionIndex(0, [txn]).to_bytes()
    assert len(data) == 34 == ENTRY_SIZE
    assert data == struct.pack(">hqqqq", 0, 983493, 137, 299, 200)
    assert TransactionIndex.from_bytes(data, 0).entries == [txn]


def test_empty_and_partial_files():
    assert TransactionIndex.from_bytes(b"", 0).entries == []
    data = _index().to_bytes()
    index = TransactionIndex.from_bytes(data + b"\x00" * 33, 0)
    assert index.entries == TXNS  # Kafka's iterator ignores a trailing partial entry
    assert index.to_bytes() == data


def test_version_above_zero_is_refused():
    data = _index().to_bytes()
    bad = data[:ENTRY_SIZE] + b"\x01" + data[ENTRY_SIZE + 1 :]
    with pytest.raises(UnsupportedFormatError) as caught:
        TransactionIndex.from_bytes(bad, 0, file="t.txnindex")
    assert (caught.value.file, caught.value.position) == ("t.txnindex", ENTRY_SIZE)


def test_version_reads_only_the_first_byte_like_kafka():
    data = bytearray(_index().to_bytes())
    data[1] = 0x07  # second byte of the int16 version: Kafka ignores it
    data[ENTRY_SIZE] = 0xFF  # a negative first byte is not "above 0" either
    assert TransactionIndex.from_bytes(bytes(data), 0).entries == TXNS
