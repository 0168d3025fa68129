"""One comparison of handles, ``core.ids.handle_key`` (and ``same_handle`` on it).

Every place that asks "is this the same teammate?" keys handles through it: the
gate's rules, the policy's "is this me", the trust file's lookups, the hooks'
withholding, the people's text. A trust file's ``blocked`` entries read more
generously on top of it (compatibility forms, surrounding space), so that blocking
errs on the side of blocking.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gitrelay.cli import render
from gitrelay.core.ids import handle_key, same_handle
from gitrelay.relay import policy
from gitrelay.trust.trust import TrustRules
from gitrelay.trust.trustkeys import blocking_key
from gitrelay.trust.withholding import Withholding

PKG = Path(__file__).resolve().parent.parent.parent / "gitrelay"


def test_handles_compare_without_case() -> None:
    assert same_handle("Bob@Acme", "bob@acme")
    assert not same_handle("bob@acme", "bobby@acme")
    assert handle_key("Alice@ACME") == "alice@acme"


def test_a_blocked_entry_reads_more_generously_than_a_handle() -> None:
    # Full-width letters and surrounding space name the same blocked sender...
    assert blocking_key(" ＣＡＲＯＬ@acme ") == blocking_key("carol@acme") == "carol@acme"
    # ...but are not the same handle for any other purpose.
    assert not same_handle("ＣＡＲＯＬ@acme", "carol@acme")
    assert blocking_key("Carol@Acme") == handle_key("Carol@Acme")


def test_the_trust_file_keys_teammates_and_blocks_as_before() -> None:
    rules = TrustRules.model_validate({
        "version": 1, "teammates": {"Alice@Acme": {"auto_read": True}},
        "blocked": ["ＣＡＲＯＬ@acme"]})
    entry = rules.entry_for("alice@acme")
    assert entry is not None and entry.auto_read
    assert rules.entry_for("alicia@acme") is None
    assert rules.is_blocked("carol@ACME")
    assert not rules.is_blocked("alice@acme")
    with pytest.raises(ValueError, match="are the same teammate"):
        TrustRules.model_validate({"version": 1, "teammates": {"Bob@acme": None,
                                                              "bob@ACME": None}})


def test_the_policy_never_withholds_your_own_words() -> None:
    rules = TrustRules.model_validate({"version": 1, "blocked": ["Carol@acme"]})
    assert Withholding.of("alice@acme", rules).withheld("carol@acme")
    assert not Withholding.of("CAROL@acme", rules).withheld("carol@acme")
    assert not Withholding.of("alice@acme", rules).withheld("bob@acme")
    assert policy.withheld_in_search("alice@acme", "carol@acme", rules)


def test_people_see_a_profile_whatever_the_case_of_the_handle() -> None:
    profiles = {handle_key("Bob@Acme"): {"name": "Bob Chen"}}
    assert render.person("BOB@acme", profiles) == "Bob Chen <BOB@acme>"
    assert render.person("dave@acme", profiles) == "dave@acme"


def test_no_module_compares_handles_its_own_way() -> None:
    """Outside ``core/ids.py`` no ``casefold()`` result is tested for equality with another
    value (a keyword such as ``me`` aside), and the old
    variants (``policy.is_self``, ``trust.normalize_handle``) are gone."""
    found = []
    for path in sorted(PKG.rglob("*.py")):
        if path == PKG / "core" / "ids.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.Eq | ast.NotEq):
                sides = [node.left, *node.comparators]
                if any(isinstance(s, ast.Constant) for s in sides):
                    continue  # a keyword (``me``), not a second handle
                if any(isinstance(s, ast.Call) and isinstance(s.func, ast.Attribute)
                       and s.func.attr == "casefold" for s in sides):
                    found.append(f"{path.relative_to(PKG)}:{node.lineno}")
            if isinstance(node, ast.FunctionDef) and node.name in {"is_self",
                                                                   "normalize_handle"}:
                found.append(f"{path.relative_to(PKG)}:{node.lineno} def {node.name}")
    assert not found, found


def test_the_agent_the_hooks_and_a_person_withhold_the_same_senders() -> None:
    """The front ends that load the trust file (Withholding.of) and the hooks' start
    context (Withholding.of_keys over the cached blocked keys) decide through one rule,
    for every spelling of a handle."""
    from gitrelay.trust.trust import TrustRules
    from gitrelay.trust.withholding import withheld_from

    rules = TrustRules.model_validate({"version": 1, "blocked": ["Mallory@External", "eve@x"]})
    keys = rules.blocking_keys()
    for author in ["mallory@external", " MALLORY@external", "ｍａｌｌｏｒｙ@external",
                   "eve@x", "bob@acme", "alice@acme", "ALICE@ACME"]:
        loaded = Withholding.of("alice@acme", rules).withheld(author)
        assert loaded == Withholding.of_keys("alice@acme", keys).withheld(author), author
        assert loaded == withheld_from("alice@acme", author, keys), author
        assert loaded == (author.strip().casefold() not in ("alice@acme", "bob@acme")), author
    # A trust file that cannot be read: every teammate withheld, never yourself.
    assert Withholding.of_keys("alice@acme", None).withheld("bob@acme")
    assert not Withholding.of_keys("alice@acme", None).withheld("Alice@acme")
    # A person who asked to see them: nobody withheld.
    assert not Withholding.of("alice@acme", rules, shown=True).withheld("eve@x")
