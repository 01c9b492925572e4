"""``kgate storage check``: an object store's bucket against what the metadata store lists.

It lists objects no live ledger needs (garbage a broker's collection would delete, or a
leak) and objects a live ledger's index names that are gone, and exits 1 if it finds any.
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

from .cluster_metadata import NoCluster, cluster_metadata

EXIT_CLEAN, EXIT_FOUND, EXIT_USAGE = 0, 1, 2  # 2: could not check (arguments, metadata, bucket)


def add_parser(commands) -> None:
    storage = commands.add_parser("storage", help="inspect a cluster's object storage",
                                  description="Inspect the object storage (s3://) a kgate cluster keeps its logs in.")
    actions = storage.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = actions.add_parser(
        "check", help="list objects no metadata references and objects referenced but missing (exit 1 if any)",
        description="Compare the bucket with the ledgers the metadata store lists. Exit 0: nothing found; "
                    "1: unreferenced, missing or damaged objects (listed); 2: bad arguments or no cluster.")
    check.add_argument("--storage", required=True, metavar="s3://BUCKET/PREFIX?endpoint=URL&region=REGION",
                       help="the brokers' --storage (credentials from the standard AWS environment chain)")
    check.add_argument("--metadata", metavar="embedded|zookeeper://HOST:PORT[,...][/CHROOT]", default="embedded",
                       help="the brokers' metadata store (default: the embedded one in --data-dir)")
    check.add_argument("--data-dir", metavar="DIR", default="kgate-data",
                       help="the broker's data directory (embedded metadata; default ./kgate-data)")


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
            survey = await _survey(location, ClusterState(metadata))
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
    for key, ledger_id in survey.missing:
        print(f"missing       {key}  (named by ledger {ledger_id})")
    for key, why in survey.damaged:
        print(f"damaged       {key}  ({why})")
    found = len(survey.unreferenced) + len(survey.missing) + len(survey.damaged)
    print(f"{len(survey.unreferenced)} unreferenced, {len(survey.missing)} missing, {len(survey.damaged)} damaged",
          file=sys.stderr)
    return EXIT_FOUND if found else EXIT_CLEAN


async def _survey(location: BucketLocation, cluster: ClusterState):
    """The bucket against the live ledgers, or None (said why) if the bucket cannot be read."""
    from kgate.storage.stores.object_client import ObjectClient, ObjectStoreError
    from kgate.storage.stores.object_inventory import ObjectInventory

    try:
        return await ObjectInventory(ObjectClient(location)).survey(lambda: live_ledger_ids(cluster),
                                                                     check_references=True)
    except (ObjectStoreError, OSError) as exc:  # unreachable, refused, no such bucket
        print(f"kgate storage check: {location.bucket}: {str(exc).splitlines()[0]}", file=sys.stderr)
        return None
