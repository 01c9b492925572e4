"""kafka-python (1.4 to 3.x) and kafka-python-ng: what their releases share.

``--pin`` is kafka-python's ``api_version`` ("0.10.0" pins (0, 10, 0)); empty lets
the client probe the broker. Admin needs KafkaAdminClient (1.4.4 and later).
"""
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

import driver


def common(args) -> dict:
    options = {"bootstrap_servers": args.brokers, "client_id": args.client_id}
    if args.pin:
        options["api_version"] = tuple(int(part) for part in args.pin.split("."))
    if args.sasl_mechanism:
        options.update(security_protocol="SASL_PLAINTEXT", sasl_mechanism=args.sasl_mechanism,
                       sasl_plain_username=args.sasl_user, sasl_plain_password=args.sasl_password)
    return options


def produce(args) -> None:
    options = common(args)
    if args.idempotent:
        options["enable_idempotence"] = True
    producer = KafkaProducer(compression_type=None if args.codec == "none" else args.codec, linger_ms=5,
                             acks="all", **options)
    futures = [send(producer, args.topic, *record) for record in driver.produced(args)]
    producer.flush(args.timeout)
    for future in futures:
        future.get(timeout=10)
    producer.close(10)


def transact(args) -> None:
    """Three transactions of one transactional id: commit, abort, commit (kafka-python 2.1 and later)."""
    producer = KafkaProducer(transactional_id=args.transactional_id, linger_ms=5, acks="all",
                             compression_type=None if args.codec == "none" else args.codec, **common(args))
    producer.init_transactions()
    for records, commit in driver.transactions(args):
        producer.begin_transaction()
        futures = [send(producer, args.topic, *record) for record in records]
        producer.flush(args.timeout)
        for future in futures:
            future.get(timeout=10)
        (producer.commit_transaction if commit else producer.abort_transaction)()
    producer.close(10)


def send(producer, topic, key, value, headers, timestamp):
    if headers:
        return producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=timestamp)
    return producer.send(topic, key=key, value=value, timestamp_ms=timestamp)


def read(args) -> None:
    isolation = {"isolation_level": args.isolation} if args.isolation else {}
    consumer = KafkaConsumer(enable_auto_commit=False, **isolation, **common(args))
    partitions = [TopicPartition(args.topic, p) for p in range(args.partitions)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    consume(consumer, args)
    consumer.close()


def group(args) -> None:
    """Read ``count`` records as a member of ``group``, commit exactly those, leave."""
    consumer = KafkaConsumer(args.topic, group_id=args.group, enable_auto_commit=False,
                             auto_offset_reset="earliest", **common(args))
    positions = consume(consumer, args)
    consumer.commit({TopicPartition(args.topic, p): OffsetAndMetadata(o, "") for p, o in positions.items()})
    consumer.close()


def consume(consumer, args) -> dict:
    def poll(most):
        return ((m.partition, m.offset, m.key, m.value, m.timestamp, getattr(m, "headers", None))
                for messages in consumer.poll(timeout_ms=500, max_records=most).values() for m in messages)
    return driver.consume(poll, args)


def admin(args) -> None:
    """Create the topic with ``partitions`` partitions, describe it, delete it."""
    from kafka.admin import KafkaAdminClient, NewTopic

    client = KafkaAdminClient(request_timeout_ms=int(args.timeout * 1000), **common(args))
    client.create_topics([NewTopic(args.topic, args.partitions, 1)], timeout_ms=int(args.timeout * 1000))
    if hasattr(client, "describe_topics"):
        described = client.describe_topics([args.topic])
        driver.emit_topic(len(described[0]["partitions"]))
    else:  # 1.4: no describe_topics; the topic's metadata through a consumer
        consumer = KafkaConsumer(**common(args))
        driver.emit_topic(len(consumer.partitions_for_topic(args.topic) or ()))
        consumer.close()
    client.delete_topics([args.topic], timeout_ms=int(args.timeout * 1000))
    client.close()
