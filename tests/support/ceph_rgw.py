"""A real Ceph RADOS gateway for tests, run by scripts/ceph-rgw: the second S3 engine.

The object store must not lean on one engine's quirks, so the S3 tests can run on Ceph
RGW (Debian's packages, scripts/setup-ceph) as well as on SeaweedFS; the session fixture
picks the engine by ``KGATE_S3_ENGINE`` (tests/conftest.py). The interface mirrors
tests/support/seaweedfs.py's ``SeaweedFS``.

Its monitor and gateway listen on free ports on 127.0.0.1 (the OSD on ports Ceph finds
free in its own range); its data lives in a directory the caller owns. The script is the
leader of a process group of its own: stopping sends it SIGTERM (it stops its daemons by
PID) and, should it not exit in time, SIGKILLs that group, which holds only what it
started. Unlike SeaweedFS, RGW checks signatures: the script creates one user with
``access_key``/``secret_key``, bucket creation here is a SigV4-signed PUT, and brokers get
the same keys through the AWS environment variables.
"""
import contextlib
import datetime
import hashlib
import hmac
import os
import signal
import subprocess

from .ports import free_ports
from .s3_server import SCRIPTS, S3Server

SCRIPT = os.path.join(SCRIPTS, "ceph-rgw")
REGION = "us-east-1"
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def signed_headers(method: str, host: str, path: str, access_key: str, secret_key: str,
                   now: datetime.datetime | None = None) -> dict[str, str]:
    """AWS Signature V4 headers for a body-less request without a query string: enough to
    create a bucket, without pulling an S3 SDK into the tests for one call."""
    now = now or datetime.datetime.now(datetime.UTC)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    headers = {"host": host, "x-amz-content-sha256": _EMPTY_SHA256, "x-amz-date": stamp}
    names = ";".join(sorted(headers))
    canonical = "\n".join([method, path, "", *(f"{k}:{headers[k]}" for k in sorted(headers)), "", names,
                           _EMPTY_SHA256])
    scope = f"{day}/{REGION}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = _hmac(_hmac(_hmac(_hmac(f"AWS4{secret_key}".encode(), day), REGION), "s3"), "aws4_request")
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return {"x-amz-content-sha256": _EMPTY_SHA256, "x-amz-date": stamp,
            "Authorization": f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={names}, "
                             f"Signature={signature}"}


class CephRGW(S3Server):
    name = "Ceph RGW"
    ready_timeout = 120.0  # the node takes ~20 s to come up on a loaded machine

    def __init__(self, data_dir: str, access_key: str = "kgate-test", secret_key: str = "kgate-test"):
        s3_port, self.mon_port = free_ports(2)
        super().__init__(data_dir, s3_port)
        self.access_key = access_key
        self.secret_key = secret_key

    def start(self) -> "CephRGW":
        os.makedirs(self.data_dir, exist_ok=True)
        log = open(os.path.join(self.data_dir, "server.log"), "ab")
        env = dict(os.environ, AWS_ACCESS_KEY_ID=self.access_key, AWS_SECRET_ACCESS_KEY=self.secret_key)
        self.process = subprocess.Popen(
            [SCRIPT, os.path.join(self.data_dir, "data"), str(self.s3_port), str(self.mon_port)],
            stdout=log, stderr=log, env=env, start_new_session=True)
        log.close()
        return self

    def _headers(self, method: str, path: str) -> dict[str, str]:
        return signed_headers(method, f"127.0.0.1:{self.s3_port}", path, self.access_key, self.secret_key)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM the script (it stops its daemons), then SIGKILL its process group."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        # The group is the script's own (start_new_session): daemons it left behind die with it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.process = None
