"""Markers, partitions' transaction indexes and the coordinator's recovery, over real ledgers.

Partitions are the broker's own (gateway.partition over a managed ledger on the file
store and the embedded metadata store); the coordinator reaches them through the
runtime's ledger-backed writer and the broker's marker writer, on a fake clock.
"""
import asyncio
import os

import pytest
from kafka.record.default_records import DefaultRecordBatch

from kgate.gateway import keyed_log
from kgate.gateway.chain_records import MetadataChainRecord
from kgate.gateway.config import Settings
from kgate.gateway.coordinator import LedgerPartitionWriter
from kgate.gateway.partition import Partition
from kgate.gateway.partition_transactions import AbortedTransaction
from kgate.gateway.producer_state import SequenceError
from kgate.gateway.transactions import TRANSACTION_STATE_TOPIC, TransactionCoordinator, machine, records
from kgate.gateway.transactions.machine import TxnState
from kgate.gateway.transactions.marker_writer import BrokerMarkerWriter
from kgate.metadata.cluster import ClusterState, Topic
from kgate.metadata.stores.embedded import EmbeddedMetadataStore
from kgate.protocol import control_batch, record_batch
from kgate.protocol.error_codes import ErrorCode
from kgate.storage import entry_formats
from kgate.storage.entry_formats import ProducedRecords
from kgate.storage.ledger import LedgerFenced
from kgate.storage.managed_ledger import ManagedLedger
from kgate.storage.stores.file_store import FileLedgerStore
from tests.unit.fake_clock import FakeClock
from tests.unit.record_batches import build_batch
from tests.unit.stand_in_cluster import StandInCluster

KAFKA = entry_formats.by_name("kafka")


class Storage:
    """Partitions over one directory, reopened as a restarted broker would reopen them."""

    def __init__(self, directory):
        self.directory = str(directory)
        self.metadata = None

    async def partition(self, topic: str, index: int) -> Partition:
        if self.metadata is None:
            self.metadata = EmbeddedMetadataStore(os.path.join(self.directory, "metadata.sqlite"))
            self.cluster = ClusterState(self.metadata)
        ledger = ManagedLedger(f"{topic}-{index}", FileLedgerStore(os.path.join(self.directory, "ledgers")),
                               MetadataChainRecord(self.metadata, f"/managed-ledgers/{topic}/{index}"),
                               lambda: self.cluster.allocate("ledger-id"))
        partition = Partition(topic, index, ledger)
        await partition.open()
        return partition

    async def stop(self):
        await self.metadata.close()


@pytest.fixture
def storage(tmp_path):
    return Storage(tmp_path)


async def produce(partition: Partition, producer_id=-1, epoch=-1, sequence=-1, transactional=False, count=2) -> int:
    data = build_batch([b"v"] * count, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                       transactional=transactional)
    base, durable = await partition.append(ProducedRecords.of_batch(memoryview(data), record_batch.validate(data)),
                                           KAFKA)
    await durable
    return base


def test_a_marker_is_a_control_batch_kafka_clients_read():
    data = control_batch.build(producer_id=9, producer_epoch=2, commit=False, coordinator_epoch=4, timestamp_ms=5)
    header = record_batch.validate(data)
    assert header.is_control and header.is_transactional and (header.producer_id, header.producer_epoch) == (9, 2)
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc() and batch.is_control_batch
    [record] = list(batch)
    assert record.type == control_batch.ABORT
    assert control_batch.marker_type(data) == control_batch.ABORT
    assert control_batch.marker_type(control_batch.build(9, 2, True, 4, 5)) == control_batch.COMMIT
    assert control_batch.marker_type(data[:record_batch.HEADER_SIZE + 3]) is None


