"""Normalizing recorded answers and comparing them field by field.

What two correct brokers may answer differently is replaced before comparing: the cluster
id, topic ids, ports, member and producer ids (by order of first appearance, so a member
id reused later still has to match), throttle times and wall-clock times (clock readings
in records and produce answers by order of first appearance too), and the order of
lists Kafka does not define (each list of named things becomes a map keyed by its names).
Record batches are decoded into their fields and records, so no CRC or byte layout is
compared where a field would say more.
"""
import time
from dataclasses import dataclass
from typing import Any

from kafka.record.memory_records import MemoryRecords

from .session import CLOSED, Exchange

# Fields whose values are a broker's own and never comparable.
OPAQUE = {"throttle_time_ms", "cluster_id", "topic_id", "port", "finalized_features_epoch", "session_id",
          "transaction_start_time_ms", "last_timestamp"}
# Identifiers a broker chooses, compared by identity (first seen, second seen, ...).
ALIASED = {"member_id": "member", "leader": "member", "producer_id": "producer"}
# Times a broker may take from its own clock (LogAppendTime): a reading within a day of now
# is named by first appearance, so a record must carry the very time its produce answered.
CLOCKED = {"timestamp", "log_append_time_ms"}
_DAY_MS = 24 * 3600 * 1000
# Lists of things Kafka keeps in no defined order that have no name of their own.
UNORDERED = {"mechanisms", "acls"}
# Keys naming the elements of a list whose order Kafka does not define.
IDENTITIES = ("name", "topic", "topic_name", "partition_index", "partition", "index", "group_id", "api_key",
              "resource_name", "transactional_id", "key", "node_id", "broker_id", "member_id")


@dataclass(frozen=True)
class Divergence:
    scenario: str
    label: str
    path: str
    kafka: Any
    kgate: Any


class Normalizer:
    def __init__(self, token: str):
        self.token = token
        self.aliases: dict[tuple[str, Any], str] = {}

    def alias(self, kind: str, value: Any) -> Any:
        if value in ("", None, -1):
            return value
        return self.aliases.setdefault((kind, value), f"<{kind}-{sum(k == kind for k, _ in self.aliases) + 1}>")

    def value(self, key: str, value: Any) -> Any:
        if key in OPAQUE:
            return "<opaque>"
        if key in ALIASED and not isinstance(value, (list, dict)):
            return self.alias(ALIASED[key], value)
        if key in CLOCKED and isinstance(value, int) and abs(value - time.time() * 1000) < _DAY_MS:
            return self.alias("clock", value)
        if key == "error_message":
            return "<message>" if value else None
        if key == "records" and isinstance(value, (bytes, bytearray)):
            return self.batches(bytes(value))
        if key in UNORDERED and isinstance(value, list):
            return sorted((self.any(item) for item in value), key=repr)
        return self.any(value)

    def any(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self.value(k, v) for k, v in value.items()}
        if isinstance(value, list):
            return self.keyed([self.any(item) for item in value])
        if isinstance(value, str):
            return value.replace(self.token, "*")
        if isinstance(value, (bytes, bytearray)):
            return bytes(value).hex()
        return value

    @staticmethod
    def keyed(items: list) -> list | dict:
        if not items or not all(isinstance(item, dict) for item in items):
            return items
        for key in IDENTITIES:
            names = [item.get(key) for item in items]
            if all(key in item for item in items) and len(set(map(repr, names))) == len(names):
                return {f"{key}={name}": item for name, item in zip(names, items)}
        return items

    def batches(self, data: bytes) -> list:
        out = []
        reader = MemoryRecords(data)
        while reader.has_next():
            batch = reader.next_batch()
            fields = {"magic": batch.magic, "base_offset": getattr(batch, "base_offset", None),
                      "compression": batch.compression_type,
                      "records": [{"offset": r.offset, "timestamp": r.timestamp, "key": r.key, "value": r.value,
                                   "headers": list(getattr(r, "headers", []))} for r in batch]}
            if batch.magic == 2:
                fields.update(transactional=batch.is_transactional, control=batch.is_control_batch,
                              producer_id=self.alias("producer", batch.producer_id),
                              producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                              timestamp_type=batch.timestamp_type, last_offset_delta=batch.last_offset_delta)
            out.append(self.any(fields))
        return out

    def exchange(self, exchange: Exchange) -> dict:
        response = exchange.response if exchange.response == CLOSED else self.any(exchange.response)
        return {"label": exchange.label, "api_key": exchange.api_key, "version": exchange.version,
                "response": response}


def diff(kafka: Any, kgate: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every (path, Kafka's value, kgate's value) where the two differ; ``<absent>`` for a missing field."""
    if isinstance(kafka, dict) and isinstance(kgate, dict):
        out = []
        for key in list(kafka) + [k for k in kgate if k not in kafka]:
            out += diff(kafka.get(key, "<absent>"), kgate.get(key, "<absent>"), f"{path}.{key}" if path else key)
        return out
    if isinstance(kafka, list) and isinstance(kgate, list) and len(kafka) == len(kgate):
        return [d for i, (a, b) in enumerate(zip(kafka, kgate)) for d in diff(a, b, f"{path}[{i}]")]
    return [] if kafka == kgate else [(path, kafka, kgate)]


def compare(scenario: str, kafka: list[dict], kgate: list[dict]) -> list[Divergence]:
    """Exchanges in order, matched by label; an exchange only one broker answered is a divergence too."""
    out = []
    by_label = {e["label"]: e for e in kgate}
    for exchange in kafka:
        other = by_label.pop(exchange["label"], None)
        if other is None:
            out.append(Divergence(scenario, exchange["label"], "", "<sent>", "<not reached>"))
            continue
        out += [Divergence(scenario, exchange["label"], path, a, b)
                for path, a, b in diff(exchange["response"], other["response"])]
    out += [Divergence(scenario, label, "", "<not reached>", "<sent>") for label in by_label]
    return out
