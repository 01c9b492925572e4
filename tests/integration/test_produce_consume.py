"""Today's clients produce and read back keyed records with headers, per codec, with the
topic in every entry format: 100,000 with confluent-kafka; 10,000 with kafka-python, which
encodes and decodes in pure Python (100,000 took it 36-51 s a test, fifteen tests, in a full
run) and whose 10,000 still fill more than ten batches per partition."""
import pytest

from kgate.storage import entry_formats
from tests.support import records
from tests.support.clients import CLIENTS, create_topic

COUNTS = {"confluent-kafka": 100_000, "kafka-python": 10_000}
PARTITIONS = 6
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
pytestmark = pytest.mark.parametrize("entry_format", entry_formats.names(), indirect=True)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS, ids=lambda c: c.name)
def test_round_trip(broker, client, codec):
    topic = f"rt-{codec}"
    count = COUNTS[client.name]
    create_topic(broker.bootstrap, topic, PARTITIONS)
    client.produce(broker.bootstrap, topic, count, codec=codec)
    consumed = client.consume(broker.bootstrap, topic, PARTITIONS, count)
    records.check_read_back(consumed, count)
    assert len(consumed) == count
    assert len({r.partition for r in consumed}) == PARTITIONS, "keys should spread over every partition"
