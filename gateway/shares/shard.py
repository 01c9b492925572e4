"""The share-partitions of one ``__share_group_state`` partition, as a shard of the coordinator runtime.

State is each share-partition's :class:`SharePartitionState`; its rules are
``partition_state``'s. Every rule that changes a share-partition stores its snapshot
(``records``) and keeps one timer per share-partition armed at its earliest lock
deadline, so records whose lock runs out are offered again when it does, on the
runtime's clock. An acquisition is stored too (as the records' raised delivery counts),
so a record handed out just before the partition moves counts as delivered for its next
owner, and the delivery limit holds across moves. Snapshot records are written from the
live state, so replay leaves them alone.
"""
import logging
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from ..coordinator.shard import Arm, Cancel, Result, Shard, TimerChange
from . import records
from .partition_state import AckBatch, Acquired, ShareConfig, SharePartitionState, Span
from .records import SharePartitionKey

log = logging.getLogger(__name__)

LOCKS = "locks"


@dataclass(frozen=True, slots=True)
class ShareSummary:
    """What DescribeShareGroupOffsets tells of a share-partition (Kafka's ReadShareGroupStateSummary):
    start offset -1 for one never started, how many records past it are already finished, and
    (kgate's own) how many are in flight."""
    start_offset: int
    leader_epoch: int = 0
    delivery_complete: int = -1
    in_flight: int = -1


UNINITIALIZED = ShareSummary(-1)


@dataclass(frozen=True, slots=True)
class ShareRecord:
    key: SharePartitionKey
    state: SharePartitionState | None  # None: a tombstone
    live: bool = False


