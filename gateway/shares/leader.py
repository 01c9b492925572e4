"""Share-partitions' live state on the broker serving their topic partition: Kafka's ``SharePartition``.

The broker that serves a topic partition hands its records to share groups: it holds each
share-partition's state in memory (what is acquired, by which member, until when: the rules
of ``partition_state``) and keeps the lock timers on its clock. The state is loaded with
ReadShareGroupState (placed with InitializeShareGroupState by the first read of a group
that has none) and every change is written with WriteShareGroupState before it is
answered, through the persister, to the share coordinator holding it (wherever the
``__share_group_state`` partition is owned). What is acquired is written as AVAILABLE
with its raised delivery count, so when this broker dies or hands the partition on, the
next one loads every unfinished record as offered again, the delivery limit still holding.

A share-partition is held under the topic partition's leader epoch: a broker taking the
partition over reads under a newer one, which the coordinator keeps, so a write from the
broker that lost it is refused (FENCED_LEADER_EPOCH); altered offsets (a new state epoch)
fence it likewise. A write refused, or one that could not be made, drops the share-partition
from memory: the next fetch loads it again from what is stored.
"""
import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from ..coordinator import Clock
from ..coordinator.clock import TimerHandle
from .partition_state import AckBatch, Acquired, ShareConfig, SharePartitionState, Span
from .persister import SharePersister
from .records import SharePartitionKey

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Held:
    topic: str
    leader_epoch: int
    state: SharePartitionState
    timer: TimerHandle | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class ShareLeaders:
    def __init__(self, persister: SharePersister, clock: Clock, config_of: Callable[[str], ShareConfig]):
        self.persister = persister
        self.clock = clock
        self.config_of = config_of
        self.held: dict[SharePartitionKey, _Held] = {}
        self._loading: dict[SharePartitionKey, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task] = set()

    def close(self) -> None:
        for key in list(self.held):
            self._forget(key)
        for task in self._tasks:
            task.cancel()

    # -- what a share fetch and an acknowledgement do ------------------------------------------

    async def fetch_offset(self, key: SharePartitionKey, topic: str, leader_epoch: int, log_start: int,
                           log_end: int) -> int:
        """Where a read for the share-partition starts; the first read places it
        (share.auto.offset.reset), and a log start moved past it moves it."""
        held = await self._load(key, topic, leader_epoch)
        async with held.lock:
            state = held.state
            if not state.initialized:  # the first read of the group here: placed once, as Kafka initializes it
                state.initialize(self.config_of(key.group_id), log_start, log_end)
                try:
                    await self.persister.initialize(key, state.state_epoch, state.start_offset)
                except KafkaError:
                    self._forget(key)
                    raise
            elif state.initialize(self.config_of(key.group_id), log_start, log_end):
                await self._store(key, held)
            return state.fetch_offset()

    async def acquire(self, key: SharePartitionKey, member: str, spans: Iterable[Span],
                      max_records: int) -> list[Acquired]:
        """Hand ``member`` records of what a read from :meth:`fetch_offset` gave; none when their
        acquisition could not be stored (the state was fenced, or its coordinator is away)."""
        held = self.held.get(key)
        if held is None:
            return []
        async with held.lock:
            if not held.state.initialized:
                return []
            acquired = held.state.acquire(self.config_of(key.group_id), self.clock.now_ms(), member, spans,
                                          max_records)
            if acquired:
                try:
                    await self._store(key, held)
                except KafkaError:
                    return []  # handed out to nobody: the next fetch loads the stored state again
            return acquired

    async def acknowledge(self, key: SharePartitionKey, member: str, batches: list[AckBatch]) -> None:
        """Raises INVALID_REQUEST or INVALID_RECORD_STATE as Kafka answers, having changed nothing."""
        held = self.held.get(key)
        if held is None:
            raise KafkaError(ErrorCode.INVALID_RECORD_STATE, "no record of this share-partition was handed out here")
        async with held.lock:
            held.state.acknowledge(self.config_of(key.group_id), self.clock.now_ms(), member, batches)
            await self._store(key, held)

    async def release_member(self, group_id: str, member: str) -> None:
        """A member's share session ended (it left, or its session timed out): what it held here goes back."""
        config = self.config_of(group_id)
        for key in [key for key in self.held if key.group_id == group_id]:
            held = self.held.get(key)
            if held is None:
                continue
            async with held.lock:
                if held.state.release_member(config, member):
                    await self._stored_quietly(key, held)

    def drop(self, topic: str, index: int) -> None:
        """The topic partition went to another broker: its share-partitions are that broker's now."""
        for key in [key for key, held in self.held.items() if held.topic == topic and key.partition == index]:
            self._forget(key)

    def drop_group(self, group_id: str) -> None:
        """The group was deleted: what is held of it here is forgotten."""
        for key in [key for key in self.held if key.group_id == group_id]:
            self._forget(key)

    # -- loading, storing, timers ------------------------------------------------------------------

    async def _load(self, key: SharePartitionKey, topic: str, leader_epoch: int) -> _Held:
        held = self.held.get(key)
        if held is not None and held.leader_epoch == leader_epoch:
            return held
        loading = self._loading.setdefault(key, asyncio.Lock())
        async with loading:
            held = self.held.get(key)
            if held is not None and held.leader_epoch == leader_epoch:
                return held
            self._forget(key)
            stored = await self.persister.read(key, leader_epoch)
            held = _Held(topic, leader_epoch, SharePartitionState.restore(stored.start_offset, stored.state_epoch,
                                                                          stored.batches))
            self.held[key] = held
            return held

    async def _store(self, key: SharePartitionKey, held: _Held) -> None:
        """Write the share-partition's state; on failure forget it (the stored state is the truth) and raise."""
        state = held.state
        try:
            await self.persister.write(key, state.state_epoch, held.leader_epoch, state.start_offset,
                                       state.state_batches(), state.delivery_complete())
        except KafkaError as exc:
            log.info("share-partition %s: its state could not be written (%s); it is loaded again on the next fetch",
                     key, exc)
            if self.held.get(key) is held:
                self._forget(key)
            raise
        self._arm(key, held)

    async def _stored_quietly(self, key: SharePartitionKey, held: _Held) -> None:
        try:
            await self._store(key, held)
        except KafkaError:
            pass  # forgotten: the stored state, loaded again, has it offered again anyway

    def _arm(self, key: SharePartitionKey, held: _Held) -> None:
        if held.timer is not None:
            held.timer.cancel()
            held.timer = None
        deadline = held.state.next_deadline()
        if deadline is not None:
            held.timer = self.clock.call_later(deadline - self.clock.now_ms(), lambda: self._spawn(self._expire(key,
                                                                                                                  held)))

    def _spawn(self, work) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _expire(self, key: SharePartitionKey, held: _Held) -> None:
        """Records whose lock ran out are offered again (or archived at the delivery limit)."""
        if self.held.get(key) is not held:
            return
        async with held.lock:
            held.timer = None
            if held.state.expire_locks(self.config_of(key.group_id), self.clock.now_ms()):
                await self._stored_quietly(key, held)
            else:
                self._arm(key, held)

    def _forget(self, key: SharePartitionKey) -> None:
        held = self.held.pop(key, None)
        if held is not None and held.timer is not None:
            held.timer.cancel()
