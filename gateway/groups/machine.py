"""The classic group protocol's rules, as a machine that does no I/O (sans-IO).

Every request and every timer that fires is a call that takes the current time in
milliseconds, changes the groups in place and returns what must happen next as
effects (see ``effects``). Time only enters as ``now``, and member ids come from the
factory the driver gives, so a test can drive every rebalance path with a fake clock
and read exactly what the broker would do.

A request that must wait for the rebalance (JoinGroup, SyncGroup) parks: the member
is marked as awaiting, and a later step answers it. While it waits, the member is
kept alive: its session timer re-arms instead of expiring it, and the rebalance
timeout bounds the wait.

Liveness, as Kafka keeps it: every member has a session in every state. The driver
reports a parked request whose connection went away (``abandoned``). A JoinGroup
still counts as joined, because the broker cannot tell a dead client from a slow
reconnect: the rebalance completes when the initial delay ends or the others join,
and the member, answered into the void, is evicted when its session runs out. A
SyncGroup stops keeping its member alive. After each generation forms, members must
send SyncGroup within the rebalance timeout (a leader that heartbeats but never
syncs included); those that did not are removed and the rest rebalance.

A consumer group's members may speak this protocol too (after an online upgrade):
their JoinGroup, SyncGroup, Heartbeat and LeaveGroup go to the consumer-group machine
given as ``consumers`` (``classic_members``); without one they are refused.
"""
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass

from kgate.protocol.error_codes import ErrorCode

from .classic_members import ClassicMemberMachine
from .consumer_machine import ConsumerGroupMachine
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
from .group import Group, GroupState, Member
from .modern_group import CommittedPartition
from .streams_machine import StreamsGroupMachine


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


