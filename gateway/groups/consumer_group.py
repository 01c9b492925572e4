"""A consumer group of KIP-848's protocol: its epochs, members and target assignment.

The group epoch moves whenever what the assignment depends on changes (a member joins
or leaves, a subscription or the assignor changes, a subscribed topic gains
partitions); the target assignment is computed for an epoch (its assignment epoch);
each member reconciles towards its target at its own pace, one member epoch at a time,
giving up partitions before anyone else is given them. This module holds that state
and its ``__consumer_offsets`` record form; ``consumer_machine`` holds the rules.

A member subscribes by topic names, by a regular expression (KIP-848's
SubscribedTopicRegex, matched against whole topic names, internal topics excluded), or
both; the group resolves the expression against the topics that exist at each
heartbeat, so a topic created later that matches is assigned from then on. A
resolution is computed once per expression and set of topics, not per member and
heartbeat.
"""
import enum
import functools
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field

from . import records
from .modern_group import AssignmentEpochs, ModernGroup, Partitions, partitions_of, topic_partition_list
from .subscription_regex import compile_regex


class MemberState(enum.IntEnum):
    """Kafka's member states, by the byte its records store."""
    STABLE = 0
    UNREVOKED_PARTITIONS = 1  # must give up partitions before it moves on
    UNRELEASED_PARTITIONS = 2  # waits for partitions others still hold


@dataclass(frozen=True, slots=True)
class ClassicMetadata:
    """What a member speaking the classic protocol keeps: its session timeout and the
    (name, metadata) protocols of its last JoinGroup, in its order."""
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol(self) -> str:
        """The protocol name a classic member is answered with: its first (Kafka's rule)."""
        return self.protocols[0][0]

    def record(self):
        value = records.ConsumerGroupMemberMetadataValue.ClassicMemberMetadata
        return value(session_timeout_ms=self.session_timeout_ms,
                     supported_protocols=[value.ClassicProtocol(name=name, metadata=metadata)
                                          for name, metadata in self.protocols])


@dataclass(eq=False)
class ConsumerMember(AssignmentEpochs):
    member_id: str
    client_id: str = ""
    client_host: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed: list[str] = field(default_factory=list)  # topic names
    regex: str | None = None  # SubscribedTopicRegex
    server_assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    # The member epoch each partition it holds (assigned or pending revocation) was assigned at;
    # one held with none recorded (converted from a classic group) was assigned at ``epoch``.
    assignment_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    classic: ClassicMetadata | None = None  # set while the member speaks the classic protocol
    # Not stored: a classic member was told to rejoin and its deadline to do so runs.
    rejoin_due: bool = False

    def metadata_record(self, group_id: str) -> tuple[bytes, bytes]:
        return records.consumer_key("member", group_id, self.member_id), records.consumer_value(
            "member", instance_id=self.instance_id, rack_id=self.rack_id, client_id=self.client_id,
            client_host=self.client_host, subscribed_topic_names=list(self.subscribed),
            subscribed_topic_regex=self.regex, rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor,
            classic_member_metadata=None if self.classic is None else self.classic.record())

    def assignment_record(self, group_id: str) -> tuple[bytes, bytes]:
        return records.consumer_key("current", group_id, self.member_id), records.consumer_value(
            "current", member_epoch=self.epoch, previous_member_epoch=self.previous_epoch, state=int(self.state),
            assigned_partitions=self._with_epochs(self.assigned),
            partitions_pending_revocation=self._with_epochs(self.pending_revocation))

    def _with_epochs(self, partitions: Partitions) -> list:
        structs = topic_partition_list(records.ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions, partitions)
        for struct in structs:
            struct.assignment_epochs = [self._epoch_of(struct.topic_id, p) for p in struct.partitions]
        return structs

    def _holding(self) -> tuple[Partitions, ...]:
        return self.assigned, self.pending_revocation

    def load_metadata(self, value) -> None:
        self.instance_id, self.rack_id = value.instance_id, value.rack_id
        self.client_id, self.client_host = value.client_id, value.client_host
        self.subscribed = list(value.subscribed_topic_names)
        self.regex = value.subscribed_topic_regex or None
        self.rebalance_timeout_ms, self.server_assignor = value.rebalance_timeout_ms, value.server_assignor
        classic = value.classic_member_metadata
        self.classic = None if classic is None else ClassicMetadata(
            classic.session_timeout_ms, tuple((p.name, p.metadata) for p in classic.supported_protocols))

    def subscription(self, topics: Collection[str], matchable: frozenset[str]) -> set[str]:
        """The topics among ``topics`` the member subscribes to: by name, or among ``matchable``
        (the topics a regular expression may match) by its regex."""
        chosen = {name for name in self.subscribed if name in topics}
        if self.regex:
            chosen.update(resolve(self.regex, matchable))
        return chosen

    def load_assignment(self, value) -> None:
        self.epoch, self.previous_epoch = value.member_epoch, value.previous_member_epoch
        self.state = MemberState(value.state) if value.state in MemberState._value2member_map_ else MemberState.STABLE
        self.assigned = partitions_of(value.assigned_partitions)
        self.pending_revocation = partitions_of(value.partitions_pending_revocation)
        self.assignment_epochs = {
            (struct.topic_id, p): epoch
            for struct in (*value.assigned_partitions, *value.partitions_pending_revocation)
            for p, epoch in zip(struct.partitions, struct.assignment_epochs or ())}


@dataclass(eq=False)
class ConsumerGroup(ModernGroup):
    FAMILY = "consumer"
    MEMBER = ConsumerMember
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ""  # the assignor of the current target assignment
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)
    # The partition counts of the subscribed topics the group epoch was set for (not stored:
    # a coordinator that replays the group sets it on the first heartbeat, bumping the epoch).
    topic_partitions: dict[uuid.UUID, int] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """Kafka's names for a consumer group's states (ListGroups, ConsumerGroupDescribe)."""
        if not self.members:
            return "Empty"
        if self.assignment_epoch < self.epoch:
            return "Assigning"
        if any(m.epoch != self.assignment_epoch or m.state is not MemberState.STABLE for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def owners(self) -> dict[tuple[uuid.UUID, int], str]:
        """Who holds each partition now: assigned to it, or owed back by it."""
        held = {}
        for member in self.members.values():
            for partitions in (member.assigned, member.pending_revocation):
                for topic_id, parts in partitions.items():
                    for p in parts:
                        held[(topic_id, p)] = member.member_id
        return held

    def subscribed_topics(self, topics: Collection[str], matchable: frozenset[str]) -> set[str]:
        """The topics among ``topics`` some member subscribes to."""
        return {topic for member in self.members.values() for topic in member.subscription(topics, matchable)}

    def has_regex(self) -> bool:
        return any(member.regex for member in self.members.values())

    def waits_for_others(self, member: ConsumerMember) -> bool:
        """Whether a partition of the member's target it does not have yet is still held by another."""
        held = self.owners()
        return any(held.get((topic_id, p), member.member_id) != member.member_id
                   for topic_id, parts in self.target.get(member.member_id, {}).items()
                   for p in parts - member.assigned.get(topic_id, set()))

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    # -- record form ------------------------------------------------------------------------



@functools.lru_cache(maxsize=256)
def resolve(regex: str, names: frozenset[str]) -> frozenset[str]:
    """The names ``regex`` matches in full."""
    pattern = compile_regex(regex)
    return frozenset(name for name in names if pattern.fullmatch(name))
