"""The balancer's rule: which partitions to move, given what each carries and where it is.

Pure: loads, owners, zones, limits and the clock go in, moves come out; the balancer
(gateway.balancer) reads the inputs from the store and writes the moves as placement
overrides (metadata.placements). Storage is shared, so a move copies nothing: it costs
the partition's clients one retriable error and a metadata refresh, and the new owner
the opening of its log. Hence few moves, each worth making:

- By load first: the most loaded broker above the mean by more than the tolerance gives
  the least loaded one the partition whose load is nearest half their difference, and
  only one that narrows it (a partition hotter than the gap would just swap the roles).
- Then by count: a broker holding two or more partitions more than another gives it its
  coolest partition, if that keeps the receiver within the tolerance of the mean load.
- A partition moved is not moved again within the cooldown (its new owner's load report
  has to show it first), and a round makes at most ``max_moves`` moves.

Zones get their fair share because brokers do: with every broker within the tolerance
of the mean load and within one partition of each other, each zone's brokers carry the
zone's share of both. Between equally loaded targets the one in the less loaded zone wins.
"""
from collections.abc import Mapping
from dataclasses import dataclass

Key = tuple[str, int]


@dataclass(frozen=True)
class Limits:
    max_moves: int  # moves per round
    cooldown: float  # seconds before a moved partition may move again
    tolerance: float = 0.1  # a broker within this fraction above the mean load is balanced


@dataclass(frozen=True)
class Move:
    topic: str
    partition: int
    source: int
    target: int
    load: float  # the partition's bytes in and out per second when it was moved
    reason: str  # "load" or "count"


class _Cluster:
    """Brokers' loads and partitions as the plan's moves change them."""

    def __init__(self, loads: Mapping[Key, float], owners: Mapping[Key, int], zones: Mapping[int, str | None]):
        self.loads = loads
        self.zones = zones
        self.held: dict[int, set[Key]] = {broker: set() for broker in zones}
        for key, owner in owners.items():
            if owner in self.held:
                self.held[owner].add(key)
        self.load = {broker: sum(loads.get(key, 0.0) for key in keys) for broker, keys in self.held.items()}
        self.mean = sum(self.load.values()) / len(zones)

    def zone_load(self, broker: int) -> float:
        """The mean load of the brokers in ``broker``'s zone."""
        peers = [other for other, zone in self.zones.items() if zone == self.zones[broker]]
        return sum(self.load[other] for other in peers) / len(peers)

    def target_order(self, broker: int) -> tuple:
        return self.load[broker], self.zone_load(broker), len(self.held[broker]), broker

    def apply(self, key: Key, source: int, target: int) -> None:
        self.held[source].discard(key)
        self.held[target].add(key)
        load = self.loads.get(key, 0.0)
        self.load[source] -= load
        self.load[target] += load


def plan(loads: Mapping[Key, float], owners: Mapping[Key, int], zones: Mapping[int, str | None], limits: Limits,
         moved_at: Mapping[Key, float], now: float) -> list[Move]:
    """The moves to make now. ``loads``: bytes in and out per second by partition; ``owners``:
    each partition's owner; ``zones``: every live broker's zone (None: no zone); ``moved_at``:
    when partitions were last moved, on the clock ``now`` reads."""
    if len(zones) < 2:
        return []
    cluster = _Cluster(loads, owners, zones)
    moves: list[Move] = []

    def movable(key: Key) -> bool:
        last = moved_at.get(key)
        return (last is None or now - last >= limits.cooldown) and all(
            (move.topic, move.partition) != key for move in moves)

    while len(moves) < limits.max_moves:
        move = _by_load(cluster, limits, movable) or _by_count(cluster, limits, movable)
        if move is None:
            break
        cluster.apply((move.topic, move.partition), move.source, move.target)
        moves.append(move)
    return moves


def _by_load(cluster: _Cluster, limits: Limits, movable) -> Move | None:
    ceiling = cluster.mean * (1 + limits.tolerance)
    target = min(cluster.zones, key=cluster.target_order)
    for source in sorted(cluster.zones, key=lambda b: cluster.load[b], reverse=True):
        if cluster.load[source] <= ceiling or source == target:
            return None
        gap = cluster.load[source] - cluster.load[target]
        fits = [key for key in cluster.held[source] if movable(key) and 0 < cluster.loads.get(key, 0.0) < gap]
        if fits:
            best = min(fits, key=lambda key: (abs(cluster.loads.get(key, 0.0) - gap / 2), key))
            return Move(best[0], best[1], source, target, cluster.loads.get(best, 0.0), "load")
    return None


def _by_count(cluster: _Cluster, limits: Limits, movable) -> Move | None:
    source = max(cluster.zones, key=lambda b: (len(cluster.held[b]), cluster.load[b], -b))
    target = min(cluster.zones, key=lambda b: (len(cluster.held[b]), cluster.load[b], b))
    if len(cluster.held[source]) - len(cluster.held[target]) <= 1:
        return None
    room = cluster.mean * (1 + limits.tolerance) - cluster.load[target]
    fits = [key for key in cluster.held[source] if movable(key) and cluster.loads.get(key, 0.0) <= max(room, 0.0)]
    if not fits:
        return None
    coolest = min(fits, key=lambda key: (cluster.loads.get(key, 0.0), key))
    return Move(coolest[0], coolest[1], source, target, cluster.loads.get(coolest, 0.0), "count")
