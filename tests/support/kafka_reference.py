"""Apache Kafka 4.4 for tests: a module-scoped fixture, started and stopped like kgate's.

Tests that compare kgate with Kafka use ``kafka_broker`` (one KRaft node per test module,
free ports, the module's temporary directory, stopped by PID); ``scripts/setup-kafka``
installs it, and the fixture says so in one line when it has not been run.
"""
import pytest

from conformance.kafka_broker import LIB, KafkaBroker


@pytest.fixture(scope="module")
def kafka_broker(tmp_path_factory):
    if not LIB.is_dir():
        pytest.fail("Apache Kafka is not installed: run scripts/setup-kafka")
    broker = KafkaBroker(str(tmp_path_factory.mktemp("kafka"))).start()
    yield broker
    broker.stop()
