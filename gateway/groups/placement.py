"""Which ``__consumer_offsets`` partition holds a group: Kafka's own placement.

``Utils.abs(groupId.hashCode()) % partitions``, with Java's String.hashCode over
UTF-16 code units, so tools that compute a group's coordinator agree with kgate.
"""

_INT_MIN = -(1 << 31)


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as int32."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    h = java_string_hash(group_id)
    # Kafka's Utils.abs maps Integer.MIN_VALUE, which has no positive twin, to 0.
    return (0 if h == _INT_MIN else abs(h)) % partitions
