"""Which live broker owns which partition: a pure function every broker computes alike.

No controller writes an assignment: every broker derives the same owners from the
same inputs (the live broker ids and the topics), so ownership needs no election and
no extra writes, only the claims that make it safe (see gateway.ownership).

Rendezvous (highest-random-weight) hashing keeps moves few: a partition's brokers are
ranked by a hash of (topic, partition, broker), and a broker joining or leaving only
changes the partitions it wins or held. Pure rendezvous can pile several partitions of
a topic on one broker, so each broker takes at most ceil(partitions / brokers) of a
topic, and a partition whose first choice is full goes to its next choice: a topic's
partitions spread evenly, at the price of a few extra moves when the cap changes.

Placement overrides (metadata.placements: written by a reassignment or the balancer)
win over the hash while the broker they name is live. They are laid over the hashed
owners rather than counted against the cap, so a move changes the owner of the moved
partition only; an override naming a broker that is gone is ignored at once, and the
partition falls back to its hashed owner within the session timeout, as before.
"""
import hashlib
import math
from collections.abc import Mapping


def _weight(topic: str, partition: int, broker: int) -> bytes:
    return hashlib.blake2b(f"{topic}\0{partition}\0{broker}".encode(), digest_size=8).digest()


def assign(topic: str, partitions: int, brokers, overrides: Mapping[int, int] | None = None) -> list[int]:
    """The owner of each partition of ``topic`` among ``brokers`` (ids); [] if none is live.
    ``overrides``: partition -> the broker placed there, which owns it while it is live."""
    brokers = sorted(set(brokers))
    if not brokers:
        return []
    cap = math.ceil(partitions / len(brokers))
    load = dict.fromkeys(brokers, 0)
    owners = []
    for partition in range(partitions):
        ranked = sorted(brokers, key=lambda b: _weight(topic, partition, b), reverse=True)
        owner = next(b for b in ranked if load[b] < cap)
        load[owner] += 1
        owners.append(owner)
    for partition, placed in (overrides or {}).items():
        if partition < partitions and placed in load:
            owners[partition] = placed
    return owners