class GroupMachine:
    """Every group one coordinator serves, and the rules of the classic protocol over them."""

    def __init__(self, *, min_session_ms: int, max_session_ms: int, initial_delay_ms: int, max_size: int,
                 new_member_id: Callable[[str], str]):
        self.min_session_ms = min_session_ms
        self.max_session_ms = max_session_ms
        self.initial_delay_ms = initial_delay_ms
        self.max_size = max_size
        # prefix (instance id or client id) -> a fresh member id; the driver's makes it unique.
        self.new_member_id = new_member_id
        self.groups: dict[str, Group] = {}
        # Answers the classic requests of consumer groups with members; set by the driver.
        self.consumers: ClassicMemberMachine | None = None

    def _classic_in_consumer(self, group_id: str) -> ClassicMemberMachine | None:
        """The machine answering this group's classic requests, when it is a consumer group with members."""
        return self.consumers if self.consumers is not None and self.consumers.serves(group_id) else None

    # -- JoinGroup --------------------------------------------------------------------------

    def join(self, now: int, request: JoinRequest) -> Step[JoinResult]:
        consumers = self._classic_in_consumer(request.group_id)
        if consumers is not None and self.min_session_ms <= request.session_timeout_ms <= self.max_session_ms:
            return consumers.classic_join(now, request)
        out: list[Effect] = []
        return Step(self._join(now, request, out), out)

    def _join(self, now: int, request: JoinRequest, out: list[Effect]) -> JoinResult | None:
        if not self.min_session_ms <= request.session_timeout_ms <= self.max_session_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, request.member_id)
        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_id:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id)
            group = self.groups[request.group_id] = Group(request.group_id, state_timestamp=now)
        if group.is_(GroupState.DEAD):
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, request.member_id)
        if group.share is not None or group.streams is not None:
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
        if group.consumer is not None:
            if group.consumer.members:
                return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
            # An empty consumer group becomes a classic one again; its records go.
            out.append(StoreConsumer(group.group_id, group.consumer.tombstones()))
            out.append(Log(logging.INFO, "group %s: empty consumer group converted to a classic group",
                           (group.group_id,)))
            group.consumer, group.protocol_type = None, None
        if not group.supports(request.protocol_type, [name for name, _ in request.protocols]):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
        if request.member_id in group.pending_members:
            return self._add_member(now, group, request, request.member_id, out)
        if not request.member_id:
            return self._join_new(now, group, request, out)
        if group.is_fenced(request.member_id, request.group_instance_id):
            return JoinResult(ErrorCode.FENCED_INSTANCE_ID, request.member_id)
        member = group.members.get(request.member_id)
        if member is None:
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id)
        return self._join_known(now, group, member, request, out)

    def _join_new(self, now: int, group: Group, request: JoinRequest, out: list[Effect]) -> JoinResult | None:
        instance = request.group_instance_id
        if instance is not None and instance in group.static_members:
            return self._rejoin_static(now, group, instance, request, out)
        if len(group.members) + len(group.pending_members) >= self.max_size:
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED)
        member_id = self.new_member_id(instance or request.client_id)
        if request.require_known_member_id and instance is None:
            # KIP-394: the member must come back with this id, so a client that retries a
            # lost response does not leave a ghost member behind.
            group.pending_members.add(member_id)
            out.append(ArmTimer(TimerKey(group.group_id, Timer.PENDING, member_id), now + request.session_timeout_ms))
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        return self._add_member(now, group, request, member_id, out)

    def _add_member(self, now: int, group: Group, request: JoinRequest, member_id: str,
                    out: list[Effect]) -> JoinResult | None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            out.append(CancelTimer(TimerKey(group.group_id, Timer.PENDING, member_id)))
        if len(group.members) >= self.max_size:
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
        member = Member(member_id, request.group_instance_id, request.client_id, request.client_host,
                        request.rebalance_timeout_ms, request.session_timeout_ms, request.protocol_type,
                        list(request.protocols))
        group.add(member)
        self._await_join(now, group, member, out)
        return None  # parked

    def _rejoin_static(self, now: int, group: Group, instance: str, request: JoinRequest,
                       out: list[Effect]) -> JoinResult | None:
        """A restarted static member takes its old place; a Stable group does not rebalance."""
        old_id = group.static_members[instance]
        new_id = self.new_member_id(instance)
        old = group.members[old_id]
        _answer_join(group, old, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id), out)
        _answer_sync(group, old, ErrorCode.FENCED_INSTANCE_ID, out)
        out.append(CancelTimer(TimerKey(group.group_id, Timer.SESSION, old_id)))
        member = group.replace_static(old_id, new_id)
        protocols_changed = member.protocols != list(request.protocols)
        member.client_id, member.client_host = request.client_id, request.client_host
        _renew(member, request)
        _arm_session(now, group, member, out)
        if group.is_(GroupState.STABLE) and not protocols_changed:
            out.append(StoreGroup(group.group_id, group.metadata_value(), AfterStore.REPLY))
            leader = group.leader_id == new_id
            return JoinResult(ErrorCode.NONE, new_id, group.generation, group.protocol_type, group.protocol,
                              group.leader_id or "", _member_list(group) if leader else [],
                              skip_assignment=leader and request.skip_assignment_supported)
        self._await_join(now, group, member, out)
        return None  # parked

    def _join_known(self, now: int, group: Group, member: Member, request: JoinRequest,
                    out: list[Effect]) -> JoinResult | None:
        same = member.protocols == list(request.protocols)
        _renew(member, request)
        if group.is_(GroupState.COMPLETING_REBALANCE) and same:
            # A retry of a join whose response was lost: answer with the current generation.
            return _join_result(group, member)
        if group.is_(GroupState.STABLE) and same and group.leader_id != member.member_id:
            return _join_result(group, member)
        self._await_join(now, group, member, out)
        return None  # parked

    def _await_join(self, now: int, group: Group, member: Member, out: list[Effect]) -> None:
        # A join parked earlier by this member (a retry on another connection) gives way to this one.
        _answer_join(group, member, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id), out)
        member.awaiting_join = True
        out.append(Park(group.group_id, member.member_id, Wait.JOIN))
        if not group.is_(GroupState.PREPARING_REBALANCE):
            self._prepare_rebalance(now, group, f"member {member.member_id} joined", out)
        else:
            _maybe_complete_join(now, group, out)

    # -- rebalancing --------------------------------------------------------------------------

    def _prepare_rebalance(self, now: int, group: Group, reason: str, out: list[Effect]) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            for member in group.members.values():
                _answer_sync(group, member, ErrorCode.REBALANCE_IN_PROGRESS, out)
        _stop_sync_deadline(group, out)
        if group.is_(GroupState.EMPTY) and self.initial_delay_ms > 0:
            group.in_initial_delay = True
            out.append(ArmTimer(_rebalance_key(group), now + self.initial_delay_ms))
        else:
            out.append(ArmTimer(_rebalance_key(group), now + group.rebalance_timeout_ms))
        group.transition(GroupState.PREPARING_REBALANCE, now)
        out.append(Log(logging.INFO, "group %s rebalancing (generation %d): %s",
                       (group.group_id, group.generation, reason)))
        _maybe_complete_join(now, group, out)

    def _remove_members(self, now: int, group: Group, member_ids: list[str], reason: str, out: list[Effect]) -> None:
        for member_id in member_ids:
            _remove(group, member_id, out)
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now, group, reason, out)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            _maybe_complete_join(now, group, out)

    # -- SyncGroup ----------------------------------------------------------------------------

    def sync(self, now: int, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
             protocol_type: str | None, protocol: str | None,
             assignments: dict[str, bytes]) -> Step[tuple[ErrorCode, bytes]]:
        """In CompletingRebalance every member parks; the leader's assignment is stored first
        (AfterStore.REPORT), and ``assignment_stored`` makes the group Stable and answers them."""
        consumers = self._classic_in_consumer(group_id)
        if consumers is not None:
            return consumers.classic_sync(now, group_id, generation, member_id, group_instance_id, protocol_type,
                                          protocol)
        out: list[Effect] = []
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return Step((ErrorCode.FENCED_INSTANCE_ID if group and group.is_fenced(member_id, group_instance_id)
                         else ErrorCode.UNKNOWN_MEMBER_ID, b""), out)
        if group.is_fenced(member_id, group_instance_id):
            return Step((ErrorCode.FENCED_INSTANCE_ID, b""), out)
        if generation != group.generation:
            return Step((ErrorCode.ILLEGAL_GENERATION, b""), out)
        if ((protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol is not None and protocol != group.protocol)):
            return Step((ErrorCode.INCONSISTENT_GROUP_PROTOCOL, b""), out)
        member = group.members[member_id]
        if group.is_(GroupState.PREPARING_REBALANCE):
            return Step((ErrorCode.REBALANCE_IN_PROGRESS, b""), out)
        _synced(group, member_id, out)
        if group.is_(GroupState.STABLE):
            _arm_session(now, group, member, out)
            return Step((ErrorCode.NONE, member.assignment), out)
        # CompletingRebalance: wait for the leader's assignment. A second SyncGroup of the
        # same member parks again; the first request is never answered (as in Kafka).
        member.awaiting_sync = True
        out.append(Park(group_id, member_id, Wait.SYNC))
        if member_id == group.leader_id:
            for other in group.members.values():
                other.assignment = assignments.get(other.member_id, b"")
            out.append(StoreGroup(group_id, group.metadata_value(), AfterStore.REPORT))
        return Step(None, out)

    def assignment_stored(self, now: int, group_id: str, generation: int, stored: bool) -> list[Effect]:
        """The leader's assignment of ``generation`` is durable (or failed to be)."""
        out: list[Effect] = []
        group = self.groups.get(group_id)
        if group is None:
            return out
        if not stored:
            for member in group.members.values():
                _answer_sync(group, member, ErrorCode.COORDINATOR_NOT_AVAILABLE, out)
            if group.is_(GroupState.COMPLETING_REBALANCE):
                self._prepare_rebalance(now, group, "storing the assignment failed", out)
        elif group.is_(GroupState.COMPLETING_REBALANCE) and group.generation == generation:
            group.transition(GroupState.STABLE, now)
            for member in group.members.values():
                _answer_sync(group, member, ErrorCode.NONE, out)
        return out

    # -- Heartbeat and LeaveGroup ----------------------------------------------------------------

    def heartbeat(self, now: int, group_id: str, generation: int, member_id: str,
                  group_instance_id: str | None) -> Step[ErrorCode]:
        consumers = self._classic_in_consumer(group_id)
        if consumers is not None:
            return consumers.classic_heartbeat(now, group_id, generation, member_id, group_instance_id)
        out: list[Effect] = []
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.EMPTY, GroupState.DEAD):
            return Step(ErrorCode.UNKNOWN_MEMBER_ID, out)
        if group.is_fenced(member_id, group_instance_id):
            return Step(ErrorCode.FENCED_INSTANCE_ID, out)
        member = group.members.get(member_id)
        if member is None:
            return Step(ErrorCode.UNKNOWN_MEMBER_ID, out)
        if generation != group.generation:
            return Step(ErrorCode.ILLEGAL_GENERATION, out)
        _arm_session(now, group, member, out)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return Step(ErrorCode.REBALANCE_IN_PROGRESS, out)
        return Step(ErrorCode.NONE, out)

    def leave(self, now: int, group_id: str, leaving: list[tuple[str, str | None]]) -> Step[list[ErrorCode]]:
        """Remove members given as ``(member id, group instance id)``; one error per member."""
        consumers = self._classic_in_consumer(group_id)
        if consumers is not None:
            return consumers.classic_leave(now, group_id, leaving)
        out: list[Effect] = []
        group = self.groups.get(group_id)
        if group is None:
            return Step([ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving), out)
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
                group.pending_members.discard(member_id)
                out.append(CancelTimer(TimerKey(group_id, Timer.PENDING, member_id)))
                errors.append(ErrorCode.NONE)
            elif member_id in group.members:
                errors.append(ErrorCode.NONE)
                removed.append(member_id)
            else:
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
        if removed:
            self._remove_members(now, group, removed, f"{len(removed)} member(s) left", out)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            _maybe_complete_join(now, group, out)
        return Step(errors, out)

    # -- OffsetCommit -----------------------------------------------------------------------------

    def check_commit(self, now: int, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
                     partitions: Collection[CommittedPartition] = ()) -> Step[ErrorCode]:
        """Whether this member may commit ``partitions`` (topic name, id, index) for this generation
        (Kafka's checks, in Kafka's order)."""
        out: list[Effect] = []
        group = self.groups.get(group_id)
        if group is None:
            # Only a "simple" commit (no generation) may create a group.
            return Step(ErrorCode.NONE if generation < 0 else ErrorCode.ILLEGAL_GENERATION, out)
        if group.is_(GroupState.DEAD):
            return Step(ErrorCode.COORDINATOR_NOT_AVAILABLE, out)
        if group.consumer is not None:  # the generation field carries the member epoch
            return Step(ConsumerGroupMachine.check_commit(group.consumer, generation, member_id, partitions), out)
        if group.streams is not None:
            return Step(StreamsGroupMachine.check_commit(group.streams, generation, member_id, partitions), out)
        if group.is_fenced(member_id, group_instance_id):
            return Step(ErrorCode.FENCED_INSTANCE_ID, out)
        if generation < 0 and group.is_(GroupState.EMPTY):
            return Step(ErrorCode.NONE, out)
        if member_id not in group.members:
            return Step(ErrorCode.UNKNOWN_MEMBER_ID, out)
        if generation != group.generation:
            return Step(ErrorCode.ILLEGAL_GENERATION, out)
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return Step(ErrorCode.REBALANCE_IN_PROGRESS, out)
        _arm_session(now, group, group.members[member_id], out)
        return Step(ErrorCode.NONE, out)

    # -- timers -----------------------------------------------------------------------------------

    def timer_fired(self, now: int, key: TimerKey) -> list[Effect]:
        out: list[Effect] = []
        group = self.groups.get(key.group_id)
        if group is None:
            return out
        if key.kind is Timer.SESSION:
            self._expire_member(now, group, key.member_id, out)
        elif key.kind is Timer.PENDING:
            self._expire_pending(now, group, key.member_id, out)
        elif key.kind is Timer.SYNC:
            self._expire_pending_sync(now, group, out)
        elif group.in_initial_delay:
            group.in_initial_delay = False
            out.append(ArmTimer(_rebalance_key(group), now + group.rebalance_timeout_ms))
            _maybe_complete_join(now, group, out)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            _rebalance_timeout(now, group, out)
        return out

    def _expire_member(self, now: int, group: Group, member_id: str, out: list[Effect]) -> None:
        member = group.members.get(member_id)
        if member is None:
            return
        if member.awaiting_join or member.awaiting_sync:
            # A member waiting on the rebalance is alive; the rebalance timeout bounds it.
            _arm_session(now, group, member, out)
            return
        out.append(Log(logging.INFO, "group %s: member %s session expired", (group.group_id, member_id)))
        self._remove_members(now, group, [member_id], "session expired", out)

    def _expire_pending_sync(self, now: int, group: Group, out: list[Effect]) -> None:
        """The rebalance timeout ran out after a generation formed: members that never sent
        SyncGroup for it (a leader stuck before its assignment included) are removed."""
        late = [member_id for member_id in group.members if member_id in group.pending_sync]
        group.pending_sync.clear()
        if not late or not group.is_(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        for member_id in late:
            out.append(Log(logging.INFO, "group %s: member %s did not sync in time", (group.group_id, member_id)))
        self._remove_members(now, group, late, f"{len(late)} member(s) did not sync", out)

    def _expire_pending(self, now: int, group: Group, member_id: str, out: list[Effect]) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            _maybe_complete_join(now, group, out)
            self.forget_if_dead(group)

    # -- the driver's events ------------------------------------------------------------------------

    def abandoned(self, group_id: str, member_id: str, kind: Wait) -> None:
        """A parked request went away unanswered (its connection closed).

        A JoinGroup keeps counting as joined, as in Kafka, which cannot tell a dead
        client from one that reconnects: the rebalance completes without waiting for
        its timeout, the answer goes nowhere, and the member's session, armed when the
        generation forms, evicts it unless it comes back. A SyncGroup no longer keeps
        its member alive: the session applies from the last heartbeat.
        """
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is not None and kind is Wait.SYNC:
            member.awaiting_sync = False

    def restore(self, now: int, group_id: str) -> list[Effect]:
        """After replay: a group with members resumes Stable and its members must heartbeat."""
        out: list[Effect] = []
        group = self.groups[group_id]
        if group.members:
            group.state = GroupState.STABLE
            for member in group.members.values():
                _arm_session(now, group, member, out)
        else:
            group.state = GroupState.EMPTY
            if group.state_timestamp < 0:
                group.state_timestamp = now
        return out

    def unload(self, group_id: str) -> list[Effect]:
        """Another coordinator takes the group: its parked requests are sent there (NOT_COORDINATOR)."""
        out: list[Effect] = []
        group = self.groups.pop(group_id)
        for member in group.members.values():
            _answer_join(group, member, JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id), out)
            _answer_sync(group, member, ErrorCode.NOT_COORDINATOR, out)
        return out

    def forget_if_dead(self, group: Group) -> None:
        """A group with nothing left to keep (members, offsets, pending ids, its own record) is dropped."""
        if (not group.members and not group.offsets and not group.pending_members and group.consumer is None
                and group.share is None and group.streams is None and not group.stored):
            group.state = GroupState.DEAD
            self.groups.pop(group.group_id, None)


