"""An Obsidian-style link checker for tests, written apart from vaultlcm's own resolver.

It follows Obsidian's documented behaviour: a link path resolves from the vault
root, else by file name anywhere in the vault (a path suffix must match too);
``.md`` is implied; names compare without case; dot-folders are not part of the
vault. A ``#^block`` must name a block id line (``^id`` at a line end) in the
target note.
"""

from __future__ import annotations

import re
from pathlib import Path

WIKILINK = re.compile(r"!?\[\[([^\[\]|#]*)(#[^\[\]|]*)?(?:\|[^\[\]]*)?\]\]")


def vault_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))


def resolve(files: list[str], path: str, source: str) -> str | None:
    """Obsidian's answer for ``[[path]]`` written in ``source`` (None: it shows the link as unresolved)."""
    lower = {f.lower(): f for f in files}
    candidates = [path, path + ".md"] if not path.lower().endswith(".md") else [path]
    if path.startswith(("./", "../")):
        base = Path(source).parent
        for c in candidates:
            joined = (base / c).as_posix()
            parts: list[str] = []
            for part in joined.split("/"):
                if part == "..":
                    if not parts:
                        return None
                    parts.pop()
                elif part not in ("", "."):
                    parts.append(part)
            if "/".join(parts).lower() in lower:
                return lower["/".join(parts).lower()]
        return None
    for c in candidates:
        if c.lower() in lower:
            return lower[c.lower()]
    for c in candidates:
        hits = [f for f in files if f.lower() == c.lower() or f.lower().endswith("/" + c.lower())]
        if hits:
            same_folder = [h for h in hits if Path(h).parent == Path(source).parent]
            return (same_folder or sorted(hits, key=lambda h: (h.count("/"), h)))[0]
    return None


def broken_links(root: Path, only: list[str] | None = None) -> list[str]:
    """Every wikilink in the vault's notes (or in ``only``) that Obsidian would not resolve."""
    files = vault_files(root)
    bad: list[str] = []
    for rel in only if only is not None else [f for f in files if f.endswith(".md")]:
        text = (root / rel).read_text(encoding="utf-8")
        for m in WIKILINK.finditer(text):
            path, sub = m.group(1), m.group(2) or ""
            if not path:
                continue
            target = resolve(files, path, rel)
            if target is None:
                bad.append(f"{rel}: {m.group(0)} resolves to nothing")
            elif sub.startswith("#^") and not re.search(rf"(^|\s)\^{re.escape(sub[2:])}$",
                                                       (root / target).read_text(encoding="utf-8"), re.MULTILINE):
                bad.append(f"{rel}: {m.group(0)} names a block {target} does not have")
    return bad


def obsidian_rename(root: Path, old: Path, new: Path) -> None:
    """What Obsidian does when a person renames or moves a note: move it, then rewrite every link to it.

    Links are rewritten in Obsidian's default "shortest path when possible" form:
    the bare name when no other file has it, else the path from the vault root.
    """
    new.parent.mkdir(parents=True, exist_ok=True)
    old.rename(new)
    files = vault_files(root)
    new_rel = new.relative_to(root).as_posix()
    same_name = [f for f in files if Path(f).name.lower() == new.name.lower()]
    target = new.stem if len(same_name) == 1 else new_rel[:-3]
    old_rel = old.relative_to(root).as_posix()
    for rel in files:
        if not rel.endswith(".md"):
            continue
        p = root / rel
        text = p.read_text(encoding="utf-8")

        def swap(m: re.Match[str]) -> str:
            path = m.group(1)
            if not path:
                return m.group(0)
            # the link named the old note if Obsidian resolved it there before the move
            before = resolve([*(f for f in files if f != new_rel), old_rel], path, rel)
            if before != old_rel:
                return m.group(0)
            return m.group(0).replace(f"[[{path}", f"[[{target}", 1)

        changed = WIKILINK.sub(swap, text)
        if changed != text:
            p.write_text(changed, encoding="utf-8")
