"""A real SeaweedFS S3 engine for tests and benchmarks, run by scripts/seaweedfs.

Every port it binds (S3, master, volume, filer, and each one's gRPC port at +10000) is
free and below the ephemeral range (``ports``); its data lives in a directory the caller
owns; it is stopped by PID, SIGTERM then SIGKILL (SIGTERM alone can hang). Ready means the
S3 gateway answers and the process is still ours (a leftover server on the port could answer
otherwise).
"""
import os
import subprocess

from .broker_process import terminate
from .ports import free_ports
from .s3_server import SCRIPTS, S3Server

SCRIPT = os.path.join(SCRIPTS, "seaweedfs")
GRPC_OFFSET = 10000


class SeaweedFS(S3Server):
    name = "SeaweedFS"

    def __init__(self, data_dir: str, wrapper: tuple[str, ...] = ()):
        """``wrapper``: a command it runs under that execs it (``ip netns exec NS``)."""
        s3_port, self.master_port, self.volume_port, self.filer_port = free_ports(4, twin=GRPC_OFFSET)
        super().__init__(data_dir, s3_port)
        self.wrapper = wrapper

    def start(self) -> "SeaweedFS":
        os.makedirs(self.data_dir, exist_ok=True)
        log = open(os.path.join(self.data_dir, "server.log"), "ab")
        ports = [self.s3_port, self.master_port, self.volume_port, self.filer_port]
        # SeaweedFS turns AWS_* credentials in its environment into its only identity, which
        # would refuse the anonymous bucket PUT: it gets none (it accepts any credentials then).
        env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
        self.process = subprocess.Popen([*self.wrapper, SCRIPT, os.path.join(self.data_dir, "data"), *map(str, ports)],
                                        stdout=log, stderr=log, env=env)
        log.close()
        return self

    def stop(self) -> None:
        if self.process is not None:
            terminate(self.process, 5)
            self.process = None
