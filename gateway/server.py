"""The asyncio server: listeners, start-up, and clean shutdown on SIGTERM.

Shutdown stops accepting, lets every received request finish (in-flight produces are
answered once durable), then seals each partition's open ledger and closes the stores.
"""
import asyncio
import logging
import signal

from .broker import Broker
from .connection import KafkaConnection

log = logging.getLogger(__name__)
DRAIN_SECONDS = 10


async def serve(broker: Broker, ready=print) -> None:
    await broker.start()
    loop = asyncio.get_running_loop()
    servers = []
    try:
        for listener in broker.settings.listeners:
            server = await loop.create_server(
                lambda l=listener: KafkaConnection(broker, l.host, l.port), listener.host, listener.port,
                reuse_address=True)
            host, port = server.sockets[0].getsockname()[:2]
            listener.port = port
            servers.append(server)
            ready(f"kgate listening on {host}:{port}", flush=True)
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
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
