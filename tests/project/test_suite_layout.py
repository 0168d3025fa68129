"""The test suite's own layout: test modules live in tests/<folder>/, one folder per layer
of gitrelay/ (plus e2e/ for whole-product and real-host runs and project/ for checks of the
repository itself); they share helpers through one kit, the package tests/kit/ (imported
from its front door, ``tests.kit``), with the real git servers in tests/servers/ and the
fixtures in tests/conftest.py, and never import one another, so a test file can be moved,
split or deleted on its own. Besides conftest.py, the top of tests/ holds only the
runners (scripts, not helpers).

The kit holds each shared concept once: the hermetic environment (tests/kit/hermetic.py),
running git (tests/kit/gitrun.py), and waiting for something (``wait_until``,
tests/kit/waiting.py); the checks below find a copy of any of them."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent
LAYERS = ("core", "gate", "store", "sync", "trust", "relay", "inbox", "hosts", "web", "mcp",
          "demo", "cli")
FOLDERS = frozenset(LAYERS) | {"e2e", "project"}
SUPPORT_DIRS = frozenset({"data", "kit", "servers", "__pycache__"})
KIT = TESTS / "kit"
# The scripts at the top of tests/: run, never imported for helpers (``make test``'s runner
# and the reliability report).
RUNNERS = frozenset({"maketest.py", "report_reliability.py"})
# The suite's own modules a module may import: the kit, the servers and the runners (the
# kit reads how a real-host skip is worded off ``make test``'s runner).
IMPORTABLE = ("tests.kit", "tests.servers", "tests.maketest")


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


def test_the_helpers_are_one_kit():
    top = sorted(p.name for p in TESTS.glob("*.py"))
    assert top == sorted({"conftest.py", *RUNNERS}), (
        f"put a shared helper in the kit (tests/kit/), not at the top of tests/: {top}")
    for runner in RUNNERS:
        assert 'if __name__ == "__main__":' in (TESTS / runner).read_text(), runner
    assert (KIT / "__init__.py").is_file()


def kit_modules() -> list[str]:
    return sorted(p.stem for p in KIT.glob("*.py") if p.stem != "__init__")


def offered_by(text: str) -> list[str]:
    """The names a module lists in its ``__all__``."""
    return [item.value for node in ast.parse(text).body if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            for item in ast.walk(node.value) if isinstance(item, ast.Constant)]


def test_the_kit_offers_each_name_once_through_its_front_door():
    front = (KIT / "__init__.py").read_text()
    offered: dict[str, list[str]] = {}
    for name in kit_modules():
        assert f"from tests.kit.{name} import *" in front, f"tests/kit/__init__.py: {name}"
        listed = offered_by((KIT / f"{name}.py").read_text())
        assert listed, f"tests/kit/{name}.py lists what it offers in __all__"
        for exported in listed:
            offered.setdefault(exported, []).append(name)
    twice = {n: mods for n, mods in offered.items() if len(mods) > 1}
    assert not twice, f"a name the kit offers twice: {twice}"


def own_imports(path: Path) -> list[str]:
    """The suite's own modules ``path`` imports that it may not: any but the kit, the
    servers and the runners (test modules have their own check); in the kit, its front
    door too (a kit module imports its neighbours)."""
    return sorted(n for n in imported_modules(path) if n.startswith("tests.")
                  and not is_test_module(n)
                  and (not any(n == m or n.startswith(m + ".") for m in IMPORTABLE)
                       or (path.parent == KIT and n == "tests.kit")))


def test_the_suite_imports_only_the_kit_the_servers_and_the_runners():
    offenders = {str(p.relative_to(TESTS)): hits for p in sorted(TESTS.rglob("*.py"))
                 if (hits := own_imports(p))}
    assert not offenders, f"import helpers from tests.kit: {offenders}"


def test_the_kit_checks_catch_a_helper_outside_it_or_offered_twice(tmp_path):
    assert offered_by('__all__ = ["Bench", "git"]\nx = 1\n') == ["Bench", "git"]
    assert offered_by("def f():\n    __all__ = ['x']\n") == []
    probe = tmp_path / "test_probe.py"
    probe.write_text("from tests.relaykit import Bench\nfrom tests import hostkit\n"
                     "from tests.kit import git\nfrom tests.kit.relays import Bench\n"
                     "import tests.servers\nfrom tests.maketest import REAL_HOSTS_SKIPPED\n")
    assert own_imports(probe) == ["tests.hostkit", "tests.relaykit"]


# A line may do by hand what the kit does when it says why, with one of these.
RAW_GIT = "# raw git:"          # the test is about the raw call itself
OWN_LOOP = "# polls itself:"    # the loop's end is not a failure (a run's limit, a retry)
# Modules that write git's variables for a process other than a test's: the server's own.
SERVER_SIDE = {"servers/http.py": "the environment nginx gives git http-backend"}


def support_and_tests(home: str) -> dict[str, str]:
    """Every module of the suite but the kit's ``home`` of a concept (and this one, which
    names what it looks for), by path under tests/."""
    return {str(p.relative_to(TESTS)): p.read_text() for p in sorted(TESTS.rglob("*.py"))
            if p not in (KIT / home, Path(__file__).resolve())}


def defined(text: str, names: set[str]) -> list[str]:
    """The module-level functions of ``names`` a module defines (nested helpers are fine)."""
    return [node.name for node in ast.parse(text).body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names]


def raw_git_calls(text: str) -> list[int]:
    """Lines that start ``git`` by hand: ``subprocess.run(["git", ...])`` and the like."""
    lines = text.splitlines()
    found = []
    for node in ast.walk(ast.parse(text)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "subprocess"
                and node.args and isinstance(node.args[0], ast.List) and node.args[0].elts
                and isinstance(node.args[0].elts[0], ast.Constant)
                and node.args[0].elts[0].value == "git"
                and RAW_GIT not in lines[node.lineno - 1]):
            found.append(node.lineno)
    return found


def polling_loops(text: str) -> list[int]:
    """Lines of ``while`` loops that sleep between looks: what ``wait_until`` does."""
    lines = text.splitlines()
    return [node.lineno for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.While) and OWN_LOOP not in lines[node.lineno - 1]
            and any(isinstance(n, ast.Call) and "sleep" in (getattr(n.func, "attr", None),
                                                            getattr(n.func, "id", None))
                    for n in ast.walk(node))]


def hermetic_settings(text: str) -> list[int]:
    """Lines that set git's hermetic variables: what ``tests.kit.hermetic_vars`` does."""
    return [n for n, line in enumerate(text.splitlines(), 1)
            if "GIT_CONFIG_GLOBAL" in line or "GIT_CONFIG_NOSYSTEM" in line]


