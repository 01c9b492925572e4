"""The transaction coordinator's rules, sans I/O: metadata in, the step to take out."""
import dataclasses

import pytest

from kgate.gateway.transactions import machine, records
from kgate.gateway.transactions.machine import TxnMetadata, TxnState
from kgate.protocol.error_codes import ErrorCode

MAX_TIMEOUT = 60_000
TP = ("t", 0)


def initialised(epoch=0, producer_id=7) -> TxnMetadata:
    return TxnMetadata("tx", producer_id, epoch, 10_000, TxnState.EMPTY, update_ms=0)


def ongoing(partitions=frozenset({TP}), start=1000) -> TxnMetadata:
    return dataclasses.replace(initialised(), state=TxnState.ONGOING, partitions=partitions, start_ms=start)


def test_a_new_transactional_id_gets_the_fresh_producer_id_at_epoch_0():
    step = machine.init_producer(None, "tx", 10_000, MAX_TIMEOUT, None, 42, now=5)
    assert step.error == ErrorCode.NONE and not step.retry_after
    assert (step.store.producer_id, step.store.epoch, step.store.state) == (42, 0, TxnState.EMPTY)


def test_every_init_bumps_the_epoch_and_keeps_the_producer_id():
    step = machine.init_producer(initialised(epoch=3), "tx", 10_000, MAX_TIMEOUT, None, 99, now=5)
    assert (step.store.producer_id, step.store.epoch) == (7, 4)


def test_an_epoch_at_its_limit_gets_a_new_producer_id():
    step = machine.init_producer(initialised(epoch=machine.MAX_EPOCH), "tx", 10_000, MAX_TIMEOUT, None, 99, now=5)
    assert (step.store.producer_id, step.store.epoch) == (99, 0)


@pytest.mark.parametrize("timeout", [0, -1, MAX_TIMEOUT + 1])
def test_a_timeout_outside_the_brokers_maximum_is_refused(timeout):
    step = machine.init_producer(None, "tx", timeout, MAX_TIMEOUT, None, 42, now=5)
    assert step.error == ErrorCode.INVALID_TRANSACTION_TIMEOUT and step.store is None


def test_init_with_an_open_transaction_aborts_it_with_a_bumped_epoch_first():
    step = machine.init_producer(ongoing(), "tx", 10_000, MAX_TIMEOUT, None, 99, now=5)
    assert step.retry_after
    assert (step.store.state, step.store.epoch, step.store.partitions) == (TxnState.PREPARE_ABORT, 1, {TP})


def test_init_while_markers_are_being_written_asks_the_client_to_retry():
    preparing = dataclasses.replace(ongoing(), state=TxnState.PREPARE_COMMIT)
    assert machine.init_producer(preparing, "tx", 10_000, MAX_TIMEOUT, None, 99, 5).error == \
        ErrorCode.CONCURRENT_TRANSACTIONS


def test_init_resuming_with_another_producers_id_is_fenced():
    step = machine.init_producer(initialised(epoch=3), "tx", 10_000, MAX_TIMEOUT, (8, 3), 99, now=5)
    assert step.error == ErrorCode.PRODUCER_FENCED


def test_adding_partitions_opens_the_transaction_once():
    step = machine.add_partitions(initialised(), 7, 0, {TP}, now=1000)
    assert (step.store.state, step.store.partitions, step.store.start_ms) == (TxnState.ONGOING, {TP}, 1000)
    again = machine.add_partitions(step.store, 7, 0, {TP}, now=2000)
    assert again.error == ErrorCode.NONE and again.store is None
    more = machine.add_partitions(step.store, 7, 0, {("t", 1)}, now=2000)
    assert more.store.partitions == {TP, ("t", 1)} and more.store.start_ms == 1000


@pytest.mark.parametrize("producer_id, epoch, error", [
    (8, 0, ErrorCode.INVALID_PRODUCER_ID_MAPPING),
    (7, 1, ErrorCode.PRODUCER_FENCED),
])
def test_requests_of_another_producer_or_epoch_are_refused(producer_id, epoch, error):
    assert machine.add_partitions(initialised(), producer_id, epoch, {TP}, 0).error == error
    assert machine.end(ongoing(), producer_id, epoch, True, 0).error == error
    assert machine.check_in_transaction(ongoing(), producer_id, epoch, TP) == error


def test_an_unknown_transactional_id_has_no_producer_mapping():
    assert machine.add_partitions(None, 7, 0, {TP}, 0).error == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_commit_prepares_then_completes_and_a_retry_is_answered_again():
    prepared = machine.end(ongoing(), 7, 0, True, now=2000).store
    assert prepared.state == TxnState.PREPARE_COMMIT and prepared.partitions == {TP}
    assert machine.end(prepared, 7, 0, True, 2001).error == ErrorCode.CONCURRENT_TRANSACTIONS
    complete = machine.completed(prepared, now=2002)
    assert (complete.state, complete.partitions) == (TxnState.COMPLETE_COMMIT, frozenset())
    retry = machine.end(complete, 7, 0, True, 2003)
    assert retry.error == ErrorCode.NONE and retry.store is None
    assert machine.end(complete, 7, 0, False, 2003).error == ErrorCode.INVALID_TXN_STATE


def test_abort_prepares_abort_and_completes_as_abort():
    prepared = machine.end(ongoing(), 7, 0, False, now=2000).store
    assert prepared.state == TxnState.PREPARE_ABORT and prepared.epoch == 0
    assert machine.completed(prepared, 2001).state == TxnState.COMPLETE_ABORT


def test_ending_a_transaction_that_never_began_is_an_invalid_state():
    assert machine.end(initialised(), 7, 0, True, 0).error == ErrorCode.INVALID_TXN_STATE


def test_produce_is_allowed_only_to_added_partitions_of_an_open_transaction():
    assert machine.check_in_transaction(ongoing(), 7, 0, TP) == ErrorCode.NONE
    assert machine.check_in_transaction(ongoing(), 7, 0, ("t", 1)) == ErrorCode.INVALID_TXN_STATE
    assert machine.check_in_transaction(initialised(), 7, 0, TP) == ErrorCode.INVALID_TXN_STATE


def test_an_open_transaction_past_its_timeout_is_aborted_with_the_producer_fenced():
    txn = ongoing(start=1000)
    assert machine.timed_out(txn, now=1000 + txn.timeout_ms) is None
    fenced = machine.timed_out(txn, now=1001 + txn.timeout_ms)
    assert (fenced.state, fenced.epoch) == (TxnState.PREPARE_ABORT, 1)
    assert machine.timed_out(initialised(), now=10**12) is None
    assert machine.add_partitions(fenced, 7, 0, {TP}, 0).error == ErrorCode.PRODUCER_FENCED


def test_state_names_are_kafkas():
    assert [s.kafka_name for s in TxnState] == ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
                                                 "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"]


def test_log_records_round_trip_and_carry_kafkas_layout():
    txn = dataclasses.replace(ongoing(frozenset({("a", 1), ("a", 0), ("b", 3)})), update_ms=2000)
    key, value = records.key("tx"), records.value(txn)
    assert key == b"\x00\x00\x00\x02tx"  # key version 0, then the id
    assert value[:2] == b"\x00\x00" and value[2:10] == (7).to_bytes(8, "big")
    assert records.decode(key, value) == ("tx", txn)
    assert records.decode(key, None) == ("tx", None)
    with pytest.raises(records.CorruptRecord):
        records.decode(b"\x00\x05\x00\x02tx", value)
