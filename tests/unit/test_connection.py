"""protocol.connection.ServerConnection: frames in, requests or violations out, responses framed."""
import asyncio
import struct
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataResponse
from kafka.protocol.producer import InitProducerIdRequest

from kgate.gateway.handlers import Context
from kgate.gateway.handlers.api_versions import api_versions
from kgate.protocol.api_versions import INTERNAL, SUPPORTED
from kgate.protocol.connection import CLOSED, ProtocolViolation, RequestReceived, ServerConnection, Waiting
from kgate.protocol.headers import RequestHeader
from kgate.protocol.messages import REQUESTS
from tests.support.wire import encode_request
from tests.unit.message_strategies import message
from tests.unit.record_batches import build_batch
from tests.unit.request_frames import frame, metadata_request, produce_request, request_header

MAX_FRAME = 1 << 20
BATCH = build_batch([b"a", b"b"])


def _fetch(version):
    partition = FetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=5, partition_max_bytes=1 << 20,
                                                        log_start_offset=-1, current_leader_epoch=-1)
    return FetchRequest(version=version, replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20,
                        isolation_level=0, topics=[FetchRequest.FetchTopic(topic="t", partitions=[partition])])


def _list_offsets(version):
    topic = ListOffsetsRequest.ListOffsetsTopic
    return ListOffsetsRequest(version=version, replica_id=-1, topics=[
        topic(name="t", partitions=[topic.ListOffsetsPartition(partition_index=0, timestamp=-1, max_num_offsets=1)])])


def _create_topics(version):
    topic = CreateTopicsRequest.CreatableTopic
    return CreateTopicsRequest(version=version, timeout_ms=1000, topics=[
        topic(name="new", num_partitions=3, replication_factor=1, assignments=[],
              configs=[topic.CreatableTopicConfig(name="retention.ms", value="1000")])])


REAL_REQUESTS = {
    "ApiVersions v0": (lambda v: ApiVersionsRequest(version=v), 0),
    "ApiVersions v3": (lambda v: ApiVersionsRequest(version=v, client_software_name="kgate-tests",
                                                    client_software_version="1.0"), 3),
    "Metadata v0": (lambda v: metadata_request(v, ["a", "b"]), 0),
    "Metadata v4": (lambda v: metadata_request(v, []), 4),
    "Metadata v9": (lambda v: metadata_request(v, ["topic-x"]), 9),
    "Metadata v12": (lambda v: metadata_request(v, ["topic-x"]), 12),
    "Produce v3": (lambda v: produce_request("t", 0, BATCH, v), 3),
    "Produce v9": (lambda v: produce_request("t", 1, BATCH, v, acks=1), 9),
    "Produce v11": (lambda v: produce_request("t", 2, BATCH, v, acks=0), 11),
    "Fetch v4": (_fetch, 4),
    "Fetch v12": (_fetch, 12),
    "ListOffsets v0": (_list_offsets, 0),
    "ListOffsets v7": (_list_offsets, 7),
    "CreateTopics v5": (_create_topics, 5),
    "InitProducerId v2": (lambda v: InitProducerIdRequest(version=v, transactional_id=None,
                                                           transaction_timeout_ms=60000), 2),
}


def _events(connection: ServerConnection) -> list:
    events = []
    while not isinstance(event := connection.next_event(), Waiting):
        events.append(event)
    return events


def _decode_one(data: bytes, max_frame: int = MAX_FRAME):
    connection = ServerConnection(max_frame)
    connection.receive_data(data)
    events = _events(connection)
    assert len(events) == 1, events
    return events[0]


def _response_parts(buffers) -> tuple[int, bytes]:
    """(correlation id, the rest after it) of a framed response; checks the size prefix."""
    data = b"".join(bytes(b) for b in buffers)
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    return struct.unpack_from(">i", data, 4)[0], data[8:]


