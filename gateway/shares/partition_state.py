"""One share-partition's delivery state (KIP-932): which records of a topic partition a share
group has handed out, to whom, until when, how often, and which are finished.

Pure rules, no I/O: the caller reads the log and hands in what it read as spans; the
rules answer with the records acquired and keep the state a ``__share_group_state``
record stores. Offsets below ``start_offset`` are finished; offsets from ``end_offset``
on were never handed out; between them each offset has an :class:`InFlight` state.
Kafka's ``SharePartition`` keeps batches; here each in-flight offset is one entry, which
``share.partition.max.record.locks`` bounds (the in-flight window never grows past it).

A record is ACQUIRED by one member for the lock duration, its delivery count raised;
an acknowledgement ACCEPTs it (ACKNOWLEDGED), REJECTs it (ARCHIVED), RELEASEs it
(AVAILABLE again) or RENEWs its lock (KIP-1222); a GAP (an offset with no record, as a
compacted log has) is archived. A released or expired record whose delivery count
reached ``share.delivery.count.limit`` is archived instead of offered again. The start
offset moves past every finished record at its front.
"""
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum

from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError


class DeliveryState(IntEnum):
    """Values as ``__share_group_state`` stores them (ACQUIRED is never stored)."""
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(IntEnum):
    """ShareAcknowledge's and ShareFetch's acknowledge types."""
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class SpanKind(IntEnum):
    DATA = 0
    ABORTED = 1  # records of an aborted transaction
    CONTROL = 2  # a transaction marker: never delivered


FINISHED = (DeliveryState.ACKNOWLEDGED, DeliveryState.ARCHIVED)
_ACK_STATES = {AckType.GAP: DeliveryState.ARCHIVED, AckType.ACCEPT: DeliveryState.ACKNOWLEDGED,
               AckType.RELEASE: DeliveryState.AVAILABLE, AckType.REJECT: DeliveryState.ARCHIVED}


@dataclass(frozen=True, slots=True)
class ShareConfig:
    """A share group's configs that bear on its partitions, with Kafka's defaults."""
    lock_ms: int = 30_000
    delivery_limit: int = 5
    max_record_locks: int = 2000
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"


@dataclass(frozen=True, slots=True)
class Span:
    """Offsets ``first``..``last`` (inclusive) as the log holds them."""
    first: int
    last: int
    kind: SpanKind = SpanKind.DATA


@dataclass(frozen=True, slots=True)
class Acquired:
    """ShareFetch's AcquiredRecords: a run of offsets handed out with one delivery count."""
    first: int
    last: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of offsets in one stored state: what ShareSnapshotValue's StateBatches hold."""
    first: int
    last: int
    state: DeliveryState
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AckBatch:
    """ShareAcknowledge's AcknowledgementBatch: one type for the whole run, or one per offset."""
    first: int
    last: int
    types: tuple[int, ...]


@dataclass(slots=True)
class InFlight:
    state: DeliveryState
    delivery_count: int
    member: str | None = None
    deadline_ms: int = 0


