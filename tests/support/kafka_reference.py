"""Apache Kafka 4.4 for tests: a module-scoped fixture, started and stopped like kgate's.

Tests that compare kgate with Kafka use ``kafka_broker`` (one KRaft node per test module,
free ports, the module's temporary directory, stopped by PID), or ``broker_under_test`` in a
fixture of their own parametrized over both; ``scripts/setup-kafka`` installs Kafka, and they
say so in one line when it has not been run.
"""
from collections.abc import Iterator

import pytest

from conformance.kafka_broker import LIB, KafkaBroker
from tests.support.broker_process import BrokerProcess, terminate


@pytest.fixture(scope="module")
def kafka_broker(tmp_path_factory):
    yield from broker_under_test("kafka", tmp_path_factory, "reference")


def broker_under_test(kind: str, tmp_path_factory, name: str, kgate_settings: dict | None = None,
                      kafka_settings: dict | None = None) -> Iterator:
    """For a module fixture: kgate (``kind`` "kgate") or Kafka 4.4 as the control ("kafka"),
    each with its own settings, in the module's temporary directory; stopped by PID when the
    fixture ends."""
    if kind == "kafka":
        if not LIB.is_dir():
            pytest.fail("Apache Kafka is not installed: run scripts/setup-kafka")
        kafka = KafkaBroker(str(tmp_path_factory.mktemp(f"kafka-{name}")),
                            {key: str(value) for key, value in (kafka_settings or {}).items()}).start()
        try:
            yield kafka
        finally:
            kafka.stop()
        return
    kgate = BrokerProcess(str(tmp_path_factory.mktemp(f"kgate-{name}")), kgate_settings).start()
    try:
        yield kgate
    finally:
        terminate(kgate.process, 10)
