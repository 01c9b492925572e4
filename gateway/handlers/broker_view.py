"""What a request handler may ask of the broker, and nothing more.

Handlers see the broker through this protocol: topics and their configs, the
partitions this broker serves (or the Kafka error saying why not), whether writes
may be acknowledged, brokers to list, topic administration, the group coordinator,
SASL state and metrics. The cluster state, ownership and stores behind it stay the
broker's business, so they can change (object storage, KIP-848, transactions)
without touching handlers; mypy holds handlers to it.
"""
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar

from kgate.metadata.cluster import BrokerInfo, Topic
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.storage.entry_formats import EntryFormat
from kgate.storage.ledger import CorruptLedger, LedgerStore

from ..partition_router import Client, Followed, Local, Operation, Refused, route

if TYPE_CHECKING:
    from ..authorizer import Authorizer
    from ..broker_configs import BrokerConfigs
    from ..config import Settings
    from ..epoch_book import EpochBook
    from ..fetch_sessions import FetchSessionCache
    from ..followers import Followers
    from ..group_configs import GroupConfigs
    from ..groups import GroupCoordinator
    from ..metrics import BrokerMetrics
    from ..partition import Partition
    from ..peer_links import PeerLinks
    from ..sasl import CredentialStore
    from ..sasl.login_limiter import LoginLimiter
    from ..shares.coordinator import ShareCoordinator
    from ..shares.departures import ShareDepartures
    from ..shares.leader import ShareLeaders
    from ..shares.persister import SharePersister
    from ..shares.sessions import ShareSessionCache
    from ..transactions import TransactionCoordinator
    from ..transactions.marker_writer import BrokerMarkerWriter

Asked = TypeVar("Asked")


class InternalTopic(Exception):
    """Clients may neither delete nor reconfigure the internal offsets topic.

    The group coordinator relies on the configs it created it with (no retention, the
    ``kafka`` entry format it replays).
    """

Answer = TypeVar("Answer")


class BrokerView(Protocol):
    settings: "Settings"
    broker_configs: "BrokerConfigs"
    group_configs: "GroupConfigs"
    node_id: int
    cluster_id: str
    metrics: "BrokerMetrics"
    groups: "GroupCoordinator"
    transactions: "TransactionCoordinator"
    shares: "ShareCoordinator"
    share_leaders: "ShareLeaders"
    share_persister: "SharePersister"
    share_sessions: "ShareSessionCache"
    share_departures: "ShareDepartures"
    markers: "BrokerMarkerWriter"
    credentials: "CredentialStore"
    login_limiter: "LoginLimiter"
    sasl_mechanisms: list[str]
    authorizer: "Authorizer"
    fetch_sessions: "FetchSessionCache"
    followers: "Followers"
    peers: "PeerLinks"
    epoch_book: "EpochBook"
    ledgers: LedgerStore

    @property
    def topics(self) -> Mapping[str, Topic]: ...

    def topic_by_id(self, topic_id: uuid.UUID) -> Topic | None: ...

    def partition(self, name: str, index: int) -> "Partition":
        """The partition if this broker serves it; KafkaError with the reason otherwise."""

    def take_offline(self, name: str, index: int, damage: CorruptLedger) -> None:
        """Stop serving a partition whose ledger turned out damaged (KAFKA_STORAGE_ERROR from now on)."""

    def damaged_partition(self, name: str, index: int) -> tuple["Partition", int] | None:
        """A partition offline from a damaged entry on, with that entry's first offset (what
        lies before it is still served); None for any other."""

    def reopen_fenced(self, name: str, index: int) -> None:
        """An append found the partition's ledger failed under this broker: open it afresh."""

    def served(self) -> Iterator[tuple[tuple[str, int], "Partition"]]: ...

    @property
    def writable(self) -> bool:
        """Whether acknowledged writes are safe now (False while the metadata session is in doubt)."""

    def topic_config(self, topic: Topic, name: str) -> str: ...

    def topic_config_default(self, name: str) -> str: ...

    def topic_config_names(self) -> Iterable[str]: ...

    def is_internal(self, name: str) -> bool: ...

    def entry_format(self, topic: Topic) -> EntryFormat: ...

    def live_brokers(self, connection) -> dict[int, tuple[str, int, str | None]]: ...

    def leader(self, topic: Topic, index: int) -> BrokerInfo | None: ...

    @property
    def zone(self) -> str | None:
        """This broker's zone (``broker.rack``), None when it has none."""

    def zone_broker(self, zone: str, topic: str, index: int) -> int | None:
        """The live broker serving ``topic``-``index`` to clients of ``zone`` (gateway/zones.py), or None."""

    @property
    def controller_id(self) -> int: ...

    async def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> Topic: ...

    async def delete_topic(self, name: str) -> Topic: ...

    async def alter_topic_configs(self, name: str, change: Callable[[dict[str, str]], dict[str, str]],
                                  validate_only: bool = False) -> Topic: ...

    async def create_partitions(self, name: str, count: int, check: Callable[[Topic], None],
                                validate_only: bool = False) -> Topic: ...

    async def next_producer_id(self) -> int: ...

    def live_broker_ids(self) -> set[int]: ...

    def load_described(self) -> dict[str, str]:
        """This broker's load and the cluster's recent moves, by read-only config name."""

    async def reassign(self, placed: Mapping[tuple[str, int], int | None]) -> None:
        """Place each partition on the broker given (None: cancel its reassignment)."""

    async def reassignments(self) -> dict[tuple[str, int], tuple[int | None, int]]:
        """Reassignments in progress: (the broker holding the partition, the broker placed)."""


async def per_partition(broker: BrokerView, client: Client, topic: str, asked: Iterable[Asked],
                        index: Callable[[Asked], int], answer: Callable[[Asked, Local | Followed], Awaitable[Answer]],
                        refused: Callable[[Asked, KafkaError], Answer], *, allowed: bool,
                        operation: Operation) -> list[Answer]:
    """One answer per partition ``asked`` of ``topic``: ``answer`` for a partition served here
    (gateway/partition_router.py decides, for ``client`` and ``operation``), ``refused`` with
    the Kafka error when the principal is not ``allowed`` the topic (TOPIC_AUTHORIZATION_FAILED),
    when it is not served here, or when ``answer`` raises one (an unreadable entry, a fenced
    epoch, ...)."""
    answers = []
    known = broker.topics.get(topic)
    for item in asked:
        try:
            if not allowed:
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            if known is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            decision = await route(broker, client, known, index(item), operation)
            if isinstance(decision, Refused):
                raise KafkaError(decision.error)
            assert isinstance(decision, Local | Followed)  # what the router answers these operations
            answers.append(await answer(item, decision))
        except KafkaError as error:
            answers.append(refused(item, error))
    return answers
