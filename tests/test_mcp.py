"""`vaultlcm mcp`: a real server subprocess, driven by the official MCP SDK's stdio client."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from vaultlcm import Vault

FACT = "The staging vault key is ZEBRA-4471; it rotates on Fridays."
TOOL_NAMES = {"lcm_grep", "lcm_describe", "lcm_expand", "lcm_expand_query", "lcm_status"}
CALL_TIMEOUT = 15.0
TOTAL_TIMEOUT = 45.0


def _text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


def _is_error(result: Any) -> bool:
    return bool(getattr(result, "is_error", getattr(result, "isError", False)))


def _schema(tool: Any) -> dict[str, Any]:
    return getattr(tool, "input_schema", None) or tool.inputSchema


@pytest.fixture
def small_vault(tmp_path: Path) -> dict[str, Any]:
    """A vault with one conversation: 48 messages, the fact in message 6, one leaf summary over it."""
    root = tmp_path / "vault"
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": FACT if i == 5 else f"Step {i}: module_{i}.py and its tests."}
        for i in range(48)
    ]
    with Vault.init(root) as vault:
        ids = vault.ingest("heron", messages)
        [report] = vault.compact("heron", force=True)
    assert report.created, "the fixture needs at least one summary"
    return {"root": root, "fact_id": ids[5], "summary_id": report.created[0]}


async def _call(session: Any, name: str, arguments: dict[str, Any]) -> Any:
    return await asyncio.wait_for(session.call_tool(name, arguments), CALL_TIMEOUT)


async def _poll_grep(session: Any, pattern: str, wanted: str, seconds: float = 10.0) -> str:
    """Grep until ``wanted`` shows up (the watcher re-syncs after a short debounce)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        text = _text(await _call(session, "lcm_grep", {"pattern": pattern}))
        if wanted in text or asyncio.get_running_loop().time() > deadline:
            return text
        await asyncio.sleep(0.2)


def _server(root: Path, env: dict[str, str] | None = None) -> Any:
    """How the SDK's stdio client starts `vaultlcm mcp` on ``root``."""
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=sys.executable, args=["-m", "vaultlcm", "--vault", str(root), "mcp"], cwd=str(root.parent), env=env,
    )


def _run(scenario: Any, errpath: Path) -> str:
    """Run a scenario against a server whose stderr goes to ``errpath``; that stderr (printed on failure)."""
    with errpath.open("w", encoding="utf-8") as errlog:
        try:
            asyncio.run(asyncio.wait_for(scenario(errlog), TOTAL_TIMEOUT))
        except BaseException:
            errlog.flush()
            print("server stderr:\n" + errpath.read_text(encoding="utf-8"), file=sys.stderr)
            raise
    return errpath.read_text(encoding="utf-8")


async def _scenario(root: Path, fact_id: str, summary_id: str, errlog: Any) -> None:
    from mcp import ClientSession, stdio_client

    async with stdio_client(_server(root), errlog=errlog) as (read, write):
        async with ClientSession(read, write) as session:
            init = await asyncio.wait_for(session.initialize(), CALL_TIMEOUT)
            server_info = getattr(init, "server_info", None) or init.serverInfo
            assert server_info.name == "vaultlcm"

            tools = {t.name: t for t in (await asyncio.wait_for(session.list_tools(), CALL_TIMEOUT)).tools}
            assert set(tools) == TOOL_NAMES
            grep_props = _schema(tools["lcm_grep"])["properties"]
            assert {"pattern", "regex", "scope", "since", "before", "limit", "offset", "sort", "count",
                    "conversation"} <= set(grep_props)
            assert _schema(tools["lcm_grep"])["required"] == ["pattern"]
            assert all(prop.get("description") for prop in grep_props.values())
            assert "supersedes" in tools["lcm_grep"].description and "time" in tools["lcm_grep"].description
            assert "offset" in tools["lcm_grep"].description and "count" in tools["lcm_grep"].description
            expand_props = _schema(tools["lcm_expand"])["properties"]
            assert {"id", "max_tokens", "depth", "around", "query"} <= set(expand_props)
            assert "turn" in tools["lcm_expand"].description
            assert "conversation" in _schema(tools["lcm_expand_query"])["properties"]

            # grep finds the planted fact (compacted under a summary) in every conversation by default
            found = await _call(session, "lcm_grep", {"pattern": "ZEBRA-4471"})
            assert not _is_error(found)
            assert fact_id in _text(found) and summary_id in _text(found)
            scoped = await _call(session, "lcm_grep", {"pattern": "ZEBRA-4471", "conversation": "heron"})
            assert fact_id in _text(scoped)

            # hit lines carry the time; sorting, paging and counting go through the schema
            lines = _text(await _call(session, "lcm_grep", {"pattern": "module", "sort": "oldest", "limit": 3,
                                                            "offset": 3, "scope": "messages"})).splitlines()
            assert lines[0].startswith("47 matches (sort oldest); showing 4-6; more with offset=6")
            assert lines[1].startswith("[") and "Step 3: module_3.py" in lines[1]
            counted = _text(await _call(session, "lcm_grep", {"pattern": "module", "count": True, "scope": "messages"}))
            assert counted.splitlines()[0] == "47 matches: 47 messages, 0 summaries, on 1 day"
            bad_sort = await _call(session, "lcm_grep", {"pattern": "module", "sort": "best"})
            assert _is_error(bad_sort)

            # expand: a message with its turn (the reply after it comes too), around N, a summary with a query
            one = await _call(session, "lcm_expand", {"id": fact_id})
            assert not _is_error(one) and "ZEBRA-4471" in _text(one) and f">> [{fact_id}]" in _text(one)
            assert "Step 6: module_6.py" in _text(one) or "Step 4: module_4.py" in _text(one)
            near = _text(await _call(session, "lcm_expand", {"id": fact_id, "around": 1}))
            assert "Step 4:" in near and "Step 6:" in near and "Step 7:" not in near
            down = await _call(session, "lcm_expand", {"id": summary_id, "max_tokens": 2000})
            assert fact_id in _text(down) and "ZEBRA-4471" in _text(down)
            asked = _text(await _call(session, "lcm_expand", {"id": summary_id, "query": "staging vault key",
                                                               "max_tokens": 200}))
            assert asked.startswith(f">> [{fact_id}]") and "(cut at the token cap" in asked

            described = json.loads(_text(await _call(session, "lcm_describe", {"id": summary_id})))
            assert described["id"] == summary_id and fact_id in described["sources"]

            answer = await _call(session, "lcm_expand_query", {"question": "What is the staging vault key?"})
            assert not _is_error(answer) and "ZEBRA-4471" in _text(answer)

            status = json.loads(_text(await _call(session, "lcm_status", {})))
            assert [c["conversation"] for c in status["conversations"]] == ["heron"]
            assert status["conversations"][0]["messages"] == 48

            # errors come back as tool errors, naming what is wrong
            bad = await _call(session, "lcm_grep", {"pattern": "x", "conversation": "nope"})
            assert _is_error(bad) and "nope" in _text(bad)
            missing = await _call(session, "lcm_expand", {"id": "m-0000000000000000"})
            assert _is_error(missing) and "m-0000000000000000" in _text(missing)

            # a person corrects the summary in Obsidian (atomic save): the watcher re-syncs it
            note = root / "conversations" / "heron" / "summaries" / f"{summary_id}.md"
            edited = note.read_text(encoding="utf-8").rstrip("\n") + "\n\nCorrection: the key moved to KESTREL-9.\n"
            tmp = note.with_name(".edit.tmp")
            tmp.write_text(edited, encoding="utf-8")
            os.replace(tmp, note)
            assert summary_id in await _poll_grep(session, "KESTREL-9", summary_id)

            # another process (an agent's engine, a hook) appends: searchable here too
            with Vault(root) as other:
                [new_id] = other.ingest("heron", [{"role": "user", "content": "The osprey build number is 9913."}])
            assert new_id in await _poll_grep(session, "9913", new_id)


