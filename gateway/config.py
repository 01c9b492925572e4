"""Broker settings: Kafka's own key names where they mean the same thing.

Settings come from defaults, then a TOML file (nested tables join with dots, so
``[log] retention.ms = 1`` is ``log.retention.ms``), then ``--set key=value``. Every
value is checked at start-up, and an error names the setting.
"""
import tomllib
from dataclasses import dataclass, field
from enum import IntEnum

from kgate.protocol import inflate
from kgate.protocol.log_append_time import TIMESTAMP_TYPES
from kgate.protocol.security import SASL_MECHANISMS, SECURITY_PROTOCOLS
from kgate.storage import entry_formats
from kgate.storage.stores.bucket_location import BucketLocation

from .authorizer import AUTHORIZER_NAMES
from .connection_limits import parse_overrides
from .groups.assignors import assignor_name


class ConfigError(ValueError):
    pass


class ConfigSource(IntEnum):
    """Where a config value comes from, as DescribeConfigs and CreateTopics report it."""

    UNKNOWN = 0  # kgate: this broker's load and recent moves, read-only, described as they are now
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    GROUP_CONFIG = 8


class ConfigType(IntEnum):
    """Kafka's config types, as DescribeConfigs v3+ reports them."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7
    PASSWORD = 9


def config_type(name: str) -> ConfigType:
    """The DescribeConfigs type of a broker setting: Kafka's, for the settings it has."""
    if name in LIST_CONFIGS:
        return ConfigType.LIST
    if is_sensitive(name):
        return ConfigType.PASSWORD
    default = BROKER_SETTINGS.get(name, ("",))[0]
    if isinstance(default, bool):
        return ConfigType.BOOLEAN
    if isinstance(default, float):
        return ConfigType.DOUBLE
    if isinstance(default, int):
        return ConfigType.INT if name in INT_SETTINGS else ConfigType.LONG
    return ConfigType.STRING


