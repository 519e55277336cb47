"""A condensed note's children, day by day: a timeline entry never spans two days.

A leaf's lines link to the day log of their message
(``conversations/c/logs/2026-11-02#^m-…``), which says which day each line
belongs to. A condensed note's timeline entries start with a one-day span
(``Nov 2, 09:14–11:30``; ``Nov 2, from 16:24`` when the work went on past
midnight; ``Nov 3, until 09:02`` for its end), so they roll up: each level
groups its children's entries by day, however high the note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime

from .body import TIMELINE, BodyLine, ParsedBody
from .phrases import parse_time

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_LOG_DAY = re.compile(r"/logs/(\d{4})-(\d{2})-(\d{2})(?:#|$)")
_SPAN = re.compile(rf"^(?P<mon>{'|'.join(_MONTHS)}) (?P<day>\d{{1,2}})\b,?\s*(?P<rest>.*)$")
_CLOCK = re.compile(r"\b\d{2}:\d{2}\b")


@dataclass
class Day:
    """What one child says about one day."""

    day: date | None
    start: str | None = None
    """``HH:MM`` of the first activity that day; None when it went on from the day before."""
    end: str | None = None
    """``HH:MM`` of the last activity that day; None when it went on past midnight."""
    lines: list[BodyLine] = field(default_factory=list)

    def span(self, clock: bool = True) -> str:
        """``Nov 2, 09:14–11:30``, ``Nov 2, from 16:24``, ``Nov 3, until 09:02`` or ``Nov 3`` (without ``clock``)."""
        if self.day is None:
            return ""
        head = f"{_MONTHS[self.day.month - 1]} {self.day.day}"
        if not clock:
            return head
        if self.start and self.end:
            return f"{head}, {self.start}" if self.start == self.end else f"{head}, {self.start}–{self.end}"
        if self.start:
            return f"{head}, from {self.start}"
        if self.end:
            return f"{head}, until {self.end}"
        return head


def parse_span(text: str, near: date | None) -> tuple[date | None, str | None, str | None]:
    """``(day, start, end)`` of a timeline entry's span; the year is the one closest to ``near``."""
    m = _SPAN.match(text.strip())
    if m is None:
        return None, None, None
    month, number = _MONTHS.index(m.group("mon")) + 1, int(m.group("day"))
    year = near.year if near is not None else 2000
    try:
        day = date(year, month, number)
        if near is not None and (day - near).days < -200:  # "Jan 2" in a note that began on Dec 30
            day = date(year + 1, month, number)
    except ValueError:
        return None, None, None
    rest = m.group("rest")
    clocks = _CLOCK.findall(rest)
    if not clocks:
        return day, None, None
    if rest.startswith("until"):
        return day, None, clocks[0]
    if rest.startswith("from") or re.search(r" – [A-Z][a-z]{2} \d", rest):
        return day, clocks[0], None  # the older "Nov 2 16:24 – Nov 3 09:02" form: it went on past that day
    return day, clocks[0], clocks[-1]


def _clock(moment: datetime | None, day: date) -> str | None:
    return moment.strftime("%H:%M") if moment is not None and moment.date() == day else None


def child_days(body: ParsedBody, at: str | None, latest_at: str | None) -> list[Day]:
    """The days a child covers, in order, each with the child's lines about it.

    A condensed child contributes its timeline entries, grouped by their own
    day; a leaf (or any other note) all its lines, grouped by the day of the
    message each line links to. Lines without a day stay with the line before.
    """
    first, last = parse_time(at), parse_time(latest_at)
    near = first.date() if first is not None else None
    condensed = bool(body.section(TIMELINE))
    days: dict[date | None, Day] = {}
    current: date | None = near
    for line in body.lines:
        if condensed:
            if line.section != TIMELINE:
                continue
            day, start, end = parse_span(line.text.split(" · ", 1)[0], near)
        else:
            m = _LOG_DAY.search(line.link or "")
            day = date(int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None
            start = end = None
        if day is None:
            day = current
        current = day
        entry = days.get(day)
        if entry is None:
            entry = days[day] = Day(day, start, end)
        elif condensed:
            entry.end = end
        entry.lines.append(line)
    if not days:
        days[near] = Day(near)
    ordered = sorted(days.values(), key=lambda d: (d.day is None, d.day or date.min))
    if not condensed:
        for entry in ordered:
            if entry.day is not None:
                entry.start, entry.end = _clock(first, entry.day), _clock(last, entry.day)
        if len(ordered) == 1 and ordered[0].day is None:
            ordered[0].start = first.strftime("%H:%M") if first else None
    return ordered
