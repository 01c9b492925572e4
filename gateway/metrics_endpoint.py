"""The Prometheus endpoint: ``/metrics`` and nothing else, optionally behind HTTP basic auth.

prometheus-client's own server answers 200 with the metrics on any path and asks no
credentials; this one answers 404 anywhere but ``/metrics`` and, when
``kgate.metrics.basic.auth.user`` is set, 401 without that user and the password held
in ``kgate.metrics.basic.auth.password.file`` (a file, so the password shows neither in
the command line nor in DescribeConfigs). Basic auth sends the password in the clear:
bind the endpoint to a private address, or put TLS in front of it.

It is served from the broker's event loop, one short exchange per connection: a thread
per connection with no timeout let 1,000 idle connections hold 1,000 threads. A request
head must arrive whole within ``READ_TIMEOUT`` seconds and ``MAX_HEAD`` bytes; past
``MAX_CONNECTIONS`` open at once, the oldest is closed, so idle connections cost no
thread and never pile up, and a scraper that connects still gets its answer.
"""
import asyncio
import base64
import hmac
import logging
from collections import OrderedDict

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from .config import ConfigError

log = logging.getLogger(__name__)

PATH = "/metrics"
READ_TIMEOUT = 10.0
MAX_HEAD = 8192
MAX_CONNECTIONS = 64
_TEXT = "text/plain; charset=utf-8"
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed"}


def read_password(path: str) -> str:
    """The password file's first line; a missing or empty file stops start-up naming the setting."""
    try:
        with open(path, encoding="utf-8") as fh:
            password = fh.readline().rstrip("\r\n")
    except OSError as exc:
        raise ConfigError(f"kgate.metrics.basic.auth.password.file {path}: {exc.strerror}") from None
    if not password:
        raise ConfigError(f"kgate.metrics.basic.auth.password.file {path}: the file holds no password")
    return password


class MetricsEndpoint:
    def __init__(self, registry: CollectorRegistry, credentials: tuple[str, str] | None):
        self._registry = registry
        self._expected = None if credentials is None else b"Basic " + base64.b64encode(":".join(credentials).encode())
        self._open: OrderedDict[asyncio.StreamWriter, None] = OrderedDict()

    async def start(self, host: str, port: int) -> asyncio.Server:
        """Listen on ``host:port`` (0 picks a free port) from the running loop."""
        return await asyncio.start_server(self._exchange, host, port, limit=MAX_HEAD, reuse_address=True)

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._open) >= MAX_CONNECTIONS:
            oldest, _ = self._open.popitem(last=False)
            oldest.transport.abort()
        self._open[writer] = None
        try:
            async with asyncio.timeout(READ_TIMEOUT):
                head = await reader.readuntil(b"\r\n\r\n")
            status, body, content_type, headers = self.answer(head)
            writer.write(_response(status, body, content_type, headers))
            writer.close()  # once what is buffered is sent
            async with asyncio.timeout(READ_TIMEOUT):
                await writer.wait_closed()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError) as exc:
            log.debug("metrics endpoint: connection dropped: %r", exc)
        finally:
            self._open.pop(writer, None)
            writer.transport.abort()  # a no-op once closed; else what is left is dropped

    def answer(self, head: bytes) -> tuple[int, bytes, str, dict]:
        """(status, body, content type, extra headers) for a request head."""
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            return 400, b"bad request\n", _TEXT, {}
        method, target, _version = parts
        if method != "GET":
            return 405, b"only GET\n", _TEXT, {"Allow": "GET"}
        if target.partition("?")[0] != PATH:
            return 404, b"not found; metrics are at /metrics\n", _TEXT, {}
        if self._expected is not None:
            given = next((value.strip() for name, _, value in (line.partition(":") for line in lines[1:])
                          if name.strip().lower() == "authorization"), "")
            if not hmac.compare_digest(given.encode("latin-1"), self._expected):
                return 401, b"unauthorized\n", _TEXT, {"WWW-Authenticate": 'Basic realm="kgate metrics"'}
        return 200, generate_latest(self._registry), CONTENT_TYPE_LATEST, {}


def _response(status: int, body: bytes, content_type: str, headers: dict) -> bytes:
    head = [f"HTTP/1.1 {status} {_REASONS[status]}", f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}", "Connection: close"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
