"""What every coordinator's record codec shares: Kafka's internal-topic keys lead with their
schema version (an int16), and a record no schema version explains is one error,
``CorruptRecord``, which the shards log and skip on replay."""
import struct
from collections.abc import Iterator
from contextlib import contextmanager

_VERSION = struct.Struct(">h")


class CorruptRecord(ValueError):
    """A record in an internal topic that no version of its schemas explains."""


def key_version(key: bytes) -> int:
    return _VERSION.unpack_from(key)[0]


def unknown_key_version(version: int) -> CorruptRecord:
    return CorruptRecord(f"unknown key version {version}")


@contextmanager
def decoding() -> Iterator[None]:
    """Whatever undecodable bytes raise in the block becomes CorruptRecord."""
    try:
        yield
    except CorruptRecord:
        raise
    except (struct.error, ValueError, EOFError, TypeError) as exc:
        raise CorruptRecord(f"undecodable record: {exc}") from None
