"""mirror.toml: the clusters a mirror connects, where it keeps its state, and its settings.

Every ``kgate mirror`` command reads the same file, so a mistake in it is reported the
same way everywhere: one ConfigError whose message names the key (``clusters.dc1.bootstrap``,
``commit.interval.ms``) before anything connects. Settings keep the names of their
MirrorMaker 2 counterparts where MM2 has one (``offset.lag.max``, ``emit.heartbeats.interval.ms``).
"""
import re
import tomllib
from dataclasses import dataclass, field

DEFAULT_PATH = "mirror.toml"
METADATA_SCHEME = "zookeeper://"
CLUSTER_ALIAS = re.compile(r"[A-Za-z0-9_-]+")


class ConfigError(Exception):
    """The configuration file is missing, unreadable, or has a bad key; the message names it."""


@dataclass(frozen=True)
class Setting:
    default: object
    kind: type
    minimum: int | None = None
    choices: tuple = ()
    help: str = ""


SETTINGS = {
    "start": Setting("earliest", str, choices=("earliest", "latest"),
                     help="where a partition with no stored position starts (Kafka's auto.offset.reset)"),
    "commit.interval.ms": Setting(500, int, 10, help="how often acknowledged positions are stored"),
    "offset.lag.max": Setting(100, int, 0, help="records a partition may run past its last offset sync "
                                                "before a new sync is written (MM2's name and default)"),
    "emit.heartbeats.interval.ms": Setting(1000, int, 10, help="heartbeat records into each target"),
    "emit.checkpoints.interval.ms": Setting(5000, int, 100, help="consumer-group checkpoints into each target"),
    "sync.group.offsets.enabled": Setting(False, bool, help="also commit translated offsets into target groups "
                                                            "that have no active member there (MM2's name)"),
    "rebalance.interval.ms": Setting(30000, int, 100, help="how often the controller reweighs partitions"),
    "rebalance.threshold": Setting(0.2, float, help="a worker above the mean load by this fraction gives work away"),
    "lag.factor": Setting(1.0, float, help="weight = bytes-in rate * (1 + lag.factor * lag seconds)"),
    "status.interval.ms": Setting(1000, int, 100, help="how often a worker publishes its rates and lags"),
    "zookeeper.session.timeout.ms": Setting(6000, int, 1000,
                                            help="a worker silent this long loses its partitions"),
    "metadata.refresh.interval.ms": Setting(2000, int, 100,
                                            help="how often source topics and partition counts are re-read"),
    "audit.interval.ms": Setting(900000, int, 0, help="how often the controller audits every route over the last "
                                                      "audit.window.ms, for the audit metrics (0: never)"),
    "audit.window.ms": Setting(900000, int, 60000, help="the record-time window each periodic audit re-reads from "
                                                        "the targets"),
    "audit.retention.ms": Setting(7 * 86_400_000, int, 60000,
                                  help="audit counts of minutes older than this are removed from ZooKeeper"),
}


@dataclass(frozen=True)
class Cluster:
    alias: str
    bootstrap: str
    client: dict = field(default_factory=dict)

    def client_config(self, **extra) -> dict:
        """librdkafka settings for a client of this cluster (SASL, TLS, ... from the file)."""
        return {"bootstrap.servers": self.bootstrap, **self.client, **extra}


@dataclass(frozen=True)
class MirrorConfig:
    zookeeper: str
    chroot: str
    clusters: dict[str, Cluster]
    settings: dict

    def cluster(self, alias: str) -> Cluster:
        if alias not in self.clusters:
            raise ConfigError(f"cluster {alias!r} is not in the configuration (clusters: "
                              f"{', '.join(sorted(self.clusters)) or 'none'})")
        return self.clusters[alias]

    def __getitem__(self, key: str):
        return self.settings[key]


def load(path: str) -> MirrorConfig:
    try:
        with open(path, "rb") as fh:
            document = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file (--config names the mirror's configuration)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    try:
        return parse(document)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def parse(document: dict) -> MirrorConfig:
    document = dict(document)
    if "metadata" not in document:
        raise ConfigError("metadata is required (zookeeper://HOST:PORT[,HOST:PORT...]/CHROOT)")
    zookeeper, chroot = parse_metadata(document.pop("metadata"))
    clusters = _clusters(document.pop("clusters", None))
    settings = {}
    for key, setting in SETTINGS.items():
        settings[key] = _setting(key, setting, document.pop(key, setting.default))
    if document:
        raise ConfigError(f"unknown key {sorted(document)[0]!r} (known: metadata, clusters, {', '.join(SETTINGS)})")
    return MirrorConfig(zookeeper, chroot, clusters, settings)


def parse_metadata(value) -> tuple[str, str]:
    """``zookeeper://h:p[,h:p]/chroot`` as (kazoo hosts, chroot); the chroot defaults to /kgate-mirror."""
    if not isinstance(value, str) or not value.startswith(METADATA_SCHEME):
        raise ConfigError(f"metadata must be zookeeper://HOST:PORT[,HOST:PORT...]/CHROOT, got {value!r}")
    hosts, slash, chroot = value[len(METADATA_SCHEME):].partition("/")
    if not hosts or any(not re.fullmatch(r"[^:,/]+:\d+", h) for h in hosts.split(",")):
        raise ConfigError(f"metadata: bad ZooKeeper address list {hosts!r} (HOST:PORT[,HOST:PORT...])")
    chroot = "/" + chroot.strip("/") if slash and chroot.strip("/") else "/kgate-mirror"
    return hosts, chroot


def _clusters(table) -> dict[str, Cluster]:
    if not isinstance(table, dict) or not table:
        raise ConfigError("clusters: at least one [clusters.ALIAS] table with a bootstrap is required")
    clusters = {}
    for alias, body in table.items():
        if not CLUSTER_ALIAS.fullmatch(alias):
            raise ConfigError(f"clusters.{alias}: an alias is letters, digits, '_' and '-' "
                              f"(it becomes part of topic names)")
        if not isinstance(body, dict):
            raise ConfigError(f"clusters.{alias} must be a table")
        body = dict(body)
        bootstrap = body.pop("bootstrap", None)
        if not isinstance(bootstrap, str) or not bootstrap.strip():
            raise ConfigError(f"clusters.{alias}.bootstrap is required (HOST:PORT[,HOST:PORT...])")
        client = {}
        for key, value in body.items():
            # Anything else is a librdkafka client setting (security.protocol, sasl.*, ssl.*),
            # all of which are dotted; an undotted key is a typo of ours, not theirs.
            if "." not in key or isinstance(value, dict | list):
                raise ConfigError(f"clusters.{alias}.{key}: unknown key (bootstrap, or a Kafka client "
                                  f"setting such as security.protocol)")
            client[key] = str(value).lower() if isinstance(value, bool) else str(value)
        clusters[alias] = Cluster(alias, bootstrap.strip(), client)
    return clusters


def _setting(key: str, setting: Setting, value):
    if setting.kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, setting.kind) or (isinstance(value, bool) and setting.kind is not bool):
        raise ConfigError(f"{key} must be {setting.kind.__name__}, got {value!r}")
    if setting.choices and value not in setting.choices:
        raise ConfigError(f"{key} must be one of {', '.join(setting.choices)}, got {value!r}")
    if setting.minimum is not None and isinstance(value, int) and value < setting.minimum:
        raise ConfigError(f"{key} must be at least {setting.minimum}, got {value!r}")
    if isinstance(value, float) and value < 0:
        raise ConfigError(f"{key} must not be negative, got {value!r}")
    return value
