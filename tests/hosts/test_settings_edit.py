"""What ``gitrelay setup`` does to the text of a settings file: only the change.

Property tests over JSON documents in many layouts (hosts/jsonedit) and TOML documents
(hosts/tomlentry, through tomlkit): adding gitrelay's entry and taking it out again
gives back the very bytes, every other member keeps its text, and the meaning is
exactly the one asked for; a byte order mark and CRLF line endings (hosts/textform)
come back as they were.
"""

from __future__ import annotations

import json
import tomllib
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitrelay.hosts import jsonedit, textform, tomlentry

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


TOML_ENTRY = {"command": "/home/bob/.local/bin/gitrelay", "args": ["mcp"],
              "env_vars": ["GITRELAY_HOME", "GITRELAY_TRUST"]}


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.lists(TOML_KEYS, min_size=1, max_size=3),
                          st.lists(st.tuples(TOML_KEYS, st.integers()), max_size=3)),
                max_size=4), st.booleans())
def test_adding_and_removing_the_toml_table_gives_back_the_same_bytes(
        tables: list[tuple[list[str], list[tuple[str, int]]]], crlf: bool) -> None:
    lines = ['title = """', "[not.a.table]", '"""', "list = [", "  [1, 2], # [no]", "]"]
    for name, pairs in tables:
        lines.append(f"[{'.'.join(toml_key(k) for k in name)}]  # {name[0]}")
        lines += [f"{toml_key(k)} = {v}" for k, v in pairs]
    text = ("\r\n" if crlf else "\n").join(lines) + ("\r\n" if crlf else "\n")
    try:
        before = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return  # a table named twice: not a document
    body, form = textform.plain(text)
    added = textform.restore(tomlentry.set_entry(body, ("mcp_servers", "gitrelay"), TOML_ENTRY),
                             form)
    assert added.startswith(text) and ("\n" not in added.replace("\r\n", "") if crlf else True)
    assert tomllib.loads(added) == {**before, "mcp_servers": {"gitrelay": TOML_ENTRY}}
    body, form = textform.plain(added)
    removed = tomlentry.set_entry(body, ("mcp_servers", "gitrelay"), None)
    assert textform.restore(removed, form) == text


@pytest.mark.parametrize("text", [
    '{\r\n  "model": "opus"\r\n}\r\n', '\ufeff{\n  "model": "opus"\n}\n',
    '\ufeff{\r\n    "a": [1,\r\n      2]\r\n}', 'model = "x"\r\n', '\ufeffmodel = "x"\n',
    '\ufeff[a]\r\nb = 1\r\n', 'mixed = 1\r\nends = 2\n'])
def test_a_byte_order_mark_and_crlf_line_ends_come_back_as_they_were(text: str) -> None:
    body, form = textform.plain(text)
    assert not body.startswith("\ufeff")
    assert ("\r\n" not in body) == (form.crlf or "\r\n" not in text)
    assert textform.restore(body, form) == text