# compression.type values -> codec id; None keeps the producer's codec.
COMPRESSION_TYPES = {"producer": None, "uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

def _is_bucket(text: str) -> bool:
    try:
        BucketLocation.parse(text)
    except ValueError:
        return False
    return True


def _is_overrides(text: str) -> bool:
    try:
        parse_overrides(text)
    except ValueError:
        return False
    return True


# name -> (default, (rule, check)). The default's type is the setting's type.
# The prefix of kgate.metadata for the store a `serve --workers` supervisor serves on a Unix socket.
SHARED_METADATA = "shared:"
_POSITIVE = ("must be > 0", lambda v: v > 0)
_NON_NEGATIVE = ("must be >= 0", lambda v: v >= 0)
_RETENTION = ("must be -1 (unlimited) or >= 0", lambda v: v >= -1)
_ANY = ("", lambda v: True)
_NO_TIMESTAMP_BOUND = (f"must be {2**63 - 1}: kgate does not check record timestamps against its clock",
                       lambda v: v == 2**63 - 1)

BROKER_SETTINGS: dict[str, tuple[object, tuple]] = {
    # -1: 0 on a single node; in a cluster, derived on first start and kept in the data dir.
    "broker.id": (-1, ("must be -1 (derived) or >= 0", lambda v: v >= -1)),
    "broker.rack": ("", _ANY),
    # "embedded" (SQLite in the data dir), zookeeper://HOST:PORT[,HOST:PORT...][/CHROOT], or
    # shared:SOCKET, the embedded store a `serve --workers` supervisor serves its workers
    "kgate.metadata": ("embedded", ("must be embedded or zookeeper://HOST:PORT[,HOST:PORT...][/CHROOT]",
                                    lambda v: v == "embedded" or _is_zookeeper(v) or _is_shared(v))),
    # file:DIR, a directory every broker of the cluster reaches; empty: <data dir>/ledgers; or
    # s3://BUCKET/PREFIX?endpoint=URL&region=REGION, object storage (storage/stores/s3_store.py).
    "kgate.storage": ("", ("must be file:DIR, s3://BUCKET/PREFIX?endpoint=URL&region=REGION or empty",
                           lambda v: v == "" or (v.startswith("file:") and len(v) > 5) or _is_bucket(v))),
    # Where the object store's acknowledged entries are first made durable: "s3", WAL objects
    # in the bucket (no local disk; storage/stores/s3_wal.py), or file:DIR, a local fsync'd log uploaded
    # in the background (storage/stores/local_wal.py). Only used with s3:// storage.
    "kgate.wal": ("s3", ("must be s3 or file:DIR",
                         lambda v: v == "s3" or (v.startswith("file:") and len(v) > 5))),
    # The S3 WAL's pace (storage/stores/wal_seam.py, ObjectCuts): objects at least a quarter of
    # this apart, so at most 4 PUTs per interval per broker whatever the partition count.
    "kgate.s3.wal.commit.interval.ms": (100, _POSITIVE),
    # How often, at most, a broker serving another zone's partitions for its own zone's clients
    # learns their owner's high watermarks (gateway/followers.py): 0, at each change (on object
    # storage, each WAL commit of the owner); more trades those readers' latency for fewer bytes
    # across zones.
    "kgate.zone.read.end.interval.ms": (0, _NON_NEGATIVE),
    # Links between brokers of different zones compressed, each direction one deflate stream
    # (gateway/link_deflate.py): the small requests they carry repeat names, and cost a quarter.
    "kgate.zone.link.deflate": (True, _ANY),
    # Memory for ledger bytes read from or just written to objects (half for each).
    "kgate.s3.cache.bytes": (256 * 1024 * 1024, _POSITIVE),
    # How often the object store deletes WAL objects none of whose ledgers is live any more
    # (deleted by retention, DeleteRecords or topic deletion). Each pass lists the bucket.
    "kgate.s3.gc.interval.ms": (60_000, _POSITIVE),
    # How often each broker compacts the sealed ledgers it holds out of WAL objects into
    # objects of their own (a bounded amount per round; storage/stores/compaction.py).
    "kgate.s3.compaction.interval.ms": (10_000, _POSITIVE),
    # Self-balancing (gateway/balancer.py): every broker reports its bytes in and out per
    # partition; the lowest live id moves partitions by load and count, a few per round.
    "kgate.balancer.enable": (False, _ANY),
    "kgate.balancer.interval.ms": (30_000, _POSITIVE),
    "kgate.balancer.max.moves": (2, _POSITIVE),
    "kgate.balancer.move.cooldown.ms": (120_000, _NON_NEGATIVE),
    "kgate.balancer.tolerance.percent": (10, ("must be between 1 and 100", lambda v: 1 <= v <= 100)),
    "kgate.balancer.load.report.interval.ms": (5000, _POSITIVE),
    "zookeeper.session.timeout.ms": (18_000, ("must be >= 1000", lambda v: v >= 1000)),
    # A `serve --workers` worker's session with its supervisor: ended, and the worker replaced,
    # when the supervisor hears nothing from it for this long (Kafka's broker-to-controller name).
    "broker.session.timeout.ms": (9000, ("must be >= 1000", lambda v: v >= 1000)),
    "socket.request.max.bytes": (100 * 1024 * 1024, _POSITIVE),
    "connections.max.idle.ms": (600_000, _POSITIVE),
    # Connections past these are closed at accept (Kafka's names and defaults: no limit);
    # overrides are HOST:COUNT,... for given client addresses.
    "max.connections": (2**31 - 1, _POSITIVE),
    "max.connections.per.ip": (2**31 - 1, _POSITIVE),
    "max.connections.per.ip.overrides": ("", ("must be HOST:COUNT[,HOST:COUNT...]", _is_overrides)),
    # Requests one connection may have in flight before the broker stops reading it.
    "kgate.max.inflight.requests.per.connection": (100, _POSITIVE),
    # Request bytes read but not yet answered, broker-wide (Kafka's name) and per connection;
    # past either the broker stops reading (back-pressure) until answers drain. -1: no limit.
    "queued.max.request.bytes": (256 * 1024 * 1024, ("must be -1 (no limit) or > 0", lambda v: v == -1 or v > 0)),
    "kgate.queued.max.request.bytes.per.connection": (64 * 1024 * 1024, _POSITIVE),
    # Fetched bytes held in answers not yet sent, broker-wide and per connection; a fetch
    # reads no more than the room left and waits (within max_wait_ms) when there is none.
    "kgate.queued.max.response.bytes": (256 * 1024 * 1024, _POSITIVE),
    "kgate.queued.max.response.bytes.per.connection": (64 * 1024 * 1024, _POSITIVE),
    # Incremental fetch sessions (KIP-227) the broker keeps; 0: none, every fetch is a full one.
    "max.incremental.fetch.session.cache.slots": (1000, _NON_NEGATIVE),
    "auto.create.topics.enable": (True, _ANY),
    # false: DeleteTopics answers TOPIC_DELETION_DISABLED (Kafka's name and default).
    "delete.topic.enable": (True, _ANY),
    "num.partitions": (1, _POSITIVE),
    "default.replication.factor": (1, _POSITIVE),
    "message.max.bytes": (1024 * 1024 + 12, _POSITIVE),
    # Compressed record data is inflated under these ceilings, per batch and per request
    # (produce validation, legacy wrappers, down-conversion for old fetchers): past them
    # a produce gets MESSAGE_TOO_LARGE. 64 MiB is 64x a 1 MB batch, beyond what real
    # record data compresses to; a compression bomb stops there.
    "kgate.max.inflated.batch.bytes": (inflate.DEFAULT_LIMIT, _POSITIVE),
    "kgate.max.inflated.request.bytes": (2 * inflate.DEFAULT_LIMIT, _POSITIVE),
    # Retention and roll times in Kafka's units (TIME_FORMS). Kafka leaves the ms and minutes
    # forms unset; their defaults here are what the hours' defaults come to.
    "log.retention.ms": (7 * 24 * 3600 * 1000, _RETENTION),
    "log.retention.minutes": (7 * 24 * 60, _ANY),
    "log.retention.hours": (7 * 24, _ANY),
    "log.retention.bytes": (-1, _RETENTION),
    "log.segment.bytes": (1024 * 1024 * 1024, _POSITIVE),
    "log.roll.ms": (7 * 24 * 3600 * 1000, _POSITIVE),
    "log.roll.hours": (7 * 24, _POSITIVE),
    "log.retention.check.interval.ms": (300_000, _POSITIVE),
    # The log cleaner of compacted topics (gateway/log_cleaner.py), Kafka's names and defaults.
    "log.cleaner.enable": (True, _ANY),
    "log.cleaner.backoff.ms": (15_000, _POSITIVE),
    "log.cleaner.dedupe.buffer.size": (128 * 1024 * 1024, ("must be >= 1048576", lambda v: v >= 1024 * 1024)),
    "log.cleaner.min.cleanable.ratio": (0.5, ("must be between 0 and 1", lambda v: 0 <= v <= 1)),
    "log.cleaner.delete.retention.ms": (24 * 3600 * 1000, _NON_NEGATIVE),
    "log.cleaner.min.compaction.lag.ms": (0, _NON_NEGATIVE),
    "log.cleaner.max.compaction.lag.ms": (2**63 - 1, _POSITIVE),
    "entry.format": ("kafka", ("must be one of the registered entry formats",
                               lambda v: v in entry_formats.names())),
    # Recompression on produce, Kafka's values; honoured by entry formats that rebuild
    # batches (mixed_kafka, pulsar), while kafka stores what the producer sent.
    "compression.type": ("producer", ("must be one of " + ", ".join(COMPRESSION_TYPES),
                                      lambda v: v in COMPRESSION_TYPES)),
    # Whose clock dates stored records: the producer's (CreateTime) or the broker's on append.
    "log.message.timestamp.type": ("CreateTime", ("must be CreateTime or LogAppendTime",
                                                  lambda v: v in TIMESTAMP_TYPES)),
    # How far from the broker's clock a record's timestamp may be (Kafka 4's default after: one
    # hour). kgate does not check timestamps, so it takes only the value saying so: no bound.
    "log.message.timestamp.after.max.ms": (2**63 - 1, _NO_TIMESTAMP_BOUND),
    "log.message.timestamp.before.max.ms": (2**63 - 1, _NO_TIMESTAMP_BOUND),
    # What Metadata tells clients to connect to, HOST:PORT; empty: the listener itself.
    "advertised.listeners": ("", ("must be HOST:PORT or empty", lambda v: v == "" or _is_host_port(v))),
    # Consumer groups, with Kafka's names and defaults.
    "offsets.topic.num.partitions": (50, _POSITIVE),
    "offsets.retention.minutes": (7 * 24 * 60, _POSITIVE),
    "offsets.retention.check.interval.ms": (600_000, _POSITIVE),
    "offset.metadata.max.bytes": (4096, _POSITIVE),
    "group.min.session.timeout.ms": (6000, _POSITIVE),
    "group.max.session.timeout.ms": (1_800_000, _POSITIVE),
    "group.initial.rebalance.delay.ms": (3000, _NON_NEGATIVE),
    "group.max.size": (2**31 - 1, _POSITIVE),
    # KIP-848 consumer groups: the broker sets the session and heartbeat interval.
    "group.consumer.session.timeout.ms": (45_000, _POSITIVE),
    "group.consumer.heartbeat.interval.ms": (5000, _POSITIVE),
    # The bounds of a group's own consumer.session.timeout.ms and consumer.heartbeat.interval.ms.
    "group.consumer.min.session.timeout.ms": (45_000, _POSITIVE),
    "group.consumer.max.session.timeout.ms": (60_000, _POSITIVE),
    "group.consumer.min.heartbeat.interval.ms": (5000, _POSITIVE),
    "group.consumer.max.heartbeat.interval.ms": (15_000, _POSITIVE),
    "group.consumer.assignors": ("uniform,range", (
        "must be a comma-separated list of uniform, range (or Kafka's assignor class names)",
        lambda v: bool(v.strip()) and all(assignor_name(n) for n in v.split(",")))),
    "group.consumer.max.size": (2**31 - 1, _POSITIVE),
    "group.consumer.migration.policy": ("bidirectional", ("must be bidirectional, upgrade, downgrade or disabled",
                                                          lambda v: v in ("bidirectional", "upgrade", "downgrade",
                                                                          "disabled"))),
    # Share groups (KIP-932), with Kafka's names and defaults.
    "group.share.session.timeout.ms": (45_000, _POSITIVE),
    "group.share.heartbeat.interval.ms": (5000, _POSITIVE),
    "group.share.max.size": (200, _POSITIVE),
    "group.share.record.lock.duration.ms": (30_000, _POSITIVE),
    "group.share.delivery.count.limit": (5, _POSITIVE),
    "group.share.partition.max.record.locks": (2000, _POSITIVE),
    "group.share.max.share.sessions": (2000, _POSITIVE),
    "share.coordinator.state.topic.num.partitions": (50, _POSITIVE),
    # The bounds of a share group's own configs, Kafka's.
    "group.share.min.session.timeout.ms": (45_000, _POSITIVE),
    "group.share.max.session.timeout.ms": (60_000, _POSITIVE),
    "group.share.min.heartbeat.interval.ms": (5_000, _POSITIVE),
    "group.share.max.heartbeat.interval.ms": (15_000, _POSITIVE),
    "group.share.min.record.lock.duration.ms": (15_000, _POSITIVE),
    "group.share.max.record.lock.duration.ms": (60_000, _POSITIVE),
    "group.share.min.delivery.count.limit": (2, _POSITIVE),
    "group.share.max.delivery.count.limit": (10, _POSITIVE),
    # Streams groups (KIP-1071), with Kafka's names and defaults, and the bounds of a group's own configs.
    "group.streams.session.timeout.ms": (45_000, _POSITIVE),
    "group.streams.heartbeat.interval.ms": (5000, _POSITIVE),
    "group.streams.num.standby.replicas": (0, _NON_NEGATIVE),
    "group.streams.max.size": (2**31 - 1, _POSITIVE),
    "group.streams.min.session.timeout.ms": (45_000, _POSITIVE),
    "group.streams.max.session.timeout.ms": (60_000, _POSITIVE),
    "group.streams.min.heartbeat.interval.ms": (5000, _POSITIVE),
    "group.streams.max.heartbeat.interval.ms": (15_000, _POSITIVE),
    "group.streams.max.standby.replicas": (2, _NON_NEGATIVE),
    "group.streams.task.offset.interval.ms": (60_000, _POSITIVE),
    "group.streams.acceptable.recovery.lag": (10_000, _NON_NEGATIVE),
    # Transactions, with Kafka's names and defaults.
    "transaction.state.log.num.partitions": (50, _POSITIVE),
    "transaction.max.timeout.ms": (900_000, _POSITIVE),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (10_000, _POSITIVE),
    # Compact an offsets partition once it holds this many records more than live keys.
    "kgate.offsets.compaction.min.records": (10_000, _POSITIVE),
    # SASL and TLS, with Kafka's names. kgate caps unauthenticated frames at 64 KiB
    # (Kafka: 512 KiB): no SASL token of the mechanisms offered comes near it.
    "sasl.enabled.mechanisms": ("PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                                ("must be a comma-separated list of " + ", ".join(SASL_MECHANISMS),
                                 lambda v: all(m.strip() in SASL_MECHANISMS for m in v.split(",")))),
    "sasl.server.max.receive.size": (64 * 1024, _POSITIVE),
    "connection.failed.authentication.delay.ms": (100, _NON_NEGATIVE),
    # How long a SASL login holds before the client must re-authenticate (KIP-368); 0: for ever.
    "connections.max.reauth.ms": (0, _NON_NEGATIVE),
    # Failed logins for one user from one client address in a minute before that user's
    # logins from that address are refused; failed logins from one address, whatever
    # the users, before every login from it is; and failed logins for one user from every
    # address before that user's logins are, but from addresses it logged in from within
    # the hour (gateway/sasl/login_limiter.py says why).
    "kgate.sasl.max.failed.logins.per.minute": (10, _POSITIVE),
    "kgate.sasl.max.failed.logins.per.address.per.minute": (100, _POSITIVE),
    "kgate.sasl.max.failed.logins.per.user.per.minute": (50, _POSITIVE),
    # Authorization, with Kafka's names: "acl" (or Kafka's authorizer class names) turns on
    # the ACL authorizer; super.users is a ;-separated list of principals (User:admin).
    "authorizer.class.name": ("", ("must be empty (no authorization) or " + ", ".join(AUTHORIZER_NAMES),
                                   lambda v: v == "" or v in AUTHORIZER_NAMES)),
    "super.users": ("", ("must be ;-separated principals such as User:admin",
                         lambda v: all(_is_principal(p.strip()) for p in v.split(";") if p.strip()))),
    "allow.everyone.if.no.acl.found": (False, _ANY),
    # How this broker logs in to its peers (the links of gateway/peer_links.py: zone routing and
    # transaction markers) over a peer's SASL_PLAINTEXT listener, as Kafka's inter-broker
    # SASL does; that user needs ClusterAction on the cluster (a super user) once an authorizer
    # is on. Empty user: the peers' PLAINTEXT listeners, unauthenticated.
    "kgate.inter.broker.sasl.mechanism": ("SCRAM-SHA-512", ("must be one of " + ", ".join(SASL_MECHANISMS),
                                                            lambda v: v in SASL_MECHANISMS)),
    "kgate.inter.broker.sasl.username": ("", _ANY),
    "kgate.inter.broker.sasl.password": ("", _ANY),
    # One PEM file holding the certificate chain and the private key, for SSL listeners.
    "ssl.keystore.location": ("", _ANY),
    "ssl.key.password": ("", _ANY),
    # HOST:PORT of the Prometheus endpoint (``kgate serve --metrics``); empty: none.
    "kgate.metrics.listener": ("", ("must be HOST:PORT or empty", lambda v: v == "" or _is_host_port(v, 0))),
    # HTTP basic auth on the metrics endpoint: the user, and a file whose first line is the
    # password (kept out of the command line and DescribeConfigs); empty user: no auth.
    "kgate.metrics.basic.auth.user": ("", ("must not contain ':'", lambda v: ":" not in v)),
    "kgate.metrics.basic.auth.password.file": ("", _ANY),
    "log.level": ("INFO", ("must be DEBUG, INFO, WARNING or ERROR",
                           lambda v: v in ("DEBUG", "INFO", "WARNING", "ERROR"))),
}