def test_git_is_run_through_one_helper():
    modules = support_and_tests("gitrun.py")
    defining = sorted(path for path, text in modules.items() if defined(text, {"git"}))
    assert defining == [], f"use tests.kit.git: {defining}"
    by_hand = {path: lines for path, text in modules.items() if (lines := raw_git_calls(text))}
    assert not by_hand, (f"run git with tests.kit.git (or say why not, {RAW_GIT!r}): "
                         f"{by_hand}")


def test_the_hermetic_environment_is_built_in_one_place():
    built = {path: lines for path, text in support_and_tests("hermetic.py").items()
             if path not in SERVER_SIDE and (lines := hermetic_settings(text))}
    assert not built, f"use tests.kit.hermetic_env or set_hermetic: {built}"


def test_waiting_goes_through_wait_until():
    modules = support_and_tests("waiting.py")
    defining = {path: names for path, text in modules.items()
                if (names := defined(text, {"wait_until", "await_until"}))}
    assert not defining, f"use tests.kit.wait_until: {defining}"
    loops = {path: lines for path, text in modules.items() if (lines := polling_loops(text))}
    assert not loops, (f"wait with tests.kit.wait_until or await_until (or say why not, "
                       f"{OWN_LOOP!r}): {loops}")


def test_the_checks_catch_a_copy_of_what_the_kit_does():
    probe = (
        "import os, subprocess, time\n"
        "def git(*args):\n"
        "    return subprocess.run(['git', *args], check=True)\n"
        "def wait_until(ready):\n"
        "    while not ready():\n"
        "        time.sleep(0.1)\n"
        "ENV = {'GIT_CONFIG_GLOBAL': os.devnull}\n"
        "subprocess.run(['git', 'fsck'])  # raw git: the test is about git fsck\n"
        "while True:  # polls itself: ends at a limit without failing\n"
        "    time.sleep(1)\n"
        "while not done():\n"
        "    sleep(1)\n")
    assert defined(probe, {"git"}) == ["git"]
    assert defined(probe, {"wait_until", "await_until"}) == ["wait_until"]
    assert raw_git_calls(probe) == [3]
    assert sorted(polling_loops(probe)) == [5, 11]
    assert hermetic_settings(probe) == [7]


def test_the_check_catches_a_test_module_imported_by_another(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text("from tests.test_cli import run\nfrom test_wire import x\n"
                     "import tests.kit\nfrom tests import test_trust\n")
    assert sorted(n for n in imported_modules(probe) if is_test_module(n)) == \
        ["test_wire", "tests.test_cli", "tests.test_trust"]


def make_check_selection() -> str:
    """The marker expression ``make unit-fast`` (the tests of ``make check``) selects by."""
    recipe = (TESTS.parent / "Makefile").read_text().split("\nunit-fast:", 1)[1]
    found = re.search(r'pytest\b[^\n]* -m "([^"]+)"', recipe.split("\n\n", 1)[0])
    assert found, "make unit-fast runs pytest -m EXPRESSION"
    return found.group(1)


@pytest.mark.slow  # it collects the whole suite once more
def test_make_check_runs_the_fast_tests_of_every_layer():
    selection = make_check_selection()
    assert selection == "not slow and not servers"
    listed = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                             "-p", "no:cacheprovider", "-m", selection, "tests"],
                            cwd=TESTS.parent, capture_output=True, text=True, timeout=600,
                            check=False)
    assert listed.returncode == 0, listed.stdout[-2000:] + listed.stderr[-2000:]
    per_folder = Counter(line.split("/")[1] for line in listed.stdout.splitlines()
                         if line.startswith("tests/") and "::" in line)
    assert not [f for f in (*LAYERS, "project") if not per_folder[f]], per_folder


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
