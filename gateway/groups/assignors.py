"""Server-side assignors of KIP-848 consumer groups: ``uniform`` and ``range``.

An assignor maps members to partitions from what they subscribe to; the coordinator
computes it when the group epoch moves and reconciles members towards it. Both are
deterministic (members and topics are taken in sorted order), so a coordinator that
replays the group computes the same target as the one before it.

- ``uniform`` spreads every subscribed partition evenly, and is sticky: a member keeps
  the partitions of its previous target up to its fair share, so a join or a leave
  moves only what balance requires.
- ``range`` gives each member a contiguous range of every topic it subscribes to, the
  same ranges for topics of equal size (co-partitioned joins), as the classic range
  assignor does.
"""
from collections.abc import Callable, Mapping
from typing import Any

Partitions = dict[Any, set[int]]  # topic id -> partitions
# (member id -> subscribed topic ids, topic id -> partition count, member id -> previous target)
Assignor = Callable[[Mapping[str, set[Any]], Mapping[Any, int], Mapping[str, Partitions]], dict[str, Partitions]]


def uniform(subscriptions: Mapping[str, set[Any]], partition_counts: Mapping[Any, int],
            previous: Mapping[str, Partitions]) -> dict[str, Partitions]:
    members = sorted(subscriptions)
    result: dict[str, Partitions] = {m: {} for m in members}
    wanted = [(topic, p) for topic in sorted({t for ts in subscriptions.values() for t in ts if t in partition_counts})
              for p in range(partition_counts[topic])]
    if not members:
        return result
    counts = dict.fromkeys(members, 0)
    taken = _keep_previous(members, subscriptions, partition_counts, previous, len(wanted), result, counts)
    for topic, p in wanted:
        if (topic, p) not in taken:
            member = min((m for m in members if topic in subscriptions[m]), key=lambda m: (counts[m], m))
            result[member].setdefault(topic, set()).add(p)
            counts[member] += 1
    return result


def _keep_previous(members: list[str], subscriptions: Mapping[str, set[Any]], partition_counts: Mapping[Any, int],
                   previous: Mapping[str, Partitions], total: int, result: dict[str, Partitions],
                   counts: dict[str, int]) -> set[tuple[Any, int]]:
    """Each member keeps up to the even share (rounded down) of its previous target, then as
    many members as the remainder allows keep one more; returns what was kept (the rest goes
    to the least loaded subscriber)."""
    keep, extra = divmod(total, len(members))
    taken: set[tuple[Any, int]] = set()
    kept = {m: [(topic, p) for topic, parts in sorted(previous.get(m, {}).items()) for p in sorted(parts)
                if topic in subscriptions[m] and p < partition_counts.get(topic, 0)] for m in members}
    for limit in (keep, keep + 1):
        for member in members:
            for topic, p in kept[member]:
                if counts[member] >= limit or (limit > keep and extra == 0):
                    break
                if (topic, p) not in taken:
                    result[member].setdefault(topic, set()).add(p)
                    taken.add((topic, p))
                    counts[member] += 1
                    if limit > keep:
                        extra -= 1
    return taken


def range_(subscriptions: Mapping[str, set[Any]], partition_counts: Mapping[Any, int],
           previous: Mapping[str, Partitions]) -> dict[str, Partitions]:
    result: dict[str, Partitions] = {m: {} for m in subscriptions}
    for topic in sorted({t for ts in subscriptions.values() for t in ts if t in partition_counts}):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        count = partition_counts[topic]
        base, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            size = base + (1 if i < extra else 0)
            if size:
                result[member][topic] = set(range(start, start + size))
            start += size
    return result


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
# Kafka's broker setting names the assignors by class; both spellings are accepted.
CLASS_NAMES = {"org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
               "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range"}


def assignor_name(name: str) -> str | None:
    """The assignor a configured or requested name stands for, or None if there is none."""
    name = CLASS_NAMES.get(name.strip(), name.strip())
    return name if name in ASSIGNORS else None
