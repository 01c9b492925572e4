"""The group coordinator: drives each group's state machine and keeps it in the log.

Every change that must survive the broker (a committed offset, a generation's
assignment, a deletion) is appended to the group's ``__consumer_offsets`` partition
and applied to memory in the same step, with no await between, so memory and log
order agree; the request is answered once the append is durable. On start the
coordinator replays its partitions. Replay time stays bounded by compaction: when a
partition has taken many more records than it has live keys, the coordinator rolls
its ledger, re-appends the live state as a snapshot, and trims everything before it.

Timers (session expiry, rebalance timeout, initial rebalance delay) are loop
callbacks held on the group and its members; requests that must wait for a
rebalance (JoinGroup, SyncGroup) wait on futures the state machine resolves.
"""
import asyncio
import logging
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from kgate.protocol import record_batch
from kgate.protocol.error_codes import ErrorCode
from kgate.storage import entry_formats
from kgate.metadata.cluster import TopicExists
from kgate.storage.entry_formats import ProducedRecords

from . import records
from .group import Group, GroupState, Member
from .placement import partition_for
from .records import CommittedOffset

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
# Kafka's key and value strings carry an int16 length, so no longer group id can be stored.
MAX_GROUP_ID_BYTES = 32767
RECORDS_PER_BATCH = 5000


class GroupError(Exception):
    def __init__(self, error: ErrorCode, message: str = ""):
        super().__init__(message or error.name)
        self.error = error


@dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool  # JoinGroup v4+
    skip_assignment_supported: bool  # JoinGroup v9+


