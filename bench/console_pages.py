"""How long the console's topic and group pages take on a cluster of 1,000 topics and 200 groups.

One kgate broker (a temporary directory, a free port) gets TOPICS single-partition topics
(CreateTopics in batches of 100) and GROUPS consumer groups, each with a committed offset
on one of the topics; one record is produced to every topic so each group has lag. A
console (``kgate console --listen 127.0.0.1:0``) serves the cluster; each page is fetched
once to warm the console's admin connection, then RUNS times. The table gives the median
and the slowest fetch of each page, and the page's size.

Run from the repository root:  .venv/bin/python -m bench.console_pages [--topics N] [--groups N] [--runs N]
"""
import argparse
import statistics
import tempfile
import time
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess
from tests.support.console_process import ConsoleProcess


def populate(bootstrap: str, topics: int, groups: int) -> list[str]:
    names = [f"bench-console-{index:04d}" for index in range(topics)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for start in range(0, topics, 100):
        for future in admin.create_topics([NewTopic(n, 1, 1) for n in names[start:start + 100]]).values():
            future.result(timeout=60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for name in names:
        producer.produce(name, value=b"x" * 100)
        producer.produce(name, value=b"y" * 100)
    producer.flush(120)
    for index in range(groups):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-group-{index:03d}"})
        consumer.commit(offsets=[TopicPartition(names[index % topics], 0, 1)], asynchronous=False)
        consumer.close()
    return names


def timed(url: str) -> tuple[float, int]:
    began = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        size = len(response.read())
    return time.perf_counter() - began, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data:
        broker = BrokerProcess(data, {"offsets.topic.num.partitions": 10}).start()
        console = None
        try:
            began = time.perf_counter()
            names = populate(broker.bootstrap, args.topics, args.groups)
            print(f"{args.topics} topics, {args.groups} groups populated in {time.perf_counter() - began:.1f} s")
            console = ConsoleProcess(broker.bootstrap).start()
            pages = {"topics": "/topics", "groups": "/groups", "one topic": f"/topics/{names[0]}",
                     "one group": "/groups/bench-group-000", "overview": "/"}
            print(f"{'page':<10} {'median s':>9} {'max s':>7} {'KiB':>7}")
            for name, path in pages.items():
                timed(console.url + path)
                figures = [timed(console.url + path) for _ in range(args.runs)]
                seconds = [s for s, _ in figures]
                print(f"{name:<10} {statistics.median(seconds):>9.3f} {max(seconds):>7.3f} "
                      f"{figures[-1][1] / 1024:>7.0f}")
        finally:
            if console is not None:
                console.stop()
            broker.stop()


if __name__ == "__main__":
    main()