@pytest.mark.parametrize("name", REAL_REQUESTS)
def test_decodes_real_requests(name):
    build, version = REAL_REQUESTS[name]
    request = build(version)
    event = _decode_one(encode_request(request, version, correlation_id=1234, client_id="rdkafka"))
    assert isinstance(event, RequestReceived)
    assert event.header == RequestHeader(request.API_KEY, version, 1234, "rdkafka")
    assert event.request == request


def test_pipelined_requests_fed_byte_by_byte_come_out_in_order():
    requests = [(build(v), v) for build, v in REAL_REQUESTS.values()]
    stream = b"".join(encode_request(r, v, correlation_id=i) for i, (r, v) in enumerate(requests))
    connection = ServerConnection(MAX_FRAME)
    events = []
    for i in range(len(stream)):
        connection.receive_data(stream[i:i + 1])
        events += _events(connection)
    assert [e.header.correlation_id for e in events] == list(range(len(requests)))
    assert [e.request for e in events] == [r for r, _ in requests]
    assert connection.buffered_bytes == 0


@pytest.mark.parametrize("version", [5, 9, 127, -1])
def test_api_versions_at_an_unknown_version_is_answered_in_v0(version):
    body = b"\x07future\x041.0\x00"  # what a v3+ body looks like; never decoded
    event = _decode_one(frame(request_header(ApiKey.ApiVersions, version, 42, "future-client", tags={}) + body))
    assert isinstance(event, RequestReceived) and event.request is None
    assert (event.header.api_key, event.header.api_version, event.header.correlation_id) == (18, version, 42)

    response = asyncio.run(api_versions(Context(None, None, event.header), None))
    correlation_id, body = _response_parts(ServerConnection.encode_response(event.header, response))
    assert correlation_id == 42
    assert body == response.encode(version=0)  # v0 format exactly, no v1 header byte
    decoded = ApiVersionsResponse.decode(body, version=0)
    assert decoded.error_code == 35
    assert {k.api_key: (k.min_version, k.max_version) for k in decoded.api_keys} == \
        {int(k): bounds for k, bounds in SUPPORTED.items()}


def test_api_versions_v3_response_still_has_header_v0():
    header = RequestHeader(ApiKey.ApiVersions, 3, 9, "c")
    response = ApiVersionsResponse(error_code=0, api_keys=[ApiVersionsResponse.ApiVersion(
        api_key=18, min_version=0, max_version=4)], throttle_time_ms=0)
    correlation_id, body = _response_parts(ServerConnection.encode_response(header, response))
    assert correlation_id == 9
    assert body == response.encode(version=3)


def test_flexible_response_gets_header_v1():
    header = RequestHeader(ApiKey.Metadata, 9, 5, "c")
    response = MetadataResponse(throttle_time_ms=0, brokers=[], cluster_id="x", controller_id=0, topics=[])
    correlation_id, rest = _response_parts(ServerConnection.encode_response(header, response))
    assert correlation_id == 5
    assert rest == b"\x00" + response.encode(version=9)


@pytest.mark.parametrize("api_key,version", [
    (9999, 0),                     # no such API
    (ApiKey.ExpireDelegationToken, 0),  # a real API kgate does not implement
    (ApiKey.Metadata, 13),         # above our maximum
    (ApiKey.Fetch, 17),            # above our maximum
    (ApiKey.Produce, -1),
])
def test_unsupported_api_or_version_is_a_violation_and_closes(api_key, version):
    connection = ServerConnection(MAX_FRAME)
    connection.receive_data(frame(request_header(api_key, version, 77, "c") + b"\x00" * 8))
    connection.receive_data(encode_request(metadata_request(), 1))
    event = connection.next_event()
    assert isinstance(event, ProtocolViolation)
    assert "77" in event.reason
    assert connection.next_event() is CLOSED  # nothing more is decoded on a closed connection


