"""A record as every format can hold it, for the paths that look inside batches."""
from typing import NamedTuple


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple  # ((str, bytes | None), ...); magic 0/1 carry none
