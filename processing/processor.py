"""The processor: takes records from a consumer group, runs the handler, commits what is done.

One asyncio loop owns all state; every call into the consumer runs in one thread of its
own, so the loop stays free for handlers. Its rebalance callbacks run in that thread
and hand their work to the loop (and wait for it), so the state is never touched from
two threads. The loop itself never calls the consumer: librdkafka's pause, resume,
assignment and commit wait for its group thread, which may be waiting for a rebalance
callback that waits for the loop. So the loop decides (pause or not, what to commit)
and the consumer thread applies it before each consume. Plain-function handlers run in
a thread pool.

A record's life: taken (offset tracked in its partition's OffsetTracker, counted in the
memory bound, queued behind its key), running once it is the head of its key and a
slot is free, then finished (handled, or dead-lettered after its retries) or put off
(a retry's backoff or a handler's Delay: the record stays the head of its key, so later
records of that key wait, other keys go on). The commit position of a partition moves
only over a finished prefix, and is committed every ``commit_interval_ms``, on revoke
and at shutdown.
"""
import asyncio
import inspect
import logging
import signal
import time
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from .backoff import retry_delay_s
from .dead_letter import DeadLetterWriter
from .keys import KeyQueues
from .metrics import ProcessingMetrics
from .offsets import OffsetTracker
from .record import Record

log = logging.getLogger("kgate.processing")

BATCH = 500
"""Most records taken from the consumer per call (fewer when the memory bound leaves less room)."""
POLL_S = 0.1
"""How long one consume call waits for records; also how soon a stop request is noticed."""
RESUME_FRACTION = 0.75
"""Fetching resumes once records and bytes in memory are below this share of their bounds,
so a processor at its bound does not pause and resume on every record."""


