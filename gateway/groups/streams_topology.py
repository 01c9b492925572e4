"""A streams group's topology against the cluster's topics: its tasks, or what stops them.

A Kafka Streams application states its topology when a member joins: per subtopology the
topics it reads (by name or regular expression), the repartition topics it writes and
reads, its state changelogs and which source topics must be co-partitioned. The broker,
not the application, decides the partition counts of the internal topics and creates
them, as Kafka's ``InternalTopicManager`` does:

- a repartition topic without a fixed count gets the largest task count of the
  subtopologies writing to it (worked out until nothing changes, as they may chain);
- co-partitioned topics must agree; repartition topics among them take the others' count;
- a subtopology has one task per partition of its largest source topic, and each of its
  changelogs one partition per task.

Source topics missing, co-partitioned topics that disagree, or internal topics of the
wrong size give the group a status instead of tasks; internal topics missing are created
(they carry the configs the application asked for) and reported missing until they exist.
"""
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from .subscription_regex import InvalidRegex, compile_regex

Topics = Mapping[str, tuple[uuid.UUID, int]]

# Kafka's StreamsGroupHeartbeatResponse status codes.
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4


@dataclass(slots=True)
class Configured:
    tasks: dict[str, int] = field(default_factory=dict)  # subtopology id -> task count; empty unless ready
    status: list[tuple[int, str]] = field(default_factory=list)
    # Internal topics to create: name -> (partitions, configs).
    missing: dict[str, tuple[int, dict[str, str]]] = field(default_factory=dict)
    # The partition counts of every topic the topology uses that exists (a change moves the group epoch).
    signature: dict[str, int] = field(default_factory=dict)
    # The partition count each internal topic is to have, once the source topics are all there.
    partitions: dict[str, int] = field(default_factory=dict)


def sources(subtopology, topics: Topics, internal) -> list[str]:
    """A subtopology's source topics: by name, and the cluster's topics its expressions match."""
    names = list(subtopology.source_topics)
    for regex in subtopology.source_topic_regex:
        try:
            pattern = compile_regex(regex)
        except InvalidRegex:
            continue
        names += sorted(name for name in topics if not internal(name) and pattern.fullmatch(name))
    return names


def source_subtopologies(topology) -> dict[str, str]:
    """The subtopology reading each topic the topology names as a source (repartition topics
    included), as Kafka's sourceTopicMap: a committed partition's task is that subtopology's."""
    return {name: s.subtopology_id for s in topology.subtopologies
            for name in (*s.source_topics, *(t.name for t in s.repartition_source_topics))}


def configure(topology, topics: Topics, internal=lambda _name: False) -> Configured:
    counts = {name: count for name, (_, count) in topics.items()}
    subtopologies = list(topology.subtopologies)
    made = {t.name for s in subtopologies for t in s.repartition_source_topics}
    read = {s.subtopology_id: [name for name in sources(s, topics, internal) if name not in made]
            for s in subtopologies}
    out = Configured()
    used = {name for names in read.values() for name in names}
    used |= {t.name for s in subtopologies for t in (*s.repartition_source_topics, *s.state_changelog_topics)}
    out.signature = {name: counts[name] for name in sorted(used) if name in counts}
    missing = sorted({name for names in read.values() for name in names if name not in counts})
    if missing:
        out.status.append((MISSING_SOURCE_TOPICS, f"Source topics {', '.join(missing)} are missing."))
        return out
    repartition = _repartition_counts(subtopologies, read, counts)
    problem = _copartition(subtopologies, read, counts, repartition)
    if problem is not None:
        out.status.append((INCORRECTLY_PARTITIONED_TOPICS, problem))
        return out
    tasks = {s.subtopology_id: max([counts[name] for name in read[s.subtopology_id]]
                                   + [repartition.get(t.name, 0) for t in s.repartition_source_topics], default=0)
             for s in subtopologies}
    wanted: dict[str, tuple[int, dict[str, str]]] = {}
    for s in subtopologies:
        for info in s.repartition_source_topics:
            wanted[info.name] = repartition.get(info.name, 0), {c.key: c.value for c in info.topic_configs}
        for info in s.state_changelog_topics:
            wanted[info.name] = tasks[s.subtopology_id], {c.key: c.value for c in info.topic_configs}
    out.partitions = {name: partitions for name, (partitions, _) in wanted.items()}
    wrong = sorted(name for name, (partitions, _) in wanted.items() if name in counts and counts[name] != partitions)
    if wrong:
        out.status.append((INCORRECTLY_PARTITIONED_TOPICS,
                           f"Internal topics {', '.join(wrong)} have the wrong number of partitions."))
        return out
    out.missing = {name: want for name, want in wanted.items() if name not in counts and want[0] > 0}
    if out.missing:
        out.status.append((MISSING_INTERNAL_TOPICS, f"Internal topics are missing: {', '.join(sorted(out.missing))}"))
        return out
    out.tasks = tasks
    return out


def _repartition_counts(subtopologies, read: dict[str, list[str]], counts: dict[str, int]) -> dict[str, int]:
    """Each repartition topic's partition count: fixed, or the largest task count of the
    subtopologies writing to it, repeated until no count moves (chains settle in as many
    rounds as there are subtopologies)."""
    fixed = {t.name: t.partitions for s in subtopologies for t in s.repartition_source_topics if t.partitions > 0}
    result = dict(fixed)
    for _ in range(len(subtopologies) + 1):
        moved = False
        for s in subtopologies:
            known = [counts[name] for name in read[s.subtopology_id]]
            known += [result[t.name] for t in s.repartition_source_topics if t.name in result]
            if not known:
                continue
            for sink in s.repartition_sink_topics:
                if sink not in fixed and result.get(sink, 0) < max(known):
                    result[sink], moved = max(known), True
        if not moved:
            break
    return result


def _copartition(subtopologies, read: dict[str, list[str]], counts: dict[str, int],
                 repartition: dict[str, int]) -> str | None:
    """Make co-partitioned repartition topics agree with their group; the problem, if any."""
    for s in subtopologies:
        fixed = {t.name for t in s.repartition_source_topics if t.partitions > 0}
        for group in s.copartition_groups:
            external = [s.source_topics[i] for i in group.source_topics if i < len(s.source_topics)]
            internal = [s.repartition_source_topics[i].name for i in group.repartition_source_topics
                        if i < len(s.repartition_source_topics)]
            sizes = {counts[name] for name in external} | {repartition[name] for name in internal if name in fixed}
            if len(sizes) > 1:
                return f"Following topics do not have the same number of partitions: [{', '.join(sorted(external))}]"
            size = sizes.pop() if sizes else max((repartition.get(name, 0) for name in internal), default=0)
            for name in internal:
                repartition[name] = size
    return None
