"""Share sessions (KIP-932): opening, advancing, adding and forgetting partitions, closing, and
Kafka's answers to a wrong or stale epoch, a missing session and a full cache."""
import pytest

from kgate.gateway.shares.sessions import ShareSessionCache
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

T0, T1, U0 = ("t", 0), ("t", 1), ("u", 0)


def refused(call) -> ErrorCode:
    with pytest.raises(KafkaError) as raised:
        call()
    return raised.value.code


def test_a_session_opens_advances_one_epoch_at_a_time_and_closes():
    cache = ShareSessionCache(10)
    session, closing = cache.open_or_advance("g", "m", 0, [T0, T1], [], fetching=True)
    assert (session.epoch, session.partitions, closing) == (1, [T0, T1], False)
    session, _ = cache.open_or_advance("g", "m", 1, [U0], [T0], fetching=True)
    assert (session.epoch, session.partitions) == (2, [T1, U0])
    session, _ = cache.open_or_advance("g", "m", 2, [], [], fetching=False)
    assert session.epoch == 3
    _, closing = cache.open_or_advance("g", "m", -1, [], [], fetching=False)
    assert closing and cache.sessions == {}


def test_a_wrong_or_stale_epoch_is_invalid_and_changes_nothing():
    cache = ShareSessionCache(10)
    cache.open_or_advance("g", "m", 0, [T0], [], fetching=True)
    cache.open_or_advance("g", "m", 1, [], [], fetching=True)
    for epoch in (1, 3, 7):
        assert refused(lambda stale=epoch: cache.open_or_advance("g", "m", stale, [T1], [T0], True)) == \
            ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert (cache.sessions["g", "m"].epoch, cache.sessions["g", "m"].partitions) == (2, [T0])


def test_a_session_that_is_not_there_is_not_found():
    cache = ShareSessionCache(10)
    assert refused(lambda: cache.open_or_advance("g", "m", 4, [], [], True)) == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert refused(lambda: cache.open_or_advance("g", "m", -1, [], [], False)) == ErrorCode.SHARE_SESSION_NOT_FOUND
    cache.open_or_advance("g", "m", 0, [T0], [], fetching=True)
    assert refused(lambda: cache.open_or_advance("other", "m", 1, [], [], True)) == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_share_acknowledge_cannot_open_a_session():
    cache = ShareSessionCache(10)
    assert refused(lambda: cache.open_or_advance("g", "m", 0, [], [], False)) == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert cache.sessions == {}


def test_a_full_cache_refuses_a_new_session_but_lets_a_member_reopen_its_own():
    cache = ShareSessionCache(2)
    cache.open_or_advance("g", "a", 0, [T0], [], fetching=True)
    cache.open_or_advance("g", "b", 0, [T0], [], fetching=True)
    assert refused(lambda: cache.open_or_advance("g", "c", 0, [T0], [], True)) == \
        ErrorCode.SHARE_SESSION_LIMIT_REACHED
    session, _ = cache.open_or_advance("g", "a", 0, [T1], [], fetching=True)
    assert (session.epoch, session.partitions) == (1, [T1])
