"""State behind the admin APIs: a log start moved by DeleteRecords across reopens, a
topic's partition count grown by compare-and-set, the producers DescribeProducers
lists, and OffsetForLeaderEpoch's answers for a log with one leader epoch."""
import asyncio

import pytest

from kgate.gateway.handlers.leader_epochs import end_offset_for
from kgate.gateway.producer_state import ActiveProducer, ProducerStateTable, SequenceError
from kgate.metadata.cluster import ClusterState, NotAnIncrease, UnknownTopic
from kgate.metadata.stores.embedded import EmbeddedMetadataStore
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.record_batch import read_header
from kgate.storage.ledger import LedgerFenced
from tests.unit.record_batches import BASE_TIMESTAMP, build_batch
from tests.unit.test_managed_ledger import Partition, append, offsets


@pytest.fixture
def partition(tmp_path):
    return Partition(tmp_path)


@pytest.mark.parametrize("clean", [True, False])
async def test_trimmed_log_start_survives_a_reopen(partition, clean):
    ledger = await partition.open()
    for _ in range(10):
        await append(ledger)                      # three entries per ledger: 0-2, 3-5, 6-8, 9
    await ledger.trim_before(7)
    assert ledger.log_start_offset == 7 and ledger.ledger_first_offsets() == [6, 9]
    assert await ledger.read(5, 1 << 20) == []
    await partition.stop(clean)

    ledger = await partition.open()
    assert ledger.log_start_offset == 7
    assert await ledger.read(6, 1 << 20) == []
    assert offsets(await ledger.read(7, 1 << 20)) == [(7, 1), (8, 1), (9, 1)]
    assert await append(ledger) == 10


async def test_trim_to_the_high_watermark_keeps_only_the_open_ledger(partition):
    ledger = await partition.open()
    for _ in range(7):
        await append(ledger)
    size = ledger.size_bytes
    await ledger.trim_before(ledger.high_watermark)
    assert ledger.log_start_offset == 7 and ledger.ledger_first_offsets() == [6]
    assert ledger.size_bytes < size and await ledger.read(7, 1 << 20) == []
    with pytest.raises(ValueError):
        await ledger.trim_before(8)               # beyond the high watermark


async def test_add_partitions_keeps_configs_and_refuses_no_increase(tmp_path):
    store = EmbeddedMetadataStore(str(tmp_path / "metadata.sqlite"))
    mine, theirs = ClusterState(store), ClusterState(store)
    await mine.create_topic("t", 2, {"retention.ms": "1000"})
    await theirs.load()
    # Another writer changes the configs after our copy was read: the count lands with them.
    await theirs.alter_topic_configs("t", {"retention.ms": "2000"})
    grown = await mine.add_partitions("t", 5)
    assert (grown.partitions, grown.configs) == (5, {"retention.ms": "2000"})
    await theirs.load()
    assert theirs.topics["t"].partitions == 5
    with pytest.raises(NotAnIncrease) as refused:
        await mine.add_partitions("t", 5)
    assert refused.value.args == (5,)
    with pytest.raises(UnknownTopic):
        await mine.add_partitions("absent", 3)
    await store.close()


def batch(producer_id, epoch, base_sequence, count):
    return read_header(build_batch([b"v"] * count, producer_id=producer_id, producer_epoch=epoch,
                                   base_sequence=base_sequence))


def test_active_producers_report_their_last_batch():
    table = ProducerStateTable()
    assert table.active() == []
    table.record(batch(7, 0, 0, 3), 0, None)
    table.record(batch(7, 0, 3, 2), 3, None)
    table.record(batch(9, 2, 0, 1), 5, None)
    assert sorted(table.active(), key=lambda p: p.producer_id) == [
        ActiveProducer(7, 0, 4, BASE_TIMESTAMP + 1), ActiveProducer(9, 2, 0, BASE_TIMESTAMP)]
    table.record(batch(7, 1, 0, 4), 6, None)      # a new epoch starts over
    assert ActiveProducer(7, 1, 3, BASE_TIMESTAMP + 3) in table.active()


