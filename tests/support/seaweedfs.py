"""A real SeaweedFS S3 engine for tests and benchmarks, run by scripts/seaweedfs.

Every port it binds (S3, master, volume, filer, and each one's gRPC port at +10000) is
free and below 55535; its data lives in a directory the caller owns; it is stopped by
PID, SIGTERM then SIGKILL (SIGTERM alone can hang). Ready means the S3 gateway answers
and the process is still ours (a leftover server on the port could answer otherwise).
"""
import contextlib
import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

from .broker_process import terminate

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(_ROOT, "scripts", "seaweedfs")
GRPC_OFFSET = 10000
PORT_CEILING = 65535 - GRPC_OFFSET


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_pairs(count: int) -> list[int]:
    """``count`` ports below 55535 that are free together with their gRPC twins (port + 10000)."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port >= PORT_CEILING:
            # The kernel's ephemeral range is mostly above the ceiling: draw from below it instead.
            port = 20000 + int.from_bytes(os.urandom(2), "big") % (PORT_CEILING - 20000)
        if port not in ports and _bindable(port) and _bindable(port + GRPC_OFFSET):
            ports.append(port)
    return ports


class SeaweedFS:
    def __init__(self, data_dir: str):
        self.data_dir = data_dir
        self.s3_port, self.master_port, self.volume_port, self.filer_port = free_port_pairs(4)
        self.process: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    def start(self) -> "SeaweedFS":
        os.makedirs(self.data_dir, exist_ok=True)
        log = open(os.path.join(self.data_dir, "server.log"), "ab")
        ports = [self.s3_port, self.master_port, self.volume_port, self.filer_port]
        # SeaweedFS turns AWS_* credentials in its environment into its only identity, which
        # would refuse the anonymous bucket PUT: it gets none (it accepts any credentials then).
        env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
        self.process = subprocess.Popen([SCRIPT, os.path.join(self.data_dir, "data"), *map(str, ports)],
                                        stdout=log, stderr=log, env=env)
        log.close()
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _request(self, method: str, path: str) -> int:
        request = urllib.request.Request(self.endpoint + path, method=method)
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    def make_bucket(self, bucket: str, timeout: float = 60.0) -> None:
        """Create ``bucket`` with a plain ``PUT /BUCKET``, once the gateway answers (it takes ~4 s)."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive():
                raise RuntimeError(f"SeaweedFS exited; see {self.data_dir}/server.log")
            try:
                status = self._request("PUT", f"/{bucket}")
                if status in (200, 409):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"SeaweedFS S3 not answering within {timeout} s; see {self.data_dir}/server.log")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None:
            terminate(self.process, 5)
            self.process = None

    @classmethod
    @contextlib.contextmanager
    def started(cls, data_dir: str | None = None) -> Iterator["SeaweedFS"]:
        with contextlib.ExitStack() as stack:
            if data_dir is None:
                data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="seaweedfs-"))
            server = cls(data_dir).start()
            try:
                yield server
            finally:
                server.stop()
