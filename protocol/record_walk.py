"""A magic-2 batch's records checked against its header, without building them.

The header's record count decides the offsets a batch is given, and readers find
records by walking their varint lengths. A batch whose records disagree with its
header (10 records under a count of 1, offset deltas out of order, a key running
past its record, bytes after the last record) must be refused before it is stored,
or offsets overlap and consumers skip or choke on records. This walks every record
as Kafka's record reader does (``DefaultRecord.readFrom``: a length, attributes, a
timestamp delta, an offset delta, key, value and headers, each inside the record,
the record exactly as long as it says) and checks the offset deltas run 0..n-1.

It reads field lengths only: no record object, key or value is made. A compressed
batch is inflated in chunks (:mod:`.inflate`, under the caller's limit) and walked
chunk by chunk, so memory holds a chunk and at most one record that spans chunks.
The walk is a generator that yields between slices of :data:`SLICE_RECORDS`
records or one inflated chunk, so an asynchronous caller can let other work run
between slices; a synchronous one just exhausts it.

Errors are INVALID_RECORD, what Kafka (2.5 and later) answers for a record it
cannot read; inflating errors come from :mod:`.inflate`.
"""
from collections.abc import Iterator

from .error_codes import ErrorCode
from .inflate import inflate
from .record_batch import HEADER_SIZE, BatchHeader, InvalidBatch

SLICE_RECORDS = 4096
_VARINT_MAX = 5
_VARLONG_MAX = 10


class Walked:
    """What a walk inflated, for a caller keeping a budget across batches."""

    __slots__ = ("inflated",)

    def __init__(self) -> None:
        self.inflated = 0


def walk(data, header: BatchHeader, inflate_limit: int, walked: Walked | None = None) -> Iterator[None]:
    """Check the records of the batch ``header`` describes at the start of ``data``.

    Raises InvalidBatch; yields between slices of work. ``inflate_limit`` caps the
    inflated bytes of a compressed batch; ``walked`` (if given) learns how many there were.
    """
    records = memoryview(data)[HEADER_SIZE:header.size]
    if header.compression:
        return _walk_compressed(records, header, inflate_limit, walked or Walked())
    return _walk_plain(bytes(records), header.record_count)


def check(data, header: BatchHeader, inflate_limit: int) -> None:
    """:func:`walk` all at once."""
    for _ in walk(data, header, inflate_limit):
        pass


def _invalid(message: str) -> InvalidBatch:
    return InvalidBatch(ErrorCode.INVALID_RECORD, message)


def _walk_plain(buf: bytes, count: int) -> Iterator[None]:
    pos = index = 0
    end = len(buf)
    while index < count:
        stop = min(count, index + SLICE_RECORDS)
        pos, index = _walk_span(buf, pos, end, index, stop)
        if index < stop:
            raise _invalid(f"record {index} of {count} runs past the end of the batch")
        if index < count:
            yield
    if pos != end:
        raise _invalid(f"{end - pos} bytes follow the last of the {count} records the batch header counts")


def _walk_compressed(records, header: BatchHeader, limit: int, walked: Walked) -> Iterator[None]:
    count = header.record_count
    index = 0
    pending: list[bytes] = []  # the start of a record that continues in the next chunk
    pending_size = need = 0
    for chunk in inflate(header.compression, records, limit):
        walked.inflated += len(chunk)
        if pending:
            pending.append(chunk)
            pending_size += len(chunk)
            if pending_size < need:
                continue
            buf = b"".join(pending)
            pending = []
        else:
            buf = chunk
        pos = 0
        while True:
            stop = min(count, index + SLICE_RECORDS)
            pos, index = _walk_span(buf, pos, len(buf), index, stop)
            if index < stop or index == count:
                break
            yield
        if pos < len(buf):
            if index == count:
                raise _invalid(f"inflated data continues after the {count} records the batch header counts")
            pending = [buf[pos:]]
            pending_size = len(buf) - pos
            need = _record_extent(buf, pos)
        yield
    if pending:
        raise _invalid(f"record {index} of {count} is cut short by the end of the inflated data")
    if index < count:
        raise _invalid(f"the batch header counts {count} records but its data holds {index}")