@dataclass(slots=True)
class SharePartitionState:
    """``start_offset`` -1: never initialized (the first fetch applies share.auto.offset.reset)."""
    start_offset: int = -1
    end_offset: int = -1
    state_epoch: int = 0
    records: dict[int, InFlight] = field(default_factory=dict)

    @property
    def initialized(self) -> bool:
        return self.start_offset >= 0

    # -- the log's bounds ------------------------------------------------------------------------

    def initialize(self, config: ShareConfig, log_start: int, log_end: int) -> bool:
        """Start where share.auto.offset.reset says when never started; follow the log's start
        when retention or DeleteRecords moved it past ours. Whether the state changed."""
        if not self.initialized:
            self.start_offset = self.end_offset = log_start if config.auto_offset_reset == "earliest" else log_end
            self.state_epoch += 1
            return True
        if log_start > self.start_offset:
            self._move_start(log_start)
            return True
        return False

    def fetch_offset(self) -> int:
        """Where the next read starts: the first record offered again, else the first never read."""
        available = [offset for offset, record in self.records.items() if record.state == DeliveryState.AVAILABLE]
        return min(available, default=self.end_offset)

    # -- acquiring ---------------------------------------------------------------------------------

    def acquire(self, config: ShareConfig, now: int, member: str, spans: Iterable[Span],
                max_records: int) -> list[Acquired]:
        """Hand ``member`` up to ``max_records`` records of what the read gave, locked until
        ``now`` + the lock duration. Offsets of new ground the read skipped (a compacted log),
        transaction markers and, read_committed, aborted records are archived, never handed out."""
        taken: list[tuple[int, int]] = []
        deadline = now + config.lock_ms
        for span in sorted(spans, key=lambda s: s.first):
            if len(taken) >= max_records:
                break
            if span.first > self.end_offset and self._may_grow(config, span.first):
                self._archive_new(self.end_offset, span.first - 1)
            skipped = span.kind == SpanKind.CONTROL or (span.kind == SpanKind.ABORTED and config.read_committed)
            for offset in range(max(span.first, self.start_offset), span.last + 1):
                if len(taken) >= max_records:
                    break
                record = self.records.get(offset)
                if record is None:
                    if offset != self.end_offset or not self._may_grow(config, offset):
                        continue
                    record = self.records[offset] = InFlight(DeliveryState.AVAILABLE, 0)
                    self.end_offset = offset + 1
                if record.state != DeliveryState.AVAILABLE:
                    continue
                if skipped:
                    record.state = DeliveryState.ARCHIVED
                    continue
                record.state, record.member, record.deadline_ms = DeliveryState.ACQUIRED, member, deadline
                record.delivery_count += 1
                taken.append((offset, record.delivery_count))
        self._advance_start()
        return list(_runs(taken))

    def _may_grow(self, config: ShareConfig, offset: int) -> bool:
        """share.partition.max.record.locks bounds the in-flight window, so its state stays small."""
        return offset - self.start_offset < config.max_record_locks

    def _archive_new(self, first: int, last: int) -> None:
        for offset in range(first, last + 1):
            self.records[offset] = InFlight(DeliveryState.ARCHIVED, 0)
        self.end_offset = max(self.end_offset, last + 1)

    # -- acknowledging ---------------------------------------------------------------------------

    def acknowledge(self, config: ShareConfig, now: int, member: str, batches: list[AckBatch]) -> None:
        """Apply every batch, or none: INVALID_REQUEST for a malformed batch or one past what was
        handed out, INVALID_RECORD_STATE for a record not acquired by ``member`` (already
        acknowledged, expired, or another member's). A batch wholly below the start offset is
        ignored, as Kafka ignores it (its records are finished)."""
        changes = list(self._checked(member, batches))
        for offset, ack in changes:
            record = self.records[offset]
            if ack == AckType.RENEW:
                record.deadline_ms = now + config.lock_ms
            else:
                self._settle(config, record, _ACK_STATES[ack])
        self._advance_start()

    def _checked(self, member: str, batches: list[AckBatch]) -> Iterator[tuple[int, AckType]]:
        previous_last = -1
        for batch in batches:
            if batch.first > batch.last or batch.first <= previous_last or batch.first < 0:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"acknowledgement batch {batch.first}-{batch.last} "
                                                            "is empty, out of order or overlaps another")
            count = batch.last - batch.first + 1
            if len(batch.types) not in (1, count) or any(t not in AckType._value2member_map_ for t in batch.types):
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"invalid acknowledge types {list(batch.types)}")
            previous_last = batch.last
            if batch.last < self.start_offset:
                continue
            if batch.last >= self.end_offset:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 f"offsets {batch.first}-{batch.last} go past the records handed out")
            for offset in range(max(batch.first, self.start_offset), batch.last + 1):
                record = self.records.get(offset)
                if record is None or record.state != DeliveryState.ACQUIRED or record.member != member:
                    raise KafkaError(ErrorCode.INVALID_RECORD_STATE,
                                     f"offset {offset} is not acquired by this member")
                ack = batch.types[0] if len(batch.types) == 1 else batch.types[offset - batch.first]
                yield offset, AckType(ack)

    # -- locks ending without an acknowledgement -------------------------------------------------

    def expire_locks(self, config: ShareConfig, now: int) -> bool:
        """Records whose lock ran out are offered again (or archived at the delivery limit)."""
        return self._release(config, lambda record: record.deadline_ms <= now)

    def release_member(self, config: ShareConfig, member: str) -> bool:
        """A member left or was fenced: what it held is offered again (or archived at the limit)."""
        return self._release(config, lambda record: record.member == member)

    def _release(self, config: ShareConfig, which) -> bool:
        released = [record for record in self.records.values()
                    if record.state == DeliveryState.ACQUIRED and which(record)]
        for record in released:
            self._settle(config, record, DeliveryState.AVAILABLE)
        self._advance_start()
        return bool(released)

    def next_deadline(self) -> int | None:
        """When the earliest lock runs out (the shard's timer), None when nothing is acquired."""
        return min((record.deadline_ms for record in self.records.values() if record.state == DeliveryState.ACQUIRED),
                   default=None)

    # -- moving on ----------------------------------------------------------------------------

    @staticmethod
    def _settle(config: ShareConfig, record: InFlight, state: DeliveryState) -> None:
        if state == DeliveryState.AVAILABLE and record.delivery_count >= config.delivery_limit:
            state = DeliveryState.ARCHIVED
        record.state, record.member, record.deadline_ms = state, None, 0

    def _advance_start(self) -> None:
        while self.start_offset < self.end_offset:
            record = self.records.get(self.start_offset)
            if record is None or record.state not in FINISHED:
                break
            del self.records[self.start_offset]
            self.start_offset += 1

    def _move_start(self, offset: int) -> None:
        for doomed in [o for o in self.records if o < offset]:
            del self.records[doomed]
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)
        self._advance_start()

    # -- administration (AlterShareGroupOffsets, DescribeShareGroupOffsets) -----------------------

    def reset_start(self, offset: int) -> None:
        """Start afresh at ``offset``, as Kafka's InitializeShareGroupState does for an altered
        offset: the in-flight window is forgotten (the group is empty, so nothing is held) and
        the state epoch moves on."""
        self.records.clear()
        self.start_offset = self.end_offset = offset
        self.state_epoch += 1

    def delivery_complete(self) -> int:
        """Records past the start offset already finished (acknowledged or archived): Kafka's
        deliveryCompleteCount, which a share-partition's lag leaves out."""
        return sum(1 for record in self.records.values() if record.state in FINISHED)

    def in_flight(self) -> int:
        """Records handed out and not finished: acquired now, or released (or their lock run out)
        and waiting to be offered again."""
        return sum(1 for record in self.records.values() if record.state not in FINISHED)

    # -- what is stored --------------------------------------------------------------------------

    def state_batches(self) -> list[StateBatch]:
        """The in-flight window as stored: an acquired record is stored AVAILABLE with its
        delivery count, so a record handed out before a coordinator move counts as delivered."""
        batches: list[StateBatch] = []
        for offset in range(self.start_offset, self.end_offset):
            record = self.records.get(offset)
            if record is None:
                continue
            state = DeliveryState.AVAILABLE if record.state == DeliveryState.ACQUIRED else record.state
            last = batches[-1] if batches else None
            if last and last.last == offset - 1 and (last.state, last.delivery_count) == (state, record.delivery_count):
                batches[-1] = StateBatch(last.first, offset, state, record.delivery_count)
            else:
                batches.append(StateBatch(offset, offset, state, record.delivery_count))
        return batches

    def merged(self, state_epoch: int, start_offset: int, batches: Iterable[StateBatch]) -> "SharePartitionState":
        """This stored state with a leader's written batches laid over it (WriteShareGroupState):
        theirs win where they overlap, and nothing below the start offset (-1: unchanged) is kept."""
        start = self.start_offset if start_offset < 0 else start_offset
        merged = SharePartitionState.restore(start, state_epoch, [*self.state_batches(), *batches], advance=False)
        merged.end_offset = max(merged.end_offset, self.end_offset)
        return merged

    @classmethod
    def restore(cls, start_offset: int, state_epoch: int, batches: Iterable[StateBatch],
                advance: bool = True) -> "SharePartitionState":
        """The state a stored snapshot describes; nothing is acquired after a load. ``advance``
        moves the start past finished records at the front, as a leader does; the share
        coordinator keeps what was written as it was written."""
        restored = cls(start_offset, start_offset, state_epoch)
        for batch in batches:
            for offset in range(max(batch.first, start_offset), batch.last + 1):
                restored.records[offset] = InFlight(DeliveryState(batch.state), batch.delivery_count)
            restored.end_offset = max(restored.end_offset, batch.last + 1)
        if advance:
            restored._advance_start()
        return restored


def _runs(taken: list[tuple[int, int]]) -> Iterator[Acquired]:
    """Consecutive offsets with one delivery count, as ShareFetch lists them."""
    run: Acquired | None = None
    for offset, count in taken:
        if run is not None and run.last == offset - 1 and run.delivery_count == count:
            run = Acquired(run.first, offset, count)
            continue
        if run is not None:
            yield run
        run = Acquired(offset, offset, count)
    if run is not None:
        yield run
