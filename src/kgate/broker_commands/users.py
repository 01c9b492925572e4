"""``kgate users add|list|delete``: SASL users, managed in the metadata store directly.

Kafka has no request a 0.9-era tool could use for this, so like Kafka's own
``kafka-configs.sh --zookeeper`` the command writes the metadata store: the embedded
one in a data directory, or a cluster's ZooKeeper (``--metadata``). Every broker
reads credentials at every login, so changes take effect at once cluster-wide.
"""
import argparse
import asyncio
import json
import sys

from kgate.gateway.sasl.credentials import MAX_ITERATIONS, MIN_ITERATIONS, CredentialStore, ScramCredential
from kgate.metadata.store import StoreUnavailable
from kgate.protocol.security import SCRAM_MECHANISMS

from .cluster_metadata import NoCluster, cluster_metadata

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE = 0, 1, 2


def _store_options(parser, defaults: bool) -> None:
    """Where the users live. Accepted before the action and after it: the ``users``
    parser holds the defaults, each action's parser the same options without."""
    def default(value):
        return value if defaults else argparse.SUPPRESS

    parser.add_argument("--data-dir", metavar="DIR", default=default("kgate-data"),
                        help="the broker's data directory (embedded metadata; default ./kgate-data)")
    parser.add_argument("--metadata", metavar="embedded|zookeeper://HOST:PORT[,...][/CHROOT]",
                        default=default("embedded"),
                        help="the metadata store: the data directory's (default) or a cluster's ZooKeeper")
    parser.add_argument("--create", action="store_true", default=default(False),
                        help="make the store a kgate cluster's if it is not one yet (users added before "
                             "the first broker starts); without it such a store is refused, exit 2")


def add_parser(commands) -> None:
    users = commands.add_parser("users", help="manage SASL users (PLAIN and SCRAM)",
                                description="Manage SASL users. Credentials are stored salted (SCRAM), never in clear.")
    _store_options(users, defaults=True)
    actions = users.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="add a user or change its password")
    add.add_argument("name")
    add.add_argument("--password", help="the password (default: read one line from standard input)")
    add.add_argument("--mechanism", action="append", choices=SCRAM_MECHANISMS,
                     help="SCRAM mechanism to store a credential for (repeatable; default both; "
                          "PLAIN logins are checked against either)")
    add.add_argument("--iterations", type=int, default=MIN_ITERATIONS,
                     help=f"SCRAM iterations, {MIN_ITERATIONS}-{MAX_ITERATIONS} (default {MIN_ITERATIONS})")
    listing = actions.add_parser("list", help="list users and their mechanisms")
    listing.add_argument("--output", choices=("table", "json"), default="table",
                         help="table: one user per line with its mechanisms; json: one document (default table)")
    delete = actions.add_parser("delete", help="delete a user")
    delete.add_argument("name")
    for action in (add, listing, delete):
        _store_options(action, defaults=False)


def run(args) -> int:
    return asyncio.run(_run(args))


def _store_name(args) -> str:
    return args.metadata if args.metadata != "embedded" else f"data directory {args.data_dir}"


async def _run(args) -> int:
    if args.action == "add":
        problem = _check_add(args)
        if problem:
            print(f"kgate users add: {problem}", file=sys.stderr)
            return EXIT_USAGE
    try:
        async with cluster_metadata(args.metadata, args.data_dir, args.create) as metadata:
            return await _act(args, CredentialStore(metadata))
    except NoCluster:
        return _not_a_cluster(args)
    except StoreUnavailable as exc:
        print(f"kgate users: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND


def _not_a_cluster(args) -> int:
    """A mistyped --data-dir or chroot would otherwise get users no broker ever reads."""
    print(f"kgate users: {_store_name(args)} holds no kgate cluster (start a broker on it first, "
          f"or pass --create to make it one)", file=sys.stderr)
    return EXIT_USAGE


async def _act(args, credentials: CredentialStore) -> int:
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
