"""The groups of one ``__consumer_offsets`` partition, as a shard of the coordinator runtime.

The rules are ``machine.GroupMachine`` (classic),
``classic_members.ClassicMemberMachine`` (KIP-848's consumer groups, with the classic
members an online upgrade leaves them), ``share_machine`` (KIP-932) and ``streams_machine``
(KIP-1071), which do no I/O; this shard
turns the effects of their steps into what the runtime carries out: records to
append, timers to arm or cancel, and the futures of JoinGroup and SyncGroup requests
parked until a rebalance answers them. Committed offsets are records the shard
replays as they are appended; group and consumer-group records are written from the
machines' live state, which is already current, so replay skips them.
"""
import asyncio
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from ..coordinator.shard import Arm, Cancel, Result, Shard, TimerChange
from . import records
from .classic_members import ClassicMemberMachine
from .consumer_group import ConsumerGroup
from .consumer_machine import MEMBER_TIMER_KINDS
from .effects import (
    AfterStore,
    AnswerJoin,
    AnswerSync,
    ArmTimer,
    CancelTimer,
    Effect,
    Log,
    Park,
    ShareMemberGone,
    Step,
    StoreConsumer,
    StoreGroup,
    Timer,
    TimerKey,
    Wait,
)
from .group import Group, GroupState
from .machine import GroupMachine
from .records import CommittedOffset
from .share_group import ShareGroup
from .share_machine import ShareGroupMachine
from .streams_group import StreamsGroup
from .streams_machine import STREAMS_TIMER_KINDS, StreamsGroupMachine

log = logging.getLogger(__name__)

# The shard's own timer: offsets of empty groups expire (KIP-211), checked periodically.
OFFSET_EXPIRY = "offset-expiry"
Topics = Mapping[str, tuple[uuid.UUID, int]]


@dataclass(frozen=True, slots=True)
class GroupConfig:
    min_session_ms: int
    max_session_ms: int
    initial_delay_ms: int
    max_size: int
    consumer_session_ms: int
    consumer_heartbeat_ms: int
    consumer_assignors: list[str]
    consumer_max_size: int
    retention_ms: int
    retention_check_ms: int
    # Kafka's group.consumer.migration.policy: whether groups change kind online (classic_members).
    migration_policy: str = "bidirectional"
    # A consumer group's own session timeout (its group config), None where the broker's applies.
    consumer_session_of: Callable[[str], int | None] = lambda _group_id: None
    # Share groups (KIP-932): the broker's session timeout and size limit, and a group's own timeout.
    share_session_ms: int = 45_000
    share_max_size: int = 200
    share_session_of: Callable[[str], int | None] = lambda _group_id: None
    # What a share member's leaving means elsewhere (its share sessions and records): the broker's.
    share_member_gone: Callable[[str, str], Awaitable[None]] | None = None
    # Streams groups (KIP-1071): the broker's session timeout, size limit and standby count, and a
    # group's own session timeout and standby count.
    streams_session_ms: int = 45_000
    streams_max_size: int = 2_147_483_647
    streams_standby_replicas: int = 0
    streams_session_of: Callable[[str], int | None] = lambda _group_id: None
    streams_standby_of: Callable[[str], int | None] = lambda _group_id: None


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A record of the partition: its parsed key (``records.decode``), its stored key and its value.

    ``live``: written from state the machines already changed; replay leaves it alone."""
    key: tuple
    key_bytes: bytes
    value: object
    live: bool = False


@dataclass(slots=True)
class Settling:
    """What a machine step's request waits for before it is answered."""
    reply: Any
    parked: asyncio.Future | None = None
    waits_for_records: bool = False  # a failed append fails the request
    report: StoreGroup | None = None  # the assignment whose outcome goes back to the machine
    group: Group | None = None  # the group the report is for, as it was (one lost meanwhile is ignored)


@dataclass(slots=True)
class _Carried:
    records: list[GroupRecord] = field(default_factory=list)
    timers: list[TimerChange] = field(default_factory=list)
    gone: list[tuple[Callable[[str, str], Awaitable[None]], ShareMemberGone]] = field(default_factory=list)

    def result(self, response) -> Result:
        """The records and timers; share members gone are told once the records are durable."""
        if not self.gone:
            return Result(response, self.records, self.timers)
        return Result(response, self.records, self.timers, then=functools.partial(_tell_gone, self.gone))


