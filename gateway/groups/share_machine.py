"""Share groups' membership (KIP-932) as a machine that does no I/O, beside the classic and
consumer ones.

ShareGroupHeartbeat does everything: a member joins with epoch 0 and the member id it
generated itself, states its subscription, leaves with epoch -1, and is answered with
its member epoch and, when it changed, the partitions it reads now. Kafka's rules:

- The group epoch moves when a member joins or leaves, a subscription changes, or a
  subscribed topic gains partitions; the target assignment is then recomputed by the
  simple assignor (``share_assignor``) and each member takes its target on its next
  heartbeat, as nothing has to be revoked first.
- A member whose heartbeats stop for ``group.share.session.timeout.ms`` (or the group's
  ``share.session.timeout.ms``) is removed; an epoch it cannot have is FENCED_MEMBER_EPOCH
  (its previous epoch is accepted: the answer that moved it may have been lost).
- A group id belongs to one kind of group: a heartbeat for an id that a classic or
  consumer group holds is GROUP_ID_NOT_FOUND, as Kafka answers, and the other protocols
  refuse a share group's id (JoinGroup INCONSISTENT_GROUP_PROTOCOL, ConsumerGroupHeartbeat
  GROUP_ID_NOT_FOUND: see ``machine`` and ``consumer_machine``).

Changes are returned as ``StoreConsumer`` effects holding Kafka's share group records.
"""
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from . import share_assignor
from .effects import ArmTimer, CancelTimer, Effect, Log, ShareMemberGone, Step, StoreConsumer, Timer, TimerKey
from .group import Group
from .modern_rules import bump_epoch
from .share_group import Partitions, ShareGroup, ShareMember

LEAVE_EPOCH = -1
MAX_MEMBER_ID_LENGTH = 36  # a UUID's text, which the clients generate


@dataclass(slots=True)
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed: list[str] | None  # None: unchanged


@dataclass(slots=True)
class ShareHeartbeatReply:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    assignment: Partitions | None = None  # None: unchanged