class GroupCoordinator:
    def __init__(self, broker):
        self.broker = broker
        settings = broker.settings
        self.num_partitions = settings["offsets.topic.num.partitions"]
        self.min_session_ms = settings["group.min.session.timeout.ms"]
        self.max_session_ms = settings["group.max.session.timeout.ms"]
        self.initial_delay_ms = settings["group.initial.rebalance.delay.ms"]
        self.max_size = settings["group.max.size"]
        self.max_metadata_bytes = settings["offset.metadata.max.bytes"]
        self.retention_ms = settings["offsets.retention.minutes"] * 60_000
        self.compaction_min_records = settings["kgate.offsets.compaction.min.records"]
        self.groups: dict[str, Group] = {}
        self._appended_since_compaction: dict[int, int] = defaultdict(int)
        self._compactions: dict[int, asyncio.Task] = {}
        self._expiry_task: asyncio.Task | None = None
        self._owned: set[int] = set()  # offsets partitions this broker owns and has replayed

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

    def gain(self, index: int) -> None:
        """Serve the groups of offsets partition ``index``, which this broker now owns: replay it."""
        started = time.monotonic()
        before = set(self.groups)
        loaded = self._replay(index)
        now = records.now_ms()
        gained = [g for g in self.groups.values() if g.group_id not in before]
        for group in gained:
            self._restore(group, now)
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
        task = self._compactions.pop(index, None)
        if task is not None:
            task.cancel()
        for group in [g for g in self.groups.values() if self.partition_of(g.group_id) == index]:
            self._cancel_timers(group)
            for member in group.members.values():
                _resolve(member.join_waiter, JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
                _resolve(member.sync_waiter, ErrorCode.NOT_COORDINATOR)
            del self.groups[group.group_id]
        log.debug("group coordinator lost %s-%d", OFFSETS_TOPIC, index)

    def _replay(self, index: int) -> int:
        """Load one partition. Keys are independent and the last record per key wins, so
        only each key's final value is decoded: replay costs a dict store per record."""
        ledger = self._partition(index).ledger
        offset, count = ledger.log_start_offset, 0
        latest: dict[bytes, bytes | None] = {}
        while offset < ledger.high_watermark:
            entries = ledger.read(offset, 1 << 20)
            for stored in entries:
                payload = entry_formats.decode_entry(stored)
                for record_offset, key, value in records.iter_records(payload):
                    if record_offset >= ledger.log_start_offset:
                        latest[key] = value
                        count += 1
            offset = entries[-1].header.last_offset + 1
        for key, value in latest.items():
            try:
                self._apply(*records.decode(key, value))
            except records.CorruptRecord as exc:
                log.error("%s-%d: skipped a record: %s", OFFSETS_TOPIC, index, exc)
        self._appended_since_compaction[index] = count
        return count

    def _apply(self, key: tuple, value) -> None:
        """Apply one record (replayed, or being appended) to the in-memory state."""
        group_id = key[1]
        group = self.groups.get(group_id)
        if key[0] == "offset":
            if value is None:
                if group is not None:
                    group.offsets.pop((key[2], key[3]), None)
                    self._forget_if_dead(group)
                return
            if group is None:
                group = self.groups[group_id] = Group(group_id)
            group.offsets[(key[2], key[3])] = value
        elif value is None:
            if group is not None:
                group.generation, group.protocol, group.protocol_type, group.leader_id = 0, None, None, None
                group.members.clear()
                group.static_members.clear()
                self._forget_if_dead(group)
        else:
            if group is None:
                group = self.groups[group_id] = Group(group_id)
            group.load_metadata(value)

    def _restore(self, group: Group, now: int) -> None:
        """After replay: a group with members resumes Stable and its members must heartbeat."""
        if group.members:
            group.state = GroupState.STABLE
            for member in group.members.values():
                self._schedule_expiry(group, member)
        else:
            group.state = GroupState.EMPTY
            if group.state_timestamp < 0:
                group.state_timestamp = now

    def _forget_if_dead(self, group: Group) -> None:
        if not group.members and not group.offsets and not group.pending_members:
            group.state = GroupState.DEAD
            self.groups.pop(group.group_id, None)

    async def close(self) -> None:
        if self._expiry_task is not None:
            self._expiry_task.cancel()
        for task in list(self._compactions.values()):
            task.cancel()
        for group in self.groups.values():
            self._cancel_timers(group)

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
            raise GroupError(ErrorCode.NOT_COORDINATOR, "this broker no longer owns the group's partition")
        return partition

    def check_group_id(self, group_id: str | None, allow_empty: bool) -> None:
        """Kafka's rule: only the offset and admin APIs accept an empty group id."""
        if group_id is None or (not group_id and not allow_empty) or len(group_id.encode()) > MAX_GROUP_ID_BYTES:
            raise GroupError(ErrorCode.INVALID_GROUP_ID, "group id is empty or too long")
        if self.partition_of(group_id) not in self._owned:
            owner = self.coordinator_of(group_id)
            if owner is not None and owner.node_id == self.broker.node_id:
                raise GroupError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            raise GroupError(ErrorCode.NOT_COORDINATOR, "another broker coordinates this group")

    # -- persistence -----------------------------------------------------------------------

    async def _write(self, group_id: str, keyed: list[tuple[tuple, bytes, object]]) -> None:
        """Append ``(parsed key, key bytes, value)`` records and apply them; return once durable.

        ``value`` is the decoded value (applied to memory) or None for a tombstone.
        """
        index = self.partition_of(group_id)
        partition = self._partition(index)
        await partition.ledger.prepare_append()
        # No await from here until the futures: the log and memory change together.
        durable = self._append(partition, [(key, _encode_value(value)) for _, key, value in keyed])
        for parsed, _, value in keyed:
            # Group records are written from the live state, which is already current.
            if parsed[0] == "offset":
                self._apply(parsed, value)
        self._appended_since_compaction[index] += len(keyed)
        await asyncio.gather(*durable)
        self._maybe_compact(index)

    @staticmethod
    def _append(partition, pairs: list[tuple[bytes, bytes | None]]) -> list[asyncio.Future]:
        kafka_format = entry_formats.by_name("kafka")
        durable = []
        for start in range(0, len(pairs), RECORDS_PER_BATCH):
            data = records.build_batch(pairs[start:start + RECORDS_PER_BATCH])
            header = record_batch.validate(data)
            produced = ProducedRecords.of_batch(memoryview(data), header)
            _, done = partition.ledger.append(
                header.record_count, header.max_timestamp, 2, kafka_format.code,
                lambda base, p=produced: kafka_format.encode(p, base, partition.leader_epoch, None))
            durable.append(done)
        return durable

    def _maybe_compact(self, index: int) -> None:
        if index in self._compactions:
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
            if group.generation > 0 or group.members:
                snapshot.append((records.group_key(group.group_id), records.group_value(group.metadata_value())))
            for (topic, partition), committed in group.offsets.items():
                snapshot.append((records.offset_key(group.group_id, topic, partition), records.offset_value(committed)))
        durable = self._append(self._partition(index), snapshot)
        self._appended_since_compaction[index] = len(snapshot)
        await asyncio.gather(*durable)
        await ledger.trim_before(start)
        log.info("%s-%d compacted: %d live records from offset %d", OFFSETS_TOPIC, index, len(snapshot), start)

    def _persist_group(self, group: Group) -> asyncio.Task:
        """Store the group's generation and assignment; callers that do not wait get failures logged."""
        task = asyncio.ensure_future(self._write(group.group_id, [(("group", group.group_id),
                                                                   records.group_key(group.group_id),
                                                                   group.metadata_value())]))
        task.add_done_callback(_log_failure)
        return task

    # -- JoinGroup ------------------------------------------------------------------------

    async def join(self, request: JoinRequest) -> JoinResult:
        self.check_group_id(request.group_id, allow_empty=False)
        if not self.min_session_ms <= request.session_timeout_ms <= self.max_session_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, request.member_id)
        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_id:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id)
            group = self.groups[request.group_id] = Group(request.group_id, state_timestamp=records.now_ms())
        if group.is_(GroupState.DEAD):
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, request.member_id)
        if not group.supports(request.protocol_type, [name for name, _ in request.protocols]):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
        if request.member_id in group.pending_members:
            return await self._add_member(group, request, request.member_id)
        if not request.member_id:
            return await self._join_new(group, request)
        if group.is_fenced(request.member_id, request.group_instance_id):
            return JoinResult(ErrorCode.FENCED_INSTANCE_ID, request.member_id)
        member = group.members.get(request.member_id)
        if member is None:
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id)
        return await self._join_known(group, member, request)

    async def _join_new(self, group: Group, request: JoinRequest) -> JoinResult:
        instance = request.group_instance_id
        if instance is not None and instance in group.static_members:
            return await self._rejoin_static(group, request)
        if len(group.members) + len(group.pending_members) >= self.max_size:
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED)
        member_id = f"{instance or request.client_id}-{uuid.uuid4()}"
        if request.require_known_member_id and instance is None:
            # KIP-394: the member must come back with this id, so a client that retries a
            # lost response does not leave a ghost member behind.
            loop = asyncio.get_running_loop()
            group.pending_members[member_id] = loop.call_later(
                request.session_timeout_ms / 1000, self._expire_pending, group, member_id)
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        return await self._add_member(group, request, member_id)

    async def _add_member(self, group: Group, request: JoinRequest, member_id: str) -> JoinResult:
        timer = group.pending_members.pop(member_id, None)
        if timer is not None:
            timer.cancel()
        if len(group.members) >= self.max_size:
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
        member = Member(member_id, request.group_instance_id, request.client_id, request.client_host,
                        request.rebalance_timeout_ms, request.session_timeout_ms, request.protocol_type,
                        list(request.protocols))
        group.add(member)
        return await self._await_join(group, member)

    async def _rejoin_static(self, group: Group, request: JoinRequest) -> JoinResult:
        """A restarted static member takes its old place; a Stable group does not rebalance."""
        old_id = group.static_members[request.group_instance_id]
        new_id = f"{request.group_instance_id}-{uuid.uuid4()}"
        old = group.members[old_id]
        _resolve(old.join_waiter, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
        _resolve(old.sync_waiter, ErrorCode.FENCED_INSTANCE_ID)
        member = group.replace_static(old_id, new_id)
        protocols_changed = member.protocols != list(request.protocols)
        member.client_id, member.client_host = request.client_id, request.client_host
        member.session_timeout_ms, member.rebalance_timeout_ms = request.session_timeout_ms, request.rebalance_timeout_ms
        member.protocols = list(request.protocols)
        self._schedule_expiry(group, member)
        if group.is_(GroupState.STABLE) and not protocols_changed:
            await self._persist_group(group)
            leader = group.leader_id == new_id
            return JoinResult(ErrorCode.NONE, new_id, group.generation, group.protocol_type, group.protocol,
                              group.leader_id or "", self._member_list(group) if leader else [],
                              skip_assignment=leader and request.skip_assignment_supported)
        return await self._await_join(group, member)

    async def _join_known(self, group: Group, member: Member, request: JoinRequest) -> JoinResult:
        same = member.protocols == list(request.protocols)
        member.protocols = list(request.protocols)
        member.session_timeout_ms, member.rebalance_timeout_ms = request.session_timeout_ms, request.rebalance_timeout_ms
        if group.is_(GroupState.COMPLETING_REBALANCE) and same:
            # A retry of a join whose response was lost: answer with the current generation.
            return self._join_result(group, member)
        if group.is_(GroupState.STABLE) and same and group.leader_id != member.member_id:
            return self._join_result(group, member)
        return await self._await_join(group, member)

    async def _await_join(self, group: Group, member: Member) -> JoinResult:
        if member.awaiting_join:
            _resolve(member.join_waiter, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_waiter = asyncio.get_running_loop().create_future()
        waiter = member.join_waiter
        if not group.is_(GroupState.PREPARING_REBALANCE):
            self._prepare_rebalance(group, f"member {member.member_id} joined")
        else:
            self._maybe_complete_join(group)
        return await waiter

    def _join_result(self, group: Group, member: Member) -> JoinResult:
        leader = group.leader_id == member.member_id
        return JoinResult(ErrorCode.NONE, member.member_id, group.generation, group.protocol_type, group.protocol,
                          group.leader_id or "", self._member_list(group) if leader else [])

    @staticmethod
    def _member_list(group: Group) -> list[tuple[str, str | None, bytes]]:
        return [(m.member_id, m.group_instance_id, m.metadata(group.protocol)) for m in group.members.values()]

    # -- rebalancing --------------------------------------------------------------------------

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            for member in group.members.values():
                _resolve(member.sync_waiter, ErrorCode.REBALANCE_IN_PROGRESS)
        loop = asyncio.get_running_loop()
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
        if group.is_(GroupState.EMPTY) and self.initial_delay_ms > 0:
            group.in_initial_delay = True
            group.rebalance_timer = loop.call_later(self.initial_delay_ms / 1000, self._end_initial_delay, group)
        else:
            group.rebalance_timer = loop.call_later(group.rebalance_timeout_ms / 1000, self._rebalance_timeout, group)
        group.transition(GroupState.PREPARING_REBALANCE, records.now_ms())
        log.info("group %s rebalancing (generation %d): %s", group.group_id, group.generation, reason)
        self._maybe_complete_join(group)

    def _end_initial_delay(self, group: Group) -> None:
        group.in_initial_delay = False
        loop = asyncio.get_running_loop()
        group.rebalance_timer = loop.call_later(group.rebalance_timeout_ms / 1000, self._rebalance_timeout, group)
        self._maybe_complete_join(group)

    def _rebalance_timeout(self, group: Group) -> None:
        if not group.is_(GroupState.PREPARING_REBALANCE) or group.in_initial_delay:
            return
        for member in [m for m in group.members.values() if not m.awaiting_join]:
            log.info("group %s: member %s did not rejoin in time", group.group_id, member.member_id)
            group.remove(member.member_id)
        for timer in group.pending_members.values():
            if timer is not None:
                timer.cancel()
        group.pending_members.clear()
        self._complete_join(group)

    def _maybe_complete_join(self, group: Group) -> None:
        if group.is_(GroupState.PREPARING_REBALANCE) and not group.in_initial_delay and group.all_joined:
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
            group.rebalance_timer = None
        group.generation += 1
        now = records.now_ms()
        if not group.members:
            group.protocol = None
            group.leader_id = None
            group.transition(GroupState.EMPTY, now)
            log.info("group %s is empty at generation %d", group.group_id, group.generation)
            self._persist_group(group)
            return
        group.protocol = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.transition(GroupState.COMPLETING_REBALANCE, now)
        log.info("group %s generation %d: %d members, protocol %s, leader %s", group.group_id, group.generation,
                 len(group.members), group.protocol, group.leader_id)
        for member in group.members.values():
            member.assignment = b""
            _resolve(member.join_waiter, self._join_result(group, member))
            self._schedule_expiry(group, member)

    # -- SyncGroup --------------------------------------------------------------------------

    async def sync(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
                   protocol_type: str | None, protocol: str | None,
                   assignments: dict[str, bytes]) -> tuple[ErrorCode, bytes]:
        self.check_group_id(group_id, allow_empty=False)
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return (ErrorCode.FENCED_INSTANCE_ID if group and group.is_fenced(member_id, group_instance_id)
                    else ErrorCode.UNKNOWN_MEMBER_ID), b""
        if group.is_fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID, b""
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION, b""
        if ((protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol is not None and protocol != group.protocol)):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL, b""
        member = group.members[member_id]
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS, b""
        if group.is_(GroupState.STABLE):
            self._schedule_expiry(group, member)
            return ErrorCode.NONE, member.assignment
        # CompletingRebalance: wait for the leader's assignment.
        member.sync_waiter = asyncio.get_running_loop().create_future()
        waiter = member.sync_waiter
        if member_id == group.leader_id:
            for other in group.members.values():
                other.assignment = assignments.get(other.member_id, b"")
            try:
                await self._persist_group(group)
            except Exception:
                log.exception("group %s: storing generation %d failed", group_id, generation)
                for other in group.members.values():
                    _resolve(other.sync_waiter, ErrorCode.COORDINATOR_NOT_AVAILABLE)
                if group.is_(GroupState.COMPLETING_REBALANCE):
                    self._prepare_rebalance(group, "storing the assignment failed")
            else:
                if group.is_(GroupState.COMPLETING_REBALANCE) and group.generation == generation:
                    group.transition(GroupState.STABLE, records.now_ms())
                    for other in group.members.values():
                        _resolve(other.sync_waiter, ErrorCode.NONE)
        error = await waiter
        return error, member.assignment if error == ErrorCode.NONE else b""

    # -- Heartbeat and expiry -----------------------------------------------------------------

    def heartbeat(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        self.check_group_id(group_id, allow_empty=False)
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.EMPTY, GroupState.DEAD):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        self._schedule_expiry(group, member)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _schedule_expiry(self, group: Group, member: Member) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
        member.heartbeat_timer = asyncio.get_running_loop().call_later(
            member.session_timeout_ms / 1000, self._expire_member, group, member)

    def _expire_member(self, group: Group, member: Member) -> None:
        if group.members.get(member.member_id) is not member:
            return
        if member.awaiting_join or member.awaiting_sync:
            # A member waiting on the rebalance is alive; the rebalance timeout bounds it.
            self._schedule_expiry(group, member)
            return
        log.info("group %s: member %s session expired", group.group_id, member.member_id)
        self._remove_members(group, [member.member_id], "session expired")

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if group.pending_members.pop(member_id, False) is not False:
            self._maybe_complete_join(group)
            self._forget_if_dead(group)

    def _remove_members(self, group: Group, member_ids: list[str], reason: str) -> None:
        for member_id in member_ids:
            member = group.remove(member_id)
            if member is not None:
                _resolve(member.join_waiter, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
                _resolve(member.sync_waiter, ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)

    # -- LeaveGroup ---------------------------------------------------------------------------

    def leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> list[ErrorCode]:
        """Remove members given as ``(member id, group instance id)``; one error per member."""
        self.check_group_id(group_id, allow_empty=False)
        group = self.groups.get(group_id)
        if group is None:
            return [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
        errors, removed = [], []
        for member_id, instance in leaving:
            if instance is not None:
                current = group.static_members.get(instance)
                if current is None:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                elif member_id and member_id != current:
                    errors.append(ErrorCode.FENCED_INSTANCE_ID)
                else:
                    errors.append(ErrorCode.NONE)
                    removed.append(current)
            elif member_id in group.pending_members:
                group.pending_members.pop(member_id).cancel()
                errors.append(ErrorCode.NONE)
            elif member_id in group.members:
                errors.append(ErrorCode.NONE)
                removed.append(member_id)
            else:
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
        if removed:
            self._remove_members(group, removed, f"{len(removed)} member(s) left")
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
        return errors

    # -- offsets ------------------------------------------------------------------------------

    def check_commit(self, group_id: str, generation: int, member_id: str,
                     group_instance_id: str | None) -> ErrorCode:
        """Whether this member may commit for this generation (Kafka's checks, in Kafka's order)."""
        self.check_group_id(group_id, allow_empty=True)
        group = self.groups.get(group_id)
        if group is None:
            # Only a "simple" commit (no generation) may create a group.
            return ErrorCode.NONE if generation < 0 else ErrorCode.ILLEGAL_GENERATION
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if generation < 0 and group.is_(GroupState.EMPTY):
            return ErrorCode.NONE
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        self._schedule_expiry(group, group.members[member_id])
        return ErrorCode.NONE

    async def commit(self, group_id: str, offsets: dict[tuple[str, int], CommittedOffset]) -> None:
        """Store already-checked offsets; returns once they are durable."""
        await self._write(group_id, [(("offset", group_id, topic, partition),
                                      records.offset_key(group_id, topic, partition), committed)
                                     for (topic, partition), committed in offsets.items()])

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
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND)
        if not group.is_(GroupState.EMPTY):
            subscribed = group.subscribed_topics()
            if subscribed is None:
                raise GroupError(ErrorCode.NON_EMPTY_GROUP)
        else:
            subscribed = set()
        results = {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if tp[0] in subscribed else ErrorCode.NONE
                   for tp in partitions}
        doomed = [tp for tp, error in results.items() if error == ErrorCode.NONE and tp in group.offsets]
        if doomed:
            await self._write(group_id, [(("offset", group_id, t, p), records.offset_key(group_id, t, p), None)
                                         for t, p in doomed])
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
        if not group.is_(GroupState.EMPTY):
            return ErrorCode.NON_EMPTY_GROUP
        keyed = [(("offset", group_id, t, p), records.offset_key(group_id, t, p), None) for t, p in group.offsets]
        keyed.append((("group", group_id), records.group_key(group_id), None))
        self._cancel_timers(group)
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
                await self._write(group.group_id, [(("offset", group.group_id, t, p),
                                                    records.offset_key(group.group_id, t, p), None)
                                                   for t, p in doomed])

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
            if not group.is_(GroupState.EMPTY):
                continue
            doomed = [(t, p) for (t, p), c in group.offsets.items()
                      if (c.expire_timestamp >= 0 and now >= c.expire_timestamp)
                      or (c.expire_timestamp < 0 and now - max(c.commit_timestamp, group.state_timestamp) >= self.retention_ms)]
            if not doomed:
                continue
            keyed = [(("offset", group.group_id, t, p), records.offset_key(group.group_id, t, p), None) for t, p in doomed]
            if len(doomed) == len(group.offsets):
                keyed.append((("group", group.group_id), records.group_key(group.group_id), None))
            await self._write(group.group_id, keyed)
            expired += len(doomed)
            log.info("group %s: %d offsets expired", group.group_id, len(doomed))
        return expired

    @staticmethod
    def _cancel_timers(group: Group) -> None:
        for timer in [group.rebalance_timer, *group.pending_members.values(),
                      *(m.heartbeat_timer for m in group.members.values())]:
            if timer is not None:
                timer.cancel()


def _encode_value(value) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, CommittedOffset):
        return records.offset_value(value)
    return records.group_value(value)


def _log_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("storing group metadata failed: %s", task.exception())


def _resolve(waiter: asyncio.Future | None, result) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(result)
