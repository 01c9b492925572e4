"""The broker's log cleaner: compacts the partitions it serves whose ``cleanup.policy``
includes ``compact``, one at a time, the dirtiest first (Kafka's LogCleaner with one
cleaner thread).

Only the partition's owner cleans (it only sees the partitions it serves), and a new
owner finds the compacted ledgers through the ledger list in the metadata store: a
pass commits with one compare-and-set write of that list, which fails if another
broker took the partition over meanwhile, and the pass's ledgers are then deleted.
The CPU work runs on one thread of its own, a chunk of a few MiB at a time, so the
event loop only reads and appends and the shared default executor (fsyncs, large
reads) is never queued behind it. ``__consumer_offsets`` is left to the group
coordinator, which compacts it its own way.
"""
import asyncio
import logging
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from kgate.metadata.cluster import Topic
from kgate.storage import compaction
from kgate.storage.compaction import CompactionPolicy, CompactionResult

from .config import Settings, is_compacted
from .partition import Partition

log = logging.getLogger(__name__)


class CleanerMetrics(Protocol):
    def log_cleaned(self, result: CompactionResult) -> None: ...


class CleaningBroker(Protocol):
    """What the cleaner needs of the broker: the partitions it serves, their topics' configs,
    its own settings, and where a pass is counted."""

    settings: Settings

    @property
    def topics(self) -> Mapping[str, Topic]: ...

    @property
    def metrics(self) -> CleanerMetrics: ...

    def served(self) -> Iterator[tuple[tuple[str, int], Partition]]: ...

    def is_internal(self, name: str) -> bool: ...

    def topic_config(self, topic: Topic, name: str) -> str: ...


class LogCleaner:
    def __init__(self, broker: CleaningBroker):
        self._broker = broker
        self._executor: ThreadPoolExecutor | None = None
        self._task: asyncio.Task | None = None
        # When tombstones left by the last pass expire, per partition: a pass is due then.
        self._tombstones_expire: dict[tuple[str, int], int] = {}

    def start(self) -> None:
        if self._broker.settings["log.cleaner.enable"]:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="kgate-log-cleaner")
            self._task = asyncio.create_task(self._loop())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)

    def policy(self, topic: Topic) -> CompactionPolicy:
        def value(name):
            return self._broker.topic_config(topic, name)
        return CompactionPolicy(int(value("delete.retention.ms")), int(value("min.compaction.lag.ms")),
                                int(value("max.compaction.lag.ms")), float(value("min.cleanable.dirty.ratio")),
                                int(value("segment.bytes")))

    def compacted(self):
        """``(key, partition, policy)`` of each served partition of a compacted topic."""
        broker = self._broker
        for key, partition in broker.served():
            topic = broker.topics.get(key[0])
            if topic is None or broker.is_internal(topic.name):
                continue
            if is_compacted(broker.topic_config(topic, "cleanup.policy")):
                yield key, partition, self.policy(topic)

    def dirty_ratios(self, now_ms: int | None = None) -> dict[tuple[str, int], float]:
        """Each compacted partition's dirty ratio now (a metric)."""
        now_ms = _now_ms() if now_ms is None else now_ms
        return {key: compaction.cleanable(partition.ledger, policy, now_ms).dirty_ratio
                for key, partition, policy in self.compacted()}

    async def _loop(self) -> None:
        backoff = self._broker.settings["log.cleaner.backoff.ms"] / 1000
        while True:
            if not await self.clean_dirtiest():
                await asyncio.sleep(backoff)

    async def clean_dirtiest(self) -> bool:
        """Compact the partition most in need of it, if any is due; True when a pass swapped ledgers in."""
        now = _now_ms()
        best = None
        for key, partition, policy in self.compacted():
            found = compaction.cleanable(partition.ledger, policy, now)
            expiring = self._tombstones_expire.get(key)
            if found.due(policy, now) or (expiring is not None and expiring <= now):
                if best is None or found.dirty_ratio > best[3].dirty_ratio:
                    best = (key, partition, policy, found)
        if best is None:
            return False
        key, partition, policy, found = best
        try:
            result = await self._compact(partition, policy, found, now)
        except Exception as exc:  # the partition moved, closed or is damaged: the next round decides
            log.warning("%s-%d: compaction pass given up: %r", key[0], key[1], exc)
            return False
        if result.tombstones_expire_ms is None:
            self._tombstones_expire.pop(key, None)
        else:
            self._tombstones_expire[key] = result.tombstones_expire_ms
        return result.swapped

    async def _compact(self, partition: Partition, policy: CompactionPolicy, found: compaction.Cleanable,
                       now: int) -> CompactionResult:
        loop = asyncio.get_running_loop()
        settings = self._broker.settings
        began = time.monotonic()

        def run(fn, *args):
            return loop.run_in_executor(self._executor, fn, *args)

        result = await compaction.compact(partition.ledger, found, policy, settings["log.cleaner.dedupe.buffer.size"],
                                          run, now, partition.producers.last_batch_offsets(),
                                          settings["kgate.max.inflated.batch.bytes"])
        self._broker.metrics.log_cleaned(result)
        log.info("%s-%d compacted in %.1f s: dirty ratio %.2f, %d bytes read, %d written, %d records removed%s",
                 partition.topic, partition.index, time.monotonic() - began, found.dirty_ratio, result.bytes_read,
                 result.bytes_written, result.records_removed, "" if result.swapped else " (not swapped in)")
        return result


def _now_ms() -> int:
    return int(time.time() * 1000)
