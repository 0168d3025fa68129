"""The package's layering, as docs/architecture.md draws it.

The folders of ``gitrelay/`` are its layers, listed here from the bottom up. A
module may import only from its own folder and the folders below it; nothing
imports the gate (``gate``), which is an entry point of its own. Inside a layer
the modules import one another without a cycle, counting the imports only the
type checker reads (under ``if TYPE_CHECKING:``) as well, and a dynamic import
(``importlib.import_module``, ``__import__``) keeps the same rule as ``import``.
The rules are read off the folder names alone: there is no list of exceptions.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent.parent / "gitrelay"
LAYERS = ["core", "gate", "store", "sync", "trust", "relay", "inbox", "hosts", "web", "mcp", "demo",
          "cli"]
# A layer's former folder, kept so that what was installed under its name still runs: a
# relay's pre-receive hook written before the gate's folder was renamed imports
# gitrelay.hook.gate. Such a folder belongs to the layer it names and only re-exports it.
FORMER_NAMES = {"hook": "gate"}
STDLIB = set(sys.stdlib_module_names)
# Third-party packages each layer may import (its own and every layer's below).
THIRD_PARTY = {
    "core": set(),
    "gate": set(),
    "store": {"pygit2", "filelock"},
    "sync": {"watchdog", "filelock"},
    "trust": {"pydantic", "yaml"},
    "relay": set(),
    "inbox": set(),
    "hosts": {"psutil", "tomlkit"},
    "web": {"starlette", "uvicorn", "jinja2"},
    "mcp": {"mcp", "anyio", "pydantic_core"},
    "demo": set(),
    "cli": set(),
}


def layer_of(path: Path) -> str:
    folder = path.relative_to(PKG).parts[0]
    return FORMER_NAMES.get(folder, folder)


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
                elif len(parts) > 1 and parts[1] in FORMER_NAMES:
                    layers.add(FORMER_NAMES[parts[1]])
            elif parts[0] != "__future__":
                others.add(parts[0])
    return layers, others


def module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def type_only_nodes(tree: ast.Module) -> set[int]:
    """The nodes under ``if TYPE_CHECKING:``: names for the type checker, never run."""
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden.update(id(sub) for stmt in node.body for sub in ast.walk(stmt))
    return hidden


def runtime_imports(path: Path) -> set[str]:
    """The gitrelay modules a module imports when it runs, at its top or inside a function
    (an import deferred into a function is still a dependency); type-only ones are left out."""
    return gitrelay_imports(path, type_only=False)


def gitrelay_imports(path: Path, *, type_only: bool = True) -> set[str]:
    """The gitrelay modules a module imports, at its top or inside a function, and (with
    ``type_only``) under ``if TYPE_CHECKING:``: a name the type checker reads from
    another module ties the two together as much as one the code runs."""
    tree = ast.parse(path.read_text())
    hidden = set() if type_only else type_only_nodes(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.startswith("gitrelay.")}


def dynamic_imports(path: Path) -> list[tuple[int, str | None]]:
    """Each ``importlib.import_module(...)`` or ``__import__(...)``: its line and the module
    name as far as the source spells it (an f-string's literal start, each name of a literal
    tuple a loop variable runs over), or None where the source does not say."""
    tree = ast.parse(path.read_text())
    loops: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) \
                and isinstance(node.iter, ast.Tuple | ast.List):
            items = [e.value for e in node.iter.elts if isinstance(e, ast.Constant)]
            if len(items) == len(node.iter.elts) and all(isinstance(i, str) for i in items):
                loops[node.target.id] = [str(i) for i in items]
    found: list[tuple[int, str | None]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if called not in {"import_module", "__import__"}:
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            found.append((node.lineno, arg.value))
        elif isinstance(arg, ast.JoinedStr) and arg.values \
                and isinstance(arg.values[0], ast.Constant):
            found.append((node.lineno, str(arg.values[0].value)))
        elif isinstance(arg, ast.Name) and arg.id in loops:
            found.extend((node.lineno, name) for name in loops[arg.id])
        else:
            found.append((node.lineno, None))
    return sorted(found, key=lambda item: (item[0], item[1] or ""))


def cycle_path(graph: dict[str, set[str]], part: list[str]) -> list[str]:
    """One loop through the modules of ``part`` (a strongly connected part of ``graph``),
    as the imports run, from its first module back to it: ``[a, b, c, a]``."""
    members = set(part)
    start = part[0]
    # Breadth first from start's imports back to start: the shortest loop through it.
    before: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & members):
                if nxt == start:
                    path = [start]
                    while node != start:
                        path.append(node)
                        node = before[node]
                    return [start, *reversed(path[1:]), start]
                if nxt not in before:
                    before[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{part} is not a cycle of the graph")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part: list[str] = []
            while True:
                top = stack.pop()
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_module_lives_in_a_layer():
    strays = {p.name for p in PKG.glob("*.py")} - {"__init__.py", "__main__.py"}
    assert not strays, f"modules outside a layer folder: {sorted(strays)}"
    # gitrelay/docs is data, not code: the docs/ pages, shipped for `gitrelay docs`.
    assert not list((PKG / "docs").glob("*.py"))
    assert {p.name for p in PKG.iterdir() if p.is_dir() and p.name not in
            ("__pycache__", "docs")} == set(LAYERS) | set(FORMER_NAMES)


def test_a_layer_imports_only_itself_and_the_layers_below():
    for path in modules():
        here = LAYERS.index(layer_of(path))
        layers, _ = imports_of(path)
        above = {name for name in layers if LAYERS.index(name) > here}
        assert not above, f"{path.relative_to(PKG)} imports from {sorted(above)}, above it"


def test_nothing_imports_the_gate():
    for path in modules():
        if layer_of(path) != "gate":
            assert "gate" not in imports_of(path)[0], f"{path.relative_to(PKG)} imports the gate"


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
    code = (f"import sys; sys.path.insert(0, {str(PKG.parent)!r}); import gitrelay.gate.gate; "
            "print(' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True,
                         text=True, check=True).stdout.split()
    heavy = {"pygit2", "pydantic", "yaml", "typing", "dataclasses", "subprocess", "pathlib",
             "mcp", "filelock", "psutil", "watchdog"}
    assert not heavy & set(out), heavy & set(out)


def layer_graph(layer: str) -> dict[str, set[str]]:
    """Which modules of ``layer`` each of its modules imports, type-only imports included."""
    names = {module_name(p): p for p in modules() if layer_of(p) == layer}
    return {name: {dep for dep in gitrelay_imports(path) if dep in names and dep != name}
            for name, path in names.items()}


def cycle_report(graph: dict[str, set[str]]) -> list[str]:
    """Each cycle of ``graph`` as one line a reader can follow: ``a -> b -> a``, and the
    other modules tangled in the same knot, if any (each is on a loop with these)."""
    lines = []
    for part in cycles(graph):
        loop = cycle_path(graph, part)
        line = " -> ".join(loop)
        others = sorted(set(part) - set(loop))
        lines.append(f"{line} (tangled with them: {', '.join(others)})" if others else line)
    return lines


@pytest.mark.parametrize("layer", LAYERS)
def test_no_cycle_inside_a_layer(layer: str):
    """Within a layer the modules form a tree of imports too: two modules that import each
    other (directly or round a loop, at the top or inside a function, or only for the type
    checker under ``if TYPE_CHECKING:``) are one concept split in two, or two concepts
    tangled. A type both need belongs to the lower of the two, or to a small module of its
    own; a module that needs only part of another's interface can name that part as a
    protocol."""
    found = cycle_report(layer_graph(layer))
    assert not found, (f"modules of {layer}/ that import each other (type-only imports "
                       "count): " + "; ".join(found))


def test_a_dynamic_import_does_not_climb():
    """``importlib.import_module`` and ``__import__`` follow the same rule as ``import``, and
    name their module where this test can read it."""
    for path in modules():
        here = LAYERS.index(layer_of(path))
        for line, name in dynamic_imports(path):
            where = f"{path.relative_to(PKG)}:{line}"
            assert name is not None, f"{where}: a dynamic import whose module the source hides"
            parts = name.split(".")
            if parts[0] != "gitrelay":
                continue
            assert len(parts) > 1 and parts[1] in LAYERS, f"{where}: {name!r} names no layer"
            assert LAYERS.index(parts[1]) <= here, f"{where}: imports {name!r}, above it"
            assert parts[1] != "gate" or layer_of(path) == "gate", f"{where}: imports the gate"


def test_the_rules_above_catch_what_they_name(tmp_path: Path):
    """The helpers see a cycle, a deferred import and a climbing dynamic import."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert cycle_report({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a -> b -> c -> a"]
    assert cycle_report({"a": {"b", "c"}, "b": {"a"}, "c": {"b"}}) == [
        "a -> b -> a (tangled with them: c)"]
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from gitrelay.cli import main\n"
        "def f():\n    from gitrelay.relay import client\n"
        "    import importlib\n    importlib.import_module(f'gitrelay.cli.{x}')\n"
        "    for m in ('_a', '_b'):\n        __import__(m)\n"
        "    __import__(name)\n")
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    assert runtime_imports(probe) == {"gitrelay.relay", "gitrelay.relay.client"}
    assert gitrelay_imports(probe) == {"gitrelay.relay", "gitrelay.relay.client",
                                       "gitrelay.cli", "gitrelay.cli.main"}
    assert dynamic_imports(probe) == [(7, "gitrelay.cli."), (9, "_a"), (9, "_b"), (10, None)]


