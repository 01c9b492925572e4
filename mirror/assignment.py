"""Which worker copies which partition: by workload, moving as little as possible.

uReplicator's two lessons: a partition count says nothing about load (one partition
may carry a hundred times another's bytes), and a rebalance that stops every partition
to move a few stalls the whole mirror. So a partition weighs its bytes-in rate times a
lag factor (a partition that is behind needs more of a worker), placements survive
every change they can (a partition moves only when its worker died or a worker is
overloaded), and a rebalance moves the single partition that best closes the gap
between the heaviest and the lightest worker, one at a time, until no worker is above
the mean by more than the threshold.
"""
from .state import Item

# Every partition weighs at least this (bytes/s), so idle or new partitions still spread.
MIN_WEIGHT = 1024.0


def weight(rate: float, lag_seconds: float, lag_factor: float) -> float:
    return (max(rate, 0.0) + MIN_WEIGHT) * (1.0 + lag_factor * max(lag_seconds, 0.0))


def assign(current: dict[str, list[Item]], items: set[Item], workers: list[str], weights: dict[Item, float],
           threshold: float, rebalance: bool) -> tuple[dict[str, list[Item]], int]:
    """The new assignment and how many partitions a rebalance moved between live workers."""
    if not workers:
        return {}, 0
    kept: dict[str, list[Item]] = {w: [] for w in workers}
    placed = set()
    for worker, owned in current.items():
        if worker in kept:
            for item in owned:
                item = (item[0], item[1], int(item[2]))
                if item in items and item not in placed:
                    kept[worker].append(item)
                    placed.add(item)

    loads = {w: sum(weights.get(i, MIN_WEIGHT) for i in owned) for w, owned in kept.items()}
    for item in sorted(items - placed, key=lambda i: (-weights.get(i, MIN_WEIGHT), i)):
        lightest = min(workers, key=lambda w: (loads[w], w))
        kept[lightest].append(item)
        loads[lightest] += weights.get(item, MIN_WEIGHT)
    moves = _rebalance(kept, loads, weights, threshold) if rebalance else 0
    return {w: sorted(owned) for w, owned in kept.items()}, moves


def _rebalance(kept: dict[str, list[Item]], loads: dict[str, float], weights: dict[Item, float],
               threshold: float) -> int:
    moves = 0
    mean = sum(loads.values()) / len(loads)
    for _ in range(sum(len(owned) for owned in kept.values())):
        heaviest = max(kept, key=lambda w: (loads[w], w))
        lightest = min(kept, key=lambda w: (loads[w], w))
        gap = loads[heaviest] - loads[lightest]
        if loads[heaviest] <= mean * (1 + threshold) or gap <= 0:
            break
        # Moving an item of weight x leaves the pair at (H - x, L + x): it helps when x < gap,
        # most when x is nearest gap / 2.
        candidates = [i for i in kept[heaviest] if weights.get(i, MIN_WEIGHT) < gap]
        if not candidates:
            break
        best = min(candidates, key=lambda i: (abs(gap / 2 - weights.get(i, MIN_WEIGHT)), i))
        kept[heaviest].remove(best)
        kept[lightest].append(best)
        loads[heaviest] -= weights.get(best, MIN_WEIGHT)
        loads[lightest] += weights.get(best, MIN_WEIGHT)
        moves += 1
    return moves
