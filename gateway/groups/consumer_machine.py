"""KIP-848's consumer group protocol as a machine that does no I/O, beside the classic one.

One request, ConsumerGroupHeartbeat, does everything: a member joins (epoch 0), states
its subscription, reports the partitions it owns, and is answered with its member
epoch and, when it changed, the partitions it may use now. The rules, Kafka's:

- The group epoch is bumped when a member joins or leaves, a subscription or the
  assignor changes, or a subscribed topic changes; the target assignment is then
  recomputed by the server-side assignor (``uniform`` or ``range``: the one most
  members ask for by ``group.remote.assignor``, else the first of the broker's
  ``group.consumer.assignors``).
- Each member moves towards its target one member epoch at a time. A partition it must
  give up is withheld from its assignment and it stays at its epoch until it stops
  reporting the partition (or its rebalance timeout fences it); a partition still held
  by another member is not given until that one released it. So no partition ever has
  two owners.
- A member whose heartbeats stop for ``group.consumer.session.timeout.ms`` is removed,
  and so is one that sends an epoch it cannot have (FENCED_MEMBER_EPOCH).
- Static members (a ``group.instance.id``): one that leaves with epoch -2 keeps its
  partitions, unassigned to anyone else, until its session expires; a member joining
  with the same instance id (and a new member id) within that time replaces it and gets
  its assignment back without the group epoch moving, so no other member is disturbed.
  An instance id still held by a live member is UNRELEASED_INSTANCE_ID; a heartbeat of
  the replaced member id is FENCED_INSTANCE_ID.
- A subscription may be a regular expression (SubscribedTopicRegex): it is resolved
  against the cluster's topics at every heartbeat, so a new matching topic moves the
  group epoch and is assigned like any subscribed topic.

A group id is either a classic group or a consumer group. An empty classic group
becomes a consumer group when a member joins (its committed offsets stay); one with
members is upgraded online by ``classic_members`` (here it is GROUP_ID_NOT_FOUND). The
classic machine turns an empty consumer group back into a classic one on JoinGroup.

Changes are returned as ``StoreConsumer`` effects holding Kafka's records, so the
group replays after a coordinator move with its epochs and target assignment.
"""
import dataclasses
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from kgate.protocol.error_codes import ErrorCode

from .assignors import ASSIGNORS
from .consumer_group import ClassicMetadata, ConsumerGroup, ConsumerMember, MemberState, Partitions
from .effects import ArmTimer, CancelTimer, Effect, Log, Step, StoreConsumer, Timer, TimerKey
from .group import Group
from .modern_group import CommittedPartition
from .modern_rules import bump_epoch, restate_client, take_over
from .records import group_key
from .subscription_regex import InvalidRegex, compile_regex

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


@dataclass(slots=True)
class Heartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed: list[str] | None  # None: unchanged
    regex: str | None  # None: unchanged; "": no regular expression any more
    server_assignor: str | None
    owned: Partitions | None  # None: unchanged


@dataclass(slots=True)
class HeartbeatReply:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    assignment: Partitions | None = None


