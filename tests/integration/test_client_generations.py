"""Client libraries of the 0.9/0.10 era against kgate: old kafka-python releases, Sarama
1.22, kcat (librdkafka 2.0.2) and confluent-kafka forced to the 0.9 generation.

None of them sends ApiVersions (in the modes pinned here), so every request version
they choose must simply be served. Each produces with every codec it allows, reads
back, and, where it has groups, consumes in a group that commits and resumes; what it
wrote is read by today's confluent-kafka at the same offsets. SASL cells log in with
PLAIN, and SCRAM where the client has it.
"""

import pytest

from kgate.storage import entry_formats
from tests.support import records
from tests.support.clients import ConfluentClient, UserDirectories, create_topic
from tests.support.compat_matrix import clients

Sasl = clients.Sasl

COUNT = 1500
PARTITIONS = 3
LEGACY_CODECS = ["none", "gzip", "snappy", "lz4"]
USER, PASSWORD = "alice", "alice-secret"


def kafka_python(release: str, pin: str) -> clients.Client:
    return clients.PythonClient.in_venv("kafka_python", "kafka-python", release, pin)


# client, codecs it may send, (headers, timestamps) it writes (None: not settable), has groups
CELLS = [
    (kafka_python("2.0.2", "0.9"), LEGACY_CODECS, (False, False), True),
    (kafka_python("2.0.2", "0.10.0"), LEGACY_CODECS, (False, True), True),
    (kafka_python("1.4.7", "0.9"), LEGACY_CODECS, (False, False), True),
    (kafka_python("1.4.7", "0.10.0"), LEGACY_CODECS, (False, True), True),
    # Sarama: lz4 needs 0.10
    (clients.Sarama("V0_9_0_0"), ["none", "gzip", "snappy"], (False, False), False),
    (clients.Sarama("V0_10_0_0"), LEGACY_CODECS, (False, True), False),
    (clients.Sarama("V0_10_2_0"), LEGACY_CODECS, (False, True), True),
    (clients.Sarama("V2_1_0_0"), LEGACY_CODECS, (True, True), True),
    (clients.Kcat("0.9.0"), LEGACY_CODECS, (False, False), False),
    (clients.Kcat(), LEGACY_CODECS + ["zstd"], (False, None), False),
]

EVERY_FORMAT = pytest.mark.parametrize("entry_format", entry_formats.names(), indirect=True)
# The formats that rebuild records (pulsar, mixed_kafka) see a message set's magic, codecs,
# headers and timestamps, not which library sent it: every cell runs on the default format,
# and on the others one client per magic (0, 1, and 2 with headers) covers what they convert.
PER_MAGIC = {"kafka-python-2.0.2-0.9", "kafka-python-2.0.2-0.10.0", "sarama-V2_1_0_0"}
CELL_FORMATS = [pytest.param(entry_format, *cell, id=f"{cell[0].name}-{entry_format}")
                for entry_format in entry_formats.names() for cell in CELLS
                if entry_format == "kafka" or cell[0].name in PER_MAGIC]


@pytest.fixture
def broker(broker_factory):
    return broker_factory(**{"group.initial.rebalance.delay.ms": 0})


@pytest.mark.parametrize("entry_format, client, codecs, writes, has_groups", CELL_FORMATS, indirect=["entry_format"])
def test_an_old_client_produces_reads_and_is_read_by_todays_clients(broker, client, codecs, writes, has_groups):
    with_headers, with_timestamps = writes
    for codec in codecs:
        topic = f"{client.name}-{codec}"
        create_topic(broker.bootstrap, topic, PARTITIONS)
        client.produce(broker.bootstrap, topic, COUNT, codec=codec, headers=with_headers)
        own = client.read(broker.bootstrap, topic, PARTITIONS, COUNT)
        records.check_read_back(own, COUNT, with_headers=with_headers, with_timestamps=with_timestamps)
        today = ConfluentClient.consume(broker.bootstrap, topic, PARTITIONS, COUNT)
        records.check_read_back(today, COUNT, with_headers=with_headers, with_timestamps=with_timestamps)
    if has_groups:
        first = client.group(broker.bootstrap, topic, "resumes", COUNT // 3)
        rest = client.group(broker.bootstrap, topic, "resumes", COUNT - len(first))
        records.check_read_back(first + rest, COUNT, with_headers=with_headers, with_timestamps=with_timestamps)


@EVERY_FORMAT
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_confluent_kafka_forced_to_the_0_9_generation(broker, codec):
    legacy = {"api.version.request": False, "broker.version.fallback": "0.9.0"}
    topic = f"fallback-{codec}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    ConfluentClient.produce(broker.bootstrap, topic, COUNT, codec=codec, with_headers=False, **legacy)
    read = ConfluentClient.consume(broker.bootstrap, topic, PARTITIONS, COUNT, **legacy)
    records.check_read_back(read, COUNT, with_headers=False, with_timestamps=False)


def test_sarama_zstd_in_produce_v3_is_refused_as_kafka_refuses_it(broker):
    """Sarama 1.22 sends zstd in Produce v3; Kafka answers UNSUPPORTED_COMPRESSION_TYPE."""
    create_topic(broker.bootstrap, "zstd-v3", 1)
    with pytest.raises(clients.DriverFailed, match="Failed to deliver"):
        clients.Sarama("V2_1_0_0").produce(broker.bootstrap, "zstd-v3", 10, codec="zstd")
    assert ConfluentClient.consume(broker.bootstrap, "zstd-v3", 1, 1, timeout=3) == []


# -- SASL ------------------------------------------------------------------------------------

SASL_CELLS = [
    (kafka_python("2.0.2", "0.10.0"), Sasl("PLAIN", USER, PASSWORD)),
    (kafka_python("2.0.2", "0.10.0"), Sasl("SCRAM-SHA-256", USER, PASSWORD)),
    (kafka_python("1.4.7", "0.10.0"), Sasl("PLAIN", USER, PASSWORD)),
    (clients.Sarama("V0_10_0_0"), Sasl("PLAIN", USER, PASSWORD)),
    (clients.Sarama("V2_1_0_0"), Sasl("PLAIN", USER, PASSWORD)),
    (clients.Kcat(), Sasl("PLAIN", USER, PASSWORD)),
    (clients.Kcat(), Sasl("SCRAM-SHA-512", USER, PASSWORD)),
]


@pytest.fixture(scope="module")
def users(tmp_path_factory) -> UserDirectories:
    return UserDirectories(tmp_path_factory.mktemp("users"), {USER: PASSWORD})


@pytest.mark.parametrize("client, sasl", SASL_CELLS, ids=[f"{c.name}-{s.mechanism}" for c, s in SASL_CELLS])
def test_old_clients_log_in(broker_factory, tmp_path, client, sasl, users):
    users.make(str(tmp_path / "sasl"))
    broker = broker_factory("sasl", listeners=("SASL_PLAINTEXT",))
    address = broker.address("SASL_PLAINTEXT")
    create_topic(broker.bootstrap, "secured", PARTITIONS)
    client.produce(address, "secured", 300, codec="gzip", sasl=sasl)
    assert len(client.read(address, "secured", PARTITIONS, 300, sasl=sasl)) == 300
    with pytest.raises(clients.DriverFailed):
        client.read(address, "secured", PARTITIONS, 1, timeout=5, sasl=Sasl(sasl.mechanism, USER, "wrong"))
