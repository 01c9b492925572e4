"""The records the coordinator keeps in ``__consumer_offsets``, as Kafka lays them out.

A key's int16 version says what it is: 0 or 1 a committed offset (group, topic,
partition), 2 a classic group's membership; 3 to 8 a consumer group of KIP-848's
protocol: 3 its group epoch, 5 a member's subscription, 6 the target assignment's
epoch, 7 a member's target assignment, 8 a member's current assignment and epochs;
10 to 14 a share group (KIP-932) in the same roles: 10 a member's subscription, 11 the
group epoch, 12 the target assignment's epoch, 13 a member's target, 14 its current
assignment; 17 and 19 to 23 a streams group (KIP-1071): 17 its group epoch, 19 a member's
metadata, 20 the target assignment's epoch, 21 a member's target tasks, 22 its current
tasks, 23 the group's topology.
A null value is a tombstone: the key is gone.
Records are written as magic-2 batches like any produce, so the partition is an
ordinary managed ledger that replays with the ordinary read path.
"""
import time
from dataclasses import dataclass

from kafka.protocol.api_data import ApiData

from ..coordinator.record_codec import CorruptRecord as CorruptRecord  # what decode raises
from ..coordinator.record_codec import decoding, key_version, unknown_key_version
from . import schemas


class OffsetCommitKey(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class OffsetCommitValue(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class GroupMetadataKey(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class GroupMetadataValue(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class ConsumerGroupMetadataKey(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class ConsumerGroupMetadataValue(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class ConsumerGroupMemberMetadataKey(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class ConsumerGroupMemberMetadataValue(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class ConsumerGroupTargetAssignmentMetadataKey(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class ConsumerGroupTargetAssignmentMetadataValue(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class ConsumerGroupTargetAssignmentMemberKey(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class ConsumerGroupTargetAssignmentMemberValue(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class ConsumerGroupCurrentMemberAssignmentKey(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class ConsumerGroupCurrentMemberAssignmentValue(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class ShareGroupMetadataKey(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class ShareGroupMetadataValue(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class ShareGroupMemberMetadataKey(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class ShareGroupMemberMetadataValue(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class ShareGroupTargetAssignmentMetadataKey(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class ShareGroupTargetAssignmentMetadataValue(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class ShareGroupTargetAssignmentMemberKey(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class ShareGroupTargetAssignmentMemberValue(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class ShareGroupCurrentMemberAssignmentKey(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class ShareGroupCurrentMemberAssignmentValue(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class StreamsGroupMetadataKey(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class StreamsGroupMetadataValue(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class StreamsGroupMemberMetadataKey(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class StreamsGroupMemberMetadataValue(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class StreamsGroupTargetAssignmentMetadataKey(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class StreamsGroupTargetAssignmentMetadataValue(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class StreamsGroupTargetAssignmentMemberKey(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class StreamsGroupTargetAssignmentMemberValue(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class StreamsGroupCurrentMemberAssignmentKey(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class StreamsGroupCurrentMemberAssignmentValue(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class StreamsGroupTopologyKey(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


class StreamsGroupTopologyValue(  # type: ignore[call-arg]  # kafka-python's untyped class keyword
        ApiData, load_json=schemas):
    pass


MemberMetadata = GroupMetadataValue.MemberMetadata
# Consumer group records by key version: (kind, key class, value class).
CONSUMER_RECORDS: dict[int, tuple[str, type[ApiData], type[ApiData]]] = {
    3: ("group_epoch", ConsumerGroupMetadataKey, ConsumerGroupMetadataValue),
    5: ("member", ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue),
    6: ("assignment_epoch", ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue),
    7: ("target", ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue),
    8: ("current", ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue),
}
_CONSUMER_VERSIONS = {kind: version for version, (kind, _, _) in CONSUMER_RECORDS.items()}
# Share group records (KIP-932) by key version, in the same shape.
SHARE_RECORDS: dict[int, tuple[str, type[ApiData], type[ApiData]]] = {
    10: ("member", ShareGroupMemberMetadataKey, ShareGroupMemberMetadataValue),
    11: ("group_epoch", ShareGroupMetadataKey, ShareGroupMetadataValue),
    12: ("assignment_epoch", ShareGroupTargetAssignmentMetadataKey, ShareGroupTargetAssignmentMetadataValue),
    13: ("target", ShareGroupTargetAssignmentMemberKey, ShareGroupTargetAssignmentMemberValue),
    14: ("current", ShareGroupCurrentMemberAssignmentKey, ShareGroupCurrentMemberAssignmentValue),
}
_SHARE_VERSIONS = {kind: version for version, (kind, _, _) in SHARE_RECORDS.items()}
# Streams group records (KIP-1071) by key version: the same roles, and the group's topology (18
# was a partition-metadata record Kafka dropped before the protocol was released).
STREAMS_RECORDS: dict[int, tuple[str, type[ApiData], type[ApiData]]] = {
    17: ("group_epoch", StreamsGroupMetadataKey, StreamsGroupMetadataValue),
    19: ("member", StreamsGroupMemberMetadataKey, StreamsGroupMemberMetadataValue),
    20: ("assignment_epoch", StreamsGroupTargetAssignmentMetadataKey, StreamsGroupTargetAssignmentMetadataValue),
    21: ("target", StreamsGroupTargetAssignmentMemberKey, StreamsGroupTargetAssignmentMemberValue),
    22: ("current", StreamsGroupCurrentMemberAssignmentKey, StreamsGroupCurrentMemberAssignmentValue),
    23: ("topology", StreamsGroupTopologyKey, StreamsGroupTopologyValue),
}
_STREAMS_VERSIONS = {kind: version for version, (kind, _, _) in STREAMS_RECORDS.items()}
_FAMILIES = {"consumer": (CONSUMER_RECORDS, _CONSUMER_VERSIONS), "share": (SHARE_RECORDS, _SHARE_VERSIONS),
             "streams": (STREAMS_RECORDS, _STREAMS_VERSIONS)}
OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3



@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return OffsetCommitKey(group=group, topic=topic, partition=partition).encode(version=OFFSET_KEY_VERSION)


def group_key(group: str) -> bytes:
    return GroupMetadataKey(group=group).encode(version=GROUP_KEY_VERSION)


def offset_value(committed: CommittedOffset) -> bytes:
    # Version 1 is the only one with an expire timestamp (OffsetCommit v2-v4's retention).
    version = 1 if committed.expire_timestamp >= 0 else OFFSET_VALUE_VERSION
    return OffsetCommitValue(offset=committed.offset, leader_epoch=committed.leader_epoch,
                             metadata=committed.metadata, commit_timestamp=committed.commit_timestamp,
                             expire_timestamp=committed.expire_timestamp).encode(version=version)


def group_value(value: GroupMetadataValue) -> bytes:
    return value.encode(version=GROUP_VALUE_VERSION)


def family_key(family: str, kind: str, group: str, member: str | None = None) -> bytes:
    """The key of a ``family`` ("consumer", "share" or "streams") group record of ``kind``."""
    known, versions = _FAMILIES[family]
    version = versions[kind]
    fields = {"group_id": group} if member is None else {"group_id": group, "member_id": member}
    return known[version][1](**fields).encode(version=version)


def family_value_class(family: str, kind: str) -> type[ApiData]:
    known, versions = _FAMILIES[family]
    return known[versions[kind]][2]


def family_value(family: str, kind: str, **fields) -> bytes:
    return family_value_class(family, kind)(**fields).encode(version=0)


def consumer_key(kind: str, group: str, member: str | None = None) -> bytes:
    """The key of a consumer group record of ``kind`` (see CONSUMER_RECORDS)."""
    return family_key("consumer", kind, group, member)


def consumer_value(kind: str, **fields) -> bytes:
    return family_value("consumer", kind, **fields)


def decode(key: bytes, value: bytes | None):
    """``(("offset", group, topic, partition) | ("group", group) | ("consumer", "share" or "streams", kind, group,
    member or None), decoded value or None)``."""
    with decoding():
        version = key_version(key)
        if version in (0, 1):
            k = OffsetCommitKey.decode(key[2:], version=version, header=False)
            parsed = None
            if value is not None:
                v = OffsetCommitValue.decode(value)
                parsed = CommittedOffset(v.offset, getattr(v, "leader_epoch", -1), v.metadata or "",
                                         v.commit_timestamp, getattr(v, "expire_timestamp", -1))
            return ("offset", k.group, k.topic, k.partition), parsed
        if version == GROUP_KEY_VERSION:
            k = GroupMetadataKey.decode(key[2:], version=version, header=False)
            return ("group", k.group), None if value is None else GroupMetadataValue.decode(value)
        for family, (known, _) in _FAMILIES.items():
            if version in known:
                kind, key_class, value_class = known[version]
                k = key_class.decode(key[2:], version=version, header=False)
                return ((family, kind, k.group_id, getattr(k, "member_id", None)),
                        None if value is None else value_class.decode(value))
    raise unknown_key_version(version)


def now_ms() -> int:
    return int(time.time() * 1000)
