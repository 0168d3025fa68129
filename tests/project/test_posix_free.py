"""gitrelay's own code imports nothing POSIX-only, so it runs on Windows as well.

A static check reads every module's imports (the dynamic ones included) for the
modules only POSIX systems have. A run check then makes those modules unimportable
for gitrelay's code (``builtins.__import__`` replaced for importers named
``gitrelay.*``, through a ``sitecustomize`` every Python process of the run loads),
imports every module of the package, and runs ``gitrelay demo`` to its end: the demo
starts real ``gitrelay mcp`` processes, which load the blocker too. (The relay's
pre-receive hook runs ``python -I -S``, which loads no ``sitecustomize``; its imports
are the gate's, which the static check and the import of every module cover.)
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent.parent / "gitrelay"
POSIX_ONLY = ("fcntl", "posix", "pwd", "grp", "termios", "resource")

BLOCKER = f'''
import builtins, os

POSIX_ONLY = {POSIX_ONLY!r}
_import = builtins.__import__


def _guarded(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {{}}).get("__name__") or ""
    if level == 0 and name.split(".")[0] in POSIX_ONLY and (
            importer == "gitrelay" or importer.startswith("gitrelay.")):
        raise ImportError(f"{{name}} is POSIX-only (imported by {{importer}})")
    return _import(name, globals, locals, fromlist, level)


builtins.__import__ = _guarded
log = os.environ.get("POSIX_BLOCKER_LOG")
if log:
    with open(log, "a") as f:
        f.write(f"{{os.getpid()}}\\n")
'''

IMPORT_ALL = """
import importlib, pkgutil, sys
import gitrelay
names = [m.name for m in pkgutil.walk_packages(gitrelay.__path__, "gitrelay.")
         if not m.name.endswith(".__main__")]  # __main__ runs the command
for name in names:
    importlib.import_module(name)
print(len(names))
"""


def module_imports(path: Path) -> set[str]:
    """The top-level names a module imports, statically or through import_module."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and node.args \
                and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) \
                and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                    "import_module", "__import__"):
            found.add(node.args[0].value.split(".")[0])
    return found


def test_no_module_imports_a_posix_only_module() -> None:
    offenders = {str(p.relative_to(PKG)): sorted(module_imports(p) & set(POSIX_ONLY))
                 for p in sorted(PKG.rglob("*.py"))}
    assert not {k: v for k, v in offenders.items() if v}


@pytest.fixture
def blocked_env(tmp_path: Path) -> dict[str, str]:
    from tests.kit import hermetic_env

    site = tmp_path / "blocker"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    env = hermetic_env(tmp_path / "home")
    env["PYTHONPATH"] = str(site)
    env["POSIX_BLOCKER_LOG"] = str(tmp_path / "blocked-pids")
    return env


def test_the_blocker_refuses_a_posix_only_module_to_gitrelay_only(blocked_env: dict[str, str]
                                                                   ) -> None:
    code = ("exec('import fcntl', {'__name__': 'gitrelay.store.x'})")
    refused = subprocess.run([sys.executable, "-c", code], env=blocked_env,
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode != 0
    assert "fcntl is POSIX-only (imported by gitrelay.store.x)" in refused.stderr
    allowed = subprocess.run([sys.executable, "-c", "import fcntl, os"], env=blocked_env,
                             capture_output=True, text=True, timeout=60, check=False)
    assert allowed.returncode == 0, allowed.stderr


def test_every_module_imports_without_posix_only_modules(blocked_env: dict[str, str]) -> None:
    proc = subprocess.run([sys.executable, "-c", IMPORT_ALL], env=blocked_env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) > 100


@pytest.mark.slow  # the whole demo: a relay, two real `gitrelay mcp` processes
def test_the_demo_runs_to_its_end_without_posix_only_modules(blocked_env: dict[str, str],
                                                            tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "gitrelay", "demo"], env=blocked_env,
                          capture_output=True, text=True, timeout=600, check=False,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "What just happened" in proc.stdout
    pids = (tmp_path / "blocked-pids").read_text().split()
    assert len(set(pids)) >= 3, pids  # the demo and its two `gitrelay mcp` processes