# -- rules that need no settings ------------------------------------------------------------------


def _maybe_complete_join(now: int, group: Group, out: list[Effect]) -> None:
    if group.is_(GroupState.PREPARING_REBALANCE) and not group.in_initial_delay and group.all_joined:
        _complete_join(now, group, out)


def _rebalance_timeout(now: int, group: Group, out: list[Effect]) -> None:
    """Members that did not rejoin in time are dropped, and so are ids never used; the rest go on."""
    for member in [m for m in group.members.values() if not m.awaiting_join]:
        out.append(Log(logging.INFO, "group %s: member %s did not rejoin in time", (group.group_id, member.member_id)))
        _remove(group, member.member_id, out)
    for member_id in group.pending_members:
        out.append(CancelTimer(TimerKey(group.group_id, Timer.PENDING, member_id)))
    group.pending_members.clear()
    _complete_join(now, group, out)


def _complete_join(now: int, group: Group, out: list[Effect]) -> None:
    out.append(CancelTimer(_rebalance_key(group)))
    group.generation += 1
    if not group.members:
        group.protocol = None
        group.leader_id = None
        group.transition(GroupState.EMPTY, now)
        out.append(Log(logging.INFO, "group %s is empty at generation %d", (group.group_id, group.generation)))
        out.append(StoreGroup(group.group_id, group.metadata_value()))
        return
    group.protocol = group.select_protocol()
    if group.leader_id not in group.members:
        group.leader_id = next(iter(group.members))
    group.transition(GroupState.COMPLETING_REBALANCE, now)
    out.append(Log(logging.INFO, "group %s generation %d: %d members, protocol %s, leader %s",
                   (group.group_id, group.generation, len(group.members), group.protocol, group.leader_id)))
    for member in group.members.values():
        member.assignment = b""
        _answer_join(group, member, _join_result(group, member), out)
        _arm_session(now, group, member, out)
    group.pending_sync = set(group.members)
    out.append(ArmTimer(TimerKey(group.group_id, Timer.SYNC), now + group.rebalance_timeout_ms))