@pytest.mark.parametrize("api_key,version,body", [
    (ApiKey.Metadata, 1, b"\x00\x00\x00\x05"),           # five topics announced, none sent
    (ApiKey.Metadata, 9, b"\x03\x00"),                   # compact array cut short
    (ApiKey.Produce, 9, b"\xff"),
    (ApiKey.CreateTopics, 0, b"\x00\x00\x00\x01\x00\x10ab"),
    (ApiKey.ListOffsets, 1, b""),
])
def test_undecodable_body_is_a_violation(api_key, version, body):
    flexible = REQUESTS[api_key].flexible_version_q(version)
    head = request_header(api_key, version, 1, "c", tags={} if flexible else None)
    event = _decode_one(frame(head + body))
    assert isinstance(event, ProtocolViolation)
    assert "undecodable" in event.reason


def test_truncated_header_is_a_violation():
    event = _decode_one(frame(struct.pack(">hhih", ApiKey.Metadata, 1, 1, 50) + b"short"))
    assert isinstance(event, ProtocolViolation)


def test_frame_over_the_limit_is_a_violation():
    event = _decode_one(encode_request(produce_request("t", 0, b"x" * 2000), 9), max_frame=1000)
    assert isinstance(event, ProtocolViolation)
    assert "socket.request.max.bytes" in event.reason


ALL_VERSIONS = [(key, v) for key, (low, high) in SUPPORTED.items() for v in range(low, high + 1)]


@pytest.mark.parametrize("api_key,version", ALL_VERSIONS, ids=[f"{k.name}-v{v}" for k, v in ALL_VERSIONS])
@settings(max_examples=15, deadline=None)
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1),
       client_id=st.none() | st.text(max_size=12))
def test_round_trip_every_supported_request(api_key, version, data, correlation_id, client_id):
    request = data.draw(message(REQUESTS[api_key], version))
    event = _decode_one(encode_request(request, version, correlation_id, client_id))
    assert isinstance(event, RequestReceived), event
    assert event.header == RequestHeader(api_key, version, correlation_id, client_id)
    assert event.request == request


@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_advertises_the_features_kgate_implements(version):
    """Kafka 4 clients and tools (kafka-features describe) read these: KIP-848 groups
    finalized at group.version 1, KIP-932's share groups at share.version 1, KIP-1071's streams
    groups at streams.version 1; transaction.version
    supported at 0 only (KIP-890's second part is not built), so it is not finalized, as Kafka
    leaves out level-0 features. v3 lists no supported feature whose range starts at 0, as
    Kafka's v3 answers (KIP-1022)."""
    request = ApiVersionsRequest(client_software_name="", client_software_version="")
    header = RequestHeader(ApiKey.ApiVersions, version, 1, "c")
    client = SimpleNamespace(peer_broker=None)  # the connection as a client's, not a peer broker's
    response = asyncio.run(api_versions(Context(None, client, header), request))  # type: ignore[arg-type]
    decoded = ApiVersionsResponse.decode(response.encode(version=version), version=version)
    assert {key.api_key for key in decoded.api_keys} == set(SUPPORTED)
    assert {f.name: (f.min_version, f.max_version) for f in decoded.supported_features} == (
        {"group.version": (0, 1), "share.version": (0, 1), "streams.version": (0, 1), "transaction.version": (0, 0)}
        if version >= 4 else {})
    assert {f.name: f.max_version_level for f in decoded.finalized_features} == {
        "group.version": 1, "share.version": 1, "streams.version": 1}
    assert decoded.finalized_features_epoch >= 0  # a client ignores finalized features of epoch -1


def test_api_versions_tells_a_peer_broker_kgates_own_apis_beside_kafkas():
    """A peer's link sends each internal request at the highest version both brokers serve."""
    request = ApiVersionsRequest(client_software_name="kgate-broker", client_software_version="0.1.0")
    peer = SimpleNamespace(peer_broker=2, client_software=None)
    header = RequestHeader(ApiKey.ApiVersions, 3, 1, "kgate-broker-2")
    response = asyncio.run(api_versions(Context(None, peer, header), request))  # type: ignore[arg-type]
    assert {key.api_key: (key.min_version, key.max_version) for key in response.api_keys} == {**SUPPORTED, **INTERNAL}
