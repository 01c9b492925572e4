"""The mirror's pure rules: configuration, route naming and loop refusal, workload
assignment, and the acknowledged position of a partition copy."""
import pytest

from kgate.mirror.assignment import MIN_WEIGHT, assign
from kgate.mirror.audit import minute_of, parse_since, window_start
from kgate.mirror.config import ConfigError, parse
from kgate.mirror.partition_copy import PartitionCopy
from kgate.mirror.routes import Route, RouteError, merge, parse_topics, topic_loops

CLUSTERS = {"clusters": {"dc1": {"bootstrap": "a:1"}, "dc2": {"bootstrap": "b:2"}}}


def test_config_defaults_and_client_settings():
    config = parse({"metadata": "zookeeper://h1:2181,h2:2181/mm", **CLUSTERS,
                    "clusters": {"dc1": {"bootstrap": "a:1", "security.protocol": "SASL_SSL"}}})
    assert (config.zookeeper, config.chroot) == ("h1:2181,h2:2181", "/mm")
    assert config["offset.lag.max"] == 100 and config["start"] == "earliest"
    assert config.cluster("dc1").client_config() == {"bootstrap.servers": "a:1", "security.protocol": "SASL_SSL"}


@pytest.mark.parametrize("document, named", [
    ({**CLUSTERS}, "metadata is required"),
    ({"metadata": "zk://h:1", **CLUSTERS}, "metadata must be zookeeper://"),
    ({"metadata": "zookeeper://h/x", **CLUSTERS}, "bad ZooKeeper address"),
    ({"metadata": "zookeeper://h:1"}, "clusters:"),
    ({"metadata": "zookeeper://h:1", "clusters": {"dc1": {}}}, "clusters.dc1.bootstrap is required"),
    ({"metadata": "zookeeper://h:1", "clusters": {"dc.1": {"bootstrap": "a:1"}}}, "clusters.dc.1"),
    ({"metadata": "zookeeper://h:1", "clusters": {"dc1": {"bootstrap": "a:1", "boot": "x"}}},
     "clusters.dc1.boot: unknown key"),
    ({"metadata": "zookeeper://h:1", **CLUSTERS, "offset.lag.max": -1}, "offset.lag.max must be at least 0"),
    ({"metadata": "zookeeper://h:1", **CLUSTERS, "start": "middle"}, "start must be one of"),
    ({"metadata": "zookeeper://h:1", **CLUSTERS, "comit.interval.ms": 5}, "unknown key 'comit.interval.ms'"),
])
def test_bad_config_names_the_key(document, named):
    with pytest.raises(ConfigError, match=named.replace(".", r"\.").replace("(", r"\(")):
        parse(document)


def test_naming_policies_and_what_a_route_carries():
    prefix = Route("dc1", "dc2", ("orders", "pay-*"))
    assert prefix.target_topic("orders") == "dc1.orders" and prefix.source_topic("dc1.orders") == "orders"
    assert prefix.matches("pay-eu") and not prefix.matches("payments")
    assert not prefix.matches("__consumer_offsets")
    assert not Route("dc1", "dc2", ("*",)).matches("dc2.orders")  # a copy from the target never goes back
    assert not Route("dc1", "dc2", ("*",)).matches("mm2-offset-syncs.dc2.internal")
    identity = Route("dc1", "dc2", ("orders",), "identity")
    assert identity.target_topic("orders") == "orders" and identity.source_topic("orders") == "orders"
    assert parse_topics(" orders, pay-* ,") == ("orders", "pay-*")
    with pytest.raises(RouteError):
        parse_topics(" , ")


def identity(source, target, *topics):
    return Route(source, target, topics or ("orders",), "identity")


def add_all(*routes):
    current = {}
    for route in routes:
        current[route.name] = merge(current, route)
    return current


def test_two_way_identity_and_a_ring_are_allowed():
    add_all(identity("dc1", "dc2"), identity("dc2", "dc1"))
    # A ring: each record stops before its origin, and reaches every other cluster once.
    add_all(identity("dc1", "dc2"), identity("dc2", "dc3"), identity("dc3", "dc1"))


@pytest.mark.parametrize("routes, problem", [
    # Full mesh: records from dc1 would bounce dc2 <-> dc3.
    ((identity("dc1", "dc2"), identity("dc2", "dc1"), identity("dc1", "dc3"), identity("dc3", "dc1"),
      identity("dc2", "dc3")), "loop"),
    # A diamond: dc1's records reach dc3 twice.
    ((identity("dc1", "dc2"), identity("dc2", "dc3"), identity("dc1", "dc3")), "arrive twice"),
    # Globs that overlap count as the same topic.
    ((identity("dc1", "dc2", "ord*"), identity("dc2", "dc3", "orders"), identity("dc1", "dc3", "or*")),
     "arrive twice"),
])
def test_route_sets_that_loop_or_duplicate_are_refused(routes, problem):
    with pytest.raises(RouteError, match=problem):
        add_all(*routes)


