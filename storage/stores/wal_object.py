"""The layout of a WAL object and of a ledger's index pieces: the index lives in the objects.

A WAL object holds the entries one broker added in one commit interval, for every
ledger it writes, grouped into *runs* (consecutive entries of one ledger)::

    [frames of run 1][frames of run 2]...[index][u32 index length][u32 CRC32C of index][magic]

Each frame is the file store's: ``[u32 payload length][u32 CRC32C of length and payload][payload]``,
so a damaged byte is found on read. The index lists, per run, the ledger, its first
entry id, where the run starts in the object, and for each entry its payload length
and its first ``HEAD_BYTES`` bytes: enough for a managed ledger to rebuild its offset
index (entry header plus record batch header) from the index alone, without reading
payloads. A broker recovering a ledger reads only these indexes.

The same run encoding, prefixed with the object key, makes a ledger's *index piece*
(``ledgers/<id>/index-<seq>``): the runs of one ledger through WAL object ``seq``,
written at checkpoints and when the ledger is sealed, so that opening a ledger reads a
few small objects rather than every WAL object since the ledger began.
"""
import struct
from dataclasses import dataclass, field

from crc32c import crc32c

from ..ledger import ChecksumMismatch, CorruptLedger

# Enough for the entry header (22 bytes), a record batch header (61) and a transaction
# marker's key (16), which a partition reads of every entry when it opens: a head any
# shorter sends that open to GET every payload of the partition.
HEAD_BYTES = 128
FRAME = struct.Struct(">II")
_LENGTH = struct.Struct(">I")
_RUN = struct.Struct(">qqqI")  # ledger id, first entry id, run start in the object, entry count
_TRAILER = struct.Struct(">II8s")
TRAILER_SIZE = _TRAILER.size
# Version 1 kept 96 head bytes; version 2 says how many after the run count.
_OBJECT_MAGIC = b"KGWAL\x00\x00\x02"
_PIECE_MAGIC = b"KGIDX\x00\x00\x02"
_VERSIONS = {_OBJECT_MAGIC: 2, _PIECE_MAGIC: 2, b"KGWAL\x00\x00\x01": 1, b"KGIDX\x00\x00\x01": 1}
_V1_HEAD_BYTES = 96
_KEY = struct.Struct(">H")


@dataclass
class Run:
    """Consecutive entries of one ledger inside one object."""

    ledger_id: int
    first_entry: int
    start: int  # byte offset of the first frame in the object
    lengths: list[int] = field(default_factory=list)
    heads: list[bytes] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.lengths)

    def positions(self) -> list[int]:
        """Byte offset of each entry's frame in the object."""
        out, pos = [], self.start
        for length in self.lengths:
            out.append(pos)
            pos += FRAME.size + length
        return out

    @property
    def end(self) -> int:
        return self.start + sum(FRAME.size + length for length in self.lengths)


def frame(chunks) -> tuple[list, int]:
    """The buffers of one framed entry and the entry's payload length."""
    size = sum(len(chunk) for chunk in chunks)
    crc = crc32c(_LENGTH.pack(size))
    for chunk in chunks:
        crc = crc32c(chunk, crc)
    return [FRAME.pack(size, crc), *chunks], size


def head_of(chunks) -> bytes:
    """The first HEAD_BYTES bytes of an entry made of ``chunks``."""
    out = bytearray()
    for chunk in chunks:
        out += chunk[:HEAD_BYTES - len(out)]
        if len(out) >= HEAD_BYTES:
            break
    return bytes(out)


def _encode_runs(runs: list[Run], keys: list[str] | None) -> bytearray:
    out = bytearray(_LENGTH.pack(len(runs)) + _KEY.pack(HEAD_BYTES))
    for i, run in enumerate(runs):
        if keys is not None:
            key = keys[i].encode()
            out += _KEY.pack(len(key)) + key
        out += _RUN.pack(run.ledger_id, run.first_entry, run.start, run.count)
        for length, head in zip(run.lengths, run.heads):
            out += _LENGTH.pack(length)
            out += head
    return out


def _decode_runs(data, what: str, with_keys: bool, version: int) -> list[tuple[str, Run]]:
    view = memoryview(data)
    try:
        (count,), pos = _LENGTH.unpack_from(view, 0), _LENGTH.size
        head_bytes = _V1_HEAD_BYTES
        if version >= 2:
            (head_bytes,) = _KEY.unpack_from(view, pos)
            pos += _KEY.size
        runs = []
        for _ in range(count):
            key = ""
            if with_keys:
                (size,) = _KEY.unpack_from(view, pos)
                key = bytes(view[pos + _KEY.size:pos + _KEY.size + size]).decode()
                pos += _KEY.size + size
            ledger_id, first, start, entries = _RUN.unpack_from(view, pos)
            pos += _RUN.size
            run = Run(ledger_id, first, start)
            for _ in range(entries):
                (length,) = _LENGTH.unpack_from(view, pos)
                pos += _LENGTH.size
                head_size = min(length, head_bytes)
                run.lengths.append(length)
                run.heads.append(bytes(view[pos:pos + head_size]))
                pos += head_size
            runs.append((key, run))
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptLedger(f"{what}: index does not parse ({exc})") from exc
    return runs


