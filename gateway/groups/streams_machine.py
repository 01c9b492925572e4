"""Streams groups' membership (KIP-1071) as a machine that does no I/O, beside the classic,
consumer and share ones.

StreamsGroupHeartbeat does everything: a member joins with epoch 0, the member id it
generated itself and the application's topology, reports the tasks it owns, leaves with
epoch -1 (a static member with -2), and is answered with its member epoch, the group's
status and, when they changed, the tasks it may run now. Kafka's rules:

- The first topology given is the group's; a member joining with a newer topology epoch
  replaces it, one with an older epoch is told STALE_TOPOLOGY. The topology is checked
  against the cluster (``streams_topology``): internal topics missing are handed back to
  be created and the group has no tasks until its topics are all there.
- The group epoch moves when a member joins or leaves, its process, rack or tags change,
  the topology changes, or a topic it uses changes size; the target assignment is then
  recomputed by the sticky assignor (``streams_assignor``), with the group's
  ``streams.num.standby.replicas`` standby tasks.
- Each member moves towards its target one member epoch at a time, as a consumer group's
  members do with partitions: tasks it must give up are withheld and it stays at its epoch
  until it stops reporting them (or its rebalance timeout fences it); an active task still
  held by another member is not given until that one released it.
- A member whose heartbeats stop for ``streams.session.timeout.ms`` is removed, and one that
  sends an epoch it cannot have is FENCED_MEMBER_EPOCH (its previous epoch is accepted while
  it owns nothing beyond its tasks: the answer that moved it may have been lost).
- Static members (an instance id): one that leaves with epoch -2 keeps its tasks until its
  session expires; a member joining under the same instance id meanwhile takes them over
  without the group epoch moving. An instance id a live member holds is
  UNRELEASED_INSTANCE_ID, and the replaced member id is FENCED_INSTANCE_ID.
- A member asking the application to shut down (its uncaught-exception handler's
  SHUTDOWN_APPLICATION) has every member told so in its status, until the group is empty.
- A group id belongs to one kind of group: a streams heartbeat for a classic, consumer or
  share group's id is GROUP_ID_NOT_FOUND (a classic group left with only offsets becomes a
  streams group), and the other protocols refuse a streams group's id.

Warm-up tasks are given as Kafka 4.4 gives them: never. Its members report their tasks'
changelog offsets every ``streams.task.offset.interval.ms`` (kept per member and described)
and are told ``streams.acceptable.recovery.lag``, but the refinement step that would turn a
move to a lagging member into a warm-up (Kafka's ``AssignmentRefiner``) hands the target
assignment back unchanged, ``streams.num.warmup.replicas`` notwithstanding. The initial
rebalance delay is not built either: tasks move at once.
"""
import dataclasses
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from kgate.protocol.error_codes import ErrorCode

from . import streams_assignor, streams_topology
from .effects import ArmTimer, CancelTimer, Effect, Log, Step, StoreConsumer, Timer, TimerKey
from .group import Group
from .modern_group import CommittedPartition
from .modern_rules import bump_epoch, restate_client, take_over
from .records import group_key
from .streams_assignor import MemberSpec
from .streams_group import (
    Assignment,
    Endpoint,
    MemberState,
    StreamsGroup,
    StreamsMember,
    TaskOffsets,
    Tasks,
    copy_tasks,
)
from .streams_topology import SHUTDOWN_APPLICATION, STALE_TOPOLOGY, Topics, source_subtopologies

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


@dataclass(slots=True)
class StreamsHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    client_id: str = ""
    client_host: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: object | None = None  # a StreamsGroupTopologyValue when joining, else None
    owned: Assignment | None = None  # None: unchanged
    process_id: str | None = None  # None: unchanged
    user_endpoint: Endpoint | None = None  # None: unchanged or none
    client_tags: dict[str, str] | None = None  # None: unchanged
    endpoint_epoch: int = -1
    shutdown_application: bool = False
    task_offsets: TaskOffsets | None = None  # None: unchanged
    task_end_offsets: TaskOffsets | None = None  # None: unchanged