def _synced(group: Group, member_id: str, out: list[Effect]) -> None:
    """The member sent SyncGroup for the current generation: it no longer owes one."""
    group.pending_sync.discard(member_id)
    if not group.pending_sync:
        out.append(CancelTimer(TimerKey(group.group_id, Timer.SYNC)))


def _stop_sync_deadline(group: Group, out: list[Effect]) -> None:
    if group.pending_sync:
        group.pending_sync.clear()
        out.append(CancelTimer(TimerKey(group.group_id, Timer.SYNC)))


def _remove(group: Group, member_id: str, out: list[Effect]) -> None:
    member = group.remove(member_id)
    if member is not None:
        if member_id in group.pending_sync:
            _synced(group, member_id, out)
        out.append(CancelTimer(TimerKey(group.group_id, Timer.SESSION, member_id)))
        _answer_join(group, member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id), out)
        _answer_sync(group, member, ErrorCode.UNKNOWN_MEMBER_ID, out)


def _answer_join(group: Group, member: Member, result: JoinResult, out: list[Effect]) -> None:
    if member.awaiting_join:
        member.awaiting_join = False
        out.append(AnswerJoin(group.group_id, member.member_id, result))


def _answer_sync(group: Group, member: Member, error: ErrorCode, out: list[Effect]) -> None:
    if member.awaiting_sync:
        member.awaiting_sync = False
        out.append(AnswerSync(group.group_id, member.member_id, error,
                              member.assignment if error == ErrorCode.NONE else b""))


def _renew(member: Member, request: JoinRequest) -> None:
    """Each JoinGroup restates the member's protocols and timeouts; the latest ones hold."""
    member.protocols = list(request.protocols)
    member.session_timeout_ms, member.rebalance_timeout_ms = request.session_timeout_ms, request.rebalance_timeout_ms


def _arm_session(now: int, group: Group, member: Member, out: list[Effect]) -> None:
    out.append(ArmTimer(TimerKey(group.group_id, Timer.SESSION, member.member_id), now + member.session_timeout_ms))


def _rebalance_key(group: Group) -> TimerKey:
    return TimerKey(group.group_id, Timer.REBALANCE)


def _join_result(group: Group, member: Member) -> JoinResult:
    leader = group.leader_id == member.member_id
    return JoinResult(ErrorCode.NONE, member.member_id, group.generation, group.protocol_type, group.protocol,
                      group.leader_id or "", _member_list(group) if leader else [])


def _member_list(group: Group) -> list[tuple[str, str | None, bytes]]:
    return [(m.member_id, m.group_instance_id, m.metadata(group.protocol)) for m in group.members.values()]
