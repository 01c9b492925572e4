"""A share group (KIP-932): its epochs, members, their subscriptions and assignments.

Members of a share group are given partitions without revoking them from anyone first
(records, not partitions, are what members hold exclusively, see gateway/shares), so a
member moves to a new assignment on its next heartbeat: its target becomes its current
assignment at once. This module holds that state and its ``__consumer_offsets`` record
form, Kafka's share group records (key versions 10 to 14); ``share_machine`` holds the rules.
"""
import uuid
from dataclasses import dataclass, field

from . import records
from .modern_group import ModernGroup, Partitions, partitions_of, topic_partition_list


@dataclass(eq=False)
class ShareMember:
    member_id: str
    client_id: str = ""
    client_host: str = ""
    rack_id: str | None = None
    subscribed: list[str] = field(default_factory=list)
    epoch: int = 0
    previous_epoch: int = 0
    assigned: Partitions = field(default_factory=dict)

    def metadata_record(self, group_id: str) -> tuple[bytes, bytes]:
        return records.family_key("share", "member", group_id, self.member_id), records.family_value(
            "share", "member", rack_id=self.rack_id, client_id=self.client_id, client_host=self.client_host,
            subscribed_topic_names=list(self.subscribed))

    def assignment_record(self, group_id: str) -> tuple[bytes, bytes]:
        value = records.ShareGroupCurrentMemberAssignmentValue
        return records.family_key("share", "current", group_id, self.member_id), records.family_value(
            "share", "current", member_epoch=self.epoch, previous_member_epoch=self.previous_epoch, state=0,
            assigned_partitions=topic_partition_list(value.TopicPartitions, self.assigned))


@dataclass(eq=False)
class ShareGroup(ModernGroup):
    FAMILY = "share"
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)
    # The partition counts of the subscribed topics the group epoch was set for (not stored:
    # the first heartbeat after a coordinator move sets it, bumping the epoch).
    topic_partitions: dict[uuid.UUID, int] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """Kafka's names for a share group's states (ListGroups, ShareGroupDescribe)."""
        return "Stable" if self.members else "Empty"

    def subscribed_topics(self) -> set[str]:
        return {topic for member in self.members.values() for topic in member.subscribed}

    # -- record form ------------------------------------------------------------------------

    def epoch_record(self) -> tuple[bytes, bytes]:
        # The metadata hash only spares Kafka recomputing an assignment: 0 asks it to recompute.
        return self.key("group_epoch"), self.value("group_epoch", epoch=self.epoch, metadata_hash=0)

    def load_member(self, kind: str, member_id: str, value) -> None:
        member = self.members.setdefault(member_id, ShareMember(member_id))
        if kind == "member":
            member.rack_id, member.client_id, member.client_host = value.rack_id, value.client_id, value.client_host
            member.subscribed = list(value.subscribed_topic_names)
        else:
            member.epoch, member.previous_epoch = value.member_epoch, value.previous_member_epoch
            member.assigned = partitions_of(value.assigned_partitions)