def _seal(body: bytearray, magic: bytes) -> bytearray:
    body += _TRAILER.pack(len(body), crc32c(body), magic)
    return body


def object_index(runs: list[Run]) -> bytes:
    """The index and trailer that end a WAL object whose frames the runs describe."""
    return bytes(_seal(_encode_runs(runs, None), _OBJECT_MAGIC))


def index_span(trailer, key: str) -> int:
    """From an object's last TRAILER_SIZE bytes: how many bytes its index takes before the trailer."""
    size, _crc, magic = _TRAILER.unpack_from(trailer, len(trailer) - TRAILER_SIZE)
    if bytes(magic[:5]) != _OBJECT_MAGIC[:5] or bytes(magic) not in _VERSIONS:
        raise CorruptLedger(f"{key}: not a WAL object (trailer {bytes(magic)!r})")
    return size


def read_object_index(tail, key: str) -> list[Run]:
    """The runs of a WAL object from its tail (index plus trailer, possibly with bytes before)."""
    size, crc, magic = _TRAILER.unpack_from(tail, len(tail) - TRAILER_SIZE)
    body = memoryview(tail)[len(tail) - TRAILER_SIZE - size:len(tail) - TRAILER_SIZE]
    if index_span(tail, key) != size or len(body) != size or crc32c(body) != crc:
        raise CorruptLedger(f"{key}: WAL object index fails its CRC32C")
    return [run for _key, run in _decode_runs(body, key, with_keys=False, version=_VERSIONS[bytes(magic)])]


# Enough for a WAL object's index and trailer in one GET in the common case.
INDEX_TAIL_GUESS = 64 * 1024


async def fetch_object_index(client, key: str) -> list[Run]:
    """The runs of WAL object ``key``, read from its tail (a second GET when the index is large)."""
    tail = await client.get_tail(key, INDEX_TAIL_GUESS)
    needed = index_span(tail, key) + TRAILER_SIZE
    if needed > len(tail):
        tail = await client.get_tail(key, needed)
    return read_object_index(tail, key)


def index_piece(pieces: list[tuple[str, Run]]) -> bytes:
    """A ledger's index piece: its runs, each with the key of the object holding it."""
    return bytes(_seal(_encode_runs([run for _, run in pieces], [key for key, _ in pieces]), _PIECE_MAGIC))


def read_index_piece(data, key: str) -> list[tuple[str, Run]]:
    if len(data) < TRAILER_SIZE:
        raise CorruptLedger(f"{key}: index piece cut short")
    size, crc, magic = _TRAILER.unpack_from(data, len(data) - TRAILER_SIZE)
    body = memoryview(data)[:len(data) - TRAILER_SIZE]
    if bytes(magic[:5]) != _PIECE_MAGIC[:5] or bytes(magic) not in _VERSIONS or len(body) != size \
            or crc32c(body) != crc:
        raise CorruptLedger(f"{key}: index piece fails its CRC32C")
    return _decode_runs(body, key, with_keys=True, version=_VERSIONS[bytes(magic)])


def pack(parts: list[tuple[int, int, memoryview, list[int]]]) -> tuple[memoryview, list[Run]]:
    """An object (in the WAL object layout) of entries already framed, as a local WAL or an
    object holds them: per part (ledger id, first entry id, frames, payload lengths), one run."""
    buffers: list = []
    runs: list[Run] = []
    pos = 0
    for ledger_id, first, frames, lengths in parts:
        run = Run(ledger_id, first, pos, list(lengths))
        offset = 0
        for length in lengths:
            run.heads.append(bytes(frames[offset + FRAME.size:offset + FRAME.size + min(length, HEAD_BYTES)]))
            offset += FRAME.size + length
        buffers.append(frames)
        runs.append(run)
        pos += len(frames)
    buffers.append(object_index(runs))
    return memoryview(b"".join(buffers)), runs


def read_frames(data, ledger_id: int, first_entry: int, lengths: list[int]) -> list[memoryview]:
    """The payloads of consecutive frames at the start of ``data``, each checked against its CRC32C."""
    view = memoryview(data)
    out, pos = [], 0
    for i, expected in enumerate(lengths):
        size, crc = FRAME.unpack_from(view, pos)
        payload = view[pos + FRAME.size:pos + FRAME.size + size]
        if size != expected or len(payload) < size or crc32c(payload, crc32c(view[pos:pos + _LENGTH.size])) != crc:
            raise ChecksumMismatch(f"ledger {ledger_id} entry {first_entry + i}: stored CRC32C does not match")
        out.append(payload)
        pos += FRAME.size + size
    return out
