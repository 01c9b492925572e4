"""``kgate serve``: run a broker, its settings from a TOML file, ``--set`` and a few flags.

The flags are shorthands for settings (``--metadata`` is ``kgate.metadata``, ...), so
every way of configuring a broker ends in one ``Settings`` checked at start-up.
"""
import argparse
import asyncio
import gc
import sys

from kgate.broker_commands import supervisor
from kgate.gateway import logs
from kgate.gateway.config import ConfigError, Settings
from kgate.gateway.server import serve
from kgate.metadata.cluster import DuplicateBroker
from kgate.metadata.store import StoreUnavailable
from kgate.storage.missing_extra import MissingExtra

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
# The cyclic collector's young generation is collected once this many container objects are
# allocated (Python's default: 700). Every request allocates tasks, futures, coroutines and
# messages that die young, nearly all freed by reference counting; at the default, collections
# took a tenth of the broker's CPU on small produce requests (bench/PROFILE.md, "The cyclic
# collector").
YOUNG_COLLECTION_EVERY = 20_000


def add_parser(commands) -> None:
    run = commands.add_parser("serve", help="run a broker",
                              description="Run a broker (single node, embedded metadata, file ledgers by default).")
    run.add_argument("--listen", action="append", metavar="[PROTOCOL://]HOST:PORT",
                     help="address to listen on, PLAINTEXT unless PROTOCOL is SASL_PLAINTEXT, SSL or SASL_SSL "
                          "(repeatable; port 0 picks a free port; default 127.0.0.1:9092)")
    run.add_argument("--data-dir", metavar="DIR", help="where metadata and ledgers live (default ./kgate-data)")
    run.add_argument("--config", metavar="FILE", help="TOML file of settings")
    run.add_argument("--set", action="append", metavar="KEY=VALUE", dest="overrides", default=[],
                     help="override one setting (repeatable)")
    run.add_argument("--metrics", metavar="HOST:PORT",
                     help="serve Prometheus metrics at http://HOST:PORT/metrics (kgate.metrics.listener)")
    run.add_argument("--metadata", metavar="embedded|zookeeper://HOST:PORT[,...][/CHROOT]",
                     help="the metadata store (kgate.metadata; default embedded, in the data directory)")
    run.add_argument("--storage", metavar="file:DIR|s3://BUCKET/PREFIX?endpoint=URL&region=REGION",
                     help="the ledger store, shared by every broker of a cluster (kgate.storage; "
                          "default file:<data-dir>/ledgers); S3 credentials come from the AWS environment")
    run.add_argument("--wal", metavar="s3|file:DIR",
                     help="with s3:// storage, where entries are durable before they are acknowledged (kgate.wal; "
                          "default s3: in WAL objects, at most a PUT per quarter commit interval, no local disk; "
                          "file:DIR: fsync'd in DIR, uploaded in the background)")
    run.add_argument("--broker-id", metavar="N", help="this broker's id (broker.id; default derived once, then kept)")
    run.add_argument("--advertise", metavar="HOST:PORT",
                     help="the address clients are told to use (advertised.listeners)")
    run.add_argument("--workers", metavar="N|auto", type=supervisor.worker_count, default=1,
                     help="broker processes on this host, one cluster over the embedded metadata store "
                          "(auto: one per core; default 1). Worker i is broker broker.id+i on each listener's "
                          "port + i; a worker that dies is started again")
    run.add_argument("--worker", type=int, help=argparse.SUPPRESS)  # set by the supervisor: the worker's index


def run(args) -> int:
    try:
        flags = {"kgate.metrics.listener": args.metrics, "kgate.metadata": args.metadata,
                 "kgate.storage": args.storage, "kgate.wal": args.wal, "broker.id": args.broker_id,
                 "advertised.listeners": args.advertise}
        overrides = args.overrides + [f"{key}={value}" for key, value in flags.items() if value is not None]
        settings = Settings.load(args.listen, args.data_dir, args.config, overrides)
        if args.workers > 1 and settings["kgate.metadata"] != "embedded":
            raise ConfigError("--workers runs one cluster over the embedded metadata store; with "
                              f"kgate.metadata {settings['kgate.metadata']} start each broker by itself")
    except ConfigError as exc:
        print(f"kgate: {exc}", file=sys.stderr)
        return EXIT_USAGE
    logs.configure(settings["log.level"], args.worker)
    _tune_collector()
    try:
        if args.workers > 1:
            return asyncio.run(supervisor.supervise(supervisor.WorkerPlan(_worker_command(args, overrides), settings,
                                                                    args.workers)))
        asyncio.run(serve(settings))
    except (ConfigError, DuplicateBroker, MissingExtra) as exc:
        print(f"kgate: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, StoreUnavailable) as exc:
        print(f"kgate: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _tune_collector() -> None:
    """A server's collector: the objects of start-up (modules, classes, message schemas) frozen
    out of every later collection, young collections rarer."""
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, 20, 100)


def _worker_command(args, overrides: list[str]) -> tuple[str, ...]:
    """The ``serve`` command line every worker shares: this one's settings, without the
    listeners and the worker count, which the supervisor gives each worker."""
    command = [sys.executable, "-m", "kgate", "serve"]
    if args.data_dir:
        command += ["--data-dir", args.data_dir]
    if args.config:
        command += ["--config", args.config]
    for override in overrides:
        command += ["--set", override]
    return tuple(command)
