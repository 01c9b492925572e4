"""The asyncio server: listeners, start-up, and clean shutdown on SIGTERM.

Shutdown stops accepting, lets every received request finish (in-flight produces are
answered once durable), then seals each partition's open ledger and closes the stores.
"""
import asyncio
import logging
import signal
import ssl
import sys

from . import metrics_endpoint
from .broker import open_broker
from .config import ConfigError
from .connection import KafkaConnection

log = logging.getLogger(__name__)
DRAIN_SECONDS = 10


def _tls_context(settings) -> ssl.SSLContext:
    """The server side of TLS listeners: the certificate chain and key from one PEM file."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    path = settings["ssl.keystore.location"]
    try:
        context.load_cert_chain(path, password=settings["ssl.key.password"] or None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"ssl.keystore.location {path}: cannot load certificate and key ({exc})") from None
    return context


def _announce(line: str) -> None:
    """A line on stdout in one write: the workers of ``serve --workers`` share their supervisor's
    stdout, and an unbuffered one (PYTHONUNBUFFERED, which test runners set) writes a print's
    text and its newline apart, so two workers starting together gave a reader two lines run
    into one and an empty line."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def serve(settings) -> None:
    """Bind the listeners, join the cluster, then accept clients, announcing each listener on stdout.

    Listeners are bound first so the broker registers the ports it really has (port 0
    picks one), and accept only once the broker has claimed its partitions.
    """
    user = settings["kgate.metrics.basic.auth.user"]
    metrics_credentials = (user, metrics_endpoint.read_password(settings["kgate.metrics.basic.auth.password.file"])) \
        if user else None
    broker = await open_broker(settings)
    loop = asyncio.get_running_loop()
    # Installed before anything is announced: a SIGTERM that follows the ready line at
    # once must take the clean path (seal the ledgers), not the default exit.
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    servers = []
    tls = _tls_context(settings) if any(listener.tls for listener in settings.listeners) else None
    try:
        for listener in settings.listeners:
            server = await loop.create_server(
                lambda bound=listener: KafkaConnection(broker, bound), listener.host, listener.port,
                reuse_address=True, ssl=tls if listener.tls else None, start_serving=False)
            listener.port = server.sockets[0].getsockname()[1]
            servers.append(server)
        await broker.start()
        for listener, server in zip(settings.listeners, servers):
            await server.start_serving()
            host, port = server.sockets[0].getsockname()[:2]
            scheme = "" if listener.security_protocol == "PLAINTEXT" else f"{listener.security_protocol}://"
            _announce(f"kgate listening on {scheme}{host}:{port}")
        metrics_at = broker.settings["kgate.metrics.listener"]
        if metrics_at:
            host, _, port = metrics_at.rpartition(":")
            endpoint = metrics_endpoint.MetricsEndpoint(broker.metrics.registry, metrics_credentials)
            metrics_server = await endpoint.start(host, int(port))
            servers.append(metrics_server)
            port = metrics_server.sockets[0].getsockname()[1]
            _announce(f"kgate metrics on http://{host}:{port}/metrics")
        await stop.wait()
        log.info("shutting down")
    finally:
        for server in servers:
            server.close()
        connections = list(broker.connections)
        if connections:
            await asyncio.wait([asyncio.ensure_future(c.drain()) for c in connections], timeout=DRAIN_SECONDS)
        for connection in connections:
            connection.close()
        await broker.close()
        log.info("stopped")