async def test_the_last_stable_offset_and_aborted_transactions_survive_a_restart(storage):
    partition = await storage.partition("t", 0)
    await produce(partition)                                              # 0-1 plain
    first = await produce(partition, 5, 0, 0, transactional=True)        # 2-3 producer 5, aborted below
    await produce(partition, 6, 0, 0, transactional=True)                # 4-5 producer 6, left open
    assert partition.transactions.last_stable_offset(partition.ledger.high_watermark) == first
    await (await partition.append_marker(5, 0, commit=False, coordinator_epoch=0, timestamp_ms=1))  # 6
    await produce(partition)                                              # 7-8 plain
    lso = partition.transactions.last_stable_offset(partition.ledger.high_watermark)
    assert lso == 4
    aborted = [AbortedTransaction(5, 2, 6)]
    assert partition.transactions.aborted_between(0, 9, 0) == aborted
    assert partition.transactions.aborted_between(7, 9, 0) == []
    await partition.ledger.close()

    reopened = await storage.partition("t", 0)
    assert reopened.transactions.last_stable_offset(reopened.ledger.high_watermark) == 4
    assert reopened.transactions.aborted_between(0, 9, 0) == aborted
    assert reopened.transactions.aborted_between(0, 9, log_start=7) == []  # forgotten with the log before it
    await (await reopened.append_marker(6, 0, True, 0, 1))
    assert reopened.transactions.last_stable_offset(reopened.ledger.high_watermark) == reopened.ledger.high_watermark
    await reopened.ledger.close()
    await storage.stop()


async def test_a_marker_of_a_newer_epoch_fences_the_producers_older_batches(storage):
    partition = await storage.partition("t", 0)
    await produce(partition, 5, 0, 0, transactional=True)
    await (await partition.append_marker(5, 1, commit=False, coordinator_epoch=0, timestamp_ms=1))
    with pytest.raises(SequenceError) as refused:
        await produce(partition, 5, 0, 2, transactional=True)
    assert refused.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    await produce(partition, 5, 1, 0, transactional=True)  # the new epoch starts again at sequence 0
    await partition.ledger.close()
    await storage.stop()


async def test_replay_counts_transactional_records_only_after_their_commit_marker(storage):
    partition = await storage.partition("__consumer_offsets", 0)
    await partition.ledger.prepare_append()
    await asyncio.gather(*keyed_log.append(partition, [(b"plain", b"1")]))
    await asyncio.gather(*keyed_log.append(partition, [(b"committed", b"2")], producer=(5, 0)))
    await asyncio.gather(*keyed_log.append(partition, [(b"aborted", b"3")], producer=(6, 0)))
    await asyncio.gather(*keyed_log.append(partition, [(b"open", b"4")], producer=(7, 0)))
    await (await partition.append_marker(5, 0, True, 0, 1))
    await (await partition.append_marker(6, 0, False, 0, 1))
    replayed = await keyed_log.replay(partition.ledger)
    assert replayed.latest == {b"plain": b"1", b"committed": b"2"}
    assert replayed.open_transactions == {7: {b"open": b"4"}}
    await partition.ledger.close()
    await storage.stop()


def coordinator_over(partitions: dict, clock: FakeClock) -> TransactionCoordinator:
    """The transaction coordinator over real partitions, writing markers to those it is given."""
    settings = Settings()
    settings.values["transaction.state.log.num.partitions"] = 1
    topics = {name: Topic(name, 1, {}) for name, _ in partitions}
    markers = BrokerMarkerWriter(0, partitions, lambda: topics, lambda topic, index: None, lambda: None, clock,
                                 lambda index, producer_id, commit: None)

    async def no_producer_id():
        raise AssertionError("the transaction has its producer id")

    writer = LedgerPartitionWriter(TRANSACTION_STATE_TOPIC, partitions)
    return TransactionCoordinator(settings, StandInCluster(), writer, clock, markers, no_producer_id)


