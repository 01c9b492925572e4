"""Debian's chromium, headless, driven through chromium-driver by Selenium, for tests
that look at pages as a person would (the documentation site, the console).

Playwright's own browser downloads cannot be fetched here, so the browser is the
distribution's; every run gets a fresh profile in the caller's temporary directory and
no network activity of the browser's own (updates, sync, background fetches).
"""
import contextlib
import os
import shutil

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,900")
MISSING = "Debian's chromium and chromium-driver are missing: run scripts/setup-docs"


@contextlib.contextmanager
def headless_chromium(profile_dir: str, timeout: float = 30.0):
    """A WebDriver for a headless chromium with a profile of its own; quit on exit."""
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        raise RuntimeError(MISSING)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile_dir}")
    # Given the driver's path, Selenium skips Selenium Manager (which would look for drivers online).
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(timeout)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver, condition, timeout: float = 15.0):
    """Wait (bounded) until ``condition(driver)`` is truthy and return its value."""
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(condition)
