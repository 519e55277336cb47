"""The dependency rules of docs/ARCHITECTURE.md, checked on the source: a change that breaks one fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "vaultlcm"

#: Modules that sit above the Vault and may use it.
ABOVE_VAULT = {"vault", "engine", "cli", "mcp_server", "claude_code", "tools", "sample", "__init__"}
#: The parts and helpers the CLI must reach only through the Vault.
PARTS = {"catalog", "catalog_db", "catalog_schema", "dag", "msglog", "logcodec", "indexing", "index_builder", "compaction",
         "assembly", "cut", "tail", "summary_notes", "just_written", "relations", "upkeep", "doctor", "home", "bases",
         "history", "recall", "grep", "expand", "ask", "index"}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    return ".".join(rel.parts)


def _imported(path: Path) -> set[str]:
    """Every vaultlcm module ``path`` imports (relative imports resolved), TYPE_CHECKING blocks included."""
    package = _name(path).split(".")[:-1]  # "index.__init__" -> the package "index"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = [*base, *(node.module.split(".") if node.module else [])]
                names = [".".join(target)] if node.module else [".".join([*base, a.name]) for a in node.names]
                out.update(n for n in names if n)
            elif node.module and node.module.startswith("vaultlcm"):
                out.add(node.module.removeprefix("vaultlcm").lstrip("."))
        elif isinstance(node, ast.Import):
            out.update(a.name.removeprefix("vaultlcm").lstrip(".") for a in node.names if a.name.startswith("vaultlcm"))
    return out


def test_the_source_is_where_the_rules_look() -> None:
    names = {_name(p) for p in _modules()}
    assert {"vault", "grep", "home", "sync", "catalog", "index.base", "index.__init__"} <= names
    assert "vault" in _imported(PACKAGE / "engine.py")  # the import reader sees a relative import


@pytest.mark.parametrize("path", [p for p in _modules() if _name(p).split(".")[0] not in ABOVE_VAULT],
                         ids=_name)
def test_only_the_modules_above_the_vault_import_it(path: Path) -> None:
    assert "vault" not in _imported(path), (
        f"{_name(path)} imports the Vault: take the parts it needs instead (see docs/ARCHITECTURE.md)")


@pytest.mark.parametrize("path", [p for p in _modules() if p.name != "vault.py"], ids=_name)
def test_no_module_calls_a_private_member_of_a_vault(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    found = re.findall(r"\bvault\._[a-z]\w*", text)
    assert not found, f"{_name(path)} reaches into the Vault: {sorted(set(found))}"


def test_the_cli_reaches_the_parts_only_through_the_vault() -> None:
    reached = {m for m in _imported(PACKAGE / "cli.py") if m.split(".")[0] in PARTS}
    assert not reached, f"cli.py imports {sorted(reached)}: call a Vault method instead"
    assert not re.search(r"\.(catalog|dag|log|indexer|compactor|assembler)\.", (PACKAGE / "cli.py").read_text())


#: What cli.py may import besides the public API: the errors it turns into lines, and presentation
#: helpers it shares with the MCP server (a progress bar, hit lines, redaction counts in words).
CLI_HELPERS = {"errors", "progress", "tools", "secrets"}


def test_the_cli_calls_only_the_public_api() -> None:
    import vaultlcm

    imported = _imported(PACKAGE / "cli.py")
    public = {m for m in imported if m in vaultlcm.__all__}
    assert {"Vault", "ClaudeCode", "demo", "serve_mcp"} <= public  # the reader sees `from . import Vault`
    others = imported - public - CLI_HELPERS
    assert not others, f"cli.py imports {sorted(others)}: add the operation to vaultlcm/__init__.py and call it there"


def test_every_public_name_resolves() -> None:
    import vaultlcm

    for name in vaultlcm.__all__:
        assert getattr(vaultlcm, name) is not None, name


def test_the_index_interface_imports_no_backend() -> None:
    imported = _imported(PACKAGE / "index" / "base.py")
    assert not {m for m in imported if m.endswith(("whoosh_backend", "tantivy_backend"))}
    assert {m for m in _imported(PACKAGE / "index" / "__init__.py")} & {"index.base"}
