"""``kgate console``: serve the web console for the cluster at ``--bootstrap-server``
(``--bootstrap`` for short) until SIGTERM or Ctrl-C."""
import signal
import sys

from kgate.cli import client_options as options
from kgate.cli.client_options import UsageError

from . import logins
from .metrics_history import MetricsHistory
from .web_server import ConsoleServer

DEFAULT_LISTEN = "127.0.0.1:8080"


def add_parser(commands) -> None:
    console = options.subcommand(
        commands, "console", "a web console for any Kafka cluster", in_family=False,
        description="Serve a web console for the cluster: brokers, topics with partitions, sizes and configs, "
                    "records of a partition, consumer groups with members and lag, ACLs. Read-only unless "
                    "--allow-writes. It speaks the Kafka protocol, so it works against any Kafka cluster, and "
                    "shows more of a kgate cluster.")
    console.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                         help=f"where the console serves HTTP (default {DEFAULT_LISTEN}; port 0 picks a free one)")
    console.add_argument("--allow-writes", action="store_true",
                         help="allow resetting a group's offsets (default: read-only)")
    console.add_argument("--metrics", action="append", metavar="URL", default=[],
                         help="a broker's Prometheus endpoint, such as http://127.0.0.1:9100/metrics (repeatable): "
                              "charts of throughput and lag over the last hour")


def run(args) -> int:
    return options.run(_serve, args, "kgate console")


def _serve(args) -> None:
    host, sep, port = args.listen.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise UsageError(f"--listen {args.listen!r} must be HOST:PORT")
    login = logins.for_arguments(args)
    if not login.asks_credentials:
        options.kafka_config(args)  # bad connection options are a usage error now, not a page later
    history = MetricsHistory(args.metrics).start()
    try:
        server = ConsoleServer((host.strip("[]"), int(port)), login, args.bootstrap_server, history,
                               args.allow_writes)
    except OSError as exc:
        raise UsageError(f"--listen {args.listen}: {exc.strerror}") from None
    signal.signal(signal.SIGTERM, _interrupt)
    bound_host, bound_port = server.socket.getsockname()[:2]  # an IP socket's name: (str, int)
    mode = "read-write" if args.allow_writes else "read-only"
    who = ", each person logs in with SASL" if login.asks_credentials else ""
    print(f"kgate console on http://{bound_host}:{bound_port} for {args.bootstrap_server} ({mode}{who})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        history.stop()
        login.close()
    sys.stdout.flush()


def _interrupt(*_) -> None:
    """SIGTERM stops the console as Ctrl-C does: serve_forever runs in this thread, so
    server.shutdown() from here would wait for itself."""
    raise KeyboardInterrupt
