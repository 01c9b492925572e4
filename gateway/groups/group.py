"""A consumer group's state machine: members, generations and the protocol they share.

The states and the transitions allowed between them are Kafka's classic group
protocol:

    Empty --join--> PreparingRebalance --all joined--> CompletingRebalance
      ^                 ^        |                         |        |
      |                 |        +--no members left--> Empty        | leader's SyncGroup
      |                 +---- member joins, leaves or expires ------+ (assignment stored)
      |                                                             v
      +------------------------------------------------------ Stable
    Dead: deleted, or every offset expired with no members; reachable from any state.

This module holds the state and its record form; the rules that move it are in
``machine``, and the coordinator carries out what they ask (timers, persistence,
answering the requests that wait).
"""
import enum
import struct
from dataclasses import dataclass, field

from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from .consumer_group import ConsumerGroup
from .records import CommittedOffset, GroupMetadataValue, MemberMetadata
from .share_group import ShareGroup
from .streams_group import StreamsGroup


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_ALLOWED_FROM = {
    GroupState.PREPARING_REBALANCE: {GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.DEAD: set(GroupState),
}


class IllegalTransition(RuntimeError):
    pass


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    # A JoinGroup / SyncGroup request of this member is parked until the rebalance reaches it.
    awaiting_join: bool = False
    awaiting_sync: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]


@dataclass(eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    # Member ids handed out with MEMBER_ID_REQUIRED, not yet joined with them.
    pending_members: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    state_timestamp: int = -1  # ms; when the group last changed state (offset expiry counts from Empty)
    # True while the initial rebalance delay of a group leaving Empty runs.
    in_initial_delay: bool = False
    # Members of the current generation that have not sent SyncGroup for it yet.
    pending_sync: set[str] = field(default_factory=set)
    # Set when the group id is a KIP-848 consumer group: its state lives there, and the
    # classic fields stay empty (the offsets are shared by both kinds).
    consumer: ConsumerGroup | None = None
    # Set when the group id is a share group (KIP-932); the classic fields stay empty.
    share: ShareGroup | None = None
    # Set when the group id is a streams group (KIP-1071); the classic fields stay empty.
    streams: StreamsGroup | None = None
    # Whether the log holds a live record of the group itself, not only its offsets: such a
    # group outlives its last offset, as in Kafka, until DeleteGroups or the offsets cleanup
    # tombstones it; dropped earlier, it would come back when the partition is replayed.
    stored: bool = False

    def transition(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _ALLOWED_FROM[state]:
            raise IllegalTransition(f"group {self.group_id}: {self.state.value} -> {state.value}")
        self.state = state
        self.state_timestamp = now_ms

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def has_members(self) -> bool:
        """Whether anyone is in the group, by either protocol."""
        return (bool(self.members) or (self.consumer is not None and bool(self.consumer.members))
                or (self.share is not None and bool(self.share.members))
                or (self.streams is not None and bool(self.streams.members)))

    # -- membership ---------------------------------------------------------------------

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        # The protocol type outlives the members, as in Kafka: tools list empty groups by it.
        return member

    def replace_static(self, old_id: str, new_id: str) -> Member:
        """A static member rejoined with a new member id: it keeps its place and assignment."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def is_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """A static instance whose current member id is another one (an older incarnation)."""
        if group_instance_id is None:
            return False
        current = self.static_members.get(group_instance_id)
        return current is not None and current != member_id

    @property
    def all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols ----------------------------------------------------------------------

    def supports(self, protocol_type: str, protocols: list[str]) -> bool:
        """Whether a member with these protocols could join: same type, one protocol in common."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        return protocol_type == self.protocol_type and bool(self._candidates() & set(protocols))

    def _candidates(self) -> set[str]:
        members = iter(self.members.values())
        common = set(next(members).protocol_names())
        for member in members:
            common &= set(member.protocol_names())
        return common

    def select_protocol(self) -> str:
        """The common protocol most members list first among the common ones (Kafka's vote)."""
        candidates = self._candidates()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = next(name for name in member.protocol_names() if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        # Ties go to the protocol listed first by the earliest member, so the choice is stable.
        first = next(iter(self.members.values())).protocol_names()
        return max(sorted(votes, key=lambda name: first.index(name) if name in first else len(first)),
                   key=lambda name: votes[name])

    def subscribed_topics(self) -> set[str] | None:
        """Topics a classic group's members subscribe to, or None when the protocol is not the consumer one."""
        if self.protocol_type != "consumer" or self.protocol is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics.update(ConsumerProtocolSubscription.decode(member.metadata(self.protocol)).topics)
            except (ValueError, EOFError, struct.error):
                return None  # not the standard consumer subscription: no topics to name
        return topics

    # -- record form ----------------------------------------------------------------------

    def metadata_value(self) -> GroupMetadataValue:
        """The generation, leader and assignment as ``__consumer_offsets`` keeps them."""
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "", generation=self.generation, protocol=self.protocol,
            leader=self.leader_id, current_state_timestamp=self.state_timestamp,
            members=[MemberMetadata(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                    client_id=m.client_id, client_host=m.client_host,
                                    rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
                                    subscription=m.metadata(self.protocol), assignment=m.assignment)
                     for m in self.members.values()])

    def load_metadata(self, value: GroupMetadataValue) -> None:
        """Take the generation and members a replayed record holds (older record versions lack fields)."""
        self.generation = value.generation
        self.protocol_type = value.protocol_type or None
        self.protocol = value.protocol
        self.leader_id = value.leader
        self.state_timestamp = getattr(value, "current_state_timestamp", -1)
        self.members.clear()
        self.static_members.clear()
        for m in value.members:
            member = Member(m.member_id, getattr(m, "group_instance_id", None), m.client_id, m.client_host,
                            getattr(m, "rebalance_timeout", m.session_timeout), m.session_timeout,
                            self.protocol_type or "", [(self.protocol or "", m.subscription)], m.assignment)
            self.members[member.member_id] = member
            if member.group_instance_id is not None:
                self.static_members[member.group_instance_id] = member.member_id
