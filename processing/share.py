"""Share mode: the records of a share group (KIP-932), in any order, by any number of processors.

The broker hands each record to one member at a time under a lock and takes it back when
the lock runs out, so processors need no partitions of their own: any number of them (and
any number of members each) read the same partitions, and a killed processor's records go
to the others once their locks expire. There is no commit position to move: each record is
acknowledged on its own, ACCEPT once handled or dead-lettered, REJECT when it failed for
good and there is no dead-letter topic (the broker archives it: it is never delivered
again), RELEASE when it is given back unfinished.

What stays the keyed mode's (``processor.py``): handler slots, attempts, timeouts, retries
with the same backoff, ``Delay``, the dead-letter topic and the metrics. What differs is
where records come from and how they are settled.

librdkafka's share consumer, in explicit acknowledgement mode, polls again only once every
record of its last poll is acknowledged, so one batch's slowest record holds up its
member. A processor therefore runs several members, each a ``ShareConsumer`` in a thread
of its own, sized so the others keep the handler slots full while one waits: a batch is
at most ``min(500, concurrency)`` records, and there is one member more than the batches
``concurrency`` needs.

Retries and delays hold the record and acknowledge it later, within its lock: releasing
it would hand it straight back to the group with no wait at all (Kafka 4.4 has no delayed
release, and librdkafka 2.16 cannot renew a lock), and every release counts towards the
group's ``share.delivery.count.limit``, after which the broker archives the record
unhandled. So a retry backoff or a ``Delay`` runs in the processor as in keyed mode, cut
to what is left of the record's lock (less a margin for the acknowledgement's trip);
once nothing is left the record is released, comes back with a higher delivery count,
and its attempts start again from where the new holder takes it.
"""
import asyncio
import contextlib
import logging
import math
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import AcknowledgeType, IllegalStateException, KafkaException, ShareConsumer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from .processor import BATCH, POLL_S, ProcessingError, Processor, _Work
from .record import Record

log = logging.getLogger("kgate.processing")

DEFAULT_LOCK_MS = 30_000
"""Kafka's ``share.record.lock.duration.ms``, used when the group's cannot be read."""


class _Batch:
    """The records of one poll of one member: acknowledged together before it polls again."""

    __slots__ = ("works", "running", "idle", "pending", "done", "acks", "deadline")

    def __init__(self, size: int, deadline: float) -> None:
        self.works: set[_Work] = set()
        self.running = 0
        self.idle: asyncio.Event | None = None
        self.pending = size
        self.done = asyncio.Event()
        self.acks: list[tuple[str, int, int, AcknowledgeType]] = []
        self.deadline = deadline
        """Loop time after which a held record may no longer be acknowledged safely."""

    def settle(self, record: Record, ack: AcknowledgeType) -> None:
        self.acks.append((record.topic, record.partition, record.offset, ack))
        self.pending -= 1
        if self.pending == 0:
            self.done.set()


