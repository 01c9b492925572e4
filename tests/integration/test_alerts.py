"""The Prometheus rules and the Grafana dashboard in ops/: promtool accepts the rules and
their unit tests pass, every metric they name is one kgate exports, and the metrics made
for them (ownership gaps, produce errors, group lag, authentication failures) move on a
live broker as the traffic says."""
import json
import re
import subprocess
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from tests.support.clients import create_topic
from tests.support.docs import ROOT, load_reference_hook
from tests.support.member_process import wait_for
from tests.support.scrape import scrape, value

RULES = ROOT / "ops" / "prometheus" / "kgate-rules.yml"
DASHBOARD = ROOT / "ops" / "grafana" / "kgate-dashboard.json"
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def _promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["promtool", *args], cwd=RULES.parent, capture_output=True, text=True, timeout=60)


def test_promtool_checks_the_rules_and_their_unit_tests_pass():
    checked = _promtool("check", "rules", RULES.name)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = _promtool("test", "rules", "kgate-rules.test.yml")
    assert tested.returncode == 0, tested.stdout + tested.stderr


def _named_metrics() -> set[str]:
    """Every kgate_* series the rules and the dashboard query (recorded kgate:* names aside)."""
    expressions = RULES.read_text() + "\n".join(
        target["expr"] for panel in json.loads(DASHBOARD.read_text())["panels"] for target in panel["targets"])
    return set(re.findall(r"(?<![:\w])kgate_[a-z0-9_]+", expressions))


def _base(name: str, histograms: set[str]) -> str:
    for suffix in HISTOGRAM_SUFFIXES:
        if name.endswith(suffix) and name.removesuffix(suffix) in histograms:
            return name.removesuffix(suffix)
    return name


def test_every_metric_the_rules_and_dashboard_name_is_exported(broker_factory):
    catalogue = {metric.name: metric for metric in load_reference_hook().metric_catalogue()}
    histograms = {name for name, metric in catalogue.items() if metric.kind == "histogram"}
    named = {_base(name, histograms) for name in _named_metrics()}
    assert len(named) >= 12
    assert sorted(named - set(catalogue)) == []
    # The catalogue is read from the source; a live broker's endpoint shows the same families.
    broker = broker_factory(**{"kgate.metrics.listener": "127.0.0.1:0"})
    with urllib.request.urlopen(broker.metrics_url, timeout=10) as response:
        families = {family.name: family.type for family in text_string_to_metric_families(response.read().decode())}
    exposed = {name + "_total" if kind == "counter" else name for name, kind in families.items()}
    served_by_every_broker = {name for name in named if catalogue[name].served_by.startswith("broker (")}
    assert sorted(served_by_every_broker - exposed) == []


def test_the_metrics_behind_the_alerts_follow_the_traffic(broker_factory):
    broker = broker_factory(listeners=("SASL_PLAINTEXT",), **{
        "kgate.metrics.listener": "127.0.0.1:0", "message.max.bytes": 2000})
    topic, group = "alerted-orders", "alerted-billing"
    create_topic(broker.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "message.max.bytes": 100_000})
    for index in range(10):
        producer.produce(topic, value=b"%d" % index)
    producer.flush(30)  # apart from the batch too large for the broker, which is refused whole
    failures = []
    producer.produce(topic, value=b"x" * 5000, on_delivery=lambda err, _msg: failures.append(err))
    producer.flush(30)
    assert failures and failures[0].name() == "MSG_SIZE_TOO_LARGE"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
    finally:
        consumer.close()
    guesser = Producer({"bootstrap.servers": broker.address("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "nobody", "sasl.password": "guess"})

    def failed_login():
        guesser.poll(0.1)
        samples = scrape(broker.metrics_url)
        return value(samples, "kgate_authentication_failures_total", mechanism="SCRAM-SHA-256",
                     reason="refused") >= 1 and samples
    samples = wait_for(failed_login, timeout=30, what="a failed login in the metrics")
    guesser.flush(0)
    assert value(samples, "kgate_produce_errors_total", error="MESSAGE_SIZE_TOO_LARGE") == 1
    assert value(samples, "kgate_group_lag_records", group=group, topic=topic) == 6
    assert not [key for key in samples if key[0] == "kgate_ownership_gaps"]  # one broker serves everything
