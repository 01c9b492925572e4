"""``kgate mirror failover``: move a consumer group from one cluster to the other.

For every partition the group has committed on the cluster it leaves, the offset it
resumes from on the other cluster is translated from the offset syncs (translation.py):
forward through the routes leaving that cluster, backward through the routes coming
into it (records that came the other way), the smaller when both apply (an identity
topic holds both kinds). Nothing is skipped; records copied after the sync at or below
the group's offset are read again, at most ``offset.lag.max`` records or what one
``commit.interval.ms`` copies, per partition.
"""
from dataclasses import dataclass

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from .config import MirrorConfig
from .offset_syncs import TIMEOUT, SyncReadError, committed, read_syncs
from .routes import Route
from .translation import SyncHistory


class FailoverError(Exception):
    """The group cannot be moved as asked; the message says why."""


@dataclass(frozen=True)
class Step:
    topic: str
    partition: int
    offset: int
    to_topic: str | None
    to_offset: int | None
    how: str


def plan(config: MirrorConfig, routes: dict[str, Route], group: str, source: str, target: str) -> list[Step]:
    leaving = [r for r in routes.values() if (r.source, r.target) == (source, target)]
    coming = [r for r in routes.values() if (r.source, r.target) == (target, source)]
    if not leaving and not coming:
        raise FailoverError(f"no route between {source} and {target}: nothing to translate through")
    try:
        forward = read_syncs(config.cluster(source), target) if leaving else {}
        backward = read_syncs(config.cluster(target), source) if coming else {}
    except SyncReadError as exc:
        raise FailoverError(str(exc)) from None
    offsets = committed(AdminClient(config.cluster(source).client_config()), group)
    if not offsets:
        raise FailoverError(f"group {group!r} has no committed offsets on {source}")
    steps = []
    for tp in sorted(offsets, key=lambda t: (t.topic, t.partition)):
        candidates = _translations(tp, leaving, coming, forward, backward)
        if not candidates:
            steps.append(Step(tp.topic, tp.partition, tp.offset, None, None, "no offset sync yet"))
        for name, found in sorted(candidates.items()):
            offset = min(o for o, _ in found)
            steps.append(Step(tp.topic, tp.partition, tp.offset, name, offset, "+".join(sorted({h for _, h in found}))))
    return steps


def _translations(tp, leaving: list[Route], coming: list[Route], forward: dict, backward: dict) -> dict:
    """Where a committed offset lands on the other side: through the routes leaving for it
    (forward through their offset syncs) and those coming from it (back through theirs);
    topic -> [(offset, how)]."""
    candidates: dict[str, list[tuple[int, str]]] = {}
    for route in leaving:
        if route.matches(tp.topic):
            translated = SyncHistory(forward.get((tp.topic, tp.partition), [])).forward(tp.offset)
            if translated is not None:
                candidates.setdefault(route.target_topic(tp.topic), []).append((translated, "forward"))
    for route in coming:
        origin = route.source_topic(tp.topic)
        if origin is not None and route.matches(origin):
            history = SyncHistory(backward.get((origin, tp.partition), []))
            translated = history.reverse(tp.offset, dense=route.policy == "prefix")
            if translated is not None:
                candidates.setdefault(origin, []).append((translated, "reverse"))
    return candidates


def execute(config: MirrorConfig, group: str, target: str, steps: list[Step]) -> int:
    """Commit the translated offsets for ``group`` on ``target``; refused while the group is active there."""
    admin = AdminClient(config.cluster(target).client_config())
    description = admin.describe_consumer_groups([group])[group].result(TIMEOUT)
    if description.members:
        raise FailoverError(f"group {group!r} has {len(description.members)} active member(s) on {target}: "
                            f"stop them first (offsets of an active group cannot be set)")
    partitions = [TopicPartition(s.to_topic, s.partition, s.to_offset) for s in steps
                  if s.to_topic is not None and s.to_offset is not None]
    if partitions:
        admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, partitions)])[group].result(TIMEOUT)
    return len(partitions)
