"""The one table of API versions kgate implements.

ApiVersions advertises exactly this table and the decoder refuses anything outside
it, so what we claim and what we serve cannot drift apart. Produce and ListOffsets
keep min version 0: librdkafka refuses to compress unless Produce is advertised
down to v0 (Kafka 4.0 kept advertising it for the same reason, KAFKA-18659).
"""
from kafka.protocol.api_key import ApiKey

SUPPORTED: dict[ApiKey, tuple[int, int]] = {
    ApiKey.Produce: (0, 11),
    ApiKey.Fetch: (0, 16),
    ApiKey.ListOffsets: (0, 10),
    ApiKey.Metadata: (0, 12),
    ApiKey.ApiVersions: (0, 4),
    ApiKey.CreateTopics: (0, 7),
    ApiKey.DeleteTopics: (0, 6),
    ApiKey.InitProducerId: (0, 5),
    ApiKey.DescribeConfigs: (0, 4),
    ApiKey.AlterConfigs: (0, 2),
    ApiKey.IncrementalAlterConfigs: (0, 1),
    ApiKey.OffsetCommit: (0, 9),
    ApiKey.OffsetFetch: (0, 9),
    ApiKey.FindCoordinator: (0, 6),
    ApiKey.JoinGroup: (0, 9),
    ApiKey.Heartbeat: (0, 4),
    ApiKey.LeaveGroup: (0, 5),
    ApiKey.SyncGroup: (0, 5),
    ApiKey.DescribeGroups: (0, 5),
    ApiKey.ListGroups: (0, 5),
    ApiKey.DeleteGroups: (0, 2),
    ApiKey.OffsetDelete: (0, 0),
    ApiKey.SaslHandshake: (0, 1),
    ApiKey.SaslAuthenticate: (0, 2),
    ApiKey.CreatePartitions: (0, 3),
    ApiKey.DeleteRecords: (0, 2),
    ApiKey.DescribeCluster: (0, 1),
    # Moves ownership only: one replica per partition in shared storage (gateway/handlers/reassignments.py).
    ApiKey.AlterPartitionReassignments: (0, 1),
    ApiKey.ListPartitionReassignments: (0, 0),
    ApiKey.OffsetForLeaderEpoch: (0, 4),
    ApiKey.DescribeLogDirs: (0, 4),
    ApiKey.DescribeProducers: (0, 0),
    ApiKey.DescribeAcls: (0, 3),
    ApiKey.CreateAcls: (0, 3),
    ApiKey.DeleteAcls: (0, 3),
    ApiKey.ConsumerGroupHeartbeat: (0, 1),
    ApiKey.ConsumerGroupDescribe: (0, 0),
    # Share groups (KIP-932) at their stable versions (v0 was early access); ShareFetch and
    # ShareAcknowledge v2 (KIP-1222's renew acknowledgements) are not built.
    ApiKey.ShareGroupHeartbeat: (1, 1),
    ApiKey.ShareGroupDescribe: (1, 1),
    ApiKey.ShareFetch: (1, 1),
    ApiKey.ShareAcknowledge: (1, 1),
    # Share-group offsets administration; DescribeShareGroupOffsets v1 adds each share-partition's lag (KIP-1226).
    ApiKey.DescribeShareGroupOffsets: (0, 1),
    ApiKey.AlterShareGroupOffsets: (0, 0),
    ApiKey.DeleteShareGroupOffsets: (0, 0),
    # The share-state APIs, broker to broker (ClusterAction): a share-partition's leader and the
    # share coordinator holding its state; Write and ReadSummary v1 carry KIP-1226's delivery-complete count.
    ApiKey.InitializeShareGroupState: (0, 0),
    ApiKey.ReadShareGroupState: (0, 0),
    ApiKey.WriteShareGroupState: (0, 1),
    ApiKey.DeleteShareGroupState: (0, 0),
    ApiKey.ReadShareGroupStateSummary: (0, 1),
    # Streams groups (KIP-1071) at Kafka 4.4's versions. No topology description is stored (the
    # StreamsGroupTopologyDescriptionUpdate API is not built): a heartbeat never asks for one and
    # a describe says NOT_STORED when asked; acceptable.recovery.lag is not used (warm-ups are not built).
    ApiKey.StreamsGroupHeartbeat: (0, 1),
    ApiKey.StreamsGroupDescribe: (0, 1),
    # Transactions (KIP-98) up to the versions before KIP-890's: AddPartitionsToTxn v4+ is
    # broker-to-broker, and the later versions of the others carry its new epoch rules.
    ApiKey.AddPartitionsToTxn: (0, 3),
    ApiKey.AddOffsetsToTxn: (0, 3),
    ApiKey.EndTxn: (0, 3),
    ApiKey.TxnOffsetCommit: (0, 3),
    ApiKey.DescribeTransactions: (0, 0),
    ApiKey.ListTransactions: (0, 1),
    ApiKey.WriteTxnMarkers: (1, 1),  # broker to broker: a coordinator to a partition's owner
}


# Features (KIP-584) at the levels whose behaviour kgate implements: (lowest supported,
# highest supported, finalized level). Kafka 4 clients and tools read them from ApiVersions
# v3+: group.version 1 is KIP-848's consumer groups (ConsumerGroupHeartbeat above);
# share.version 1 is KIP-932's share groups (ShareGroupHeartbeat, ShareFetch, ... above);
# streams.version 1 is KIP-1071's streams groups (StreamsGroupHeartbeat above);
# transaction.version stays 0 since KIP-890's second part (EndTxn v5, a new epoch per
# transaction) is not built. A level-0 feature is not finalized, as Kafka leaves it out too.
# KRaft's own features (metadata.version, kraft.version, eligible.leader.replicas.version)
# have no meaning here.
FEATURES: dict[str, tuple[int, int, int]] = {
    "group.version": (0, 1, 1),
    "share.version": (0, 1, 1),
    "streams.version": (0, 1, 1),
    "transaction.version": (0, 0, 0),
}
# Kafka's clients keep the finalized features of the highest epoch they have seen; kgate's
# are fixed per release, so one epoch serves.
FEATURES_EPOCH = 0

# kgate's broker-to-broker APIs (zone-aware routing), keys in a private range above Kafka's:
# decoded and served like the others, advertised to peer brokers only (their links send the
# highest version both serve, gateway/peer_links.py), so no client sees them.
KGATE_READ_END = 32000
KGATE_PRODUCE_REFERENCE = 32001
KGATE_FORWARD = 32002
KGATE_SHARE_GONE = 32003
KGATE_LINK_DEFLATE = 32004
INTERNAL: dict[int, tuple[int, int]] = {
    KGATE_READ_END: (0, 1),
    KGATE_PRODUCE_REFERENCE: (0, 1),
    KGATE_FORWARD: (0, 0),
    KGATE_SHARE_GONE: (0, 0),
    KGATE_LINK_DEFLATE: (0, 0),
}


def is_supported(api_key: int, version: int) -> bool:
    bounds = SUPPORTED.get(api_key) or INTERNAL.get(api_key)
    return bounds is not None and bounds[0] <= version <= bounds[1]
