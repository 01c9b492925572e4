"""Transactions on the coordinator runtime: the transaction coordinator over an
in-memory ``__transaction_state``, recorded markers and a fake clock, with no broker.

After each step a fresh shard loaded from the partition (a restart, or the next
owner) must hold the same transactions. Markers are retried a bounded number of
times with backoff on the clock; a transaction whose markers could not all be
written stays prepared, and the periodic check (or the next owner) ends it.
"""
import asyncio
import gc
import logging

import pytest

from kgate.gateway.config import Settings
from kgate.gateway.coordinator import CoordinatorRuntime
from kgate.gateway.transactions import TRANSACTION_STATE_TOPIC, TransactionCoordinator, marker_delivery
from kgate.gateway.transactions.machine import TxnState
from kgate.gateway.transactions.marker_delivery import Marker, MarkerDelivery
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from tests.unit.fake_clock import FakeClock, settle
from tests.unit.memory_partition_writer import MemoryPartitionWriter
from tests.unit.stand_in_cluster import StandInCluster

CHECK_MS = 10_000


class RecordingMarkers:
    """The partitions' side: markers written, and partitions that refuse the next few."""

    def __init__(self):
        self.written: list[tuple[str, int, Marker]] = []
        self.refusals: dict[tuple[str, int], int] = {}

    async def write(self, topic, index, marker):
        left = self.refusals.get((topic, index), 0)
        if left:
            self.refusals[(topic, index)] = left - 1
            raise ConnectionError(f"{topic}-{index} unreachable")
        self.written.append((topic, index, marker))


async def coordinator(writer=None, markers=None, clock=None):
    chosen = Settings()
    chosen.values.update({"transaction.state.log.num.partitions": 1, "kgate.offsets.compaction.min.records": 1000,
                          "transaction.abort.timed.out.transaction.cleanup.interval.ms": CHECK_MS})
    producer_ids = iter(range(100, 200))

    async def next_producer_id():
        return next(producer_ids)

    writer = writer or MemoryPartitionWriter()
    txns = TransactionCoordinator(chosen, StandInCluster(), writer, clock or FakeClock(), markers or RecordingMarkers(),
                                  next_producer_id)
    await txns.gain(0)
    txns.writer, txns.markers, txns.clock = writer, txns.delivery.writer, txns.runtime.clock
    return txns


async def open_transaction(txns, partitions, timeout_ms=60_000) -> tuple[int, int]:
    """Transactional id "tx" with a transaction open over ``partitions``: its producer id and epoch."""
    producer_id, epoch = await txns.init_producer("tx", timeout_ms, None)
    await txns.add_partitions("tx", producer_id, epoch, partitions)
    return producer_id, epoch


async def assert_replays_to_the_same_state(txns):
    fresh = CoordinatorRuntime(TRANSACTION_STATE_TOPIC, txns.writer, FakeClock(), txns.runtime.new_shard, 10**9)
    assert (await fresh.load(0)).transactions == txns.runtime.shard(0).transactions
    await fresh.close()


async def test_a_committed_transaction_step_by_step():
    txns = await coordinator()
    producer_id, epoch = await txns.init_producer("tx", 60_000, None)
    assert (producer_id, epoch) == (100, 0)
    await assert_replays_to_the_same_state(txns)
    await txns.add_partitions("tx", producer_id, epoch, [("t", 0), ("t", 1)])
    await txns.add_partitions("tx", producer_id, epoch, [("__consumer_offsets", 3)])
    txns.check_produce("tx", producer_id, epoch, ("t", 1))
    with pytest.raises(KafkaError) as refused:
        txns.check_produce("tx", producer_id, epoch, ("t", 2))
    assert refused.value.code == ErrorCode.INVALID_TXN_STATE
    assert txns.describe("tx").state == TxnState.ONGOING
    await assert_replays_to_the_same_state(txns)
    await txns.end("tx", producer_id, epoch, commit=True)
    marker = Marker(producer_id, epoch, True, 0)
    assert txns.markers.written == [("__consumer_offsets", 3, marker), ("t", 0, marker), ("t", 1, marker)]
    assert txns.describe("tx").state == TxnState.COMPLETE_COMMIT and txns.describe("tx").partitions == frozenset()
    await assert_replays_to_the_same_state(txns)
    assert await txns.init_producer("tx", 60_000, (producer_id, epoch)) == (producer_id, epoch + 1)
    await assert_replays_to_the_same_state(txns)
    await txns.close()