async def test_batches_the_log_gave_up_are_new_again_for_their_retries():
    """Entries whose fsync failed are dropped from the log, so a retry of their batches must
    be stored anew, at the sequence after the last batch that was kept."""
    loop = asyncio.get_running_loop()
    kept, lost, also_lost = loop.create_future(), loop.create_future(), loop.create_future()
    kept.set_result(None)
    for future in (lost, also_lost):
        future.set_exception(OSError(5, "Input/output error"))
    table = ProducerStateTable()
    table.record(batch(7, 0, 0, 3), 0, kept)
    table.record(batch(7, 0, 3, 2), 3, lost)
    table.record(batch(7, 0, 5, 1), 5, also_lost)
    assert table.check(batch(7, 0, 0, 3), 3).durable is kept  # still a duplicate of what was kept
    assert table.check(batch(7, 0, 3, 2), 3) is None  # the retry is stored, not answered from the cache
    with pytest.raises(SequenceError):
        table.check(batch(7, 0, 5, 1), 3)  # and the next one follows it


async def test_batches_sent_behind_a_given_up_one_are_refused_as_it_was_not_found_out_of_order():
    """A full disk failed a batch's write and the log gave it up (its client was answered
    KAFKA_STORAGE_ERROR): the batches the client had pipelined behind it get the same retriable
    error, so it sends them all again in order. OUT_OF_ORDER_SEQUENCE_NUMBER made librdkafka
    start a new epoch and send its unacknowledged records again on every partition (fault run
    seed 21: a record stored but not answered elsewhere was stored twice). At most the four a
    producer can have behind one; then, and for transactional batches, the check's own answer."""
    lost = asyncio.get_running_loop().create_future()
    lost.set_exception(OSError(28, "No space left on device"))
    table = ProducerStateTable()
    table.record(batch(7, 0, 0, 3), 0, None)
    table.record(batch(7, 0, 3, 2), 3, lost)
    for behind in range(4):
        with pytest.raises(SequenceError) as refused:
            table.check(batch(7, 0, 5 + behind, 1), 3)
        assert (refused.value.code, refused.value.expected) == (ErrorCode.KAFKA_STORAGE_ERROR, 3)
    with pytest.raises(SequenceError) as refused:
        table.check(batch(7, 0, 9, 1), 3)
    assert refused.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert table.check(batch(7, 0, 3, 2), 3) is None  # the retry, in order, is taken
    table.record(batch(7, 0, 3, 2), 3, None)
    assert table.check(batch(7, 0, 5, 1), 5) is None


