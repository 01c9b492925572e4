"""Availability zones: which zone a client is in, and which broker of a zone serves a partition.

Traffic between zones is billed per byte, and storage is shared, so any broker can
serve any partition's reads (gateway/followers.py). A broker's zone is ``broker.rack``.
A client says its zone in one of two ways: consumers send ``rack_id`` in Fetch v11+
(librdkafka's and Java's ``client.rack``); any client, producers and older consumers
included, may put the token ``kgate_az=ZONE`` anywhere in its ``client.id``, set off
by ``,`` ``;`` or whitespace (WarpStream's ``warpstream_az=`` convention), since the
client id is the one thing every Kafka client sends in every request header. A client
that says neither is served as if zones did not exist.

Brokers talk to each other with a client id of their own (:func:`broker_client_id`),
so a broker knows a connection from a peer and bills its bytes as inter-broker
traffic by zone pair, not as a client's.
"""
import re
import zlib
from collections.abc import Mapping

from kgate.metadata.cluster import BrokerInfo

ZONE_TOKEN = "kgate_az="
_TOKEN = re.compile(r"(?:^|[\s,;])kgate_az=([^\s,;]+)")
_BROKER_CLIENT = re.compile(r"^kgate-broker-(\d+)(?:$|[\s,;])")


def client_zone(client_id: str | None) -> str | None:
    """The zone a ``client.id`` names with a ``kgate_az=ZONE`` token, else None."""
    if not client_id:
        return None
    found = _TOKEN.search(client_id)
    return found.group(1) if found else None


def broker_client_id(node_id: int, zone: str | None) -> str:
    """The client id a broker uses towards its peers: its id, and its zone as any client says one."""
    return f"kgate-broker-{node_id}" + (f",{ZONE_TOKEN}{zone}" if zone else "")


def peer_broker(client_id: str | None) -> int | None:
    """The broker id behind a connection whose client id :func:`broker_client_id` made, else None."""
    found = _BROKER_CLIENT.match(client_id or "")
    return int(found.group(1)) if found else None


def zone_broker(brokers: Mapping[int, BrokerInfo], zone: str, topic: str, index: int) -> int | None:
    """The live broker of ``zone`` that serves ``topic``-``index`` for that zone's clients, or None.

    Spread over the zone's brokers by a stable hash of the partition, so every broker
    names the same one and each of them follows only its share of the partitions.
    """
    candidates = sorted(node_id for node_id, info in brokers.items() if info.rack == zone)
    if not candidates:
        return None
    return candidates[zlib.crc32(f"{topic}-{index}".encode()) % len(candidates)]
