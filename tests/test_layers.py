"""The package's layering, as docs/architecture.md draws it.

The folders of ``gitrelay/`` are its layers, listed here from the bottom up. A
module may import only from its own folder and the folders below it; nothing
imports the gate (``hook``), which is an entry point of its own. The rule is
read off the folder names alone: there is no list of exceptions.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "gitrelay"
LAYERS = ["core", "hook", "store", "sync", "relay", "web", "mcp", "demo", "cli"]
STDLIB = set(sys.stdlib_module_names)
# Third-party packages each layer may import (its own and every layer's below).
THIRD_PARTY = {
    "core": set(),
    "hook": set(),
    "store": {"pygit2", "filelock"},
    "sync": {"watchdog"},
    "relay": {"pydantic", "yaml", "watchdog"},
    "web": {"starlette", "uvicorn", "jinja2"},
    "mcp": {"mcp", "anyio", "pydantic_core"},
    "demo": set(),
    "cli": set(),
}


def layer_of(path: Path) -> str:
    return path.relative_to(PKG).parts[0]


def modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if p.parent != PKG)


def imports_of(path: Path) -> tuple[set[str], set[str]]:
    """(gitrelay layers, other top-level packages) that a module imports."""
    layers: set[str] = set()
    others: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{path}: use absolute gitrelay.<layer> imports"
            names = [node.module or ""]
            if node.module == "gitrelay":
                names = [f"gitrelay.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "gitrelay":
                if len(parts) > 1 and parts[1] in LAYERS:
                    layers.add(parts[1])
            elif parts[0] != "__future__":
                others.add(parts[0])
    return layers, others


def test_every_module_lives_in_a_layer():
    strays = {p.name for p in PKG.glob("*.py")} - {"__init__.py", "__main__.py"}
    assert not strays, f"modules outside a layer folder: {sorted(strays)}"
    assert {p.name for p in PKG.iterdir() if p.is_dir() and p.name != "__pycache__"} == set(LAYERS)


def test_a_layer_imports_only_itself_and_the_layers_below():
    for path in modules():
        here = LAYERS.index(layer_of(path))
        layers, _ = imports_of(path)
        above = {name for name in layers if LAYERS.index(name) > here}
        assert not above, f"{path.relative_to(PKG)} imports from {sorted(above)}, above it"


def test_nothing_imports_the_gate():
    for path in modules():
        if layer_of(path) != "hook":
            assert "hook" not in imports_of(path)[0], f"{path.relative_to(PKG)} imports the gate"


def test_third_party_packages_stay_in_their_layers():
    for path in modules():
        here = LAYERS.index(layer_of(path))
        allowed = STDLIB.union(*(THIRD_PARTY[name] for name in LAYERS[: here + 1]))
        _, others = imports_of(path)
        assert others <= allowed, f"{path.relative_to(PKG)} imports {sorted(others - allowed)}"


def test_every_third_party_import_is_a_declared_dependency():
    text = (PKG.parent / "pyproject.toml").read_text()
    declared = text.split("dependencies = [", 1)[1].split("]", 1)[0].lower().replace("_", "-")
    used = set().union(*(imports_of(p)[1] for p in modules())) - STDLIB
    dist = {"yaml": "pyyaml", "pydantic_core": "pydantic-core"}
    missing = {name for name in used if f'"{dist.get(name, name)}' not in declared}
    assert not missing, f"imported but not declared in pyproject.toml: {sorted(missing)}"


def test_the_gate_starts_without_heavy_imports():
    code = (f"import sys; sys.path.insert(0, {str(PKG.parent)!r}); import gitrelay.hook.gate; "
            "print(' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True,
                         text=True, check=True).stdout.split()
    heavy = {"pygit2", "pydantic", "yaml", "typing", "dataclasses", "subprocess", "pathlib",
             "mcp", "filelock", "watchdog"}
    assert not heavy & set(out), heavy & set(out)
