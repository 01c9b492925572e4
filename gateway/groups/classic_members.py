"""Classic members in a consumer group: KIP-848's online upgrade, as Kafka 4.4 does it.

A team moves its consumers from ``group.protocol=classic`` to ``consumer`` one at a
time. The first upgraded consumer's ConsumerGroupHeartbeat (epoch 0) finds a classic
group with members; if ``group.consumer.migration.policy`` allows the upgrade, the
group uses the consumer embedded protocol and it is not above the consumer group size
limit, the group is converted on the spot:

- every classic member becomes a consumer-group member with its subscription and
  assignment read from the ConsumerProtocol bytes of the group's protocol, its member
  epoch the generation, and its session timeout and JoinGroup protocols kept;
- group epoch = assignment epoch = generation, each member's target its assignment;
- the classic record is tombstoned and the consumer group's records written (the
  member records carry the classic metadata, so a replay keeps it);
- a JoinGroup or SyncGroup waiting on a rebalance is answered REBALANCE_IN_PROGRESS,
  and each member's session runs with its classic session timeout.

The joining member then proceeds as any: the epoch moves, the target is recomputed,
and the classic members give up partitions before anyone else gets them.

Classic members keep speaking their protocol, answered from the consumer group's
server-side assignment: JoinGroup reconciles the member (its owned partitions come
with its subscription) and is answered at once, with the member epoch as generation
and no leader duties; SyncGroup hands over its assigned partitions; Heartbeat tells
it to rejoin (REBALANCE_IN_PROGRESS) when the group epoch moved past it, when it must
give up partitions, or when partitions it waits for were released; LeaveGroup removes
it. A member told to rejoin must do so within its rebalance timeout, and a joined one
must send SyncGroup within it, or it is removed (Kafka's join and sync timeouts).

The way back (Kafka's ``bidirectional`` policy, its default): when the last member
speaking the consumer protocol leaves (epoch -1) or is fenced (its session, revocation,
join or sync deadline) and classic members remain, no more than ``group.max.size``,
the group becomes a classic group again: its consumer records are tombstoned, a
classic record holds the remaining members with their target assignments as
ConsumerProtocol bytes, at generation = group epoch, and the group prepares a
rebalance, so the classic members rejoin through the classic protocol. A classic
member's own LeaveGroup does not turn the group back, as in Kafka.

Not built: Kafka's downgrade when a static classic member replaces the last
consumer-protocol one in JoinGroup; that group stays a consumer group until its next
member is fenced.
"""
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from kgate.protocol.error_codes import ErrorCode

from . import consumer_protocol
from .consumer_group import ClassicMetadata, ConsumerGroup, ConsumerMember, MemberState
from .consumer_machine import ConsumerGroupMachine, Heartbeat, member_timers
from .consumer_protocol import MalformedProtocol
from .effects import (
    AnswerJoin,
    AnswerSync,
    ArmTimer,
    CancelTimer,
    Effect,
    JoinResult,
    Log,
    Step,
    StoreConsumer,
    StoreGroup,
    Timer,
    TimerKey,
)
from .group import Group, GroupState, Member
from .records import group_key

if TYPE_CHECKING:
    from .machine import JoinRequest

Topics = Mapping[str, tuple[uuid.UUID, int]]
PROTOCOL_TYPE = "consumer"
# group.consumer.migration.policy: whether it allows the upgrade, and the downgrade.
MIGRATION_POLICIES = {"bidirectional": (True, True), "upgrade": (True, False), "downgrade": (False, True),
                      "disabled": (False, False)}


