"""Drive ``tests.support.group_member`` processes and read what they consumed."""
import os
import subprocess
import sys
import time

from .broker_process import terminate

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class MemberProcess:
    def __init__(self, client: str, bootstrap: str, topic: str, group: str, out_path: str,
                 instance: str | None = None, assignor: str | None = None, session_ms: int = 6000,
                 group_protocol: str = "classic"):
        self.client = client
        self.out_path = out_path
        self._command = [sys.executable, "-m", "tests.support.group_member", client, bootstrap, topic, group, out_path,
                         "--session-ms", str(session_ms), "--group-protocol", group_protocol]
        if instance:
            self._command += ["--instance", instance]
        if assignor:
            self._command += ["--assignor", assignor]
        self.process: subprocess.Popen | None = None

    def start(self) -> "MemberProcess":
        with open(self.out_path + ".log", "ab") as log:
            self.process = subprocess.Popen(self._command, cwd=_ROOT, stdout=log, stderr=log)
        return self

    def stop(self, timeout: float = 30) -> None:
        if self.process is not None:
            terminate(self.process, timeout)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def _lines(self, kind: str) -> list[list[str]]:
        if not os.path.exists(self.out_path):
            return []
        with open(self.out_path) as fh:
            # A line cut short by kill -9 has no newline yet: ignore it.
            return [line.split()[1:] for line in fh if line.endswith("\n") and line.startswith(kind + " ")]

    def records(self) -> list[tuple[int, int, str]]:
        return [(int(p), int(o), k) for p, o, k in self._lines("record")]

    def assignments(self) -> list[tuple[int, ...]]:
        return [tuple(int(p) for p in fields[0].split(",")) if fields else () for fields in self._lines("assigned")]


def wait_for(condition, timeout: float, what: str, interval: float = 0.2):
    """Poll ``condition`` until it returns something truthy; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
