"""What the broker saw during a cell, asked of the broker itself.

Request versions come from kgate's Prometheus endpoint (``kgate_requests_total`` per
API and version), scraped before and after the cell: the difference is what the
client sent, since nothing else talks to that broker while a cell runs. The message
format is read from the log: a Fetch at v11 returns entries as they were stored (the
``kafka`` entry format keeps produced bytes), and byte 16 of every message set or
record batch is its magic, with the codec in the attributes after it.
"""
import urllib.request

from kafka.protocol.consumer import FetchRequest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.wire import Wire

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
MAGIC_OFFSET = 16
FETCH_VERSION = 11  # stored bytes as they are, zstd included


def request_counts(metrics_urls) -> dict[tuple[str, int], float]:
    """``{(api, version): requests answered}`` so far, summed over the brokers' endpoints."""
    counts: dict[tuple[str, int], float] = {}
    for url in metrics_urls:
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        for family in text_string_to_metric_families(text):
            if family.name == "kgate_requests":
                for sample in family.samples:
                    if sample.name == "kgate_requests_total":
                        key = (sample.labels["api"], int(sample.labels["version"]))
                        counts[key] = counts.get(key, 0) + sample.value
    return counts


def requests_between(before: dict, after: dict) -> dict[str, list[int]]:
    """``{api: [versions]}`` of the requests answered between two scrapes."""
    seen: dict[str, set] = {}
    for (api, version), count in after.items():
        if count > before.get((api, version), 0):
            seen.setdefault(api, set()).add(version)
    return {api: sorted(versions) for api, versions in sorted(seen.items())}


def stored_formats(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, str]]:
    """Distinct ``(magic, codec)`` of the stored message sets and batches, in log order."""
    FT = FetchRequest.FetchTopic
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 22, isolation_level=0,
                           session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[
                               FT(topic=topic, partitions=[FT.FetchPartition(
                                   partition=p, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                                   partition_max_bytes=1 << 20) for p in range(partitions)])])
    wire = Wire(bootstrap, client_id="kgate-compat-observer")
    try:
        response = wire.call(request, FETCH_VERSION)
    finally:
        wire.sock.close()
    found = []
    for partition in response.responses[0].partitions:
        data = bytes(partition.records or b"")
        position = 0
        while position + MAGIC_OFFSET + 7 <= len(data):
            size = int.from_bytes(data[position + 8:position + 12], "big")
            magic = data[position + MAGIC_OFFSET]
            # magic 0/1: crc(4) magic attributes; magic 2: epoch(4) magic crc(4) attributes(2)
            attributes = data[position + MAGIC_OFFSET + (6 if magic == 2 else 1)]
            format_ = (magic, CODECS.get(attributes & 0x07, str(attributes & 0x07)))
            if format_ not in found:
                found.append(format_)
            position += 12 + size
    return found


def describe_formats(formats: list[tuple[int, str]]) -> str:
    return ", ".join(f"magic {magic} {codec}" for magic, codec in formats) or "nothing stored"
