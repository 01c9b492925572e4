"""``kgate users add|list|delete``: SASL users, managed in the metadata store directly.

Kafka has no request a 0.9-era tool could use for this, so like Kafka's own
``kafka-configs.sh --zookeeper`` the command writes the metadata store: the embedded
one in a data directory, or a cluster's ZooKeeper (``--metadata``). Every broker
reads credentials at every login, so changes take effect at once cluster-wide.
"""
import asyncio
import json
import sys

from metadata.store import StoreUnavailable

from ..broker import open_metadata
from ..sasl import CredentialStore
from ..sasl.credentials import MAX_ITERATIONS, MIN_ITERATIONS, SCRAM_MECHANISMS, ScramCredential

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE = 0, 1, 2
ZOOKEEPER_SESSION_MS = 10_000


def add_parser(commands) -> None:
    users = commands.add_parser("users", help="manage SASL users (PLAIN and SCRAM)",
                                description="Manage SASL users. Credentials are stored salted (SCRAM), never in clear.")
    users.add_argument("--data-dir", metavar="DIR", default="kgate-data",
                       help="the broker's data directory (embedded metadata; default ./kgate-data)")
    users.add_argument("--metadata", metavar="embedded|zookeeper://HOST:PORT[,...][/CHROOT]", default="embedded",
                       help="the metadata store: the data directory's (default) or a cluster's ZooKeeper")
    actions = users.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", help="add a user or change its password")
    add.add_argument("name")
    add.add_argument("--password", help="the password (default: read one line from standard input)")
    add.add_argument("--mechanism", action="append", choices=SCRAM_MECHANISMS,
                     help="SCRAM mechanism to store a credential for (repeatable; default both; "
                          "PLAIN logins are checked against either)")
    add.add_argument("--iterations", type=int, default=MIN_ITERATIONS,
                     help=f"SCRAM iterations, {MIN_ITERATIONS}-{MAX_ITERATIONS} (default {MIN_ITERATIONS})")
    listing = actions.add_parser("list", help="list users and their mechanisms")
    listing.add_argument("--output", choices=("table", "json"), default="table")
    delete = actions.add_parser("delete", help="delete a user")
    delete.add_argument("name")


def run(args) -> int:
    return asyncio.run(_run(args))


async def _run(args) -> int:
    if args.action == "add":
        problem = _check_add(args)
        if problem:
            print(f"kgate users add: {problem}", file=sys.stderr)
            return EXIT_USAGE
    try:
        metadata = await open_metadata(args.metadata, args.data_dir, ZOOKEEPER_SESSION_MS, retry=False)
    except StoreUnavailable as exc:
        print(f"kgate users: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    credentials = CredentialStore(metadata)
    try:
        if args.action == "add":
            await credentials.put(args.name, {m: ScramCredential.derive(m, args.password, args.iterations)
                                              for m in args.mechanism or SCRAM_MECHANISMS})
            print(f"user {args.name!r} stored for {', '.join(args.mechanism or SCRAM_MECHANISMS)}")
        elif args.action == "delete":
            if not await credentials.delete(args.name):
                print(f"kgate users delete: no user {args.name!r}", file=sys.stderr)
                return EXIT_NOT_FOUND
            print(f"user {args.name!r} deleted")
        else:
            users = await credentials.users()
            if args.output == "json":
                print(json.dumps([{"name": name, "mechanisms": mechanisms} for name, mechanisms in users.items()]))
            else:
                width = max([len("USER")] + [len(name) for name in users])
                print(f"{'USER':<{width}}  MECHANISMS")
                for name, mechanisms in users.items():
                    print(f"{name:<{width}}  {','.join(mechanisms)}")
    finally:
        await metadata.close()
    return EXIT_OK


def _check_add(args) -> str | None:
    if not args.name:
        return "the user name must not be empty"
    if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
        return f"--iterations must be {MIN_ITERATIONS}-{MAX_ITERATIONS}"
    if args.password is None:
        args.password = sys.stdin.readline().rstrip("\n")
    if not args.password:
        return "the password must not be empty"
    return None
