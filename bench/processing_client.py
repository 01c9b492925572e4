"""Which client library kgate.processing is built on: a plain consume loop with each candidate.

The framework's per-record cost sits on top of the client's, so the client that hands
Python the most records per second with the fewest cycles leaves the most room for
handlers. Every run reads the same topic from offset 0 (partitions assigned, no group)
with confluent-kafka (librdkafka; ``consume()`` in batches) and aiokafka (a native
asyncio client; ``getmany()`` in batches), each touching key, value and offset of
every record as the framework does; the order alternates run by run. Medians of the
runs (records/s, and process CPU per record, which counts the client's own threads
too) and the ratio confluent/aiokafka taken run by run are printed.

aiokafka is not a dependency of kgate; install it by hand to run this:
    .venv/bin/pip install aiokafka==0.14.0
    .venv/bin/python -m bench.processing_client --records 200000 --runs 3
"""
import argparse
import asyncio
import statistics
import sys
import time

import confluent_kafka

from bench.produce_consume import broker_in_temp_dir, create_topic, produce

CONFLUENT_CONFIG: dict = {}


def confluent_loop(bootstrap: str, topic: str, partitions: int, expected: int, max_seconds: float) -> tuple:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-c",
                                         "enable.auto.commit": False, **CONFLUENT_CONFIG})
    try:
        consumer.list_topics(topic, timeout=10)
        count = size = 0
        deadline = time.monotonic() + max_seconds
        start, cpu = time.perf_counter(), time.process_time()
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        while count < expected and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=0.5):
                if message.error():
                    raise RuntimeError(f"confluent-kafka: {message.error()}")
                size += len(message.key() or b"") + len(message.value() or b"") + (message.offset() >= 0)
                count += 1
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        consumer.close()
    if count != expected:
        raise RuntimeError(f"confluent-kafka read {count} of {expected} within {max_seconds} s")
    return count / elapsed, cpu / count * 1e6


def aiokafka_loop(bootstrap: str, topic: str, partitions: int, expected: int, max_seconds: float) -> tuple:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> tuple:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            count = size = 0
            deadline = time.monotonic() + max_seconds
            start, cpu = time.perf_counter(), time.process_time()
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            while count < expected and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500, max_records=500)
                for messages in batches.values():
                    for message in messages:
                        size += len(message.key or b"") + len(message.value or b"") + (message.offset >= 0)
                        count += 1
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        finally:
            await consumer.stop()
        if count != expected:
            raise RuntimeError(f"aiokafka read {count} of {expected} within {max_seconds} s")
        return count / elapsed, cpu / count * 1e6

    return asyncio.run(run())


LOOPS = {"confluent-kafka": confluent_loop, "aiokafka": aiokafka_loop}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=120.0)
    parser.add_argument("--confluent-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a librdkafka setting for the confluent-kafka loop (repeatable)")
    args = parser.parse_args(argv)
    CONFLUENT_CONFIG.update(item.split("=", 1) for item in args.confluent_config)
    rates: dict[str, list[float]] = {name: [] for name in LOOPS}
    cpu_us: dict[str, list[float]] = {name: [] for name in LOOPS}
    with broker_in_temp_dir() as (broker, _work_dir):
        topic = create_topic(broker.bootstrap, args.partitions)
        produce(broker.bootstrap, topic, args.records, args.value_size, args.max_seconds)
        for run in range(args.runs):
            order = list(LOOPS) if run % 2 == 0 else list(reversed(LOOPS))
            for name in order:
                rate, cpu = LOOPS[name](broker.bootstrap, topic, args.partitions, args.records, args.max_seconds)
                rates[name].append(rate)
                cpu_us[name].append(cpu)
            print(f"run {run + 1}/{args.runs}: " + ", ".join(
                f"{n} {rates[n][-1]:,.0f} records/s {cpu_us[n][-1]:.2f} us CPU/record" for n in LOOPS), flush=True)
    ratios = [c / a for c, a in zip(rates["confluent-kafka"], rates["aiokafka"])]
    for name in LOOPS:
        print(f"{name:16} median {statistics.median(rates[name]):>10,.0f} records/s "
              f"(min {min(rates[name]):,.0f}, max {max(rates[name]):,.0f}), "
              f"CPU {statistics.median(cpu_us[name]):.2f} us/record (all threads of this process)")
    print(f"confluent-kafka/aiokafka median of run ratios: {statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