@pytest.mark.timeout(90)
def test_mcp_server_over_stdio(small_vault: dict[str, Any], tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    _run(lambda errlog: _scenario(small_vault["root"], small_vault["fact_id"], small_vault["summary_id"], errlog),
         tmp_path / "server.stderr")


async def _other_backend_scenario(root: Path, fact_id: str, summary_id: str, errlog: Any) -> None:
    from mcp import ClientSession, stdio_client

    # The index on disk is Whoosh's.
    server = _server(root, env={**os.environ, "VAULTLCM_INDEX_BACKEND": "tantivy"})
    async with stdio_client(server, errlog=errlog) as (read, write):
        async with ClientSession(read, write) as session:
            await asyncio.wait_for(session.initialize(), CALL_TIMEOUT)
            found = await _call(session, "lcm_grep", {"pattern": "ZEBRA-4471"})
            assert _is_error(found) and "`vaultlcm reindex --backend tantivy`" in _text(found)
            described = json.loads(_text(await _call(session, "lcm_describe", {"id": summary_id})))
            assert fact_id in described["sources"]
            one = await _call(session, "lcm_expand", {"id": fact_id})
            assert not _is_error(one) and "ZEBRA-4471" in _text(one)
            # Another process writes: the watcher re-syncs (the closed index is not retried every second).
            with Vault(root) as other:
                other.ingest("heron", [{"role": "user", "content": "The osprey build number is 9913."}])
            await asyncio.sleep(2.5)
            status = json.loads(_text(await _call(session, "lcm_status", {})))
            assert status["conversations"][0]["messages"] == 49


@pytest.mark.timeout(90)
def test_mcp_server_beside_an_index_of_the_other_backend(small_vault: dict[str, Any], tmp_path: Path) -> None:
    """The server starts, says once on stderr that searching is off and why; searches answer with the way
    out, the other tools work; the index on disk is left as it is."""
    pytest.importorskip("mcp")
    pytest.importorskip("tantivy")
    root = small_vault["root"]
    with Vault(root) as v:
        assert v.grep("ZEBRA-4471")["hits"]  # a Whoosh index on disk
    version = (root / ".vaultlcm" / "index" / "vaultlcm-index.json").read_text()
    err = _run(lambda errlog: _other_backend_scenario(root, small_vault["fact_id"], small_vault["summary_id"], errlog),
               tmp_path / "server.stderr")
    assert err.count("searching is off until the index is switched") == 1, err
    assert "index catch-up postponed" not in err, err
    assert (root / ".vaultlcm" / "index" / "vaultlcm-index.json").read_text() == version


def test_mcp_without_the_sdk_is_a_clear_error(tmp_path: Path) -> None:
    """Without the optional `mcp` package the command says what to install (exit 1, one line)."""
    Vault.init(tmp_path / "v").close()
    code = "import sys; sys.modules['mcp'] = None; from vaultlcm.cli import cli; cli()"
    p = subprocess.run([sys.executable, "-c", code, "--vault", str(tmp_path / "v"), "mcp"],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 1
    assert p.stderr == "Error: the MCP server needs the mcp package: pip install 'vaultlcm[mcp]'\n"
    assert p.stdout == ""
