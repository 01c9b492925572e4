"""Routes: which topics of a source cluster go to which target cluster, under which name.

A route is one (source, target) pair with topic patterns (shell globs) and a naming
policy: ``prefix`` names the copy ``<source>.<topic>`` (MirrorMaker 2's
DefaultReplicationPolicy), ``identity`` keeps the name (a two-way hot standby).

Identity copies share a name with the original, so without care a record would travel
forever. Every mirrored record carries its origin cluster in a header, and a record is
never sent to its origin; that alone stops the two-way loop, but not every loop: with
dc1 <-> dc2 and dc3 -> both, dc3's records would bounce between dc1 and dc2. The
precise rule is per origin: the identity routes that may carry a topic, with every
route into the origin removed, must form a tree from the origin (no cycle: a loop; no
second path to a cluster: a duplicate). A route set that breaks it is refused when a
route is added.
"""
import fnmatch
from dataclasses import dataclass

POLICIES = ("prefix", "identity")
GLOB_CHARACTERS = "*?["
SEPARATOR = "."
ORIGIN_HEADER = "kgate.mirror.origin"


class RouteError(Exception):
    """A route that cannot be added or removed as asked; the message says why."""


@dataclass(frozen=True)
class Route:
    source: str
    target: str
    topics: tuple[str, ...]
    policy: str = "prefix"

    @property
    def name(self) -> str:
        return route_name(self.source, self.target)

    def matches(self, topic: str) -> bool:
        """Whether this route carries ``topic`` of its source. Internal topics never go,
        nor (prefix policy) topics that are themselves copies from the target: MirrorMaker 2
        skips those too, or two prefix routes would copy ``dc1.dc2.dc1.orders``."""
        if is_internal(topic):
            return False
        if self.policy == "prefix" and topic.startswith(self.target + SEPARATOR):
            return False
        return any(fnmatch.fnmatchcase(topic, pattern) for pattern in self.topics)

    def target_topic(self, topic: str) -> str:
        return f"{self.source}{SEPARATOR}{topic}" if self.policy == "prefix" else topic

    def source_topic(self, target_topic: str) -> str | None:
        """The source topic ``target_topic`` is the copy of, or None when it is not one of ours."""
        if self.policy == "identity":
            return target_topic
        prefix = self.source + SEPARATOR
        return target_topic[len(prefix):] if target_topic.startswith(prefix) else None

    def to_json(self) -> dict:
        return {"source": self.source, "target": self.target, "topics": list(self.topics), "policy": self.policy}

    @classmethod
    def from_json(cls, body: dict) -> "Route":
        return cls(body["source"], body["target"], tuple(body["topics"]), body.get("policy", "prefix"))


def route_name(source: str, target: str) -> str:
    return f"{source}:{target}"


def parse_route_name(name: str) -> tuple[str, str]:
    source, sep, target = name.partition(":")
    if not sep or not source or not target:
        raise RouteError(f"a route is named SOURCE:TARGET, got {name!r}")
    return source, target


def is_internal(topic: str) -> bool:
    """Kafka's internal topics and MirrorMaker 2's own (offset-syncs, checkpoints, heartbeats)."""
    return topic.startswith("__") or topic.endswith(".internal") or topic == "heartbeats" \
        or topic.endswith(".heartbeats")


def parse_topics(text: str) -> tuple[str, ...]:
    """``'orders,payments-*'`` as patterns; RouteError for an empty list or a bad pattern."""
    patterns = tuple(p.strip() for p in text.split(",") if p.strip())
    if not patterns:
        raise RouteError("--topics needs at least one topic or pattern")
    for pattern in patterns:
        if any(c.isspace() for c in pattern):
            raise RouteError(f"topic pattern {pattern!r} contains whitespace")
        if pattern.count("[") != pattern.count("]"):
            raise RouteError(f"topic pattern {pattern!r} has an unclosed [")
    return patterns


def merge(routes: dict[str, Route], new: Route) -> Route:
    """``new`` merged into the existing route of the same pair (patterns added), or
    RouteError when it cannot be: a route onto itself, a different policy, or a loop."""
    if new.source == new.target:
        raise RouteError(f"a route from {new.source} to itself would copy every record forever")
    if new.policy not in POLICIES:
        raise RouteError(f"policy must be one of {', '.join(POLICIES)}, got {new.policy!r}")
    existing = routes.get(new.name)
    if existing is not None and existing.policy != new.policy:
        raise RouteError(f"route {new.name} exists with policy {existing.policy}; remove it first to change policy")
    topics = existing.topics + tuple(t for t in new.topics if t not in existing.topics) if existing else new.topics
    merged = Route(new.source, new.target, topics, new.policy)
    check_loops({**routes, merged.name: merged}, merged)
    return merged


def patterns_may_overlap(a: str, b: str) -> bool:
    """Whether some topic name could match both patterns. Exact for literals; for two
    globs it answers yes unless their literal beginnings already differ (erring towards
    refusing a route over letting a loop through)."""
    if not any(c in a for c in GLOB_CHARACTERS) or not any(c in b for c in GLOB_CHARACTERS):
        return fnmatch.fnmatchcase(a, b) or fnmatch.fnmatchcase(b, a)
    head_a, head_b = _literal_head(a), _literal_head(b)
    return head_a.startswith(head_b) or head_b.startswith(head_a)


def _literal_head(pattern: str) -> str:
    cut = min((pattern.index(c) for c in GLOB_CHARACTERS if c in pattern), default=len(pattern))
    return pattern[:cut]


def check_loops(routes: dict[str, Route], added: Route) -> None:
    """RouteError when ``routes`` would loop or duplicate some topic the route ``added`` carries."""
    if added.policy != "identity":
        return
    for pattern in added.topics:
        edges = {(r.source, r.target) for r in routes.values() if r.policy == "identity"
                 and any(patterns_may_overlap(pattern, p) for p in r.topics)}
        problem = _origin_problem(edges)
        if problem:
            raise RouteError(f"refused: with this route, topics matching {pattern!r} would {problem}")


def topic_loops(routes: list[Route], topic: str) -> str | None:
    """The reason the identity routes carrying the concrete ``topic`` would loop, or None."""
    return _origin_problem({(r.source, r.target) for r in routes if r.policy == "identity" and r.matches(topic)})


def _origin_problem(edges: set[tuple[str, str]]) -> str | None:
    """For every origin, walk every path of identity routes that never re-enters the
    origin; a path that meets itself is a loop, two paths to one cluster a duplicate."""
    clusters = {c for edge in edges for c in edge}
    for origin in sorted(clusters):
        reached: dict[str, list[str]] = {}
        stack = [[origin]]
        while stack:
            path = stack.pop()
            for source, target in sorted(edges):
                if source != path[-1] or target == origin:
                    continue
                if target in path:
                    return f"loop: records from {origin} would travel {' -> '.join(path + [target])} and on"
                if target in reached:
                    return (f"arrive twice: records from {origin} would reach {target} by "
                            f"{' -> '.join(reached[target])} and by {' -> '.join(path + [target])}")
                reached[target] = path + [target]
                stack.append(path + [target])
    return None
