"""A kgate broker as a child process, for tests and benchmarks.

It listens on 127.0.0.1 with a free port (read back from the ``kgate listening on``
line), keeps its data in a directory the caller owns, and is stopped by PID.
"""
import os
import selectors
import signal
import subprocess
import sys
import time

from . import warm_start

READY_PREFIX = "kgate listening on "
# Every log a broker of this test process has written to: a failing test's report shows the
# tails of those written during it (tests/conftest.py), since a CI run keeps nothing but its output.
LOG_PATHS: set[str] = set()
LOG_LINES_REPORTED = 40


def last_lines(path: str, count: int = LOG_LINES_REPORTED) -> str:
    """The last ``count`` lines of the log at ``path`` (read from its last 64 KiB)."""
    with open(path, "rb") as log:
        log.seek(max(0, os.path.getsize(path) - 64 * 1024))
        return "\n".join(log.read().decode(errors="replace").splitlines()[-count:])


def logs_written_since(start: float) -> dict[str, str]:
    """The last lines of each broker log changed since ``start`` (a time.time()), by path."""
    tails = {}
    for path in sorted(LOG_PATHS):
        try:
            if os.path.getmtime(path) < start:
                continue
            tails[path] = last_lines(path)
        except OSError:
            continue  # its directory went with its test
    return tails


def exited_error(name: str, log_path: str) -> RuntimeError:
    """The error for a server that exited before serving, with its log's last lines: a CI run
    keeps nothing but its output."""
    try:
        tail = last_lines(log_path, 15)
    except OSError as exc:
        tail = f"(its log is unreadable: {exc})"
    return RuntimeError(f"{name} exited; the last lines of {log_path}:\n{tail}")


def terminate(process: "subprocess.Popen | warm_start.ForkedProcess", timeout: float) -> None:
    """SIGTERM ``process`` (by its PID), then SIGKILL if it has not exited within ``timeout``."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class BrokerProcess:
    def __init__(self, data_dir: str, settings: dict | None = None, port: int = 0, log_path: str | None = None,
                 listeners: tuple[str, ...] = (), host: str = "127.0.0.1", wrapper: tuple[str, ...] = (),
                 workers: int = 1):
        """``listeners``: security protocols (``SASL_PLAINTEXT``, ...) served beside the
        PLAINTEXT bootstrap listener, each on a free port of its own. ``wrapper``: a command
        the broker runs under, one that execs it (so its PID stays the broker's), such as
        ``ip netns exec NS`` for a broker in a network namespace listening on ``host``.
        ``workers``: ``serve --workers``; the PID is the supervisor's and every worker's
        PLAINTEXT port is in ``worker_ports``, in the order the workers became ready."""
        self.host = host
        self.workers = workers
        self.worker_ports: list[int] = []
        self.wrapper = wrapper
        self.data_dir = data_dir
        self.settings = dict(settings or {})
        self.port = port
        self.ports = {protocol: 0 for protocol in listeners}
        self.log_path = log_path or os.path.join(data_dir, "broker.log")
        self.process: subprocess.Popen | warm_start.ForkedProcess | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host}:{port}" for port in self.worker_ports or [self.port])

    def address(self, protocol: str) -> str:
        return f"{self.host}:{self.ports[protocol]}"

    def start(self, timeout: float = 30.0) -> "BrokerProcess":
        os.makedirs(self.data_dir, exist_ok=True)
        arguments = ["serve", "--listen", f"{self.host}:{self.port}", "--data-dir", self.data_dir]
        for protocol, port in self.ports.items():
            arguments += ["--listen", f"{protocol}://{self.host}:{port}"]
        for key, value in self.settings.items():
            arguments += ["--set", f"{key}={value}"]
        if self.workers > 1:
            arguments += ["--workers", str(self.workers)]
        LOG_PATHS.add(self.log_path)
        with open(self.log_path, "ab") as log:
            if warm_start.can_fork(self.wrapper):
                self.process = warm_start.spawn(arguments, warm_start.ROOT, log.fileno())
            else:
                self.process = subprocess.Popen([*self.wrapper, sys.executable, "-m", "kgate", *arguments],
                                                stdout=subprocess.PIPE, stderr=log, cwd=warm_start.ROOT)
        self._stdout = b""
        self.worker_ports = []
        for _ in range(self.workers * (1 + len(self.ports))):
            line = self._read_line(timeout)
            if not line.startswith(READY_PREFIX):
                self.kill()
                raise RuntimeError(f"broker did not start: {line!r}; see {self.log_path}")
            protocol, _, address = line[len(READY_PREFIX):].rpartition("://")
            port = int(address.rsplit(":", 1)[1])
            if protocol:
                self.ports[protocol] = port
            elif self.workers > 1:
                self.worker_ports.append(port)
            else:
                self.port = port
        self.port = self.worker_ports[0] if self.worker_ports else self.port
        if self.settings.get("kgate.metrics.listener"):
            line = self._read_line(timeout)
            self.metrics_url = line.rpartition(" ")[2]
        return self

    def _read_line(self, timeout: float) -> str:
        """One line of the broker's stdout, read unbuffered so no later line hides in a buffer."""
        deadline = time.monotonic() + timeout
        fd = self.process.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._stdout:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(remaining):
                    return f"no ready line within {timeout} s"
                chunk = os.read(fd, 4096)
                if not chunk:
                    return f"exited with {self.process.wait()}"
                self._stdout += chunk
        line, _, self._stdout = self._stdout.partition(b"\n")
        return line.decode().strip()

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout``."""
        if self.process is None:
            return 0
        terminate(self.process, timeout)
        return self._reap()

    def kill(self) -> None:
        """kill -9: no shutdown path runs."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._reap()

    def _reap(self) -> int:
        code = self.process.returncode
        self.process.stdout.close()
        self.process = None
        return code

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def restart(self, timeout: float = 30.0) -> "BrokerProcess":
        """Start again on the same port and data directory (clients reconnect as to a restarted Kafka)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.start(timeout)
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