@dataclass(slots=True)
class StreamsHeartbeatReply:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    status: list[tuple[int, str]] = field(default_factory=list)
    assignment: Assignment | None = None  # None: unchanged
    # Internal topics the broker is to create: name -> (partitions, configs).
    create: dict[str, tuple[int, dict[str, str]]] = field(default_factory=dict)
    endpoint_epoch: int = 0
    # Each member's endpoint with the partitions (by topic) of its active and of its standby and
    # warm-up tasks, when the client's endpoint epoch is behind the group's.
    endpoints: list[tuple[Endpoint, dict[str, set[int]], dict[str, set[int]]]] | None = None


class StreamsGroupMachine:
    def __init__(self, groups: dict[str, Group], *, session_ms: int, max_size: int, standby_replicas: int,
                 session_of: Callable[[str], int | None] = lambda _group_id: None,
                 standby_of: Callable[[str], int | None] = lambda _group_id: None,
                 internal: Callable[[str], bool] = lambda _name: False):
        self.groups = groups  # one namespace of group ids with the other machines
        self.session_ms, self.session_of = session_ms, session_of
        self.standby_replicas, self.standby_of = standby_replicas, standby_of
        self.max_size = max_size
        self.internal = internal

    def _session(self, group_id: str) -> int:
        return self.session_of(group_id) or self.session_ms

    def _standbys(self, group_id: str) -> int:
        configured = self.standby_of(group_id)
        return self.standby_replicas if configured is None else configured

    def heartbeat(self, now: int, request: StreamsHeartbeat, topics: Topics) -> Step[StreamsHeartbeatReply]:
        """``topics``: the cluster's topics as name -> (topic id, partition count)."""
        out: list[Effect] = []
        return Step(self._heartbeat(now, request, topics, out), out)

    def _heartbeat(self, now: int, request: StreamsHeartbeat, topics: Topics,
                   out: list[Effect]) -> StreamsHeartbeatReply:
        invalid = _invalid(request)
        if invalid is not None:
            return StreamsHeartbeatReply(ErrorCode.INVALID_REQUEST, invalid)
        group = self.groups.get(request.group_id)
        if group is not None and group.streams is None and (
                group.members or group.pending_members or group.consumer or group.share):
            return StreamsHeartbeatReply(ErrorCode.GROUP_ID_NOT_FOUND,
                                         f"Group {request.group_id} is not a streams group.")
        if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(now, request, topics, out)
        found = self._joining(request, group, out) if request.member_epoch == 0 else _known(request, group)
        if isinstance(found, StreamsHeartbeatReply):
            return found
        streams, member, replaced = found
        return self._beat(now, streams, member, request, topics, out, replaced)

    def _joining(self, request: StreamsHeartbeat, group: Group | None, out: list[Effect]) \
            -> "StreamsHeartbeatReply | tuple[StreamsGroup, StreamsMember, bool]":
        streams = self._streams_group(group, request.group_id, out)
        member = streams.members.get(request.member_id)
        static = streams.static_member(request.instance_id) if request.instance_id is not None else None
        if static is not None and static is not member:
            if static.epoch != STATIC_LEAVE_EPOCH:
                return StreamsHeartbeatReply(ErrorCode.UNRELEASED_INSTANCE_ID,
                                             f"instance {request.instance_id} is held by member {static.member_id}")
            return streams, self._replace(streams, static, request.member_id, out), True
        if member is None:
            if len(streams.members) >= self.max_size:
                return StreamsHeartbeatReply(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                             f"streams group {request.group_id} has {self.max_size} members")
            member = streams.members[request.member_id] = StreamsMember(request.member_id)
        else:
            # A member that rejoins has dropped its tasks: it starts again from epoch 0.
            member.assigned, member.pending_revocation, member.assignment_epochs = Assignment(), Assignment(), {}
            member.epoch, member.state = 0, MemberState.STABLE
        return streams, member, False

    def _streams_group(self, group: Group | None, group_id: str, out: list[Effect]) -> StreamsGroup:
        """The group a member joins: a new one, or a classic group left with only offsets."""
        if group is None:
            group = self.groups[group_id] = Group(group_id)
        if group.streams is None:
            if group.generation > 0 or group.stored:
                out.append(StoreConsumer(group_id, [(group_key(group_id), None)]))
                out.append(Log(logging.INFO, "group %s: empty classic group converted to a streams group",
                               (group_id,)))
            group.generation, group.protocol, group.leader_id, group.stored = 0, None, None, False
            group.protocol_type = "streams"
            group.streams = StreamsGroup(group_id)
        return group.streams

    def _replace(self, streams: StreamsGroup, old: StreamsMember, member_id: str, out: list[Effect]) -> StreamsMember:
        """A static member rejoining under a new member id takes over the one that left with
        epoch -2: its metadata, target and tasks, with nothing recomputed."""
        member = dataclasses.replace(old, member_id=member_id, epoch=0, previous_epoch=0, state=MemberState.STABLE,
                                     assigned=old.assigned.copy(), pending_revocation=Assignment(),
                                     assignment_epochs=dict(old.assignment_epochs), client_tags=dict(old.client_tags))
        take_over(streams, old, member, member_timers(streams.group_id, old.member_id), out)
        return member

    def _beat(self, now: int, streams: StreamsGroup, member: StreamsMember, request: StreamsHeartbeat,
              topics: Topics, out: list[Effect], replaced: bool) -> StreamsHeartbeatReply:
        stored: list[tuple[bytes, bytes | None]] = []
        joined = request.member_epoch == 0
        status: list[tuple[int, str]] = []
        changed = self._update_member(member, request) or joined or replaced
        if changed:
            stored.append(member.metadata_record(streams.group_id))
        moved = changed and not replaced
        if request.topology is not None:
            new_epoch = request.topology.epoch  # type: ignore[attr-defined]
            if streams.topology is None or new_epoch > streams.topology.epoch:  # type: ignore[attr-defined]
                streams.topology = request.topology
                stored.append(streams.topology_record())
                moved = True
        if request.shutdown_application and not streams.shutdown_requested:
            streams.shutdown_requested = True
            out.append(Log(logging.INFO, "streams group %s: member %s asked the application to shut down",
                           (streams.group_id, member.member_id)))
        if streams.shutdown_requested:
            status.append((SHUTDOWN_APPLICATION, f"Streams group {streams.group_id} requested shutdown."))
        if streams.topology is not None and member.topology_epoch < streams.topology.epoch:  # type: ignore
            status.append((STALE_TOPOLOGY, f"The member's topology epoch {member.topology_epoch} is behind the "
                                           f"group's {streams.topology.epoch}."))  # type: ignore[attr-defined]
        configured = (streams_topology.configure(streams.topology, topics, self.internal)
                      if streams.topology is not None else streams_topology.Configured())
        streams.status, streams.internal_partitions = configured.status, configured.partitions
        if moved or configured.signature != streams.topic_partitions:
            streams.topic_partitions = configured.signature
            bump_epoch(streams, f"member {member.member_id} {'joined' if joined else 'changed'}", stored, out)
        self._assign(streams, configured.tasks, stored)
        previous = (member.epoch, member.assigned.copy())
        self._reconcile(now, streams, member, request.owned, stored, out)
        if stored:
            out.append(StoreConsumer(streams.group_id, stored))
        out.append(ArmTimer(_session_key(streams.group_id, member.member_id), now + self._session(streams.group_id)))
        if (member.epoch, member.assigned) != previous:
            streams.endpoint_epoch += 1
        send = joined or replaced or (member.epoch, member.assigned) != previous or (
            request.owned is not None and request.owned != member.assigned)
        return StreamsHeartbeatReply(
            ErrorCode.NONE, None, member.member_id, member.epoch, status + configured.status,
            member.assigned.copy() if send else None, configured.missing, streams.endpoint_epoch,
            _endpoints(streams) if request.endpoint_epoch != streams.endpoint_epoch else None)

    @staticmethod
    def _update_member(member: StreamsMember, request: StreamsHeartbeat) -> bool:
        """Take what the heartbeat restates; whether anything the assignment depends on changed."""
        before = (member.process_id, member.rack_id, dict(member.client_tags), member.user_endpoint,
                  member.instance_id, member.topology_epoch)
        restate_client(member, request)
        if request.process_id is not None:
            member.process_id = request.process_id
        if request.user_endpoint is not None:
            member.user_endpoint = request.user_endpoint
        if request.client_tags is not None:
            member.client_tags = dict(request.client_tags)
        if request.topology is not None:
            member.topology_epoch = request.topology.epoch  # type: ignore[attr-defined]
        if request.task_offsets is not None:
            member.task_offsets = request.task_offsets
        if request.task_end_offsets is not None:
            member.task_end_offsets = request.task_end_offsets
        return before != (member.process_id, member.rack_id, member.client_tags, member.user_endpoint,
                          member.instance_id, member.topology_epoch)


    def _assign(self, streams: StreamsGroup, tasks: dict[str, int], stored: list) -> None:
        """Recompute the target assignment when the group epoch moved past it (no tasks while
        the topology's topics are not all there)."""
        if streams.assignment_epoch >= streams.epoch:
            return
        specs = {m.member_id: MemberSpec(m.process_id, _holding(m)) for m in streams.members.values()}
        target = streams_assignor.assign(specs, tasks, self._standbys(streams.group_id))
        for member_id, assignment in target.items():
            if streams.target.get(member_id) != assignment:
                streams.target[member_id] = assignment
                stored.append(streams.target_record(member_id))
        streams.assignment_epoch = streams.epoch
        stored.append(streams.assignment_epoch_record())

    def _reconcile(self, now: int, streams: StreamsGroup, member: StreamsMember, owned: Assignment | None,
                   stored: list, out: list[Effect]) -> None:
        """Move the member towards its target: revoke first, then assign what others released."""
        before = (member.epoch, member.previous_epoch, member.state, member.assigned.copy(),
                  member.pending_revocation.copy())
        epochs = member.held_epochs()
        if member.state is MemberState.UNREVOKED_TASKS:
            if owned is None or owned.overlaps(member.pending_revocation):
                return  # still owns what it must give up
            self._next(streams, member)
        elif member.state is MemberState.UNRELEASED_TASKS or member.epoch != streams.assignment_epoch:
            self._next(streams, member)
        member.stamp(epochs)
        after = (member.epoch, member.previous_epoch, member.state, member.assigned, member.pending_revocation)
        if after != before:
            stored.append(member.assignment_record(streams.group_id))
            key = _revocation_key(streams.group_id, member.member_id)
            if member.state is MemberState.UNREVOKED_TASKS:
                timeout = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else \
                    self._session(streams.group_id)
                out.append(ArmTimer(key, now + timeout))
            else:
                out.append(CancelTimer(key))

    def _next(self, streams: StreamsGroup, member: StreamsMember) -> None:
        target = streams.target.get(member.member_id, Assignment())
        keep, revoke = Assignment(), Assignment()
        for mine, wanted, kept, revoked in zip(member.assigned.kinds(), target.kinds(), keep.kinds(), revoke.kinds()):
            for subtopology in set(mine) | set(wanted):
                have, want = mine.get(subtopology, set()), wanted.get(subtopology, set())
                if have & want:
                    kept[subtopology] = have & want
                if have - want:
                    revoked[subtopology] = have - want
        if revoke:
            member.state, member.assigned, member.pending_revocation = MemberState.UNREVOKED_TASKS, keep, revoke
            return
        held = streams.active_owners()
        unreleased = False
        for subtopology, want in target.active.items():
            free = {p for p in want if held.get((subtopology, p), member.member_id) == member.member_id}
            unreleased = unreleased or len(free) < len(want)
            if free:
                keep.active[subtopology] = free
        keep.standby, keep.warmup = copy_tasks(target.standby), copy_tasks(target.warmup)
        member.assigned, member.pending_revocation = keep, Assignment()
        member.state = MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE
        if member.epoch != streams.assignment_epoch:
            member.previous_epoch, member.epoch = member.epoch, streams.assignment_epoch

    # -- leaving ----------------------------------------------------------------------------

    def _leave(self, now: int, request: StreamsHeartbeat, topics: Topics, out: list[Effect]) -> StreamsHeartbeatReply:
        group = self.groups.get(request.group_id)
        streams = group.streams if group is not None else None
        if streams is None or request.member_id not in streams.members:
            return StreamsHeartbeatReply(ErrorCode.UNKNOWN_MEMBER_ID, f"member {request.member_id} is not in the group",
                                         request.member_id, request.member_epoch)
        member = streams.members[request.member_id]
        if request.member_epoch == STATIC_LEAVE_EPOCH:
            if member.instance_id is None or member.instance_id != request.instance_id:
                return StreamsHeartbeatReply(ErrorCode.INVALID_REQUEST,
                                             "a member leaving with epoch -2 must give its instance id")
            # It keeps its tasks, held from the others, until it rejoins or its session expires.
            member.previous_epoch, member.epoch = member.epoch, STATIC_LEAVE_EPOCH
            member.state, member.pending_revocation = MemberState.STABLE, Assignment()
            out.append(CancelTimer(_revocation_key(streams.group_id, member.member_id)))
            out.append(StoreConsumer(streams.group_id, [member.assignment_record(streams.group_id)]))
            out.append(Log(logging.INFO, "streams group %s: static member %s (%s) left for now",
                           (streams.group_id, member.instance_id, member.member_id)))
        else:
            self._remove(streams, request.member_id, "left", topics, out)
        return StreamsHeartbeatReply(ErrorCode.NONE, None, request.member_id, request.member_epoch)

    def _remove(self, streams: StreamsGroup, member_id: str, reason: str, topics: Topics, out: list[Effect]) -> None:
        del streams.members[member_id]
        streams.target.pop(member_id, None)
        streams.shutdown_requested = streams.shutdown_requested and bool(streams.members)
        out += [CancelTimer(key) for key in member_timers(streams.group_id, member_id)]
        stored: list[tuple[bytes, bytes | None]] = list(streams.member_tombstones(member_id))
        bump_epoch(streams, f"member {member_id} {reason}", stored, out)
        configured = (streams_topology.configure(streams.topology, topics, self.internal)
                      if streams.topology is not None else streams_topology.Configured())
        self._assign(streams, configured.tasks, stored)
        out.append(StoreConsumer(streams.group_id, stored))

    def timer_fired(self, now: int, key: TimerKey, topics: Topics) -> list[Effect]:
        out: list[Effect] = []
        group = self.groups.get(key.group_id)
        streams = group.streams if group is not None else None
        if streams is None or key.member_id not in streams.members:
            return out
        reason = _EXPIRED[key.kind]
        out.append(Log(logging.INFO, "streams group %s: member %s %s", (key.group_id, key.member_id, reason)))
        self._remove(streams, key.member_id, reason, topics, out)
        return out

    def restore(self, now: int, group: Group) -> list[Effect]:
        """After replay: every member must heartbeat within a session from now."""
        if group.streams is None:
            return []
        return [ArmTimer(_session_key(group.group_id, member_id), now + self._session(group.group_id))
                for member_id in group.streams.members]

    @staticmethod
    def check_commit(streams: StreamsGroup, member_epoch: int, member_id: str,
                     partitions: Collection[CommittedPartition] = ()) -> ErrorCode:
        """OffsetCommit (and TxnOffsetCommit) against a streams group: the member's current
        epoch, or a commit with no member to an empty group (what admin tools send).

        An older epoch commits ``partitions`` whose active task (the subtopology reading the
        topic, the partition) the member was assigned at or before that epoch and still holds
        (Kafka 4.4, KIP-1251), as for a consumer group's partitions."""
        if member_epoch < 0 and not member_id and not streams.members:
            return ErrorCode.NONE
        member = streams.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch == member.epoch:
            return ErrorCode.NONE
        if member_epoch > member.epoch or streams.topology is None:
            return ErrorCode.STALE_MEMBER_EPOCH
        reading = source_subtopologies(streams.topology)
        for topic, _topic_id, partition in partitions:
            subtopology = reading.get(topic)
            since = None if subtopology is None else member.assigned_since(subtopology, partition)
            if since is None or member_epoch < since:
                return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE


