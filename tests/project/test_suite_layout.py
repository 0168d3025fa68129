"""The test suite's own layout: test modules live in tests/<folder>/, one folder per layer
of gitrelay/ (plus e2e/ for whole-product and real-host runs and project/ for checks of the
repository itself); they share helpers through the support modules at the top of tests/
(gitcli.py, relaykit.py, forging.py, mcpkit.py, servers/, conftest.py) and never import
one another, so a test file can be moved, split or deleted on its own."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
LAYERS = ("core", "gate", "store", "sync", "trust", "relay", "inbox", "hosts", "web", "mcp",
          "demo", "cli")
FOLDERS = frozenset(LAYERS) | {"e2e", "project"}
SUPPORT_DIRS = frozenset({"data", "servers", "__pycache__"})


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(("." * node.level) + node.module)
            if node.module == "tests":
                names.update(f"tests.{alias.name}" for alias in node.names)
    return names


def is_test_module(name: str) -> bool:
    return name.rsplit(".", 1)[-1].lstrip(".").startswith("test_")


def test_no_module_of_the_suite_imports_a_test_module():
    offenders = {}
    for path in sorted(TESTS.rglob("*.py")):
        hits = sorted(n for n in imported_modules(path) if is_test_module(n))
        if hits:
            offenders[str(path.relative_to(TESTS))] = hits
    assert not offenders, f"import shared helpers from a support module instead: {offenders}"


def test_git_is_run_through_one_helper():
    defining = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("*.py")
                      for node in ast.walk(ast.parse(p.read_text()))
                      if isinstance(node, ast.FunctionDef) and node.name == "git"
                      and node.col_offset == 0)
    assert defining == ["gitcli.py"], defining


def test_the_check_catches_a_test_module_imported_by_another(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text("from tests.test_cli import run\nfrom test_wire import x\n"
                     "import tests.gitcli\nfrom tests import test_trust\n")
    assert sorted(n for n in imported_modules(probe) if is_test_module(n)) == \
        ["test_wire", "tests.test_cli", "tests.test_trust"]


def test_every_module_named_slow_exists():
    from tests.conftest import SLOW_MODULES

    assert {p.stem for p in TESTS.rglob("test_*.py")} >= SLOW_MODULES


def test_test_modules_live_in_one_folder_per_layer():
    misplaced = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py")
                       if p.parent.parent != TESTS or p.parent.name not in FOLDERS)
    assert not misplaced, f"put each test module in tests/<layer>/ ({sorted(FOLDERS)}): {misplaced}"


def test_test_folders_are_the_layers_of_the_package():
    package = {p.name for p in (TESTS.parent / "gitrelay").iterdir()
               if p.is_dir() and (p / "__init__.py").exists()} - {"hook"}
    assert package == set(LAYERS)
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and p.name not in SUPPORT_DIRS
               and not p.name.startswith(".")}
    assert folders == FOLDERS, f"a folder of tests/ names a layer, e2e or project: {folders}"
