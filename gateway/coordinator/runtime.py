"""The coordinator runtime: one per internal topic, running a shard per partition served here.

Kafka's ``CoordinatorRuntime`` shape. Loading a partition replays its records into a
fresh shard; a request runs as an operation on its partition's shard, a rule that
returns a :class:`Result`; the runtime arms and cancels the result's timers, appends
its records through the :class:`PartitionWriter` (replaying them into the shard as it
appends, so memory and log keep one order) and answers once they are durable. Timers
run on the injected :class:`Clock`.

Compaction is the runtime's, one implementation for every shard: when a partition
holds many more records than the shard's live ones, the runtime rolls its ledger,
appends the shard's snapshot and trims what precedes it. It also runs right after a
load, so a partition that moves to another broker hands the next owner less to replay.
"""
import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from ..keyed_log import NO_PRODUCER
from .clock import Clock, TimerHandle
from .partition_writer import PartitionWriter
from .shard import Arm, Result, Shard

log = logging.getLogger(__name__)

S = TypeVar("S", bound=Shard)
T = TypeVar("T")


class CoordinatorRuntime(Generic[S]):
    def __init__(self, topic: str, writer: PartitionWriter, clock: Clock, new_shard: Callable[[int], S],
                 compaction_min_records: int):
        self.topic = topic
        self.writer = writer
        self.clock = clock
        self.new_shard = new_shard
        self.compaction_min_records = compaction_min_records
        self.shards: dict[int, S] = {}
        self._appended: dict[int, int] = defaultdict(int)  # records since the last snapshot, per partition
        self._timers: dict[int, dict[Hashable, TimerHandle]] = defaultdict(dict)
        self._tasks: dict[int, set[asyncio.Task]] = defaultdict(set)  # compaction and results' follow-ups
        self._compacting: set[int] = set()

    # -- loading and unloading ------------------------------------------------------------------

    async def load(self, index: int) -> S | None:
        """Replay partition ``index`` into a new shard and serve it; None when the partition
        was lost while it was read (its new owner loads it)."""
        started = time.monotonic()
        replayed = await self.writer.load(index)
        if replayed is None:
            return None
        self.unload(index)
        shard = self.new_shard(index)
        for key, value in replayed.latest.items():
            record = shard.decode(key, value)
            if record is not None:
                shard.replay(record)
        for producer_id, pairs in replayed.open_transactions.items():
            for key, value in pairs.items():
                record = shard.decode(key, value)
                if record is not None:
                    shard.replay(record, producer_id)
        self.shards[index] = shard
        self._appended[index] = replayed.count
        self._carry_out(index, shard, shard.on_loaded(self.clock.now_ms()))
        # Loading time is what clients wait for after a failover (bench/group_replay.py reads this line).
        log.log(logging.INFO if replayed.count else logging.DEBUG, "%s-%d loaded: %d records replayed in %.3f s",
                self.topic, index, replayed.count, time.monotonic() - started)
        self._maybe_compact(index, shard)
        return shard

    def unload(self, index: int) -> None:
        """Stop serving partition ``index``: its timers and follow-ups stop, its shard answers
        what waits on it and is dropped."""
        for timer in self._timers.pop(index, {}).values():
            timer.cancel()
        for task in self._tasks.pop(index, set()):
            task.cancel()
        self._compacting.discard(index)
        shard = self.shards.pop(index, None)
        if shard is not None:
            shard.on_unloaded()

    async def close(self) -> None:
        """The broker stops: no timer fires and no follow-up runs any more."""
        for index in list(self._timers):
            for timer in self._timers.pop(index).values():
                timer.cancel()
        for index in list(self._tasks):
            for task in self._tasks.pop(index):
                task.cancel()

    # -- operations ----------------------------------------------------------------------------

    def owns(self, index: int) -> bool:
        return index in self.shards

    def shard(self, index: int) -> S:
        shard = self.shards.get(index)
        if shard is None:
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"this broker does not coordinate {self.topic}-{index}")
        return shard

    def run(self, index: int, operation: Callable[[S, int], Result[T, Any]]) -> tuple[T, Awaitable[None]]:
        """Run ``operation`` on the partition's shard now: its response, and what completes
        once its records are durable (raising if they could not be stored)."""
        shard = self.shard(index)
        result = operation(shard, self.clock.now_ms())
        return result.response, self._carry_out(index, shard, result)

    async def write(self, index: int, operation: Callable[[S, int], Result[T, Any]]) -> T:
        """Run ``operation`` and answer once its records are durable."""
        response, durable = self.run(index, operation)
        await durable
        return response

    def transaction_ended(self, index: int, producer_id: int, commit: bool) -> None:
        """A marker was appended to partition ``index``: its shard counts or drops the producer's records."""
        shard = self.shards.get(index)
        if shard is not None:
            shard.replay_end_transaction(producer_id, commit)

    # -- carrying out results ------------------------------------------------------------------

    def _carry_out(self, index: int, shard: S, result: Result) -> Awaitable[None]:
        now = self.clock.now_ms()
        for change in result.timers:
            if isinstance(change, Arm):
                self._arm(index, shard, change.key, change.deadline_ms - now)
            else:
                timer = self._timers[index].pop(change.key, None)
                if timer is not None:
                    timer.cancel()
        if not result.records:
            if result.then is not None:
                self._spawn(index, result.then())
            done = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done
        appending = asyncio.ensure_future(self._append(index, shard, result))
        appending.add_done_callback(self._log_failure)
        # A waiter whose request is cancelled (its connection closed) must not stop the append;
        # one that never awaits (a timer's records) leaves the failure to the log line above.
        waiter = asyncio.shield(appending)
        waiter.add_done_callback(_retrieved)
        return waiter

    async def _append(self, index: int, shard: S, result: Result) -> None:
        await self.writer.prepare_append(index)
        if self.shards.get(index) is not shard:
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"{self.topic}-{index} moved to another broker")
        # No await from here to the append: the shard changes in the log's order.
        durable = self.writer.append(index, [shard.encode(record) for record in result.records], result.producer)
        for record in result.records:
            shard.replay(record, result.producer[0])
        self._appended[index] += len(result.records)
        await durable
        if result.then is not None and self.shards.get(index) is shard:
            self._spawn(index, result.then())
        self._maybe_compact(index, shard)

    def _log_failure(self, task: asyncio.Future) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.warning("%s: storing records failed: %s", self.topic, task.exception())

    def _spawn(self, index: int, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        tasks = self._tasks[index]
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        task.add_done_callback(self._log_failure)

    # -- timers --------------------------------------------------------------------------------

    def _arm(self, index: int, shard: S, key: Hashable, delay_ms: int) -> None:
        timers = self._timers[index]
        previous = timers.pop(key, None)
        if previous is not None:
            previous.cancel()
        timers[key] = self.clock.call_later(delay_ms, lambda: self._fire(index, shard, key))

    def _fire(self, index: int, shard: S, key: Hashable) -> None:
        self._timers[index].pop(key, None)
        if self.shards.get(index) is shard:
            self._carry_out(index, shard, shard.timer_fired(self.clock.now_ms(), key))

    # -- compaction ----------------------------------------------------------------------------

    def _maybe_compact(self, index: int, shard: S) -> None:
        if index in self._compacting or not shard.compactable():
            return
        if self._appended[index] > max(self.compaction_min_records, 2 * shard.live_records()):
            self._compacting.add(index)
            self._spawn(index, self._compact(index, shard))

    async def _compact(self, index: int, shard: S) -> None:
        """Append the shard's snapshot after a ledger boundary, then trim what precedes it."""
        try:
            start = await self.writer.roll_over(index)
            if self.shards.get(index) is not shard or not shard.compactable():
                return
            snapshot = shard.snapshot()
            durable = self.writer.append(index, [shard.encode(record) for record in snapshot], NO_PRODUCER)
            self._appended[index] = len(snapshot)
            await durable
            await self.writer.trim_before(index, start)
            log.info("%s-%d compacted: %d live records from offset %d", self.topic, index, len(snapshot), start)
        finally:
            self._compacting.discard(index)


def _retrieved(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()
