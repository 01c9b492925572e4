"""The fetch session cache: epochs, errors and Kafka's eviction rule."""
from types import SimpleNamespace

from kgate.gateway.fetch_sessions import EVICTION_MS, INVALID_SESSION_ID, CachedPartition, FetchSessionCache
from kgate.protocol.error_codes import ErrorCode


def partitions(count: int, topic: str = "t") -> dict:
    return {(topic, i): CachedPartition(topic, None, i, 0, 1 << 20) for i in range(count)}


def test_an_incremental_fetch_needs_the_session_and_its_next_epoch():
    cache = FetchSessionCache(slots=2)
    session_id = cache.create(0, False, partitions(3))
    assert session_id != INVALID_SESSION_ID
    assert cache.incremental(session_id + 1, 1, False, 10)[0] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert cache.incremental(session_id, 2, False, 10)[0] == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert cache.incremental(session_id, 1, True, 10)[0] == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    error, session = cache.incremental(session_id, 1, False, 10)
    assert error == ErrorCode.NONE and session.epoch == 2
    stale = cache.incremental(session_id, 1, False, 20)[0]
    assert stale == ErrorCode.INVALID_FETCH_SESSION_EPOCH, "epochs never repeat"
    cache.remove(session_id)
    assert cache.incremental(session_id, 2, False, 30)[0] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_no_slots_means_no_sessions():
    assert FetchSessionCache(slots=0).create(0, False, partitions(5)) == INVALID_SESSION_ID


def test_a_full_cache_evicts_a_stale_session_first():
    cache = FetchSessionCache(slots=2)
    old = cache.create(0, False, partitions(100))
    used = cache.create(0, False, partitions(100))
    cache.incremental(used, 1, False, EVICTION_MS)  # used recently; ``old`` has not been since 0
    assert cache.create(EVICTION_MS + 1, False, partitions(1)) != INVALID_SESSION_ID
    assert old not in cache.sessions and used in cache.sessions and cache.evictions == 1


def test_a_larger_session_evicts_the_smallest_one_past_its_first_eviction_period():
    cache = FetchSessionCache(slots=3)
    small, smaller, fresh = (cache.create(0, False, partitions(n)) for n in (5, 2, 1))
    now = EVICTION_MS + 1
    for session_id in (small, smaller):
        cache.incremental(session_id, 1, False, now)  # in use, and old enough to be evicted
    cache.incremental(fresh, 1, False, EVICTION_MS)  # in use but not yet evictable when touched
    assert cache.create(now, False, partitions(2)) == INVALID_SESSION_ID, "no more partitions than the smallest"
    assert cache.create(now, False, partitions(3)) != INVALID_SESSION_ID
    assert smaller not in cache.sessions and {small, fresh} <= set(cache.sessions)


def test_a_session_remembers_what_it_told_and_answers_only_news():
    cached = CachedPartition("t", None, 0, 0, 1 << 20, high_watermark=10, log_start_offset=0)

    def pd(hw=10, start=0, records=b"", error=ErrorCode.NONE, preferred=-1):
        return SimpleNamespace(high_watermark=hw, log_start_offset=start, records=records, error_code=error,
                               preferred_read_replica=preferred)

    assert not cached.must_answer(pd())
    assert cached.must_answer(pd(records=b"batch"))
    assert cached.must_answer(pd(hw=11)) and not cached.must_answer(pd(hw=11))
    assert cached.must_answer(pd(hw=11, start=3))
    assert cached.must_answer(pd(hw=11, start=3, error=ErrorCode.NOT_LEADER_FOR_PARTITION))
    assert cached.must_answer(pd(hw=11, start=3)), "a partition is sent again once its error clears"
    assert cached.must_answer(pd(hw=11, start=3, preferred=2)), "a client sent to its zone's broker hears so"


def test_updates_add_refresh_and_forget_partitions():
    cache = FetchSessionCache(slots=1)
    _, session = cache.incremental(cache.create(0, False, partitions(2)), 1, False, 1)
    topic = SimpleNamespace(topic="t", topic_id=None)
    session.update([(("t", 1), topic, SimpleNamespace(partition=1, fetch_offset=7, partition_max_bytes=99)),
                    (("t", 5), topic, SimpleNamespace(partition=5, fetch_offset=3, partition_max_bytes=99))],
                   [("t", 0)])
    assert list(session.partitions) == [("t", 1), ("t", 5)]
    assert (session.partitions[("t", 1)].fetch_offset, session.partitions[("t", 5)].fetch_offset) == (7, 3)
    session.to_the_back(("t", 1))
    assert list(session.partitions) == [("t", 5), ("t", 1)]
