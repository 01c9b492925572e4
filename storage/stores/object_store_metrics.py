"""What the object ledger store reports to Prometheus: requests and bytes by kind, WAL
object sizes, how far the WAL lags behind what it was given, and the cache hit ratio."""
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily


class ObjectStoreCollector:
    def __init__(self, store):
        self._store = store

    def collect(self):
        store = self._store
        client = store.client
        requests = CounterMetricFamily("kgate_object_requests", "Object store requests by kind", labels=["kind"])
        moved = CounterMetricFamily("kgate_object_bytes", "Bytes sent (put) and received (get)", labels=["kind"])
        for kind in ("put", "get", "list", "delete"):
            requests.add_metric([kind], client.calls[kind])
            moved.add_metric([kind], client.bytes[kind])
        yield requests
        yield moved
        yield from client.put_latency.collect()
        yield CounterMetricFamily("kgate_wal_objects", "WAL objects written", value=store.objects.objects)
        yield CounterMetricFamily("kgate_wal_object_bytes", "Bytes of WAL objects written (over kgate_wal_objects: "
                                  "the mean object size)", value=store.objects.bytes)
        yield CounterMetricFamily("kgate_objects_collected", "Objects deleted because no live ledger needed them "
                                  "any more", value=store.collector.objects_collected)
        ledgers, size = store.compaction_backlog()
        backlog = GaugeMetricFamily("kgate_compaction_backlog", "Sealed ledgers of this broker whose entries "
                                    "are still in WAL objects, and their bytes", labels=["unit"])
        backlog.add_metric(["ledgers"], ledgers)
        backlog.add_metric(["bytes"], size)
        yield backlog
        yield CounterMetricFamily("kgate_compacted_ledgers", "Ledgers rewritten into objects of their own",
                                  value=store.compactor.ledgers_compacted)
        yield CounterMetricFamily("kgate_compacted_bytes", "Bytes of the objects compaction wrote",
                                  value=store.compactor.compacted_bytes)
        yield GaugeMetricFamily("kgate_wal_upload_lag_seconds", "Age of the oldest entry acknowledged or waiting "
                                "that is not yet in a WAL object", value=store.upload_lag())
        cache = store.cache
        lookups = cache.hits + cache.misses
        yield GaugeMetricFamily("kgate_object_cache_hit_ratio", "Reads served from memory over all reads of "
                                "object-stored runs", value=cache.hits / lookups if lookups else 0.0)
        held = GaugeMetricFamily("kgate_object_cache_bytes", "Bytes held by the cache, by pool", labels=["pool"])
        held.add_metric(["recent"], cache.recent.size)
        held.add_metric(["reads"], cache.reads.size)
        yield held
