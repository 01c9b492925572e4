"""A transactional producer and a reader to the end of a topic, with confluent-kafka."""
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

TIMEOUT = 30


def transactional(bootstrap, transactional_id, **config) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5,
                         **config})
    producer.init_transactions(TIMEOUT)
    return producer


def read_to_end(bootstrap, topic, partitions, isolation, group="reader") -> list[bytes]:
    """Every value up to the end of each partition (the last stable offset for read_committed)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": isolation,
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values, ended = [], set()
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(ended) < partitions and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=0.5):
                if message.error() is None:
                    values.append(message.value())
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    ended.add(message.partition())
                else:
                    raise KafkaException(message.error())
    finally:
        consumer.close()
    assert len(ended) == partitions, f"only partitions {sorted(ended)} of {topic} reached their end"
    return values
