"""Every divergence the suite has explained, and how it is classified.

A divergence matches the first entry whose scenario, exchange label and field path globs
match it (``*`` also matches dots, so a narrower entry goes before a wider one). Three
kinds: a kgate bug (not fixed yet, with what a fix needs), a deliberate difference (with
its reason, also in docs/clients/kafka-reference.md), or a value internal to Kafka (a choice two
correct brokers may make differently).
"""
from dataclasses import dataclass
from fnmatch import fnmatchcase

from .compare import Divergence

BUG, DELIBERATE, INTERNAL = "kgate bug", "deliberate", "internal to Kafka"


@dataclass(frozen=True)
class Known:
    scenario: str
    label: str
    path: str
    kind: str
    reason: str

    def matches(self, divergence: Divergence) -> bool:
        return (fnmatchcase(divergence.scenario, self.scenario) and fnmatchcase(divergence.label, self.label)
                and fnmatchcase(divergence.path, self.path))


_VERSIONS = ("kgate advertises, from protocol/api_versions.py, exactly the versions whose behaviour it "
             "implements: the oldest versions Kafka 4 dropped stay for old clients (0.9-era and up), and "
             "newer versions come when their behaviour does (e.g. KIP-890 transactions, share groups)")
_ABSENT_API = ("APIs kgate does not serve: KRaft and inter-broker APIs (a kgate cluster keeps its metadata "
               "in ZooKeeper and shares storage), and client APIs not built yet (KIP-1296's streams topology "
               "descriptions, client quotas, telemetry)")
_KRAFT_FEATURE = "a KRaft feature: a kgate cluster keeps its metadata in ZooKeeper and has no replicas"
_MESSAGE = "free-text error messages are each broker's own; only their error codes are compared"