def _record_extent(buf: bytes, pos: int) -> int:
    """Bytes from ``pos`` the record starting there needs (more than are there if unknown)."""
    try:
        raw, body = _raw_varint(buf, pos, _VARINT_MAX)
    except IndexError:  # the length itself continues in the next chunk
        return len(buf) - pos + 1
    return body - pos + ((raw >> 1) ^ -(raw & 1))


def _raw_varint(buf: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` (zigzag not undone): (raw value, position after it).

    IndexError when it runs off ``buf``.
    """
    value = shift = 0
    for at in range(pos, pos + max_bytes):
        byte = buf[at]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at + 1
        shift += 7
    raise _invalid(f"varint at byte {pos} is longer than {max_bytes} bytes")


def _walk_span(buf: bytes, pos: int, end: int, index: int, stop: int) -> tuple[int, int]:
    """Walk whole records in ``buf[pos:end]`` from record ``index`` up to ``stop``.

    Returns where the walk stopped and the index of the next record: at ``stop``, or at
    the first record that is not wholly inside ``buf[:end]`` (for a caller with more
    data to come to finish). A record that is wholly inside but malformed raises.

    This loop is the produce hot path's per-record cost, so varints of one and two
    bytes (nearly all of a real batch's) are decoded inline rather than by a call,
    which costs more than the rest of the loop. Varints are compared in their zigzag
    form: ``raw & 1`` is the sign, ``raw >> 1`` the size of a non-negative length, and
    offset delta ``i`` is ``2 * i``.
    """
    varint = _raw_varint
    while index < stop:
        start = pos
        try:
            byte = buf[pos]
            if byte < 0x80:
                raw = byte
                pos += 1
            elif buf[pos + 1] < 0x80:
                raw = (byte & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                raw, pos = varint(buf, pos, _VARINT_MAX)
        except IndexError:
            return start, index
        if raw & 1 or raw == 0:
            raise _invalid(f"record {index} has length {(raw >> 1) ^ -(raw & 1)}")
        size = raw >> 1
        record_end = pos + size
        if record_end > end:
            return start, index
        try:
            pos += 1  # attributes: unused by magic 2
            byte = buf[pos]  # timestamp delta (varlong): skipped
            if byte < 0x80:
                pos += 1
            elif buf[pos + 1] < 0x80:
                pos += 2
            else:
                pos = varint(buf, pos, _VARLONG_MAX)[1]
            byte = buf[pos]  # offset delta
            if byte < 0x80:
                raw = byte
                pos += 1
            elif buf[pos + 1] < 0x80:
                raw = (byte & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                raw, pos = varint(buf, pos, _VARINT_MAX)
            if raw != index << 1:
                raise _invalid(f"record {index} has offset delta {(raw >> 1) ^ -(raw & 1)}")
            for _field in (0, 1):  # key, value; a negative length (-1) is null, as Kafka reads it
                byte = buf[pos]
                if byte < 0x80:
                    raw = byte
                    pos += 1
                elif buf[pos + 1] < 0x80:
                    raw = (byte & 0x7F) | (buf[pos + 1] << 7)
                    pos += 2
                else:
                    raw, pos = varint(buf, pos, _VARINT_MAX)
                if not raw & 1:
                    pos += raw >> 1
            byte = buf[pos]  # header count
            pos += 1
            if byte:
                pos = _skip_headers(buf, pos - 1, record_end, index)
        except IndexError:  # a length ran past the whole buffer, so past the record
            raise _invalid(f"record {index}'s fields run past its {size} bytes") from None
        if pos != record_end:
            raise _invalid(f"record {index} is {size} bytes long but its fields take {pos - record_end + size}")
        index += 1
    return pos, index


def _skip_headers(buf: bytes, pos: int, record_end: int, index: int) -> int:
    """Past a record's headers (count, then key and value per header); rare, so not inlined."""
    raw, pos = _raw_varint(buf, pos, _VARINT_MAX)
    count = (raw >> 1) ^ -(raw & 1)
    if count < 0 or 2 * count > record_end - pos:
        raise _invalid(f"record {index} has {count} headers in {record_end - pos} bytes")
    for _ in range(count):
        raw, pos = _raw_varint(buf, pos, _VARINT_MAX)
        if raw & 1:
            raise _invalid(f"record {index} has a header key of length {(raw >> 1) ^ -(raw & 1)}")
        raw, pos = _raw_varint(buf, pos + (raw >> 1), _VARINT_MAX)
        if not raw & 1:
            pos += raw >> 1
    return pos
