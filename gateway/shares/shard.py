"""The share-partitions of one ``__share_group_state`` partition, as a shard of the coordinator runtime.

This is Kafka's share coordinator: the persisted state of each share-partition (its state
epoch, the leader epoch of the broker that last read or wrote it, its start offset and the
state batches of its in-flight window), kept for the partition's leader, which holds the
live state (who acquired what, until when: gateway/shares/leader.py) and reads and writes
this through the share-state APIs (83-87). The rules are those APIs' answers: a write from a
leader of an older leader epoch, or of an older state epoch (the offsets were reset since),
is fenced, as Kafka fences it; a write's batches are merged into what was stored.

Every change stores the share-partition's whole snapshot (``records``), so replay needs no
merging; snapshot records are written from the live state, so replay leaves them alone.
"""
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from ..coordinator.shard import Result, Shard
from . import records
from .partition_state import SharePartitionState, StateBatch
from .records import SharePartitionKey

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ShareSummary:
    """What DescribeShareGroupOffsets tells of a share-partition (Kafka's ReadShareGroupStateSummary):
    start offset -1 for one never started, how many records past it are already finished, and
    (kgate's own) how many are in flight."""
    start_offset: int
    leader_epoch: int = 0
    delivery_complete: int = -1
    in_flight: int = -1
    state_epoch: int = 0


UNINITIALIZED = ShareSummary(-1)


@dataclass(frozen=True, slots=True)
class StoredState:
    """ReadShareGroupState's answer: start offset -1 and state epoch 0 for a share-partition never stored."""
    state_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareRecord:
    key: SharePartitionKey
    state: SharePartitionState | None  # None: a tombstone
    leader_epoch: int = -1
    delivery_complete: int = -1  # as the leader last wrote it (WriteShareGroupState v1)
    live: bool = False


# The state is kept per offset of the in-flight window, which a leader bounds
# (share.partition.max.record.locks); a write making it wider is refused rather than held.
MAX_WINDOW = 100_000

UNINITIALIZED_READ = "Read operation on uninitialized share partition not allowed."
UNINITIALIZED_WRITE = "Write operation on uninitialized share partition not allowed."
FENCED_STATE = "The coordinator rejected the request because the state epoch did not match."