def _known(request: StreamsHeartbeat, group: Group | None) \
        -> "StreamsHeartbeatReply | tuple[StreamsGroup, StreamsMember, bool]":
    streams = group.streams if group is not None else None
    member = streams.members.get(request.member_id) if streams is not None else None
    if streams is not None and request.instance_id is not None:
        static = streams.static_member(request.instance_id)
        if static is not None and static is not member:
            return StreamsHeartbeatReply(ErrorCode.FENCED_INSTANCE_ID,
                                         f"instance {request.instance_id} is now member {static.member_id}")
    if streams is None or member is None:
        return StreamsHeartbeatReply(ErrorCode.UNKNOWN_MEMBER_ID, f"member {request.member_id} is not in the group")
    allowed = request.member_epoch == member.epoch or (
        request.member_epoch == member.previous_epoch and request.member_epoch < member.epoch
        and request.owned is not None and not _beyond(request.owned, member.assigned))
    if not allowed:
        return StreamsHeartbeatReply(ErrorCode.FENCED_MEMBER_EPOCH,
                                     f"epoch {request.member_epoch} is not the member's epoch {member.epoch}")
    return streams, member, False


def _beyond(owned: Assignment, assigned: Assignment) -> bool:
    return any(parts - mine.get(subtopology, set())
               for theirs, mine in zip(owned.kinds(), assigned.kinds()) for subtopology, parts in theirs.items())


