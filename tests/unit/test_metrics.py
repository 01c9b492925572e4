"""BrokerMetrics: per-topic counters keep their Prometheus names and count by topic."""
from kgate.gateway.metrics import BrokerMetrics


def _sample(metrics: BrokerMetrics, name: str, topic: str) -> float:
    return metrics.registry.get_sample_value(name, {"topic": topic})


def test_produced_and_fetched_count_each_topic_apart():
    metrics = BrokerMetrics(broker=None)
    metrics.produced("a", 100, 2)
    metrics.produced("b", 7, 1)
    metrics.produced("a", 50, 3)
    metrics.fetched("a", 30, 1)
    assert _sample(metrics, "kgate_topic_bytes_in_total", "a") == 150
    assert _sample(metrics, "kgate_topic_records_in_total", "a") == 5
    assert _sample(metrics, "kgate_topic_bytes_in_total", "b") == 7
    assert _sample(metrics, "kgate_topic_records_in_total", "b") == 1
    assert _sample(metrics, "kgate_topic_bytes_out_total", "a") == 30
    assert _sample(metrics, "kgate_topic_records_out_total", "a") == 1
