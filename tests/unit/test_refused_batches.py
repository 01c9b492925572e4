"""A connection's memory of idempotent batches refused before their sequence check: the
batches pipelined behind one hear its error, not OUT_OF_ORDER_SEQUENCE_NUMBER (fault run
seed 12; the end-to-end test is in tests/integration/test_cluster_faults.py)."""
import pytest

from kgate.gateway.producer_state import ProducerStateTable, SequenceError
from kgate.gateway.refused_batches import RefusedBatches, RefusedBehind
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.protocol.record_batch import read_header
from tests.unit.record_batches import build_batch

KEY = ("idem", 2)
NOT_LEADER = KafkaError(ErrorCode.NOT_LEADER_FOR_PARTITION)


def records(base_sequence, count=1, producer_id=2000, epoch=0):
    return build_batch([b"v"] * count, producer_id=producer_id, producer_epoch=epoch, base_sequence=base_sequence)


def out_of_order(table, base_sequence, producer_id=2000, epoch=0):
    """What the partition's sequence check raises for the batch at ``base_sequence``."""
    header = read_header(records(base_sequence, producer_id=producer_id, epoch=epoch))
    with pytest.raises(SequenceError) as raised:
        table.check(header, 389)
    return header, raised.value


@pytest.fixture
def table():
    """A partition whose producer 2000 last stored sequences 386-388."""
    state = ProducerStateTable()
    state.record(read_header(records(386, 3)), 0, None)
    return state


def test_the_batch_behind_a_refused_one_gets_its_error(table):
    refused = RefusedBatches()
    refused.refused(KEY, records(389, 3), KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "its tail is elsewhere"))
    header, gap = out_of_order(table, 392)
    assert gap.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and gap.expected == 389
    answer = refused.answer(KEY, header, gap)
    assert isinstance(answer, RefusedBehind) and answer.code == ErrorCode.KAFKA_STORAGE_ERROR


@pytest.mark.parametrize("refused_first, sent", [
    (390, 392),  # the refused batch is not the one the partition misses
    (389, 385),  # a rewind, not a batch behind the refused one: the check's to answer
])
def test_a_gap_the_refused_batch_does_not_explain_keeps_the_checks_answer(table, refused_first, sent):
    refused = RefusedBatches()
    refused.refused(KEY, records(refused_first), NOT_LEADER)
    header, gap = out_of_order(table, sent)
    assert refused.answer(KEY, header, gap) is gap


def test_another_producer_or_epoch_keeps_the_checks_answer(table):
    refused = RefusedBatches()
    refused.refused(KEY, records(389), NOT_LEADER)
    for producer_id, epoch in ((2001, 0), (2000, 1)):
        state = ProducerStateTable()
        state.record(read_header(records(386, 3, producer_id, epoch)), 0, None)
        header = read_header(records(392, producer_id=producer_id, epoch=epoch))
        with pytest.raises(SequenceError) as raised:
            state.check(header, 3)
        assert refused.answer(KEY, header, raised.value) is raised.value


def test_only_the_batches_a_producer_can_have_behind_one_are_refused_alike(table):
    """Four (five in flight at most): a client that really skipped sequences hears Kafka's answer."""
    refused = RefusedBatches()
    refused.refused(KEY, records(389, 3), NOT_LEADER)
    answers = [refused.answer(KEY, *out_of_order(table, sequence)) for sequence in range(392, 397)]
    assert [a.code for a in answers] == [ErrorCode.NOT_LEADER_FOR_PARTITION] * 4 + [
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER]
    refused.refused(KEY, records(389, 3), NOT_LEADER)  # refused again when sent again: four more
    assert refused.answer(KEY, *out_of_order(table, 392)).code == ErrorCode.NOT_LEADER_FOR_PARTITION


def test_a_batch_taken_from_the_producer_forgets_its_refusals(table):
    refused = RefusedBatches()
    refused.refused(KEY, records(389, 3), NOT_LEADER)
    refused.appended(KEY, read_header(records(389, 3, producer_id=2001)))  # another producer's: kept
    header, gap = out_of_order(table, 392)
    assert refused.answer(KEY, header, gap).code == ErrorCode.NOT_LEADER_FOR_PARTITION
    refused.appended(KEY, read_header(records(389, 3)))
    assert refused.answer(KEY, *out_of_order(table, 393)).code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


@pytest.mark.parametrize("refusal, batch", [
    (KafkaError(ErrorCode.INVALID_RECORD, "not sent again"), records(389)),
    (RefusedBehind(ErrorCode.NOT_LEADER_FOR_PARTITION), records(389)),  # else each would renew the bound
    (NOT_LEADER, build_batch([b"v"])),  # not idempotent
    # Transactional: its producer skips the sequences of records it failed with an aborted transaction.
    (NOT_LEADER, build_batch([b"v"], producer_id=2000, producer_epoch=0, base_sequence=389, transactional=True)),
    (NOT_LEADER, b"\0" * 20),  # too short for a batch header
])
def test_refusals_not_remembered(table, refusal, batch):
    refused = RefusedBatches()
    refused.refused(KEY, batch, refusal)
    header, gap = out_of_order(table, 392)
    assert refused.answer(KEY, header, gap) is gap


def test_a_new_epochs_or_an_unknown_producers_gap_says_it_expected_sequence_0():
    state = ProducerStateTable()
    state.record(read_header(records(0, 5)), 0, None)
    for header in (read_header(records(1, epoch=1)), read_header(records(1, producer_id=7))):
        with pytest.raises(SequenceError) as raised:
            state.check(header, 5)
        assert raised.value.expected == 0