class ClassicMemberMachine(ConsumerGroupMachine):
    """The consumer-group rules, with the classic protocol's requests of a consumer group's members."""

    def __init__(self, groups: dict[str, Group], *, topics: Callable[[], Topics], classic_max_size: int,
                 policy: str = "bidirectional", **settings):
        """``topics``: the cluster's topics now; ``classic_max_size``: group.max.size; ``policy``: one of
        MIGRATION_POLICIES (Kafka's group.consumer.migration.policy)."""
        super().__init__(groups, **settings)
        self.topics = topics
        self.classic_max_size = classic_max_size
        self.upgrade, self.downgrade = MIGRATION_POLICIES[policy]

    def serves(self, group_id: str) -> bool:
        """Whether the group's classic requests are this machine's: a consumer group with members."""
        group = self.groups.get(group_id)
        return group is not None and group.consumer is not None and bool(group.consumer.members)

    # -- the upgrade ---------------------------------------------------------------------------

    def _consumer_group(self, now: int, group: Group | None, group_id: str, topics: Topics,
                        out: list[Effect]) -> ConsumerGroup | None:
        if group is not None and group.consumer is None and group.share is None and group.streams is None \
                and group.members:
            return self._upgrade(now, group, topics, out)
        return super()._consumer_group(now, group, group_id, topics, out)

    def _upgrade(self, now: int, group: Group, topics: Topics, out: list[Effect]) -> ConsumerGroup | None:
        refusal = self._refusal(group)
        if refusal is None:
            try:
                consumer = _from_classic(group, topics)
            except MalformedProtocol as exc:
                refusal = f"its embedded consumer protocol is malformed ({exc})"
        if refusal is not None:
            out.append(Log(logging.INFO, "group %s stays a classic group: %s", (group.group_id, refusal)))
            return None
        for member in group.members.values():
            if member.awaiting_join:
                out.append(AnswerJoin(group.group_id, member.member_id,
                                      JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id)))
            if member.awaiting_sync:
                out.append(AnswerSync(group.group_id, member.member_id, ErrorCode.REBALANCE_IN_PROGRESS))
        out += [CancelTimer(key) for key in _classic_timers(group)]
        out.append(StoreConsumer(group.group_id, [(group_key(group.group_id), None), *consumer.snapshot()]))
        out += [ArmTimer(TimerKey(group.group_id, Timer.MEMBER_SESSION, member.member_id),
                         now + self._member_session(consumer, member)) for member in consumer.members.values()]
        out.append(Log(logging.INFO, "group %s: classic group of %d members upgraded to a consumer group at epoch %d",
                       (group.group_id, len(consumer.members), consumer.epoch)))
        group.members.clear()
        group.static_members.clear()
        group.pending_members.clear()
        group.pending_sync.clear()
        group.generation, group.protocol, group.leader_id, group.protocol_type = 0, None, None, PROTOCOL_TYPE
        group.state, group.in_initial_delay, group.stored = GroupState.EMPTY, False, False
        group.consumer = consumer
        return consumer

    def _refusal(self, group: Group) -> str | None:
        """Why the classic group cannot be upgraded (Kafka's conditions), or None."""
        if not self.upgrade:
            return "the online upgrade is disabled (group.consumer.migration.policy)"
        if group.protocol_type != PROTOCOL_TYPE:
            return f"its protocol type is {group.protocol_type!r}, not the consumer embedded protocol"
        if len(group.members) > self.max_size:
            return "it has more members than group.consumer.max.size"
        if group.protocol is None:
            return "it has not chosen a protocol yet"
        return None

    # -- the downgrade ---------------------------------------------------------------------------

    def _remove(self, now: int, consumer: ConsumerGroup, member_id: str, reason: str, topics: Topics,
                out: list[Effect]) -> None:
        """A member leaving (epoch -1) or fenced: the group turns classic again if only classic members remain."""
        if self._downgradable(consumer, member_id):
            self._downgrade(now, consumer, member_id, reason, topics, out)
        else:
            super()._remove(now, consumer, member_id, reason, topics, out)

    def _downgradable(self, consumer: ConsumerGroup, leaving: str) -> bool:
        """Kafka's conditions, and a protocol the remaining members have in common."""
        rest = [member for member in consumer.members.values() if member.member_id != leaving]
        if not self.downgrade or not rest or len(rest) > self.classic_max_size:
            return False
        if any(member.classic is None for member in rest):
            return False
        common = set.intersection(*({name for name, _ in member.classic.protocols} for member in rest
                                    if member.classic is not None))
        return bool(common)

    def _downgrade(self, now: int, consumer: ConsumerGroup, leaving: str, reason: str, topics: Topics,
                   out: list[Effect]) -> None:
        group = self.groups[consumer.group_id]
        out += [CancelTimer(key) for member_id in consumer.members for key in member_timers(group.group_id, member_id)]
        out.append(StoreConsumer(group.group_id, consumer.tombstones()))
        group.consumer, group.generation, group.protocol_type = None, consumer.epoch, PROTOCOL_TYPE
        for member in consumer.members.values():
            if member.member_id != leaving and member.classic is not None:
                group.add(Member(member.member_id, member.instance_id, member.client_id, member.client_host,
                                 member.rebalance_timeout_ms, member.classic.session_timeout_ms, PROTOCOL_TYPE,
                                 list(member.classic.protocols)))
        group.protocol = group.select_protocol()
        for classic in group.members.values():
            classic.assignment = consumer_protocol.encode_assignment(
                consumer.target.get(classic.member_id, {}), topics, classic.metadata(group.protocol))
            out.append(ArmTimer(TimerKey(group.group_id, Timer.SESSION, classic.member_id),
                                now + classic.session_timeout_ms))
        group.state = GroupState.STABLE
        out.append(StoreGroup(group.group_id, group.metadata_value()))
        group.transition(GroupState.PREPARING_REBALANCE, now)
        out.append(ArmTimer(TimerKey(group.group_id, Timer.REBALANCE), now + group.rebalance_timeout_ms))
        out.append(Log(logging.INFO, "consumer group %s: member %s %s; its %d classic members make it a classic "
                                     "group again, rebalancing at generation %d",
                       (group.group_id, leaving, reason, len(group.members), group.generation)))

    # -- the classic requests ----------------------------------------------------------------------

    def classic_join(self, now: int, request: "JoinRequest") -> Step[JoinResult]:
        """JoinGroup of a classic member (its session timeout already checked)."""
        out: list[Effect] = []
        return Step(self._classic_join(now, request, out), out)

    def _classic_join(self, now: int, request: "JoinRequest", out: list[Effect]) -> JoinResult:
        consumer = self._served(request.group_id)
        topics = self.topics()
        if request.protocol_type != PROTOCOL_TYPE or not _shares_protocol(consumer, request):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
        try:
            subscription = consumer_protocol.subscription(request.protocols[0][1], topics)
        except MalformedProtocol:
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
        found = self._joining_classic(consumer, request, out)
        if isinstance(found, JoinResult):
            return found
        member, joined, replaced = found
        self._beat(now, consumer, member, Heartbeat(
            request.group_id, member.member_id, member.epoch, request.client_id, request.client_host,
            request.group_instance_id, subscription.rack_id, request.rebalance_timeout_ms, subscription.topics,
            None, None, subscription.owned), topics, joined, out, replaced,
            ClassicMetadata(request.session_timeout_ms, tuple(request.protocols)))
        member.rejoin_due = False
        out.append(CancelTimer(_key(consumer, member, Timer.CLASSIC_JOIN)))
        out.append(ArmTimer(_key(consumer, member, Timer.CLASSIC_SYNC), now + request.rebalance_timeout_ms))
        assert member.classic is not None
        return JoinResult(ErrorCode.NONE, member.member_id, member.epoch, PROTOCOL_TYPE, member.classic.protocol, "")

    def _joining_classic(self, consumer: ConsumerGroup, request: "JoinRequest", out: list[Effect]) \
            -> JoinResult | tuple[ConsumerMember, bool, bool]:
        """The member a JoinGroup is for, (member, joined, replaced), or the refusal: a known
        classic member, a static one restarted under a new id, or a new one (after
        MEMBER_ID_REQUIRED when its client asks for a known id)."""
        member = consumer.members.get(request.member_id) if request.member_id else None
        instance = request.group_instance_id
        static = consumer.static_member(instance) if instance is not None else None
        if static is not None and static is not member:
            if request.member_id:
                return JoinResult(ErrorCode.FENCED_INSTANCE_ID, request.member_id)
            return self._replace(consumer, static, self.new_member_id(), out), False, True
        if member is not None:
            if member.classic is None:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id)
            return member, False, False
        if len(consumer.members) >= self.max_size:
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, request.member_id)
        if not request.member_id and request.require_known_member_id and instance is None:
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, self.new_member_id())
        member = ConsumerMember(request.member_id or self.new_member_id())
        consumer.members[member.member_id] = member
        return member, True, False

    def classic_sync(self, now: int, group_id: str, generation: int, member_id: str, instance_id: str | None,
                     protocol_type: str | None, protocol: str | None) -> Step[tuple[ErrorCode, bytes]]:
        """SyncGroup of a classic member: its assigned partitions, as its protocol version encodes them."""
        out: list[Effect] = []
        consumer = self._served(group_id)
        found = _classic_member(consumer, member_id, instance_id, generation)
        if isinstance(found, ErrorCode):
            return Step((found, b""), out)
        member = found
        assert member.classic is not None
        if ((protocol_type is not None and protocol_type != PROTOCOL_TYPE)
                or (protocol is not None and protocol != member.classic.protocol)):
            return Step((ErrorCode.INCONSISTENT_GROUP_PROTOCOL, b""), out)
        if consumer.epoch > member.epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            # A rebalance began since it joined: it must rejoin to catch up.
            self._rejoin(now, consumer, member, out)
            return Step((ErrorCode.REBALANCE_IN_PROGRESS, b""), out)
        out.append(CancelTimer(_key(consumer, member, Timer.CLASSIC_SYNC)))
        out.append(ArmTimer(_key(consumer, member, Timer.MEMBER_SESSION), now + member.classic.session_timeout_ms))
        return Step((ErrorCode.NONE, consumer_protocol.encode_assignment(
            member.assigned, self.topics(), member.classic.protocols[0][1])), out)

    def classic_heartbeat(self, now: int, group_id: str, generation: int, member_id: str,
                          instance_id: str | None) -> Step[ErrorCode]:
        """Heartbeat of a classic member: REBALANCE_IN_PROGRESS when it must rejoin, by Kafka's
        three conditions: the group epoch moved past it, it must give up partitions, or the
        partitions it waits for were released."""
        out: list[Effect] = []
        consumer = self._served(group_id)
        found = _classic_member(consumer, member_id, instance_id, generation)
        if isinstance(found, ErrorCode):
            return Step(found, out)
        member = found
        out.append(ArmTimer(_key(consumer, member, Timer.MEMBER_SESSION), now + self._member_session(consumer, member)))
        if (member.epoch < consumer.epoch or member.state is MemberState.UNREVOKED_PARTITIONS
                or (member.state is MemberState.UNRELEASED_PARTITIONS and not consumer.waits_for_others(member))):
            self._rejoin(now, consumer, member, out)
            return Step(ErrorCode.REBALANCE_IN_PROGRESS, out)
        return Step(ErrorCode.NONE, out)

    def classic_leave(self, now: int, group_id: str, leaving: list[tuple[str, str | None]]) \
            -> Step[list[ErrorCode]]:
        """LeaveGroup of classic members, by member id or instance id; each leaving moves the group epoch."""
        out: list[Effect] = []
        consumer = self._served(group_id)
        topics = self.topics()
        errors = []
        for member_id, instance_id in leaving:
            found = _leaving(consumer, member_id, instance_id)
            if isinstance(found, ErrorCode):
                errors.append(found)
                continue
            errors.append(ErrorCode.NONE)
            out.append(Log(logging.INFO, "consumer group %s: classic member %s left", (group_id, found.member_id)))
            super()._remove(now, consumer, found.member_id, "left (LeaveGroup)", topics, out)
        return Step(errors, out)

    def _served(self, group_id: str) -> ConsumerGroup:
        consumer = self.groups[group_id].consumer
        assert consumer is not None, "only a consumer group's classic requests come here (serves)"
        return consumer

    def _rejoin(self, now: int, consumer: ConsumerGroup, member: ConsumerMember, out: list[Effect]) -> None:
        """The member was told to rejoin: its deadline to do so starts, unless it runs already."""
        if not member.rejoin_due:
            member.rejoin_due = True
            out.append(ArmTimer(_key(consumer, member, Timer.CLASSIC_JOIN), now + member.rebalance_timeout_ms))


