import asyncio
import inspect
import os

import pytest

from tests.support import warm_start
from tests.support.broker_process import BrokerProcess, logs_written_since
from tests.support.member_process import MemberProcess


def pytest_configure(config):
    """Brokers the tests start are forked from an interpreter that has kgate imported
    (tests/support/warm_start.py): a second of CPU less for each of the suite's many starts."""
    warm_start.enable()


@pytest.fixture
def entry_format(request):
    """The broker's default entry format. Suites that must hold for every format
    parametrize this fixture indirectly with ``storage.entry_formats.names()``."""
    return getattr(request, "param", "kafka")


@pytest.fixture
def broker_factory(tmp_path, entry_format):
    """Start brokers on free ports in the test's temporary directory; stop them by PID after."""
    started = []

    def start(name="broker", listeners=(), **settings):
        settings.setdefault("entry.format", entry_format)
        broker = BrokerProcess(str(tmp_path / name), settings, listeners=listeners).start()
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.stop()


@pytest.fixture
def broker(broker_factory):
    return broker_factory()


@pytest.fixture
def members(tmp_path):
    """Group members in processes of their own (tests/support/member_process.py), stopped after the test."""
    started = []

    def start(client, bootstrap, topic, group, **options):
        member = MemberProcess(client, bootstrap, topic, group, str(tmp_path / f"member-{len(started)}.txt"),
                               **options).start()
        started.append(member)
        return member

    yield start
    for member in started:
        member.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run ``async def`` tests in a fresh event loop (no asyncio plugin is installed)."""
    if inspect.iscoroutinefunction(pyfuncitem.obj):
        args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        asyncio.run(pyfuncitem.obj(**args))
        return True
    return None


TEST_STARTED = pytest.StashKey[float]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report carries the tail of each broker log written since its setup began."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "setup":
        item.stash[TEST_STARTED] = call.start
    elif report.when == "call" and report.failed:
        for path, tail in logs_written_since(item.stash.get(TEST_STARTED, call.start)).items():
            report.sections.append((f"broker log {os.path.basename(os.path.dirname(path))} (last lines)", tail))


S3_BUCKET = "kgate-tests"
# The keys brokers and tests sign with. SeaweedFS (started without an -s3.config) accepts any;
# Ceph RGW checks them against the one user scripts/ceph-rgw creates with these keys.
S3_ACCESS_KEY = S3_SECRET_KEY = "kgate-test"
S3_ENGINES = ("seaweedfs", "ceph")


@pytest.fixture(scope="session")
def s3_engine(tmp_path_factory):
    """One real S3 engine for the whole session (SeaweedFS answers in ~4 s, Ceph RGW in ~10 s),
    with one bucket; tests keep apart by prefix. Stopped by PID at the end.
    ``KGATE_S3_ENGINE`` picks it: ``seaweedfs`` (the default) or ``ceph`` (Debian's Ceph RGW,
    scripts/test-ceph), so the same S3 tests show the store leans on no one engine's quirks."""
    engine = os.environ.get("KGATE_S3_ENGINE", "seaweedfs")
    if engine == "seaweedfs":
        from tests.support.seaweedfs import SeaweedFS

        server = SeaweedFS(str(tmp_path_factory.mktemp("seaweedfs"))).start()
    elif engine == "ceph":
        from tests.support.ceph_rgw import CephRGW

        server = CephRGW(str(tmp_path_factory.mktemp("ceph-rgw")), S3_ACCESS_KEY, S3_SECRET_KEY).start()
    else:
        raise pytest.UsageError(f"KGATE_S3_ENGINE={engine!r}: expected one of {', '.join(S3_ENGINES)}")
    try:
        server.make_bucket(S3_BUCKET)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def seaweedfs(s3_engine):
    """The session's engine when it is SeaweedFS: for tests that act on its process itself
    (SIGSTOP of the whole engine), which a Ceph node of several daemons does not offer."""
    from tests.support.seaweedfs import SeaweedFS

    if not isinstance(s3_engine, SeaweedFS):
        pytest.skip("acts on the SeaweedFS process itself (KGATE_S3_ENGINE is not seaweedfs)")
    return s3_engine


@pytest.fixture
def bucket_url(s3_engine, monkeypatch):
    """``--storage`` for a prefix of its own in the session's bucket; brokers (and the test)
    get credentials from the environment."""
    import uuid

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", S3_ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", S3_SECRET_KEY)
    return f"s3://{S3_BUCKET}/{uuid.uuid4().hex}?endpoint={s3_engine.endpoint}&region=us-east-1"
