import asyncio
import inspect

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.member_process import MemberProcess


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


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory):
    """One real SeaweedFS S3 engine for the whole session (it takes ~4 s to answer), with one
    bucket; tests keep apart by prefix. Stopped by PID at the end."""
    from tests.support.seaweedfs import SeaweedFS

    server = SeaweedFS(str(tmp_path_factory.mktemp("seaweedfs"))).start()
    try:
        server.make_bucket(SEAWEEDFS_BUCKET)
        yield server
    finally:
        server.stop()


SEAWEEDFS_BUCKET = "kgate-tests"


@pytest.fixture
def bucket_url(seaweedfs, monkeypatch):
    """``--storage`` for a prefix of its own in the session's bucket; brokers (and the test)
    get credentials from the environment."""
    import uuid

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "kgate-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "kgate-test")
    return f"s3://{SEAWEEDFS_BUCKET}/{uuid.uuid4().hex}?endpoint={seaweedfs.endpoint}&region=us-east-1"
