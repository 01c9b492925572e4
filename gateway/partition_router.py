"""Where a client's operation on a partition is served: the one place that decides it.

Storage is shared, so a partition has one owner (the broker appending to it) but any
broker may read it, and zones (gateway/zones.py) keep a client's bytes inside its zone.
For each partition of a request, handlers ask :func:`route` and act on the typed
decision it returns; none of them looks at ownership, zones or the kind of ledger.

- ``Local``: this broker owns the partition and serves it; ``damaged_from`` is set when
  an entry of it is damaged: reads below that offset are served, nothing from it on.
- ``Followed``: another broker owns it; a client of this broker's zone reads it here,
  from the owner's ledgers in shared storage, up to the owner's high watermark.
- ``Redirect``: serve it from another broker: a Fetch v11+ client in another zone is
  sent to its zone's broker (preferred_read_replica); :func:`lead` names, per client,
  the broker Metadata calls the leader.
- ``ByReference``: a produce from a client of this broker's zone for a partition owned
  elsewhere: staged in shared storage here, the owner sent only a reference.
- ``Refused``: the Kafka error the client hears.
"""
import logging
from dataclasses import dataclass
from enum import Enum, auto
from typing import TYPE_CHECKING

from kgate.metadata.cluster import BrokerInfo, Topic
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.storage.ledger import CorruptLedger, FollowingUnsupported

if TYPE_CHECKING:
    from .handlers.broker_view import BrokerView
    from .partition import Partition

log = logging.getLogger(__name__)


class Operation(Enum):
    FETCH = auto()  # read records; may be redirected to the client's zone
    PRODUCE = auto()  # append; may go by reference to the owner
    DESCRIBE = auto()  # read offsets here (ListOffsets): an owner's or a followed partition, caught up
    OWNED = auto()  # what the owner alone knows (epoch history, producer state)


@dataclass(frozen=True, slots=True)
class Local:
    partition: "Partition"
    damaged_from: int | None = None


@dataclass(frozen=True, slots=True)
class Followed:
    partition: "Partition"


@dataclass(frozen=True, slots=True)
class Redirect:
    broker: int
    # This broker's own partition, when it has one (a redirected fetch still answers its offsets).
    partition: "Partition | None" = None


@dataclass(frozen=True, slots=True)
class ByReference:
    owner: BrokerInfo


@dataclass(frozen=True, slots=True)
class Refused:
    error: ErrorCode


Decision = Local | Followed | Redirect | ByReference | Refused


@dataclass(frozen=True, slots=True)
class Client:
    """What routing needs to know of a client: its zone (None: it named none), whether it is
    a peer broker (never routed by zone), and what its request version allows."""

    zone: str | None
    peer: bool = False
    may_redirect: bool = False  # Fetch v11+: preferred_read_replica

    @classmethod
    def of(cls, connection, may_redirect: bool = False) -> "Client":
        return cls(connection.zone, connection.peer_broker is not None, may_redirect)


async def route(broker: "BrokerView", client: Client, topic: Topic, index: int, operation: Operation) -> Decision:
    """The decision for ``client``'s ``operation`` on ``topic``-``index`` (a partition of a known topic)."""
    try:
        partition = broker.partition(topic.name, index)
    except KafkaError as refused:
        if refused.code == ErrorCode.NOT_LEADER_FOR_PARTITION:
            return await _elsewhere(broker, client, topic, index, operation)
        damaged = broker.damaged_partition(topic.name, index)
        if damaged is None or operation in (Operation.PRODUCE, Operation.OWNED):
            return Refused(refused.code)
        return Local(*damaged)  # readable below its damaged entry
    if operation is Operation.FETCH and client.may_redirect:
        return _zone_read(broker, client, topic, index, partition)
    return Local(partition)


def _in_this_zone(broker: "BrokerView", client: Client) -> bool:
    """A client this broker serves for partitions owned elsewhere (a store that shows them)."""
    return (client.zone is not None and client.zone == broker.zone and not client.peer
            and broker.followers.available)


async def _elsewhere(broker: "BrokerView", client: Client, topic: Topic, index: int, operation: Operation) -> Decision:
    """A partition another broker owns: served here only for a client of this broker's zone."""
    if operation is Operation.OWNED or not _in_this_zone(broker, client):
        return Refused(ErrorCode.NOT_LEADER_FOR_PARTITION)
    if operation is Operation.PRODUCE:
        owner = broker.leader(topic, index)
        if owner is None or owner.node_id == broker.node_id:
            return Refused(ErrorCode.NOT_LEADER_FOR_PARTITION)
        return ByReference(owner)
    try:
        partition = await broker.followers.partition(topic, index)
    except (OSError, CorruptLedger, FollowingUnsupported) as exc:
        log.warning("%s-%d: cannot follow its ledgers here: %s", topic.name, index, exc)
        return Refused(ErrorCode.NOT_LEADER_FOR_PARTITION)
    if operation is Operation.DESCRIBE:
        # Fetches catch their followed partitions up together (one question per owner); an
        # offset lookup catches up its own.
        error = (await broker.followers.refresh([partition])).get((topic.name, index))
        if error is not None:
            return Refused(error)
    return Followed(partition)


def _zone_read(broker: "BrokerView", client: Client, topic: Topic, index: int, partition: "Partition") -> Decision:
    """A fetch from a client in another zone is sent to a broker of its own zone, when it has one."""
    zone = client.zone
    if zone is None or zone == broker.zone or client.peer:
        return Local(partition)
    replica = broker.zone_broker(zone, topic.name, index)
    if replica is None:
        if broker.followers.available:  # else the store keeps every client on the owners
            broker.metrics.zone_fallback(zone)
        return Local(partition)
    return Redirect(replica, partition) if replica != broker.node_id else Local(partition)


def lead(broker: "BrokerView", client: Client, topic: Topic, index: int) -> Local | Redirect | Refused:
    """The leader Metadata names to ``client``, this broker (``Local``) or another (``Redirect``):
    the owner, or for a client in another zone than the owner, a broker of the client's zone
    (it reads from shared storage and writes by reference).
    An owner that has not opened the partition yet (claimed a moment ago), or no live owner:
    no leader, and clients retry."""
    leader = broker.leader(topic, index)
    local: Partition | None
    try:
        local = broker.partition(topic.name, index)
    except KafkaError:
        damaged = broker.damaged_partition(topic.name, index)  # led here: what lies before the damage is served
        local = damaged[0] if damaged is not None else None
    if leader is None or (leader.node_id == broker.node_id and local is None):
        return Refused(ErrorCode.LEADER_NOT_AVAILABLE)
    node = leader.node_id
    if client.zone is not None and not client.peer and leader.rack != client.zone:
        routed = broker.zone_broker(client.zone, topic.name, index)
        if routed is None:
            if broker.followers.available:
                broker.metrics.zone_fallback(client.zone)
        elif routed != node:
            return Redirect(routed)
    if local is not None and node == broker.node_id:
        return Local(local)
    return Redirect(node)
