"""An idempotent producer whose produce responses are lost with their connection.

Each lost response leaves a batch stored but unacknowledged; librdkafka reconnects and
sends it again with the same producer id and sequence. The broker must answer with the
original offset instead of storing it twice.
"""
from kafka.protocol.api_key import ApiKey

from tests.support import records
from tests.support.clients import ConfluentClient, create_topic
from tests.support.response_dropper import ResponseDropper

COUNT = 20_000
PARTITIONS = 3


def test_retries_after_lost_responses_store_each_record_once(broker_factory):
    with ResponseDropper(api_key=ApiKey.Produce, every=5, limit=8) as proxy:
        broker = broker_factory(**{"advertised.listeners": f"127.0.0.1:{proxy.port}"})
        proxy.forward_to(("127.0.0.1", broker.port))
        bootstrap = f"127.0.0.1:{proxy.port}"
        create_topic(bootstrap, "idem", PARTITIONS)
        ConfluentClient.produce(bootstrap, "idem", COUNT, **{
            "enable.idempotence": True, "linger.ms": 20, "batch.num.messages": 200,
            "reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 200})
        assert proxy.dropped > 0, "no produce response was dropped, so no retry was exercised"
        # Through the proxy, which the broker advertises (it drops produce answers only).
        consumed = ConfluentClient.consume(bootstrap, "idem", PARTITIONS, COUNT)
    records.check_read_back(consumed, COUNT)
    assert len(consumed) == COUNT