class ShareStateShard(Shard[ShareRecord]):
    def __init__(self, index: int):
        self.index = index
        self.partitions: dict[SharePartitionKey, SharePartitionState] = {}
        self.leader_epochs: dict[SharePartitionKey, int] = {}
        self.delivery_complete: dict[SharePartitionKey, int] = {}

    # -- the log --------------------------------------------------------------------------------

    def decode(self, key: bytes, value: bytes | None) -> ShareRecord | None:
        try:
            return ShareRecord(*records.decode(key, value))
        except records.CorruptRecord as exc:
            log.error("%s-%d: skipped a record: %s", "__share_group_state", self.index, exc)
            return None

    def encode(self, record: ShareRecord) -> tuple[bytes, bytes | None]:
        value = None if record.state is None else records.value(record.state, max(record.leader_epoch, 0),
                                                                record.delivery_complete)
        return records.key(record.key), value

    def replay(self, record: ShareRecord, producer_id: int = -1) -> None:
        if record.live:
            return
        if record.state is None:
            self._forget(record.key)
        else:
            self.partitions[record.key] = record.state
            self.leader_epochs[record.key] = record.leader_epoch
            self.delivery_complete[record.key] = record.delivery_complete

    def snapshot(self) -> list[ShareRecord]:
        return [self._record(key) for key in self.partitions]

    def live_records(self) -> int:
        return len(self.partitions)

    # -- the share-state APIs -------------------------------------------------------------------

    def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> Result[None, ShareRecord]:
        """InitializeShareGroupState: the share-partition starts afresh at ``start_offset`` under
        ``state_epoch``; an older state epoch than the stored one is fenced."""
        stored = self.partitions.get(key)
        if stored is not None and stored.state_epoch > state_epoch:
            raise KafkaError(ErrorCode.FENCED_STATE_EPOCH, FENCED_STATE)
        self.partitions[key] = SharePartitionState.restore(start_offset, state_epoch, ())
        self.delivery_complete.pop(key, None)
        return self._stored(None, [key])

    def read(self, key: SharePartitionKey, leader_epoch: int) -> Result[StoredState, ShareRecord]:
        """ReadShareGroupState: a leader loading the share-partition; its leader epoch is kept,
        so a write from an older leader (one that lost the partition) is fenced from now on."""
        self._check_leader(key, leader_epoch)
        state = self.partitions.get(key)
        if state is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, UNINITIALIZED_READ)
        answer = StoredState(state.state_epoch, state.start_offset, tuple(state.state_batches()))
        if leader_epoch > self.leader_epochs.get(key, -1):
            self.leader_epochs[key] = leader_epoch
            return self._stored(answer, [key])
        return Result(answer)

    def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
              batches: Iterable[StateBatch], delivery_complete: int = -1) -> Result[None, ShareRecord]:
        """WriteShareGroupState: the leader's batches merged over what was stored (theirs win where
        they overlap), everything below the start offset (-1: unchanged) dropped; a share-partition
        never initialized is refused."""
        self._check_leader(key, leader_epoch)
        stored = self.partitions.get(key)
        if stored is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, UNINITIALIZED_WRITE)
        if stored.state_epoch > state_epoch:
            raise KafkaError(ErrorCode.FENCED_STATE_EPOCH, FENCED_STATE)
        merged = stored.merged(state_epoch, start_offset, batches)
        if merged.end_offset - merged.start_offset > MAX_WINDOW:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"state batches over more than {MAX_WINDOW} offsets")
        self.partitions[key] = merged
        self.delivery_complete[key] = delivery_complete
        if leader_epoch >= 0:
            self.leader_epochs[key] = leader_epoch
        return self._stored(None, [key])

    def delete(self, key: SharePartitionKey) -> Result[None, ShareRecord]:
        """DeleteShareGroupState: the share-partition's state goes (a tombstone); none stored is no error."""
        return Result(None, self._deleted([key] if key in self.partitions else []).records)

    def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ShareSummary:
        """ReadShareGroupStateSummary (a read only: it moves no leader epoch), with the
        delivery-complete count the leader last wrote (-1 if it wrote none)."""
        self._check_leader(key, leader_epoch)
        state = self.partitions.get(key)
        if state is None:
            return UNINITIALIZED
        return ShareSummary(state.start_offset, max(self.leader_epochs.get(key, 0), 0),
                            self.delivery_complete.get(key, -1), -1, state.state_epoch)

    def _check_leader(self, key: SharePartitionKey, leader_epoch: int) -> None:
        if leader_epoch >= 0 and self.leader_epochs.get(key, -1) > leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)

    # -- administration (the share-group offsets APIs, DeleteGroups) -------------------------------

    def summary(self, share_key: SharePartitionKey) -> ShareSummary:
        state = self.partitions.get(share_key)
        if state is None or not state.initialized:
            return UNINITIALIZED
        return ShareSummary(state.start_offset, max(self.leader_epochs.get(share_key, 0), 0),
                            state.delivery_complete(), state.in_flight(), state.state_epoch)

    def group_partitions(self, group_id: str) -> list[SharePartitionKey]:
        """The group's share-partitions here that have a start offset (what describing all reports)."""
        return sorted(key for key, state in self.partitions.items() if key.group_id == group_id and state.initialized)

    def reset_offsets(self, offsets: dict[SharePartitionKey, int]) -> Result[None, ShareRecord]:
        """AlterShareGroupOffsets, once the group was found empty: each share-partition starts
        afresh at its offset under a new state epoch, which fences the leaders' older state."""
        for key, offset in offsets.items():
            self.partitions.setdefault(key, SharePartitionState()).reset_start(offset)
        return self._stored(None, list(offsets))

    def delete_offsets(self, keys: list[SharePartitionKey]) -> Result[list[SharePartitionKey], ShareRecord]:
        """DeleteShareGroupOffsets, once the group was found empty: the share-partitions' state
        goes (tombstones); the ones that had state are answered."""
        return self._deleted([key for key in keys if key in self.partitions])

    def delete_group(self, group_id: str) -> Result[list[SharePartitionKey], ShareRecord]:
        """The group was deleted: its share-partitions' tombstones."""
        return self._deleted([key for key in self.partitions if key.group_id == group_id])

    def _deleted(self, doomed: list[SharePartitionKey]) -> Result[list[SharePartitionKey], ShareRecord]:
        for key in doomed:
            self._forget(key)
        return Result(doomed, [ShareRecord(key, None, live=True) for key in doomed])

    def _forget(self, key: SharePartitionKey) -> None:
        self.partitions.pop(key, None)
        self.leader_epochs.pop(key, None)
        self.delivery_complete.pop(key, None)

    def _record(self, key: SharePartitionKey) -> ShareRecord:
        return ShareRecord(key, self.partitions[key], self.leader_epochs.get(key, -1),
                           self.delivery_complete.get(key, -1), live=True)

    def _stored(self, response, keys: list[SharePartitionKey]) -> Result:
        return Result(response, [self._record(key) for key in keys])
