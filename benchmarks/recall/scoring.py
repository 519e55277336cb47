"""When does a piece of text hold the answer to a question? One rule for every strategy.

* **Exact answer string**: an answer (or one of its listed spellings, e.g.
  ``October 4`` / ``Oct 4``) occurs case-insensitively, with any run of
  whitespace matching a space, and not glued to a longer word or number
  (``750 ms`` does not match inside ``1750 ms``).
* **Counting questions** ("how many times did the routing-api deploy fail?"):
  the count is *present* when every event's own detail (its build, run or case
  number) occurs, so a reader could count them; or when the text states the
  count next to the subject: the number (digits or word) followed by ``times``
  or ``x``, within 150 characters of every subject keyword.
* **Newest first** (updated values): over the items an agent saw in order
  (hits, then expansions), the first item holding the latest value comes no
  later than the first holding the stale value (an item holding both, such as
  "moved from October 3 to October 4", counts as latest first).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .facts import QA

NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine",
                10: "ten", 11: "eleven", 12: "twelve"}
_SKIP_KEYS = frozenset({"type", "id", "call_id", "tool_use_id", "tool_call_id", "role", "timestamp"})


@functools.lru_cache(maxsize=4096)
def answer_regex(answer: str) -> re.Pattern[str]:
    body = r"\s+".join(re.escape(w) for w in answer.split())
    return re.compile(rf"(?<!\w){body}(?!\w)", re.IGNORECASE)


def count_stated(qa: QA, text: str) -> bool:
    n = int(qa.answers[0])
    alts = [str(n)] + ([NUMBER_WORDS[n]] if n in NUMBER_WORDS else [])
    pattern = re.compile(rf"(?<!\w)(?:{'|'.join(alts)})\s*(?:x|×|times)(?!\w)", re.IGNORECASE)
    for m in pattern.finditer(text):
        window = text[max(0, m.start() - 150) : m.end() + 150].lower()
        if all(k.lower() in window for k in qa.count_subject):
            return True
    return False


def present(qa: QA, text: str) -> bool:
    """Whether ``text`` holds the answer to ``qa`` (see the module docstring)."""
    if qa.kind == "counting":
        return all(answer_regex(d).search(text) for d in qa.count_details) or count_stated(qa, text)
    return any(answer_regex(a).search(text) for a in qa.answers)


def latest_first(qa: QA, items: list[str]) -> bool | None:
    """True/False for an updated-value question whose latest value was seen; None when it was not."""
    latest = next((i for i, t in enumerate(items) if any(answer_regex(a).search(t) for a in qa.answers)), None)
    if latest is None or qa.stale is None:
        return None
    stale = next((i for i, t in enumerate(items) if answer_regex(qa.stale).search(t)), len(items))
    return latest <= stale


def strings_of(value: Any) -> Iterable[str]:
    """Every string in a JSON value (message text, tool arguments and results, summaries), ids left out."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            yield v
        elif isinstance(v, dict):
            stack.extend(x for k, x in reversed(list(v.items())) if k not in _SKIP_KEYS)
        elif isinstance(v, list):
            stack.extend(reversed(v))


def context_text(messages: list[dict[str, Any]]) -> str:
    """The text of a context: every message's strings, in order, one per line."""
    return "\n".join(strings_of(messages))
