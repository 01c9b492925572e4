"""Which async S3 client the object store uses: obstore against aiobotocore, measured.

Against a SeaweedFS started here (scripts/seaweedfs), each client PUTs objects of 1 MiB
and 4 MiB and reads them back with 1 MiB range GETs, several concurrent requests at a
time as the store's WAL uploads and read-ahead do. Printed per client and operation:
MB/s and the process's CPU seconds per GB (obstore works on threads of its own, so
process CPU time, not the loop's, is the fair measure), medians of ``--runs`` runs, and
aiobotocore's figures as a ratio to obstore's measured in the same run.

    .venv/bin/python -m bench.s3_clients [--runs 5] [--mib 64]
"""
import argparse
import asyncio
import os
import statistics
import time

from tests.support.seaweedfs import SeaweedFS

BUCKET = "bench"
CONCURRENCY = 4


class Obstore:
    name = "obstore"

    async def __aenter__(self):
        from obstore.store import S3Store
        self.store = S3Store(BUCKET, endpoint=self.endpoint, region="us-east-1",
                             client_options={"allow_http": True})
        return self

    async def __aexit__(self, *exc):
        return False

    async def put(self, key, data):
        import obstore
        await obstore.put_async(self.store, key, data, use_multipart=False)

    async def get_range(self, key, start, end):
        import obstore
        return await obstore.get_range_async(self.store, key, start=start, end=end)


class Aiobotocore:
    name = "aiobotocore"

    async def __aenter__(self):
        from aiobotocore.session import get_session
        from botocore.config import Config
        # The cheapest settings botocore allows: no default checksums (they cost ~5 ms per 4 MiB).
        config = Config(request_checksum_calculation="when_required", response_checksum_validation="when_required",
                        max_pool_connections=CONCURRENCY * 2, s3={"payload_signing_enabled": False})
        self._client = get_session().create_client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                                                   config=config)
        self.client = await self._client.__aenter__()
        return self

    async def __aexit__(self, *exc):
        await self._client.__aexit__(*exc)
        return False

    async def put(self, key, data):
        await self.client.put_object(Bucket=BUCKET, Key=key, Body=data)

    async def get_range(self, key, start, end):
        response = await self.client.get_object(Bucket=BUCKET, Key=key, Range=f"bytes={start}-{end - 1}")
        async with response["Body"] as body:
            return await body.read()


async def _measure(client, size: int, total: int, run: int) -> dict[str, tuple[float, float]]:
    count = max(1, total // size)
    data = os.urandom(size)
    keys = [f"{client.name}/{run}/{size}/{i}" for i in range(count)]
    gate = asyncio.Semaphore(CONCURRENCY)

    async def put(key):
        async with gate:
            await client.put(key, data)

    async def get(key, start):
        async with gate:
            got = await client.get_range(key, start, start + (1 << 20))
            assert len(got) == 1 << 20

    figures = {}
    for op, jobs in (("PUT", lambda: [put(k) for k in keys]),
                     ("range GET", lambda: [get(k, s) for k in keys for s in range(0, size, 1 << 20)])):
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*jobs())
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        moved = count * size
        figures[op] = (moved / wall / 1e6, cpu / (moved / 1e9))
    return figures


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--mib", type=int, default=64, help="MiB moved per operation, size and run")
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    with SeaweedFS.started() as weed:
        weed.make_bucket(BUCKET)
        results: dict[tuple[str, int, str], list[tuple[float, float]]] = {}
        for run in range(args.runs):
            for cls in (Obstore, Aiobotocore):
                cls.endpoint = weed.endpoint
                async with cls() as client:
                    for size in (1 << 20, 4 << 20):
                        for op, fig in (await _measure(client, size, args.mib << 20, run)).items():
                            results.setdefault((cls.name, size, op), []).append(fig)
    print(f"{'client':<12} {'object':>6} {'op':<10} {'MB/s':>8} {'CPU s/GB':>9} {'MB/s ratio':>10} {'CPU ratio':>9}")
    for (name, size, op), figs in results.items():
        rate = statistics.median(f[0] for f in figs)
        cpu = statistics.median(f[1] for f in figs)
        base = results[("obstore", size, op)]
        # Ratios run by run against obstore's figure of the same run, then the median.
        rate_ratio = statistics.median(f[0] / b[0] for f, b in zip(figs, base))
        cpu_ratio = statistics.median(f[1] / b[1] for f, b in zip(figs, base))
        print(f"{name:<12} {size >> 20:>4}Mi {op:<10} {rate:>8.0f} {cpu:>9.2f} {rate_ratio:>10.2f} {cpu_ratio:>9.2f}")


if __name__ == "__main__":
    asyncio.run(main())