class ConsumerGroupMachine:
    def __init__(self, groups: dict[str, Group], *, session_ms: int, heartbeat_ms: int, assignors: list[str],
                 max_size: int, new_member_id: Callable[[], str], internal: Callable[[str], bool] = lambda _: False,
                 session_of: Callable[[str], int | None] = lambda _group_id: None):
        """``session_of``: a group's own session timeout (its consumer.session.timeout.ms), or None."""
        self.groups = groups  # shared with the classic machine: one namespace of group ids
        self.internal = internal  # topics a regular expression never matches
        self.session_ms = session_ms
        self.session_of = session_of
        self.heartbeat_ms = heartbeat_ms
        self.assignors = assignors
        self.max_size = max_size
        self.new_member_id = new_member_id

    def _session(self, group_id: str) -> int:
        return self.session_of(group_id) or self.session_ms

    def _member_session(self, consumer: ConsumerGroup, member: ConsumerMember) -> int:
        """A classic member's own session timeout, else the group's."""
        return member.classic.session_timeout_ms if member.classic is not None else self._session(consumer.group_id)

    def heartbeat(self, now: int, request: Heartbeat, topics: Mapping[str, tuple[uuid.UUID, int]]) \
            -> Step[HeartbeatReply]:
        """``topics``: the cluster's topics as name -> (topic id, partition count)."""
        out: list[Effect] = []
        return Step(self._heartbeat(now, request, topics, out), out)

    def _heartbeat(self, now: int, request: Heartbeat, topics: Mapping[str, tuple[uuid.UUID, int]],
                   out: list[Effect]) -> HeartbeatReply:
        if request.regex:
            try:
                compile_regex(request.regex)
            except InvalidRegex as exc:
                return HeartbeatReply(ErrorCode.INVALID_REGULAR_EXPRESSION, f"{request.regex!r}: {exc}")
        if request.server_assignor is not None and request.server_assignor not in ASSIGNORS:
            return HeartbeatReply(ErrorCode.UNSUPPORTED_ASSIGNOR, f"unknown assignor {request.server_assignor}")
        if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(now, request, topics, out)
        group = self.groups.get(request.group_id)
        found = (self._joining(now, request, group, topics, out) if request.member_epoch == 0
                 else _known(request, group))
        if isinstance(found, HeartbeatReply):
            return found
        consumer, member, joined, replaced = found
        return self._beat(now, consumer, member, request, topics, joined, out, replaced)

    def _joining(self, now: int, request: Heartbeat, group, topics: Mapping[str, tuple[uuid.UUID, int]],
                 out: list[Effect]) -> "HeartbeatReply | tuple[ConsumerGroup, ConsumerMember, bool, bool]":
        """A member joining with epoch 0: (group, member, joined, replaced), or the refusal. A new
        member takes a slot, a known one starts again from epoch 0, and a static member whose
        instance left (epoch -2) is taken over by the one rejoining under its instance id."""
        if request.subscribed is None and not request.regex:
            return HeartbeatReply(ErrorCode.INVALID_REQUEST, "a joining member must give its subscription")
        consumer = self._consumer_group(now, group, request.group_id, topics, out)
        if consumer is None:
            return HeartbeatReply(ErrorCode.GROUP_ID_NOT_FOUND, f"group {request.group_id} is not a consumer group")
        member = consumer.members.get(request.member_id) if request.member_id else None
        static = consumer.static_member(request.instance_id) if request.instance_id is not None else None
        if static is not None and static is not member:
            if static.epoch != STATIC_LEAVE_EPOCH:
                return HeartbeatReply(ErrorCode.UNRELEASED_INSTANCE_ID,
                                      f"instance {request.instance_id} is held by member {static.member_id}")
            return consumer, self._replace(consumer, static, request.member_id or self.new_member_id(), out), \
                False, True
        if member is None:
            if len(consumer.members) >= self.max_size:
                return HeartbeatReply(ErrorCode.GROUP_MAX_SIZE_REACHED)
            member = ConsumerMember(request.member_id or self.new_member_id())
            consumer.members[member.member_id] = member
        else:
            # A member that rejoins has dropped its partitions: it starts again from epoch 0.
            member.assigned, member.pending_revocation, member.assignment_epochs = {}, {}, {}
            member.epoch, member.state = 0, MemberState.STABLE
        return consumer, member, True, False

    def _replace(self, consumer: ConsumerGroup, old: ConsumerMember, member_id: str, out: list[Effect]) \
            -> ConsumerMember:
        """A static member rejoining under a new member id takes over the one that left with
        epoch -2: its subscription, target and partitions, with nothing recomputed."""
        member = dataclasses.replace(old, member_id=member_id, subscribed=list(old.subscribed), epoch=0,
                                     previous_epoch=0, state=MemberState.STABLE, assigned=_copy(old.assigned),
                                     pending_revocation={}, assignment_epochs=dict(old.assignment_epochs))
        take_over(consumer, old, member, member_timers(consumer.group_id, old.member_id), out)
        return member

    def _consumer_group(self, now: int, group: Group | None, group_id: str,
                        topics: Mapping[str, tuple[uuid.UUID, int]], out: list[Effect]) -> ConsumerGroup | None:
        """The consumer group a member joins: a new one, or an empty classic group converted."""
        if group is None:
            group = self.groups[group_id] = Group(group_id)
        if group.consumer is None:
            if group.members or group.pending_members or group.share is not None or group.streams is not None:
                return None
            if group.generation > 0:
                # The classic group's record goes, so a replay finds only one kind of group.
                out.append(StoreConsumer(group_id, [(group_key(group_id), None)]))
                out.append(Log(logging.INFO, "group %s: empty classic group converted to a consumer group",
                               (group_id,)))
            group.generation, group.protocol, group.leader_id = 0, None, None
            group.protocol_type = "consumer"
            group.consumer = ConsumerGroup(group_id)
        return group.consumer

    def _beat(self, now: int, consumer: ConsumerGroup, member: ConsumerMember, request: Heartbeat,
              topics: Mapping[str, tuple[uuid.UUID, int]], joined: bool, out: list[Effect],
              replaced: bool = False, classic: ClassicMetadata | None = None) -> HeartbeatReply:
        """``classic``: a classic member's JoinGroup restates its session timeout and protocols."""
        stored: list[tuple[bytes, bytes | None]] = []
        before = (list(member.subscribed), member.regex, member.server_assignor)
        restate_client(member, request)
        if request.subscribed is not None:
            member.subscribed = sorted(set(request.subscribed))
        if request.regex is not None:
            member.regex = request.regex or None
        if request.server_assignor is not None:
            member.server_assignor = request.server_assignor
        metadata_changed = joined or before != (member.subscribed, member.regex, member.server_assignor)
        classic_changed = classic is not None and classic != member.classic
        if classic_changed:
            member.classic = classic
        if metadata_changed or replaced or classic_changed:
            stored.append(member.metadata_record(consumer.group_id))
        subscribed = self._subscribed(consumer, topics)
        if metadata_changed or subscribed != consumer.topic_partitions:
            consumer.topic_partitions = subscribed
            bump_epoch(consumer, f"member {member.member_id} {'joined' if joined else 'changed'}", stored, out)
        self._assign(consumer, topics, stored)
        previous = (member.epoch, _copy(member.assigned))
        self._reconcile(now, consumer, member, request.owned, stored, out)
        if stored:
            out.append(StoreConsumer(consumer.group_id, stored))
        out.append(ArmTimer(_session_key(consumer.group_id, member.member_id),
                            now + self._member_session(consumer, member)))
        changed = (member.epoch, member.assigned) != previous
        send = joined or replaced or changed or (request.owned is not None and request.owned != member.assigned)
        return HeartbeatReply(ErrorCode.NONE, None, member.member_id, member.epoch,
                              _copy(member.assigned) if send else None)

    def subscribed_topics(self, consumer: ConsumerGroup, topics: Collection[str]) -> set[str]:
        """The topics among ``topics`` the group subscribes to, by name or by regex (what
        OffsetDelete spares, as Kafka's isSubscribedToTopic)."""
        return consumer.subscribed_topics(topics, self._matchable(consumer, topics))

    def _subscribed(self, consumer: ConsumerGroup, topics: Mapping[str, tuple[uuid.UUID, int]]) -> dict[uuid.UUID, int]:
        """The partition count of each topic the group subscribes to, by topic id."""
        return {topics[name][0]: topics[name][1] for name in self.subscribed_topics(consumer, topics)}

    def _matchable(self, consumer: ConsumerGroup, topics: Collection[str]) -> frozenset[str]:
        """The topics a member's regular expression may match: all but the internal ones."""
        if not consumer.has_regex():
            return frozenset()
        return frozenset(name for name in topics if not self.internal(name))


    def _assign(self, consumer: ConsumerGroup, topics: Mapping[str, tuple[uuid.UUID, int]], stored: list) -> None:
        """Recompute the target assignment when the group epoch moved past it."""
        if consumer.assignment_epoch >= consumer.epoch:
            return
        consumer.assignor = self._assignor(consumer)
        ids = {name: topic_id for name, (topic_id, _) in topics.items()}
        matchable = self._matchable(consumer, ids)
        subscriptions = {m.member_id: {ids[name] for name in m.subscription(ids, matchable)}
                         for m in consumer.members.values()}
        counts = {topic_id: count for topic_id, count in topics.values()}
        target = ASSIGNORS[consumer.assignor](subscriptions, counts, consumer.target)
        for member_id, partitions in target.items():
            if consumer.target.get(member_id) != partitions:
                consumer.target[member_id] = partitions
                stored.append(consumer.target_record(member_id))
        consumer.assignment_epoch = consumer.epoch
        stored.append(consumer.assignment_epoch_record())

    def _assignor(self, consumer: ConsumerGroup) -> str:
        """The assignor most members ask for (ties: the broker's order), else the broker's first."""
        asked = Counter(m.server_assignor for m in consumer.members.values() if m.server_assignor)
        if not asked:
            return self.assignors[0]
        order = self.assignors + sorted(asked)
        return max(asked, key=lambda name: (asked[name], -order.index(name)))

    def _reconcile(self, now: int, consumer: ConsumerGroup, member: ConsumerMember, owned: Partitions | None,
                   stored: list, out: list[Effect]) -> None:
        """Move the member towards its target: revoke first, then assign what others released."""
        before = (member.epoch, member.previous_epoch, member.state, _copy(member.assigned),
                  _copy(member.pending_revocation))
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if owned is None or _overlaps(owned, member.pending_revocation):
                return  # still owns what it must give up
            self._next(consumer, member, member.epoch + 1)
        elif member.state is MemberState.UNRELEASED_PARTITIONS or member.epoch != consumer.assignment_epoch:
            self._next(consumer, member, member.epoch)
        after = (member.epoch, member.previous_epoch, member.state, member.assigned, member.pending_revocation)
        if after != before:
            stored.append(member.assignment_record(consumer.group_id))
            key = _revocation_key(consumer.group_id, member.member_id)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                timeout = (member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0
                           else self._session(consumer.group_id))
                out.append(ArmTimer(key, now + timeout))
            else:
                out.append(CancelTimer(key))

    def _next(self, consumer: ConsumerGroup, member: ConsumerMember, epoch: int) -> None:
        target = consumer.target.get(member.member_id, {})
        held = consumer.owners()
        before = member.held_epochs()
        keep: Partitions = {}
        revoke: Partitions = {}
        gain: Partitions = {}
        unreleased = False
        for topic_id in set(target) | set(member.assigned):
            wanted, mine = target.get(topic_id, set()), member.assigned.get(topic_id, set())
            if mine & wanted:
                keep[topic_id] = mine & wanted
            if mine - wanted:
                revoke[topic_id] = mine - wanted
            free = {p for p in wanted - mine if held.get((topic_id, p), member.member_id) == member.member_id}
            unreleased = unreleased or len(free) < len(wanted - mine)
            if free:
                gain[topic_id] = free
        if revoke:
            member.state, member.assigned, member.pending_revocation = MemberState.UNREVOKED_PARTITIONS, keep, revoke
            _set_epoch(member, epoch)
        else:
            for topic_id, parts in gain.items():
                keep.setdefault(topic_id, set()).update(parts)
            member.assigned, member.pending_revocation = keep, {}
            member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
            _set_epoch(member, consumer.assignment_epoch)
        member.stamp(before)

    # -- leaving ----------------------------------------------------------------------------

    def _leave(self, now: int, request: Heartbeat, topics: Mapping[str, tuple[uuid.UUID, int]],
               out: list[Effect]) -> HeartbeatReply:
        group = self.groups.get(request.group_id)
        consumer = group.consumer if group is not None else None
        if consumer is None or request.member_id not in consumer.members:
            return HeartbeatReply(ErrorCode.UNKNOWN_MEMBER_ID, None, request.member_id, request.member_epoch)
        if request.member_epoch == STATIC_LEAVE_EPOCH:
            member = consumer.members[request.member_id]
            if request.instance_id is None or member.instance_id != request.instance_id:
                return HeartbeatReply(ErrorCode.INVALID_REQUEST, "a member leaving with epoch -2 must give its "
                                                                 "instance id")
            # It keeps its partitions, held from the others, until it rejoins or its session expires.
            member.previous_epoch, member.epoch = member.epoch, STATIC_LEAVE_EPOCH
            member.state, member.pending_revocation = MemberState.STABLE, {}
            out.append(CancelTimer(_revocation_key(consumer.group_id, member.member_id)))
            out.append(StoreConsumer(consumer.group_id, [member.assignment_record(consumer.group_id)]))
            out.append(Log(logging.INFO, "consumer group %s: static member %s (%s) left for now",
                           (consumer.group_id, member.instance_id, member.member_id)))
        else:
            self._remove(now, consumer, request.member_id, "left", topics, out)
        return HeartbeatReply(ErrorCode.NONE, None, request.member_id, request.member_epoch)

    def _remove(self, now: int, consumer: ConsumerGroup, member_id: str, reason: str,
                topics: Mapping[str, tuple[uuid.UUID, int]], out: list[Effect]) -> None:
        del consumer.members[member_id]
        consumer.target.pop(member_id, None)
        out += [CancelTimer(key) for key in member_timers(consumer.group_id, member_id)]
        stored: list[tuple[bytes, bytes | None]] = list(consumer.member_tombstones(member_id))
        consumer.topic_partitions = self._subscribed(consumer, topics)
        bump_epoch(consumer, f"member {member_id} {reason}", stored, out)
        self._assign(consumer, topics, stored)
        out.append(StoreConsumer(consumer.group_id, stored))

    def timer_fired(self, now: int, key: TimerKey, topics: Mapping[str, tuple[uuid.UUID, int]]) -> list[Effect]:
        out: list[Effect] = []
        group = self.groups.get(key.group_id)
        consumer = group.consumer if group is not None else None
        if consumer is None or key.member_id not in consumer.members:
            return out
        reason = _EXPIRED[key.kind]
        out.append(Log(logging.INFO, "consumer group %s: member %s %s", (key.group_id, key.member_id, reason)))
        self._remove(now, consumer, key.member_id, reason, topics, out)
        return out

    def restore(self, now: int, group: Group) -> list[Effect]:
        """After replay: every member must heartbeat within a session from now."""
        consumer = group.consumer
        if consumer is None:
            return []
        return [ArmTimer(_session_key(group.group_id, member.member_id), now + self._member_session(consumer, member))
                for member in consumer.members.values()]

    # -- offsets ------------------------------------------------------------------------------

    @staticmethod
    def check_commit(consumer: ConsumerGroup, member_epoch: int, member_id: str,
                     partitions: Collection[CommittedPartition] = ()) -> ErrorCode:
        """OffsetCommit against a consumer group: the member's current epoch, or a commit with
        no member to an empty group (what admin tools send). A classic member's generation is
        its epoch, and a wrong one is ILLEGAL_GENERATION, as its protocol knows it.

        An older epoch commits ``partitions`` the member was assigned at or before that epoch
        and still holds (Kafka 4.4, KIP-1251): a member that read a partition and commits it
        just after its epoch moved on (a partition added, another one's member gone) is not
        refused for a change that did not touch what it commits."""
        if member_epoch < 0 and not member_id and not consumer.members:
            return ErrorCode.NONE
        member = consumer.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        stale = ErrorCode.STALE_MEMBER_EPOCH if member.classic is None else ErrorCode.ILLEGAL_GENERATION
        if member_epoch == member.epoch:
            return ErrorCode.NONE
        if member_epoch > member.epoch:
            return stale
        for _topic, topic_id, partition in partitions:
            since = member.assigned_since(topic_id, partition)
            if since is None or member_epoch < since:
                return stale
        return ErrorCode.NONE