async def test_markers_are_retried_with_backoff_on_the_clock():
    txns = await coordinator()
    producer_id, epoch = await open_transaction(txns, [("t", 0)])
    txns.markers.refusals[("t", 0)] = 3
    ending = asyncio.ensure_future(txns.end("tx", producer_id, epoch, commit=False))
    await txns.clock.advance(100 + 200 + 399)  # backoffs of 100, 200 and 400 ms
    assert not ending.done() and txns.describe("tx").state == TxnState.PREPARE_ABORT
    await txns.clock.advance(1)
    await ending
    assert txns.markers.written == [("t", 0, Marker(producer_id, epoch, False, 0))]
    assert txns.describe("tx").state == TxnState.COMPLETE_ABORT
    await txns.close()


async def test_markers_refused_every_time_leave_the_transaction_prepared_until_the_periodic_check(caplog):
    txns = await coordinator()
    producer_id, epoch = await open_transaction(txns, [("t", 0)])
    txns.markers.refusals[("t", 0)] = 10
    ending = asyncio.ensure_future(txns.end("tx", producer_id, epoch, commit=True))
    with caplog.at_level(logging.WARNING, logger="kgate.gateway.transactions"):
        await txns.clock.advance(11_100)  # ten attempts take 100 + 200 + 400 + 800 + 1600 + 4 * 2000 ms
    with pytest.raises(KafkaError) as refused:
        await ending
    assert refused.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert sum("attempt" in message for message in caplog.messages) == 10
    assert txns.describe("tx").state == TxnState.PREPARE_COMMIT and txns.markers.written == []
    with pytest.raises(KafkaError) as refused:  # the client's retry of EndTxn
        await txns.end("tx", producer_id, epoch, commit=True)
    assert refused.value.code == ErrorCode.CONCURRENT_TRANSACTIONS
    await txns.clock.advance(CHECK_MS)  # the shard's check delivers them
    assert txns.markers.written == [("t", 0, Marker(producer_id, epoch, True, 0))]
    assert txns.describe("tx").state == TxnState.COMPLETE_COMMIT
    await txns.end("tx", producer_id, epoch, commit=True)  # the retry now finds it done
    await txns.close()


async def test_a_transaction_left_prepared_by_a_crash_is_ended_by_the_next_owner():
    txns = await coordinator()
    producer_id, epoch = await open_transaction(txns, [("t", 0)])
    txns.markers.refusals[("t", 0)] = 1
    ending = asyncio.ensure_future(txns.end("tx", producer_id, epoch, commit=True))
    await settle()
    assert txns.describe("tx").state == TxnState.PREPARE_COMMIT
    txns.lose(0)  # the broker dies (or hands over) with the markers not written
    txns.writer.epochs[0] = 1
    await txns.clock.advance(100)
    with pytest.raises(KafkaError):  # the old coordinator's delivery stops
        await ending
    successor = await coordinator(txns.writer)
    assert successor.describe("tx").state == TxnState.PREPARE_COMMIT
    await successor.clock.advance(0)  # its first check runs as it loads
    assert successor.markers.written == [("t", 0, Marker(producer_id, epoch, True, 1))]
    assert successor.describe("tx").state == TxnState.COMPLETE_COMMIT
    await assert_replays_to_the_same_state(successor)
    await successor.close()


