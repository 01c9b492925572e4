"""The cluster under test: SeaweedFS behind a delay/loss proxy, a 3-node ZooKeeper ensemble
and 3 kgate brokers on object storage, each in a network namespace of its own (network.py),
plus a namespace for the clients. Stopped by PID; the namespaces go with the network.
"""
import os
import subprocess
import sys
import time

from tests.support.broker_process import BrokerProcess, terminate
from tests.support.delay_proxy import tell_proxy
from tests.support.seaweedfs import SeaweedFS
from tests.support.zookeeper import Ensemble

from .network import Host, Network

BUCKET = "faults"
BROKER_PORT = 9092
PROXY_PORT = 9000
SESSION_TIMEOUT_MS = 4000
FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
WAL_DISK_MB = 64
# Mounts the WAL's disk image in a mount namespace of the broker's own, then execs the broker:
# the mount (and its loop device) goes when the broker's process does, however it ends.
_MOUNT_AND_EXEC = 'mount -o loop "$1" "$2" && shift 2 && exec "$@"'
# The credentials brokers sign with; SeaweedFS without an -s3.config accepts any.
AWS = ("AWS_ACCESS_KEY_ID=faults", "AWS_SECRET_ACCESS_KEY=faults")


def wait_until(condition, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout} s")
        time.sleep(interval)
    return result


class FaultCluster:
    def __init__(self, base_dir: str, network: Network, brokers: int = 3, zookeepers: int = 3):
        self.base_dir = base_dir
        self.network = network
        self.s3_host = network.add("s3")
        self.zk_hosts = [network.add(f"zk{i + 1}") for i in range(zookeepers)]
        self.broker_hosts = [network.add(f"b{i + 1}") for i in range(brokers)]
        self.client = network.add("client")
        self.seaweedfs = SeaweedFS(os.path.join(base_dir, "seaweedfs"), wrapper=tuple(self.s3_host.wrap()))
        self.proxy_control = os.path.join(base_dir, "proxy.sock")
        self.proxy: subprocess.Popen | None = None
        self.ensemble = Ensemble(os.path.join(base_dir, "zookeeper"), zookeepers,
                                 hosts=[h.address for h in self.zk_hosts],
                                 wrappers=[tuple(h.wrap()) for h in self.zk_hosts])
        # The last broker's wall clock is libfaketime's: the nemesis jumps it through this file.
        self.clock_file = os.path.join(base_dir, "clock-offset")
        # The second broker's WAL is local, on a small disk of its own the nemesis fills up.
        self.wal_disk = os.path.join(base_dir, "wal.img")
        self.wal_dir = os.path.join(base_dir, "broker-2-wal")
        self.brokers = [self._broker(i, host) for i, host in enumerate(self.broker_hosts)]

    def _broker(self, i: int, host: Host) -> BrokerProcess:
        wrapper = [*host.wrap(), "env", *AWS]
        settings: dict[str, object] = {}
        if i == 1:
            wrapper += ["unshare", "--mount", "--propagation", "private", "sh", "-c", _MOUNT_AND_EXEC, "wal-disk",
                        self.wal_disk, self.wal_dir]
            settings["kgate.wal"] = f"file:{self.wal_dir}"
        if i == len(self.broker_hosts) - 1:
            wrapper += [f"LD_PRELOAD={FAKETIME}", f"FAKETIME_TIMESTAMP_FILE={self.clock_file}",
                        "FAKETIME_CACHE_DURATION=1", "DONT_FAKE_MONOTONIC=1", f"PYTHONPATH={_UNDER_FAKETIME}"]
        storage = (f"s3://{BUCKET}/kgate?endpoint=http://{self.s3_host.address}:{PROXY_PORT}"
                   "&region=us-east-1")
        settings |= {"kgate.metadata": f"zookeeper://{self.ensemble.address}/kgate", "kgate.storage": storage,
                    "broker.id": i + 1, "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
                    "offsets.topic.num.partitions": 6, "group.initial.rebalance.delay.ms": 0,
                    "kgate.s3.wal.commit.interval.ms": 50}
        return BrokerProcess(os.path.join(self.base_dir, f"broker-{i + 1}"), settings, port=BROKER_PORT,
                             host=host.address, wrapper=tuple(wrapper))

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{h.address}:{BROKER_PORT}" for h in self.broker_hosts)

    def start(self) -> "FaultCluster":
        with open(self.clock_file, "w") as fh:
            fh.write("+0\n")
        os.makedirs(self.wal_dir)
        with open(self.wal_disk, "wb") as fh:
            fh.truncate(WAL_DISK_MB << 20)
        subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", self.wal_disk], check=True)
        self.seaweedfs.start()
        self.proxy = subprocess.Popen(self.s3_host.wrap(
            sys.executable, "-m", "tests.faults.proxy", f"{self.s3_host.address}:{PROXY_PORT}",
            f"127.0.0.1:{self.seaweedfs.s3_port}", self.proxy_control), cwd=_ROOT, stdout=subprocess.DEVNULL)
        for server in self.ensemble.servers:
            server.start()
        self.s3_host.call(lambda: self.seaweedfs.make_bucket(BUCKET), timeout=120)
        wait_until(lambda: os.path.exists(self.proxy_control), 30, "proxy control socket")
        for server, host in zip(self.ensemble.servers, self.zk_hosts):
            self.wait_zookeeper(server, host)
        for broker in self.brokers:
            broker.start(timeout=120)
        return self

    def wait_zookeeper(self, server, host: Host, timeout: float = 60) -> None:
        wait_until(lambda: host.call(server.serving), timeout, f"ZooKeeper serving in {host.name}")

    def set_proxy(self, **settings: float) -> None:
        tell_proxy(self.proxy_control, **settings)

    def jump_clock(self, seconds: int) -> None:
        with open(self.clock_file, "w") as fh:
            fh.write(f"{seconds:+d}\n")

    def fill_wal_disk(self, full: bool) -> str:
        """Fill the local WAL's disk with a ballast file, or remove it, inside the broker's mount
        namespace (or, with the broker down, in a short-lived one of its own); how full it is."""
        ballast = os.path.join(self.wal_dir, "ballast")
        command = (f"dd if=/dev/zero of={ballast} bs=64k 2>/dev/null; " if full else f"rm -f {ballast}; ") + \
            f"df --output=pcent {self.wal_dir} | tail -1"
        broker = self.brokers[1]
        if broker.alive():
            inside = ["nsenter", "-t", str(broker.process.pid), "-m", "sh", "-c", command]
        else:
            inside = ["unshare", "--mount", "--propagation", "private", "sh", "-c", _MOUNT_AND_EXEC, "wal-disk",
                      self.wal_disk, self.wal_dir, "sh", "-c", command]
        return subprocess.run(inside, check=True, capture_output=True, text=True).stdout.strip()

    @staticmethod
    def elect_preferred(admin, partition) -> None:
        """After a reassignment: nothing to elect, the first broker of the list owns the partition
        once the reassignment is written (one replica, in shared storage: nothing is copied)."""

    def stop(self) -> None:
        for broker in self.brokers:
            if broker.process is not None:
                broker.process.kill()
                broker.kill()
        self.ensemble.stop()
        if self.proxy is not None:
            terminate(self.proxy, 5)
        self.seaweedfs.stop()


_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# time.sleep that works under libfaketime (its sitecustomize.py says why).
_UNDER_FAKETIME = os.path.join(os.path.dirname(os.path.abspath(__file__)), "under_faketime")
