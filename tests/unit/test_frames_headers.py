"""Length-prefixed framing and request header v1/v2 decoding."""
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kgate.protocol.frames import FrameSplitter, FrameTooLarge, InvalidFrameSize
from kgate.protocol.headers import MalformedHeader, decode_request_header, encode_response_header, peek_header
from tests.unit.request_frames import frame, request_header, uvarint

MAX = 1024


@st.composite
def frames_in_chunks(draw):
    payloads = draw(st.lists(st.binary(max_size=300), max_size=8))
    stream = b"".join(frame(p) for p in payloads)
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=20)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]
    return payloads, chunks


@given(frames_in_chunks())
def test_splitter_yields_every_frame_whatever_the_chunk_boundaries(case):
    payloads, chunks = case
    splitter = FrameSplitter(MAX)
    seen = []
    for chunk in chunks:
        splitter.feed(chunk)
        while (payload := splitter.next_frame()) is not None:
            seen.append(payload)
    assert seen == payloads
    assert splitter.buffered == 0


def test_splitter_waits_for_a_whole_prefix_and_payload():
    splitter = FrameSplitter(MAX)
    splitter.feed(b"\x00\x00\x00")
    assert splitter.next_frame() is None
    splitter.feed(b"\x03ab")
    assert splitter.next_frame() is None
    splitter.feed(b"c")
    assert splitter.next_frame() == b"abc"
    assert splitter.next_frame() is None


def test_frame_of_exactly_the_limit_is_accepted():
    splitter = FrameSplitter(MAX)
    splitter.feed(frame(b"x" * MAX))
    assert splitter.next_frame() == b"x" * MAX


@pytest.mark.parametrize("size", [MAX + 1, 2**31 - 1])
def test_size_over_the_limit_raises_before_the_payload_arrives(size):
    splitter = FrameSplitter(MAX)
    splitter.feed(struct.pack(">i", size))
    with pytest.raises(FrameTooLarge, match=str(MAX)):
        splitter.next_frame()


@pytest.mark.parametrize("size", [-1, -(2**31)])
def test_negative_size_raises(size):
    splitter = FrameSplitter(MAX)
    splitter.feed(struct.pack(">i", size) + b"abcd")
    with pytest.raises(InvalidFrameSize):
        splitter.next_frame()


# -- request headers ---------------------------------------------------------------------

def test_header_v1():
    raw = request_header(3, 1, 77, "client-1") + b"BODY"
    header, body_start = decode_request_header(raw, flexible=False)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 1, 77, "client-1")
    assert raw[body_start:] == b"BODY"


def test_header_v1_null_and_empty_client_id():
    header, start = decode_request_header(request_header(18, 0, 1, None) + b"B", flexible=False)
    assert header.client_id is None and start == 10
    header, start = decode_request_header(request_header(18, 0, 1, "") + b"B", flexible=False)
    assert header.client_id == "" and start == 10


def test_header_v1_non_ascii_client_id():
    header, _ = decode_request_header(request_header(3, 1, 1, "klïent-ü"), flexible=False)
    assert header.client_id == "klïent-ü"


@pytest.mark.parametrize("tags", [{}, {0: b"x"}, {1: b"", 5: b"y" * 200, 300: b"z" * 3}])
def test_header_v2_skips_tagged_fields(tags):
    raw = request_header(3, 12, -5, "c", tags=tags) + b"BODY"
    header, body_start = decode_request_header(raw, flexible=True)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 12, -5, "c")
    assert raw[body_start:] == b"BODY"


def test_header_v2_with_null_client_id():
    raw = request_header(3, 12, 9, None, tags={}) + b"\x01"
    header, body_start = decode_request_header(raw, flexible=True)
    assert header.client_id is None
    assert raw[body_start:] == b"\x01"


@pytest.mark.parametrize("raw,flexible", [
    (request_header(3, 1, 7, "client-id"), False),
    (request_header(3, 12, 7, "client-id", tags={2: b"tagged data", 400: b"q" * 130}), True),
])
def test_every_truncation_of_a_header_raises(raw, flexible):
    decode_request_header(raw, flexible)  # the whole header is fine
    for cut in range(len(raw)):
        with pytest.raises(MalformedHeader):
            decode_request_header(raw[:cut], flexible)


def test_client_id_length_below_minus_one_raises():
    raw = struct.pack(">hhih", 3, 1, 1, -2) + b"xx"
    with pytest.raises(MalformedHeader, match="negative length"):
        decode_request_header(raw, flexible=False)


def test_client_id_that_is_not_utf8_raises():
    raw = struct.pack(">hhih", 3, 1, 1, 2) + b"\xff\xfe"
    with pytest.raises(MalformedHeader, match="UTF-8"):
        decode_request_header(raw, flexible=False)


def test_overlong_varint_in_tagged_fields_raises():
    raw = request_header(3, 12, 1, "c") + b"\x80" * 6 + b"\x00"
    with pytest.raises(MalformedHeader, match="varint"):
        decode_request_header(raw, flexible=True)


def test_tagged_field_claiming_more_bytes_than_sent_raises():
    raw = request_header(3, 12, 1, "c") + uvarint(1) + uvarint(0) + uvarint(50) + b"short"
    with pytest.raises(MalformedHeader):
        decode_request_header(raw, flexible=True)


def test_peek_needs_the_fixed_fields():
    assert peek_header(struct.pack(">hhi", 18, 3, 42)) == (18, 3, 42)
    with pytest.raises(MalformedHeader):
        peek_header(b"\x00\x12\x00\x03\x00\x00\x00")


def test_response_headers():
    assert encode_response_header(7, flexible=False) == b"\x00\x00\x00\x07"
    assert encode_response_header(-1, flexible=True) == b"\xff\xff\xff\xff\x00"
