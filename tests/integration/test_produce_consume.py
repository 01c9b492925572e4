"""Today's clients produce and read back 100,000 keyed records with headers, per codec,
with the topic in every entry format."""
import pytest

from kgate.storage import entry_formats
from tests.support import records
from tests.support.clients import CLIENTS, create_topic

COUNT = 100_000
PARTITIONS = 6
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
pytestmark = pytest.mark.parametrize("entry_format", entry_formats.names(), indirect=True)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS, ids=lambda c: c.name)
def test_round_trip(broker, client, codec):
    topic = f"rt-{codec}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    client.produce(broker.bootstrap, topic, COUNT, codec=codec)
    consumed = client.consume(broker.bootstrap, topic, PARTITIONS, COUNT)
    records.check_read_back(consumed, COUNT)
    assert len(consumed) == COUNT
    assert len({r.partition for r in consumed}) == PARTITIONS, "keys should spread over every partition"
