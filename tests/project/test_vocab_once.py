"""Each enumeration and limit that more than one module uses is defined once, in
``core/vocab.py`` (or ``core/layout.py`` for the format's names), and imported where
it is used: the hosts, the hook events, the inbox item kinds, the delivery results,
the acks bound, the summary preview, the error message cap, the waiter's default."""

from __future__ import annotations

import ast
from pathlib import Path

from gitrelay.core import vocab

PKG = Path(__file__).resolve().parent.parent.parent / "gitrelay"
ENUMERATIONS = {name: frozenset(value) for name, value in vars(vocab).items()
                if name.isupper() and isinstance(value, tuple)
                and all(isinstance(v, str) for v in value)}
LIMITS = {"PREVIEW": vocab.SUMMARY_PREVIEW_CHARS, "MESSAGE": vocab.ERROR_MESSAGE_CHARS,
          "ACK": vocab.ACK_ITEMS_MAX, "WAIT_DEFAULT": vocab.HOOK_WAIT_SECONDS}


def literal(node: ast.expr) -> object:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def test_the_enumerations_are_there():
    assert {"HOSTS", "HOOK_EVENTS", "INBOX_KINDS", "DELIVERIES", "DELIVERY_MODES",
            "INTENTS"} <= set(ENUMERATIONS)


def test_no_module_spells_out_an_enumeration_or_a_limit_again():
    found = []
    for path in sorted(PKG.rglob("*.py")):
        if path == PKG / "core" / "vocab.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Tuple | ast.List | ast.Set):
                value = literal(node)
                if isinstance(value, tuple | list | set) and len(value) > 1 \
                        and all(isinstance(v, str) for v in value):
                    same = [n for n, e in ENUMERATIONS.items() if frozenset(value) == e]
                    if same:
                        found.append(f"{path.relative_to(PKG)}:{node.lineno} is {same[0]}")
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                name, value = node.targets[0].id, literal(node.value)
                for part, limit in LIMITS.items():
                    if part in name and value == limit and not isinstance(value, bool):
                        found.append(f"{path.relative_to(PKG)}:{node.lineno} {name} = {value}")
    assert not found, found


def test_one_line_is_one_function():
    """A person's one-line text is :func:`gitrelay.core.readable.one_line`; the refusal's
    line (``core.terminal.message_line``) and a page's (``web.text.page_line``) do other
    things and say so by name."""
    defined = [f"{path.relative_to(PKG)}" for path in sorted(PKG.rglob("*.py"))
               for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.FunctionDef) and node.name.strip("_") == "one_line"]
    assert defined == ["core/readable.py"], defined