def test_a_cycle_only_the_type_checker_reads_is_still_a_cycle(tmp_path: Path):
    """Two modules of one layer, one importing the other when it runs and the other naming
    the first only under ``if TYPE_CHECKING:``, are refused, the loop named."""
    (tmp_path / "a.py").write_text("from gitrelay.core.b import check\n")
    (tmp_path / "b.py").write_text("TYPE_CHECKING = False\nif TYPE_CHECKING:\n"
                                   "    from gitrelay.core.a import View\n")
    names = {"gitrelay.core.a": tmp_path / "a.py", "gitrelay.core.b": tmp_path / "b.py"}
    every = {name: gitrelay_imports(path) & names.keys() for name, path in names.items()}
    run = {name: runtime_imports(path) & names.keys() for name, path in names.items()}
    assert cycle_report(run) == []
    assert cycle_report(every) == ["gitrelay.core.a -> gitrelay.core.b -> gitrelay.core.a"]


def terminal_writes(path: Path) -> list[int]:
    """The lines where a module calls ``print`` or names ``sys.stderr``, a person's
    terminal (stdout may be a transport: the MCP server's, a checking child's answer)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        prints = isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print"
        stderr = isinstance(node, ast.Attribute) and node.attr == "stderr" \
            and getattr(node.value, "id", None) == "sys"
        if prints or stderr:
            found.append(node.lineno)
    return sorted(found)


def test_the_library_never_prints():
    """Below the front ends nothing calls ``print`` or writes to ``sys.stderr``: the library
    raises coded errors and logs through :mod:`logging`; only the gate (whose stderr is the
    push's answer), the command line and the demo write to a terminal, and the MCP server's
    stdout is its transport."""
    speaking = {"gate", "demo", "cli"}
    found = [f"{path.relative_to(PKG)}:{line}" for path in modules()
             if layer_of(path) not in speaking for line in terminal_writes(path)]
    assert not found, f"print() or sys.stderr below the front ends: {found}"


def test_a_write_to_the_terminal_is_seen(tmp_path: Path):
    probe = tmp_path / "probe.py"
    probe.write_text("import sys\nprint('x')\nsys.stderr.write('y')\nsys.stdout.write('z')\n"
                     "log.info('fine')\n")
    assert terminal_writes(probe) == [2, 3]


def test_a_former_layer_folder_only_re_exports_its_layer():
    for folder, layer in FORMER_NAMES.items():
        for path in sorted((PKG / folder).rglob("*.py")):
            tree = ast.parse(path.read_text())
            body = [n for n in tree.body if not (isinstance(n, ast.Expr)
                                                 and isinstance(n.value, ast.Constant))]
            for node in body:
                assert isinstance(node, ast.ImportFrom | ast.Assign), (
                    f"{path.relative_to(PKG)}: only imports from gitrelay.{layer} and __all__")
                if isinstance(node, ast.ImportFrom):
                    assert (node.module or "").startswith(f"gitrelay.{layer}."), node.module


def test_policy_decides_over_data_and_fetches_nothing():
    """relay/policy.py judges what it is given: it imports no client, store or sync, and
    calls nothing that fetches, delivers or writes (its callers read first)."""
    path = PKG / "relay" / "policy.py"
    tree = ast.parse(path.read_text())
    imported = {node.module for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module}
    reaching = sorted(m for m in imported if m.startswith(
        ("gitrelay.relay.client", "gitrelay.store", "gitrelay.sync", "gitrelay.relay.reads")))
    assert reaching == [], reaching
    acting = sorted({node.func.attr for node in ast.walk(tree)
                     if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                     and node.func.attr in {"refresh", "fetch", "deliver", "write", "accept",
                                            "handoff", "send_message"}})
    assert acting == [], acting


# A module name two layers share, and why: the front end's side of one concept.
SHARED_NAMES = {
    "inbox.py": {"cli", "inbox"},      # `gitrelay inbox` over the inbox
    "search.py": {"cli", "inbox"},     # `gitrelay search` over search_threads
    "trust.py": {"cli", "trust"},      # `gitrelay trust` over the trust file
    "wording.py": {"cli", "mcp"},      # one error worded for a person, and for an agent
    "gate.py": {"gate", "hook"},       # the gate and its former name's alias
}


def test_no_two_layers_hold_modules_of_one_name_for_different_things():
    layers_of: dict[str, set[str]] = {}
    for path in PKG.rglob("*.py"):
        if path.name in ("__init__.py", "__main__.py") or "docs" in path.parts:
            continue
        layers_of.setdefault(path.name, set()).add(path.relative_to(PKG).parts[0])
    shared = {name: layers for name, layers in layers_of.items() if len(layers) > 1}
    assert shared == SHARED_NAMES, ("a module name in two layers sends a reader to the wrong "
                                    f"file: {shared}")
