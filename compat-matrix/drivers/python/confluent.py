"""confluent-kafka (librdkafka), from PyPI wheels or Debian's python3-confluent-kafka.

``--pin`` is librdkafka's ``broker.version.fallback`` used with
``api.version.request=false`` ("0.9.0" forces the 0.9 generation); empty: ApiVersions.
"""
from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaException, Producer, TopicPartition

import driver


def common(args) -> dict:
    config = {"bootstrap.servers": args.brokers, "client.id": args.client_id}
    if args.pin:
        config.update({"api.version.request": False, "broker.version.fallback": args.pin})
    if args.sasl_mechanism:
        config.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": args.sasl_mechanism,
                       "sasl.username": args.sasl_user, "sasl.password": args.sasl_password})
    return config


def produce(args) -> None:
    producer = Producer({"compression.type": args.codec, "linger.ms": 5, "acks": "all",
                         "enable.idempotence": args.idempotent, **common(args)})
    failures = []
    for key, value, headers, timestamp in driver.produced(args):
        producer.produce(args.topic, key=key, value=value, headers=headers, timestamp=timestamp,
                         on_delivery=lambda err, _msg: err is not None and failures.append(err))
        producer.poll(0)
    remaining = producer.flush(args.timeout)
    if remaining or failures:
        raise RuntimeError(f"{remaining} undelivered, {len(failures)} failed: {failures[:1]}")


def transact(args) -> None:
    """Three transactions of one transactional id: commit, abort, commit."""
    producer = Producer({"transactional.id": args.transactional_id, "compression.type": args.codec, "linger.ms": 5,
                         **common(args)})
    producer.init_transactions(args.timeout)
    for records, commit in driver.transactions(args):
        producer.begin_transaction()
        for key, value, headers, timestamp in records:
            producer.produce(args.topic, key=key, value=value, headers=headers, timestamp=timestamp)
            producer.poll(0)
        producer.flush(args.timeout)
        (producer.commit_transaction if commit else producer.abort_transaction)(args.timeout)


def read(args) -> None:
    consumer = Consumer({"group.id": "unused", "enable.auto.commit": False, **isolation(args), **common(args)})
    consumer.assign([TopicPartition(args.topic, p, 0) for p in range(args.partitions)])
    try:
        consume(consumer, args)
    finally:
        consumer.close()


def group(args) -> None:
    """Read ``count`` records as a member of ``group``, commit exactly those, leave."""
    consumer = Consumer({"group.id": args.group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         **({"group.protocol": args.group_protocol} if args.group_protocol else {}), **common(args)})
    consumer.subscribe([args.topic])
    try:
        positions = consume(consumer, args)
        consumer.commit(offsets=[TopicPartition(args.topic, p, o) for p, o in positions.items()],
                        asynchronous=False)
    finally:
        consumer.close()


def share(args) -> None:
    """Read ``count`` records as a member of share group ``group``, accept each, leave."""
    from confluent_kafka import AcknowledgeType, ShareConsumer

    consumer = ShareConsumer({"group.id": args.group, "share.acknowledgement.mode": "explicit", **common(args)})
    consumer.subscribe([args.topic])

    def poll(_most):
        messages = consumer.poll(0.5)
        for message in messages:
            if message.error():
                raise KafkaException(message.error())
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            kind, timestamp = message.timestamp()
            yield (message.partition(), message.offset(), message.key(), message.value(),
                   None if kind == TIMESTAMP_NOT_AVAILABLE else timestamp, message.headers())
        if messages:
            consumer.commit_sync(args.timeout)
    try:
        driver.consume(poll, args)
    finally:
        consumer.close()


def isolation(args) -> dict:
    return {"isolation.level": args.isolation} if args.isolation else {}


def consume(consumer, args) -> dict:
    def poll(most):
        for message in consumer.consume(most, timeout=0.5):
            if message.error():
                raise KafkaException(message.error())
            kind, timestamp = message.timestamp()
            yield (message.partition(), message.offset(), message.key(), message.value(),
                   None if kind == TIMESTAMP_NOT_AVAILABLE else timestamp, message.headers())
    return driver.consume(poll, args)


def admin(args) -> None:
    """Create the topic with ``partitions`` partitions, describe it, delete it."""
    from confluent_kafka.admin import AdminClient, NewTopic

    client = AdminClient(common(args))
    for future in client.create_topics([NewTopic(args.topic, args.partitions, 1)]).values():
        future.result(timeout=args.timeout)
    described = client.list_topics(args.topic, timeout=args.timeout).topics[args.topic]
    if described.error is not None:
        raise KafkaException(described.error)
    driver.emit_topic(len(described.partitions))
    for future in client.delete_topics([args.topic]).values():
        future.result(timeout=args.timeout)