def _known(request: Heartbeat, group) -> "HeartbeatReply | tuple[ConsumerGroup, ConsumerMember, bool, bool]":
    """A member of the group heartbeating at its epoch: (group, member, False, False), or the refusal."""
    if group is None or group.consumer is None:
        error = ErrorCode.UNKNOWN_MEMBER_ID if group is None else ErrorCode.GROUP_ID_NOT_FOUND
        return HeartbeatReply(error, None, request.member_id, -1)
    consumer = group.consumer
    member = consumer.members.get(request.member_id)
    if request.instance_id is not None:
        static = consumer.static_member(request.instance_id)
        if static is not None and static is not member:
            return HeartbeatReply(ErrorCode.FENCED_INSTANCE_ID,
                                  f"instance {request.instance_id} is now member {static.member_id}")
    if member is None:
        return HeartbeatReply(ErrorCode.UNKNOWN_MEMBER_ID, f"member {request.member_id} is not in the group")
    if not _epoch_allowed(member, request):
        return HeartbeatReply(ErrorCode.FENCED_MEMBER_EPOCH,
                              f"epoch {request.member_epoch} is not the member's epoch {member.epoch}")
    return consumer, member, False, False


def _epoch_allowed(member: ConsumerMember, request: Heartbeat) -> bool:
    """Kafka's rule: the member's epoch, or its previous one when the answer that moved it
    was lost, provided it owns nothing beyond its assignment."""
    if request.member_epoch == member.epoch:
        return True
    if request.member_epoch == member.previous_epoch and request.member_epoch < member.epoch:
        return request.owned is not None and all(parts <= member.assigned.get(topic_id, set())
                                                 for topic_id, parts in request.owned.items())
    return False


