"""Summary notes: one Markdown note per summary node of the DAG.

A note is YAML frontmatter plus the summary as the body::

    ---
    id: "sum_3f2a9c1b0d4e5f60"
    kind: "leaf"
    depth: 0
    conversation: "demo"
    earliest_at: "2026-11-29T10:00:00Z"
    latest_at: "2026-11-29T10:05:00Z"
    descendant_count: 12
    source_count: 12
    source_tokens: 3400
    token_count: 512
    summarizer: "extractive"
    prompt: "leaf"
    level: "normal"
    body_sha256: "…"
    sources_sha256: "…"
    tags:
      - "lcm/summary"
      - "lcm/leaf"
      - "lcm/depth-0"
    sources:
      - "[[conversations/demo/logs/2026-11-29#^m-3f2a9c1b0d4e5f60]]"
    ---

The engine writes notes with its own deterministic writer (fixed key order,
JSON-style double-quoted strings, LF, final newline) and reads them with
python-frontmatter, validating the result with pydantic, so a note a person
edited is read but never re-serialized. Which node condensed a note is *not*
stored: it is derived from the ``sources`` of the notes above.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import ValidationProblem
from .logcodec import json_text

SUMMARY_ID_RE = re.compile(r"^sum_[0-9a-f]{16}$")
#: A whole wikilink as Obsidian writes one: ``[[path#heading|alias]]``, ``[[path#^block]]``.
_LINK_RE = re.compile(r"^\[\[([^\[\]|#]*)(#[^\[\]|]*)?(?:\|([^\[\]]*))?\]\]$")
#: Any wikilink (or embed) inside text: group 1 is the path part, group 2 the rest.
_TEXT_LINK_RE = re.compile(r"\[\[([^\[\]|#]*)([^\[\]]*)\]\]")
_YAML_UNSAFE = re.compile(r"[\x7f-\x9f]")
#: Printable ASCII without a quote or a backslash: its JSON (and YAML) string is the text in quotes.
_PLAIN_SCALAR = re.compile(r'[ !#-\[\]-~]*')
FIELD_ORDER = (
    "id", "kind", "depth", "conversation", "earliest_at", "latest_at", "descendant_count",
    "source_count", "source_tokens", "token_count", "summarizer", "prompt", "level",
    "body_sha256", "sources_sha256", "tags", "sources",
)


class SummaryFrontmatter(BaseModel):
    """The frontmatter of a summary note, as validated when read back."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(description="Summary id, sum_ + 16 hex digits; identity follows this, not the filename.")
    kind: Literal["leaf", "condensed"] = Field(description="leaf: covers raw messages; condensed: covers summaries.")
    depth: int = Field(ge=0, description="0 for leaves; 1 + the deepest source for condensed nodes.")
    conversation: str = Field(description="Conversation the node belongs to.")
    earliest_at: str = Field(description="Time of the oldest message covered (UTC, ISO-8601).")
    latest_at: str = Field(description="Time of the newest message covered (UTC, ISO-8601).")
    descendant_count: int = Field(ge=0, description="Raw messages covered, transitively.")
    source_count: int = Field(ge=0, description="Direct sources (messages for a leaf, summaries for a condensed node).")
    source_tokens: int = Field(ge=0, description="Tokens of the direct sources that were summarized.")
    token_count: int = Field(ge=0, description="Tokens of the body as generated.")
    summarizer: str = Field(description="What wrote the body: extractive, anthropic:<model>, openai:<model>.")
    prompt: str = Field(description="Template used: leaf, depth-1, depth-2, depth-3plus, aggressive or truncate.")
    level: Literal["normal", "aggressive", "truncated"] = Field(description="Escalation level that produced the body.")
    body_sha256: str = Field(description="sha256 of the body as generated; a different body means a person edited it.")
    sources_sha256: str = Field(description="sha256 over the sources' content when generated; a change makes the node stale.")
    tags: list[str] = Field(default_factory=list, description="Obsidian tags: lcm/summary, lcm/<kind>, lcm/depth-<n>.")
    sources: list[str] = Field(description="Quoted wikilinks to the message blocks (leaf) or summary notes (condensed) covered.")

    @field_validator("id")
    @classmethod
    def _check_id(cls, v: str) -> str:
        if not SUMMARY_ID_RE.match(v):
            raise ValueError(f"{v!r} is not a summary id (sum_ followed by 16 hex digits)")
        return v

    @field_validator("sources", mode="before")
    @classmethod
    def _check_sources(cls, v: Any) -> Any:
        if not isinstance(v, list):
            raise ValueError("must be a list of quoted wikilinks")
        for i, item in enumerate(v):
            if isinstance(item, list):
                raise ValueError(
                    f"item {i} is an unquoted wikilink (YAML read [[...]] as a nested list); "
                    'write it in double quotes: - "[[...]]"'
                )
            parsed = parse_wikilink(item) if isinstance(item, str) else None
            if parsed is None or not parsed.path:
                raise ValueError(f"item {i} ({item!r}) is not a wikilink like \"[[sum_...]]\"")
        return v

    def source_ids(self) -> list[str]:
        return [link_target_id(s) for s in self.sources]