class Delay(Exception):
    """Raised by a handler to have its record handled again after ``seconds`` (at most the
    processor's ``max_delay_s``). Not a failure: it uses no retry."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"delayed by {seconds} s")
        self.seconds = seconds


class ProcessingError(Exception):
    """Processing cannot go on without losing a record: a record failed for good and there is
    no dead-letter topic, the dead-letter write failed, the key function failed, or the
    consumer hit a fatal error. The record stays uncommitted, so a restart handles it again."""


class _Partition:
    """What the processor keeps of one assigned partition."""

    __slots__ = ("topic", "partition", "offsets", "works", "running", "idle", "committed", "committed_at")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.offsets = OffsetTracker()
        self.works: set[_Work] = set()
        self.running = 0
        self.idle: asyncio.Event | None = None
        """Set when ``running`` drops to 0, while a revoke waits for it."""
        self.committed: int | None = None
        self.committed_at = time.monotonic()


class _Work:
    """One record in memory and where it stands."""

    __slots__ = ("record", "key", "size", "partition", "failures", "timer", "running", "dropped", "task")

    def __init__(self, record: Record, key: Hashable, partition: _Partition) -> None:
        self.record = record
        self.key = key
        self.size = record.size
        self.partition = partition
        self.failures = 0
        self.timer: asyncio.TimerHandle | None = None
        self.running = False
        self.dropped = False
        self.task: asyncio.Task | None = None


def _record_key(record: Record) -> Any:
    return record.key


MODES = ("keyed", "share")


class Processor:
    """At-least-once parallel processing of the records of ``topics``.

    ``mode`` "keyed" (the default): a consumer group, records of one key handled in order,
    commits over finished prefixes. "share": a share group (KIP-932, ``share.py``), records
    acknowledged one by one, no order, any number of processors on the same partitions.
    ``config`` holds librdkafka settings for the consumer and the dead-letter producer
    (security, ``auto.offset.reset``, ...); they win over the processor's own.
    """

    Delay = Delay

    def __new__(cls, *args, mode: str = "keyed", **kwargs):
        if mode not in MODES:
            raise ValueError(f"mode: one of {', '.join(MODES)}, not {mode!r}")
        if mode == "share" and cls is Processor:
            from .share import ShareProcessor  # the share mode builds on this class
            cls = ShareProcessor
        return super().__new__(cls)

    def __init__(self, bootstrap: str, group: str, topics: list[str], *, key: Callable[[Record], Any] = _record_key,
                 concurrency: int = 100, max_retries: int = 3, retry_backoff_ms: tuple[float, float] = (100, 30_000),
                 dead_letter_topic: str | None = None, handler_timeout_s: float | None = None,
                 retry_timeouts: bool = False, max_records: int = 10_000, max_bytes: int = 64 * 1024 * 1024,
                 max_delay_s: float = 60.0, commit_interval_ms: int = 1000, revoke_timeout_s: float = 10.0,
                 threads: int | None = None, config: dict | None = None, mode: str = "keyed") -> None:
        self.mode = mode
        if not topics or isinstance(topics, str):
            raise ValueError("topics: a non-empty list of topic names")
        for name, value, least in (("concurrency", concurrency, 1), ("max_retries", max_retries, 0),
                                   ("max_records", max_records, 1), ("max_bytes", max_bytes, 1),
                                   ("commit_interval_ms", commit_interval_ms, 1), ("threads", threads or 1, 1)):
            if not isinstance(value, int) or value < least:
                raise ValueError(f"{name}: an integer >= {least}, not {value!r}")
        floor, ceiling = retry_backoff_ms
        if not 0 <= floor <= ceiling:
            raise ValueError(f"retry_backoff_ms: (floor, ceiling) with 0 <= floor <= ceiling, not {retry_backoff_ms!r}")
        for name, seconds in (("handler_timeout_s", handler_timeout_s), ("max_delay_s", max_delay_s),
                              ("revoke_timeout_s", revoke_timeout_s)):
            if seconds is not None and seconds <= 0:
                raise ValueError(f"{name}: a positive number of seconds, not {seconds!r}")
        self.bootstrap = bootstrap
        self.group = group
        self.topics = list(topics)
        self.key = key
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.retry_backoff_ms = (floor, ceiling)
        self.dead_letter_topic = dead_letter_topic
        self.handler_timeout_s = handler_timeout_s
        self.retry_timeouts = retry_timeouts
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.max_delay_s = max_delay_s
        self.commit_interval_s = commit_interval_ms / 1000
        self.revoke_timeout_s = revoke_timeout_s
        self.threads = threads or min(concurrency, 64)
        self.config = dict(config or {})
        self.metrics = ProcessingMetrics(self)
        self._handler: Callable | None = None
        self._is_async = False
        self._partitions: dict[tuple[str, int], _Partition] = {}
        self._keys = KeyQueues()
        self._ready: deque[_Work] = deque()
        self._running = 0
        self._delayed = 0
        self._buffered_records = self._buffered_bytes = 0
        self._buffered_records_max = self._buffered_bytes_max = 0
        self._paused = False
        """Whether the records in memory are at a bound (the loop's decision)..."""
        self._fetching_paused = False
        """... and whether the consumer's partitions are paused (the consumer thread's state)."""
        self._stopping = False
        self._fatal: ProcessingError | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._consumer: Consumer | None = None
        self._handler_threads: ThreadPoolExecutor | None = None
        self._dead_letters: DeadLetterWriter | None = None

    def handler(self, function: Callable) -> Callable:
        """Decorator: the function each record is given to (``async def`` or a plain function)."""
        self._handler = function
        self._is_async = inspect.iscoroutinefunction(function)
        return function

    # --- running and stopping -------------------------------------------------------------

    def run(self) -> None:
        """Process until SIGTERM/SIGINT or ``stop()``; finished work is committed before it returns."""
        asyncio.run(self._run_with_signals())

    async def _run_with_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._request_stop)
        await self.run_async()

    def stop(self) -> None:
        """Ask a running processor to stop (from any thread)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._request_stop)

    def _request_stop(self) -> None:
        self._stopping = True

    async def run_async(self) -> None:
        if self._handler is None:
            raise ProcessingError("no handler: decorate a function with @app.handler")
        self._loop = asyncio.get_running_loop()
        if not self._is_async:
            self._handler_threads = ThreadPoolExecutor(self.threads, thread_name_prefix="kgate-processing-handler")
        if self.dead_letter_topic:
            self._dead_letters = DeadLetterWriter(self.dead_letter_topic,
                                                  {"bootstrap.servers": self.bootstrap, **self._producer_config()})
        try:
            await self._serve()
        finally:
            if self._dead_letters is not None:
                self._dead_letters.close(self.revoke_timeout_s)
            if self._handler_threads is not None:
                self._handler_threads.shutdown(wait=False, cancel_futures=True)
        if self._fatal is not None:
            raise self._fatal

    async def _serve(self) -> None:
        """Take records from the consumer group and hand them to the handlers until stopped."""
        consumer_thread = ThreadPoolExecutor(1, thread_name_prefix="kgate-processing-consumer")
        self._consumer = consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "enable.auto.commit": False,
            "enable.auto.offset.store": False, "partition.assignment.strategy": "cooperative-sticky",
            # librdkafka otherwise waits up to 1 s before refetching a partition whose records the
            # application has not yet taken; with it at 0 a plain loop reads ~6x faster here.
            "fetch.queue.backoff.ms": 0,
            # What librdkafka prefetches is memory too: bounded like the records the processor holds.
            "queued.max.messages.kbytes": max(1, min(self.max_bytes // 1024, 2_097_151)),
            "on_commit": self._on_commit, **self.config})
        consumer.subscribe(self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)
        try:
            await self._consume(consumer, consumer_thread)
        finally:
            await self._shutdown(consumer, consumer_thread)

    def _producer_config(self) -> dict:
        """The user's settings that also concern a producer (security, client id, ...)."""
        consumer_only = ("group.", "auto.offset.reset", "enable.auto.", "partition.assignment", "fetch.",
                         "session.timeout", "heartbeat.", "max.poll", "queued.", "isolation.level")
        return {k: v for k, v in self.config.items() if not k.startswith(consumer_only)}

    async def _consume(self, consumer: Consumer, consumer_thread: ThreadPoolExecutor) -> None:
        loop = asyncio.get_running_loop()
        next_commit = time.monotonic() + self.commit_interval_s
        while not self._stopping:
            room = max(1, min(BATCH, self.max_records - self._buffered_records))
            offsets = []
            if time.monotonic() >= next_commit:
                offsets = self._positions(self._partitions.values())
                next_commit = time.monotonic() + self.commit_interval_s
            batch = await loop.run_in_executor(consumer_thread, self._poll, consumer, room, offsets, self._paused)
            for message in batch:
                error = message.error()
                if error is None:
                    self._take(message)
                elif error.fatal():
                    self._fail(ProcessingError(f"consumer failed: {error}"))
                else:
                    log.warning("consumer: %s", error)
            self._limit()
            self._pump()

    def _poll(self, consumer: Consumer, room: int, offsets: list[TopicPartition], paused: bool) -> list:
        """In the consumer's thread: apply the loop's pause decision, commit, take records."""
        if paused != self._fetching_paused:
            partitions = consumer.assignment()
            if paused:
                consumer.pause(partitions)
            else:
                consumer.resume(partitions)
            self._fetching_paused = paused
        if offsets:
            try:
                consumer.commit(offsets=offsets, asynchronous=True)
            except KafkaException as error:
                log.warning("commit of %d partition(s) failed: %s", len(offsets), error)
        return consumer.consume(room, POLL_S)

    async def _shutdown(self, consumer: Consumer, consumer_thread: ThreadPoolExecutor) -> None:
        """Stop taking, give running handlers ``revoke_timeout_s``, commit what is finished, close."""
        self._stopping = True
        loop = asyncio.get_running_loop()
        offsets = await self._release(list(self._partitions), wait=True)
        await loop.run_in_executor(consumer_thread, self._commit_now, consumer, offsets)
        await loop.run_in_executor(consumer_thread, consumer.close)
        consumer_thread.shutdown()

    def _fail(self, error: ProcessingError) -> None:
        log.error("%s; stopping", error)
        if self._fatal is None:
            self._fatal = error
        self._stopping = True

    # --- taking records, memory bound --------------------------------------------------------

    def _take(self, message) -> None:
        state = self._partitions.get((message.topic(), message.partition()))
        if state is None or not state.offsets.take(message.offset()):
            return  # a partition revoked since the fetch, or an offset delivered again
        record = Record.from_message(message)
        try:
            key = self.key(record)
            work = _Work(record, key, state)
            free = self._keys.add(key, work)
        except Exception as error:
            self._fail(ProcessingError(f"key function failed on {record!r}: {type(error).__name__}: {error}"))
            return
        self._hold(work)
        if free:
            self._ready.append(work)

    def _hold(self, work: _Work) -> None:
        """Count a record taken into memory against the bounds."""
        work.partition.works.add(work)
        self._buffered_records += 1
        self._buffered_bytes += work.size
        self._buffered_records_max = max(self._buffered_records_max, self._buffered_records)
        self._buffered_bytes_max = max(self._buffered_bytes_max, self._buffered_bytes)

    def _limit(self) -> None:
        """Pause fetching while the records in memory are at a bound (the consumer keeps polling,
        so the group does not take the partitions away)."""
        if not self._paused and (self._buffered_records >= self.max_records
                                 or self._buffered_bytes >= self.max_bytes):
            self._paused = True

    def _forget(self, work: _Work) -> None:
        work.partition.works.discard(work)
        self._buffered_records -= 1
        self._buffered_bytes -= work.size
        if self._paused and self._buffered_records < self.max_records * RESUME_FRACTION \
                and self._buffered_bytes < self.max_bytes * RESUME_FRACTION:
            self._paused = False

    # --- running handlers ---------------------------------------------------------------------

    def _pump(self) -> None:
        """Start records that are free to run while there are slots."""
        ready = self._ready
        while ready and self._running < self.concurrency and not self._stopping:
            work = ready.popleft()
            if work.dropped:
                continue
            self._running += 1
            work.partition.running += 1
            work.running = True
            work.task = asyncio.create_task(self._attempt(work))

    async def _attempt(self, work: _Work) -> None:
        try:
            error, retryable, delay_s = await self._call(work.record)
            if work.dropped:
                return
            if delay_s is not None:
                self.metrics.delays.inc()
                self._later(work, min(max(delay_s, 0.0), self.max_delay_s))
            elif error is None:
                self.metrics.handled.inc()
                self._finish(work)
            else:
                work.failures += 1
                if retryable and work.failures <= self.max_retries:
                    self.metrics.retries.inc()
                    self._later(work, retry_delay_s(work.failures, *self.retry_backoff_ms))
                else:
                    await self._dead_letter(work, error)
        finally:
            work.running = False
            self._running -= 1
            state = work.partition
            state.running -= 1
            if state.running == 0 and state.idle is not None:
                state.idle.set()
            self._pump()

    async def _call(self, record: Record) -> tuple[BaseException | None, bool, float | None]:
        """One handler attempt: (error, whether it may be retried, seconds of a requested delay)."""
        started = time.perf_counter()
        deadline = asyncio.timeout(self.handler_timeout_s) if self.handler_timeout_s is not None else None
        try:
            if deadline is None:  # the common case costs no timeout context per record
                await self._invoke(record)
            else:
                async with deadline:
                    await self._invoke(record)
            return None, False, None
        except Delay as delay:
            return None, False, delay.seconds
        except TimeoutError as error:
            if deadline is not None and deadline.expired():
                return TimeoutError(f"handler timed out after {self.handler_timeout_s} s"), self.retry_timeouts, None
            return error, True, None
        except Exception as error:
            return error, True, None
        finally:
            self.metrics.latency.observe(time.perf_counter() - started)

    def _invoke(self, record: Record):
        handler = self._handler
        assert handler is not None, "run_async starts only with a handler"
        if self._is_async:
            return handler(record)
        return asyncio.get_running_loop().run_in_executor(self._handler_threads, handler, record)

    def _later(self, work: _Work, seconds: float) -> None:
        """Put ``work`` off; it stays the head of its key, so later records of its key wait."""
        self._delayed += 1
        work.timer = asyncio.get_running_loop().call_later(seconds, self._due, work)

    def _due(self, work: _Work) -> None:
        work.timer = None
        self._delayed -= 1
        self._ready.append(work)
        self._pump()

    async def _dead_letter(self, work: _Work, error: BaseException) -> None:
        record = work.record
        if self._dead_letters is None:
            self._without_dead_letter(work, error)
            return
        try:
            await self._dead_letters.send(record, error, work.failures)
        except KafkaException as failure:
            self._fail(ProcessingError(f"could not write {record!r} to {self.dead_letter_topic}: {failure}"))
            return
        if not work.dropped:
            self.metrics.dead_lettered.inc()
            self._finish(work)

    def _without_dead_letter(self, work: _Work, error: BaseException) -> None:
        """A record failed for good and there is nowhere to put it: committing past it would lose it."""
        self._fail(ProcessingError(f"{work.record!r} failed after {work.failures} attempt(s) and no "
                                   f"dead_letter_topic is set: {type(error).__name__}: {error}"))

    def _finish(self, work: _Work) -> None:
        work.partition.offsets.finish(work.record.offset)
        self._forget(work)
        following = self._keys.finish(work.key, work)
        if following is not None:
            self._ready.append(following)

    def _drop(self, work: _Work) -> None:
        """Forget a record of a partition this member no longer owns (its new owner handles it)."""
        work.dropped = True
        if work.timer is not None:
            work.timer.cancel()
            work.timer = None
            self._delayed -= 1
        if work.running and work.task is not None:
            work.task.cancel()
        self._forget(work)
        following = self._keys.remove(work.key, work)
        if following is not None:
            self._ready.append(following)

    # --- rebalances and commits ----------------------------------------------------------------

    def _in_loop(self, coroutine) -> Any:
        """Run ``coroutine`` on the processor's loop from the consumer's thread and wait for it."""
        loop = self._loop
        assert loop is not None, "the consumer calls back only while run_async runs"
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._in_loop(self._assigned(partitions))
        consumer.incremental_assign(partitions)
        if self._fetching_paused:
            consumer.pause(partitions)

    async def _assigned(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._partitions[(tp.topic, tp.partition)] = _Partition(tp.topic, tp.partition)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._commit_now(consumer, self._in_loop(self._release([(tp.topic, tp.partition) for tp in partitions],
                                                               wait=True)))

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Another member may already own them: nothing may be committed."""
        self._in_loop(self._release([(tp.topic, tp.partition) for tp in partitions], wait=False))

    async def _release(self, keys: list[tuple[str, int]], wait: bool) -> list[TopicPartition]:
        """Stop taking records of these partitions, drop those not running, wait up to
        ``revoke_timeout_s`` for the running ones (``wait``), drop the rest; returns the
        commit positions that moved since the last acknowledged commit."""
        states = [state for state in (self._partitions.pop(key, None) for key in keys) if state is not None]
        for state in states:
            for work in [w for w in state.works if not w.running]:
                self._drop(work)
        if wait:
            await self._wait_idle(states)
        for state in states:
            for work in list(state.works):
                self._drop(work)
        return self._positions(states) if wait else []

    async def _wait_idle(self, states) -> None:
        """Give the handlers running records of ``states`` (partitions, batches) up to ``revoke_timeout_s``."""
        busy = [state for state in states if state.running]
        if not busy:
            return
        idle = []
        for state in busy:
            state.idle = asyncio.Event()
            idle.append(state.idle)
        try:
            async with asyncio.timeout(self.revoke_timeout_s):
                for event in idle:
                    await event.wait()
        except TimeoutError:
            log.warning("handlers of %d partition(s) or batch(es) still running after %s s; their records are "
                        "left to the next owner", sum(1 for s in busy if s.running), self.revoke_timeout_s)

    @staticmethod
    def _positions(states) -> list[TopicPartition]:
        return [TopicPartition(s.topic, s.partition, s.offsets.position) for s in states
                if s.offsets.position is not None and s.offsets.position != s.committed]

    def _commit_now(self, consumer: Consumer, offsets: list[TopicPartition]) -> None:
        """A synchronous commit (revoke, shutdown), in the consumer's thread."""
        if offsets:
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException as error:
                log.warning("commit of %d partition(s) failed: %s", len(offsets), error)

    def _on_commit(self, error, partitions: list[TopicPartition]) -> None:
        """Acknowledged commits (in the consumer's thread): the positions to compare and the commit age."""
        if error is not None:
            return
        now = time.monotonic()
        for tp in partitions:
            state = self._partitions.get((tp.topic, tp.partition))
            if state is not None and tp.error is None and tp.offset >= 0:
                state.committed = tp.offset
                state.committed_at = now

    # --- figures ----------------------------------------------------------------------------

    def snapshot(self) -> dict:
        """Counts of the records in memory, for metrics and tests (safe from any thread)."""
        return {"buffered_records": self._buffered_records, "buffered_bytes": self._buffered_bytes,
                "buffered_records_max": self._buffered_records_max, "buffered_bytes_max": self._buffered_bytes_max,
                "queued_records": len(self._ready), "running_records": self._running,
                "delayed_records": self._delayed, "paused": int(self._paused)}

    def partition_figures(self):
        """(topic, partition), acknowledged commit position, cached log end offset, last commit time."""
        for key, state in list(self._partitions.items()):
            high = None
            if self._consumer is not None:
                try:
                    _low, high = self._consumer.get_watermark_offsets(TopicPartition(*key), cached=True)
                except KafkaException:
                    pass
                if high is not None and high < 0:
                    high = None
            yield key, state.committed, high, state.committed_at
