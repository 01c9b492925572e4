"""kgate mirror: cross-cluster replication, a Kafka client of two (or more) clusters.

Workers copy partitions from source to target clusters with assigned partitions (no
group rebalances), store a source position only after the target acknowledged what
lies below it, and coordinate through ZooKeeper. Nothing here imports the broker.
"""
