"""What installing kgate puts on a machine: one import package, one Spark module, nothing else.

The wheel is built from a copy of the working tree (as ``pip wheel .`` builds it,
with build isolation), and the development install is checked for the same top-level
names and for Spark's discovery of the data source, which lists ``pyspark_*``
modules found in ``sys.path`` directories.
"""
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROOMS = sorted(p.name for p in (ROOT / "src" / "kgate").iterdir() if p.is_symlink())
COPY_IGNORES = shutil.ignore_patterns(".git", ".venv", ".cache", "build", "*.egg-info", "__pycache__",
                                      ".hypothesis", ".pytest_cache", "kgate-data")

# One worker runs the module, so its module-scoped servers start once (scripts/test: --dist loadgroup).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("packaging")]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    source = tmp_path_factory.mktemp("source") / "kgate"
    shutil.copytree(ROOT, source, symlinks=True, ignore=COPY_IGNORES)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps",
                    "-w", str(out), str(source)], check=True, capture_output=True, timeout=300)
    [built] = out.glob("*.whl")
    with zipfile.ZipFile(built) as archive:
        yield archive


def test_the_wheel_holds_only_kgate_and_the_spark_module(wheel):
    top = {name.split("/")[0] for name in wheel.namelist()}
    dist_info = {name for name in top if name.endswith(".dist-info")}
    assert top - dist_info == {"kgate", "pyspark_kgate.py"}
    assert [name.split("-")[0] for name in dist_info] == ["kgate_broker"]
    metadata = wheel.read(f"{dist_info.pop()}/entry_points.txt").decode()
    assert "kgate = kgate.command:run" in metadata


def test_the_wheel_holds_every_module_of_every_room(wheel):
    names = set(wheel.namelist())
    for room in ROOMS:
        for path in (ROOT / room).rglob("*"):
            if path.suffix in (".py", ".json"):
                assert f"kgate/{room}/{path.relative_to(ROOT / room)}" in names
    # The produce path's record walk is compiled, so a wheel without it could not import it.
    assert any(name.startswith("kgate/protocol/_record_span.") and name.endswith(".so") for name in names)


def interpreter(code: str, cwd) -> str:
    """``code`` in a fresh interpreter of this environment, away from the checkout
    (-P: no current directory on sys.path), as a program or Spark's worker runs."""
    return subprocess.run([sys.executable, "-P", "-c", code], cwd=cwd, capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()


def test_the_development_install_exposes_what_the_wheel_does(tmp_path):
    listed = interpreter("import pkgutil, kgate, pathlib; "
                         "print(sorted(m.name for m in "
                         "pkgutil.iter_modules([str(pathlib.Path(kgate.__file__).parents[1])])))",
                         tmp_path)
    assert listed == "['kgate', 'pyspark_kgate']"
    # What Spark's lookup of data sources does in its Python worker.
    assert interpreter("import pkgutil; print('pyspark_kgate' in {m.name for m in pkgutil.iter_modules()})",
                       tmp_path) == "True"
    for room in ROOMS:
        assert interpreter(f"import importlib.util; print(importlib.util.find_spec({room!r}) is None)",
                           tmp_path) == "True", f"a bare {room!r} is importable"


def test_setting_up_again_reinstalls_nothing():
    site = pathlib.Path(sysconfig.get_paths()["purelib"])

    def installed():
        [dist_info] = site.glob("kgate_broker-*.dist-info")
        return dist_info.stat().st_ino, dist_info.stat().st_mtime_ns

    subprocess.run([str(ROOT / "scripts" / "setup")], check=True, capture_output=True, timeout=600)
    before = installed()
    done = subprocess.run([str(ROOT / "scripts" / "setup")], check=True, capture_output=True, text=True, timeout=600)
    assert installed() == before, done.stdout + done.stderr
