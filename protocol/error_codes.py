"""Kafka's error codes by their protocol names, taken from kafka-python's table.

Handlers speak in the names Kafka's documentation uses (``ErrorCode.CORRUPT_MESSAGE``)
so an answer can be checked against Kafka's own behaviour at a glance.
"""
from enum import EnumMeta, IntEnum
from typing import TYPE_CHECKING

from kafka import errors as _errors

# Kafka's codes newer than kafka-python's table.
_LATER = {"INVALID_REGULAR_EXPRESSION": 128, "SHARE_SESSION_LIMIT_REACHED": 133}

if TYPE_CHECKING:
    # The members come from kafka-python's table at import time, where mypy cannot see
    # them: every name reads as an ErrorCode, and a misspelt one fails when its line runs.
    class _Named(EnumMeta):
        def __getattr__(cls, name: str) -> "ErrorCode": ...

    class ErrorCode(IntEnum, metaclass=_Named): ...
else:
    ErrorCode = IntEnum(
        "ErrorCode",
        {"NONE": 0, **{cls.message: code for code, cls in _errors.kafka_errors.items() if code and code > 0},
         **_LATER, "UNKNOWN_SERVER_ERROR": -1},
    )
