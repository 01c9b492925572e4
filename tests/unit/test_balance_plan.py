"""The balancer's rule on hand-made loads, with the clock passed in."""
from kgate.metadata.assignment import assign
from kgate.metadata.balance_plan import Limits, Move, plan

LIMITS = Limits(max_moves=10, cooldown=30.0, tolerance=0.1)


def broker_loads(loads, owners, moves, brokers):
    owners = dict(owners)
    for move in moves:
        assert owners[(move.topic, move.partition)] == move.source
        owners[(move.topic, move.partition)] = move.target
    totals = dict.fromkeys(brokers, 0.0)
    for key, owner in owners.items():
        totals[owner] += loads.get(key, 0.0)
    return totals, owners


def test_one_broker_with_every_hot_partition_gives_them_out_until_each_is_near_the_mean():
    loads = {("hot", p): 1000.0 for p in range(6)}
    owners = {("hot", p): 0 for p in range(6)}
    moves = plan(loads, owners, {0: None, 1: None, 2: None}, LIMITS, {}, now=100.0)
    totals, owners = broker_loads(loads, owners, moves, (0, 1, 2))
    assert totals == {0: 2000.0, 1: 2000.0, 2: 2000.0}
    assert len(moves) == 4 and {m.reason for m in moves} == {"load"}


def test_a_partition_hotter_than_the_gap_stays_where_it_is():
    loads = {("t", 0): 5000.0, ("t", 1): 100.0, ("t", 2): 100.0}
    owners = {("t", 0): 0, ("t", 1): 1, ("t", 2): 1}
    assert plan(loads, owners, {0: None, 1: None}, LIMITS, {}, now=0.0) == []


def test_a_balanced_cluster_is_left_alone():
    loads = {("t", p): 1000.0 + 30 * p for p in range(6)}
    owners = {("t", p): p % 3 for p in range(6)}
    assert plan(loads, owners, {0: None, 1: None, 2: None}, LIMITS, {}, now=0.0) == []


def test_moves_per_round_are_capped_and_a_moved_partition_waits_out_its_cooldown():
    loads = {("hot", p): 1000.0 for p in range(6)}
    owners = {("hot", p): 0 for p in range(6)}
    zones = {0: None, 1: None, 2: None}
    first = plan(loads, owners, zones, Limits(max_moves=2, cooldown=30.0), {}, now=100.0)
    assert len(first) == 2
    _, owners = broker_loads(loads, owners, first, (0, 1, 2))
    moved_at = {(m.topic, m.partition): 100.0 for m in first}
    # Nothing moved may move again before the cooldown ends; the rest may.
    second = plan(loads, owners, zones, Limits(max_moves=2, cooldown=30.0), moved_at, now=110.0)
    assert len(second) == 2 and not {(m.topic, m.partition) for m in second} & set(moved_at)
    # Everything left on broker 0 is in its cooldown: the hot broker waits.
    pinned = {key: 100.0 for key, owner in owners.items() if owner == 0}
    assert plan(loads, owners, zones, Limits(max_moves=2, cooldown=30.0), pinned, now=110.0) == []
    assert len(plan(loads, owners, zones, Limits(max_moves=2, cooldown=30.0), pinned, now=131.0)) == 2


def test_a_broker_added_empty_takes_partitions_by_count_when_nothing_carries_load():
    owners = {("idle", p): p % 2 for p in range(8)}
    moves = plan({}, owners, {0: None, 1: None, 2: None}, LIMITS, {}, now=0.0)
    _, owners = broker_loads({}, owners, moves, (0, 1, 2))
    counts = sorted(list(owners.values()).count(b) for b in (0, 1, 2))
    assert counts == [2, 3, 3] and all(m.reason == "count" and m.target == 2 for m in moves)


def test_a_count_move_never_pushes_its_receiver_past_the_mean_load():
    # Broker 1 has few partitions but all the load: it receives none of broker 0's idle ones
    # only if that would overload it; here idle ones cost nothing, so they go.
    loads = {("busy", 0): 3000.0}
    owners = {("busy", 0): 1, **{("idle", p): 0 for p in range(4)}, ("warm", 0): 0}
    loads[("warm", 0)] = 2500.0
    moves = plan(loads, owners, {0: None, 1: None}, LIMITS, {}, now=0.0)
    assert all(m.load == 0.0 for m in moves if m.reason == "count")
    assert Move("warm", 0, 0, 1, 2500.0, "count") not in moves


def test_between_equally_loaded_targets_the_less_loaded_zone_receives():
    # Zone a: brokers 0 (hot) and 1; zone b: brokers 2 and 3, broker 3 hotter than 0 by one
    # partition too hot to move. Brokers 1 and 2 carry nothing; 2's zone carries more, so 1 receives.
    loads = {("hot", p): 1000.0 for p in range(4)} | {("b", 0): 5000.0}
    owners = {("hot", p): 0 for p in range(4)} | {("b", 0): 3}
    moves = plan(loads, owners, {0: "a", 1: "a", 2: "b", 3: "b"}, Limits(max_moves=1, cooldown=0), {}, now=0.0)
    assert [(m.source, m.target) for m in moves] == [(0, 1)]


def test_zones_end_with_their_fair_share():
    loads = {("hot", p): 1000.0 for p in range(12)}
    owners = {("hot", p): 0 for p in range(12)}
    zones = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    moves = plan(loads, owners, zones, Limits(max_moves=100, cooldown=0), {}, now=0.0)
    totals, _ = broker_loads(loads, owners, moves, zones)
    by_zone = {z: sum(t for b, t in totals.items() if zones[b] == z) for z in "abc"}
    assert by_zone == {"a": 4000.0, "b": 4000.0, "c": 4000.0}


def test_one_broker_has_nothing_to_balance():
    assert plan({("t", 0): 5.0}, {("t", 0): 0}, {0: None}, LIMITS, {}, now=0.0) == []


def test_overrides_win_over_the_hash_only_while_their_broker_is_live():
    hashed = assign("t", 6, [0, 1, 2])
    placed = assign("t", 6, [0, 1, 2], {0: (hashed[0] + 1) % 3, 5: 7})
    assert placed[0] == (hashed[0] + 1) % 3 and placed[1:] == hashed[1:]  # broker 7 is not live
    assert assign("t", 6, [0, 1], {0: 2}) == assign("t", 6, [0, 1])
