"""A magic-2 batch's records checked against its header, without building them.

The header's record count decides the offsets a batch is given, and readers find
records by walking their varint lengths. A batch whose records disagree with its
header (10 records under a count of 1, offset deltas out of order, a key running
past its record, bytes after the last record) must be refused before it is stored,
or offsets overlap and consumers skip or choke on records. This walks every record
as Kafka's record reader does (``DefaultRecord.readFrom``: a length, attributes, a
timestamp delta, an offset delta, key, value and headers, each inside the record,
the record exactly as long as it says) and checks the offset deltas run 0..n-1.

It reads field lengths only: no record object, key or value is made, and the
per-record loop is compiled (``_record_span.c``; ``tests/unit/record_walk_reference.py``
is the same loop in plain Python, which the compiled one is fuzzed against), since in
Python it cost a microsecond a record, a third of a 1 KiB record's produce. A compressed
batch is inflated in chunks (:mod:`.inflate`, under the caller's limit) and walked
chunk by chunk, so memory holds a chunk and at most one record that spans chunks.
The walk is a generator that yields between slices of :data:`SLICE_RECORDS`
records or one inflated chunk, so an asynchronous caller can let other work run
between slices; a synchronous one just exhausts it.

Errors are INVALID_RECORD, what Kafka (2.5 and later) answers for a record it
cannot read; inflating errors come from :mod:`.inflate`.
"""
from collections.abc import Iterator

from ._record_span import span
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
    return _walk_plain(records, header.record_count)


def check(data, header: BatchHeader, inflate_limit: int) -> None:
    """:func:`walk` all at once."""
    for _ in walk(data, header, inflate_limit):
        pass


def _invalid(message: str) -> InvalidBatch:
    return InvalidBatch(ErrorCode.INVALID_RECORD, message)


def _walk_plain(buf: memoryview, count: int) -> Iterator[None]:
    pos = index = 0
    end = len(buf)
    while index < count:
        stop = min(count, index + SLICE_RECORDS)
        pos, index = _walk_span(buf, pos, index, stop)
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
            pos, index = _walk_span(buf, pos, index, stop)
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


def _walk_span(buf, pos: int, index: int, stop: int) -> tuple[int, int]:
    """Walk whole records in ``buf`` from byte ``pos``, record ``index``, up to record ``stop``.

    Returns where the walk stopped and the index of the next record: at ``stop``, or at
    the first record that is not wholly inside ``buf`` (for a caller with more data to
    come to finish). A record that is wholly inside but malformed raises. The loop is
    compiled (``_record_span.c``): it is the produce hot path's per-record cost.
    """
    pos, index, problem = span(buf, pos, index, stop)
    if problem is not None:
        raise _invalid(problem)
    return pos, index
