"""Load reports: each broker's bytes in and out per second, per partition it serves.

Each broker writes its own ephemeral node every report interval, ``/loads/<broker id>``
= ``{"at": ms, "partitions": [[topic, partition, in, out], ...]}``, so a report ends
with its broker's session and the balancer reads the cluster's load from the store
without asking any broker. Rates, not counters: a report is small and means the same
whoever reads it.
"""
import json
from dataclasses import dataclass, field

from .store import MetadataStore, put

LOADS = "/loads"


@dataclass
class LoadReport:
    broker: int
    at_ms: int
    # (topic, partition) -> (bytes in per second, bytes out per second)
    partitions: dict[tuple[str, int], tuple[float, float]] = field(default_factory=dict)

    @property
    def bytes_in(self) -> float:
        return sum(rates[0] for rates in self.partitions.values())

    @property
    def bytes_out(self) -> float:
        return sum(rates[1] for rates in self.partitions.values())

    def encode(self) -> bytes:
        return json.dumps({"at": self.at_ms, "partitions": [[topic, index, round(rate_in, 1), round(rate_out, 1)]
                           for (topic, index), (rate_in, rate_out) in sorted(self.partitions.items())]}).encode()

    @classmethod
    def decode(cls, broker: int, data: bytes) -> "LoadReport":
        state = json.loads(data)
        return cls(broker, state["at"], {(topic, index): (rate_in, rate_out)
                                         for topic, index, rate_in, rate_out in state["partitions"]})


async def publish(store: MetadataStore, report: LoadReport) -> None:
    await put(store, f"{LOADS}/{report.broker}", report.encode(), ephemeral=True)


async def read_all(store: MetadataStore) -> dict[int, LoadReport]:
    """The live brokers' latest reports, by broker id."""
    reports = {}
    for name in await store.children(LOADS):
        node = await store.get(f"{LOADS}/{name}")
        if node is not None:
            reports[int(name)] = LoadReport.decode(int(name), node.data)
    return reports
