"""Kafka's simple share-group assignor (KIP-932, as Kafka 4.1 on balances it): which members read which partitions.

Members of a share group may share a partition, since each record is handed to one of
them at a time, but a member reads faster from partitions it does not share: so the
assignor balances first and keeps what members hold second. Each partition is read by
``ceil(members / partitions)`` members (one while there are at least as many partitions
as members), and the members' counts differ by one at most. What a member holds stays
with it while that holds: a member over its count gives up the excess, a partition read
by more members than it should be loses the excess, and what is left unread goes to the
members still under their count. When every member subscribes to the same topics the
balance is over all their partitions together; otherwise it is struck topic by topic,
among the members subscribing to each.
"""
import math
import uuid

TopicPartition = tuple[uuid.UUID, int]
Partitions = dict[uuid.UUID, set[int]]


def assign(subscriptions: dict[str, list[uuid.UUID]], partition_counts: dict[uuid.UUID, int],
           current: dict[str, Partitions]) -> dict[str, Partitions]:
    """``subscriptions``: each member's subscribed topic ids, in member order; ``current``: what
    each member holds now. Every member gets an entry, empty when it gets nothing."""
    held = {member: {(topic, p) for topic, parts in current.get(member, {}).items() for p in parts}
            for member in subscriptions}
    topics = sorted({topic for subscribed in subscriptions.values() for topic in subscribed})
    if len({frozenset(subscribed) for subscribed in subscriptions.values()}) <= 1:
        groups = [(list(subscriptions), topics)]
    else:
        groups = [([m for m, subscribed in subscriptions.items() if topic in subscribed], [topic]) for topic in topics]
    result: dict[str, Partitions] = {member: {} for member in subscriptions}
    for members, group_topics in groups:
        targets = [(topic, p) for topic in group_topics for p in range(partition_counts.get(topic, 0))]
        for member, partitions in _balance(members, targets, held).items():
            for topic, p in partitions:
                result[member].setdefault(topic, set()).add(p)
    return result


def _balance(members: list[str], targets: list[TopicPartition],
             held: dict[str, set[TopicPartition]]) -> dict[str, set[TopicPartition]]:
    """The balanced assignment of ``targets`` among ``members``, moving as little of ``held`` as it may."""
    if not members or not targets:
        return {}
    sharing = math.ceil(len(members) / len(targets))
    share = sharing * len(targets) / len(members)
    wanted = {member: math.ceil(share * (i + 1)) - math.ceil(share * i) for i, member in enumerate(members)}
    wanted_set = set(targets)
    kept = {member: sorted(held.get(member, set()) & wanted_set)[:wanted[member]] for member in members}
    readers: dict[TopicPartition, list[str]] = {tp: [] for tp in targets}
    for member in members:
        for tp in kept[member]:
            readers[tp].append(member)
    for tp, members_of in readers.items():
        for member in members_of[sharing:]:  # read by more members than the balance wants
            kept[member].remove(tp)
        del members_of[sharing:]
    assigned = {member: set(parts) for member, parts in kept.items()}
    _fill(members, targets, readers, assigned, wanted, sharing)
    return assigned


def _fill(members: list[str], targets: list[TopicPartition], readers: dict[TopicPartition, list[str]],
          assigned: dict[str, set[TopicPartition]], wanted: dict[str, int], sharing: int) -> None:
    """Deal the partitions read by too few members to the members under their count, in turn;
    a partition every such member already reads is left as it is."""
    unfilled = [member for member in members if len(assigned[member]) < wanted[member]]
    turn = 0
    for tp in targets:
        if not unfilled:
            return
        tried = 0
        while len(readers[tp]) < sharing and tried < len(unfilled):
            turn %= len(unfilled)
            member = unfilled[turn]
            if tp in assigned[member]:
                turn, tried = turn + 1, tried + 1
                continue
            assigned[member].add(tp)
            readers[tp].append(member)
            tried = 0
            if len(assigned[member]) >= wanted[member]:
                unfilled.pop(turn)
                if not unfilled:
                    return
            else:
                turn += 1
