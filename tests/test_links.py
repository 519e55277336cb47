"""Wikilinks: parsing, Obsidian's resolution, the links vaultlcm writes, and the body hash that ignores link paths."""

from __future__ import annotations

import posixpath

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from obsidian_links import resolve as obsidian_resolve
from vaultlcm.links import VaultFiles
from vaultlcm.summary_notes import body_hash, link_target_id, parse_wikilink, text_links

# Anything Obsidian allows in a link path: every code point but the link syntax itself.
PATH_TEXT = st.text(st.characters(blacklist_characters="[]|#\n\r", blacklist_categories=("Cs",)), min_size=1)
SUBPATH = st.one_of(st.just(""), st.builds(lambda t: "#" + t, st.text(st.characters(
    blacklist_characters="[]|\n\r", blacklist_categories=("Cs",)))), st.from_regex(r"#\^[A-Za-z0-9-]{1,12}", fullmatch=True))
ALIAS = st.one_of(st.none(), st.text(st.characters(blacklist_characters="[]\n\r", blacklist_categories=("Cs",))))


@given(PATH_TEXT, SUBPATH, ALIAS)
def test_wikilink_parts_round_trip(path: str, sub: str, alias: str | None) -> None:
    text = f"[[{path}{sub}{'' if alias is None else '|' + alias}]]"
    link = parse_wikilink(text)
    assert link is not None
    assert (link.path, link.subpath, link.alias) == (path, sub, alias)
    assert link.with_path(path) == text
    moved = parse_wikilink(link.with_path("somewhere/else"))
    assert moved is not None and (moved.path, moved.subpath, moved.alias) == ("somewhere/else", sub, alias)
    assert text_links("before " + text + " after") == [(7, 7 + len(text), link)]


def test_link_target_id() -> None:
    assert link_target_id("[[sum_0123456789abcdef]]") == "sum_0123456789abcdef"
    assert link_target_id("[[conversations/c/logs/2026-11-29#^m-0123456789abcdef|↗]]") == "m-0123456789abcdef"
    assert link_target_id("[[conversations/c/summaries/sub/sum_0123456789abcdef.md#Heading|x]]") == "sum_0123456789abcdef"
    assert parse_wikilink("[[a]] and [[b]]") is None and parse_wikilink("[[]]") is None


@given(st.text(), st.lists(st.tuples(PATH_TEXT, PATH_TEXT, SUBPATH, ALIAS), max_size=4))
def test_body_hash_ignores_where_links_point(text: str, links: list[tuple[str, str, str, str | None]]) -> None:
    assume("[[" not in text and "]]" not in text)
    before = text + "".join(f" [[{a}{s}{'' if al is None else '|' + al}]]" for a, _b, s, al in links)
    after = text + "".join(f" [[{b}{s}{'' if al is None else '|' + al}]]" for _a, b, s, al in links)
    assert body_hash(before) == body_hash(after)  # what Obsidian does on a rename is no edit
    assert body_hash(before + "x") != body_hash(before)  # anything else is
    if links:
        _a, b, s, al = links[0]
        changed_alias = before.replace(f"{s}{'' if al is None else '|' + al}]]", f"{s}|changed {al}]]", 1)
        assume(changed_alias != before)
        assert body_hash(changed_alias) != body_hash(before)


# -- resolution ------------------------------------------------------------------------

NAME = st.sampled_from(["Note", "note two", "sum_0123456789abcdef", "v1.2 plan", "2026-11-29", "Timezone decision"])
FOLDER = st.sampled_from(["", "a/", "a/b/", "conversations/c/summaries/", "conversations/c/summaries/archive/",
                          "conversations/d/logs/", "x y/"])
FILES = st.lists(st.tuples(FOLDER, NAME, st.sampled_from([".md", ".md", ".png"])), min_size=1, max_size=12).map(
    lambda fs: sorted({f + n + e for f, n, e in fs}))


@st.composite
def link_cases(draw: st.DrawFn) -> tuple[list[str], str, str]:
    """A vault's files, a note holding a link, and the file it links to."""
    files = draw(FILES)
    return files, draw(st.sampled_from(files)), draw(st.sampled_from(files))


@settings(max_examples=300)
@given(link_cases(), st.data())
def test_resolution_matches_obsidian(case: tuple[list[str], str, str], data: st.DataObject) -> None:
    files, source, target = case
    vault = VaultFiles(files)
    stem = target[:-3] if target.endswith(".md") else target
    parts = stem.split("/")
    # every way a person (or Obsidian) may write the link: name, partial path, full path, with .md, relative
    relative = posixpath.relpath(stem, posixpath.dirname(source) or ".")
    written = data.draw(st.sampled_from([
        parts[-1], "/".join(parts[-2:]), stem, target, parts[-1].upper(),
        relative if relative.startswith("../") else "./" + relative,
    ]))
    assert vault.resolve(written, source) == obsidian_resolve(files, written, source)


