"""The package's layering, as docs/architecture.md draws it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "gitrelay"
GATE_MODULES = {"errors", "ids", "layout", "schema", "objects", "rules", "gate", "gitcli",
                "signing", "terminal"}
ENTRY_POINTS = {"cli", "mcp_server", "gate"}
STDLIB = set(sys.stdlib_module_names)


def imports_of(module: str) -> set[str]:
    """Top-level names a module imports: 'pygit2', 'json', or '.rules' for package modules."""
    tree = ast.parse((PKG / f"{module}.py").read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if node.module:
                    found.add("." + node.module.split(".")[0])
                else:
                    found |= {"." + alias.name for alias in node.names}
            elif node.module:
                found.add(node.module.split(".")[0])
    found.discard("__future__")
    return found


def modules() -> list[str]:
    return sorted(p.stem for p in PKG.glob("*.py") if p.stem not in {"__init__", "__main__"})


def test_gate_modules_use_only_the_standard_library_and_each_other():
    for module in GATE_MODULES:
        for name in imports_of(module):
            if name.startswith("."):
                assert name[1:] in GATE_MODULES, f"{module} imports {name}"
            else:
                assert name in STDLIB, f"{module} imports {name}"


def test_only_gitstore_imports_pygit2():
    users = {m for m in modules() if "pygit2" in imports_of(m)}
    assert users <= {"gitstore"}


def test_only_the_mcp_server_its_answers_and_the_demo_client_import_mcp():
    users = {m for m in modules() if "mcp" in imports_of(m)}
    assert users <= {"mcp_server", "answers", "wire", "demo"}


def test_entry_points_do_not_import_each_other():
    # One exception, by design: `gitrelay mcp` is how the MCP server is started,
    # so the command line may import mcp_server (and nothing imports the cli).
    allowed = {("cli", ".mcp_server")}
    for module in ENTRY_POINTS & set(modules()):
        others = {"." + e for e in ENTRY_POINTS - {module}}
        bad = {name for name in imports_of(module) & others if (module, name) not in allowed}
        assert not bad, f"{module} imports {bad}"


def test_the_gate_starts_without_heavy_imports():
    code = (f"import sys; sys.path.insert(0, {str(PKG.parent)!r}); import gitrelay.gate; "
            "print(' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True,
                         text=True, check=True).stdout.split()
    heavy = {"pygit2", "pydantic", "yaml", "typing", "dataclasses", "subprocess", "pathlib",
             "mcp", "filelock", "watchdog"}
    assert not heavy & set(out), heavy & set(out)


def test_the_client_imports_nothing_above_it():
    # The sync needs the inbox-state merge; it lives in inboxstate, below the client,
    # so that the client never reaches up into the inbox (not even lazily).
    above = {".inbox", ".index", ".present", ".mcp_server", ".cli", ".trust", ".provenance"}
    assert not imports_of("client") & above, imports_of("client") & above
    assert not imports_of("inboxstate") & (above | {".client"}), imports_of("inboxstate")
