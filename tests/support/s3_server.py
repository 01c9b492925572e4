"""What tests and benchmarks need of an S3 engine they start themselves (SeaweedFS, Ceph
RGW): its endpoint, a bucket once it answers, and a context that stops it by PID.

Each engine's module says how it is started and stopped; the waiting for it to answer
is the same for every engine, and lives here once.
"""
import contextlib
import os
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Self

from .broker_process import exited_error

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(_ROOT, "scripts")


class S3Server:
    name = "S3 engine"
    ready_timeout = 60.0  # how long the engine may take to create its first bucket

    def __init__(self, data_dir: str, s3_port: int):
        self.data_dir = data_dir
        self.s3_port = s3_port
        self.process: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _headers(self, method: str, path: str) -> dict[str, str]:
        """Headers a request needs to be accepted (an engine that checks signatures signs here)."""
        return {}

    def _request(self, method: str, path: str) -> int:
        request = urllib.request.Request(self.endpoint + path, method=method, headers=self._headers(method, path))
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    def make_bucket(self, bucket: str, timeout: float | None = None) -> None:
        """Create ``bucket`` with a plain ``PUT /BUCKET`` once the engine answers (it takes seconds)."""
        timeout = self.ready_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        status = None
        while True:
            if not self.alive():
                raise exited_error(self.name, os.path.join(self.data_dir, "server.log"))
            try:
                status = self._request("PUT", f"/{bucket}")
                if status in (200, 409):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not create bucket {bucket} within {timeout} s (last answer: "
                                   f"{status}); see {self.data_dir}/server.log")
            time.sleep(0.2)

    @classmethod
    @contextlib.contextmanager
    def started(cls, data_dir: str | None = None) -> Iterator[Self]:
        with contextlib.ExitStack() as stack:
            if data_dir is None:
                data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix=f"{cls.__name__.lower()}-"))
            server = cls(data_dir).start()  # type: ignore[call-arg]
            try:
                yield server
            finally:
                server.stop()