def _from_classic(group: Group, topics: Topics) -> ConsumerGroup:
    """The consumer group a classic group becomes: its members at their last assignment."""
    assert group.protocol is not None
    consumer = ConsumerGroup(group.group_id, epoch=group.generation, assignment_epoch=group.generation)
    for classic in group.members.values():
        subscription = consumer_protocol.subscription(classic.metadata(group.protocol), topics)
        assigned = consumer_protocol.assignment(classic.assignment, topics)
        consumer.members[classic.member_id] = ConsumerMember(
            classic.member_id, classic.client_id, classic.client_host, classic.group_instance_id,
            subscription.rack_id, classic.rebalance_timeout_ms, sorted(set(subscription.topics)),
            epoch=group.generation, previous_epoch=group.generation, assigned=assigned,
            classic=ClassicMetadata(classic.session_timeout_ms, tuple(classic.protocols)))
        consumer.target[classic.member_id] = {topic_id: set(parts) for topic_id, parts in assigned.items()}
    return consumer


def _classic_timers(group: Group) -> list[TimerKey]:
    """The classic group's timers, which the upgrade ends."""
    keys = [TimerKey(group.group_id, Timer.SESSION, member_id) for member_id in group.members]
    keys += [TimerKey(group.group_id, Timer.PENDING, member_id) for member_id in group.pending_members]
    return keys + [TimerKey(group.group_id, Timer.REBALANCE), TimerKey(group.group_id, Timer.SYNC)]


