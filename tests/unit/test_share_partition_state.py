"""The share-partition rules (KIP-932), driven by hand: acquisition, each acknowledgement,
lock expiry, redelivery up to the delivery limit, a member leaving, the start offset
moving past finished records, isolation levels, bad acknowledgements, and the stored
state rebuilding the same partition."""
import pytest

from kgate.gateway.shares.partition_state import (
    AckBatch,
    AckType,
    Acquired,
    DeliveryState,
    ShareConfig,
    SharePartitionState,
    Span,
    SpanKind,
)
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

CONFIG = ShareConfig(lock_ms=1000, delivery_limit=3, max_record_locks=100, auto_offset_reset="earliest")
NOW = 10_000


def started(config=CONFIG, log_start=0, log_end=10) -> SharePartitionState:
    state = SharePartitionState()
    assert state.initialize(config, log_start, log_end)
    return state


def ack(state, member, first, last, *types, now=NOW, config=CONFIG):
    state.acknowledge(config, now, member, [AckBatch(first, last, tuple(int(t) for t in types))])


def stored(state):
    return [(b.first, b.last, b.state, b.delivery_count) for b in state.state_batches()]


def test_auto_offset_reset_latest_starts_at_the_log_end_and_earliest_at_its_start():
    latest = started(ShareConfig(), log_start=3, log_end=10)
    assert (latest.start_offset, latest.fetch_offset()) == (10, 10)
    earliest = started(CONFIG, log_start=3, log_end=10)
    assert (earliest.start_offset, earliest.fetch_offset()) == (3, 3)
    assert not earliest.initialize(CONFIG, 3, 20), "a started partition keeps its place"


def test_acquire_hands_out_records_once_with_delivery_count_one():
    state = started()
    assert state.acquire(CONFIG, NOW, "a", [Span(0, 9)], max_records=4) == [Acquired(0, 3, 1)]
    assert state.fetch_offset() == 4
    assert state.acquire(CONFIG, NOW, "b", [Span(0, 9)], max_records=100) == [Acquired(4, 9, 1)]
    assert state.acquire(CONFIG, NOW, "c", [Span(0, 9)], max_records=100) == []
    assert state.next_deadline() == NOW + CONFIG.lock_ms


def test_accept_finishes_records_and_the_start_offset_moves_past_them():
    state = started()
    state.acquire(CONFIG, NOW, "a", [Span(0, 4)], 10)
    ack(state, "a", 1, 2, AckType.ACCEPT)
    assert state.start_offset == 0, "offset 0 is still in flight"
    ack(state, "a", 0, 0, AckType.ACCEPT)
    assert state.start_offset == 3
    assert stored(state) == [(3, 4, DeliveryState.AVAILABLE, 1)]


def test_release_offers_records_again_with_a_higher_delivery_count():
    state = started()
    state.acquire(CONFIG, NOW, "a", [Span(0, 1)], 10)
    ack(state, "a", 0, 1, AckType.RELEASE)
    assert state.fetch_offset() == 0 and state.next_deadline() is None
    assert state.acquire(CONFIG, NOW, "b", [Span(0, 1)], 10) == [Acquired(0, 1, 2)]


def test_reject_archives_records_for_good():
    state = started()
    state.acquire(CONFIG, NOW, "a", [Span(0, 2)], 10)
    ack(state, "a", 0, 2, AckType.ACCEPT, AckType.REJECT, AckType.RELEASE)
    assert state.start_offset == 2, "accepted 0 and rejected 1 are finished"
    assert state.acquire(CONFIG, NOW, "b", [Span(0, 2)], 10) == [Acquired(2, 2, 2)]


def test_an_expired_lock_makes_records_available_to_others():
    state = started()
    state.acquire(CONFIG, NOW, "a", [Span(0, 2)], 10)
    assert not state.expire_locks(CONFIG, NOW + CONFIG.lock_ms - 1)
    assert state.expire_locks(CONFIG, NOW + CONFIG.lock_ms)
    with pytest.raises(KafkaError) as late:
        ack(state, "a", 0, 0, AckType.ACCEPT)
    assert late.value.code == ErrorCode.INVALID_RECORD_STATE
    assert state.acquire(CONFIG, NOW + 2000, "b", [Span(0, 2)], 10) == [Acquired(0, 2, 2)]


def test_renew_extends_the_lock_and_keeps_the_records_acquired():
    state = started()
    state.acquire(CONFIG, NOW, "a", [Span(0, 0)], 10)
    ack(state, "a", 0, 0, AckType.RENEW, now=NOW + 900)
    assert not state.expire_locks(CONFIG, NOW + CONFIG.lock_ms)
    assert state.next_deadline() == NOW + 900 + CONFIG.lock_ms
    ack(state, "a", 0, 0, AckType.ACCEPT, now=NOW + 1500)
    assert state.start_offset == 1


def test_records_are_archived_when_the_delivery_limit_is_reached():
    state = started()
    for delivery in range(1, CONFIG.delivery_limit + 1):
        assert state.acquire(CONFIG, NOW, "a", [Span(0, 0)], 10) == [Acquired(0, 0, delivery)]
        if delivery % 2:
            state.expire_locks(CONFIG, NOW + CONFIG.lock_ms)
        else:
            ack(state, "a", 0, 0, AckType.RELEASE)
    assert state.acquire(CONFIG, NOW, "a", [Span(0, 0)], 10) == []
    assert (state.start_offset, state.records) == (1, {})


