"""Reading a note's frontmatter without YAML: where the fast reader answers, it answers what YAML does."""

from __future__ import annotations

from typing import Any

import frontmatter
import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from vaultlcm.errors import ValidationProblem
from vaultlcm.summary_notes import FIELD_ORDER, SummaryFrontmatter, fast_frontmatter, parse_note, render_note

PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ANY_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)


def yaml_metadata(text: str) -> dict[str, Any] | None:
    """What the YAML path reads (python-frontmatter, as parse_note does); None where YAML refuses the text."""
    try:
        return dict(frontmatter.loads(text).metadata)
    except (yaml.YAMLError, ValueError, TypeError, AttributeError):
        return None


def note(**fields: Any) -> SummaryFrontmatter:
    base: dict[str, Any] = dict(
        id="sum_0123456789abcdef", kind="leaf", depth=0, conversation="agent", earliest_at="2026-11-29T10:00:00Z",
        latest_at="2026-11-29T11:00:00Z", descendant_count=2, source_count=2, source_tokens=40, token_count=12,
        summarizer="digest", prompt="leaf", level="normal", body_sha256="0" * 64, sources_sha256="1" * 64,
        tags=["lcm/summary", "lcm/leaf", "lcm/depth-0"],
        sources=["[[conversations/agent/logs/2026-11-29#^m-0001]]", "[[conversations/agent/logs/2026-11-29#^m-0002]]"])
    base.update(fields)
    return SummaryFrontmatter.model_construct(**base)


@PROPS
@given(conversation=ANY_TEXT, summarizer=ANY_TEXT, tags=st.lists(ANY_TEXT, max_size=3),
       sources=st.lists(ANY_TEXT, max_size=3), body=ANY_TEXT, count=st.integers(min_value=0, max_value=10**12))
@example(conversation="on", summarizer="2026-11-29", tags=["yes", "~", "null"], sources=["0x1f", "012"], body="",
         count=0)
def test_a_rendered_note_reads_as_yaml_reads_it(conversation: str, summarizer: str, tags: list[str],
                                                 sources: list[str], body: str, count: int) -> None:
    text = render_note(note(conversation=conversation, summarizer=summarizer, tags=tags, sources=sources,
                            token_count=count), body)
    fast = fast_frontmatter(text)
    assert fast is None or fast == yaml_metadata(text)
    if all(s.isascii() and s.isprintable() and '"' not in s and "\\" not in s
           for s in (conversation, summarizer, *tags, *sources)):
        assert fast is not None, "what the engine writes in the common case is read without YAML"


FIELD_LINE = st.builds(lambda k, v: f"{k}:{v}", st.sampled_from([*FIELD_ORDER, "on", "no", "yes", "title", "ID"]),
                       st.sampled_from(['', ' "x"', ' "sum_0123456789abcdef"', " 0", " 012", " -3", " 1_000", " 0x1f",
                                        " true", " True", " yes", " ~", " null", ' "a" # c', ' "a\\tb"', " 'q'",
                                        " [a]", " {a: 1}", "  2", ' "é"', " 1.5", " -0", " +1"]))
ITEM_LINE = st.sampled_from(['  - "a"', '  - "[[x]]"', '- "b"', '    - "c"', "  - d", '  - "e" ', "  -", '  - "f\\"g"'])
LINE = st.one_of(FIELD_LINE, ITEM_LINE, ANY_TEXT.map(lambda t: t.replace("\n", " ")),
                 st.sampled_from(["", "---", "----", "--- ", "  ", "\t"]))


@PROPS
@given(st.lists(LINE, max_size=12), st.sampled_from(["\n---\n", "\n---", "\n--- \n", "\n----\n", "\n---x\n"]), ANY_TEXT)
@example(['tags:', '  - "a"', 'tags: "b"'], "\n---\n", "")  # a repeated field: the last one stands, as in YAML
@example(['sources:', 'depth: 0', '  - "a"'], "\n---\n", "")  # items under the wrong field: YAML's error
@example(["on: 1"], "\n---\n", "")  # YAML 1.1 reads `on` as true: never taken for a field name
def test_any_frontmatter_is_read_as_yaml_reads_it_or_left_to_yaml(lines: list[str], close: str, body: str) -> None:
    text = "---\n" + "\n".join(lines) + close + body
    fast = fast_frontmatter(text)
    if fast is not None:
        assert fast == yaml_metadata(text)


VALUE = st.sampled_from(['', ' "x"', ' "[[a]]"', " 0", " 7", " -3", " 1234567890123"]) | st.sampled_from(
    [" 012", " 1_000", " 0x1f", " True", " yes", " ~", " null", " -0", " +1", " 1.5", " 1e3", ' "a" ', " 0o17"])
NEAR_LINE = st.one_of(st.builds(lambda k, v: f"{k}:{v}", st.sampled_from(FIELD_ORDER), VALUE),
                      st.sampled_from(['  - "a"', '  - "[[x]]"', '  - ""']))


@PROPS
@given(st.lists(NEAR_LINE, max_size=10))
@example(["depth: 012"])  # YAML 1.1: octal 10
@example(["depth: 1_000"])  # YAML 1.1: 1000
def test_lines_near_the_engines_shape_are_read_as_yaml_reads_them(lines: list[str]) -> None:
    text = "---\n" + "\n".join(lines) + "\n---\nbody\n"
    fast = fast_frontmatter(text)
    if fast is not None:
        assert fast == yaml_metadata(text)


def test_parse_note_gives_the_same_note_and_the_same_problems_on_either_path() -> None:
    text = render_note(note(), "- a line [[conversations/agent/logs/2026-11-29#^m-0001|↗]]\n")
    assert fast_frontmatter(text) is not None
    fm, body = parse_note(text, "n.md")
    assert fm.model_dump() == note().model_dump() and body.startswith("- a line")
    person = text.replace("\ntags:", '\nreviewed: "yes"\ntags:', 1)  # a person's property: the YAML path
    assert fast_frontmatter(person) is None
    kept = parse_note(person, "n.md")[0].model_dump()
    assert kept.pop("reviewed") == "yes" and kept == fm.model_dump()
    bad = text.replace("depth: 0", 'depth: "deep"')
    assert fast_frontmatter(bad) is not None
    with pytest.raises(ValidationProblem, match=r"n\.md: field 'depth'"):
        parse_note(bad, "n.md")
