"""The record walk's per-record loop in plain Python: the reference the compiled one is fuzzed against.

It reads a record as Kafka's ``DefaultRecord.readFrom`` does (a length, attributes, a
timestamp delta, an offset delta, key, value and headers), written for reading, not
speed: the compiled loop must reach the same verdict, at the same place, in the same words.
"""

VARINT_MAX = 5
VARLONG_MAX = 10


class Short(Exception):
    """A varint runs off the end of the buffer."""


class Malformed(Exception):
    """A record wholly inside the buffer is malformed."""


def span(buf: bytes, pos: int, index: int, stop: int) -> tuple[int, int, str | None]:
    """What ``_record_span.span`` answers: (where it stopped, next record, fault or None)."""
    try:
        while index < stop:
            start = pos
            try:
                raw, pos = _varint(buf, pos, VARINT_MAX)
            except Short:
                return start, index, None
            if raw & 1 or raw == 0:
                raise Malformed(f"record {index} has length {_zigzag(raw)}")
            size = raw >> 1
            record_end = pos + size
            if record_end > len(buf):
                return start, index, None
            try:
                pos = _record_fields(buf, pos + 1, record_end, index)
            except Short:
                raise Malformed(f"record {index}'s fields run past its {size} bytes") from None
            if pos != record_end:
                raise Malformed(f"record {index} is {size} bytes long but its fields take {pos - record_end + size}")
            index += 1
    except Malformed as fault:
        return pos, index, str(fault)
    return pos, index, None


def _record_fields(buf: bytes, pos: int, record_end: int, index: int) -> int:
    """Past a record's fields after its attributes."""
    pos = _varint(buf, pos, VARLONG_MAX)[1]  # timestamp delta
    raw, pos = _varint(buf, pos, VARINT_MAX)
    if raw != index << 1:
        raise Malformed(f"record {index} has offset delta {_zigzag(raw)}")
    for _field in ("key", "value"):
        raw, pos = _varint(buf, pos, VARINT_MAX)
        if not raw & 1:
            pos += raw >> 1
    if pos >= len(buf):
        raise Short
    if buf[pos] == 0:  # no headers, the common case
        return pos + 1
    raw, pos = _varint(buf, pos, VARINT_MAX)
    count = _zigzag(raw)
    if count < 0 or 2 * count > record_end - pos:
        raise Malformed(f"record {index} has {count} headers in {record_end - pos} bytes")
    for _header in range(count):
        raw, pos = _varint(buf, pos, VARINT_MAX)
        if raw & 1:
            raise Malformed(f"record {index} has a header key of length {_zigzag(raw)}")
        raw, pos = _varint(buf, pos + (raw >> 1), VARINT_MAX)
        if not raw & 1:
            pos += raw >> 1
    return pos


def _varint(buf: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    value = 0
    for i in range(max_bytes):
        if pos + i >= len(buf):
            raise Short
        byte = buf[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            return value, pos + i + 1
    raise Malformed(f"varint at byte {pos} is longer than {max_bytes} bytes")


def _zigzag(raw: int) -> int:
    return (raw >> 1) ^ -(raw & 1)
