"""aiokafka (asyncio): the driver's modes, each run to completion in its own loop.

``--pin`` is aiokafka's ``api_version`` string ("0.10.2"); empty means "auto".
"""
import asyncio
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

import driver


def common(args) -> dict:
    options = {"bootstrap_servers": args.brokers, "client_id": args.client_id, "api_version": args.pin or "auto"}
    if args.sasl_mechanism:
        options.update(security_protocol="SASL_PLAINTEXT", sasl_mechanism=args.sasl_mechanism,
                       sasl_plain_username=args.sasl_user, sasl_plain_password=args.sasl_password)
    return options


def produce(args) -> None:
    asyncio.run(_produce(args))


async def _produce(args) -> None:
    producer = AIOKafkaProducer(compression_type=None if args.codec == "none" else args.codec, linger_ms=5,
                                acks="all", enable_idempotence=args.idempotent, **common(args))
    await producer.start()
    try:
        futures = [await producer.send(args.topic, key=key, value=value, headers=headers, timestamp_ms=timestamp)
                   for key, value, headers, timestamp in driver.produced(args)]
        await asyncio.wait_for(asyncio.gather(*futures), args.timeout)
    finally:
        await producer.stop()


def transact(args) -> None:
    asyncio.run(_transact(args))


async def _transact(args) -> None:
    """Three transactions of one transactional id: commit, abort, commit."""
    producer = AIOKafkaProducer(transactional_id=args.transactional_id, linger_ms=5, acks="all",
                                compression_type=None if args.codec == "none" else args.codec, **common(args))
    await producer.start()
    try:
        for records, commit in driver.transactions(args):
            await producer.begin_transaction()
            futures = [await producer.send(args.topic, key=key, value=value, headers=headers, timestamp_ms=timestamp)
                       for key, value, headers, timestamp in records]
            await asyncio.wait_for(asyncio.gather(*futures), args.timeout)
            await (producer.commit_transaction() if commit else producer.abort_transaction())
    finally:
        await producer.stop()


def read(args) -> None:
    asyncio.run(_read(args))


async def _read(args) -> None:
    consumer = AIOKafkaConsumer(enable_auto_commit=False, **({"isolation_level": args.isolation} if args.isolation
                                                               else {}), **common(args))
    await consumer.start()
    try:
        partitions = [TopicPartition(args.topic, p) for p in range(args.partitions)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        await _consume(consumer, args)
    finally:
        await consumer.stop()


def group(args) -> None:
    asyncio.run(_group(args))


async def _group(args) -> None:
    """Read ``count`` records as a member of ``group``, commit exactly those, leave."""
    consumer = AIOKafkaConsumer(args.topic, group_id=args.group, enable_auto_commit=False,
                                auto_offset_reset="earliest", **common(args))
    await consumer.start()
    try:
        positions = await _consume(consumer, args)
        await consumer.commit({TopicPartition(args.topic, p): o for p, o in positions.items()})
    finally:
        await consumer.stop()


async def _consume(consumer, args) -> dict:
    seen, positions = 0, {}
    deadline = time.monotonic() + args.timeout
    while seen < args.count:
        if time.monotonic() > deadline:
            raise driver.Shortfall(seen, args.count)
        batches = await consumer.getmany(timeout_ms=500, max_records=args.count - seen)
        for messages in batches.values():
            for message in messages:
                driver.emit(message.partition, message.offset, message.key, message.value, message.timestamp,
                            message.headers)
                positions[message.partition] = message.offset + 1
                seen += 1
    return positions


def admin(args) -> None:
    asyncio.run(_admin(args))


async def _admin(args) -> None:
    """Create the topic with ``partitions`` partitions, describe it, delete it."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    client = AIOKafkaAdminClient(request_timeout_ms=int(args.timeout * 1000), **common(args))
    await client.start()
    try:
        await client.create_topics([NewTopic(args.topic, args.partitions, 1)])
        described = await client.describe_topics([args.topic])
        driver.emit_topic(len(described[0]["partitions"]))
        await client.delete_topics([args.topic])
    finally:
        await client.close()
