"""``kgate process --app module:app``: run a kgate.processing application.

The application (a ``Processor`` with its handler, or a function of no arguments that
returns one) names its own cluster, group and topics, so this command takes no
connection options: it imports the application, serves its metrics if asked, and runs
it until SIGTERM or Ctrl-C, which commit what is finished before the process exits.
A wrong ``--app`` is a usage error (exit 2); processing that cannot go on without losing
a record (``ProcessingError``) exits 1 with its message.
"""
import importlib
import inspect
import logging
import sys

from kgate.processing import ProcessingError, Processor

from . import client_options as options
from .client_options import Failed, UsageError


def add_parser(commands) -> None:
    process = commands.add_parser(
        "process", help="run a processing application (kgate.processing) until stopped",
        description="Import MODULE:APP (a kgate.processing.Processor, or a function returning one) "
                    "and run it; SIGTERM or Ctrl-C stops it after committing what is finished.")
    process.add_argument("--app", required=True, metavar="MODULE:APP",
                         help="the module to import and the Processor in it (or a function returning one)")
    process.add_argument("--metrics", metavar="HOST:PORT",
                         help="serve Prometheus metrics at http://HOST:PORT/metrics (port 0 picks a free one)")


def run(args) -> int:
    return options.run(_process, args, "kgate process")


def load(spec: str) -> Processor:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise UsageError(f"--app {spec!r}: expected MODULE:APP")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise UsageError(f"--app {spec!r}: cannot import {module_name}: {error}") from None
    app = getattr(module, attribute, None)
    if app is None:
        raise UsageError(f"--app {spec!r}: {module_name} has no {attribute}")
    if not isinstance(app, Processor) and callable(app) and _takes_no_arguments(app):
        app = app()
    if not isinstance(app, Processor):
        raise UsageError(f"--app {spec!r}: {attribute} is a {type(app).__name__}, not a kgate.processing.Processor")
    return app


def _takes_no_arguments(function) -> bool:
    try:
        inspect.signature(function).bind()
    except (TypeError, ValueError):
        return False
    return True


def _serve_metrics(app: Processor, address: str) -> None:
    from prometheus_client import start_http_server

    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"--metrics {address!r}: expected HOST:PORT")
    try:
        server, _thread = start_http_server(int(port), host, registry=app.metrics.registry)
    except OSError as error:
        raise UsageError(f"--metrics {address}: {error}") from None
    print(f"kgate process metrics on http://{host}:{server.server_port}/metrics", flush=True)


def _process(args) -> None:
    app = load(args.app)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.metrics:
        _serve_metrics(app, args.metrics)
    try:
        app.run()
    except ProcessingError as error:
        raise Failed(str(error)) from None
    print("kgate process: stopped", file=sys.stderr)
