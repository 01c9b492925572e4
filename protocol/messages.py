"""Request and response classes by API key, from kafka-python's schema-generated module.

Kafka 4.0's schemas dropped the oldest versions of some APIs (Produce v0-2, Fetch
v0-3, ListOffsets v0, ...) from ``validVersions`` but kept their fields annotated, and
kafka-python's classes accept every version from 0 up, so one class per API serves
every generation we advertise.
"""
from kafka.protocol import admin, consumer, metadata, producer, sasl

_MODULES = (admin, consumer, metadata, producer, sasl)


def _classes(suffix: str) -> dict:
    found = {}
    for module in _MODULES:
        for name in module.__all__:
            cls = getattr(module, name)
            if name.endswith(suffix) and hasattr(cls, "API_KEY"):
                found[cls.API_KEY] = cls
    return found


REQUESTS = _classes("Request")
RESPONSES = _classes("Response")
