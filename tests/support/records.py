"""Test records that carry their own identity, and the checks every read-back makes.

Record ``i`` has key ``k<i>``, a value that embeds ``i``, a header with ``i`` and a
create timestamp derived from ``i``, so a consumed record can be checked against
what was produced without keeping the produced list in memory order.
"""
from dataclasses import dataclass

BASE_TIMESTAMP_MS = 1_700_000_000_000
NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class Consumed:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple
    timestamp: int


def key(i: int) -> bytes:
    return b"k%d" % i


def value(i: int, size: int = 100) -> bytes:
    return (b"v%d-" % i).ljust(size, b"x")


def headers(i: int) -> list[tuple[str, bytes]]:
    return [("idx", b"%d" % i), ("kind", b"test")]


def timestamp(i: int) -> int:
    return BASE_TIMESTAMP_MS + i


def index_of(record: Consumed) -> int:
    return index_of_key(record.key)


def index_of_key(record_key: bytes) -> int:
    return int(record_key[1:])


def check_read_back(records: list[Consumed], count: int, value_size: int = 100, with_headers: bool = True,
                    with_timestamps: bool | None = True) -> None:
    """Every record 0..count-1 exactly once, intact, with contiguous offsets per partition.

    Records that crossed a message format without headers (magic < 2) or timestamps
    (magic 0) are checked for having none; ``with_timestamps=None`` checks no
    timestamps (producers that cannot set them).
    """
    seen = check_records(records, range(count), value_size, with_headers, with_timestamps)
    by_partition: dict[int, list[int]] = {}
    for partition, offset in seen.values():
        by_partition.setdefault(partition, []).append(offset)
    for partition, offsets in by_partition.items():
        offsets.sort()
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), \
            f"partition {partition} offsets are not contiguous"
        assert offsets[0] == 0, f"partition {partition} starts at offset {offsets[0]}"


def check_records(records: list[Consumed], expected, value_size: int = 100, with_headers: bool = True,
                  with_timestamps: bool | None = True) -> dict[int, tuple[int, int]]:
    """Exactly the records of the ``expected`` indices, each once and intact (offsets may
    have gaps, as around transaction markers); returns index -> (partition, offset)."""
    expected = set(expected)
    seen: dict[int, tuple[int, int]] = {}
    for record in records:
        i = index_of(record)
        assert i not in seen, f"record {i} read twice: at {seen[i]} and {(record.partition, record.offset)}"
        assert i in expected, f"record {i} read at {(record.partition, record.offset)}, but it was not to be seen"
        seen[i] = (record.partition, record.offset)
        assert record.value == value(i, value_size), f"record {i} value differs"
        assert list(record.headers) == (headers(i) if with_headers else []), \
            f"record {i} headers differ: {record.headers}"
        assert with_timestamps is None or record.timestamp == (timestamp(i) if with_timestamps else NO_TIMESTAMP), \
            f"record {i} timestamp {record.timestamp}"
    missing = expected - set(seen)
    assert not missing, f"{len(missing)} records missing, e.g. {sorted(missing)[:5]}"
    return seen
