"""Tool answers in wire form: a page asked for again is the same page under a new fence."""

from __future__ import annotations

import json
from typing import Any

from gitrelay.inbox.inbox import InboxPage
from gitrelay.mcp.answers import MEMO_SIZE, Answer, AnswerMemo, answer_fenced
from gitrelay.mcp.present import Fenced, present_inbox_fenced
from gitrelay.trust.trust import TrustRules
from tests.kit import RULES, page_of, read_answer


class Presenter:
    """present_inbox_fenced for one page, counting the times it ran."""

    def __init__(self, page: InboxPage, rules: TrustRules = RULES) -> None:
        self.page, self.rules, self.runs = page, rules, 0

    def __call__(self) -> Fenced[Any]:
        self.runs += 1
        return present_inbox_fenced(self.page, caller="bob@acme", rules=self.rules)

    def key(self) -> object:
        return (self.page, "bob@acme", self.rules)


def structured(answer: Answer) -> dict[str, Any]:
    assert answer.structured_content is not None
    text = answer.text
    # Both forms say the same: every preview of the structure is in the text's fence.
    read = read_answer(text, answer.structured_content)
    fenced = {v.field: v.value for v in read.values}
    for item in answer.structured_content["items"]:
        assert fenced.get(f"#{item['seq']}") == item["summary_preview"] or "withheld" in text
    return answer.structured_content


def text_of(answer: Answer) -> str:
    text: str = answer.text
    return text


def token(out: dict[str, Any]) -> str:
    return str(out["items"][0]["provenance"]["fence"])


def test_an_equal_page_is_not_presented_again_and_gets_a_fresh_token() -> None:
    memo = AnswerMemo()
    first_page = Presenter(page_of("Please review the /users change", "Rotate the keys"))
    first_answer = memo.answer(first_page.key(), first_page, structured=True)
    first = structured(first_answer)
    # As the inbox returns it for the next check-in: a new page object, equal to the last.
    again_page = Presenter(page_of("Please review the /users change", "Rotate the keys"))
    again_answer = memo.answer(again_page.key(), again_page, structured=True)
    again = structured(again_answer)
    assert (first_page.runs, again_page.runs) == (1, 0)
    assert token(first) != token(again)
    assert json.dumps(again).replace(token(again), token(first)) == json.dumps(first)
    assert text_of(again_answer).replace(token(again), token(first)) == text_of(first_answer)
    read = read_answer(text_of(again_answer), again)
    assert read.token == token(again)
    assert {(v.author, v.field) for v in read.values} == {
        ("alice@acme", "name"), ("alice@acme", "role"), ("alice@acme", "#1"),
        ("alice@acme", "#2")}


def test_a_new_item_another_cursor_or_other_trust_rules_build_a_new_page() -> None:
    memo = AnswerMemo()
    base = Presenter(page_of("SECRET-ONE"))
    memo.answer(base.key(), base, structured=True)
    blocked = RULES.model_copy(update={"blocked": ["alice@acme"]})
    for changed in (Presenter(page_of("SECRET-ONE", "two")),
                    Presenter(page_of("SECRET-ONE", cursor=10)),
                    Presenter(page_of("SECRET-ONE"), blocked)):
        out = structured(memo.answer(changed.key(), changed, structured=True))
        assert changed.runs == 1
        fresh = answer_fenced(present_inbox_fenced(changed.page, caller="bob@acme",
                                                   rules=changed.rules), structured=True)
        assert json.dumps(out).replace(token(out), "T") == \
            json.dumps(structured(fresh)).replace(token(structured(fresh)), "T")
    hidden = Presenter(page_of("SECRET-ONE"), blocked)
    answer = memo.answer(hidden.key(), hidden, structured=True)
    shown = json.dumps(structured(answer)) + text_of(answer)
    assert hidden.runs == 0  # the blocked page above is the one kept
    assert "SECRET-ONE" not in shown and "Alice Martin" not in shown


def test_the_memo_keeps_the_last_few_pages() -> None:
    memo = AnswerMemo()
    pages = [Presenter(page_of(f"item {n}")) for n in range(MEMO_SIZE + 1)]
    for p in pages:
        memo.answer(p.key(), p)
    for p in reversed(pages[1:]):  # the newest MEMO_SIZE are kept
        memo.answer(p.key(), p)
    assert [p.runs for p in pages] == [1] * (MEMO_SIZE + 1)
    memo.answer(pages[0].key(), pages[0])  # the oldest was let go
    assert pages[0].runs == 2
    memo.clear()
    memo.answer(pages[-1].key(), pages[-1])
    assert pages[-1].runs == 2


def test_a_page_with_nothing_fenced_is_given_again_unchanged() -> None:
    memo = AnswerMemo()
    empty = Presenter(page_of())
    first = structured(memo.answer(empty.key(), empty, structured=True))
    assert structured(memo.answer(empty.key(), empty, structured=True)) == first == {
        "items": [], "next_cursor": None, "cursor": 9, "acknowledged": None,
        "ack_results": [], "index_rebuilt": False, "delivery": None, "sync_warning": None}
    assert empty.runs == 1


def test_by_default_an_answer_is_its_text_alone_and_a_kept_page_too() -> None:
    """What coding hosts show the model: they give it the structured content instead of the
    text whenever there is any, so a default answer has none."""
    memo = AnswerMemo()
    page = Presenter(page_of("Please review the /users change"))
    first = memo.answer(page.key(), page)
    again = memo.answer(page.key(), page)
    assert page.runs == 1
    for answer in (first, again):
        assert answer.structured_content is None
        read = read_answer(text_of(answer), None)
        assert read.by_field()["#1"].value == "Please review the /users change"
    first_token = read_answer(text_of(first), None).token
    again_token = read_answer(text_of(again), None).token
    assert first_token and again_token and first_token != again_token
    assert text_of(again).replace(again_token, first_token) == text_of(first)
    # Asked for the typed form, the same page is built for it (it holds the data).
    typed = memo.answer(page.key(), page, structured=True)
    assert page.runs == 2 and typed.structured_content is not None
