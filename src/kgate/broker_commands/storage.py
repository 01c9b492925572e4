"""``kgate storage check``: an object store's bucket against what the metadata store lists.

It lists objects no live ledger is in (garbage a broker's collection would delete, or a
leak), orphans (objects live ledgers are in but none needs: a WAL object no index piece
names, a data object of a compaction that crashed before listing it) and objects a live
ledger's index names that are gone, and exits 1 if it finds any. ``--collect`` deletes the
first two kinds; orphans count only past ``--min-age``, so an object being uploaded or
compacted right now is never taken.
Which ledgers are live is in the metadata store (the managed ledgers' chain records), so
like ``kgate users`` the command lives with the broker, not with the Kafka-client
commands of kgate.cli, which may not read a metadata store.
"""
import asyncio
import sys

from kgate.gateway.chain_records import live_ledger_ids
from kgate.metadata.cluster import ClusterState
from kgate.metadata.store import StoreUnavailable
from kgate.storage.missing_extra import MissingExtra
from kgate.storage.stores.bucket_location import BucketLocation
from kgate.storage.stores.orphan_objects import ORPHAN_MIN_AGE

from .cluster_metadata import NoCluster, cluster_metadata

EXIT_CLEAN, EXIT_FOUND, EXIT_USAGE = 0, 1, 2  # 2: could not check (arguments, metadata, bucket)


def add_parser(commands) -> None:
    storage = commands.add_parser("storage", help="inspect a cluster's object storage",
                                  description="Inspect the object storage (s3://) a kgate cluster keeps its logs in.")
    actions = storage.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = actions.add_parser(
        "check", help="list unreferenced, orphaned and missing objects (exit 1 if any); --collect deletes the "
                      "first two kinds",
        description="Compare the bucket with the ledgers the metadata store lists. Exit 0: nothing found (or "
                    "everything found collected); 1: unreferenced, orphaned, missing or damaged objects (listed); "
                    "2: bad arguments or no cluster.")
    check.add_argument("--storage", required=True, metavar="s3://BUCKET/PREFIX?endpoint=URL&region=REGION",
                       help="the brokers' --storage (credentials from the standard AWS environment chain)")
    check.add_argument("--metadata", metavar="embedded|zookeeper://HOST:PORT[,...][/CHROOT]", default="embedded",
                       help="the brokers' metadata store (default: the embedded one in --data-dir)")
    check.add_argument("--data-dir", metavar="DIR", default="kgate-data",
                       help="the broker's data directory (embedded metadata; default ./kgate-data)")
    check.add_argument("--min-age", metavar="SECONDS", type=float, default=ORPHAN_MIN_AGE,
                       help="an object no index names is an orphan only once this old (default %(default)s: "
                            "far longer than an upload or a compaction takes)")
    check.add_argument("--collect", action="store_true",
                       help="delete the unreferenced and orphaned objects found")


def run(args) -> int:
    return asyncio.run(_check(args))


async def _check(args) -> int:
    try:
        location = BucketLocation.parse(args.storage)
        # Imported here, before the metadata store is opened: the S3 client is an optional
        # extra, and the other commands do without it.
        import kgate.storage.stores.object_client  # noqa: F401
    except ValueError as exc:
        print(f"kgate storage check: --storage {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MissingExtra as exc:
        print(f"kgate storage check: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        async with cluster_metadata(args.metadata, args.data_dir) as metadata:
            survey = await _survey(location, ClusterState(metadata), args.min_age, args.collect)
    except NoCluster:
        where = f"data directory {args.data_dir}" if args.metadata == "embedded" else args.metadata
        print(f"kgate storage check: {where} holds no kgate cluster", file=sys.stderr)
        return EXIT_USAGE
    except StoreUnavailable as exc:
        print(f"kgate storage check: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if survey is None:
        return EXIT_USAGE
    for key in survey.unreferenced:
        print(f"unreferenced  {key}")
    for key in survey.orphaned:
        print(f"orphaned      {key}")
    for key, ledger_id in survey.missing:
        print(f"missing       {key}  (named by ledger {ledger_id})")
    for key, why in survey.damaged:
        print(f"damaged       {key}  ({why})")
    garbage = len(survey.unreferenced) + len(survey.orphaned)
    print(f"{len(survey.unreferenced)} unreferenced, {len(survey.orphaned)} orphaned, {len(survey.missing)} missing, "
          f"{len(survey.damaged)} damaged" + (f"; {garbage} collected" if args.collect else ""), file=sys.stderr)
    found = len(survey.missing) + len(survey.damaged) + (0 if args.collect else garbage)
    return EXIT_FOUND if found else EXIT_CLEAN


async def _survey(location: BucketLocation, cluster: ClusterState, min_age: float, collect: bool):
    """The bucket against the live ledgers (what it found deleted if ``collect``), or None
    (said why) if the bucket cannot be read."""
    from kgate.storage.stores.object_client import ObjectClient, ObjectStoreError
    from kgate.storage.stores.object_inventory import ObjectInventory

    client = ObjectClient(location)
    try:
        survey = await ObjectInventory(client).survey(lambda: live_ledger_ids(cluster), check_references=True,
                                                      orphan_age=min_age)
        if collect:
            await client.delete(survey.unreferenced + survey.orphaned)
        return survey
    except (ObjectStoreError, OSError) as exc:  # unreachable, refused, no such bucket
        print(f"kgate storage check: {location.bucket}: {str(exc).splitlines()[0]}", file=sys.stderr)
        return None
