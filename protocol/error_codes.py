"""Kafka's error codes by their protocol names, taken from kafka-python's table.

Handlers speak in the names Kafka's documentation uses (``ErrorCode.CORRUPT_MESSAGE``)
so an answer can be checked against Kafka's own behaviour at a glance.
"""
from enum import IntEnum

from kafka import errors as _errors

ErrorCode = IntEnum(
    "ErrorCode",
    {"NONE": 0, **{cls.message: code for code, cls in _errors.kafka_errors.items() if code and code > 0},
     "UNKNOWN_SERVER_ERROR": -1},
)