def _holding(member: StreamsMember) -> Assignment:
    """What the assignor keeps sticky: the member's tasks, with those it is giving up."""
    held = member.assigned.copy()
    for mine, pending in zip(held.kinds(), member.pending_revocation.kinds()):
        for subtopology, parts in pending.items():
            mine.setdefault(subtopology, set()).update(parts)
    return held


def _endpoints(streams: StreamsGroup) -> list[tuple[Endpoint, dict[str, set[int]], dict[str, set[int]]]]:
    """What interactive queries need: the partitions each member's endpoint serves."""
    def partitions(*kinds: Tasks) -> dict[str, set[int]]:
        by_topic: dict[str, set[int]] = {}
        for s in streams.topology.subtopologies if streams.topology is not None else ():  # type: ignore
            for name in (*s.source_topics, *(t.name for t in s.repartition_source_topics)):
                for tasks in kinds:
                    by_topic.setdefault(name, set()).update(tasks.get(s.subtopology_id, ()))
        return by_topic
    return [(m.user_endpoint, partitions(m.assigned.active), partitions(m.assigned.standby, m.assigned.warmup))
            for m in streams.members.values() if m.user_endpoint is not None]


def _invalid(request: StreamsHeartbeat) -> str | None:
    """Kafka's checks of a StreamsGroupHeartbeat before the group is looked at."""
    if not request.group_id:
        return "GroupId can't be empty."
    if not request.member_id:
        return "MemberId can't be empty."
    if request.instance_id is not None and not request.instance_id:
        return "InstanceId can't be empty."
    if request.member_epoch < STATIC_LEAVE_EPOCH:
        return f"MemberEpoch is {request.member_epoch}, but must be greater than or equal to -2."
    if request.member_epoch == STATIC_LEAVE_EPOCH and request.instance_id is None:
        return "InstanceId can't be null when MemberEpoch is -2."
    if request.member_epoch == 0:
        if request.rebalance_timeout_ms < 0:
            return "RebalanceTimeoutMs must be provided in first request."
        if request.topology is None:
            return "Topology must be non-null when joining the group."
        if not request.process_id:
            return "ProcessId can't be empty."
        if request.owned is not None and request.owned:
            return "ActiveTasks, StandbyTasks and WarmupTasks must be empty when (re-)joining."
    return None


def _session_key(group_id: str, member_id: str) -> TimerKey:
    return TimerKey(group_id, Timer.STREAMS_SESSION, member_id)


def _revocation_key(group_id: str, member_id: str) -> TimerKey:
    return TimerKey(group_id, Timer.STREAMS_REVOCATION, member_id)


_EXPIRED = {Timer.STREAMS_SESSION: "session expired", Timer.STREAMS_REVOCATION: "did not revoke in time (fenced)"}
STREAMS_TIMER_KINDS = frozenset(_EXPIRED)  # the timers this machine's timer_fired takes


def member_timers(group_id: str, member_id: str) -> list[TimerKey]:
    return [TimerKey(group_id, kind, member_id) for kind in _EXPIRED]
