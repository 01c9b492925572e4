"""What KIP-848 consumer groups and KIP-932 share groups keep alike in ``__consumer_offsets``.

Both keep a group epoch, a target assignment's epoch, each member's subscription, target
and current assignment, in records of the same roles under different key versions
(``records.CONSUMER_RECORDS``, ``records.SHARE_RECORDS``): the record form here is written
once, and each kind names its family and how a member loads its own records.
"""
import uuid
from typing import Any

from . import records

Partitions = dict[uuid.UUID, set[int]]
# A partition an offset commit names, as Kafka's commit validators take it: its topic's name
# (a streams topology knows topics by name) and id (a consumer assignment, by id), and its index.
CommittedPartition = tuple[str, uuid.UUID, int]


class AssignmentEpochs:
    """Mixed into a member dataclass with ``epoch`` and ``assignment_epochs``: the member epoch
    each partition (a consumer's) or active task (a streams member's) it holds was assigned at,
    by (topic id or subtopology, partition), as Kafka 4.4 keeps them for commits at an older
    epoch (KIP-1251); one held with none recorded was assigned at ``epoch``. ``_holding()``
    gives what it holds, assigned and pending revocation."""

    epoch: int
    assignment_epochs: dict[tuple[Any, int], int]

    def _holding(self) -> tuple[dict[Any, set[int]], ...]:
        raise NotImplementedError

    def _epoch_of(self, owner, partition: int) -> int:
        return self.assignment_epochs.get((owner, partition), self.epoch)

    def held_epochs(self) -> dict[tuple[Any, int], int]:
        """Each partition or task the member holds now, with the epoch it was assigned at."""
        return {(owner, p): self._epoch_of(owner, p)
                for held in self._holding() for owner, parts in held.items() for p in parts}

    def stamp(self, before: dict[tuple[Any, int], int]) -> None:
        """After a step of the member's assignment (``before``: :meth:`held_epochs` before it):
        what it kept keeps its epoch, what it gained takes the member's epoch now, and what it
        released is forgotten."""
        self.assignment_epochs = {key: before.get(key, self.epoch) for key in self.held_epochs()}

    def assigned_since(self, owner, partition: int) -> int | None:
        """The epoch the member was assigned the partition or task at, None when it does not hold it."""
        held = any(partition in parts.get(owner, ()) for parts in self._holding())
        return self._epoch_of(owner, partition) if held else None


class ModernGroup:
    """Mixed into a group dataclass with ``group_id``, ``epoch``, ``assignment_epoch``,
    ``members`` (each with ``metadata_record`` and ``assignment_record``) and ``target``."""
    FAMILY: str  # "consumer", "share" or "streams"
    MEMBER: Any  # the kind's member class, for the default load_member
    group_id: str
    epoch: int
    assignment_epoch: int
    members: dict[str, Any]
    target: dict[str, Partitions]

    def key(self, kind: str, member: str | None = None) -> bytes:
        return records.family_key(self.FAMILY, kind, self.group_id, member)

    def value(self, kind: str, **fields) -> bytes:
        return records.family_value(self.FAMILY, kind, **fields)

    def epoch_record(self) -> tuple[bytes, bytes]:
        return self.key("group_epoch"), self.value("group_epoch", epoch=self.epoch)

    def assignment_epoch_record(self) -> tuple[bytes, bytes]:
        return self.key("assignment_epoch"), self.value("assignment_epoch", assignment_epoch=self.assignment_epoch)

    def target_record(self, member_id: str) -> tuple[bytes, bytes]:
        value = records.family_value_class(self.FAMILY, "target")
        return self.key("target", member_id), self.value(
            "target", topic_partitions=topic_partition_list(value.TopicPartition, self.target.get(member_id, {})))

    def member_tombstones(self, member_id: str) -> list[tuple[bytes, None]]:
        return [(self.key(kind, member_id), None) for kind in ("current", "target", "member")]

    def tombstones(self) -> list[tuple[bytes, None]]:
        """Everything the group wrote, gone (its members' records included)."""
        out = [t for member_id in self.members for t in self.member_tombstones(member_id)]
        return out + [(self.key("assignment_epoch"), None), (self.key("group_epoch"), None)]

    def snapshot(self) -> list[tuple[bytes, bytes]]:
        """The live records that rebuild the group (compaction re-appends them)."""
        out = [self.epoch_record()]
        for member in self.members.values():
            out += [member.metadata_record(self.group_id), self.target_record(member.member_id),
                    member.assignment_record(self.group_id)]
        return out + [self.assignment_epoch_record()]

    def load(self, kind: str, member_id: str | None, value) -> None:
        """Apply one replayed record (the last of its key)."""
        if member_id is None:
            if kind == "group_epoch" and value is not None:
                self.epoch = value.epoch
            elif kind == "assignment_epoch" and value is not None:
                self.assignment_epoch = value.assignment_epoch
        elif value is None:
            if kind == "member":
                self.members.pop(member_id, None)
            elif kind == "target":
                self.target.pop(member_id, None)
        elif kind == "target":
            self.target[member_id] = partitions_of(value.topic_partitions)
        else:
            self.load_member(kind, member_id, value)

    def load_member(self, kind: str, member_id: str, value) -> None:
        """A member's subscription ("member") or current assignment ("current") record, read by
        the kind's ``MEMBER`` class (``load_metadata``, ``load_assignment``)."""
        member = self.members.setdefault(member_id, self.MEMBER(member_id))
        if kind == "member":
            member.load_metadata(value)
        else:
            member.load_assignment(value)


def topic_partition_list(cls, partitions: Partitions) -> list:
    """Partitions as the records' TopicPartitions structs, in a stable order."""
    return [cls(topic_id=topic_id, partitions=sorted(parts)) for topic_id, parts in sorted(partitions.items()) if parts]


def partitions_of(topic_partitions) -> Partitions:
    return {tp.topic_id: set(tp.partitions) for tp in topic_partitions if tp.partitions}
