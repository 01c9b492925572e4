"""Lint and type checks as tests, so the README's test command (and CI) runs them.

Both tools run as the suite's interpreter's modules from the repository root, where
pyproject.toml configures them; their own report is the failure message.
"""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_finds_nothing():
    result = _run("ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing():
    result = _run("mypy", "--config-file", "pyproject.toml")
    assert result.returncode == 0, result.stdout + result.stderr
