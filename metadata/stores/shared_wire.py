"""The frames a ``serve --workers`` supervisor and its workers exchange over a Unix socket.

Sans-IO, as the Kafka protocol layer is: :class:`FrameReader` takes bytes as they come and
hands back whole messages, or raises :class:`WireError` for bytes no peer of ours writes, so
the socket owner decides what a broken peer costs (closing that connection, nothing more).

A frame is a 4-byte big-endian length, then the message: its kind (one byte), its id (four
bytes: a request's, echoed by its reply; a watch's, carried by its events), a field count
(one byte) and the fields, each a one-byte type tag and its value. The fields are typed on
the wire rather than by a per-kind layout so one reader checks every frame the same way;
what each kind must carry is checked a level up (:func:`fields_of`).
"""
import enum
import struct
from dataclasses import dataclass

MAX_FRAME = 16 * 1024 * 1024  # far above any metadata node; a length beyond it is garbage

_LENGTH = struct.Struct(">I")
_HEAD = struct.Struct(">BIB")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")


class Kind(enum.IntEnum):
    GET = 1
    CREATE = 2
    SET = 3
    DELETE = 4
    CHILDREN = 5
    WATCH = 6  # no reply: events carry the watch's id
    HEARTBEAT = 7  # no reply: the supervisor only needs to hear from the worker
    REPLY = 64
    EVENT = 65


class Status(enum.IntEnum):
    OK = 0
    NO_NODE = 1
    NODE_EXISTS = 2
    BAD_VERSION = 3
    FAILED = 4  # the server could not do it; the reply's field says why


# What each request carries, checked by the server before it acts.
REQUEST_FIELDS: dict[Kind, tuple[type, ...]] = {
    Kind.GET: (str,), Kind.CREATE: (str, bytes, bool, bool), Kind.SET: (str, bytes, int),
    Kind.DELETE: (str, int, bool), Kind.CHILDREN: (str,), Kind.WATCH: (str, bool), Kind.HEARTBEAT: (),
}

Field = None | bool | int | str | bytes | tuple[str, ...]


class _Tag(enum.IntEnum):
    NONE = 0
    FALSE = 1
    TRUE = 2
    INT = 3
    STR = 4
    BYTES = 5
    STRS = 6


class WireError(Exception):
    """Bytes that are not a frame of this protocol: the connection cannot go on."""


@dataclass(frozen=True, slots=True)
class Message:
    kind: Kind
    ident: int
    fields: tuple[Field, ...] = ()


def encode(message: Message) -> bytes:
    body = [_HEAD.pack(message.kind, message.ident, len(message.fields))]
    for value in message.fields:
        body.append(_encode_field(value))
    payload = b"".join(body)
    return _LENGTH.pack(len(payload)) + payload


def _encode_field(value: Field) -> bytes:
    if value is None:
        return bytes([_Tag.NONE])
    if isinstance(value, bool):
        return bytes([_Tag.TRUE if value else _Tag.FALSE])
    if isinstance(value, int):
        return bytes([_Tag.INT]) + _I64.pack(value)
    if isinstance(value, str):
        raw = value.encode()
        return bytes([_Tag.STR]) + _U32.pack(len(raw)) + raw
    if isinstance(value, bytes):
        return bytes([_Tag.BYTES]) + _U32.pack(len(value)) + value
    raws = [item.encode() for item in value]
    return bytes([_Tag.STRS]) + _U32.pack(len(raws)) + b"".join(_U32.pack(len(raw)) + raw for raw in raws)


class FrameReader:
    """Bytes in, messages out: feed :meth:`receive`, then drain :meth:`next_message`."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def receive(self, data: bytes) -> None:
        self._buffer += data

    def next_message(self) -> Message | None:
        """The next whole message, or None until more bytes come."""
        if len(self._buffer) < _LENGTH.size:
            return None
        (length,) = _LENGTH.unpack_from(self._buffer)
        if length > MAX_FRAME:
            raise WireError(f"frame of {length} bytes (at most {MAX_FRAME})")
        if len(self._buffer) < _LENGTH.size + length:
            return None
        payload = bytes(self._buffer[_LENGTH.size:_LENGTH.size + length])
        del self._buffer[:_LENGTH.size + length]
        return _decode(payload)


def _decode(payload: bytes) -> Message:
    if len(payload) < _HEAD.size:
        raise WireError(f"frame of {len(payload)} bytes is shorter than a message head")
    kind, ident, count = _HEAD.unpack_from(payload)
    try:
        kind = Kind(kind)
    except ValueError:
        raise WireError(f"unknown message kind {kind}") from None
    at = _HEAD.size
    fields = []
    for _ in range(count):
        value, at = _decode_field(payload, at)
        fields.append(value)
    if at != len(payload):
        raise WireError(f"{len(payload) - at} bytes after the last field")
    return Message(kind, ident, tuple(fields))


def _take(payload: bytes, at: int, size: int) -> tuple[bytes, int]:
    if at + size > len(payload):
        raise WireError("a field runs past the end of its frame")
    return payload[at:at + size], at + size


def _sized(payload: bytes, at: int) -> tuple[bytes, int]:
    raw, at = _take(payload, at, _U32.size)
    return _take(payload, at, _U32.unpack(raw)[0])


def _text(raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise WireError("a string field is not UTF-8") from None


def _decode_field(payload: bytes, at: int) -> tuple[Field, int]:
    tag, at = _take(payload, at, 1)
    match tag[0]:
        case _Tag.NONE:
            return None, at
        case _Tag.FALSE | _Tag.TRUE:
            return tag[0] == _Tag.TRUE, at
        case _Tag.INT:
            raw, at = _take(payload, at, _I64.size)
            return _I64.unpack(raw)[0], at
        case _Tag.STR:
            raw, at = _sized(payload, at)
            return _text(raw), at
        case _Tag.BYTES:
            return _sized(payload, at)
        case _Tag.STRS:
            raw, at = _take(payload, at, _U32.size)
            items = []
            for _ in range(_U32.unpack(raw)[0]):
                item, at = _sized(payload, at)  # each item is at least 4 bytes, so a huge count fails fast
                items.append(_text(item))
            return tuple(items), at
        case unknown:
            raise WireError(f"unknown field tag {unknown}")


def fields_of(message: Message) -> tuple[Field, ...]:
    """The request's fields, checked against what its kind carries (WireError if not)."""
    expected = REQUEST_FIELDS.get(message.kind)
    if expected is None:
        raise WireError(f"{message.kind.name} is not a request")
    if len(message.fields) != len(expected) or not all(
            isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
            for value, kind in zip(message.fields, expected)):
        raise WireError(f"{message.kind.name} carries {_types(message.fields)}, not {_types(expected)}")
    return message.fields


def _types(values) -> str:
    return "(" + ", ".join(v.__name__ if isinstance(v, type) else type(v).__name__ for v in values) + ")"
