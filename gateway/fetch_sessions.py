"""Incremental fetch sessions (KIP-227): the broker remembers what a consumer fetches.

A consumer of many partitions otherwise sends every partition in every Fetch and gets
every partition back, data or not. With a session it sends only the partitions whose
fetch position or limits changed (and the ones to forget), and the answer leaves out
the partitions with nothing new: no records, the same high watermark and log start
offset, no error.

The request's ``session_epoch`` says what the client wants:
- ``-1`` (final): a full fetch without a session; a session it names is closed;
- ``0`` (initial): a full fetch that opens a session if the cache has room or can make
  it (a session it names is closed first); session id 0 in the answer means none;
- ``> 0``: an incremental fetch in the named session, whose epoch must be the one the
  broker expects next (FETCH_SESSION_ID_NOT_FOUND / INVALID_FETCH_SESSION_EPOCH
  otherwise, after which clients start over with a full fetch).

The cache holds ``max.incremental.fetch.session.cache.slots`` sessions. When it is full
a new session may evict, as Kafka's FetchSessionCache does: first the least recently
used session if it is stale (unused for EVICTION_MS), else the smallest session (fewest
partitions; the lowest id among equals) among those created more than EVICTION_MS
before their last use, and only if the new session holds more partitions. So a busy
cache keeps the sessions that save the most, and a new session cannot push out one
that has only just been made.
"""
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kgate.protocol.error_codes import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
EVICTION_MS = 120_000  # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
_MAX_ID = 2**31 - 1


@dataclass(slots=True)
class CachedPartition:
    """A partition of a session: the client's last request for it and what it was last told."""

    topic: str
    topic_id: object
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    high_watermark: int = -1
    log_start_offset: int = -1

    def request(self, part) -> None:
        self.fetch_offset, self.partition_max_bytes = part.fetch_offset, part.partition_max_bytes

    def must_answer(self, pd) -> bool:
        """Whether an incremental answer carries this partition; remembers what it tells.

        Records, a moved high watermark or log start offset, and any error are sent; an
        error also forgets the high watermark so the partition is sent once it clears.
        """
        changed = bool(pd.records) or pd.high_watermark != self.high_watermark
        changed = changed or pd.log_start_offset != self.log_start_offset or pd.preferred_read_replica >= 0
        self.high_watermark, self.log_start_offset = pd.high_watermark, pd.log_start_offset
        if pd.error_code != ErrorCode.NONE:
            self.high_watermark = -1
            return True
        return changed


@dataclass(eq=False, slots=True)
class FetchSession:
    id: int
    uses_topic_ids: bool
    created_ms: float
    last_used_ms: float
    epoch: int = 1  # the epoch the next incremental fetch must carry
    partitions: dict = field(default_factory=dict)  # (topic or topic id, partition) -> CachedPartition
    evictable: bool = False  # by a larger new session: set at a use more than EVICTION_MS after creation

    def update(self, requested: Iterable[tuple[tuple, Any, Any]], forgotten: Iterable[tuple]) -> None:
        """Add or refresh ``(key, topic request, partition request)``s (kafka-python's untyped request
        entries), then drop ``forgotten`` keys."""
        for key, topic, part in requested:
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = CachedPartition(topic.topic, topic.topic_id, part.partition,
                                                       part.fetch_offset, part.partition_max_bytes)
            else:
                cached.request(part)
        for key in forgotten:
            self.partitions.pop(key, None)

    def to_the_back(self, key) -> None:
        """A partition that just returned data goes last, so the next fetch's budget serves the others first."""
        self.partitions[key] = self.partitions.pop(key)


class FetchSessionCache:
    def __init__(self, slots: int, eviction_ms: float = EVICTION_MS):
        self.slots = slots
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    @property
    def partitions(self) -> int:
        return sum(len(session.partitions) for session in self.sessions.values())

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)

    def incremental(self, session_id: int, epoch: int, uses_topic_ids: bool,
                    now_ms: float) -> tuple[ErrorCode, FetchSession | None]:
        """The session an incremental fetch names, its epoch moved on; or Kafka's error for it."""
        session = self.sessions.get(session_id)
        if session is None:
            return ErrorCode.FETCH_SESSION_ID_NOT_FOUND, None
        if session.epoch != epoch:
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH, None
        if session.uses_topic_ids != uses_topic_ids:
            return ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, None
        self.touch(session, now_ms)
        session.epoch = 1 if session.epoch == _MAX_ID else session.epoch + 1
        return ErrorCode.NONE, session

    def touch(self, session: FetchSession, now_ms: float) -> None:
        session.last_used_ms = now_ms
        session.evictable = now_ms - session.created_ms > self.eviction_ms

    def create(self, now_ms: float, uses_topic_ids: bool, partitions: dict) -> int:
        """A new session holding ``partitions``; its id, or INVALID_SESSION_ID when the cache has no room."""
        if len(self.sessions) >= self.slots and not self._evict_for(len(partitions), now_ms):
            return INVALID_SESSION_ID
        session_id = random.randint(1, _MAX_ID)
        while session_id in self.sessions:
            session_id = random.randint(1, _MAX_ID)
        self.sessions[session_id] = FetchSession(session_id, uses_topic_ids, now_ms, now_ms, partitions=partitions)
        return session_id

    def _evict_for(self, size: int, now_ms: float) -> bool:
        if not self.sessions:
            return False
        oldest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - oldest.last_used_ms > self.eviction_ms:
            victim = oldest
        else:
            evictable = [s for s in self.sessions.values() if s.evictable]
            if not evictable:
                return False
            victim = min(evictable, key=lambda s: (len(s.partitions), s.id))
            if size <= len(victim.partitions):
                return False
        del self.sessions[victim.id]
        self.evictions += 1
        return True