class GroupShard(Shard[GroupRecord]):
    def __init__(self, index: int, config: GroupConfig, topics: Callable[[], Topics], internal: Callable[[str], bool]):
        self.index = index
        self.config = config
        self.topics = topics
        self.machine = GroupMachine(
            min_session_ms=config.min_session_ms, max_session_ms=config.max_session_ms,
            initial_delay_ms=config.initial_delay_ms, max_size=config.max_size,
            new_member_id=lambda prefix: f"{prefix}-{uuid.uuid4()}")
        self.groups = self.machine.groups
        self.consumers = self.machine.consumers = ClassicMemberMachine(
            self.groups, topics=topics, classic_max_size=config.max_size, session_ms=config.consumer_session_ms,
            session_of=config.consumer_session_of,
            heartbeat_ms=config.consumer_heartbeat_ms,
            assignors=config.consumer_assignors, max_size=config.consumer_max_size,
            new_member_id=lambda: str(uuid.uuid4()), internal=internal, policy=config.migration_policy)
        self.shares = ShareGroupMachine(self.groups, session_ms=config.share_session_ms,
                                        session_of=config.share_session_of, max_size=config.share_max_size)
        self.streams = StreamsGroupMachine(
            self.groups, session_ms=config.streams_session_ms, max_size=config.streams_max_size,
            standby_replicas=config.streams_standby_replicas, session_of=config.streams_session_of,
            standby_of=config.streams_standby_of, internal=internal)
        # Offsets committed in transactions not yet ended, by producer id (TxnOffsetCommit).
        self.open_transactions: dict[int, dict[tuple, GroupRecord]] = {}
        self._parked: dict[tuple[Wait, str, str], asyncio.Future] = {}
        # Each armed timer with the group it was armed for: one that fires for a group since replaced is ignored.
        self._armed: dict[TimerKey, Group | None] = {}

    # -- the log --------------------------------------------------------------------------------

    def decode(self, key: bytes, value: bytes | None) -> GroupRecord | None:
        try:
            parsed, decoded = records.decode(key, value)
        except records.CorruptRecord as exc:
            log.error("%s-%d: skipped a record: %s", "__consumer_offsets", self.index, exc)
            return None
        return GroupRecord(parsed, key, decoded)

    def encode(self, record: GroupRecord) -> tuple[bytes, bytes | None]:
        value = record.value
        if value is None or isinstance(value, bytes):
            return record.key_bytes, value
        if isinstance(value, CommittedOffset):
            return record.key_bytes, records.offset_value(value)
        return record.key_bytes, records.group_value(value)  # type: ignore[arg-type]  # a GroupMetadataValue

    def replay(self, record: GroupRecord, producer_id: int = -1) -> None:
        if record.live:
            return
        if producer_id >= 0:
            self.open_transactions.setdefault(producer_id, {})[record.key] = record
        elif record.key[0] == "consumer":
            self._replay_modern(record.key, record.value, "consumer", ConsumerGroup)
        elif record.key[0] == "share":
            self._replay_modern(record.key, record.value, "share", ShareGroup)
        elif record.key[0] == "streams":
            self._replay_modern(record.key, record.value, "streams", StreamsGroup)
        elif record.key[0] == "offset":
            self._replay_offset(record.key, record.value)
        else:
            self._replay_group(record.key[1], record.value)

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        pending = self.open_transactions.pop(producer_id, {})
        if commit:
            for record in pending.values():
                self.replay(record)

    def _replay_offset(self, key: tuple, value) -> None:
        _, group_id, topic, partition = key
        group = self.groups.get(group_id)
        if value is None:
            if group is not None:
                group.offsets.pop((topic, partition), None)
                self.machine.forget_if_dead(group)
            return
        if group is None:
            group = self.groups[group_id] = Group(group_id)
        group.offsets[(topic, partition)] = value

    def _replay_group(self, group_id: str, value) -> None:
        group = self.groups.get(group_id)
        if value is None:
            if group is not None:
                group.generation, group.protocol, group.protocol_type, group.leader_id = 0, None, None, None
                group.members.clear()
                group.static_members.clear()
                group.stored = False
                self.machine.forget_if_dead(group)
            return
        if group is None:
            group = self.groups[group_id] = Group(group_id)
        group.load_metadata(value)
        group.stored = True

    def _replay_modern(self, key: tuple, value, kind_of: str, new_state) -> None:
        """A KIP-848 consumer-group, KIP-932 share-group or KIP-1071 streams-group record:
        ``kind_of`` names the group's state it goes to (and the group's protocol type); its group's epoch gone means
        the group is. A tombstone of a group already gone is skipped (the replay order is the
        keys' first writes), rather than bringing the group back."""
        _, kind, group_id, member_id = key
        group = self.groups.get(group_id)
        state = None if group is None else getattr(group, kind_of)
        if value is None and state is None:
            return
        if kind == "group_epoch" and value is None:
            assert group is not None  # a tombstone found a state above
            setattr(group, kind_of, None)
            self.machine.forget_if_dead(group)
            return
        if group is None:
            group = self.groups[group_id] = Group(group_id)
        if state is None:
            state = new_state(group_id)
            setattr(group, kind_of, state)
            group.protocol_type = kind_of
        state.load(kind, member_id, value)

    def snapshot(self) -> list[GroupRecord]:
        snapshot = []
        for group in self.groups.values():
            for modern in ("share", "streams"):
                if (state := getattr(group, modern)) is not None:
                    snapshot += [GroupRecord((modern,), key, value, live=True) for key, value in state.snapshot()]
            if group.consumer is not None:
                snapshot += [GroupRecord(("consumer",), key, value, live=True)
                             for key, value in group.consumer.snapshot()]
            elif group.stored or group.generation > 0 or group.members:
                snapshot.append(GroupRecord(("group", group.group_id), records.group_key(group.group_id),
                                            group.metadata_value(), live=True))
            snapshot += [offset_record(group.group_id, topic, partition, committed)
                         for (topic, partition), committed in group.offsets.items()]
        return snapshot

    def live_records(self) -> int:
        return sum(len(group.offsets) + 1 for group in self.groups.values())

    def compactable(self) -> bool:
        return not self.open_transactions

    # -- loading, unloading, timers ---------------------------------------------------------------

    def on_loaded(self, now: int) -> Result[None, GroupRecord]:
        carried = _Carried(timers=[Arm(OFFSET_EXPIRY, now + self.config.retention_check_ms)])
        for group in list(self.groups.values()):
            self._carry(self.machine.restore(now, group.group_id), carried)
            self._carry(self.consumers.restore(now, group), carried)
            self._carry(self.shares.restore(now, group), carried)
            self._carry(self.streams.restore(now, group), carried)
        return Result(None, carried.records, carried.timers)

    def on_unloaded(self) -> None:
        """Members waiting in JoinGroup or SyncGroup are told NOT_COORDINATOR, which sends
        them to FindCoordinator and on to the new owner."""
        for group_id in list(self.groups):
            self._carry(self.machine.unload(group_id), _Carried())
        self._armed.clear()

    def timer_fired(self, now: int, key: Hashable) -> Result[None, GroupRecord]:
        if key == OFFSET_EXPIRY:
            expired = self.expire(now)
            return Result(None, expired.records, [Arm(OFFSET_EXPIRY, now + self.config.retention_check_ms)])
        assert isinstance(key, TimerKey)
        group = self._armed.pop(key, None)
        if group is None or self.groups.get(key.group_id) is not group:
            return Result(None)
        if key.kind in MEMBER_TIMER_KINDS:
            effects = self.consumers.timer_fired(now, key, self.topics())
        elif key.kind is Timer.SHARE_SESSION:
            effects = self.shares.timer_fired(now, key, self.topics())
        elif key.kind in STREAMS_TIMER_KINDS:
            effects = self.streams.timer_fired(now, key, self.topics())
        else:
            effects = self.machine.timer_fired(now, key)
        return self._carry(effects, _Carried()).result(None)

    # -- the machines' steps ---------------------------------------------------------------------

    def settle(self, step: Step) -> Result[Settling, GroupRecord]:
        """A step of a request: its reply (or parked future), and what it waits for."""
        settling = Settling(step.reply)
        return self._carry(step.effects, _Carried(), settling).result(settling)

    def assignment_stored(self, now: int, settling: Settling, stored: bool) -> Result[None, GroupRecord]:
        report = settling.report
        assert report is not None
        if self.groups.get(report.group_id) is not settling.group:
            return Result(None)  # lost (or lost and gained again) meanwhile: another coordinator's affair
        carried = self._carry(self.machine.assignment_stored(now, report.group_id, report.value.generation, stored),
                              _Carried())
        return Result(None, carried.records, carried.timers)

    def _carry(self, effects: list[Effect], carried: _Carried, settling: Settling | None = None) -> _Carried:
        """Turn effects into records and timers, in order; park and answer requests at once."""
        for effect in effects:
            match effect:
                case Park(group_id=group_id, member_id=member_id, kind=kind):
                    assert settling is not None
                    settling.parked = self._park((kind, group_id, member_id))
                case AnswerJoin(group_id=group_id, member_id=member_id, result=result):
                    self._release((Wait.JOIN, group_id, member_id), result)
                case AnswerSync(group_id=group_id, member_id=member_id, error=error, assignment=assignment):
                    self._release((Wait.SYNC, group_id, member_id), (error, assignment))
                case ArmTimer(key=key, deadline_ms=deadline):
                    self._armed[key] = self.groups.get(key.group_id)
                    carried.timers.append(Arm(key, deadline))
                case CancelTimer(key=key):
                    self._armed.pop(key, None)
                    carried.timers.append(Cancel(key))
                case StoreGroup(group_id=group_id, value=value, then=then):
                    carried.records.append(GroupRecord(("group", group_id), records.group_key(group_id), value,
                                                       live=True))
                    if (stored := self.groups.get(group_id)) is not None:
                        stored.stored = value is not None
                    if settling is not None and then is AfterStore.REPORT:
                        settling.report, settling.group = effect, self.groups.get(group_id)
                    elif settling is not None and then is AfterStore.REPLY:
                        settling.waits_for_records = True
                case StoreConsumer(records=pairs):
                    carried.records += [GroupRecord(("consumer",), key, value, live=True) for key, value in pairs]
                    if settling is not None:
                        settling.waits_for_records = True
                case ShareMemberGone():
                    if self.config.share_member_gone is not None:
                        carried.gone.append((self.config.share_member_gone, effect))
                case Log(level=level, message=message, args=args):
                    log.log(level, message, *args)
        return carried

    def _park(self, key: tuple[Wait, str, str]) -> asyncio.Future:
        # A second SyncGroup of a member replaces the first one's future, which is left unanswered.
        future = self._parked[key] = asyncio.get_running_loop().create_future()
        future.add_done_callback(functools.partial(self._abandoned, key))
        return future

    def _release(self, key: tuple[Wait, str, str], answer) -> None:
        future = self._parked.pop(key, None)
        if future is not None and not future.done():
            future.set_result(answer)

    def _abandoned(self, key: tuple[Wait, str, str], future: asyncio.Future) -> None:
        """A parked request's task was cancelled: the machine must stop counting on it."""
        if future.cancelled() and self._parked.get(key) is future:
            del self._parked[key]
            kind, group_id, member_id = key
            self.machine.abandoned(group_id, member_id, kind)

    def _cancel_timers(self, group_id: str) -> list[TimerChange]:
        keys = [key for key in self._armed if key.group_id == group_id]
        for key in keys:
            del self._armed[key]
        return [Cancel(key) for key in keys]

    # -- offsets and administration -------------------------------------------------------------------

    def commit(self, group_id: str, offsets: Mapping[tuple[str, int], CommittedOffset | None],
               producer: tuple[int, int] | None = None) -> Result[None, GroupRecord]:
        """Store already-checked offsets (None: delete), or a producer's transactional ones."""
        stored = [offset_record(group_id, topic, partition, committed)
                  for (topic, partition), committed in offsets.items()]
        if producer is None:
            return Result(None, stored)
        return Result(None, stored, producer=producer)

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> Result[dict, GroupRecord]:
        """OffsetDelete: per partition NONE or GROUP_SUBSCRIBED_TO_TOPIC."""
        group = self.groups.get(group_id)
        if group is None:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND)
        if group.has_members or not group.is_(GroupState.EMPTY):
            subscribed = (self.consumers.subscribed_topics(group.consumer, self.topics())
                          if group.consumer is not None else group.subscribed_topics())
            if subscribed is None:
                raise KafkaError(ErrorCode.NON_EMPTY_GROUP)
        else:
            subscribed = set()
        results = {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if tp[0] in subscribed else ErrorCode.NONE
                   for tp in partitions}
        doomed = [tp for tp, error in results.items() if error == ErrorCode.NONE and tp in group.offsets]
        return Result(results, [offset_record(group_id, t, p, None) for t, p in doomed])

    def delete_group(self, group_id: str) -> Result[ErrorCode, GroupRecord]:
        """DeleteGroups: the group's tombstones; :meth:`forget_group` drops it once they are durable."""
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return Result(ErrorCode.GROUP_ID_NOT_FOUND)
        if group.has_members or not group.is_(GroupState.EMPTY):
            return Result(ErrorCode.NON_EMPTY_GROUP)
        doomed = [offset_record(group_id, t, p, None) for t, p in group.offsets]
        for modern in (group.share, group.streams):
            if modern is not None:
                doomed += [GroupRecord((modern.FAMILY,), key, None, live=True) for key, _ in modern.tombstones()]
        doomed.append(_group_tombstone(group_id, live=True))
        if group.consumer is not None:
            doomed += [GroupRecord(("consumer",), key, None, live=True) for key, _ in group.consumer.tombstones()]
        return Result(ErrorCode.NONE, doomed, self._cancel_timers(group_id))

    def forget_group(self, group_id: str) -> Result[None, GroupRecord]:
        group = self.groups.pop(group_id, None)
        if group is not None:
            group.state = GroupState.DEAD
            log.info("deleted group %s", group_id)
        return Result(None)

    def forget_topic(self, topic: str) -> Result[None, GroupRecord]:
        """Tombstones for every group's offsets of a deleted topic."""
        return Result(None, [offset_record(group.group_id, t, p, None) for group in list(self.groups.values())
                             for t, p in group.offsets if t == topic])

    def expire(self, now: int) -> Result[int, GroupRecord]:
        """Offsets of empty groups older than ``offsets.retention.minutes`` (KIP-211): their tombstones."""
        doomed_records = []
        expired = 0
        for group in list(self.groups.values()):
            if group.has_members or not group.is_(GroupState.EMPTY):
                continue
            doomed = [(t, p) for (t, p), c in group.offsets.items()
                      if (c.expire_timestamp >= 0 and now >= c.expire_timestamp)
                      or (c.expire_timestamp < 0
                          and now - max(c.commit_timestamp, group.state_timestamp) >= self.config.retention_ms)]
            if not doomed:
                if not group.offsets and group.stored and group.consumer is None and group.share is None \
                        and group.streams is None:
                    # Left with no offsets (OffsetDelete took the last): Kafka's cleanup removes it.
                    doomed_records.append(_group_tombstone(group.group_id, live=False))
                    log.info("group %s: empty with no offsets left, removed", group.group_id)
                continue
            doomed_records += [offset_record(group.group_id, t, p, None) for t, p in doomed]
            if len(doomed) == len(group.offsets):
                doomed_records.append(_group_tombstone(group.group_id, live=False))
            expired += len(doomed)
            log.info("group %s: %d offsets expired", group.group_id, len(doomed))
        return Result(expired, doomed_records)


def _group_tombstone(group_id: str, live: bool) -> GroupRecord:
    """The group record's tombstone; ``live``: already applied (DeleteGroups forgets the group once
    it is durable), else replayed as appended, which drops the group (the offsets cleanup)."""
    return GroupRecord(("group", group_id), records.group_key(group_id), None, live=live)


async def _tell_gone(gone: list[tuple[Callable[[str, str], Awaitable[None]], ShareMemberGone]]) -> None:
    for tell, member in gone:
        await tell(member.group_id, member.member_id)


def offset_record(group_id: str, topic: str, partition: int, committed: CommittedOffset | None) -> GroupRecord:
    """A committed offset's record; None: its tombstone."""
    return GroupRecord(("offset", group_id, topic, partition), records.offset_key(group_id, topic, partition),
                       committed)