async def test_a_crash_between_two_markers_writes_them_all_again_and_commits_once():
    txns = await coordinator()
    producer_id, epoch = await open_transaction(txns, [("a", 0), ("b", 0)])
    txns.markers.refusals[("b", 0)] = 1
    ending = asyncio.ensure_future(txns.end("tx", producer_id, epoch, commit=True))
    await settle()
    assert [(topic, index) for topic, index, _ in txns.markers.written] == [("a", 0)]
    txns.lose(0)  # dies after a's marker, before b's
    await txns.clock.advance(100)
    with pytest.raises(KafkaError):  # the old coordinator's delivery stops
        await ending
    successor = await coordinator(txns.writer, txns.markers)
    await successor.clock.advance(0)
    marker = Marker(producer_id, epoch, True, 0)
    assert txns.markers.written == [("a", 0, marker), ("a", 0, marker), ("b", 0, marker)]  # a's again: harmless
    assert successor.describe("tx").state == TxnState.COMPLETE_COMMIT
    await assert_replays_to_the_same_state(successor)
    await successor.close()


async def test_delivery_stops_when_the_transaction_moves_to_another_coordinator():
    txns = await coordinator()
    producer_id, epoch = await open_transaction(txns, [("t", 0)])
    txns.markers.refusals[("t", 0)] = 5
    ending = asyncio.ensure_future(txns.end("tx", producer_id, epoch, commit=True))
    await settle()
    txns.runtime.shards.clear()  # lost between two attempts (its timers are gone with it)
    txns.cluster.moved.add(0)
    await txns.clock.advance(100)
    with pytest.raises(KafkaError) as refused:
        await ending
    assert refused.value.code == ErrorCode.NOT_COORDINATOR and txns.markers.written == []
    with pytest.raises(KafkaError) as refused:
        await txns.init_producer("tx", 60_000, None)
    assert refused.value.code == ErrorCode.NOT_COORDINATOR


async def test_an_open_transaction_past_its_timeout_is_aborted_on_the_clock_and_its_producer_fenced():
    txns = await coordinator()
    producer_id, epoch = await open_transaction(txns, [("t", 0)], timeout_ms=15_000)
    await txns.clock.advance(CHECK_MS)
    assert txns.describe("tx").state == TxnState.ONGOING
    await txns.clock.advance(CHECK_MS)  # 20 s since it started
    assert txns.markers.written == [("t", 0, Marker(producer_id, epoch + 1, False, 0))]
    assert txns.describe("tx").state == TxnState.COMPLETE_ABORT and txns.describe("tx").epoch == epoch + 1
    with pytest.raises(KafkaError) as refused:
        await txns.end("tx", producer_id, epoch, commit=True)
    assert refused.value.code == ErrorCode.PRODUCER_FENCED
    await assert_replays_to_the_same_state(txns)
    await txns.close()


async def test_init_producer_aborts_the_open_transaction_of_the_previous_epoch_first():
    txns = await coordinator()
    producer_id, epoch = await open_transaction(txns, [("t", 0)])
    assert await txns.init_producer("tx", 60_000, None) == (producer_id, epoch + 2)
    assert txns.markers.written == [("t", 0, Marker(producer_id, epoch + 1, False, 0))]
    assert txns.describe("tx").state == TxnState.EMPTY
    await assert_replays_to_the_same_state(txns)
    await txns.close()


async def test_compaction_keeps_every_transaction():
    writer = MemoryPartitionWriter()
    txns = await coordinator(writer)
    txns.runtime.compaction_min_records = 20
    for i in range(5):
        producer_id, epoch = await txns.init_producer(f"tx{i}", 60_000, None)
        for _ in range(3):
            await txns.add_partitions(f"tx{i}", producer_id, epoch, [("t", 0)])
            await txns.end(f"tx{i}", producer_id, epoch, commit=True)
    await settle()
    assert writer.rolls >= 1 and writer.records() < 20
    await assert_replays_to_the_same_state(txns)
    await txns.close()


