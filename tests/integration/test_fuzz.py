"""Fuzz a live broker with malformed input: it must stay up and keep serving real clients (DESIGN rule 9).

Every example opens a fresh raw socket and sends something broken: random bytes,
truncated frames, size prefixes over ``socket.request.max.bytes`` or negative,
unsupported API keys or versions, valid headers with garbage bodies, or a Produce
whose batch (magic 2) or message set (magic 0/1) has a wrong CRC. After each one the broker process must be alive, a
long-lived raw connection must still get Metadata and ListOffsets answers, and a
confluent-kafka producer must still get a record acknowledged at the next offset.
"""
import socket
import struct

import pytest
from confluent_kafka import Producer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kgate.protocol.api_versions import SUPPORTED, is_supported
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.messages import REQUESTS
from kgate.protocol.record_batch import CRC_START, HEADER_SIZE
from tests.support.wire import TIMEOUT, Wire, connect, encode_request, read_response
from tests.unit.record_batches import CODECS, build_batch
from tests.unit.request_frames import frame, metadata_request, produce_request, request_header

LIVE = "fuzz-live"        # the real client's topic
CORRUPT = "fuzz-corrupt"  # only ever sent corrupt batches: must stay empty
MAX_FRAME = 100 * 1024 * 1024  # the broker's default socket.request.max.bytes


class Watcher(Wire):
    """The long-lived raw connection that checks the broker still answers."""

    def latest_offset(self, topic: str) -> int:
        part = ListOffsetsRequest.ListOffsetsTopic
        response = self.call(ListOffsetsRequest(version=1, replica_id=-1, topics=[part(name=topic, partitions=[
            part.ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 1)
        (result,) = response.topics[0].partitions
        assert result.error_code == ErrorCode.NONE
        return result.offset

    def create_topic(self, name: str) -> None:
        topic = CreateTopicsRequest.CreatableTopic
        response = self.call(CreateTopicsRequest(version=5, timeout_ms=10_000, validate_only=False, topics=[
            topic(name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])]), 5)
        assert response.topics[0].error_code == ErrorCode.NONE

def _produce_frame(topic: str, batch: bytes, version: int, acks: int, correlation_id: int = 1) -> bytes:
    return encode_request(produce_request(topic, 0, batch, version, acks), version, correlation_id, "fuzz")


def _send_corrupt_batch(bootstrap: str, batch: bytes, version: int, acks: int) -> int:
    """Produce ``batch`` on a fresh connection; return the partition's error code."""
    with connect(bootstrap) as sock:
        sock.sendall(_produce_frame(CORRUPT, batch, version, acks))
        response = read_response(sock, ApiKey.Produce, version, 1)
    (part,) = response.responses[0].partition_responses
    assert part.base_offset == -1
    return part.error_code


# -- what the fuzzer sends ------------------------------------------------------------

# kind "close": the broker must close the connection by itself (a protocol violation).
# kind "any": the broker may answer, wait or close; we half-close and read to EOF.
# kind "corrupt": a Produce whose batch fails its CRC; args (batch, version, acks).

random_bytes = st.binary(min_size=1, max_size=300).map(lambda data: ("any", data))

_WHOLE_FRAMES = [
    encode_request(metadata_request(1, [LIVE]), 1),
    encode_request(metadata_request(12, [LIVE, CORRUPT]), 12),
    encode_request(ApiVersionsRequest(version=3, client_software_name="f", client_software_version="1"), 3),
    _produce_frame(LIVE, build_batch([b"never stored"]), 9, -1),
]
truncated_frames = st.sampled_from(_WHOLE_FRAMES).flatmap(
    lambda whole: st.integers(1, len(whole) - 1).map(lambda cut: ("any", whole[:cut])))

bad_sizes = st.tuples(st.integers(MAX_FRAME + 1, 2**31 - 1) | st.integers(-(2**31), -1),
                      st.binary(max_size=64)).map(lambda t: ("close", struct.pack(">i", t[0]) + t[1]))

_INT16 = st.integers(-(2**15), 2**15 - 1)
unsupported_requests = st.tuples(_INT16, _INT16, st.binary(max_size=100)).filter(
    lambda t: t[0] != ApiKey.ApiVersions and not is_supported(t[0], t[1])).map(
    lambda t: ("close", frame(request_header(t[0], t[1], 7, "fuzz") + t[2])))

_VERSIONS = [(key, v) for key, (low, high) in SUPPORTED.items() for v in range(low, high + 1)]


def _garbage_body(key_version, body: bytes):
    key, version = key_version
    tags = {} if REQUESTS[key].flexible_version_q(version) else None
    return "any", frame(request_header(key, version, 9, "fuzz", tags=tags) + body)


garbage_bodies = st.builds(_garbage_body, st.sampled_from(_VERSIONS), st.binary(max_size=200))


@st.composite
def corrupt_produces(draw):
    values = draw(st.lists(st.binary(max_size=50), min_size=1, max_size=5))
    batch = bytearray(build_batch(values, draw(st.sampled_from(list(CODECS)))))
    # Either the CRC field itself or a byte of the records it covers is wrong.
    index = draw(st.integers(CRC_START - 4, CRC_START - 1) | st.integers(HEADER_SIZE, len(batch) - 1))
    batch[index] ^= draw(st.integers(1, 255))
    return "corrupt", (bytes(batch), draw(st.integers(3, 11)), draw(st.sampled_from([-1, 1])))


@st.composite
def corrupt_legacy_produces(draw):
    """A 0.9/0.10-era message set (Produce v0-2) with a byte under a message CRC changed."""
    magic = draw(st.sampled_from([0, 1]))
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=draw(st.sampled_from([0, 1, 2, 3])),
                                       batch_size=1 << 20)
    for i, value in enumerate(draw(st.lists(st.binary(max_size=50), min_size=1, max_size=5))):
        builder.append(i, timestamp=1_700_000_000_000, key=None, value=value)
    message_set = bytearray(builder.build())
    first_end = 12 + struct.unpack_from(">i", message_set, 8)[0]
    index = draw(st.integers(18, first_end - 1))  # in the first message, after its magic and attributes
    message_set[index] ^= draw(st.integers(1, 255))
    version = draw(st.sampled_from([0, 1]) if magic == 0 else st.just(2))
    return "corrupt", (bytes(message_set), version, draw(st.sampled_from([-1, 1])))


ATTACKS = st.one_of(random_bytes, truncated_frames, bad_sizes, unsupported_requests, garbage_bodies,
                    corrupt_produces(), corrupt_legacy_produces())


def _drain_until_closed(sock: socket.socket) -> None:
    """Read until the broker closes; a reset also counts as closed."""
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass


def _attack(bootstrap: str, kind: str, payload) -> None:
    if kind == "corrupt":
        assert _send_corrupt_batch(bootstrap, *payload) == ErrorCode.CORRUPT_MESSAGE
        return
    with connect(bootstrap) as sock:
        try:
            sock.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            return  # already closed on us
        if kind == "any":
            sock.shutdown(socket.SHUT_WR)
        # For "close", the broker must hang up on its own: a recv timeout fails the example.
        _drain_until_closed(sock)


# -- the tests -----------------------------------------------------------------------------

@pytest.fixture
def wire(broker):
    wire = Watcher(broker.bootstrap, "fuzz-watcher")
    wire.create_topic(LIVE)
    wire.create_topic(CORRUPT)
    yield wire
    wire.close()


@pytest.fixture
def producer(broker):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0,
                         "message.timeout.ms": TIMEOUT * 1000})
    yield producer
    producer.flush(TIMEOUT)


