"""Kafka's primitive types written by hand, for the answers kgate writes itself
(protocol.produce_answer, protocol.fetch_answer): the ones every request that carries
records is answered with, where kafka-python's generic encoding cost more than the rest.

``flexible`` versions (KIP-482) write compact lengths (an unsigned varint of n + 1, 0 for
null) and a tagged-field count after every structure; kgate sends no tagged fields, so
the count is always 0.
"""
import struct
from operator import attrgetter

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_NULL = {False: b"\xff\xff\xff\xff", True: b"\x00"}  # a null array or bytes: length -1, or compact 0


def uvarint(value: int) -> bytes:
    """An unsigned varint, 7 bits a byte: compact lengths here, and (zigzagged first) the
    record format's fields (protocol.record_compaction)."""
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class Fields:
    """A run of fixed-size fields packed straight from an object's attributes, by ``layout``
    (struct codes, big-endian) and the attributes' names, in order."""

    __slots__ = ("_struct", "_get")

    def __init__(self, layout: str, names: tuple[str, ...]):
        self._struct = struct.Struct(">" + layout)
        self._get = attrgetter(*names)  # two names at least: a tuple back

    def pack(self, item, *more) -> bytes:
        """The fields of ``item``, then ``more`` (for codes in ``layout`` past the names)."""
        return self._struct.pack(*self._get(item), *more)


class AnswerWriter:
    """One answer's bytes: framing built up in ``out``; buffers passed through whole between
    pieces (:meth:`pass_through`), so large record sets are never copied."""

    __slots__ = ("flexible", "out", "pieces")

    def __init__(self, flexible: bool):
        self.flexible = flexible
        self.out = bytearray()
        self.pieces: list = []

    def length(self, count: int) -> None:
        """An array's or a byte string's length."""
        self.out += uvarint(count + 1) if self.flexible else _I32.pack(count)

    def null(self) -> None:
        """A null array or byte string."""
        self.out += _NULL[self.flexible]

    def string(self, value: str | None) -> None:
        if value is None:
            self.out += b"\x00" if self.flexible else b"\xff\xff"
            return
        encoded = value.encode()
        self.out += uvarint(len(encoded) + 1) if self.flexible else _I16.pack(len(encoded))
        self.out += encoded

    def tags(self) -> None:
        if self.flexible:
            self.out += b"\x00"

    def pass_through(self, buffers) -> None:
        """``buffers`` go out as they are, after what is written so far."""
        self.pieces.append(bytes(self.out))
        self.out.clear()
        self.pieces.extend(buffers)

    def finish(self) -> list:
        """The answer as buffers to write in order."""
        self.pieces.append(bytes(self.out))
        return self.pieces