# Settings Kafka takes in more than one unit, as Kafka resolves them: the first form when given,
# else the first given of the others (times its factor to milliseconds), else the last one's
# default. Kafka defines no default for the forms before the last, so DescribeConfigs shows
# none for them (NO_DEFAULT), and lists the forms as one another's synonyms.
TIME_FORMS: dict[str, tuple[tuple[str, int], ...]] = {
    "log.retention.ms": (("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)),
    "log.roll.ms": (("log.roll.hours", 3_600_000),),
}
NO_DEFAULT = frozenset({"log.retention.ms", "log.retention.minutes", "log.roll.ms"})

LIST_CONFIGS = ("sasl.enabled.mechanisms", "group.consumer.assignors")
# Number settings Kafka types INT (the others it types LONG, as kgate types its own).
INT_SETTINGS = frozenset({
    "broker.id", "connection.failed.authentication.delay.ms", "default.replication.factor",
    "group.consumer.heartbeat.interval.ms", "group.consumer.max.size", "group.consumer.session.timeout.ms",
    "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms",
    "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms",
    "group.initial.rebalance.delay.ms", "group.max.session.timeout.ms", "group.max.size",
    "group.share.heartbeat.interval.ms", "group.share.max.size", "group.share.session.timeout.ms",
    "group.share.record.lock.duration.ms", "group.share.delivery.count.limit", "group.share.max.share.sessions",
    "group.share.partition.max.record.locks", "share.coordinator.state.topic.num.partitions",
    "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms",
    "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms",
    "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms",
    "group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit",
    "group.streams.session.timeout.ms", "group.streams.heartbeat.interval.ms", "group.streams.num.standby.replicas",
    "group.streams.max.size", "group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms",
    "group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms",
    "group.streams.max.standby.replicas", "group.streams.task.offset.interval.ms",
    "group.streams.acceptable.recovery.lag",
    "group.min.session.timeout.ms", "log.retention.hours", "log.retention.minutes", "log.roll.hours",
    "log.segment.bytes", "max.connections", "max.connections.per.ip",
    "max.incremental.fetch.session.cache.slots", "message.max.bytes", "num.partitions", "offset.metadata.max.bytes",
    "offsets.retention.minutes", "offsets.topic.num.partitions", "sasl.server.max.receive.size",
    "socket.request.max.bytes", "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.max.timeout.ms", "transaction.state.log.num.partitions",
})


def is_sensitive(name: str) -> bool:
    """A setting whose value DescribeConfigs never shows (Kafka's PASSWORD type)."""
    return "password" in name


def _is_principal(text: str) -> bool:
    kind, _, name = text.partition(":")
    return bool(kind and name)


def _is_host_port(text: str, lowest_port: int = 1) -> bool:
    host, sep, port = text.rpartition(":")
    return bool(sep and host and port.isdigit() and lowest_port <= int(port) < 65536)


def _coerce(name: str, raw, default):
    try:
        if isinstance(default, bool):
            if isinstance(raw, bool):
                return raw
            lowered = str(raw).strip().lower()
            if lowered in ("true", "false"):
                return lowered == "true"
            raise ValueError
        if isinstance(default, int):
            if isinstance(raw, (bool, float)):
                raise ValueError
            return int(raw)
        if isinstance(default, float):
            if isinstance(raw, bool):
                raise ValueError
            return float(raw)
        return str(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"setting {name}: {raw!r} is not a valid {type(default).__name__}") from None


def setting_text(value) -> str:
    """A setting's value as Kafka's configs write it (``true``, not ``True``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def check_setting(name: str, raw):
    if name not in BROKER_SETTINGS:
        raise ConfigError(f"unknown setting {name!r}")
    default, (rule, ok) = BROKER_SETTINGS[name]
    value = _coerce(name, raw, default)
    if not ok(value):
        raise ConfigError(f"setting {name}: {value!r} {rule}")
    return value


def is_compacted(cleanup_policy: str) -> bool:
    return "compact" in cleanup_policy.split(",")


def _flatten(table: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat



@dataclass
class Listener:
    """``[PROTOCOL://]HOST:PORT``, Kafka's listener syntax; the protocol defaults to PLAINTEXT."""

    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.security_protocol.endswith("SSL")

    @classmethod
    def parse(cls, text: str) -> "Listener":
        protocol, sep, address = text.partition("://")
        if not sep:
            protocol, address = "PLAINTEXT", text
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"listener {text!r}: security protocol must be one of {', '.join(SECURITY_PROTOCOLS)}")
        host, sep, port = address.rpartition(":")
        if not sep or not host:
            raise ConfigError(f"listener {text!r} must be [PROTOCOL://]HOST:PORT")
        try:
            number = int(port)
        except ValueError:
            raise ConfigError(f"listener {text!r}: port {port!r} is not a number") from None
        if not 0 <= number <= 65535:
            raise ConfigError(f"listener {text!r}: port must be 0-65535")
        return cls(host.strip("[]"), number, protocol)


@dataclass
class Settings:
    listeners: list[Listener] = field(default_factory=lambda: [Listener("127.0.0.1", 9092)])
    data_dir: str = "kgate-data"
    values: dict = field(default_factory=lambda: {name: d for name, (d, _) in BROKER_SETTINGS.items()})
    # The settings the server's configuration gave (file or --set), not left at their defaults.
    given: set[str] = field(default_factory=set)

    def __getitem__(self, name: str):
        return self.values[name]

    @classmethod
    def load(cls, listen: list[str] | None = None, data_dir: str | None = None,
             config_file: str | None = None, overrides: list[str] | None = None) -> "Settings":
        settings = cls()
        raw = _raw_settings(config_file, overrides)
        configured_listeners = raw.pop("listeners", None)
        listen = listen or ([configured_listeners] if configured_listeners is not None else None)
        if "data.dir" in raw:
            settings.data_dir = str(raw.pop("data.dir"))
        for name, value in raw.items():
            settings.values[name] = check_setting(name, value)
        settings.given = set(raw)
        settings._resolve_time_forms()
        if listen:
            settings.listeners = [Listener.parse(item) for item in _listener_items(listen)]
        if data_dir:
            settings.data_dir = data_dir
        settings._check_pairs()
        return settings

    def _resolve_time_forms(self) -> None:
        """A millisecond setting not given takes the first of its other units given, as Kafka's
        KafkaConfig does (a negative retention means for ever: -1; roll times are positive)."""
        for name, forms in TIME_FORMS.items():
            given = [self[form] * factor for form, factor in forms if form in self.given]
            if name not in self.given and given:
                self.values[name] = max(given[0], -1)

    def _check_pairs(self) -> None:
        """Settings that need another one beside them."""
        if self["kgate.metrics.basic.auth.user"] and not self["kgate.metrics.basic.auth.password.file"]:
            raise ConfigError("kgate.metrics.basic.auth.user needs kgate.metrics.basic.auth.password.file "
                              "(a file whose first line is the password)")
        if self["kgate.inter.broker.sasl.username"] and not self["kgate.inter.broker.sasl.password"]:
            raise ConfigError("kgate.inter.broker.sasl.username needs kgate.inter.broker.sasl.password")
        tls = [f"{item.security_protocol}://{item.host}:{item.port}" for item in self.listeners if item.tls]
        if tls and not self["ssl.keystore.location"]:
            raise ConfigError(f"listener {tls[0]} needs ssl.keystore.location (a PEM file with certificate and key)")


def _raw_settings(config_file: str | None, overrides: list[str] | None) -> dict:
    """The settings of the TOML ``config_file``, then the ``--set key=value`` overrides over them."""
    raw: dict = {}
    if config_file:
        try:
            with open(config_file, "rb") as fh:
                raw.update(_flatten(tomllib.load(fh)))
        except OSError as exc:
            raise ConfigError(f"--config {config_file}: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"--config {config_file}: {exc}") from None
    for item in overrides or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r} must be key=value")
        raw[name.strip()] = value.strip()
    return raw


def _is_shared(value: str) -> bool:
    return value.startswith(SHARED_METADATA) and len(value) > len(SHARED_METADATA)


def _is_zookeeper(value: str) -> bool:
    if not value.startswith("zookeeper://"):
        return False
    hosts = value.removeprefix("zookeeper://").partition("/")[0]
    return bool(hosts) and all(_is_host_port(host) for host in hosts.split(","))


def _listener_items(listen) -> list[str]:
    items: list[str] = []
    for entry in listen:
        items.extend(part for part in (entry if isinstance(entry, list) else str(entry).split(",")) if part)
    return items
