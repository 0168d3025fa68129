"""Setting one table of a TOML file, every other line kept as the person wrote it.

``gitrelay setup codex`` puts gitrelay's ``[mcp_servers.gitrelay]`` into Codex's
``config.toml`` and takes it out again. tomlkit reads the document with its layout
(comments, blank lines, key order, quoting) and writes back only what changed, so the
table is found however it is spelled: a ``[mcp_servers.gitrelay]`` header, a quoted
``["mcp_servers"."gitrelay"]``, dotted keys (``mcp_servers.gitrelay.command = …``)
or an inline table (``gitrelay = {command = …}`` under ``[mcp_servers]``), and an
existing one is updated in its own spelling. The caller checks the result with
:mod:`tomllib`.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import InlineTable, Table

__all__ = ["set_entry"]


def _parent(doc: tomlkit.TOMLDocument, keys: tuple[str, ...], create: bool) -> Any:
    node: Any = doc
    for key in keys:
        if key not in node:
            if not create:
                return None
            node[key] = tomlkit.table(is_super_table=True)
        node = node[key]
        if not isinstance(node, MutableMapping):  # a table, inline or of dotted keys
            raise ValueError(f"{'.'.join(keys)} is not a table")
    return node


def _implicit(node: object) -> bool:
    """A table that no header of its own names (``[a.b]`` makes ``a`` one; so do
    dotted keys): it goes once nothing is left in it."""
    return isinstance(node, Table) and node.is_super_table()


def set_entry(text: str, key: tuple[str, ...], entry: Mapping[str, Any] | None) -> str:
    """``text`` with the table at ``key`` set to ``entry`` (None: taken out). A table
    that is there keeps its spelling and the order of its keys; a new one is added as
    a ``[a.b]`` table at the end. ValueError when the text is not TOML tomlkit can
    edit, or something on the way is not a table."""
    try:
        doc = tomlkit.parse(text)
        *above, name = key
        parent = _parent(doc, tuple(above), create=entry is not None)
        if entry is None:
            if parent is None or name not in parent:
                return text
            last = list(doc.keys())[-1:] == [key[0]] and _implicit(doc[key[0]])
            del parent[name]
            for depth in range(len(above), 0, -1):  # empty tables the entry implied
                node = _parent(doc, tuple(above[:depth - 1]), create=False)
                if node is not None and not node[above[depth - 1]] and _implicit(
                        node[above[depth - 1]]):
                    del node[above[depth - 1]]
            out = tomlkit.dumps(doc)
            if last and out.endswith("\n\n") and not text.endswith("\n\n"):
                out = out[:-1]  # the blank line that set it apart from what came before
            return out
        if name in parent and isinstance(parent[name], Table | InlineTable):
            table = parent[name]
            for k in [k for k in table if k not in entry]:
                del table[k]
            for k, v in entry.items():
                if k not in table or table[k].unwrap() != v:
                    table[k] = v
        else:
            if name in parent:
                del parent[name]
            table = tomlkit.table()
            for k, v in entry.items():
                table[k] = v
            parent[name] = table
        return tomlkit.dumps(doc)
    except (TOMLKitError, KeyError, TypeError) as exc:
        raise ValueError(str(exc)) from None
