"""The body of a digest note: small headings, one short line per thing, a link at the end.

::

    ### Asked
    - fix the flaky due-date test (LEDG-482) [[conversations/c/logs/2026-11-02#^m-…|↗]]
    ### Done
    - ran `pytest tests/billing` → 1 failed: test_due_date [[…|↗]]
    ### Found / decided
    - …
    ### Open
    - …
    Correction (by a person): the config lives in conf/real.toml [[sum_…|↗]]

Leaves use the sections Asked, Done, Found / decided and Open; condensed
notes use Timeline, Decided and Open. A line starting with
:data:`CORRECTION_PREFIX` carries a person's correction: every summary above
keeps it verbatim. Lines the engine writes from content always start with
``- `` and content is flattened to one line, so quoted text can never forge a
heading or a correction line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ASKED = "Asked"
DONE = "Done"
FOUND = "Found / decided"
OPEN = "Open"
TIMELINE = "Timeline"
DECIDED = "Decided"
LEAF_SECTIONS = (ASKED, DONE, FOUND, OPEN)
CONDENSED_SECTIONS = (TIMELINE, DECIDED, OPEN)
CORRECTION_PREFIX = "Correction (by a person): "
LINK_LABEL = "↗"

_HEADING = re.compile(r"^(?:#{1,6}\s+(.+?)\s*#*|\*\*([^*]+)\*\*:?)$")
_BULLET = re.compile(r"^(?:[-*+•]|\d{1,3}[.)])\s+")
_TRAILING_LINK = re.compile(r"\s*\[\[([^\]|]+)\|[^\]]*\]\]\s*$")
_ANY_LINK = re.compile(r"\[\[([^\]|]+)(?:\|[^\]]*)?\]\]")
_FOOTER = re.compile(r"^(?:Expand for details? (?:about|for)?:?|\[vaultlcm: deterministic truncation)", re.I)


def link(target: str | None) -> str:
    """``[[target|↗]]``, or nothing when the source has no address."""
    return f"[[{target}|{LINK_LABEL}]]" if target else ""


def bullet(text: str, target: str | None) -> str:
    """One body line: ``- text [[target|↗]]``."""
    tail = link(target)
    return f"- {text} {tail}" if tail else f"- {text}"


def correction_line(text: str, target: str | None) -> str:
    """The line that carries a person's correction up the DAG."""
    tail = link(target)
    flat = " ".join(text.split())
    return f"{CORRECTION_PREFIX}{flat} {tail}" if tail else f"{CORRECTION_PREFIX}{flat}"


def is_correction(line: str) -> bool:
    return line.startswith(CORRECTION_PREFIX)


def render(sections: dict[str, list[str]], order: tuple[str, ...], corrections: list[str]) -> str:
    """Headings with their lines (empty sections left out), then the correction lines."""
    out: list[str] = []
    for name in order:
        lines = sections.get(name) or []
        if lines:
            out.append(f"### {name}")
            out.extend(lines)
    out.extend(corrections)
    return "\n".join(out)


@dataclass
class BodyLine:
    """One content line of a parsed summary body."""

    section: str
    text: str
    """The line without its bullet and its trailing link."""
    link: str | None


@dataclass
class ParsedBody:
    """A summary body read back: its lines by section and its correction lines."""

    lines: list[BodyLine] = field(default_factory=list)
    corrections: list[str] = field(default_factory=list)

    def section(self, name: str) -> list[BodyLine]:
        return [ln for ln in self.lines if ln.section == name]


def strip_links(text: str) -> str:
    """``text`` with wikilinks reduced to their target names (for re-use in other wording)."""
    return _ANY_LINK.sub(lambda m: m.group(1).rsplit("/", 1)[-1], text)


def parse_body(text: str) -> ParsedBody:
    """Read any summary body: the digest's own format, an LLM's prose, a person's edit.

    Headings (``### X``, ``**X**``) set the section of the lines below them;
    bullets lose their marker; a trailing ``[[…|↗]]`` becomes the line's link;
    expand footers and truncation markers are dropped. Correction lines are
    returned verbatim, apart from the rest.
    """
    parsed = ParsedBody()
    section = ""
    in_fence = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_fence or not line:
            continue
        if is_correction(line):
            parsed.corrections.append(line)
            continue
        heading = _HEADING.match(line)
        if heading:
            section = (heading.group(1) or heading.group(2) or "").strip()
            continue
        if _FOOTER.match(line):
            continue
        line = _BULLET.sub("", line)
        target = None
        m = _TRAILING_LINK.search(line)
        if m:
            target = m.group(1)
            line = line[: m.start()].rstrip()
        if line:
            parsed.lines.append(BodyLine(section, line, target))
    return parsed