KNOWN: list[Known] = [
    # ApiVersions
    # The version ranges of APIs both serve first: "api_keys.api_key=*" alone would match them too.
    Known("api_versions*", "*", "api_keys.api_key=*.m??_version", DELIBERATE, _VERSIONS),
    Known("api_versions*", "*", "api_keys.api_key=*", DELIBERATE, _ABSENT_API),
    Known("api_versions", "v3*", "supported_features", DELIBERATE,
          "v3 lists only features whose range starts above 0: Kafka's is metadata.version. " + _KRAFT_FEATURE),
    Known("api_versions", "*", "*_features.name=metadata.version", DELIBERATE, _KRAFT_FEATURE),
    Known("api_versions", "*", "*_features.name=kraft.version", DELIBERATE, _KRAFT_FEATURE),
    Known("api_versions", "*", "*_features.name=eligible.leader.replicas.version", DELIBERATE, _KRAFT_FEATURE),
    Known("api_versions", "*", "*_features.name=share.version*", DELIBERATE,
          "kgate implements share.version 1 (KIP-932's share groups, ShareFetch and ShareAcknowledge v1); Kafka "
          "4.4 finalizes 2, whose KIP-1222 renew acknowledgements (ShareFetch and ShareAcknowledge v2) are not "
          "built"),
    Known("api_versions", "*", "*_features.name=transaction.version*", DELIBERATE,
          "kgate implements transaction.version 0: KIP-890's second part (EndTxn v5, an epoch bump per "
          "transaction) is not built, so clients keep the older transaction protocol"),
    Known("share_group_offsets", "*", "*.kgate_in_flight", DELIBERATE,
          "kgate's own tagged field: a share-partition's records in flight, which `kgate groups describe` shows "
          "(Kafka's clients skip it; Kafka sends none)"),
    # Metadata
    Known("metadata_auto_create", "*", "topics.*", INTERNAL,
          "Kafka's broker asks its controller to create the topic and answers before it exists (a client "
          "retries); kgate creates it before answering"),
    # Topic configs, in CreateTopics and DescribeConfigs answers
    Known("*", "*", "*configs.name=kgate.*", DELIBERATE, "kgate's own topic settings (entry formats)"),
    Known("*", "*", "*configs.name=min.insync.replicas.config_source", INTERNAL,
          "Kafka 4's storage format sets a cluster-wide dynamic min.insync.replicas (KIP-966); kgate has no "
          "replicas, so its value is the default"),
    Known("*", "*", "*configs.name=min.insync.replicas.synonyms", INTERNAL, "as its config_source"),
    # The config's value and its broker default's, listed as its synonym under Kafka's name.
    Known("*", "*", "*configs.name=message.timestamp.after.max.ms*.value", DELIBERATE,
          "Kafka 4.0's default is one hour (KIP-937); kgate does not check record timestamps against its clock, "
          "so it describes the bound it keeps: none (gateway/topic_configs.py)"),
    Known("*", "*", "*configs.name=remote.copy.lag.*", INTERNAL, "tiered storage, which kgate does not have"),
    Known("*", "*", "*configs.name=remote.*", INTERNAL, "tiered storage, which kgate does not have"),
    Known("*", "*", "*configs.name=local.retention.*", INTERNAL, "tiered storage, which kgate does not have"),
    Known("*", "*", "*configs.name=message.downconversion.enable", DELIBERATE,
          "removed in Kafka 4.0 (KIP-724); kgate still down-converts for fetchers that cannot read "
          "the stored format (0.9- and 0.10-era consumers) and keeps the Kafka 3.x setting that names it"),
    Known("*", "*", "*configs.name=message.format.version", DELIBERATE,
          "removed in Kafka 4.0; kgate keeps the Kafka 3.x setting (ignored, as 3.x ignored it) so "
          "3.x-era scripts that set it keep working"),
    Known("*", "*", "*configs.name=message.timestamp.difference.max.ms", DELIBERATE,
          "removed in Kafka 4.0 (replaced by message.timestamp.before/after.max.ms); kgate keeps the "
          "Kafka 3.x setting so 3.x-era scripts that set it keep working"),
    Known("*", "*", "*configs.name=*.documentation", DELIBERATE,
          "with include_documentation kgate answers its own text: what its settings reference says of a "
          "setting, and what kgate does with a topic config (acts, ignored, only the default)"),
    Known("create_topics_invalid", "replication factor 3", "topics.name=*", DELIBERATE,
          "kgate's partitions live in shared storage, so it accepts any replication factor (and reports 1); "
          "Kafka refuses more replicas than brokers"),
    # Fetch and ListOffsets
    Known("old_generations", "*", "*", DELIBERATE,
          "Kafka 4 dropped Produce v0-2 and Fetch v0-3 (KIP-896) and closes the connection; kgate keeps them "
          "(magic 0 and 1, down-conversion) for 0.9- and 0.10-era clients, so what follows differs by the "
          "records Kafka refused"),
    Known("list_offsets_specs", "v0 latest", "", DELIBERATE,
          "Kafka 4 dropped ListOffsets v0 and closes the connection; kgate keeps it for 0.9/0.10 clients"),
    # Groups
    Known("consumer_group_heartbeat", "join", "member_epoch", INTERNAL,
          "Kafka's group epoch also counts the subscription-metadata refresh; the epochs stay monotonic in both"),
    Known("consumer_group_heartbeat", "join", "assignment.topic_partitions", INTERNAL,
          "Kafka assigns on a later heartbeat, kgate on the first; both converge"),
    Known("group_configs", "heartbeat: the group's interval", "member_epoch", INTERNAL,
          "Kafka's group epoch also counts the subscription-metadata refresh; the epochs stay monotonic in both"),
    # Transactions
    Known("transaction_fencing", "DescribeTransactions", "transaction_states.transactional_id=*.producer_*",
          INTERNAL, "an unknown transactional id's producer id and epoch: Kafka answers the fields' default 0"),
    Known("transaction_flow", "read_*committed after abort", "responses.topic=*.records", INTERNAL,
          "Kafka's answer stops before the abort marker (a control batch) although its high watermark is past "
          "it; kgate returns the marker too. Clients skip control batches, so both deliver the same records"),
    # SASL
    # Error messages
    Known("*", "*", "*error_message", INTERNAL, _MESSAGE),
]


def explain(divergence: Divergence) -> Known | None:
    return next((known for known in KNOWN if known.matches(divergence)), None)


def classify(divergences: list[Divergence]) -> list[tuple[Divergence, Known | None]]:
    return [(d, explain(d)) for d in divergences]
