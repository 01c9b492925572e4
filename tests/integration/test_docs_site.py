"""The documentation site builds strictly, holds what the code defines, and its pages
show their content in a real browser (Debian's chromium, headless)."""
import functools
import http.server
import subprocess
import sys
import threading

import pytest
from selenium.webdriver.common.by import By

from kgate.gateway.config import BROKER_SETTINGS
from kgate.gateway.topic_configs import TOPIC_CONFIGS
from tests.support.browser import headless_chromium, wait_for
from tests.support.docs import ROOT, load_reference_hook


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site, built once with `mkdocs build --strict` as scripts/docs builds it."""
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                            cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def served(site):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with headless_chromium(str(tmp_path_factory.mktemp("profile"))) as driver:
        yield driver


def test_the_reference_pages_list_every_setting_and_topic_config(site):
    settings = (site / "reference" / "settings" / "index.html").read_text()
    configs = (site / "reference" / "topic-configs" / "index.html").read_text()
    assert [name for name in BROKER_SETTINGS if f"<code>{name}</code>" not in settings] == []
    assert [name for name in TOPIC_CONFIGS if f"<code>{name}</code>" not in configs] == []
    cli = (site / "reference" / "cli" / "index.html").read_text()
    for command in ("kgate serve", "kgate topics create", "kgate groups reset-offsets", "kgate mirror failover"):
        assert f">{command}<" in cli, command


def test_a_setting_without_documentation_fails_the_build(monkeypatch):
    hook = load_reference_hook()
    monkeypatch.setitem(BROKER_SETTINGS, "kgate.undocumented.example", (1, ("", lambda v: True)))
    with pytest.raises(hook.ReferenceError, match="kgate.undocumented.example"):
        hook.on_page_markdown("<!-- reference: settings -->")


def test_the_compatibility_matrix_is_rendered_as_a_page(site):
    page = (site / "clients" / "compatibility" / "index.html").read_text()
    matrix = (ROOT / "compat-matrix" / "MATRIX.md").read_text()
    first_row = next(line for line in matrix.splitlines() if line.startswith("| kafka-python"))
    assert first_row.split("|")[1].strip() in page
    assert "<table>" in page


@pytest.mark.parametrize("path, heading, text", [
    ("", "kgate", "A Kafka-protocol broker over a shared log"),
    ("reference/settings/", "Broker settings", "zookeeper.session.timeout.ms"),
    ("reference/metrics/", "Metrics", "kgate_request_latency_seconds"),
    ("operating/object-storage/", "Object storage and WALs", "kgate.s3.wal.commit.interval.ms"),
])
def test_pages_show_their_content_in_chromium(served, browser, path, heading, text):
    browser.get(f"{served}/{path}")
    title = wait_for(browser, lambda b: b.find_element(By.CSS_SELECTOR, "article h1"))
    assert title.text.strip() == heading
    assert text in browser.find_element(By.CSS_SELECTOR, "article").text
    # The theme's header is laid out: its styles came from the site itself.
    assert browser.find_element(By.CSS_SELECTOR, "header.md-header").is_displayed()
