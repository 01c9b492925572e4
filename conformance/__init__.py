"""The differential conformance suite: scenarios run against Apache Kafka 4.4 and kgate,
their responses normalized and compared field by field (docs/clients/kafka-reference.md)."""
