"""One source partition being copied: what was sent, what the target acknowledged, what is stored.

The rule that makes the mirror lose nothing (uReplicator's, after MirrorMaker 1 lost
data by committing first) lives here: ``acked`` only moves over a record once the target
acknowledged it and every record before it, and only ``acked`` is ever stored as the
partition's position. Records deliberately not copied (they would go back to their
origin) count as acknowledged once everything before them is.

Delivery reports can name a failure (the producer gave up or was fenced); the copy then
asks to be rewound to ``acked`` and re-sends from there: at least once, never less.
"""
import time
from collections import deque
from dataclasses import dataclass, field

from .routes import ORIGIN_HEADER, Route
from .state import Item


@dataclass
class PartitionCopy:
    item: Item
    route: Route
    target_topic: str
    acked: int                       # every source offset below this is on the target
    stored: int                      # the position last written to the state store
    epoch: int = 0                   # bumped on rewind: late reports of the old epoch are ignored
    failed: bool = False
    last_target_offset: int = -1     # target offset of the newest acknowledged record
    last_upstream: int = -1          # its source offset
    acked_timestamp_ms: int = 0      # record timestamp of the newest acknowledged record
    high_watermark: int = -1
    synced: tuple[int, int] | None = None  # the (upstream, downstream) pair last written as an offset sync
    bytes_in: int = 0
    records_in: int = 0
    minute_counts: dict = field(default_factory=dict)  # audit: acknowledged records of the source's own, by minute
    reported_records: int = 0        # acknowledged since the metrics last took them
    reported_bytes: int = 0
    origin_header: tuple = field(init=False)  # what every record first written to the source carries on the target
    _inflight: deque = field(default_factory=deque)
    _done: dict = field(default_factory=dict)   # source offset -> (target offset, timestamp)
    _skipped_to: int = -1

    def __post_init__(self):
        self.origin_header = (ORIGIN_HEADER, self.route.source.encode())

    @property
    def partition(self) -> int:
        return self.item[2]

    @property
    def source_topic(self) -> str:
        return self.item[1]

    def sent(self, offset: int, size: int) -> None:
        self._inflight.append(offset)
        self.bytes_in += size
        self.records_in += 1

    def skipped(self, offset: int, size: int) -> None:
        self.bytes_in += size
        self.records_in += 1
        if self._inflight:
            self._skipped_to = offset + 1
        else:
            self.acked = max(self.acked, offset + 1)

    def delivered(self, epoch: int, offset: int, target_offset: int, timestamp_ms: int) -> bool:
        """A success report; True when ``acked`` moved."""
        if epoch != self.epoch or self.failed:
            return False
        self._done[offset] = (target_offset, timestamp_ms)
        before = self.acked
        while self._inflight and self._inflight[0] in self._done:
            done = self._inflight.popleft()
            self.last_target_offset, self.acked_timestamp_ms = self._done.pop(done)
            self.last_upstream = done
            self.acked = max(self.acked, done + 1)
        if not self._inflight and self._skipped_to > self.acked:
            self.acked = self._skipped_to
        return self.acked != before

    def delivery_failed(self, epoch: int) -> None:
        if epoch == self.epoch:
            self.failed = True

    def sync_due(self, lag_max: int, at_commit: bool) -> tuple[int, int] | None:
        """The offset sync to write now, if one is due: at the first acknowledgement after
        a (re)start (copies made twice must begin after a sync), when the target has run
        ``lag_max`` records past the last sync, and at every commit when anything moved."""
        if self.last_upstream < 0:
            return None
        pair = (self.last_upstream, self.last_target_offset)
        if self.synced is None or pair[1] - self.synced[1] >= lag_max or (at_commit and pair != self.synced):
            self.synced = pair
            return pair
        return None

    def rewind(self) -> int:
        """Forget everything in flight; copying resumes at ``acked``."""
        self.epoch += 1
        self.failed = False
        self.synced = None
        self.last_upstream = -1
        self._inflight.clear()
        self._done.clear()
        self._skipped_to = -1
        return self.acked

    @property
    def idle(self) -> bool:
        return not self._inflight

    def lag(self) -> tuple[int, float]:
        """(records on the source not yet on the target, seconds since the oldest of them
        was written at the source; 0 when none is behind)."""
        records = max(0, self.high_watermark - max(self.acked, 0)) if self.high_watermark >= 0 else 0
        if not records or not self.acked_timestamp_ms:
            return records, 0.0
        return records, max(0.0, time.time() - self.acked_timestamp_ms / 1000)
