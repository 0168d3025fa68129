"""What ``gitrelay setup`` does to the text of a settings file: only the change.

Property tests over JSON documents in many layouts (relay/jsonedit) and a TOML scan
checked against tomllib (relay/tomledit): adding gitrelay's entry and taking it out
again gives back the very bytes, every other member keeps its text, and the meaning
is exactly the one asked for.
"""

from __future__ import annotations

import json
import tomllib
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitrelay.hosts import jsonedit, tomledit

KEYS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30),
                    st.sampled_from(["1e400", "-5e-400", "0.1", "1.0", "3.14159265358979323846"])
                    .map(Decimal), st.text(max_size=8))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(KEYS, inner, max_size=3), max_leaves=12)
DOCS = st.dictionaries(KEYS, VALUES, max_size=5)
LAYOUTS = st.sampled_from([None, 2, 4, "\t"])
ENTRY = {"type": "stdio", "command": "/home/bob/.local/bin/gitrelay", "args": ["mcp"]}


def render(value: Any, indent: int | str | None, crlf: bool) -> str:
    """``value`` as json.dumps lays it out, with numbers written exactly."""
    unit = " " * indent if isinstance(indent, int) else indent
    nl = "\r\n" if crlf else "\n"

    def out(v: Any, at: str) -> str:
        if isinstance(v, Decimal):
            return str(v)
        if not isinstance(v, dict | list) or not v:
            return json.dumps(v, ensure_ascii=False)
        pairs = ([json.dumps(k, ensure_ascii=False) + ": " + out(x, at + (unit or ""))
                  for k, x in v.items()] if isinstance(v, dict)
                 else [out(x, at + (unit or "")) for x in v])
        a, b = "{}" if isinstance(v, dict) else "[]"
        if unit is None:
            return a + ", ".join(pairs) + b
        inner = at + unit
        return a + nl + ("," + nl).join(inner + p for p in pairs) + nl + at + b

    return out(value, "") + nl


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(DOCS, LAYOUTS, st.booleans())
def test_adding_and_removing_an_entry_gives_back_the_same_bytes(
        doc: dict[str, Any], indent: int | str | None, crlf: bool) -> None:
    text = render(doc, indent, crlf)
    old = jsonedit.loads(text)
    assert jsonedit.same(old, doc)
    servers = old.get("mcpServers")
    new = {**old, "mcpServers": {**(servers if isinstance(servers, dict) else {}),
                                 "gitrelay": ENTRY}}

    added = jsonedit.edit(text, old, new)

    assert jsonedit.same(jsonedit.loads(added), new)  # exactly the meaning asked for
    if "mcpServers" in old:
        return
    # Every byte before the root's closing brace is kept; the entry comes after it.
    kept = text[:text.rstrip().rfind("}")].rstrip()
    assert added.startswith(kept)
    assert jsonedit.edit(added, new, old) == text  # and taking it out restores the file


@pytest.mark.parametrize("text", [
    '{"a": NaN}', '{"a": Infinity}', '[1, -Infinity]', '{"a": 1,}', "{'a': 1}",
    '\ufeff{"a": 1}', '{"a": 1} // note', '{"a": "\x01"}'])
def test_what_is_not_json_is_refused_with_its_line(text: str) -> None:
    with pytest.raises(jsonedit.EditError) as err:
        jsonedit.loads(text)
    assert err.value.line == 1


TOML_KEYS = st.one_of(st.from_regex(r"[A-Za-z0-9_-]{1,5}", fullmatch=True),
                      st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]),
                              min_size=1, max_size=5))


def toml_key(key: str) -> str:
    import re

    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key, ensure_ascii=False)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.lists(TOML_KEYS, min_size=1, max_size=3),
                          st.lists(st.tuples(TOML_KEYS, st.integers()), max_size=3)),
                max_size=4))
def test_the_toml_scan_finds_every_table_as_tomllib_reads_it(
        tables: list[tuple[list[str], list[tuple[str, int]]]]) -> None:
    lines = ['title = """', "[not.a.table]", '"""', "list = [", "  [1, 2], # [no]", "]"]
    for name, pairs in tables:
        lines.append(f"[{'.'.join(toml_key(k) for k in name)}]")
        lines += [f"{toml_key(k)} = {v}" for k, v in pairs]
    text = "\n".join(lines) + "\n"
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return  # a table named twice: not a document
    found = [it.key for it in tomledit.scan(text) if it.kind == "table"]
    assert found == [tuple(name) for name, _ in tables]