def _shares_protocol(consumer: ConsumerGroup, request: "JoinRequest") -> bool:
    """The joining member names a protocol every other classic member supports."""
    names = {name for name, _ in request.protocols}
    return bool(names) and all(names & {name for name, _ in member.classic.protocols}
                               for member in consumer.members.values()
                               if member.classic is not None and member.member_id != request.member_id)


def _classic_member(consumer: ConsumerGroup, member_id: str, instance_id: str | None,
                    generation: int) -> ConsumerMember | ErrorCode:
    """The classic member a SyncGroup or Heartbeat is for, at its generation, or the refusal."""
    if instance_id is not None:
        member = consumer.static_member(instance_id)
        if member is not None and member.member_id != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
    else:
        member = consumer.members.get(member_id)
    if member is None or member.classic is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation != member.epoch:
        return ErrorCode.ILLEGAL_GENERATION
    return member


def _leaving(consumer: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember | ErrorCode:
    """The classic member a LeaveGroup names (an instance id alone may name it: admin removal)."""
    if instance_id is None:
        member = consumer.members.get(member_id)
    else:
        member = consumer.static_member(instance_id)
        if member is not None and member_id and member.member_id != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
    if member is None or member.classic is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return member


def _key(consumer: ConsumerGroup, member: ConsumerMember, kind: Timer) -> TimerKey:
    return TimerKey(consumer.group_id, kind, member.member_id)