async def test_a_transactional_batch_behind_a_given_up_one_gets_the_checks_answer():
    lost = asyncio.get_running_loop().create_future()
    lost.set_exception(OSError(28, "No space left on device"))
    table = ProducerStateTable()
    table.record(batch(7, 0, 0, 3), 0, lost)
    transactional = read_header(build_batch([b"v"], producer_id=7, producer_epoch=0, base_sequence=3,
                                            transactional=True))
    with pytest.raises(SequenceError) as refused:
        table.check(transactional, 0)
    assert refused.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_batches_skipping_ahead_of_a_log_just_read_back_are_refused_retriably_until_one_is_stored():
    """A partition dropped here and opened again (its metadata session expired, its ledger fenced)
    reads its producers back from the log, which lacks the batches whose writes were given up
    with it; their clients send them again, but the batches pipelined behind them on the same
    connection may come first. They get KAFKA_STORAGE_ERROR, as behind a given-up write, not
    OUT_OF_ORDER_SEQUENCE_NUMBER (which makes librdkafka start a new epoch). At most four; a
    sequence behind the log's, and once a batch is stored, a gap, get the check's own answer."""
    table = ProducerStateTable()
    table.read_back(batch(7, 0, 0, 3), 0)
    for behind in range(4):
        with pytest.raises(SequenceError) as refused:
            table.check(batch(7, 0, 6 + behind, 1), 3)
        assert (refused.value.code, refused.value.expected) == (ErrorCode.KAFKA_STORAGE_ERROR, 3)
        assert "which the log opened here does not hold" in refused.value.message
    with pytest.raises(SequenceError) as refused:
        table.check(batch(7, 0, 10, 1), 3)
    assert refused.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER

    table.read_back(batch(8, 0, 0, 3), 3)
    with pytest.raises(SequenceError) as rewound:
        table.check(batch(8, 0, 1, 1), 6)  # not behind a missing batch: a retry the cache no longer has
    assert rewound.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert table.check(batch(8, 0, 3, 2), 6) is None  # the batch it missed, sent again
    table.record(batch(8, 0, 3, 2), 6, None)
    with pytest.raises(SequenceError) as skipped:
        table.check(batch(8, 0, 9, 1), 8)
    assert skipped.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_transactional_batch_skipping_ahead_of_a_log_just_read_back_gets_the_checks_answer():
    table = ProducerStateTable()
    table.read_back(batch(7, 0, 0, 3), 0)
    transactional = read_header(build_batch([b"v"], producer_id=7, producer_epoch=0, base_sequence=5,
                                            transactional=True))
    with pytest.raises(SequenceError) as refused:
        table.check(transactional, 3)
    assert refused.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


async def test_a_producer_whose_every_cached_batch_was_given_up_resumes_at_the_first():
    lost = asyncio.get_running_loop().create_future()
    lost.set_exception(OSError(28, "No space left on device"))
    table = ProducerStateTable()
    table.record(batch(7, 0, 10, 2), 0, lost)
    assert table.check(batch(7, 0, 10, 2), 0) is None


async def test_failed_batches_the_log_still_counts_stay_cached_for_their_retries():
    """A WAL object written whose ledger was then fenced (the metadata session was in doubt):
    its entries keep their offsets and may be recovered by the next owner. Their retry meets
    the cached batch (answered with its failure, NOT_LEADER_FOR_PARTITION), and the batch after
    them is in sequence: OUT_OF_ORDER_SEQUENCE_NUMBER here made librdkafka start a new epoch
    and send the records again, stored twice (fault run seed 21)."""
    fenced = asyncio.get_running_loop().create_future()
    fenced.set_exception(LedgerFenced("WAL object: this broker's metadata session was lost"))
    table = ProducerStateTable()
    table.record(batch(7, 0, 0, 3), 0, None)
    table.record(batch(7, 0, 3, 2), 3, fenced)
    assert table.check(batch(7, 0, 3, 2), 5).durable is fenced
    assert table.check(batch(7, 0, 5, 1), 5) is None


@pytest.mark.parametrize("requested, answer", [
    (0, (0, 50)),      # the current epoch ends at the high watermark
    (-1, (-1, -1)),    # undefined
    (1, (-1, -1)),     # newer than any epoch the log has
    (-4, (-4, 10)),    # older than any: the start of the first epoch after it
])
def test_end_offset_for_a_log_with_one_epoch(requested, answer):
    assert end_offset_for(requested, [[0, 0]], log_start=10, end=50) == answer


@pytest.mark.parametrize("requested, answer", [
    (5, (5, 80)),      # the current epoch
    (3, (3, 60)),      # an earlier one ends where the next begins
    (4, (3, 60)),      # a gap (a broker that took over and gave up at once): the epoch before it
    (1, (1, 20)),      # the first epoch, its start clamped to the log start
    (0, (0, 20)),      # older than every epoch
    (6, (-1, -1)),
])
def test_end_offset_for_a_log_that_changed_owners(requested, answer):
    assert end_offset_for(requested, [[1, 0], [3, 10], [5, 60]], log_start=20, end=80) == answer
