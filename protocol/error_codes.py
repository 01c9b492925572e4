"""Kafka's error codes by their protocol names, taken from kafka-python's table.

Handlers speak in the names Kafka's documentation uses (``ErrorCode.CORRUPT_MESSAGE``)
so an answer can be checked against Kafka's own behaviour at a glance. The enum is
built at run time from the table, never copied; type checkers see an ``IntEnum`` whose
every name is an ``ErrorCode`` (a misspelt name fails the first test that reaches it).
"""
from enum import EnumMeta, IntEnum
from typing import TYPE_CHECKING

from kafka import errors as _errors

if TYPE_CHECKING:
    class _ByName(EnumMeta):
        def __getattr__(cls, name: str) -> "ErrorCode": ...

    class ErrorCode(IntEnum, metaclass=_ByName):
        NONE = 0
else:
    ErrorCode = IntEnum(
        "ErrorCode",
        {"NONE": 0, **{cls.message: code for code, cls in _errors.kafka_errors.items() if code and code > 0},
         "UNKNOWN_SERVER_ERROR": -1},
    )
