"""Where gitrelay meets the MCP SDK: never on the server's start path, and through the
SDK's public API only where it does (the in-process transport, the demo's client).

Read from the source: no import of a private SDK module or name, and no use of an
attribute the SDK keeps private (``server._tool_manager``, ``_lowlevel_server`` ...),
anywhere in gitrelay. A new SDK release then either keeps working or fails at a
documented name, never inside a part it may change in a minor release. And a real
``gitrelay mcp`` start loads no module of the SDK (docs/performance.md, "Start-up").
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent.parent / "gitrelay"
SDK = ("mcp", "mcp_types")
# Modules of the SDK that hold its internals, though their names are not underscored.
INTERNAL_MODULES = ("mcp.server.mcpserver.utilities", "mcp.server.mcpserver.tools",
                    "mcp.server.mcpserver.prompts", "mcp.server.mcpserver.resources",
                    "mcp.server.runner", "mcp.server.lowlevel")
# Private attributes of the SDK's objects (gitrelay's own are named differently).
SDK_PRIVATE = {"_tool_manager", "_prompt_manager", "_resource_manager", "_lowlevel_server",
               "_handle_call_tool", "_mcp_server", "_subscriptions"}


def sdk_uses(path: Path) -> list[str]:
    """Each private part of the SDK that ``path`` reaches, as ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        modules: list[str] = []
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            modules, names = [node.module], [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        for module in modules:
            if module.split(".")[0] not in SDK:
                continue
            if any(part.startswith("_") for part in module.split(".")) \
                    or module.startswith(INTERNAL_MODULES):
                found.append(f"{node.lineno}: import from {module}")
            found += [f"{node.lineno}: {module}.{name}" for name in names
                      if name.startswith("_")]
        if isinstance(node, ast.Attribute) and node.attr in SDK_PRIVATE:
            found.append(f"{node.lineno}: .{node.attr}")
    return found


def scanned() -> list[Path]:
    """Every module of gitrelay, as the check reads them."""
    return sorted(PKG.rglob("*.py"))


def test_no_module_of_gitrelay_reaches_a_private_part_of_the_mcp_sdk() -> None:
    found = {str(p.relative_to(PKG)): uses for p in scanned() if (uses := sdk_uses(p))}
    assert found == {}, found


def test_the_check_reads_every_module_of_the_mcp_server() -> None:
    mcp_modules = sorted((PKG / "mcp").glob("*.py"))
    names = {p.stem for p in mcp_modules}
    assert {"agentserver", "state", "tools", "prompts", "resources"} <= names
    read = set(scanned())
    assert [p.name for p in mcp_modules if p not in read] == []
    # the one server module that uses the SDK is among them, so the check has something to read
    assert {p.stem for p in mcp_modules if "from mcp." in p.read_text()} == {"inprocess"}


def test_serving_mcp_loads_no_module_of_the_sdk() -> None:
    """What ``gitrelay mcp`` imports before it answers: the CLI and the server, with every
    tool registered (the SDK alone took longer to import than all of it)."""
    probe = ("import sys\n"
             "from gitrelay.cli import main\n"
             "from gitrelay.mcp.agentserver import build_server\n"
             "build_server(lambda: None)\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types')))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, cwd=PKG.parent)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata\n"
                      "from mcp.shared._callable_inspection import is_async_callable\n"
                      "from mcp.server import _secret\n"
                      "from mcp.server.mcpserver import MCPServer\n"
                      "tools = MCPServer()._tool_manager\n")
    assert sdk_uses(sample) == ["1: import from mcp.server.mcpserver.utilities.func_metadata",
                                "2: import from mcp.shared._callable_inspection",
                                "3: mcp.server._secret", "5: ._tool_manager"]