class ShareGroupMachine:
    def __init__(self, groups: dict[str, Group], *, session_ms: int, max_size: int,
                 session_of: Callable[[str], int | None] = lambda _group_id: None):
        self.groups = groups  # one namespace of group ids with the other machines
        self.session_ms = session_ms
        self.session_of = session_of
        self.max_size = max_size

    def _session(self, group_id: str) -> int:
        return self.session_of(group_id) or self.session_ms

    def heartbeat(self, now: int, request: ShareHeartbeat, topics: Mapping[str, tuple[uuid.UUID, int]]) \
            -> Step[ShareHeartbeatReply]:
        """``topics``: the cluster's topics as name -> (topic id, partition count)."""
        out: list[Effect] = []
        return Step(self._heartbeat(now, request, topics, out), out)

    def _heartbeat(self, now: int, request: ShareHeartbeat, topics: Mapping[str, tuple[uuid.UUID, int]],
                   out: list[Effect]) -> ShareHeartbeatReply:
        invalid = _invalid(request)
        if invalid is not None:
            return ShareHeartbeatReply(ErrorCode.INVALID_REQUEST, invalid)
        group = self.groups.get(request.group_id)
        if group is not None and group.share is None:
            return ShareHeartbeatReply(ErrorCode.GROUP_ID_NOT_FOUND, f"group {request.group_id} is not a share group")
        share = group.share if group is not None else None
        member = share.members.get(request.member_id) if share is not None else None
        if request.member_epoch == LEAVE_EPOCH:
            if share is None or member is None:
                return _unknown(request)
            self._remove(share, request.member_id, "left", topics, out)
            return ShareHeartbeatReply(ErrorCode.NONE, None, request.member_id, LEAVE_EPOCH)
        if request.member_epoch > 0:
            if member is None:
                return _unknown(request)
            if request.member_epoch not in (member.epoch, member.previous_epoch):
                return ShareHeartbeatReply(ErrorCode.FENCED_MEMBER_EPOCH,
                                           f"epoch {request.member_epoch} is not the member's epoch {member.epoch}")
        elif member is None:
            if share is not None and len(share.members) >= self.max_size:
                return ShareHeartbeatReply(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                           f"share group {request.group_id} has {self.max_size} members")
            share = self._share_group(group, request.group_id)
            member = share.members[request.member_id] = ShareMember(request.member_id)
        assert share is not None
        return self._beat(now, share, member, request, topics, out)

    def _share_group(self, group: Group | None, group_id: str) -> ShareGroup:
        if group is None:
            group = self.groups[group_id] = Group(group_id)
        if group.share is None:
            group.share, group.protocol_type = ShareGroup(group_id), "share"
        return group.share

    def _beat(self, now: int, share: ShareGroup, member: ShareMember, request: ShareHeartbeat,
              topics: Mapping[str, tuple[uuid.UUID, int]], out: list[Effect]) -> ShareHeartbeatReply:
        stored: list[tuple[bytes, bytes | None]] = []
        joined = request.member_epoch == 0
        before = (member.client_id, member.client_host, member.rack_id, list(member.subscribed))
        member.client_id, member.client_host = request.client_id, request.client_host
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.subscribed is not None:
            member.subscribed = list(request.subscribed)
        if before != (member.client_id, member.client_host, member.rack_id, member.subscribed) or joined:
            stored.append(member.metadata_record(share.group_id))
        counts = _subscribed(share, topics)
        if joined and member.epoch == 0 or before[3] != member.subscribed or counts != share.topic_partitions:
            share.topic_partitions = counts
            bump_epoch(share, f"member {member.member_id} joined or changed its subscription", stored, out)
            self._assign(share, topics, stored)
        target = share.target.get(member.member_id, {})
        changed = member.epoch != share.assignment_epoch or member.assigned != target
        if changed:
            if member.epoch != share.assignment_epoch:
                member.previous_epoch, member.epoch = member.epoch, share.assignment_epoch
            member.assigned = {topic: set(parts) for topic, parts in target.items()}
            stored.append(member.assignment_record(share.group_id))
        out.append(ArmTimer(_session_key(share.group_id, member.member_id), now + self._session(share.group_id)))
        if stored:
            out.append(StoreConsumer(share.group_id, stored))
        assignment = member.assigned if changed or joined else None
        return ShareHeartbeatReply(ErrorCode.NONE, None, member.member_id, member.epoch, assignment)


    def _assign(self, share: ShareGroup, topics: Mapping[str, tuple[uuid.UUID, int]], stored: list) -> None:
        subscriptions = {member_id: [topics[name][0] for name in member.subscribed if name in topics]
                         for member_id, member in share.members.items()}
        counts = {topic_id: count for topic_id, count in topics.values()}
        current = {member_id: member.assigned for member_id, member in share.members.items()}
        target = share_assignor.assign(subscriptions, counts, current)
        for member_id, partitions in target.items():
            partitions = {topic: parts for topic, parts in partitions.items() if parts}
            if share.target.get(member_id) != partitions:
                share.target[member_id] = partitions
                stored.append(share.target_record(member_id))
        share.assignment_epoch = share.epoch
        stored.append(share.assignment_epoch_record())

    def _remove(self, share: ShareGroup, member_id: str, reason: str,
                topics: Mapping[str, tuple[uuid.UUID, int]], out: list[Effect]) -> None:
        del share.members[member_id]
        share.target.pop(member_id, None)
        out.append(CancelTimer(_session_key(share.group_id, member_id)))
        stored: list[tuple[bytes, bytes | None]] = list(share.member_tombstones(member_id))
        share.topic_partitions = _subscribed(share, topics)
        bump_epoch(share, f"member {member_id} {reason}", stored, out)
        self._assign(share, topics, stored)
        out.append(StoreConsumer(share.group_id, stored))
        out.append(ShareMemberGone(share.group_id, member_id))

    def timer_fired(self, now: int, key: TimerKey, topics: Mapping[str, tuple[uuid.UUID, int]]) -> list[Effect]:
        out: list[Effect] = []
        group = self.groups.get(key.group_id)
        share = group.share if group is not None else None
        if share is None or key.member_id not in share.members:
            return out
        out.append(Log(logging.INFO, "share group %s: member %s session expired", (key.group_id, key.member_id)))
        self._remove(share, key.member_id, "session expired", topics, out)
        return out

    def prepare_offsets_alter(self, group_id: str) -> Step[None]:
        """AlterShareGroupOffsets: Kafka makes an empty share group of an id no group has (its
        offsets are then set), and otherwise wants an empty share group."""
        if group_id in self.groups:
            self.check_offsets_alterable(group_id)
            return Step(None, [])
        share = self._share_group(None, group_id)
        return Step(None, [StoreConsumer(group_id, [share.epoch_record()]),
                           Log(logging.INFO, "share group %s: made to alter its offsets", (group_id,))])

    def check_offsets_alterable(self, group_id: str) -> None:
        """Kafka's check before AlterShareGroupOffsets or DeleteShareGroupOffsets touch a group's
        share-partitions: it must be a share group (GROUP_ID_NOT_FOUND for a missing one or one of
        another type) and empty (NON_EMPTY_GROUP), as its members would be reading them."""
        group = self.groups.get(group_id)
        if group is None:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if group.share is None:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if group.share.members:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")

    def restore(self, now: int, group: Group) -> list[Effect]:
        """After replay: every member must heartbeat within a session from now."""
        if group.share is None:
            return []
        return [ArmTimer(_session_key(group.group_id, member_id), now + self._session(group.group_id))
                for member_id in group.share.members]


def _unknown(request: ShareHeartbeat) -> ShareHeartbeatReply:
    return ShareHeartbeatReply(ErrorCode.UNKNOWN_MEMBER_ID, f"member {request.member_id} is not in the group")


def _invalid(request: ShareHeartbeat) -> str | None:
    """Kafka's checks of a ShareGroupHeartbeat before the group is looked at."""
    if not request.group_id:
        return "GroupId can't be empty."
    if not request.member_id:
        return "MemberId can't be empty."
    if len(request.member_id) > MAX_MEMBER_ID_LENGTH:
        return f"MemberId can't be longer than {MAX_MEMBER_ID_LENGTH} characters."
    if request.member_epoch < LEAVE_EPOCH:
        return f"MemberEpoch is {request.member_epoch}, but must be greater than or equal to -1."
    if request.member_epoch == 0 and not request.subscribed:
        return "SubscribedTopicNames must be set in first request."
    return None


def _subscribed(share: ShareGroup, topics: Mapping[str, tuple[uuid.UUID, int]]) -> dict[uuid.UUID, int]:
    return {topics[name][0]: topics[name][1] for name in share.subscribed_topics() if name in topics}


def _session_key(group_id: str, member_id: str) -> TimerKey:
    return TimerKey(group_id, Timer.SHARE_SESSION, member_id)