@settings(max_examples=300)
@given(link_cases())
def test_links_vaultlcm_writes_resolve_to_their_note(case: tuple[list[str], str, str]) -> None:
    files, source, target = case
    vault = VaultFiles(files)
    written = vault.link_path(target)
    assert vault.resolve(written, source) == target
    assert obsidian_resolve(files, written, source) == target  # and Obsidian agrees
    if vault.is_unique_name(target):
        assert "/" not in written  # shortest form when the name is unique


def test_same_folder_first_then_shortest_path() -> None:
    files = ["Note.md", "a/Note.md", "a/b/Note.md", "a/b/other.md", "c/d/e/Note.md"]
    vault = VaultFiles(files)
    assert vault.resolve("Note", "a/b/other.md") == "Note.md"  # a path from the root wins
    vault = VaultFiles(files[1:])
    assert vault.resolve("Note", "a/b/other.md") == "a/b/Note.md"  # then the linking note's folder
    assert vault.resolve("Note", "x.md") == "a/Note.md"  # then the shortest path
    assert vault.resolve("b/Note", "x.md") == "a/b/Note.md"  # a partial path matches the end
    assert vault.resolve("../Note", "a/b/other.md") == "a/Note.md"
    assert vault.resolve("e/Nowhere", "x.md") is None
    assert vault.link_path("a/b/Note.md") == "a/b/Note" and vault.link_path("a/b/other.md") == "other"


def test_conflict_sides() -> None:
    from vaultlcm.upkeep import conflict_sides

    text = "a\n<<<<<<< HEAD\nours 1\nours 2\n||||||| base\nold\n=======\ntheirs\n>>>>>>> other\nb\n"
    assert conflict_sides(text) == ("a\nours 1\nours 2\nb\n", "a\ntheirs\nb\n")
    assert conflict_sides("a\n<<<<<<< HEAD\nours\n=======\n") is None  # unfinished
    assert conflict_sides("> <<<<<<< quoted in a log\n") is None  # not a marker: no conflict at all


class _PlainFiles:
    """The lookups :class:`VaultFiles` answers, kept the plain way (every path under its lower-case form and
    its lower-case name): the reference its compact tables must agree with."""

    def __init__(self, paths: list[str]) -> None:
        self.paths: set[str] = set()
        self.lower: dict[str, list[str]] = {}
        self.by_name: dict[str, list[str]] = {}
        for p in sorted(set(paths)):
            self.add(p)

    def add(self, p: str) -> None:
        if p not in self.paths:
            self.paths.add(p)
            self.lower.setdefault(p.lower(), []).append(p)
            self.by_name.setdefault(p.rsplit("/", 1)[-1].lower(), []).append(p)

    def exact(self, p: str) -> str | None:
        return p if p in self.paths else (self.lower.get(p.lower()) or [None])[0]

    def unique(self, p: str) -> bool:
        return len(self.by_name.get(p.rsplit("/", 1)[-1].lower(), [])) <= 1


# Letters whose case changes them, some to another length or to a letter below them ("İ" lowers to "i̇").
CASED = st.text(st.sampled_from(["a", "A", "b", "B", "İ", "i", "ß", "Σ", "σ", "ς", "/", "_", "1"]), min_size=1, max_size=6)
CASED_PATHS = st.lists(st.builds(lambda t, e: t.strip("/") + e, CASED, st.sampled_from([".md", ".MD", ".png", ""])),
                       max_size=12)


@st.composite
def cased_vaults(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    """Paths for a vault and paths added later, many of them another case of a path already there."""
    first = [p for p in draw(CASED_PATHS) if p]
    recased = st.sampled_from(first).flatmap(lambda p: st.sampled_from([p.upper(), p.lower(), p.swapcase(),
                                                                        p.capitalize()])) if first else st.nothing()
    added = draw(st.lists(st.one_of(recased, CASED_PATHS.map(lambda ps: "a/" + "".join(ps) + ".md")), max_size=8))
    return first, [p for p in added if p]


@settings(max_examples=400)
@given(cased_vaults(), st.lists(CASED, max_size=6))
def test_compact_tables_answer_as_the_plain_ones(case: tuple[list[str], list[str]], asked: list[str]) -> None:
    first, added = case
    vault, plain = VaultFiles(first), _PlainFiles(first)
    for p in added:
        vault.add(p)
        plain.add(p)
    assert vault.paths == plain.paths
    for q in asked + sorted(plain.paths) + [p.upper() for p in plain.paths] + [p.lower() for p in plain.paths]:
        assert vault._exact(q) == plain.exact(q)
        assert vault.is_unique_name(q) == plain.unique(q)
        key = q.rsplit("/", 1)[-1].lower()
        assert vault._named(key) == plain.by_name.get(key, [])  # resolve() reads its tables through these two
