"""The consumer's embedded protocol: what a classic consumer puts in JoinGroup and SyncGroup.

A classic group's broker never reads these bytes; a consumer group serving classic
members must (KIP-848's online migration): their subscriptions and owned partitions
come from JoinGroup's protocol metadata, and their assignments go back in SyncGroup
as a ConsumerProtocol assignment, at the version the member's metadata carries.
Partitions travel by topic name there and by topic id in the group: a topic the
cluster no longer has is dropped on the way in.
"""
import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from .modern_group import Partitions

Topics = Mapping[str, tuple[uuid.UUID, int]]
_VERSION = struct.Struct(">h")
_MAX_VERSION = 3  # the newest ConsumerProtocol version of subscriptions and assignments


class MalformedProtocol(ValueError):
    """Bytes that are no ConsumerProtocol subscription or assignment."""


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: list[str]
    owned: Partitions
    rack_id: str | None


def subscription(metadata: bytes, topics: Topics) -> Subscription:
    try:
        decoded = ConsumerProtocolSubscription.decode(metadata)
    except (ValueError, EOFError, struct.error, TypeError) as exc:
        raise MalformedProtocol(f"not a consumer subscription: {exc}") from None
    owned = _by_id([(tp.topic, tp.partitions) for tp in getattr(decoded, "owned_partitions", None) or []], topics)
    return Subscription(list(decoded.topics), owned, getattr(decoded, "rack_id", None))


def assignment(data: bytes, topics: Topics) -> Partitions:
    """A classic member's assignment as the group keeps it (no bytes: nothing assigned yet)."""
    if not data:
        return {}
    try:
        decoded = ConsumerProtocolAssignment.decode(data)
    except (ValueError, EOFError, struct.error, TypeError) as exc:
        raise MalformedProtocol(f"not a consumer assignment: {exc}") from None
    return _by_id([(tp.topic, tp.partitions) for tp in decoded.assigned_partitions], topics)


def encode_assignment(partitions: Partitions, topics: Topics, metadata: bytes) -> bytes:
    """``partitions`` as a ConsumerProtocol assignment at the version of the member's ``metadata``."""
    names = {topic_id: name for name, (topic_id, _) in topics.items()}
    version = min(max(_VERSION.unpack_from(metadata)[0], 0), _MAX_VERSION) if len(metadata) >= 2 else 0
    listed = [ConsumerProtocolAssignment.TopicPartition(topic=names[topic_id], partitions=sorted(parts))
              for topic_id, parts in sorted(partitions.items(), key=lambda item: names.get(item[0], ""))
              if topic_id in names and parts]
    return ConsumerProtocolAssignment(assigned_partitions=listed, user_data=None).encode(version=version)


def _by_id(named: list[tuple[str, list[int]]], topics: Topics) -> Partitions:
    out: Partitions = {}
    for name, parts in named:
        if name in topics and parts:
            out.setdefault(topics[name][0], set()).update(parts)
    return out
