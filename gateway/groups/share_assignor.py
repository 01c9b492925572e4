"""Kafka's simple share-group assignor (KIP-932): which members read which partitions.

Members of a share group may share a partition, since each record is handed to one of
them at a time. Kafka's ``SimpleAssignor`` rules: each member is hashed to one of the
partitions it subscribes to; partitions no member hashed to and no member holds are
dealt round-robin among the members subscribing to their topic; and members keep what
they hold of topics they still subscribe to. So every member reads something when
there are more members than partitions, and every partition is read when there are
fewer.
"""
import uuid
from collections import defaultdict

from .placement import java_string_hash

TopicPartition = tuple[uuid.UUID, int]
Partitions = dict[uuid.UUID, set[int]]


def assign(subscriptions: dict[str, list[uuid.UUID]], partition_counts: dict[uuid.UUID, int],
           current: dict[str, Partitions]) -> dict[str, Partitions]:
    """``subscriptions``: each member's subscribed topic ids, in member order; ``current``: what
    each member holds now. Every member gets an entry, empty when it gets nothing."""
    targets = {member: [(topic, p) for topic in sorted(topics) for p in range(partition_counts.get(topic, 0))]
               for member, topics in subscriptions.items()}
    chosen: dict[TopicPartition, list[str]] = defaultdict(list)
    for member, partitions in targets.items():
        if partitions:
            chosen[partitions[abs(java_string_hash(member)) % len(partitions)]].append(member)
    held = {(topic, p) for partitions in current.values() for topic, parts in partitions.items() for p in parts}
    subscribers: dict[uuid.UUID, list[str]] = defaultdict(list)
    for member, topics in subscriptions.items():
        for topic in sorted(topics):
            subscribers[topic].append(member)
    unassigned: dict[uuid.UUID, list[TopicPartition]] = defaultdict(list)
    for partitions in targets.values():
        for tp in partitions:
            if tp not in chosen and tp not in held and tp not in unassigned[tp[0]]:
                unassigned[tp[0]].append(tp)
    for topic, partitions in unassigned.items():
        for i, tp in enumerate(partitions):
            chosen[tp].append(subscribers[topic][i % len(subscribers[topic])])
    result: dict[str, Partitions] = {member: {} for member in subscriptions}
    for member, holding in current.items():
        for topic, parts in holding.items():
            if member in result and topic in subscriptions[member]:
                result[member].setdefault(topic, set()).update(p for p in parts if p < partition_counts.get(topic, 0))
    for (topic, p), members in chosen.items():
        for member in members:
            result[member].setdefault(topic, set()).add(p)
    return result