def test_malformed_input_never_takes_the_broker_down(broker, wire, producer):
    produced = []

    def assert_still_serving():
        assert broker.alive(), f"broker exited; see {broker.log_path}"
        metadata = wire.call(metadata_request(1, [LIVE, CORRUPT]), 1)
        assert [(t.name, t.error_code) for t in metadata.topics] == [(LIVE, 0), (CORRUPT, 0)]
        assert wire.latest_offset(CORRUPT) == 0  # no corrupt batch was stored
        reports = []
        producer.produce(LIVE, b"still alive %d" % len(produced), on_delivery=lambda err, msg: reports.append(
            (err, msg.offset())))
        assert producer.flush(TIMEOUT) == 0
        assert reports == [(None, len(produced))]  # acknowledged, at the next offset
        produced.append(reports[0][1])

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(attack=ATTACKS)
    def attack_then_check(attack):
        _attack(broker.bootstrap, *attack)
        assert_still_serving()

    attack_then_check()
    assert wire.latest_offset(LIVE) == len(produced)


def test_corrupt_batch_gets_corrupt_message_and_stores_nothing(broker, wire):
    good = build_batch([b"a", b"b", b"c"], "lz4")
    with connect(broker.bootstrap) as sock:
        sock.sendall(_produce_frame(CORRUPT, good, 9, -1))
        first = read_response(sock, ApiKey.Produce, 9, 1).responses[0].partition_responses[0]
    assert (first.error_code, first.base_offset) == (ErrorCode.NONE, 0)
    assert wire.latest_offset(CORRUPT) == 3

    corrupt = bytearray(good)
    corrupt[-1] ^= 0x01
    assert _send_corrupt_batch(broker.bootstrap, bytes(corrupt), 9, -1) == ErrorCode.CORRUPT_MESSAGE
    assert wire.latest_offset(CORRUPT) == 3

    with connect(broker.bootstrap) as sock:  # the refused batch took no offsets
        sock.sendall(_produce_frame(CORRUPT, good, 9, -1))
        again = read_response(sock, ApiKey.Produce, 9, 1).responses[0].partition_responses[0]
    assert (again.error_code, again.base_offset) == (ErrorCode.NONE, 3)


def _null_where_none_is_allowed(key: int):
    """A request at the highest advertised version with its first non-nullable array sent as null, or None."""
    cls = REQUESTS[key]
    version = SUPPORTED[key][1]
    field = next((f for f in cls._struct.untagged_fields(version)
                  if f.is_array() and not f.nullable_for_version_q(version)), None)
    if field is None:
        return None
    request = cls(version=version)
    setattr(request, field.name, None)
    tags = {} if cls.flexible_version_q(version) else None
    body = ApiMessage.encode(request, version=version, header=False)
    return frame(request_header(key, version, 5, "null-arrays", tags=tags) + body)


def test_null_arrays_close_the_connection_with_one_warning_and_no_traceback(broker, wire):
    """A -1 count for a non-nullable array reached handlers as None: a TypeError traceback per request."""
    frames = [f for f in map(_null_where_none_is_allowed, sorted(SUPPORTED)) if f is not None]
    assert len(frames) >= 20
    with open(broker.log_path) as log:
        log.seek(0, 2)
        for payload in frames:
            with connect(broker.bootstrap) as sock:
                sock.sendall(payload)
                _drain_until_closed(sock)  # the broker hangs up on its own: a recv timeout fails the test
        assert wire.latest_offset(LIVE) == 0  # still serving
        logged = log.read()
    assert "Traceback" not in logged and "level=error" not in logged
    warnings = [line for line in logged.splitlines() if "level=warning" in line]
    assert len(warnings) == len(frames) and all("non-nullable field" in line for line in warnings), warnings[:3]
