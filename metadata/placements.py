"""Placement overrides: partitions placed on a broker by a reassignment or the balancer.

One node holds them all, ``/placements`` = ``{"topic": {"partition": broker id}}``, so a
balancer's round of moves lands in one compare-and-set and every broker sees it with
one watch. They are few: a partition whose override names its hashed owner drops it.
Every broker lays them over the hashed owners (metadata.assignment), so all compute the
same owners from the same metadata; an override naming a broker that is not live is
ignored, and the balancer removes it, so a returning broker does not pull back what it
once held.
"""
import json
from collections.abc import Callable

from .store import MetadataStore, update_node

PLACEMENTS = "/placements"

# topic -> partition -> broker id
Overrides = dict[str, dict[int, int]]


def decode(data: bytes | None) -> Overrides:
    if not data:
        return {}
    return {topic: {int(index): broker for index, broker in placed.items()}
            for topic, placed in json.loads(data).items()}


def encode(overrides: Overrides) -> bytes | None:
    kept = {topic: {str(index): broker for index, broker in sorted(placed.items())}
            for topic, placed in sorted(overrides.items()) if placed}
    return json.dumps(kept).encode() if kept else None


async def read(store: MetadataStore) -> Overrides:
    node = await store.get(PLACEMENTS)
    return decode(node.data if node is not None else None)


async def change(store: MetadataStore, edit: Callable[[Overrides], None]) -> None:
    """Apply ``edit`` to the overrides as they are when written (compare-and-set, again on a lost
    race); nothing is written when it changes nothing, so no broker is woken for nothing."""
    node = await store.get(PLACEMENTS)
    overrides = decode(node.data if node is not None else None)
    edit(overrides)
    if encode(overrides) == (node.data if node is not None else None):
        return

    def changed(data: bytes | None) -> bytes | None:
        overrides = decode(data)
        edit(overrides)
        return encode(overrides)

    await update_node(store, PLACEMENTS, changed)