def test_disjoint_patterns_and_prefix_routes_are_not_loops():
    add_all(identity("dc1", "dc2", "a-*"), identity("dc2", "dc3", "b-*"), identity("dc1", "dc3", "a-*"),
            Route("dc3", "dc1", ("*",)))
    with pytest.raises(RouteError, match="itself"):
        merge({}, identity("dc1", "dc1"))
    with pytest.raises(RouteError, match="policy prefix"):
        add_all(Route("dc1", "dc2", ("x",)), identity("dc1", "dc2"))
    assert topic_loops([identity("dc1", "dc2"), identity("dc2", "dc3"), identity("dc3", "dc2")], "orders")
    assert topic_loops([identity("dc1", "dc2"), identity("dc2", "dc3"), identity("dc3", "dc2")], "other") is None


def items(n, topic="t"):
    return {("r", topic, p) for p in range(n)}


def test_assignment_places_by_weight_not_count():
    weights = {("r", "t", 0): 100 * MIN_WEIGHT}
    result, _ = assign({}, items(5), ["a", "b"], weights, threshold=0.2, rebalance=False)
    heavy = next(w for w, owned in result.items() if ("r", "t", 0) in owned)
    assert result[heavy] == [("r", "t", 0)]  # the heavy partition alone; the four light ones elsewhere
    assert len(result[{"a": "b", "b": "a"}[heavy]]) == 4


def test_losing_a_worker_moves_only_its_partitions_and_joining_moves_few():
    current, _ = assign({}, items(6), ["a", "b", "c"], {}, 0.2, rebalance=False)
    survivors, moved = assign(current, items(6), ["a", "b"], {}, 0.2, rebalance=False)
    assert moved == 0
    for worker in ("a", "b"):
        assert set(current[worker]) <= set(survivors[worker])
    grown, moved = assign(survivors, items(6), ["a", "b", "c", "d"], {}, 0.2, rebalance=True)
    assert moved == sum(len(grown[w]) for w in ("c", "d")) and sorted(len(v) for v in grown.values()) == [1, 1, 2, 2]
    for worker in ("a", "b"):
        assert set(grown[worker]) <= set(survivors[worker])


def test_a_lagging_partition_weighs_more_and_a_rebalance_moves_it_off_a_busy_worker():
    current = {"a": sorted(items(4)), "b": []}
    weights = {i: MIN_WEIGHT for i in items(4)} | {("r", "t", 3): 8 * MIN_WEIGHT}
    result, moved = assign(current, items(4), ["a", "b"], weights, 0.2, rebalance=True)
    assert moved == 1 and result["b"] == [("r", "t", 3)]


def copy_at(offset):
    return PartitionCopy(("r", "t", 0), Route("dc1", "dc2", ("t",)), "dc1.t", acked=offset, stored=offset)


def test_the_position_moves_only_over_acknowledged_records():
    copy = copy_at(10)
    for offset in (10, 11, 12):
        copy.sent(offset, 1)
    copy.skipped(13, 1)  # not copied (would go back to its origin): acknowledged with what precedes it
    assert not copy.delivered(0, 11, 101, 0) and copy.acked == 10  # 10 still unacknowledged
    assert copy.delivered(0, 10, 100, 0) and copy.acked == 12
    assert copy.delivered(0, 12, 102, 0) and copy.acked == 14
    assert (copy.last_upstream, copy.last_target_offset) == (12, 102)


def test_a_failed_delivery_rewinds_to_the_acknowledged_position_and_ignores_late_reports():
    copy = copy_at(0)
    for offset in range(3):
        copy.sent(offset, 1)
    copy.delivered(0, 0, 0, 0)
    copy.delivery_failed(0)
    assert not copy.delivered(0, 1, 1, 0) and copy.acked == 1
    assert copy.rewind() == 1 and copy.epoch == 1 and copy.idle
    assert not copy.delivered(0, 2, 2, 0) and copy.acked == 1


def test_audit_windows_start_at_a_whole_minute_as_source_counts_do():
    since = parse_since("2023-11-14T22:13:20.500Z")
    assert since == 1_700_000_000_500
    assert window_start(since) == 1_699_999_980_000 == minute_of(since) * 60_000
    assert window_start(window_start(since)) == window_start(since)
    assert parse_since("90s", now_ms=1_000_000) == 910_000
    with pytest.raises(ValueError, match="time zone"):
        parse_since("2023-11-14T22:13:20")
