"""The few pieces of the protobuf wire format the ``pulsar`` entry format needs.

Hand-written rather than generated: Pulsar's metadata messages use only varints
(wire type 0) and length-delimited fields (wire type 2), so encoding is a tag, a
varint and the bytes, and decoding is a loop over ``(field, wire type, value)``
that skips what it does not know. Fixed-width fields (wire types 1 and 5) are
skipped when read and never written; groups (3 and 4) are refused.

Every decoding failure is a :class:`ValueError` naming what was wrong.
"""
from collections.abc import Iterator

VARINT = 0
FIXED64 = 1
LEN = 2
FIXED32 = 5

_UINT64_MASK = (1 << 64) - 1
# Varints below 2**14 (one or two bytes) are looked up: sizes, lengths, small flags.
_SMALL = [bytes([n]) for n in range(0x80)] + [bytes([(n & 0x7F) | 0x80, n >> 7]) for n in range(0x80, 1 << 14)]
_SMALL_LIMIT = len(_SMALL)


def varint(value: int) -> bytes:
    """``value`` as a base-128 varint; negatives as their 64-bit two's complement (int32/int64)."""
    if 0 <= value < _SMALL_LIMIT:
        return _SMALL[value]
    value &= _UINT64_MASK
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag(field: int, wire_type: int) -> bytes:
    """The key preceding a field: ``field << 3 | wire_type``, as a varint."""
    return varint(field << 3 | wire_type)


def read_varint(data, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos`` (at most 10 bytes, before ``end``) and the position after it."""
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            if result > _UINT64_MASK:
                raise ValueError("varint longer than 64 bits")
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint longer than 10 bytes")


def fields(data, pos: int, end: int) -> Iterator[tuple[int, int, object]]:
    """``(field, wire_type, value)`` for each field in ``data[pos:end]``.

    ``value`` is an int for varints and fixed-width fields, and a slice of ``data``
    (a memoryview when ``data`` is one) for length-delimited fields.
    """
    while pos < end:
        key, pos = read_varint(data, pos, end)
        field, wire_type = key >> 3, key & 7
        if field == 0:
            raise ValueError("field number 0")
        if wire_type == VARINT:
            value, pos = read_varint(data, pos, end)
        elif wire_type == LEN:
            length, pos = read_varint(data, pos, end)
            if length > end - pos:
                raise ValueError(f"field {field}: length {length} runs past the message ({end - pos} bytes left)")
            value = data[pos:pos + length]
            pos += length
        elif wire_type == FIXED64 or wire_type == FIXED32:
            size = 8 if wire_type == FIXED64 else 4
            if size > end - pos:
                raise ValueError(f"field {field}: truncated fixed-width value")
            value = int.from_bytes(data[pos:pos + size], "little")
            pos += size
        else:
            raise ValueError(f"field {field}: unsupported wire type {wire_type}")
        yield field, wire_type, value
