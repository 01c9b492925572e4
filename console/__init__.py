"""``kgate console``: a web console for any Kafka cluster, served by this process.

A Kafka client like ``cli`` (it reuses the command line's connection options and
connecting): it reads the cluster through the Kafka protocol, so it works against
Apache Kafka as well, and shows more where the cluster is kgate (its settings, entry
formats, zones) or where brokers' metrics endpoints are given (throughput and lag over
the last hour). Pages are rendered on the server, from Python's standard library only:
a console an operator opens from a bastion host should need no build step, no
JavaScript bundle and no extra dependency, and every page is one request that shows the
cluster as it is now.
"""