class ShareStateShard(Shard[ShareRecord]):
    def __init__(self, index: int, config_of: Callable[[str], ShareConfig]):
        self.index = index
        self.config_of = config_of
        self.partitions: dict[SharePartitionKey, SharePartitionState] = {}

    # -- the log --------------------------------------------------------------------------------

    def decode(self, key: bytes, value: bytes | None) -> ShareRecord | None:
        try:
            return ShareRecord(*records.decode(key, value))
        except records.CorruptRecord as exc:
            log.error("%s-%d: skipped a record: %s", "__share_group_state", self.index, exc)
            return None

    def encode(self, record: ShareRecord) -> tuple[bytes, bytes | None]:
        return records.key(record.key), None if record.state is None else records.value(record.state)

    def replay(self, record: ShareRecord, producer_id: int = -1) -> None:
        if record.live:
            return
        if record.state is None:
            self.partitions.pop(record.key, None)
        else:
            self.partitions[record.key] = record.state

    def snapshot(self) -> list[ShareRecord]:
        return [ShareRecord(key, state, live=True) for key, state in self.partitions.items()]

    def live_records(self) -> int:
        return len(self.partitions)

    def timer_fired(self, now: int, key: Hashable) -> Result[None, ShareRecord]:
        assert isinstance(key, tuple) and key[0] == LOCKS
        share_key: SharePartitionKey = key[1]
        state = self.partitions.get(share_key)
        if state is None or not state.expire_locks(self.config_of(share_key.group_id), now):
            return Result(None, timers=self._timers(share_key))
        return self._stored(None, share_key)

    # -- the rules ------------------------------------------------------------------------------

    def fetch_offset(self, share_key: SharePartitionKey, log_start: int, log_end: int) -> Result[int, ShareRecord]:
        """Where a read for the share-partition starts; the first read places it
        (share.auto.offset.reset), and a log start moved past it moves it."""
        state = self.partitions.get(share_key)
        if state is None:
            state = self.partitions[share_key] = SharePartitionState()
        if state.initialize(self.config_of(share_key.group_id), log_start, log_end):
            return self._stored(state.fetch_offset(), share_key)
        return Result(state.fetch_offset())

    def acquire(self, now: int, share_key: SharePartitionKey, member: str, spans: Iterable[Span],
                max_records: int) -> Result[list[Acquired], ShareRecord]:
        """Hand ``member`` records of what a read from :meth:`fetch_offset` gave."""
        state = self.partitions.get(share_key)
        if state is None or not state.initialized:
            return Result([])
        acquired = state.acquire(self.config_of(share_key.group_id), now, member, spans, max_records)
        return self._stored(acquired, share_key) if acquired else Result(acquired)

    def acknowledge(self, now: int, share_key: SharePartitionKey, member: str,
                    batches: list[AckBatch]) -> Result[None, ShareRecord]:
        """Raises INVALID_REQUEST or INVALID_RECORD_STATE as Kafka answers, having changed nothing."""
        state = self.partitions.get(share_key)
        if state is None:
            raise KafkaError(ErrorCode.INVALID_RECORD_STATE, "no record of this share-partition was handed out")
        state.acknowledge(self.config_of(share_key.group_id), now, member, batches)
        return self._stored(None, share_key)

    def release_member(self, group_id: str, member: str) -> Result[None, ShareRecord]:
        """A member's share session ended (it left, or its session timed out): what it held goes back."""
        config = self.config_of(group_id)
        released = [key for key, state in self.partitions.items()
                    if key.group_id == group_id and state.release_member(config, member)]
        return self._stored_all(None, released)

    def delete_group(self, group_id: str) -> Result[list[SharePartitionKey], ShareRecord]:
        """The group was deleted: its share-partitions' tombstones, their timers cancelled."""
        return self._deleted([key for key in self.partitions if key.group_id == group_id])

    # -- administration (the share-group offsets APIs) -------------------------------------------

    def summary(self, share_key: SharePartitionKey) -> ShareSummary:
        state = self.partitions.get(share_key)
        if state is None or not state.initialized:
            return UNINITIALIZED
        return ShareSummary(state.start_offset, 0, state.delivery_complete(), state.in_flight())

    def group_partitions(self, group_id: str) -> list[SharePartitionKey]:
        """The group's share-partitions here that have a start offset (what describing all reports)."""
        return sorted(key for key, state in self.partitions.items() if key.group_id == group_id and state.initialized)

    def reset_offsets(self, offsets: dict[SharePartitionKey, int]) -> Result[None, ShareRecord]:
        """AlterShareGroupOffsets, once the group was found empty: each share-partition starts
        afresh at its offset, whether or not it had state before."""
        for key, offset in offsets.items():
            self.partitions.setdefault(key, SharePartitionState()).reset_start(offset)
        return self._stored_all(None, list(offsets))

    def delete_offsets(self, keys: list[SharePartitionKey]) -> Result[list[SharePartitionKey], ShareRecord]:
        """DeleteShareGroupOffsets, once the group was found empty: the share-partitions' state
        goes (tombstones); the ones that had state are answered."""
        return self._deleted([key for key in keys if key in self.partitions])

    def _deleted(self, doomed: list[SharePartitionKey]) -> Result[list[SharePartitionKey], ShareRecord]:
        for key in doomed:
            del self.partitions[key]
        return Result(doomed, [ShareRecord(key, None, live=True) for key in doomed],
                      [Cancel((LOCKS, key)) for key in doomed])

    def _stored(self, response, share_key: SharePartitionKey) -> Result:
        return self._stored_all(response, [share_key])

    def _stored_all(self, response, keys: list[SharePartitionKey]) -> Result:
        timers: list[TimerChange] = []
        for key in keys:
            timers += self._timers(key)
        return Result(response, [ShareRecord(key, self.partitions[key], live=True) for key in keys], timers)

    def _timers(self, share_key: SharePartitionKey) -> list[TimerChange]:
        state = self.partitions.get(share_key)
        deadline = None if state is None else state.next_deadline()
        return [Cancel((LOCKS, share_key))] if deadline is None else [Arm((LOCKS, share_key), deadline)]
