"""The S3 bucket the object ledger store keeps its objects in, through obstore.

obstore (Rust's object_store under asyncio) was chosen over aiobotocore by measurement
(the figures are in pyproject.toml beside the ``s3`` extra). Credentials come only from
the standard AWS environment chain obstore reads (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
AWS_SESSION_TOKEN, web identity, container and instance credentials), never from a flag.

Every request is counted (calls and bytes per kind), for the broker's metrics and the
benchmark's PUTs and GETs per GB.
"""
import datetime
from collections import Counter

from prometheus_client import Histogram

from ..missing_extra import MissingExtra
from .bucket_location import BucketLocation

try:
    import obstore
    from obstore.exceptions import AlreadyExistsError, PreconditionError
    from obstore.exceptions import BaseError as ObjectStoreError
    from obstore.store import S3Store
except ModuleNotFoundError as missing:
    raise MissingExtra("s3:// storage", "s3", missing.name) from None

__all__ = ["ObjectClient", "ObjectExists", "ObjectStoreError"]

# 5 ms to 30 s: a loopback engine answers in milliseconds, a retried PUT gives up after 10 s.
PUT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class ObjectExists(Exception):
    """A conditional PUT (If-None-Match: *) found the key taken."""


class ObjectClient:
    def __init__(self, location: BucketLocation, retry_seconds: float = 10.0):
        config: dict = {"region": location.region}
        if location.endpoint is not None:
            config["endpoint"] = location.endpoint
            # S3-compatible engines (SeaweedFS, Ceph RGW, MinIO) serve path-style URLs.
            config["virtual_hosted_style_request"] = False
        self._store = S3Store(
            location.bucket, prefix=location.prefix or None,
            client_options={"timeout": datetime.timedelta(seconds=30), "connect_timeout": datetime.timedelta(seconds=5),
                            "allow_http": (location.endpoint or "").startswith("http://")},
            retry_config={"max_retries": 10, "retry_timeout": datetime.timedelta(seconds=retry_seconds)},
            **config)
        self.calls: Counter[str] = Counter()
        self.bytes: Counter[str] = Counter()
        # Unregistered: the store's collector reports it beside the counts.
        self.put_latency = Histogram("kgate_object_put_seconds", "Time of each object PUT, retries included "
                                     "(acks on the S3 WAL wait for one)", buckets=PUT_BUCKETS, registry=None)

    def _count(self, kind: str, size: int = 0) -> None:
        self.calls[kind] += 1
        self.bytes[kind] += size

    async def put(self, key: str, data) -> None:
        with self.put_latency.time():
            await obstore.put_async(self._store, key, data, use_multipart=False)
        self._count("put", len(data))

    async def create(self, key: str, data) -> None:
        """PUT with If-None-Match: *; ObjectExists when the key is taken by other bytes. Never
        in the hot path: engines may back off on contended conditional writes (SeaweedFS waits
        ~1 s).

        The key holding these very bytes is this create's own success: a PUT retried after its
        answer was lost finds its first try. Taken for a loss, it made a compaction delete the
        data objects its own compacted piece names. Every created object here names its
        writer or its objects, so another writer's bytes are never the same."""
        try:
            await obstore.put_async(self._store, key, data, mode="create", use_multipart=False)
        except (AlreadyExistsError, PreconditionError) as exc:
            self._count("put")
            if await self.get(key) == bytes(data):
                return
            raise ObjectExists(key) from exc
        self._count("put", len(data))

    async def get(self, key: str) -> bytes | None:
        """The whole object; None when there is none."""
        try:
            result = await obstore.get_async(self._store, key)
            data = bytes(await result.bytes_async())
        except FileNotFoundError:
            self._count("get")
            return None
        self._count("get", len(data))
        return data

    async def get_range(self, key: str, start: int, end: int) -> memoryview:
        data = memoryview(await obstore.get_range_async(self._store, key, start=start, end=end))
        self._count("get", len(data))
        return data

    async def get_tail(self, key: str, size: int) -> memoryview:
        """The last ``size`` bytes (fewer if the object is smaller)."""
        result = await obstore.get_async(self._store, key, options={"range": {"suffix": size}})
        data = memoryview(await result.bytes_async())
        self._count("get", len(data))
        return data

    async def keys(self, prefix: str, after: str | None = None) -> list[str]:
        """Keys under ``prefix``, in key order, past ``after`` when given."""
        keys: list[str] = []
        async for chunk in obstore.list(self._store, prefix, offset=after, chunk_size=1000):
            keys.extend(meta["path"] for meta in chunk)
        self._count("list")
        return sorted(keys)

    async def ages(self, prefix: str) -> dict[str, float]:
        """Every key under ``prefix`` with how long ago (seconds, by this host's clock) it was written."""
        now = datetime.datetime.now(datetime.UTC)
        ages: dict[str, float] = {}
        async for chunk in obstore.list(self._store, prefix, chunk_size=1000):
            for meta in chunk:
                ages[meta["path"]] = (now - meta["last_modified"]).total_seconds()
        self._count("list")
        return ages

    async def delete(self, keys: list[str]) -> None:
        if keys:
            await obstore.delete_async(self._store, keys)
            self._count("delete", 0)
