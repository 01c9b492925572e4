"""``kgate mirror`` for tests: a configuration over real clusters and workers as processes.

Workers are started as ``python -m kgate mirror serve`` children, stopped by PID
(SIGTERM, or SIGKILL for the kill -9 tests); their logs go next to the configuration.
"""
import os
import subprocess
import sys

from .broker_process import terminate

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_config(path: str, zookeeper: str, chroot: str, clusters: dict[str, str], **settings) -> str:
    lines = [f'metadata = "zookeeper://{zookeeper}{chroot}"']
    lines += [f'"{key}" = {value!r}' if isinstance(value, str) else f'"{key}" = {value}'
              for key, value in settings.items()]
    for alias, bootstrap in clusters.items():
        lines += [f"[clusters.{alias}]", f'bootstrap = "{bootstrap}"']
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    return path


def mirror_command(config: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kgate", "mirror", *args, "--config", config], cwd=_ROOT,
                          capture_output=True, text=True, timeout=timeout)


class MirrorWorker:
    def __init__(self, config: str, worker_id: str, *extra: str):
        self.config = config
        self.worker_id = worker_id
        self.log_path = os.path.join(os.path.dirname(config), f"{worker_id}.log")
        self.extra = extra
        self.process: subprocess.Popen | None = None

    def start(self) -> "MirrorWorker":
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kgate", "mirror", "serve", "--config", self.config,
                 "--worker-id", self.worker_id, *self.extra], cwd=_ROOT, stdout=log, stderr=log)
        return self

    def stop(self, timeout: float = 30) -> int | None:
        if self.process is None:
            return None
        terminate(self.process, timeout)
        return self.process.returncode

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def log(self) -> str:
        with open(self.log_path, errors="replace") as fh:
            return fh.read()
