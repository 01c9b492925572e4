"""The direction of imports the design map states, checked on the source.

protocol imports nothing of kgate; storage and metadata import protocol at most;
the broker (gateway) imports those three; the client-side rooms (cli, pipeline and
those to come) may share each other's helpers but never import the broker. Every
import of a room says ``kgate.``: a bare ``import protocol`` would load a second copy
of the module, or a PyPI package of that name.
"""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "kgate"
ROOMS = sorted(p.name for p in PACKAGE.iterdir() if p.is_symlink())
CLIENT_ROOMS = {"cli", "console", "pipeline", "mirror", "processing"}
MAY_IMPORT = {
    "protocol": set(),
    "storage": {"protocol"},
    "metadata": {"protocol"},
    "gateway": {"protocol", "storage", "metadata"},
    **{room: {"protocol"} | (CLIENT_ROOMS - {room}) for room in CLIENT_ROOMS},
}


def imported_rooms(path: pathlib.Path, room: str, root: pathlib.Path = ROOT) -> dict[str, int]:
    """The rooms a module imports (``kgate.X`` absolute, or relative beyond its own
    room), each with the line of its first import."""
    module = ".".join(path.relative_to(root).with_suffix("").parts)  # e.g. gateway.handlers.fetch
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module] if node.module != "kgate" else [f"kgate.{a.name}" for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = module.split(".")[:-node.level] if path.name != "__init__.py" \
                else module.split(".")[:len(module.split(".")) - node.level + 1]
            names = ["kgate." + ".".join(base + ([node.module] if node.module else []))]
        for name in names:
            parts = name.split(".")
            if parts[0] in ROOMS:
                found.setdefault(f"bare:{parts[0]}", node.lineno)
            elif parts[0] == "kgate" and len(parts) > 1 and parts[1] != room:
                found.setdefault(parts[1], node.lineno)
    return found


def test_every_room_is_linked_into_the_package():
    assert set(MAY_IMPORT) >= set(ROOMS)
    for room in ROOMS:
        assert (PACKAGE / room).resolve() == ROOT / room


@pytest.mark.parametrize("room", ROOMS)
def test_imports_follow_the_design_map(room):
    wrong = []
    for path in sorted((ROOT / room).rglob("*.py")):
        for target, line in imported_rooms(path, room).items():
            if target.startswith("bare:") or target not in MAY_IMPORT[room]:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not wrong, f"{room} may import only {sorted(MAY_IMPORT[room])}:\n" + "\n".join(wrong)


def test_the_checker_sees_a_wrong_import(tmp_path):
    (tmp_path / "storage").mkdir()
    module = tmp_path / "storage" / "ledger.py"
    module.write_text("import json\nfrom kgate.gateway import broker\nfrom ..metadata import store\nimport protocol\n")
    assert imported_rooms(module, "storage", tmp_path) == {"gateway": 2, "metadata": 3, "bare:protocol": 4}


# Inside the broker, calls run down from the server to the handlers: the broker and server
# modules assemble the handlers, which see them only through handlers/broker_view.py.
ABOVE_THE_HANDLERS = {"kgate.gateway.broker", "kgate.gateway.server"}


def imported_modules(path: pathlib.Path, root: pathlib.Path = ROOT) -> set[str]:
    module = ".".join(path.relative_to(root).with_suffix("").parts)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[:len(package) - node.level + 1]
            found.add("kgate." + ".".join(base + ([node.module] if node.module else [])))
        elif isinstance(node, ast.ImportFrom):
            found.add(node.module or "")
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_handlers_never_import_the_broker_that_assembles_them():
    wrong = [f"{path.relative_to(ROOT)} imports {sorted(imported_modules(path) & ABOVE_THE_HANDLERS)}"
             for path in sorted((ROOT / "gateway" / "handlers").rglob("*.py"))
             if imported_modules(path) & ABOVE_THE_HANDLERS]
    assert not wrong, "\n".join(wrong)


def test_the_handler_check_sees_an_upward_import(tmp_path):
    handlers = tmp_path / "gateway" / "handlers"
    handlers.mkdir(parents=True)
    (handlers / "fetch.py").write_text("from ..broker import Broker\nfrom .broker_view import BrokerView\n")
    assert imported_modules(handlers / "fetch.py", tmp_path) == {"kgate.gateway.broker",
                                                                 "kgate.gateway.handlers.broker_view"}