async def test_a_transaction_left_in_prepare_commit_completes_its_markers_when_the_log_is_replayed(storage):
    data = await storage.partition("t", 0)
    state = await storage.partition(TRANSACTION_STATE_TOPIC, 0)
    first = coordinator_over({("t", 0): data, (TRANSACTION_STATE_TOPIC, 0): state}, FakeClock())
    await first.gain(0)
    txn = machine.init_producer(None, "tx", 10_000, 60_000, None, 5, now=1).store
    await first.runtime.write(0, lambda shard, now: shard.store(machine.Step(store=txn)))
    await first.add_partitions("tx", 5, 0, [("t", 0)])
    first.check_produce("tx", 5, 0, ("t", 0))  # added: no refusal
    await produce(data, 5, 0, 0, transactional=True)
    await first.runtime.write(0, lambda shard, now: shard.store(machine.end(shard.transactions["tx"], 5, 0, True,
                                                                            now)))
    # The broker dies here: PrepareCommit is durable, no marker was written.
    await first.close()
    assert data.transactions.last_stable_offset(data.ledger.high_watermark) == 0
    await data.ledger.close()
    await state.ledger.close()

    data = await storage.partition("t", 0)
    state = await storage.partition(TRANSACTION_STATE_TOPIC, 0)
    assert data.transactions.last_stable_offset(data.ledger.high_watermark) == 0  # still open after the restart
    clock = FakeClock()
    second = coordinator_over({("t", 0): data, (TRANSACTION_STATE_TOPIC, 0): state}, clock)
    await second.gain(0)
    await clock.advance(0)  # the shard's first check ends what it finds prepared, through real ledgers
    async with asyncio.timeout(10):
        while state.ledger.high_watermark < 4:  # three records before the restart, then CompleteCommit
            await asyncio.sleep(0.01)
    assert second.transactions["tx"].state == TxnState.COMPLETE_COMMIT
    assert data.transactions.last_stable_offset(data.ledger.high_watermark) == data.ledger.high_watermark == 3
    assert data.transactions.aborted_between(0, 3, 0) == []
    [(key, value)] = (await keyed_log.replay(state.ledger)).latest.items()
    assert records.decode(key, value)[1].state == TxnState.COMPLETE_COMMIT
    await second.close()
    await data.ledger.close()
    await state.ledger.close()
    await storage.stop()


def test_a_fenced_producers_produce_is_refused_as_fenced_not_as_an_unadded_partition():
    txn = machine.init_producer(None, "tx", 10_000, 60_000, None, 5, now=1).store
    txn = machine.add_partitions(txn, 5, 0, {("t", 0)}, now=2).store
    # A second instance with the same transactional id: the epoch moves on, the first is fenced.
    txn = machine.init_producer(txn, "tx", 10_000, 60_000, None, 5, now=3).store
    fenced = machine.produce_refusal(txn, "tx", 5, 0, ("t", 0))
    assert fenced is not None and fenced[0] == ErrorCode.INVALID_PRODUCER_EPOCH
    assert "fenced" in fenced[1] and "has not added" not in fenced[1]
    unadded = machine.produce_refusal(txn, "tx", 5, 1, ("t", 1))
    assert unadded is not None and unadded[0] == ErrorCode.INVALID_TXN_STATE and "has not added" in unadded[1]


async def test_after_its_ledger_refused_an_append_as_fenced_every_batch_is_refused_before_its_sequence_check(
        storage, monkeypatch):
    """As a broker that no longer leads the partition refuses them: the batch after the refused
    one answered OUT_OF_ORDER_SEQUENCE_NUMBER made librdkafka start a new epoch and send records
    again under new sequences, stored twice by the next owner (fault run seed 23)."""
    partition = await storage.partition("t", 0)
    await produce(partition, 5, 0, 0)  # sequences 0-1

    def fenced(*args):
        raise LedgerFenced("ledger 1 is closed")
    monkeypatch.setattr(partition.ledger, "append", fenced)
    with pytest.raises(LedgerFenced):
        await produce(partition, 5, 0, 2)
    with pytest.raises(LedgerFenced):  # not SequenceError: "sent sequence 4, expected 2"
        await produce(partition, 5, 0, 4)
    monkeypatch.undo()
    await partition.ledger.close()
    await storage.stop()
