"""The Prometheus endpoint: ``/metrics`` and nothing else, optionally behind HTTP basic auth.

prometheus-client's own server answers 200 with the metrics on any path and asks no
credentials; this one answers 404 anywhere but ``/metrics`` and, when
``kgate.metrics.basic.auth.user`` is set, 401 without that user and the password held
in ``kgate.metrics.basic.auth.password.file`` (a file, so the password shows neither in
the command line nor in DescribeConfigs). Basic auth sends the password in the clear:
bind the endpoint to a private address, or put TLS in front of it.
"""
import base64
import hmac
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from .config import ConfigError

log = logging.getLogger(__name__)

PATH = "/metrics"


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


def serve(registry: CollectorRegistry, host: str, port: int, credentials: tuple[str, str] | None) -> int:
    """Start the endpoint in a daemon thread; returns the port it bound (0 picks a free one)."""
    expected = None
    if credentials is not None:
        expected = b"Basic " + base64.b64encode(":".join(credentials).encode())

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.partition("?")[0] != PATH:
                self._answer(404, b"not found; metrics are at /metrics\n", "text/plain; charset=utf-8")
            elif expected is not None and not hmac.compare_digest(
                    self.headers.get("Authorization", "").encode(), expected):
                self._answer(401, b"unauthorized\n", "text/plain; charset=utf-8",
                             {"WWW-Authenticate": 'Basic realm="kgate metrics"'})
            else:
                self._answer(200, generate_latest(registry), CONTENT_TYPE_LATEST)

        def _answer(self, status: int, body: bytes, content_type: str, headers: dict | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args) -> None:
            log.debug("metrics endpoint: " + format, *args)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics-endpoint", daemon=True).start()
    return server.server_address[1]
