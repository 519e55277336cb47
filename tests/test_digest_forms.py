"""Patterns the digest rewrote for speed find what the patterns they replace found, on any text.

Each rewrite keeps the language and the matches of the pattern it replaces and only changes how
Python's engine gets there (a pattern that opens with a character class, a quantifier that gives
nothing back where giving back could never match, a tail searched instead of the whole). The
patterns as they were are spelled out here, and the new ones must give the same splits, spans and
answers for any text: any code point, any line endings, the characters each pattern turns on.
"""

from __future__ import annotations

import re

from hypothesis import example, given, settings as hsettings, strategies as st

from test_digest_speed import _split_the_long_way
from vaultlcm.summarizers import facts, phrases

_I = re.IGNORECASE
OLD_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+(?=[\"'(\[`*_]?[A-Z0-9])")
OLD_CLAUSE = re.compile(r"(?<=[,;:])\s+|\s+(?=—|–|\()|\s+-\s+")
OLD_ASCII_NAME = re.compile(
    r"(?<![\w/.`-])[A-Z][a-z]{2,}(?:-[A-Z][a-z]{2,}(?![\w`])|(?!-[A-Za-z]{3,}(?![\w`])))(?![\w`])")
OLD_ERROR = re.compile(
    r"\b(?:error|errors|exception|traceback|failed|failure|fails|failing|crash(?:ed|es)?|panic\w*|broken|bug|"
    r"regression|timed? ?out|refused|denied|flaky|red)\b|\b\w+(?:Error|Exception)\b",
    _I,
)
OLD_LABELLED = re.compile(
    r"\b(?:[a-z][\w-]{1,24}\s){1,2}(?:\d{4,}(?![\w]|[.,:/-]\w)|\d+\.\d+\.\d+\b|[a-z][a-z]+(?:-[a-z]+)*-\d+\b)"
)
OLD_COUNTED = re.compile(r"\b[a-z][\w-]{2,} #?\d{3,}\b(?![.,]\d)")
OLD_NUMBER_UNIT = re.compile(
    r"[$€£¥]\s?\d[\d,.]*[kKmM]?"
    r"|\b\d+(?:[.,]\d+)*\s?(?:%|ms|µs|us|ns|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|"
    r"years?|[kKMGT]i?B|bytes?|tokens?|lines?|rows?|files?|items?|messages?|requests?|req/s|rps|qps|px|x|k|"
    r"cores?|threads?|USD|EUR|GBP|dollars?|euros?|users?|accounts?|invoices?|customers?|tests?|points?|GB|MB|TB)"
    r"(?:\s?(?:/|per)\s?(?:s|sec|second|min|minute|h|hour|day|week|month|request|user|page|account)\b)?(?!\w)"
)

#: White space of every kind, the marks the patterns turn on, letters that case-insensitive matching
#: treats like ASCII ones, other scripts' letters and digits.
PIECES = [" ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u2028", "\x85", "\x1c", ".", "!", "?", "…", ",", ";",
          ":", "—", "–", "(", ")", "-", " - ", "\"", "'", "`", "*", "_", "[", "/", "#", "e.g.", "approx.", "Dr.",
          "No.", "etc.", "Greta", "Maya", "Okafor", "Lord-Howe", "The", "x", "ab", "build", "port", "v", "1",
          "2025", "5207", "3.4.19", "pod-7", "search-indexer-266", "ValueError", "Error", "error", "ERRORS",
          "exception", "FooException", "red", "timed out", "ſ", "K", "İ", "ı", "é", "٣", "😀", "word", "Word",
          # what numbers with units and dates turn on
          "$", "€", "£", "¥", "$ms", "5ms", "12 GB/s", "3 days", "4.5k", "1,200", "x9", "_7", "٣ ms", "%", " per day",
          "Jan", "March", "May 3", "Sept", "Monday", "day", "tomorrow", "end of the week", "next week", "10:30",
          "2025-11-02", "am", "UTC", "3rd of", "1-2", "9:"]
TEXTS = st.one_of(st.text(), st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), max_size=40).map("".join))


def _spans(pattern: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(text)]


