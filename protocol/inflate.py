"""Decompression with a ceiling: compressed record data inflated in bounded chunks.

A few KiB of zstd or gzip can stand for gigabytes (a compression bomb), and the
codec helpers that inflate a whole payload at once let one produce or one
down-converting fetch take the broker's memory. Here every codec is driven as a
stream (zlib with ``max_length``, zstandard's stream reader, LZ4 frames with
``max_length``, snappy blocks whose declared length is checked before they are
inflated), output comes in chunks of at most :data:`CHUNK` bytes, and the caller's
``limit`` on inflated bytes is enforced while inflating, so a bomb costs at most
``limit`` bytes of work and one chunk of memory.

Past the limit the data is refused as MESSAGE_TOO_LARGE, Kafka's answer for a
record larger than the broker accepts: it is not retriable, so a producer gives the
batch up instead of sending it again. Data that does not inflate is
CORRUPT_MESSAGE, as for a failed CRC.
"""
import struct
import zlib
from collections.abc import Iterator

import cramjam
import lz4.frame
import xxhash
import zstandard

from .error_codes import ErrorCode
from .record_batch import CODEC_NAMES, InvalidBatch

CHUNK = 256 * 1024
# The default ceiling on one batch's inflated bytes (kgate.max.inflated.batch.bytes):
# 64 times librdkafka's and Kafka's 1 MB batch and message size, past the ratios real
# record data reaches (text and JSON logs compress 5-20x with gzip or zstd).
DEFAULT_LIMIT = 64 * 1024 * 1024
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
# A zstd frame names the window it needs and the decoder allocates it up front; real
# producers compress batches of at most a few MiB (windows of 2 MiB and less), so a
# frame asking for more than this is refused rather than allocated.
ZSTD_MAX_WINDOW = 16 * 1024 * 1024

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16
_BLOCK_SIZE = struct.Struct(">i")
# An LZ4 frame: magic (4), FLG, BD, [content size (8)], header checksum.
_LZ4_FLG = 4
_LZ4_CONTENT_SIZE_FLAG = 0x08


def inflate(codec: int, data, limit: int, magic: int = 2) -> Iterator[bytes]:
    """The inflated bytes of ``data`` in chunks; InvalidBatch once they would pass ``limit``."""
    name = CODEC_NAMES.get(codec, str(codec))
    total = 0
    try:
        for chunk in _DECODERS[codec](data, magic, limit):
            total += len(chunk)
            if total > limit:
                raise InvalidBatch(ErrorCode.MESSAGE_SIZE_TOO_LARGE,
                                   f"{name} data inflates past the {limit}-byte limit on inflated records")
            yield chunk
    except InvalidBatch:
        raise
    except Exception as exc:  # every codec library raises its own types
        raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"{name} data does not decompress: {exc}") from None


def inflate_all(codec: int, data, limit: int, magic: int = 2) -> bytes:
    """All of ``data`` inflated, for the legacy paths that need the whole inner set."""
    return b"".join(inflate(codec, data, limit, magic))


def _corrupt(message: str) -> InvalidBatch:
    return InvalidBatch(ErrorCode.CORRUPT_MESSAGE, message)


def _gzip(data, _magic: int, _limit: int) -> Iterator[bytes]:
    """Gzip members one after another (a stream may hold several, as Java's reader accepts)."""
    rest = bytes(data)
    while rest:
        stream = zlib.decompressobj(zlib.MAX_WBITS | 16)
        pending = rest
        while not stream.eof:
            out = stream.decompress(pending, CHUNK)
            pending = stream.unconsumed_tail
            if out:
                yield out
            elif not pending:
                raise _corrupt("gzip data ends inside its stream")
        rest = stream.unused_data


def _snappy(data, _magic: int, limit: int) -> Iterator[bytes]:
    """Xerial-framed blocks (what Java and librdkafka send) or one raw block."""
    view = memoryview(data)
    if len(view) <= _XERIAL_HEADER or bytes(view[:len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC:
        yield from _snappy_block(view, limit)
        return
    pos = _XERIAL_HEADER
    room = limit
    while pos < len(view):
        if len(view) - pos < _BLOCK_SIZE.size:
            raise _corrupt("snappy block size truncated")
        (size,) = _BLOCK_SIZE.unpack_from(view, pos)
        pos += _BLOCK_SIZE.size
        if size < 0 or pos + size > len(view):
            raise _corrupt(f"snappy block of {size} bytes does not fit its data")
        for chunk in _snappy_block(view[pos:pos + size], room):
            room -= len(chunk)
            yield chunk
        pos += size


def _snappy_block(block, room: int) -> Iterator[bytes]:
    """A raw block says how large it inflates before it is inflated: check that first."""
    size = cramjam.snappy.decompress_raw_len(block)
    if size > room:
        raise InvalidBatch(ErrorCode.MESSAGE_SIZE_TOO_LARGE,
                           f"snappy block inflates to {size} bytes, past the limit on inflated records")
    out = bytes(cramjam.snappy.decompress_raw(block))
    for start in range(0, len(out), CHUNK):
        yield out[start:start + CHUNK]


def _lz4(data, magic: int, _limit: int) -> Iterator[bytes]:
    frame = _kafka_08_lz4_header_fixed(data) if magic == 0 else data
    stream = lz4.frame.LZ4FrameDecompressor()
    pending = frame
    while not stream.eof:
        out = stream.decompress(pending, max_length=CHUNK)
        pending = b""
        if out:
            yield out
        elif stream.needs_input:
            raise _corrupt("lz4 data ends inside its frame")


def _kafka_08_lz4_header_fixed(data) -> bytes:
    """Magic-0 LZ4 as Kafka 0.8-0.9 framed it: its header checksum covered the magic
    number too (KAFKA-3160). Recompute it over the frame descriptor alone."""
    frame = bytearray(data)
    if len(frame) < 7:
        raise _corrupt("lz4 frame header truncated")
    end = 7 + (8 if frame[_LZ4_FLG] & _LZ4_CONTENT_SIZE_FLAG else 0)
    if len(frame) < end:
        raise _corrupt("lz4 frame header truncated")
    frame[end - 1] = (xxhash.xxh32_intdigest(bytes(frame[_LZ4_FLG:end - 1])) >> 8) & 0xFF
    return bytes(frame)


def _zstd(data, _magic: int, _limit: int) -> Iterator[bytes]:
    decompressor = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW)
    with decompressor.stream_reader(bytes(data), read_across_frames=True) as reader:
        while True:
            out = reader.read(CHUNK)
            if not out:
                return
            yield out


_DECODERS = {GZIP: _gzip, SNAPPY: _snappy, LZ4: _lz4, ZSTD: _zstd}