async def test_delivery_writes_partitions_in_order_and_gives_up_after_its_attempts():
    clock, markers = FakeClock(), RecordingMarkers()
    delivery = MarkerDelivery(markers, clock, attempts=2, first_backoff_ms=50)
    markers.refusals[("b", 0)] = 2
    marker = Marker(1, 0, True, 0)
    delivering = asyncio.ensure_future(delivery.deliver("tx", [("b", 0), ("a", 1)], marker, lambda: True))
    await clock.advance(50)
    with pytest.raises(KafkaError) as refused:
        await delivering
    assert refused.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE and markers.written == [("a", 1, marker)]


async def test_a_marker_written_after_refusals_says_so_after_their_warnings(caplog):
    """A fault run's drain waited on a partition whose markers had been refused and were not seen
    written: a marker that needed retries says when it is written."""
    clock, markers = FakeClock(), RecordingMarkers()
    delivery = MarkerDelivery(markers, clock, attempts=3, first_backoff_ms=50)
    markers.refusals[("b", 0)] = 1
    delivering = asyncio.ensure_future(delivery.deliver("tx", [("b", 0), ("a", 1)], Marker(1, 0, False, 0),
                                                        lambda: True))
    with caplog.at_level(logging.INFO, logger=marker_delivery.log.name):
        await clock.advance(50)
        await delivering
    said = [record.getMessage() for record in caplog.records if record.name == marker_delivery.log.name]
    assert said == ["marker for tx to b-0 failed (attempt 1 of 3): b-0 unreachable",
                    "marker for tx to b-0 written at attempt 2"], said


async def test_a_marker_write_that_never_ends_counts_as_a_failed_attempt_and_is_tried_again():
    """A marker appended to a partition being handed over can wait for durability for good;
    the delivery must not wait with it (the transactional id's lock is held meanwhile)."""
    clock = FakeClock()
    never = asyncio.get_running_loop().create_future()  # the first write's durability, never reached

    class FirstWriteHangs(RecordingMarkers):
        calls = 0

        async def write(self, topic, index, marker):
            self.calls += 1
            if self.calls == 1:
                await never
            await super().write(topic, index, marker)

    markers = FirstWriteHangs()
    delivery = MarkerDelivery(markers, clock, attempts=3, first_backoff_ms=50, attempt_timeout_ms=1000)
    marker = Marker(1, 0, True, 0)
    delivering = asyncio.ensure_future(delivery.deliver("tx", [("a", 0)], marker, lambda: True))
    await clock.advance(999)
    assert not delivering.done() and markers.calls == 1
    await clock.advance(1 + 50)  # the attempt times out, and the retry comes after its backoff
    await delivering
    assert markers.calls == 2 and markers.written == [("a", 0, marker)]
    never.cancel()  # the overrun write, left running by the delivery
    await settle()


async def test_a_write_still_running_when_its_delivery_is_cancelled_may_fail_unwatched():
    """A coordinator partition handed over cancels its deliveries; a marker write still running
    then fails on its own, and nobody is left to hear it: not an error for the event loop to log."""
    failing = asyncio.get_running_loop().create_future()

    class WriteFailsLater(RecordingMarkers):
        async def write(self, topic, index, marker):
            await failing

    reported = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(context["message"]))
    delivery = MarkerDelivery(WriteFailsLater(), FakeClock(), attempts=3, first_backoff_ms=50, attempt_timeout_ms=1000)
    delivering = asyncio.ensure_future(delivery.deliver("tx", [("a", 0)], Marker(1, 0, True, 0), lambda: True))
    await settle()
    delivering.cancel()
    await settle()
    failing.set_exception(TimeoutError("the partition's owner did not answer"))
    await settle()
    del delivering
    gc.collect()  # an unretrieved task exception is reported when the task is collected
    assert reported == []
