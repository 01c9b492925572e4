"""The group coordinator: drives the groups' state machine and keeps it in the log.

Every change that must survive the broker (a committed offset, a generation's
assignment, a deletion) is appended to the group's ``__consumer_offsets`` partition
and applied to memory in the same step, with no await between, so memory and log
order agree; the request is answered once the append is durable. On start the
coordinator replays its partitions. Replay time stays bounded by compaction: when a
partition has taken many more records than it has live keys, the coordinator rolls
its ledger, re-appends the live state as a snapshot, and trims everything before it.

The group protocols' rules are ``machine.GroupMachine`` (classic) and
``consumer_machine.ConsumerGroupMachine`` (KIP-848), which do no I/O. The coordinator
feeds them requests and fired timers with the time, and carries out the effects each
step returns: futures park the JoinGroup and SyncGroup requests that wait for a
rebalance, loop timers stand for the machines' keyed timers, and group records go to
the log.
"""
import asyncio
import functools
import logging
import time
import uuid
from collections import defaultdict

from kgate.metadata.cluster import TopicExists
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from .. import keyed_log
from . import records
from .assignors import assignor_name
from .consumer_group import ConsumerGroup
from .consumer_machine import ConsumerGroupMachine, Heartbeat, HeartbeatReply
from .effects import (
    AfterStore,
    AnswerJoin,
    AnswerSync,
    ArmTimer,
    CancelTimer,
    Effect,
    JoinResult,
    Log,
    Park,
    Step,
    StoreConsumer,
    StoreGroup,
    Timer,
    TimerKey,
    Wait,
)
from .group import Group, GroupState
from .machine import GroupMachine, JoinRequest
from .placement import partition_for
from .records import CommittedOffset

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
# Kafka's key and value strings carry an int16 length, so no longer group id can be stored.
MAX_GROUP_ID_BYTES = 32767