def test_a_member_leaving_releases_only_what_it_held():
    state = started()
    state.acquire(CONFIG, NOW, "a", [Span(0, 1)], 10)
    state.acquire(CONFIG, NOW, "b", [Span(0, 3)], 10)
    assert state.release_member(CONFIG, "a")
    assert not state.release_member(CONFIG, "a")
    assert state.acquire(CONFIG, NOW, "c", [Span(0, 3)], 10) == [Acquired(0, 1, 2)]
    ack(state, "b", 2, 3, AckType.ACCEPT)


def test_gaps_and_transaction_markers_are_archived_never_handed_out():
    state = started()
    acquired = state.acquire(CONFIG, NOW, "a", [Span(0, 1), Span(4, 5), Span(6, 6, SpanKind.CONTROL)], 10)
    assert acquired == [Acquired(0, 1, 1), Acquired(4, 5, 1)]
    ack(state, "a", 0, 1, AckType.ACCEPT)
    assert state.start_offset == 4, "the compacted-away 2 and 3 are finished"
    ack(state, "a", 4, 5, AckType.ACCEPT)
    assert state.start_offset == 7


def test_read_committed_archives_aborted_records_and_read_uncommitted_delivers_them():
    spans = [Span(0, 1, SpanKind.ABORTED), Span(2, 2, SpanKind.CONTROL), Span(3, 3)]
    committed = ShareConfig(auto_offset_reset="earliest", isolation_level="read_committed")
    state = started(committed)
    assert state.acquire(committed, NOW, "a", spans, 10) == [Acquired(3, 3, 1)]
    assert state.start_offset == 3
    uncommitted = started()
    assert uncommitted.acquire(CONFIG, NOW, "a", spans, 10) == [Acquired(0, 1, 1), Acquired(3, 3, 1)]


def test_the_in_flight_window_is_bounded_by_max_record_locks():
    config = ShareConfig(max_record_locks=3, auto_offset_reset="earliest")
    state = started(config)
    assert state.acquire(config, NOW, "a", [Span(0, 9)], 10) == [Acquired(0, 2, 1)]
    ack(state, "a", 0, 0, AckType.ACCEPT, config=config)
    assert state.acquire(config, NOW, "a", [Span(0, 9)], 10) == [Acquired(3, 3, 1)]


def test_the_log_start_moving_past_the_start_offset_drops_what_it_passed():
    state = started()
    state.acquire(CONFIG, NOW, "a", [Span(0, 4)], 10)
    assert state.initialize(CONFIG, 3, 10)
    assert (state.start_offset, sorted(state.records)) == (3, [3, 4])
    ack(state, "a", 0, 2, AckType.ACCEPT)  # below the start: ignored, as Kafka ignores it
    ack(state, "a", 3, 4, AckType.ACCEPT)
    assert state.start_offset == 5


@pytest.mark.parametrize("batches, error", [
    ([AckBatch(3, 2, (1,))], ErrorCode.INVALID_REQUEST),
    ([AckBatch(0, 1, (1, 1, 1))], ErrorCode.INVALID_REQUEST),
    ([AckBatch(0, 0, (7,))], ErrorCode.INVALID_REQUEST),
    ([AckBatch(0, 1, (1,)), AckBatch(1, 2, (1,))], ErrorCode.INVALID_REQUEST),
    ([AckBatch(0, 20, (1,))], ErrorCode.INVALID_REQUEST),
    ([AckBatch(3, 3, (1,))], ErrorCode.INVALID_RECORD_STATE),
])
def test_bad_acknowledgements_get_kafkas_error_and_change_nothing(batches, error):
    state = started()
    state.acquire(CONFIG, NOW, "a", [Span(0, 2)], 10)
    state.acquire(CONFIG, NOW, "b", [Span(0, 3)], 10)
    before = stored(state), state.start_offset
    with pytest.raises(KafkaError) as raised:
        state.acknowledge(CONFIG, NOW, "a", batches)
    assert raised.value.code == error
    assert (stored(state), state.start_offset) == before
    assert state.records[0].state == DeliveryState.ACQUIRED


def test_acknowledging_twice_or_another_members_records_is_invalid_record_state():
    state = started()
    state.acquire(CONFIG, NOW, "a", [Span(0, 1)], 10)
    state.acquire(CONFIG, NOW, "b", [Span(0, 2)], 10)
    ack(state, "a", 1, 1, AckType.ACCEPT)
    for member, first in (("a", 1), ("b", 0), ("a", 2)):
        with pytest.raises(KafkaError) as raised:
            ack(state, member, first, first, AckType.ACCEPT)
        assert raised.value.code == ErrorCode.INVALID_RECORD_STATE
    ack(state, "a", 0, 0, AckType.ACCEPT)
    assert state.start_offset == 2


def test_the_stored_state_rebuilds_the_partition_with_acquired_records_offered_again():
    state = started()
    state.acquire(CONFIG, NOW, "a", [Span(0, 5)], 10)
    ack(state, "a", 1, 3, AckType.ACCEPT, AckType.REJECT, AckType.RELEASE)
    restored = SharePartitionState.restore(state.start_offset, state.state_epoch, state.state_batches())
    assert stored(restored) == stored(state) == [
        (0, 0, DeliveryState.AVAILABLE, 1), (1, 1, DeliveryState.ACKNOWLEDGED, 1),
        (2, 2, DeliveryState.ARCHIVED, 1), (3, 5, DeliveryState.AVAILABLE, 1)]
    assert restored.next_deadline() is None
    assert restored.acquire(CONFIG, NOW, "b", [Span(0, 9)], 100) == [
        Acquired(0, 0, 2), Acquired(3, 5, 2), Acquired(6, 9, 1)]