@hsettings(max_examples=400, deadline=None)
@given(TEXTS)
@example("It ends here. Next one. e.g. Not this… (And) this!  \"Quoted\" too")
@example("a, b; c: d — e – f (g) h - i  -  j,\tk")
def test_the_space_led_patterns_match_as_before(text: str) -> None:
    assert _spans(facts._SENTENCE_END, text) == _spans(OLD_SENTENCE_END, text)
    assert facts.CLAUSE_RE.split(text) == OLD_CLAUSE.split(text)
    assert _spans(facts.CLAUSE_RE, text) == _spans(OLD_CLAUSE, text)


@hsettings(max_examples=400, deadline=None)
@given(TEXTS)
@example("Greta took over; Maya Okafor and Lord-Howe/Xyz `Tom` x-Ann .Bob Carl-dan Eve-Fay")
def test_names_open_with_their_capital_as_before(text: str) -> None:
    assert [(m.start(), m.group()) for m in facts._ASCII_NAME.finditer(text)] == \
        [(m.start(), m.group()) for m in OLD_ASCII_NAME.finditer(text)]


@hsettings(max_examples=400, deadline=None)
@given(TEXTS)
@example("raised ValueError")
@example("Error alone, xerror, errorx, e_Exception, Ä_error")
def test_the_error_pattern_matches_the_same_texts(text: str) -> None:
    assert bool(facts._ERROR.search(text)) == bool(OLD_ERROR.search(text))


@hsettings(max_examples=400, deadline=None)
@given(TEXTS)
@example("build 5207 and payouts 3.4.19, pod search-indexer-266; export job 2048")
@example("port #8443 x-y_z 123 abcdefghijklmnopqrstuvwxyz0123 4567")
def test_the_labelled_and_counted_numbers_are_found_as_before(text: str) -> None:
    assert _spans(phrases._LABELLED, text) == _spans(OLD_LABELLED, text)
    assert _spans(facts._COUNTED, text) == _spans(OLD_COUNTED, text)
    assert OLD_LABELLED.search(text) is None or phrases._LABELLED_NEED.search(text) is not None


@hsettings(max_examples=400, deadline=None)
@given(TEXTS)
@example("$5 and $ms, 12 GB/s, x9 ms, 3.5 days per week; 5ms 4.5k tokens ¥ 3 €4,5M ٣ ms")
def test_numbers_with_units_open_with_their_class_as_before(text: str) -> None:
    assert _spans(facts.NUMBER_UNIT_RE, text) == _spans(OLD_NUMBER_UNIT, text)


def _split_searching_whole_sentences(line: str) -> list[str]:
    return _split_the_long_way(line, OLD_SENTENCE_END)


@hsettings(max_examples=400, deadline=None)
@given(TEXTS)
@example("We use approx. Ten of them, e.g. Five. Then\nNo. More")
@example("An xapprox. Here and a long enough line. St.\n Ends")
def test_an_abbreviation_is_looked_for_in_the_tail_only(text: str) -> None:
    assert facts.split_sentences(text) == _split_searching_whole_sentences(text)


def _prose_units_the_long_way(text: str) -> list[str]:
    out: list[str] = []
    in_fence = False
    for raw in text.splitlines():
        if facts._FENCE.match(raw):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        line = facts._QUOTE_MARK.sub("", raw.strip()).strip()
        line = facts._HEADING_MARK.sub("", line)
        if not line or facts._TABLE_RULE.match(line):
            continue
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|") if c.strip()]
            line = " · ".join(cells)
        line = facts._LIST_MARK.sub("", line)
        for sentence in facts.split_sentences(line):
            unit = facts.clean(sentence)
            if unit and any(ch.isalnum() for ch in unit):
                out.append(unit[: facts.MAX_UNIT_CHARS])
    return out


MARKDOWN = ["```", "~~~", " ```py", "> ", ">>", "# ", "###### ", "#x", "| a | b |", "|---|:-:|", "| |", "--",
            "- ", "* ", "+ ", "• ", "1. ", "12) ", "٣. ", "²) ", "1234. ", "\n", "\r\n", "\u2028", " "]


@hsettings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), st.lists(st.one_of(st.sampled_from(MARKDOWN + PIECES), st.text(max_size=4)),
                                     max_size=40).map("".join)))
@example("> # quoted heading\n- item one. Then two\n|---|---|\n| a | b |\n```\ncode\n```\n3. last")
@example("| |\n|  |  |")
def test_prose_units_run_a_line_pattern_only_where_it_can_match(text: str) -> None:
    assert list(facts.prose_units(text)) == _prose_units_the_long_way(text)