@dataclass(frozen=True)
class WikiLink:
    """The parts of one wikilink: ``[[path#subpath|alias]]``.

    ``path`` is what Obsidian resolves to a file (a name, or a path, with or
    without ``.md``; empty for a link inside the same note); ``subpath`` is
    ``#Heading`` or ``#^block`` (with its ``#``) or empty.
    """

    path: str
    subpath: str = ""
    alias: str | None = None

    @property
    def block(self) -> str | None:
        """The block id a ``#^block`` subpath names (a message id in a log)."""
        return self.subpath[2:] if self.subpath.startswith("#^") else None

    @property
    def stem(self) -> str:
        """The file name the path names, without folders or ``.md``."""
        name = self.path.rstrip("/").rsplit("/", 1)[-1]
        return name[:-3] if name.lower().endswith(".md") else name

    def with_path(self, path: str) -> str:
        """The same link pointing at ``path`` (subpath and alias kept as written)."""
        alias = f"|{self.alias}" if self.alias is not None else ""
        return f"[[{path}{self.subpath}{alias}]]"


def parse_wikilink(link: str) -> WikiLink | None:
    """``[[path#subpath|alias]]`` split into its parts; None when ``link`` is not one whole wikilink."""
    m = _LINK_RE.match(link)
    if not m or not (m.group(1) or m.group(2)):
        return None
    return WikiLink(m.group(1), m.group(2) or "", m.group(3))


def link_target_id(link: str) -> str:
    """The id a source link names on its face: the block id for a message, the file name for a summary.

    This is a first guess that needs no other file; :mod:`vaultlcm.dag` resolves
    each link as Obsidian does (a note may have been renamed) before trusting it.
    """
    parsed = parse_wikilink(link)
    if parsed is None:
        raise ValueError(f"not a wikilink: {link!r}")
    return parsed.block or parsed.stem


def text_links(text: str) -> list[tuple[int, int, WikiLink]]:
    """Every wikilink (or embed) in ``text``: ``(start, end, link)`` of the ``[[…]]`` span."""
    out = []
    for m in _TEXT_LINK_RE.finditer(text):
        parsed = parse_wikilink(m.group(0))
        if parsed is not None:
            out.append((m.start(), m.end(), parsed))
    return out


def message_link(log_rel_path: str, message_id: str) -> str:
    """``[[conversations/c/logs/2026-11-29#^m-…]]`` (vault-relative, without .md)."""
    stem = log_rel_path[:-3] if log_rel_path.endswith(".md") else log_rel_path
    return f"[[{stem}#^{message_id}]]"


def summary_link(summary_id: str) -> str:
    return f"[[{summary_id}]]"


