"""Clients of the 0.9/0.10 generations against kgate, in every entry format (every generation
on the default one, one per message format on the others).

kafka-python pinned to an ``api_version`` speaks exactly that generation: no
ApiVersions below 0.10.2, Produce v0-2 with magic 0/1 message sets, Fetch v0-3,
JoinGroup v0 and OffsetCommit v2 for its group. Each generation produces with every
codec it allows, consumes in a group that commits and resumes, and reads records of
other generations with the right offsets.
"""
import pytest
from kafka import KafkaConsumer
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KTopicPartition

from kgate.storage import entry_formats
from tests.support import records
from tests.support.clients import ConfluentClient, KafkaPythonClient, consumed, create_topic
from tests.support.member_process import wait_for

COUNT = 3000
PARTITIONS = 3
# api_version -> (carries headers, carries timestamps): magic 0 has neither, magic 1 timestamps.
GENERATIONS = {(0, 9): (False, False), (0, 10, 0): (False, True), (0, 10, 1): (False, True),
               (0, 11): (True, True), (1, 0): (True, True), None: (True, True)}
LEGACY_CODECS = ["none", "gzip", "snappy", "lz4"]


def _name(api_version) -> str:
    return "unpinned" if api_version is None else "v" + "_".join(map(str, api_version))


EVERY_FORMAT = pytest.mark.parametrize("entry_format", entry_formats.names(), indirect=True)
# Every generation on the default format; on the formats that rebuild records, which see a
# message set's magic and codec and not the request versions around it, one per magic.
PER_MAGIC = [(0, 9), (0, 10, 0), None]
GENERATION_FORMATS = [pytest.param(entry_format, api_version, id=f"{_name(api_version)}-{entry_format}")
                      for entry_format in entry_formats.names() for api_version in GENERATIONS
                      if entry_format == "kafka" or api_version in PER_MAGIC]


@pytest.fixture
def broker(broker_factory):
    # Each group here has one member at a time: no reason to wait for others to join.
    return broker_factory(**{"group.initial.rebalance.delay.ms": 0})


def _pin(api_version) -> dict:
    return {} if api_version is None else {"api_version": api_version}


def _group_consume(bootstrap, topic, group, api_version, limit) -> list[records.Consumed]:
    """Read up to ``limit`` records as a group member, commit exactly what was read, leave."""
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", **_pin(api_version))
    out, positions = [], {}
    try:
        def read_some() -> bool:
            for messages in consumer.poll(timeout_ms=500, max_records=limit - len(out)).values():
                for message in messages:
                    out.append(consumed(message))
                    positions[message.partition] = message.offset + 1
            return len(out) >= limit

        wait_for(read_some, timeout=60, what=f"{limit} records for group {group}")
        consumer.commit({KTopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in positions.items()})
    finally:
        consumer.close()
    return out


@pytest.mark.parametrize("entry_format, api_version", GENERATION_FORMATS, indirect=["entry_format"])
def test_a_generation_produces_every_codec_and_consumes_in_a_group_that_resumes(broker, api_version):
    with_headers, with_timestamps = GENERATIONS[api_version]
    codecs = LEGACY_CODECS + (["zstd"] if api_version is None else [])
    for codec in codecs:
        topic = f"old-{_name(api_version)}-{codec}"
        create_topic(broker.bootstrap, topic, PARTITIONS)
        KafkaPythonClient.produce(broker.bootstrap, topic, COUNT, codec=codec, with_headers=with_headers,
                                  **_pin(api_version))
        group = f"group-{topic}"
        first = _group_consume(broker.bootstrap, topic, group, api_version, COUNT // 3)
        rest = _group_consume(broker.bootstrap, topic, group, api_version, COUNT - len(first))
        records.check_read_back(first + rest, COUNT, with_headers=with_headers, with_timestamps=with_timestamps)


@EVERY_FORMAT
@pytest.mark.parametrize("api_version", [(0, 9), (0, 10, 0)], ids=_name)
@pytest.mark.parametrize("codec", ["none", "gzip", "lz4"])
def test_todays_consumers_read_old_producers_records(broker, api_version, codec):
    topic = f"cross-{_name(api_version)}-{codec}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    KafkaPythonClient.produce(broker.bootstrap, topic, COUNT, codec=codec, with_headers=False, **_pin(api_version))
    read = ConfluentClient.consume(broker.bootstrap, topic, PARTITIONS, COUNT)
    records.check_read_back(read, COUNT, with_headers=False, with_timestamps=GENERATIONS[api_version][1])


@EVERY_FORMAT
@pytest.mark.parametrize("codec", ["none", "snappy", "lz4"])
def test_a_0_9_consumer_reads_todays_records_with_headers(broker, codec):
    topic = f"down-{codec}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    ConfluentClient.produce(broker.bootstrap, topic, COUNT, codec=codec)
    read = KafkaPythonClient.consume(broker.bootstrap, topic, PARTITIONS, COUNT, api_version=(0, 9))
    records.check_read_back(read, COUNT, with_headers=False, with_timestamps=False)