def _value_changes_the_long_way(text: str) -> list[phrases.ValueChange]:
    t = text[: facts.MAX_UNIT_CHARS]
    found = []
    for segment in phrases._SEGMENT_SPLIT.split(t):
        if phrases._CHANGE_FORMS[2].search(segment):
            change = phrases.value_change(segment)
            if change is not None:
                found.append(change)
    if not found:
        change = phrases.value_change(t)
        if change is not None:
            found.append(change)
    return found


CHANGES = ["deadline", ": ", "July 19", " (was July 4)", " (was: 3)", "(WAS ", " · ", "; ", ", ", "moved ", " from ",
           " to ", "went", "is now ", "limit", "(", ")"]


@hsettings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(CHANGES), st.text(max_size=4)), max_size=24).map("".join))
@example("deadline: July 19 (was July 4) · limit: 100 (was 50)")
def test_value_changes_split_only_units_that_hold_a_was(text: str) -> None:
    assert phrases.value_changes(text) == _value_changes_the_long_way(text)


@hsettings(max_examples=300, deadline=None)
@given(TEXTS)
@example("On Monday 10:30 UTC, 3 days and $4.5k, 2025-11-02, Nov 2nd 2026, 12 GB/s")
def test_remembered_dates_and_numbers_are_the_gates_matches(text: str) -> None:
    t = text[: facts.MAX_UNIT_CHARS]
    assert list(facts.dates_in(t)) == [m.group() for m in facts.DATE_RE.finditer(t)]
    assert list(facts.numbers_in(t)) == [m.group() for m in facts.NUMBER_UNIT_RE.finditer(t)]


GATES = {f"{mod.__name__}.{name}": g for mod in (facts, phrases) for name, g in vars(mod).items()
         if isinstance(g, facts.Gated)}
#: Caseless punctuation the gates accept as text to lower-case, and letters that are not.
CASELESS = ["…", "→", "←", "·", "—", "–", "‘", "’", "“", "”", "•", "ſ", "K", "İ", "ı", "é", "\u00a0", "\\", "'"]


@hsettings(max_examples=60, deadline=None)
@given(st.data())
def test_a_gate_found_in_lower_case_where_its_pattern_matches(data: st.DataObject) -> None:
    for name, gate in sorted(GATES.items()):
        word = st.sampled_from(sorted(set(gate.needs) | {"the", "i", "I'd", "TODO", "PR", "FYI", "ValueError"}))
        cased = st.tuples(word, st.sampled_from([str.lower, str.upper, str.title, str])).map(lambda wf: wf[1](wf[0]))
        text = data.draw(st.lists(st.one_of(cased, st.sampled_from(CASELESS + PIECES), st.text(max_size=4)),
                                  max_size=20).map("".join), label=name)
        assert gate.found(text) == (gate.pattern.search(text) is not None), (name, text)


def test_a_lowered_pattern_keeps_its_escapes() -> None:
    assert facts._lowered(r"\bTODO\b|\B(?:X)\S[A-Z]\\W") == r"\btodo\b|\B(?:x)\S[a-z]\\w"


CODE = ["def ", "class ", "import x", "from a import b", "return", "x = 1", "a == b", "{", "}", ";", "[", "]", "@", "#!",
        "//", "/*", "*", "1\t", "12: ", "3│", " 4|", "a,b,c,d", ",,,", "\u2028", "\x1c"]


@hsettings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(CODE + PIECES), st.text(max_size=4)), max_size=16).map("".join))
@example("  12: x = 1;  ")
@example("a, b, c, d")
def test_a_result_line_is_judged_as_before(raw: str) -> None:
    from vaultlcm.summarizers import actions

    line = actions._LINE_NUMBER.sub("", raw)
    dropped = bool(actions._CODE_LINE.search(line.strip())) or bool(actions._CSV_LINE.search(line))
    assert actions._prose_line(raw) == (None if dropped else line)


@hsettings(max_examples=300, deadline=None)
@given(TEXTS, st.lists(TEXTS, max_size=6))
@example("CI on main went red", ["ci went red on main", "", "..."])
def test_similar_to_any_is_any_similar(text: str, others: list[str]) -> None:
    from vaultlcm.summarizers import digest_condensed as dc

    assert dc._similar_to_any(text, others) == any(dc._similar(text, o) for o in others)
