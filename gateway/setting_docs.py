"""What each broker setting does, for the people who set them.

The settings reference of the documentation site is generated from this table and
``config.BROKER_SETTINGS`` together, and its build fails when a setting has no entry
here, so a new setting cannot ship undocumented; DescribeConfigs answers the same text
to clients that ask for documentation. A setting is either one of Apache Kafka's
under its name (``kafka_name``), or kgate's own, sometimes doing the work of a Kafka
setting that does not fit a broker over shared storage (``kafka_counterpart``).
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class SettingDoc:
    text: str
    kafka_name: bool = False
    kafka_counterpart: str | None = None


def _kafka(text: str) -> SettingDoc:
    return SettingDoc(text, kafka_name=True)


def _kgate(text: str, counterpart: str | None = None) -> SettingDoc:
    return SettingDoc(text, kafka_counterpart=counterpart)


SETTING_DOCS: dict[str, SettingDoc] = {
    "broker.id": _kafka("This broker's id. -1: 0 on a single node; in a cluster an id (1000 and up) is taken from "
                        "a cluster-wide counter on first start and kept in the data directory; with "
                        "`serve --workers N`, worker i is this id (0 for -1) plus i. A second live broker with the "
                        "same id refuses to start."),
    "broker.rack": _kafka("The broker's zone (availability zone). Clients of the same zone are served by it: "
                          "reads through preferred_read_replica, writes by reference (see Zones)."),
    "kgate.metadata": _kgate("Where cluster metadata lives: `embedded` (SQLite in the data directory: one broker, "
                             "or the workers of `kgate serve --workers N`, which reach it as `shared:SOCKET` through "
                             "their supervisor) or `zookeeper://HOST:PORT[,HOST:PORT...][/CHROOT]` (a cluster). "
                             "Also `--metadata`.",
                             "zookeeper.connect"),
    "kgate.storage": _kgate("Where partitions' ledgers live: empty (`<data dir>/ledgers`), `file:DIR` (a directory "
                            "every broker of the cluster reaches) or "
                            "`s3://BUCKET/PREFIX?endpoint=URL&region=REGION` (object storage). Also `--storage`.",
                            "log.dirs"),
    "kgate.wal": _kgate("With `s3://` storage, where acknowledged entries are first made durable: `s3` (WAL "
                        "objects in the bucket, no local disk) or `file:DIR` (a local fsync'd log uploaded in "
                        "the background). Also `--wal`."),
    "kgate.zone.read.end.interval.ms": _kgate("How often, at most, a broker serving partitions owned in another "
                                              "zone to its own zone's consumers learns their owner's high "
                                              "watermarks: 0 (the default) at each change, on object storage each "
                                              "WAL commit of the owner. A longer interval sends fewer bytes across "
                                              "zones (one answer of the owner per interval) and adds up to that "
                                              "much to those consumers' end-to-end latency."),
    "kgate.zone.link.deflate": _kgate("Whether links between brokers of different zones are compressed: each "
                                      "direction one deflate stream, which remembers the names earlier requests "
                                      "carried, so the small requests of the zone path cost about a quarter of "
                                      "their bytes. Both brokers must serve it; `false` sends them as they are."),
    "kgate.s3.wal.commit.interval.ms": _kgate("The S3 WAL's pace: objects are cut at least a quarter of this apart "
                                              "(at most 4 PUTs per interval per broker, whatever the partition "
                                              "count); entries wait for a PUT still out unless it is out this long "
                                              "after the last cut. Acks wait about a quarter of this, or one PUT, "
                                              "plus a PUT."),
    "kgate.s3.cache.bytes": _kgate("Memory for ledger bytes read from or just written to objects (half for each "
                                   "pool), so a cold reader cannot push the tail out."),
    "kgate.s3.gc.interval.ms": _kgate("How often the object store deletes WAL objects none of whose ledgers is live "
                                      "any more. Each pass lists the bucket."),
    "kgate.s3.compaction.interval.ms": _kgate("How often each broker rewrites the sealed ledgers it holds out of WAL "
                                              "objects into objects of their own (a bounded amount per round)."),
    "kgate.balancer.enable": _kgate("Move partitions between brokers by load: the live broker with the lowest id "
                                    "plans every `kgate.balancer.interval.ms` from the brokers' load reports and "
                                    "places partitions (no data is copied: storage is shared). Off: ownership "
                                    "follows the hash and AlterPartitionReassignments only.",
                                    "Cruise Control's self-healing; AutoMQ's autobalancer.controller.enable"),
    "kgate.balancer.interval.ms": _kgate("How often the balancer plans a round of moves."),
    "kgate.balancer.max.moves": _kgate("The most partitions one round moves; each move costs the partition's "
                                       "clients a retriable error and a metadata refresh."),
    "kgate.balancer.move.cooldown.ms": _kgate("How long a partition the balancer moved stays where it went before it "
                                              "may move again (long enough for its new owner's load reports)."),
    "kgate.balancer.tolerance.percent": _kgate("A broker carrying at most this much more than the mean load, in "
                                               "percent, is balanced: nothing moves from it by load."),
    "kgate.balancer.load.report.interval.ms": _kgate("How often each broker writes its bytes in and out per second, "
                                                     "per partition, to the metadata store (`kgate brokers list` "
                                                     "shows them; the balancer plans from them)."),
    "broker.session.timeout.ms": _kafka("With `serve --workers N`, a worker's session with its supervisor, as "
                                        "Kafka's broker's with its controller: a worker the supervisor hears "
                                        "nothing from for this long (its event loop stopped: SIGSTOP, a hang) loses "
                                        "its partitions to the others and is killed and started again. Workers "
                                        "send a heartbeat every quarter of it."),
    "zookeeper.session.timeout.ms": _kafka("The ZooKeeper session timeout: how long a dead broker keeps its "
                                           "partitions before others take them over."),
    "socket.request.max.bytes": _kafka("The largest request frame accepted; larger frames close the connection."),
    "connections.max.idle.ms": _kafka("Connections idle for longer are closed."),
    "max.connections": _kafka("Connections past this count are closed at accept (one WARNING line per 10 s at "
                              "most)."),
    "max.connections.per.ip": _kafka("Connections from one address past this count are closed at accept."),
    "max.connections.per.ip.overrides": _kafka("Per-address limits as `HOST:COUNT[,HOST:COUNT...]`."),
    "kgate.max.inflight.requests.per.connection": _kgate("Requests one connection may have in flight before the "
                                                         "broker stops reading it (back-pressure)."),
    "queued.max.request.bytes": _kafka("Request bytes read but not yet answered, broker-wide; past it the broker "
                                       "stops reading until answers drain. -1: no limit."),
    "kgate.queued.max.request.bytes.per.connection": _kgate("Request bytes read but not yet answered on one "
                                                            "connection; past it that connection is not read "
                                                            "until answers drain."),
    "kgate.queued.max.response.bytes": _kgate("Fetched bytes held in answers not yet sent, broker-wide: a fetch "
                                              "reads no more than the room left and waits (within max_wait_ms) "
                                              "when there is none."),
    "kgate.queued.max.response.bytes.per.connection": _kgate("Fetched bytes held in answers not yet sent on one "
                                                             "connection."),
    "max.incremental.fetch.session.cache.slots": _kafka("Incremental fetch sessions (KIP-227) the broker keeps; "
                                                        "0: none, every fetch is a full one."),
    "auto.create.topics.enable": _kafka("Create a topic when a client asks for metadata of one that does not "
                                        "exist."),
    "delete.topic.enable": _kafka("false: DeleteTopics is refused (TOPIC_DELETION_DISABLED) and every topic stays."),
    "num.partitions": _kafka("Partitions of an automatically created topic, and of CreateTopics asking for the "
                             "default."),
    "default.replication.factor": _kafka("The replication factor reported for new topics. Storage is shared, so "
                                         "there is one copy of each partition whatever the value."),
    "message.max.bytes": _kafka("The largest record batch accepted (the default of the topic config "
                                "max.message.bytes)."),
    "kgate.max.inflated.batch.bytes": _kgate("Compressed record data is inflated under this ceiling per batch; "
                                             "past it a produce gets MESSAGE_TOO_LARGE, so a compression bomb "
                                             "stops there."),
    "kgate.max.inflated.request.bytes": _kgate("The same ceiling per request (produce validation, legacy "
                                               "wrappers, down-conversion for old fetchers)."),
    "log.retention.ms": _kafka("How long records are kept (the default of retention.ms). -1: forever. Not set: "
                               "log.retention.minutes, else log.retention.hours."),
    "log.retention.minutes": _kafka("log.retention.ms in minutes, when that is not set."),
    "log.retention.hours": _kafka("log.retention.ms in hours, when neither it nor log.retention.minutes is set."),
    "log.retention.bytes": _kafka("How many bytes a partition keeps (the default of retention.bytes). -1: no "
                                  "limit."),
    "log.segment.bytes": _kafka("A partition's open ledger rolls at this size (the default of segment.bytes)."),
    "log.roll.ms": _kafka("A partition's open ledger rolls at this age (the default of segment.ms). Not set: "
                          "log.roll.hours."),
    "log.roll.hours": _kafka("log.roll.ms in hours, when that is not set."),
    "log.retention.check.interval.ms": _kafka("How often retention is applied."),
    "log.cleaner.enable": _kafka("Run the log cleaner over the compacted partitions this broker owns."),
    "log.cleaner.backoff.ms": _kafka("How long the log cleaner sleeps when no partition is due."),
    "log.cleaner.dedupe.buffer.size": _kafka("Memory for the log cleaner's key map (16-byte key hashes and "
                                             "offsets, 24 bytes a slot, full at 90%); a pass covers what fits."),
    "log.cleaner.min.cleanable.ratio": _kafka("A compacted partition is due when its dirty ratio passes this (the "
                                              "default of min.cleanable.dirty.ratio)."),
    "log.cleaner.delete.retention.ms": _kafka("How long a tombstone stays after the pass that first kept it (the "
                                              "default of delete.retention.ms)."),
    "log.cleaner.min.compaction.lag.ms": _kafka("Records younger than this are never compacted (the default of "
                                                "min.compaction.lag.ms)."),
    "log.cleaner.max.compaction.lag.ms": _kafka("A partition whose oldest uncompacted record is older than this is "
                                                "due (the default of max.compaction.lag.ms)."),
    "entry.format": _kgate("How a produce becomes a stored entry, for topics that do not set kgate.entry.format: "
                           "`kafka`, `mixed_kafka` or `pulsar` (see Concepts, Entry formats)."),
    "compression.type": _kafka("Recompression on produce, Kafka's values; honoured by entry formats that rebuild "
                               "batches (mixed_kafka, pulsar), while kafka stores what the producer sent."),
    "log.message.timestamp.type": _kafka("Whose clock dates stored records, for topics that do not set "
                                         "message.timestamp.type: `CreateTime` (the producer's) or `LogAppendTime` "
                                         "(this broker's, on append)."),
    "log.message.timestamp.after.max.ms": _kafka("How far ahead of the broker's clock a record's timestamp may be "
                                                 "(the default of message.timestamp.after.max.ms). kgate does not "
                                                 "check timestamps, so it takes only the value of no bound."),
    "log.message.timestamp.before.max.ms": _kafka("How far behind the broker's clock a record's timestamp may be "
                                                  "(the default of message.timestamp.before.max.ms); as "
                                                  "log.message.timestamp.after.max.ms."),
    "advertised.listeners": _kafka("What Metadata tells clients to connect to, HOST:PORT; empty: the listener "
                                   "itself. Also `--advertise`."),
    "offsets.topic.num.partitions": _kafka("Partitions of `__consumer_offsets`; a group's coordinator owns "
                                           "partition abs(hash(group)) % this."),
    "offsets.retention.minutes": _kafka("Committed offsets of an empty group are kept this long."),
    "offsets.retention.check.interval.ms": _kafka("How often expired offsets are removed."),
    "offset.metadata.max.bytes": _kafka("The longest metadata string an offset commit may carry."),
    "group.min.session.timeout.ms": _kafka("The shortest session timeout a classic group member may ask for."),
    "group.max.session.timeout.ms": _kafka("The longest session timeout a classic group member may ask for."),
    "group.initial.rebalance.delay.ms": _kafka("How long a new classic group waits for more members before its "
                                               "first rebalance."),
    "group.max.size": _kafka("Members a classic group may have."),
    "group.consumer.session.timeout.ms": _kafka("The session of KIP-848 consumer group members (the broker sets "
                                                "it)."),
    "group.consumer.heartbeat.interval.ms": _kafka("The heartbeat interval of KIP-848 consumer group members."),
    "group.consumer.min.session.timeout.ms": _kafka("The least consumer.session.timeout.ms a group config may set."),
    "group.consumer.max.session.timeout.ms": _kafka("The most consumer.session.timeout.ms a group config may set."),
    "group.consumer.min.heartbeat.interval.ms": _kafka("The least consumer.heartbeat.interval.ms a group config "
                                                       "may set."),
    "group.consumer.max.heartbeat.interval.ms": _kafka("The most consumer.heartbeat.interval.ms a group config "
                                                       "may set."),
    "group.consumer.assignors": _kafka("Server-side assignors of KIP-848 groups, the first the default: "
                                       "`uniform`, `range` (or Kafka's assignor class names)."),
    "group.consumer.max.size": _kafka("Members a KIP-848 consumer group may have."),
    "group.consumer.migration.policy": _kafka("Whether a group changes kind online: a classic group with members "
                                              "becomes a consumer group when a KIP-848 member joins (`upgrade`), "
                                              "and turns classic again when only classic members remain "
                                              "(`downgrade`); `bidirectional` both, `disabled` neither."),
    "group.share.session.timeout.ms": _kafka("How long a share group member may go without a heartbeat."),
    "group.share.heartbeat.interval.ms": _kafka("The heartbeat interval share group members are told."),
    "group.share.max.size": _kafka("Members a share group may have."),
    "group.share.record.lock.duration.ms": _kafka("How long a share group member holds a record it was handed."),
    "group.share.delivery.count.limit": _kafka("Deliveries of a record before it is archived undelivered."),
    "group.share.partition.max.record.locks": _kafka("Records of a share-partition in flight at most."),
    "group.share.max.share.sessions": _kafka("Share sessions a broker keeps at most."),
    "group.share.min.session.timeout.ms": _kafka("The least share.session.timeout.ms a group config may set."),
    "group.share.max.session.timeout.ms": _kafka("The most share.session.timeout.ms a group config may set."),
    "group.share.min.heartbeat.interval.ms": _kafka("The least share.heartbeat.interval.ms a group config may set."),
    "group.share.max.heartbeat.interval.ms": _kafka("The most share.heartbeat.interval.ms a group config may set."),
    "group.share.min.record.lock.duration.ms": _kafka("The least share.record.lock.duration.ms a group config "
                                                      "may set."),
    "group.share.max.record.lock.duration.ms": _kafka("The most share.record.lock.duration.ms a group config "
                                                      "may set."),
    "group.share.min.delivery.count.limit": _kafka("The least share.delivery.count.limit a group config may set."),
    "group.share.max.delivery.count.limit": _kafka("The most share.delivery.count.limit a group config may set."),
    "group.streams.session.timeout.ms": _kafka("How long a streams group member may go without a heartbeat."),
    "group.streams.heartbeat.interval.ms": _kafka("The heartbeat interval streams group members are told."),
    "group.streams.num.standby.replicas": _kafka("Standby copies of each task a streams group's members keep."),
    "group.streams.max.size": _kafka("Members a streams group may have."),
    "group.streams.min.session.timeout.ms": _kafka("The least streams.session.timeout.ms a group config may set."),
    "group.streams.max.session.timeout.ms": _kafka("The most streams.session.timeout.ms a group config may set."),
    "group.streams.min.heartbeat.interval.ms": _kafka("The least streams.heartbeat.interval.ms a group config "
                                                      "may set."),
    "group.streams.max.heartbeat.interval.ms": _kafka("The most streams.heartbeat.interval.ms a group config "
                                                      "may set."),
    "group.streams.max.standby.replicas": _kafka("The most streams.num.standby.replicas a group config may set."),
    "group.streams.task.offset.interval.ms": _kafka(
        "How often a streams group's members report their tasks' changelog offsets (told in every heartbeat)."),
    "group.streams.acceptable.recovery.lag": _kafka(
        "The changelog lag under which a member counts as caught up with a task (told in every heartbeat; "
        "Kafka 4.4 and kgate give no warm-up tasks, so nothing else reads it)."),
    "share.coordinator.state.topic.num.partitions": _kafka("Partitions of `__share_group_state`; a share-partition's "
                                                           "state lives on partition abs(hash(group:topic id:"
                                                           "partition)) % this."),
    "transaction.state.log.num.partitions": _kafka("Partitions of `__transaction_state`; a transactional id's "
                                                   "coordinator owns partition abs(hash(id)) % this."),
    "transaction.max.timeout.ms": _kafka("The longest transaction.timeout.ms a producer may ask for; above it "
                                         "InitProducerId answers INVALID_TRANSACTION_TIMEOUT."),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": _kafka("How often transactions open longer "
                                                                          "than their timeout are aborted."),
    "kgate.offsets.compaction.min.records": _kgate("Compact an offsets partition once it holds this many records "
                                                   "more than live keys."),
    "sasl.enabled.mechanisms": _kafka("SASL mechanisms offered on SASL listeners: PLAIN, SCRAM-SHA-256, "
                                      "SCRAM-SHA-512."),
    "sasl.server.max.receive.size": _kafka("The largest frame accepted before authentication (Kafka: 512 KiB; no "
                                           "token of the mechanisms offered comes near 64 KiB)."),
    "connections.max.reauth.ms": _kafka("How long a SASL login holds (KIP-368): SaslAuthenticate v1+ tells the "
                                        "client, which re-authenticates on the live connection before it ends; a "
                                        "request after it ends closes the connection. 0: a login holds for the "
                                        "connection's life."),
    "connection.failed.authentication.delay.ms": _kafka("How long after a failed login the connection is "
                                                        "closed."),
    "kgate.sasl.max.failed.logins.per.minute": _kgate("Failed logins for one user from one client address in a "
                                                      "minute before that user's logins from that address are "
                                                      "refused."),
    "kgate.sasl.max.failed.logins.per.address.per.minute": _kgate("Failed logins from one address, whatever the "
                                                                  "users, in a minute before every login from it "
                                                                  "is refused."),
    "kgate.sasl.max.failed.logins.per.user.per.minute": _kgate("Failed logins for one user from any addresses in a "
                                                               "minute before the user's logins are refused, except "
                                                               "from addresses it logged in from within the hour."),
    "authorizer.class.name": _kafka("Empty: no authorization. `acl` (or Kafka's authorizer class names) turns on "
                                    "the ACL authorizer."),
    "super.users": _kafka("`;`-separated principals (User:admin) that may do anything."),
    "allow.everyone.if.no.acl.found": _kafka("Allow a request on a resource that no ACL names."),
    "kgate.inter.broker.sasl.mechanism": _kgate("The SASL mechanism this broker logs in to its peers with.",
                                                "sasl.mechanism.inter.broker.protocol"),
    "kgate.inter.broker.sasl.username": _kgate("The user this broker logs in to its peers' SASL_PLAINTEXT "
                                               "listeners as (zone routing and transaction markers); it needs "
                                               "ClusterAction once an authorizer is on. Empty: the peers' "
                                               "PLAINTEXT listeners, unauthenticated."),
    "kgate.inter.broker.sasl.password": _kgate("That user's password (sensitive: never described)."),
    "ssl.keystore.location": _kafka("One PEM file holding the certificate chain and the private key, for SSL "
                                    "listeners."),
    "ssl.key.password": _kafka("The password of an encrypted private key."),
    "kgate.metrics.listener": _kgate("HOST:PORT of the Prometheus endpoint (`/metrics`); empty: none. Also "
                                     "`--metrics`."),
    "kgate.metrics.basic.auth.user": _kgate("HTTP basic auth on the metrics endpoint: the user; empty: no auth."),
    "kgate.metrics.basic.auth.password.file": _kgate("A file whose first line is the metrics endpoint's password "
                                                     "(kept out of the command line and DescribeConfigs)."),
    "log.level": _kgate("The broker's log level: DEBUG, INFO, WARNING or ERROR."),
}