def _set_epoch(member: ConsumerMember, epoch: int) -> None:
    if epoch != member.epoch:
        member.previous_epoch, member.epoch = member.epoch, epoch


def _overlaps(owned: Partitions, revoking: Partitions) -> bool:
    return any(owned.get(topic_id, set()) & parts for topic_id, parts in revoking.items())


def _copy(partitions: Partitions) -> Partitions:
    return {topic_id: set(parts) for topic_id, parts in partitions.items() if parts}


def _session_key(group_id: str, member_id: str) -> TimerKey:
    return TimerKey(group_id, Timer.MEMBER_SESSION, member_id)


def _revocation_key(group_id: str, member_id: str) -> TimerKey:
    return TimerKey(group_id, Timer.REVOCATION, member_id)


# What a member's timer firing means; each removes it from the group.
_EXPIRED = {Timer.MEMBER_SESSION: "session expired", Timer.REVOCATION: "did not revoke in time (fenced)",
            Timer.CLASSIC_JOIN: "did not rejoin in time", Timer.CLASSIC_SYNC: "did not sync in time"}
MEMBER_TIMER_KINDS = frozenset(_EXPIRED)  # the timers this machine's timer_fired takes


def member_timers(group_id: str, member_id: str) -> list[TimerKey]:
    """Every timer a consumer group's member may have armed."""
    return [TimerKey(group_id, kind, member_id) for kind in _EXPIRED]
