"""Request header v0/v1/v2 decoding and response header v0/v1 encoding.

Decoded by hand rather than through kafka-python's header class because that class
copies the whole frame into a BytesIO; a produce frame can be megabytes, and the
header is a handful of fixed fields.
"""
import struct
from dataclasses import dataclass

_FIXED = struct.Struct(">hhi")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class MalformedHeader(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(frame: bytes | bytearray) -> tuple[int, int, int]:
    """Return (api_key, api_version, correlation_id): enough to answer any request."""
    if len(frame) < _FIXED.size:
        raise MalformedHeader(f"request of {len(frame)} bytes is shorter than a request header")
    return _FIXED.unpack_from(frame, 0)


def _read_uvarint(buf: bytes | bytearray, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise MalformedHeader("truncated varint in request header")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise MalformedHeader("varint longer than 5 bytes in request header")


def decode_request_header(frame: bytes | bytearray, flexible: bool) -> tuple[RequestHeader, int]:
    """Decode header v1 (or v2 when ``flexible``); return it and where the body starts."""
    api_key, api_version, correlation_id = peek_header(frame)
    pos = _FIXED.size
    if len(frame) < pos + 2:
        raise MalformedHeader("request header ends before client_id")
    (length,) = _INT16.unpack_from(frame, pos)
    pos += 2
    client_id = None
    if length >= 0:
        if len(frame) < pos + length:
            raise MalformedHeader("client_id runs past the end of the request")
        try:
            client_id = frame[pos:pos + length].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedHeader("client_id is not UTF-8") from exc
        pos += length
    elif length != -1:
        raise MalformedHeader(f"client_id has negative length {length}")
    if flexible:
        count, pos = _read_uvarint(frame, pos)
        for _ in range(count):
            _tag, pos = _read_uvarint(frame, pos)
            size, pos = _read_uvarint(frame, pos)
            pos += size
        if pos > len(frame):
            raise MalformedHeader("tagged fields run past the end of the request header")
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def encode_response_header(correlation_id: int, flexible: bool) -> bytes:
    """Response header v0 is the correlation id; v1 adds an empty tagged-field section."""
    return _INT32.pack(correlation_id) + (b"\x00" if flexible else b"")