class ShareProcessor(Processor):
    """``Processor(..., mode="share")``: see the module's docstring."""

    _lock_s = DEFAULT_LOCK_MS / 1000

    async def _serve(self) -> None:
        self._lock_s = await asyncio.to_thread(self._lock_duration_s)
        members = math.ceil(self.concurrency / min(BATCH, self.concurrency)) + 1
        size = max(1, min(BATCH, self.concurrency, self.max_records // members))
        tasks = [asyncio.create_task(self._member(size)) for _ in range(members)]
        try:
            await asyncio.gather(*tasks)
        finally:  # one member failing stops the others, and each still leaves the group
            self._stopping = True
            await asyncio.gather(*tasks, return_exceptions=True)

    def _lock_duration_s(self) -> float:
        """The group's record lock duration, as the broker describes the group's configs."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap, **self._producer_config()})
        resource = ConfigResource(ResourceType.GROUP, self.group)
        try:
            configs = admin.describe_configs([resource])[resource].result(timeout=30)
            return int(configs["share.record.lock.duration.ms"].value) / 1000
        except (KafkaException, KeyError, ValueError) as error:
            log.warning("could not read the group's share.record.lock.duration.ms (%s); assuming Kafka's "
                        "default, %d ms", error, DEFAULT_LOCK_MS)
            return DEFAULT_LOCK_MS / 1000

    def _share_config(self, size: int) -> dict:
        return {"bootstrap.servers": self.bootstrap, "group.id": self.group, "share.acknowledgement.mode": "explicit",
                "max.poll.records": size, **self._producer_config(),
                **{k: v for k, v in self.config.items() if k.startswith(("share.", "max.poll."))}}

    async def _member(self, size: int) -> None:
        """One share consumer: poll a batch, hand it to the handlers, acknowledge it with the next poll."""
        loop = asyncio.get_running_loop()
        thread = ThreadPoolExecutor(1, thread_name_prefix="kgate-processing-share")
        consumer = await loop.run_in_executor(thread, ShareConsumer, self._share_config(size))
        acks: list = []
        try:
            await loop.run_in_executor(thread, consumer.subscribe, self.topics)
            while not self._stopping:
                try:
                    messages = await loop.run_in_executor(thread, _poll, consumer, acks)
                except KafkaException as error:
                    self._fail(ProcessingError(f"share consumer failed: {error}"))
                    break
                acks = []
                batch = self._take_batch(messages)
                if batch is not None:
                    await self._settled(batch)
                    acks = batch.acks
        finally:
            await loop.run_in_executor(thread, _leave, consumer, acks, self.revoke_timeout_s)
            thread.shutdown()

    def _take_batch(self, messages) -> _Batch | None:
        records = []
        for message in messages:
            error = message.error()
            if error is None:
                records.append(Record.from_message(message))
            elif error.fatal():
                self._fail(ProcessingError(f"share consumer failed: {error}"))
            else:
                log.warning("share consumer: %s", error)
        if not records:
            return None
        batch = _Batch(len(records), asyncio.get_running_loop().time() + self._lock_s - self._margin_s())
        for record in records:
            work = _Work(record, None, batch)  # type: ignore[arg-type]  # a batch stands where a partition would
            self._hold(work)
            self._ready.append(work)
        self._pump()
        return batch

    def _margin_s(self) -> float:
        """Time kept back from a lock for the acknowledgement to reach the broker."""
        return min(2.0, self._lock_s / 4)

    async def _settled(self, batch: _Batch) -> None:
        """Wait for every record of ``batch`` to be settled; if the processor stops first, give
        the running ones ``revoke_timeout_s`` and release the rest."""
        while batch.pending and not self._stopping:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL_S):
                    await batch.done.wait()
        if batch.pending:
            await self._wait_idle([batch])
            for work in list(batch.works):
                self._drop(work)

    # --- how records are settled -------------------------------------------------------------

    def _finish(self, work: _Work) -> None:
        """Handled, or written to the dead-letter topic: accepted."""
        self._forget(work)
        work.partition.settle(work.record, AcknowledgeType.ACCEPT)  # type: ignore[attr-defined]

    def _without_dead_letter(self, work: _Work, error: BaseException) -> None:
        """Failed for good with no dead-letter topic: rejected, so the broker archives it."""
        log.warning("%r failed after %d attempt(s), rejected: %s: %s", work.record, work.failures,
                    type(error).__name__, error)
        self.metrics.rejected.inc()
        self._forget(work)
        work.partition.settle(work.record, AcknowledgeType.REJECT)  # type: ignore[attr-defined]

    def _drop(self, work: _Work) -> None:
        """Give an unfinished record back to the group (the processor is stopping)."""
        super()._drop(work)
        self.metrics.released.inc()
        work.partition.settle(work.record, AcknowledgeType.RELEASE)  # type: ignore[attr-defined]

    def _later(self, work: _Work, seconds: float) -> None:
        """Hold the record for a retry or a delay within what is left of its lock, else release it."""
        left = work.partition.deadline - asyncio.get_running_loop().time()  # type: ignore[attr-defined]
        if left > 0:
            super()._later(work, min(seconds, left))
            return
        self._forget(work)
        self.metrics.released.inc()
        work.partition.settle(work.record, AcknowledgeType.RELEASE)  # type: ignore[attr-defined]


def _poll(consumer: ShareConsumer, acks: list):
    """In the member's thread: acknowledge the last batch (sent with this poll), take the next."""
    for topic, partition, offset, ack in acks:
        try:
            consumer.acknowledge_offset(topic, partition, offset, ack)
        except IllegalStateException as error:  # its lock ran out: the group hands it out again
            log.warning("acknowledging %s[%d]@%d: %s", topic, partition, offset, error)
    return consumer.poll(POLL_S)


def _leave(consumer: ShareConsumer, acks: list, timeout_s: float) -> None:
    """In the member's thread: acknowledge what is settled, commit, leave the group."""
    try:
        for topic, partition, offset, ack in acks:
            consumer.acknowledge_offset(topic, partition, offset, ack)
        consumer.commit_sync(timeout_s)
    except (KafkaException, IllegalStateException) as error:
        log.warning("share consumer: final acknowledgement failed: %s", error)
    finally:
        consumer.close()
