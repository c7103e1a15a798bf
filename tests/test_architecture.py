"""The house rules that can be checked mechanically: imports flow one way, public API is explicit,
no module grows past 600 lines, library code never prints or exits."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import servelab

SRC = Path(servelab.__file__).parent
LAYERS = ["core", "sim", "io", "ops", "report", "cli"]
# What each layer may import from servelab (besides itself, errors and the package root).
ALLOWED = {
    "core": set(),
    "sim": {"core"},
    "io": {"core"},
    "ops": {"core", "io", "sim"},
    "report": {"core", "ops"},
    "cli": {"core", "sim", "io", "ops", "report"},
}


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py"))


def _layer(path: Path) -> str | None:
    rel = path.relative_to(SRC).parts
    return rel[0] if len(rel) > 1 and rel[0] in LAYERS else None


def _servelab_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "servelab" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_flow_one_way(path: Path) -> None:
    layer = _layer(path)
    if layer is None:
        return
    used = _servelab_imports(path) & set(LAYERS)
    forbidden = used - ALLOWED[layer] - {layer}
    assert not forbidden, f"{layer}/ must not import {sorted(forbidden)}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_modules_stay_small(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").count("\n")
    assert lines < 600, f"{path.name} has {lines} lines"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_print_or_exit_outside_cli(path: Path) -> None:
    if _layer(path) == "cli" or path.name == "__main__.py":
        return
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id != "print", f"print() in {path.name}:{node.lineno}"
        if isinstance(node, ast.Attribute) and node.attr == "exit":
            assert not (isinstance(node.value, ast.Name) and node.value.id == "sys"), (
                f"sys.exit in {path.name}:{node.lineno}"
            )


def _public_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(servelab.__path__, "servelab."):
        if not info.ispkg and not info.name.endswith("__main__"):
            names.append(info.name)
    return names


@pytest.mark.parametrize("name", _public_modules())
def test_public_api_is_explicit(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    for symbol in exported:
        assert hasattr(module, symbol), f"{name}.__all__ names missing {symbol}"


def test_core_has_no_io_imports() -> None:
    banned = {"aiohttp", "asyncio", "socket", "subprocess", "sqlite3", "asyncssh", "os", "time"}
    for path in (SRC / "core").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                mods = {node.module.split(".")[0]}
            else:
                continue
            assert not (mods & banned), f"core/{path.name} imports {mods & banned}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_aiohttp_and_asyncssh_only_in_io_and_sim(path: Path) -> None:
    """Third-party network clients are translated at the io/ boundary (the simulator serves)."""
    if _layer(path) in ("io", "sim"):
        return
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods = {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            mods = {node.module.split(".")[0]}
        else:
            continue
        found = mods & {"aiohttp", "asyncssh"}
        assert not found, f"{path.relative_to(SRC)}:{node.lineno} imports {sorted(found)}"
