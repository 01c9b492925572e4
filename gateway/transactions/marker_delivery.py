"""Ending a transaction in its partitions: one COMMIT or ABORT marker each, retried within bounds.

A marker can fail to land for a while: the partition's owner is moving, the peer
link is down, the ledger is being fenced. Each marker is tried a bounded number of
times with a doubling backoff on the coordinator's clock, and given up while the
coordinator still owns the transaction no longer than that. An attempt that has not
ended within ``ATTEMPT_TIMEOUT_MS`` counts as failed: a marker appended to a partition
this broker was handing over could wait for its durability for good, while the
transactional id's lock is held and EndTxn waits behind it. A delivery that gives
up leaves the transaction prepared: the coordinator's periodic check (or the next
owner's load) delivers its markers again, and a second marker for a transaction
already ended is harmless (no data of that producer is open there any more).
"""
import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from ..coordinator.clock import Clock

log = logging.getLogger(__name__)

ATTEMPTS = 10
FIRST_BACKOFF_MS = 100
MAX_BACKOFF_MS = 2000  # ten attempts span about 11 s: longer than an owner's hand-over
ATTEMPT_TIMEOUT_MS = 5000


@dataclass(frozen=True, slots=True)
class Marker:
    producer_id: int
    epoch: int
    commit: bool
    coordinator_epoch: int


class MarkerWriter(Protocol):
    async def write(self, topic: str, index: int, marker: Marker) -> None:
        """Write ``marker`` to ``topic``-``index`` and return once it is durable, or at once when
        the topic is gone (nothing is left to end there). Raises when it could not be written."""


class MarkerDelivery:
    def __init__(self, writer: MarkerWriter, clock: Clock, attempts: int = ATTEMPTS,
                 first_backoff_ms: int = FIRST_BACKOFF_MS, max_backoff_ms: int = MAX_BACKOFF_MS,
                 attempt_timeout_ms: int = ATTEMPT_TIMEOUT_MS):
        self.writer = writer
        self.clock = clock
        self.attempts = attempts
        self.attempt_timeout_ms = attempt_timeout_ms
        self.first_backoff_ms = first_backoff_ms
        self.max_backoff_ms = max_backoff_ms

    async def deliver(self, transactional_id: str, partitions: Iterable[tuple[str, int]], marker: Marker,
                      still_owned: Callable[[], bool]) -> None:
        """Write the marker to every partition, in order. Raises NOT_COORDINATOR when the
        transaction moved to another coordinator meanwhile, COORDINATOR_NOT_AVAILABLE when a
        partition refused every attempt."""
        for topic, index in sorted(partitions):
            await self._deliver_one(transactional_id, topic, index, marker, still_owned)

    async def _deliver_one(self, transactional_id: str, topic: str, index: int, marker: Marker,
                           still_owned: Callable[[], bool]) -> None:
        backoff = self.first_backoff_ms
        for attempt in range(1, self.attempts + 1):
            try:
                await self._attempt(topic, index, marker)
            except Exception as exc:
                log.warning("marker for %s to %s-%d failed (attempt %d of %d): %s", transactional_id, topic, index,
                            attempt, self.attempts, exc)
            else:
                if attempt > 1:  # closes the warnings above: the marker reached the partition after all
                    log.info("marker for %s to %s-%d written at attempt %d", transactional_id, topic, index, attempt)
                return
            if attempt == self.attempts:
                break
            await self.clock.sleep(backoff)
            backoff = min(2 * backoff, self.max_backoff_ms)
            if not still_owned():
                raise KafkaError(ErrorCode.NOT_COORDINATOR, "another broker coordinates this transactional id now")
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                         f"the marker for {transactional_id} to {topic}-{index} was refused {self.attempts} times")

    async def _attempt(self, topic: str, index: int, marker: Marker) -> None:
        """One write, waited for no longer than the attempt timeout. One that overruns is left
        to end on its own, not cancelled (a durability future cancelled under the ledger's
        feet would break its append pipeline); writing the marker again is harmless."""
        write = asyncio.ensure_future(self.writer.write(topic, index, marker))
        # Its outcome is read below, unless the attempt overruns or the delivery is cancelled (its
        # coordinator partition handed over): marked retrieved, a failure nobody waits for is not
        # logged as an error.
        write.add_done_callback(lambda ended: ended.cancelled() or ended.exception())
        overrun: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def overran() -> None:
            if not overrun.done():
                overrun.set_result(None)
        timer = self.clock.call_later(self.attempt_timeout_ms, overran)
        try:
            await asyncio.wait((write, overrun), return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
        if not write.done():
            raise TimeoutError(f"no answer within {self.attempt_timeout_ms} ms")
        if write.cancelled():  # its partition closed under it (handed over): a failed attempt, not the delivery's end
            raise ConnectionError("the write was cancelled")
        write.result()
