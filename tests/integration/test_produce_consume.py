"""Today's clients produce and read back keyed records with headers, per codec, with the
topic in every entry format. Uncompressed, confluent-kafka sends 100,000 (10 MB: each
partition's share takes several fetches); compressed, 20,000 (about 25 batches per partition,
measured, which is what a codec's round trip needs; the 100,000 took 9-22 s a test, fifteen
tests, in a full run). kafka-python encodes and decodes in pure Python and sends 10,000 of
each (which also fill more than ten batches per partition)."""
import pytest

from kgate.storage import entry_formats
from tests.support import records
from tests.support.clients import CLIENTS, create_topic

COUNTS = {("confluent-kafka", "none"): 100_000, "confluent-kafka": 20_000, "kafka-python": 10_000}
PARTITIONS = 6
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
pytestmark = pytest.mark.parametrize("entry_format", entry_formats.names(), indirect=True)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS, ids=lambda c: c.name)
def test_round_trip(broker, client, codec):
    topic = f"rt-{codec}"
    count = COUNTS.get((client.name, codec)) or COUNTS[client.name]
    create_topic(broker.bootstrap, topic, PARTITIONS)
    client.produce(broker.bootstrap, topic, count, codec=codec)
    consumed = client.consume(broker.bootstrap, topic, PARTITIONS, count)
    records.check_read_back(consumed, count)
    assert len(consumed) == count
    assert len({r.partition for r in consumed}) == PARTITIONS, "keys should spread over every partition"
