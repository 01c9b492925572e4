"""A Fetch response encoded around its record bytes is byte for byte kafka-python's own encoding."""
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchResponse

from kgate.protocol.record_splice import SPLICE_MIN_BYTES, encode_fetch_body

R = FetchResponse
PD = R.FetchableTopicResponse.PartitionData
VERSIONS = range(0, 17)

records = st.one_of(st.none(), st.binary(max_size=64),
                    st.integers(SPLICE_MIN_BYTES - 1, 3 * SPLICE_MIN_BYTES).map(lambda n: bytes([n % 251]) * n))


def _response(topics):
    return R(throttle_time_ms=0, error_code=0, session_id=0, responses=[
        R.FetchableTopicResponse(topic=f"topic-{t}", topic_id=uuid.UUID(int=t + 1), partitions=[
            PD(partition_index=p, error_code=0, high_watermark=100, last_stable_offset=100, log_start_offset=0,
               aborted_transactions=None, preferred_read_replica=-1, records=data)
            for p, data in enumerate(partitions)])
        for t, partitions in enumerate(topics)])


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(VERSIONS), st.lists(st.lists(records, max_size=4), max_size=3))
def test_spliced_encoding_is_kafka_pythons_encoding(version, topics):
    response = _response(topics)
    expected = bytes(response.encode(version=version))
    pieces = encode_fetch_body(response, version)
    assert b"".join(pieces) == expected
    large = [data for partitions in topics for data in partitions if data is not None and len(data) >= SPLICE_MIN_BYTES]
    # The large record sets are the very objects handed in (not copies), and the response is left as it was.
    assert [piece for piece in pieces if any(piece is data for data in large)] == large
    assert bytes(response.encode(version=version)) == expected


def test_record_bytes_that_look_like_the_length_prefix_do_not_confuse_the_cut():
    tricky = (b"\x00\x00\x00\x10" * (SPLICE_MIN_BYTES // 4)) + b"\x11" * 32
    for version in (4, 12, 16):
        response = _response([[tricky, tricky[:100], tricky]])
        assert b"".join(encode_fetch_body(response, version)) == bytes(response.encode(version=version))
