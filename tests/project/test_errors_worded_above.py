"""Every error is a value built once, and only the front ends put it into words.

Below ``cli/`` and ``mcp/`` an error carries a code, the offending field or commit and
its next step as a :class:`~gitrelay.core.errors.NextStep`; ``cli/wording.py`` words
each step for a person (a command to run) and ``mcp/wording.py`` for an agent (a tool
to call). These tests read the package's source (``ast``) for free-text advice where an
error is built, and ask both wordings for every step.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from gitrelay.cli import wording as for_people
from gitrelay.core.errors import (
    DEFAULT_NEXT_STEP,
    ERRORS_BY_NAME,
    NEXT_STEPS,
    InvalidArgument,
    NextStep,
    RelayError,
)
from gitrelay.mcp import wording as for_agents

PKG = Path(__file__).resolve().parent.parent.parent / "gitrelay"
FRONT_ENDS = ("cli", "mcp")
# Functions that build an error from a rule name and a message.
FACTORIES = {"error_for_rule", "refuse"}
# Advice in an error's message: a command to run, or a sentence telling what to do.
# A verb may open a sentence or follow a colon, a semicolon or ", or" in any case ("no
# identity: pass --as HANDLE, or join a relay first").
ADVICE = re.compile(r"`gitrelay\b|\bgitrelay (?:join|init|setup|trust|doctor|profile)\b|"
                    r"(?:^|[.;!?]\s+)(?:Run|Try|Check|Ask|Pass|Use|Give|Start|Search|Fix|Create|"
                    r"Install|Load|Restore|Rename|Add|Set|See|Call|Omit|Accept|Register|Join|"
                    r"Tell|Contact)\b|"
                    r"(?:[.;:!?]\s+|,\s+or\s+|\bthen\s+)(?i:run|try|check|ask|pass|use|give|"
                    r"start|search|fix|create|install|load|restore|rename|add|set|see|call|"
                    r"omit|accept|register|join|tell|contact|rerun|retry|re-run|wait|make|"
                    r"remove|delete|upgrade|choose|name|open|send)\b")


def sources() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text())) for path in sorted(PKG.rglob("*.py"))]


def below_front_ends(path: Path) -> bool:
    return path.relative_to(PKG).parts[0] not in FRONT_ENDS


def error_classes(trees: list[tuple[Path, ast.Module]]) -> set[str]:
    """The names of RelayError and of every class the package derives from it."""
    names = {cls.__name__ for cls in ERRORS_BY_NAME.values()}
    grew = True
    while grew:
        grew = False
        for _, tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and node.name not in names and any(
                        (isinstance(b, ast.Name) and b.id in names)
                        or (isinstance(b, ast.Attribute) and b.attr in names)
                        for b in node.bases):
                    names.add(node.name)
                    grew = True
    return names


def builders(tree: ast.Module, classes: set[str]) -> set[str]:
    """The functions of a module that return an error they build (``-> InvalidArgument``)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.returns is not None:
            returned = ast.unparse(node.returns).strip("'\"").split(".")[-1]
            if returned in classes:
                found.add(node.name)
    return found


def callee(node: ast.Call) -> str:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return ""