def make_summary_id(conversation: str, depth: int, source_ids: list[str]) -> str:
    """Deterministic: the same sources at the same depth give the same node id."""
    h = hashlib.sha256(f"{conversation}\0{depth}\0".encode())
    h.update("\0".join(source_ids).encode())
    return "sum_" + h.hexdigest()[:16]


def body_hash(body: str) -> str:
    """sha256 of a body with the path of every wikilink left out.

    Obsidian rewrites links in every note when a person renames or moves one;
    that is not an edit of the summary, so it must not make the note (or the
    notes above it) look edited or stale. Subpaths and aliases count.
    """
    blanked = _TEXT_LINK_RE.sub(lambda m: "[[" + m.group(2) + "]]", body)
    return hashlib.sha256(blanked.encode("utf-8")).hexdigest()


def exact_body_hash(body: str) -> str:
    """sha256 of the body byte for byte (what ``body_sha256`` held before links were left out)."""
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def sources_hash(parts: list[str]) -> str:
    """Hash over the sources' content hashes, in order (entry hashes or body hashes)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _yaml_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and _PLAIN_SCALAR.fullmatch(value):
        return f'"{value}"'  # most values (ids, links, times): nothing to escape
    # JSON string escapes are valid YAML double-quoted escapes; escape C1 controls PyYAML refuses.
    text = json_text(str(value), indent=None)
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def person_properties(text: str) -> tuple[list[str], list[str]]:
    """What a person added to a note's frontmatter: their own properties (raw lines) and their tags.

    Their lines are kept exactly as written (YAML a person wrote is never
    re-serialized); only the tags list is shared, so theirs join the engine's.
    """
    import yaml

    if not text.startswith("---"):
        return [], []
    end = text.find("\n---", 3)
    if end < 0:
        return [], []
    lines = text[text.find("\n") + 1 : end + 1].split("\n")
    raw: list[str] = []
    current: str | None = None
    for line in lines:
        if line and not line[0].isspace() and not line.startswith("-") and ":" in line:
            current = line.split(":", 1)[0].strip()
        if current is not None and current not in FIELD_ORDER and line.strip():
            raw.append(line)
    tags: list[str] = []
    try:
        data = yaml.safe_load(text[3:end]) or {}
        found = data.get("tags") if isinstance(data, dict) else None
        if isinstance(found, str):
            found = [found]
        tags = [t for t in found or [] if isinstance(t, str) and not t.startswith("lcm/")]
    except yaml.YAMLError:
        pass
    return raw, tags


def render_note(fm: SummaryFrontmatter, body: str, *, keep_from: str | None = None) -> str:
    """The note's exact text: deterministic frontmatter, then the body, LF, final newline.

    ``keep_from`` is the note's previous text: properties and tags a person added
    there survive the rewrite.
    """
    data = fm.model_dump()
    extra_lines, extra_tags = person_properties(keep_from) if keep_from else ([], [])
    data["tags"] = [*data["tags"], *(t for t in extra_tags if t not in data["tags"])]
    lines = ["---"]
    for key in FIELD_ORDER:
        value = data[key]
        if isinstance(value, list):
            lines.append(f"{key}:")
            lines.extend(f"  - {_yaml_scalar(v)}" for v in value)
        else:
            lines.append(f"{key}: {_yaml_scalar(value)}")
    lines.extend(extra_lines)
    lines.append("---")
    text = "\n".join(lines) + "\n" + body
    return text if text.endswith("\n") else text + "\n"


def note_body(generated: str) -> str:
    """Body text as stored: the generated summary with exactly one final newline."""
    return generated.rstrip("\n") + "\n"


#: A frontmatter line as :func:`render_note` writes it: a field with a plain quoted string, a whole
#: number, a boolean, or nothing (a list's items follow); and a list item.
_FAST_FIELD = re.compile(r'([a-z_0-9]+):(?: "([ !#-\[\]-~]*)"| (-?(?:0|[1-9][0-9]*))| (true|false))?')
_FAST_ITEM = re.compile(r'  - "([ !#-\[\]-~]*)"')
_FIELDS = frozenset(FIELD_ORDER)


def fast_frontmatter(text: str) -> dict[str, Any] | None:
    """The frontmatter of a note in the exact shape :func:`render_note` writes, read without YAML.

    None as soon as one line is of any other shape (a person's property, an escaped or
    non-ASCII string, a comment, another indentation): YAML reads that note. Where it
    answers, it answers what ``yaml.safe_load`` does for the same lines: only known field
    names (YAML 1.1 reads ``on:`` or ``no:`` as booleans), strings with nothing to
    unescape, integers without ``+``, a leading zero or ``_``. Reading the notes is most of
    a first sync and of a reindex's parent process, and YAML most of reading one.
    """
    if not text.startswith("---\n"):
        return None
    end = text.find("\n---", 3)
    if end < 0 or text[end + 4 : end + 5] not in ("\n", ""):
        return None
    data: dict[str, Any] = {}
    listing: str | None = None  # the field whose items the next lines may be
    for line in text[4:end].split("\n"):
        m = _FAST_ITEM.fullmatch(line)
        if m is not None:
            if listing is None:
                return None
            items = data[listing]
            if items is None:
                items = data[listing] = []
            items.append(m.group(1))
            continue
        m = _FAST_FIELD.fullmatch(line)
        if m is None or m.group(1) not in _FIELDS:
            return None
        key, string, number, flag = m.groups()
        listing = None
        if string is not None:
            data[key] = string
        elif number is not None:
            data[key] = int(number)
        elif flag is not None:
            data[key] = flag == "true"
        else:
            data[key] = None
            listing = key
    return data


def parse_note(text: str, path: Path | str) -> tuple[SummaryFrontmatter, str]:
    """Read a note a person may have edited; raises :class:`ValidationProblem` naming the file and field."""
    if not text.startswith("---"):
        raise ValidationProblem(f"{path}: the note has no YAML frontmatter (it must start with ---); restore it from git")
    data = fast_frontmatter(text)
    if data is None:
        data = _yaml_frontmatter(text, path)
    try:
        fm = SummaryFrontmatter.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"]) or "frontmatter"
            problems.append(f"field {field!r}: {err['msg'].removeprefix('Value error, ')}")
        raise ValidationProblem(f"{path}: " + "; ".join(problems)) from None
    return fm, _body_of(text)


def _yaml_frontmatter(text: str, path: Path | str) -> dict[str, Any]:
    """The frontmatter as YAML reads it (any shape a person may write); a :class:`ValidationProblem` naming the
    line and field where YAML gave up."""
    import frontmatter
    import yaml

    try:
        post = frontmatter.loads(text)
    except yaml.YAMLError as exc:
        # Where the broken construct began names the field better than where YAML gave up.
        mark = getattr(exc, "context_mark", None) or getattr(exc, "problem_mark", None)
        where = ""
        if mark is not None:
            # python-frontmatter hands YAML the text from the top of the file: marks are file lines.
            lines = text.split("\n")
            line_no = mark.line + 1
            key = lines[line_no - 1].split(":", 1)[0].strip() if 0 < line_no <= len(lines) else ""
            where = f" at line {line_no}" + (f" (field {key!r})" if key and not key.startswith("-") else "")
        raise ValidationProblem(f"{path}: frontmatter is not valid YAML{where}: {getattr(exc, 'problem', exc)}; fix it or restore it from git") from None
    return dict(post.metadata)


def _body_of(text: str) -> str:
    """The body exactly as in the file (python-frontmatter strips white space, which would hide edits)."""
    end = text.find("\n---", 3)
    if end < 0:
        return ""
    nl = text.find("\n", end + 4)
    return "" if nl < 0 else text[nl + 1 :]