class GroupCoordinator:
    def __init__(self, broker):
        self.broker = broker
        settings = broker.settings
        self.num_partitions = settings["offsets.topic.num.partitions"]
        self.max_metadata_bytes = settings["offset.metadata.max.bytes"]
        self.retention_ms = settings["offsets.retention.minutes"] * 60_000
        self.compaction_min_records = settings["kgate.offsets.compaction.min.records"]
        self.machine = GroupMachine(
            min_session_ms=settings["group.min.session.timeout.ms"],
            max_session_ms=settings["group.max.session.timeout.ms"],
            initial_delay_ms=settings["group.initial.rebalance.delay.ms"], max_size=settings["group.max.size"],
            new_member_id=lambda prefix: f"{prefix}-{uuid.uuid4()}")
        self.groups = self.machine.groups  # the machine's own dict: handlers and metrics read it
        self.consumers = ConsumerGroupMachine(
            self.groups, session_ms=settings["group.consumer.session.timeout.ms"],
            heartbeat_ms=settings["group.consumer.heartbeat.interval.ms"],
            assignors=consumer_assignors(settings["group.consumer.assignors"]),
            max_size=settings["group.consumer.max.size"], new_member_id=lambda: str(uuid.uuid4()),
            internal=lambda name: self.broker.is_internal(name))
        # Carrying out the machine's effects: its timers by group, and the futures of parked requests.
        self._timers: dict[str, dict[TimerKey, asyncio.TimerHandle]] = {}
        self._parked: dict[tuple[Wait, str, str], asyncio.Future] = {}
        self._appended_since_compaction: dict[int, int] = defaultdict(int)
        self._compactions: dict[int, asyncio.Task] = {}
        self._expiry_task: asyncio.Task | None = None
        self._owned: set[int] = set()  # offsets partitions this broker owns and has replayed
        # Offsets committed in transactions not yet ended, by partition and producer id (TxnOffsetCommit).
        self._open_transactions: dict[int, dict[int, dict[tuple, CommittedOffset | None]]] = {}

    # -- start-up and replay -------------------------------------------------------------

    async def start(self) -> None:
        """Create the offsets topic if the cluster has none; partitions load as they are gained."""
        broker = self.broker
        if OFFSETS_TOPIC not in broker.cluster.topics:
            try:
                await broker.create_topic(OFFSETS_TOPIC, self.num_partitions, {
                    "cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1",
                    "kgate.entry.format": "kafka"})
            except TopicExists:
                pass  # another broker created it first
        self.num_partitions = broker.cluster.topics[OFFSETS_TOPIC].partitions
        self._expiry_task = asyncio.create_task(self._expiry_loop())

    async def gain(self, index: int) -> None:
        """Serve the groups of offsets partition ``index``, which this broker now owns: replay it.

        The records are read first (awaited); they are applied with no await between,
        and only if the partition is still this broker's by then.
        """
        started = time.monotonic()
        partition = self._partition(index)
        replayed = await keyed_log.replay(partition.ledger)
        if self.broker.partitions.get((OFFSETS_TOPIC, index)) is not partition:
            return  # lost while it was being read: its new owner replays it
        before = set(self.groups)
        self._replay(index, replayed.latest, replayed.count)
        self._open_transactions[index] = {
            producer_id: {parsed: value for parsed, value in map(self._decoded, pairs.items()) if parsed is not None}
            for producer_id, pairs in replayed.open_transactions.items()}
        loaded = replayed.count
        now = records.now_ms()
        gained = [g for g in self.groups.values() if g.group_id not in before]
        for group in gained:
            self._carry_out(now, self.machine.restore(now, group.group_id))
            self._carry_out(now, self.consumers.restore(now, group))
        self._owned.add(index)
        log.log(logging.INFO if gained else logging.DEBUG,
                "group coordinator gained %s-%d: %d groups from %d records in %.3f s", OFFSETS_TOPIC, index,
                 len(gained), loaded, time.monotonic() - started)

    def lose(self, index: int) -> None:
        """Stop serving the groups of offsets partition ``index``: its new owner replays them.

        Members waiting in JoinGroup or SyncGroup are told NOT_COORDINATOR, which sends
        them to FindCoordinator and on to the new owner.
        """
        self._owned.discard(index)
        self._open_transactions.pop(index, None)
        task = self._compactions.pop(index, None)
        if task is not None:
            task.cancel()
        now = records.now_ms()
        for group_id in [g for g in self.groups if self.partition_of(g) == index]:
            self._cancel_timers(group_id)
            self._carry_out(now, self.machine.unload(group_id))
        log.debug("group coordinator lost %s-%d", OFFSETS_TOPIC, index)

    def _replay(self, index: int, latest: dict[bytes, bytes | None], count: int) -> None:
        """Load one partition's groups from the last value of each key."""
        for parsed, value in map(self._decoded, latest.items()):
            if parsed is not None:
                self._apply(parsed, value)
        self._appended_since_compaction[index] = count

    @staticmethod
    def _decoded(pair: tuple[bytes, bytes | None]) -> tuple[tuple | None, object]:
        try:
            return records.decode(*pair)
        except records.CorruptRecord as exc:
            log.error("%s: skipped a record: %s", OFFSETS_TOPIC, exc)
            return None, None

    def _apply(self, key: tuple, value) -> None:
        """Apply one record (replayed, or being appended) to the in-memory state."""
        if key[0] == "consumer":
            self._apply_consumer(key, value)
            return
        group_id = key[1]
        group = self.groups.get(group_id)
        if key[0] == "offset":
            if value is None:
                if group is not None:
                    group.offsets.pop((key[2], key[3]), None)
                    self.machine.forget_if_dead(group)
                return
            if group is None:
                group = self.groups[group_id] = Group(group_id)
            group.offsets[(key[2], key[3])] = value
        elif value is None:
            if group is not None:
                group.generation, group.protocol, group.protocol_type, group.leader_id = 0, None, None, None
                group.members.clear()
                group.static_members.clear()
                self.machine.forget_if_dead(group)
        else:
            if group is None:
                group = self.groups[group_id] = Group(group_id)
            group.load_metadata(value)

    def _apply_consumer(self, key: tuple, value) -> None:
        """A replayed consumer-group record; its group's epoch gone means the group is."""
        _, kind, group_id, member_id = key
        group = self.groups.get(group_id)
        if kind == "group_epoch" and value is None:
            if group is not None and group.consumer is not None:
                group.consumer = None
                self.machine.forget_if_dead(group)
            return
        if group is None:
            group = self.groups[group_id] = Group(group_id)
        if group.consumer is None:
            group.consumer, group.protocol_type = ConsumerGroup(group_id), "consumer"
        group.consumer.load(kind, member_id, value)

    async def close(self) -> None:
        if self._expiry_task is not None:
            self._expiry_task.cancel()
        for task in list(self._compactions.values()):
            task.cancel()
        for group_id in list(self._timers):
            self._cancel_timers(group_id)

    # -- placement ------------------------------------------------------------------------

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def coordinator_of(self, group_id: str):
        """The live broker owning the group's offsets partition (its coordinator), if any."""
        offsets = self.broker.cluster.topics.get(OFFSETS_TOPIC)
        return self.broker.leader(offsets, self.partition_of(group_id)) if offsets is not None else None

    def _partition(self, index: int):
        partition = self.broker.partitions.get((OFFSETS_TOPIC, index))
        if partition is None:
            raise KafkaError(ErrorCode.NOT_COORDINATOR, "this broker no longer owns the group's partition")
        return partition

    def check_group_id(self, group_id: str | None, allow_empty: bool) -> None:
        """Kafka's rule: only the offset and admin APIs accept an empty group id."""
        if group_id is None or (not group_id and not allow_empty) or len(group_id.encode()) > MAX_GROUP_ID_BYTES:
            raise KafkaError(ErrorCode.INVALID_GROUP_ID, "group id is empty or too long")
        if self.partition_of(group_id) not in self._owned:
            owner = self.coordinator_of(group_id)
            if owner is not None and owner.node_id == self.broker.node_id:
                raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            raise KafkaError(ErrorCode.NOT_COORDINATOR, "another broker coordinates this group")

    # -- persistence -----------------------------------------------------------------------

    async def _write(self, group_id: str, keyed: list[tuple[tuple, bytes, object]]) -> None:
        """Append ``(parsed key, key bytes, value)`` records and apply them; return once durable.

        ``value`` is the decoded value (applied to memory) or None for a tombstone.
        """
        index = self.partition_of(group_id)
        partition = self._partition(index)
        await partition.ledger.prepare_append()
        # No await from here until the futures: the log and memory change together.
        durable = keyed_log.append(partition, [(key, _encode_value(value)) for _, key, value in keyed])
        for parsed, _, value in keyed:
            # Group records are written from the live state, which is already current.
            if parsed[0] == "offset":
                self._apply(parsed, value)
        self._appended_since_compaction[index] += len(keyed)
        await keyed_log.durable(durable)
        self._maybe_compact(index)

    def _maybe_compact(self, index: int) -> None:
        # A snapshot would drop the records of open transactions along with the old log.
        if index in self._compactions or self._open_transactions.get(index):
            return
        live = sum(len(g.offsets) + 1 for g in self.groups.values() if self.partition_of(g.group_id) == index)
        if self._appended_since_compaction[index] > max(self.compaction_min_records, 2 * live):
            task = asyncio.create_task(self._compact(index))
            self._compactions[index] = task
            task.add_done_callback(lambda _t: self._compactions.pop(index, None))

    async def _compact(self, index: int) -> None:
        """Re-append the partition's live state after a ledger boundary; trim what precedes it."""
        ledger = self._partition(index).ledger
        await ledger.roll_over()
        await ledger.prepare_append()
        start = ledger.next_offset
        snapshot = []
        for group in self.groups.values():
            if self.partition_of(group.group_id) != index:
                continue
            if group.consumer is not None:
                snapshot += group.consumer.snapshot()
            elif group.generation > 0 or group.members:
                snapshot.append((records.group_key(group.group_id), records.group_value(group.metadata_value())))
            for (topic, partition), committed in group.offsets.items():
                snapshot.append((records.offset_key(group.group_id, topic, partition), records.offset_value(committed)))
        durable = keyed_log.append(self._partition(index), snapshot)
        self._appended_since_compaction[index] = len(snapshot)
        await keyed_log.durable(durable)
        await ledger.trim_before(start)
        log.info("%s-%d compacted: %d live records from offset %d", OFFSETS_TOPIC, index, len(snapshot), start)

    # -- the machine's requests ----------------------------------------------------------------

    async def join(self, request: JoinRequest) -> JoinResult:
        self.check_group_id(request.group_id, allow_empty=False)
        now = records.now_ms()
        return await self._settle(now, self.machine.join(now, request))

    async def sync(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
                   protocol_type: str | None, protocol: str | None,
                   assignments: dict[str, bytes]) -> tuple[ErrorCode, bytes]:
        self.check_group_id(group_id, allow_empty=False)
        now = records.now_ms()
        return await self._settle(now, self.machine.sync(now, group_id, generation, member_id, group_instance_id,
                                                         protocol_type, protocol, assignments))

    async def consumer_heartbeat(self, request: Heartbeat) -> HeartbeatReply:
        """ConsumerGroupHeartbeat (KIP-848): answered once the records it changed are durable."""
        self.check_group_id(request.group_id, allow_empty=False)
        now = records.now_ms()
        return await self._settle(now, self.consumers.heartbeat(now, request, self._topics()))

    def _topics(self) -> dict:
        return {name: (topic.topic_id, topic.partitions) for name, topic in self.broker.topics.items()}

    def heartbeat(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        self.check_group_id(group_id, allow_empty=False)
        now = records.now_ms()
        return self._reply_now(now, self.machine.heartbeat(now, group_id, generation, member_id, group_instance_id))

    def leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> list[ErrorCode]:
        """Remove members given as ``(member id, group instance id)``; one error per member."""
        self.check_group_id(group_id, allow_empty=False)
        now = records.now_ms()
        return self._reply_now(now, self.machine.leave(now, group_id, leaving))

    # -- carrying out the machine's effects --------------------------------------------------------

    async def _settle(self, now: int, step: Step):
        """A request's reply: once the group records it hangs on are durable, and its parked
        future (if it parked) is answered."""
        parked, held = self._carry_out(now, step.effects)
        for store, group, task in held:
            if isinstance(store, StoreGroup) and store.then is AfterStore.REPORT:
                await self._report_stored(store, group, task)
            else:
                await task  # AfterStore.REPLY: a failure fails the request
        return step.reply if parked is None else await parked

    def _reply_now(self, now: int, step: Step):
        self._carry_out(now, step.effects)
        return step.reply

    def _carry_out(self, now: int, effects: list[Effect]) \
            -> tuple[asyncio.Future | None, list[tuple[StoreGroup | StoreConsumer, Group | None, asyncio.Task]]]:
        """Do what a step asks, in order: (the future of the request it parked, the stores it waits on)."""
        parked, held = None, []
        for effect in effects:
            match effect:
                case Park(group_id=group_id, member_id=member_id, kind=kind):
                    parked = self._park((kind, group_id, member_id))
                case AnswerJoin(group_id=group_id, member_id=member_id, result=result):
                    self._release((Wait.JOIN, group_id, member_id), result)
                case AnswerSync(group_id=group_id, member_id=member_id, error=error, assignment=assignment):
                    self._release((Wait.SYNC, group_id, member_id), (error, assignment))
                case ArmTimer(key=key, deadline_ms=deadline):
                    self._arm(key, (deadline - now) / 1000)
                case CancelTimer(key=key):
                    self._cancel(key)
                case StoreGroup(then=then):
                    task = self._store(effect)
                    if then is not AfterStore.NOTHING:
                        held.append((effect, self.groups.get(effect.group_id), task))
                case StoreConsumer(group_id=group_id, records=pairs):
                    task = asyncio.ensure_future(self._write(group_id, [(("consumer",), k, v) for k, v in pairs]))
                    task.add_done_callback(_log_failure)
                    held.append((effect, None, task))
                case Log(level=level, message=message, args=args):
                    log.log(level, message, *args)
        return parked, held

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

    def _arm(self, key: TimerKey, delay: float) -> None:
        self._cancel(key)
        # The timer holds its group: one that fires after its group was dropped is ignored.
        self._timers.setdefault(key.group_id, {})[key] = asyncio.get_running_loop().call_later(
            delay, self._fire, self.groups.get(key.group_id), key)

    def _fire(self, group: Group | None, key: TimerKey) -> None:
        self._cancel(key)  # drops the spent handle
        if self.groups.get(key.group_id) is group:
            now = records.now_ms()
            if key.kind in (Timer.MEMBER_SESSION, Timer.REVOCATION):
                self._carry_out(now, self.consumers.timer_fired(now, key, self._topics()))
            else:
                self._carry_out(now, self.machine.timer_fired(now, key))

    def _cancel(self, key: TimerKey) -> None:
        timers = self._timers.get(key.group_id)
        if timers is None:
            return
        timer = timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        if not timers:
            del self._timers[key.group_id]

    def _cancel_timers(self, group_id: str) -> None:
        for timer in self._timers.pop(group_id, {}).values():
            timer.cancel()

    def _store(self, store: StoreGroup) -> asyncio.Task:
        """Append the group's record; a failure that no request waits for is logged."""
        task = asyncio.ensure_future(self._write(store.group_id, [(("group", store.group_id),
                                                                   records.group_key(store.group_id), store.value)]))
        task.add_done_callback(_log_failure)
        return task

    async def _report_stored(self, store: StoreGroup, group: Group | None, task: asyncio.Task) -> None:
        try:
            await task
        except Exception:
            log.exception("group %s: storing generation %d failed", store.group_id, store.value.generation)
            stored = False
        else:
            stored = True
        # A group lost (or lost and gained again) meanwhile is another coordinator's affair.
        if self.groups.get(store.group_id) is group:
            now = records.now_ms()
            self._carry_out(now, self.machine.assignment_stored(now, store.group_id, store.value.generation, stored))

    # -- offsets ------------------------------------------------------------------------------

    def check_commit(self, group_id: str, generation: int, member_id: str,
                     group_instance_id: str | None) -> ErrorCode:
        """Whether this member may commit for this generation (Kafka's checks, in Kafka's order)."""
        self.check_group_id(group_id, allow_empty=True)
        now = records.now_ms()
        return self._reply_now(now, self.machine.check_commit(now, group_id, generation, member_id,
                                                               group_instance_id))

    async def commit(self, group_id: str, offsets: dict[tuple[str, int], CommittedOffset]) -> None:
        """Store already-checked offsets; returns once they are durable."""
        await self._write(group_id, [_offset_record(group_id, topic, partition, committed)
                                     for (topic, partition), committed in offsets.items()])

    async def commit_in_transaction(self, group_id: str, producer_id: int, producer_epoch: int,
                                    offsets: dict[tuple[str, int], CommittedOffset]) -> None:
        """TxnOffsetCommit: store the offsets as the producer's transactional records; the group
        sees them only when the transaction's COMMIT marker reaches this partition."""
        index = self.partition_of(group_id)
        partition = self._partition(index)
        await partition.ledger.prepare_append()
        keyed = [_offset_record(group_id, topic, p, committed) for (topic, p), committed in offsets.items()]
        durable = keyed_log.append(partition, [(key, _encode_value(value)) for _, key, value in keyed],
                                   (producer_id, producer_epoch))
        pending = self._open_transactions.setdefault(index, {}).setdefault(producer_id, {})
        for parsed, _, value in keyed:
            pending[parsed] = value
        await keyed_log.durable(durable)

    def transaction_ended(self, index: int, producer_id: int, commit: bool) -> None:
        """A marker was appended to offsets partition ``index``: its producer's offsets count, or are dropped."""
        pending = self._open_transactions.get(index, {}).pop(producer_id, {})
        if commit:
            for parsed, value in pending.items():
                self._apply(parsed, value)
            self._appended_since_compaction[index] += len(pending)

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None) -> dict:
        """Committed offsets of ``partitions`` (None: every partition the group has one for)."""
        self.check_group_id(group_id, allow_empty=True)
        group = self.groups.get(group_id)
        stored = group.offsets if group is not None else {}
        if partitions is None:
            return dict(stored)
        return {tp: stored.get(tp) for tp in partitions}

    async def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> dict:
        """OffsetDelete: per partition NONE or GROUP_SUBSCRIBED_TO_TOPIC."""
        self.check_group_id(group_id, allow_empty=True)
        group = self.groups.get(group_id)
        if group is None:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND)
        if group.has_members or not group.is_(GroupState.EMPTY):
            subscribed = (self.consumers.subscribed_topics(group.consumer, self._topics())
                          if group.consumer is not None else group.subscribed_topics())
            if subscribed is None:
                raise KafkaError(ErrorCode.NON_EMPTY_GROUP)
        else:
            subscribed = set()
        results = {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if tp[0] in subscribed else ErrorCode.NONE
                   for tp in partitions}
        doomed = [tp for tp, error in results.items() if error == ErrorCode.NONE and tp in group.offsets]
        if doomed:
            await self._write(group_id, [_offset_record(group_id, t, p, None) for t, p in doomed])
        return results

    # -- admin --------------------------------------------------------------------------------

    def describe(self, group_id: str) -> Group | None:
        self.check_group_id(group_id, allow_empty=True)
        return self.groups.get(group_id)

    def list_groups(self) -> list[Group]:
        """The groups this broker coordinates (ListGroups asks every broker, as with Kafka)."""
        return list(self.groups.values())

    async def delete_group(self, group_id: str) -> ErrorCode:
        self.check_group_id(group_id, allow_empty=True)
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.has_members or not group.is_(GroupState.EMPTY):
            return ErrorCode.NON_EMPTY_GROUP
        keyed = [_offset_record(group_id, t, p, None) for t, p in group.offsets]
        keyed.append(_group_tombstone(group_id))
        if group.consumer is not None:
            keyed += [(("consumer",), key, None) for key, _ in group.consumer.tombstones()]
        self._cancel_timers(group_id)
        await self._write(group_id, keyed)
        self.groups.pop(group_id, None)
        group.state = GroupState.DEAD
        log.info("deleted group %s", group_id)
        return ErrorCode.NONE

    async def forget_topic(self, topic: str) -> None:
        """Drop every group's offsets for a deleted topic (tombstones in the log)."""
        for group in list(self.groups.values()):
            doomed = [(t, p) for t, p in group.offsets if t == topic]
            if doomed:
                await self._write(group.group_id, [_offset_record(group.group_id, t, p, None) for t, p in doomed])

    # -- offset expiry --------------------------------------------------------------------------

    async def _expiry_loop(self) -> None:
        interval = self.broker.settings["offsets.retention.check.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.expire_offsets(records.now_ms())
            except Exception:
                log.exception("offset expiry failed")

    async def expire_offsets(self, now: int) -> int:
        """Remove offsets of empty groups older than ``offsets.retention.minutes`` (KIP-211)."""
        expired = 0
        for group in list(self.groups.values()):
            if group.has_members or not group.is_(GroupState.EMPTY):
                continue
            doomed = [(t, p) for (t, p), c in group.offsets.items()
                      if (c.expire_timestamp >= 0 and now >= c.expire_timestamp)
                      or (c.expire_timestamp < 0
                          and now - max(c.commit_timestamp, group.state_timestamp) >= self.retention_ms)]
            if not doomed:
                continue
            keyed = [_offset_record(group.group_id, t, p, None) for t, p in doomed]
            if len(doomed) == len(group.offsets):
                keyed.append(_group_tombstone(group.group_id))
            await self._write(group.group_id, keyed)
            expired += len(doomed)
            log.info("group %s: %d offsets expired", group.group_id, len(doomed))
        return expired



def consumer_assignors(setting: str) -> list[str]:
    """``group.consumer.assignors``: assignor names (or Kafka's class names), in preference order."""
    names = [assignor_name(name) for name in setting.split(",") if name.strip()]
    return [name for name in names if name is not None]


def _encode_value(value) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, CommittedOffset):
        return records.offset_value(value)
    return records.group_value(value)


def _log_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("storing group metadata failed: %s", task.exception())


def _offset_record(group_id: str, topic: str, partition: int, committed: CommittedOffset | None) -> tuple:
    """A committed offset as ``(memory key, record key, value)`` for ``_write``; None: its tombstone."""
    return ("offset", group_id, topic, partition), records.offset_key(group_id, topic, partition), committed


def _group_tombstone(group_id: str) -> tuple:
    return ("group", group_id), records.group_key(group_id), None