def texts(node: ast.expr) -> list[str]:
    """The literal text of a message: its string constants and f-string parts, joined as
    they would read (an f-string's fields stand in as "X")."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return ["".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values)]
    if isinstance(node, ast.BinOp):
        left, right = texts(node.left), texts(node.right)
        if left and right:
            return [left[-1] + right[0]]
        return left + right
    return []


def error_constructions() -> list[tuple[Path, ast.Call]]:
    trees = sources()
    classes = error_classes(trees)
    out = []
    for path, tree in trees:
        made = classes | FACTORIES | builders(tree, classes) | {"replaced"}
        out += [(path, node) for node in ast.walk(tree)
                if isinstance(node, ast.Call) and callee(node) in made]
    return out


def test_the_scan_sees_the_errors_it_judges() -> None:
    built = error_constructions()
    assert len(built) > 200
    assert {callee(call) for _, call in built} >= {"InvalidArgument", "ConfigError",
                                                   "RelayUnavailable", "refuse", "replaced"}


def test_nothing_in_the_package_gives_or_reads_a_hint() -> None:
    found = []
    for path, tree in sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "hint":
                found.append(f"{path.relative_to(PKG)}:{node.value.lineno}: hint=")
            if isinstance(node, ast.Attribute) and node.attr == "hint":
                found.append(f"{path.relative_to(PKG)}:{node.lineno}: .hint")
    assert not found, "an error names its next step as a NextStep:\n" + "\n".join(found)


def test_no_error_below_the_front_ends_is_built_with_advice_in_words() -> None:
    found = []
    for path, call in error_constructions():
        if not below_front_ends(path):
            continue
        where = f"{path.relative_to(PKG)}:{call.lineno}"
        for arg in [*call.args, *(k.value for k in call.keywords if k.arg != "next_step")]:
            found += [f"{where}: {text!r}" for text in texts(arg) if ADVICE.search(text)]
        for kw in call.keywords:
            if kw.arg == "next_step" and isinstance(kw.value, ast.Constant):
                found.append(f"{where}: next_step={kw.value.value!r} (a NextStep, not text)")
    assert not found, ("advice is the front ends' to word: give a NextStep (and the data "
                       "it needs) instead:\n" + "\n".join(found))


def test_the_scan_finds_advice_where_it_is_written() -> None:
    bad = ast.parse('raise ConfigError(f"{path} is broken. Run `gitrelay join` again.")\n'
                    'raise InvalidArgument("x", next_step="join")\n')
    assert [t for c in ast.walk(bad) if isinstance(c, ast.Call)
            for a in c.args for t in texts(a) if ADVICE.search(t)]


def test_no_module_changes_an_error_after_it_is_made() -> None:
    err = InvalidArgument("bad", field="x")
    for name, value in (("message", "other"), ("next_step", NextStep.JOIN), ("data", {})):
        with pytest.raises(AttributeError):
            setattr(err, name, value)
    with pytest.raises(TypeError):
        err.data["field"] = "y"  # type: ignore[index]
    with pytest.raises(TypeError):
        RelayError("x", hint="Run gitrelay join.")
    again = err.replaced(next_step=NextStep.LIST_TEAMMATES, did_you_mean="bob@acme")
    assert (type(again), again.message, again.field) == (InvalidArgument, "bad", "x")
    assert again.next_step is NextStep.LIST_TEAMMATES and err.next_step is None


def test_every_kind_of_error_has_a_next_step() -> None:
    assert set(DEFAULT_NEXT_STEP) == set(ERRORS_BY_NAME) - {"relay_error"}


def mcp_tools() -> set[str]:
    tree = ast.parse((PKG / "mcp" / "tools.py").read_text())
    return {node.name for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and any(
                isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute)
                and d.func.attr in ("tool", "relay_tool") for d in node.decorator_list)}


# A command-line flag as a person types it (--as, --signing-key), never in an agent's advice.
FLAG = re.compile(r"(?<![\w-])--[a-z]")


@pytest.mark.parametrize("step", NEXT_STEPS, ids=lambda s: s.value)
def test_every_next_step_is_worded_for_a_person_and_for_an_agent(step: NextStep) -> None:
    tools = mcp_tools()
    assert {"list_teammates", "check_inbox", "view_thread", "search_threads"} <= tools
    assert step in for_people.STEP_TEXT and step in for_agents.STEP_TEXT
    bare = RelayError("refused", next_step=step)
    full = RelayError("refused", next_step=step, thread_id="0VKDWJ5P3R8Q2M4N6T7V9X1Z3B",
                      sender="carol@acme", path="/home/alice/.gitrelay/config.json",
                      relay="ssh://git@git.acme.dev/relay.git", queued=True)
    for err in (bare, full):
        person, agent = for_people.next_step_text(err), for_agents.next_step_text(err)
        assert person and agent and person != agent, step
        assert not [t for t in tools if re.search(rf"\b{t}\b", person)], person
        assert not FLAG.search(agent), agent
