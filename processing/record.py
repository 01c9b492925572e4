"""What a handler receives: one consumed record, with plain attributes.

confluent-kafka's ``Message`` exposes its fields as methods (``message.key()``); handlers
and key functions read ``record.key`` as the issue's examples do, and the record must
outlive the consumer's buffers, so each message is copied into this small object once.
"""


class Record:
    __slots__ = ("topic", "partition", "offset", "key", "value", "headers", "timestamp")

    def __init__(self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None,
                 headers: list[tuple[str, bytes | None]] | None, timestamp: int | None) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers
        self.timestamp = timestamp
        """Milliseconds since the epoch, or None when the record has none."""

    @classmethod
    def from_message(cls, message) -> "Record":
        kind, timestamp = message.timestamp()
        return cls(message.topic(), message.partition(), message.offset(), message.key(), message.value(),
                   message.headers(), timestamp if kind else None)

    @property
    def size(self) -> int:
        """Bytes this record holds in memory, as the backpressure bound counts them."""
        return len(self.key or b"") + len(self.value or b"")

    def __repr__(self) -> str:
        return f"Record({self.topic}[{self.partition}]@{self.offset})"
