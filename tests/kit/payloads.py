"""The prompt-injection corpus (tests/data/injection_payloads.json) as test data.

Every payload is a hostile text (or a JSON object) that a teammate could write into any
field; the suites that check what reaches an agent or a page (tests/mcp/test_injection.py,
tests/inbox/test_search.py) take them from here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CORPUS", "NAME_PAYLOADS", "PAYLOADS", "TEXT_PAYLOADS", "Payload"]

DATA = Path(__file__).resolve().parents[1] / "data" / "injection_payloads.json"
CORPUS: list[dict[str, Any]] = json.loads(DATA.read_text())["payloads"]
# Long payloads are cut to this many characters in the big text fields, so that a
# handoff carrying one in ten fields stays under the relay's file size limit.
LONG_CAP = 20_000


@dataclass(frozen=True)
class Payload:
    name: str
    text: str          # the whole hostile text (repeat applied)
    obj: dict[str, Any]  # the payload as a free-form object (payload, metadata, inline)

    def cut(self, limit: int) -> str:
        return self.text[:limit]

    @property
    def big(self) -> str:
        return self.text[:LONG_CAP]


def corpus() -> list[Payload]:
    out = []
    for p in CORPUS:
        text = p["text"] * p["repeat"]
        if p["format"] == "json":
            value = json.loads(p["text"])
            obj = value if isinstance(value, dict) else {"data": value}
        else:
            obj = {"text": text[:LONG_CAP]}
        out.append(Payload(p["name"], text, obj))
    return out


PAYLOADS = corpus()
# Every text field needs at least one character: the empty payload fits none of them.
TEXT_PAYLOADS = [p for p in PAYLOADS if p.text]
# `gitrelay join` refuses a blank name or role.
NAME_PAYLOADS = [p for p in PAYLOADS if p.text.strip()]
