"""The conformance suite's CI subset: each scenario against Apache Kafka 4.4 and kgate, one
of each per module (and a secured pair, SASL users and ACL authorizers, for the secured
scenarios); every divergence must be explained in conformance/known.py
(scripts/conformance runs them all and writes conformance/REPORT.md)."""
import pytest

from conformance.brokers import Pair
from conformance.known import classify
from conformance.run import run_scenario, select
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_reference import kafka_broker  # noqa: F401 - a fixture

CI = select([], ci_only=True)


@pytest.fixture(scope="module")
def kgate(tmp_path_factory):
    broker = BrokerProcess(str(tmp_path_factory.mktemp("kgate"))).start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def plain(kafka_broker, kgate):  # noqa: F811
    return kafka_broker.bootstrap, kgate.bootstrap


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    pair = Pair(str(tmp_path_factory.mktemp("secured")), secured=True).start()
    yield pair.addresses
    pair.stop()


def test_the_subset_covers_every_family():
    assert {s.family for s in CI} == {s.family for s in select([])}


@pytest.mark.parametrize("scenario", CI, ids=[s.name for s in CI])
def test_scenario_has_no_unexplained_divergence(scenario, request):
    addresses = request.getfixturevalue("secured" if scenario.secured else "plain")
    unexplained = [d for d, known in classify(run_scenario(scenario, *addresses)) if known is None]
    assert not unexplained, "\n".join(f"{d.label}: {d.path}: Kafka {d.kafka!r}, kgate {d.kgate!r}"
                                      for d in unexplained)
