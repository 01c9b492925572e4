"""``kgate console`` as a child process on a free port, stopped by PID (tests and bench)."""
import selectors
import subprocess
import sys
import time

from tests.support.broker_process import terminate

READY_PREFIX = "kgate console on "


class ConsoleProcess:
    def __init__(self, bootstrap: str, *options: str):
        self.command = [sys.executable, "-m", "kgate", "console", "--bootstrap", bootstrap,
                        "--listen", "127.0.0.1:0", *options]
        self.process: subprocess.Popen | None = None
        self.url = ""

    def start(self, timeout: float = 30.0) -> "ConsoleProcess":
        self.process = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self._first_line(timeout)
        if not line.startswith(READY_PREFIX):
            self.stop()
            raise RuntimeError(f"console did not start: {line!r}")
        self.url = line[len(READY_PREFIX):].split()[0]
        return self

    def _first_line(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            remaining = deadline - time.monotonic()
            if not selector.select(remaining):
                return f"no ready line within {timeout} s"
            return self.process.stdout.readline().decode().strip() or \
                f"exited with {self.process.wait()}: {self.process.stderr.read().decode()[-2000:]}"

    def stop(self) -> None:
        if self.process is not None:
            terminate(self.process, 10)
            self.process.stdout.close()
            self.process.stderr.close()
            self.process = None
