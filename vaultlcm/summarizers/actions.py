"""Tool activity as one short line per action, never raw JSON.

A tool call and its result become an :class:`Action`: what was done to what
(``edited src/x.py (+12 −3)``, ``ran pytest tests/billing → 1 failed:
test_due_date``, ``searched for "compute_due_date" (3 matches)``) and how it
ended. Consecutive similar actions merge (``read 4 files under
src/ledgerly/billing/``). Tool names are recognised across agents: generic
names (``read_file``, ``run_command``), Claude Code's (``Read``, ``Edit``,
``Bash``, ``Grep``, ``Glob``), OpenAI-style function names and MCP-prefixed
ones (``mcp__server__read_file``). Anything else is ``called name(key=value)``.

Results are summarized by their outcome (exit status, failing test names, the
error line, a match count), read from a bounded head and tail, so a
multi-megabyte tool output costs no more than a small one.
"""

from __future__ import annotations

import difflib
import json
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from .facts import clean, prose_units, score

#: Characters of a tool result examined from its start and from its end.
RESULT_HEAD = 4000
RESULT_TAIL = 8000

_KINDS: dict[str, frozenset[str]] = {
    "read": frozenset("read read_file readfile view view_file cat open_file get_file file_read notebook_read "
                      "read_many_files read_text_file fetch_file".split()),
    "list": frozenset("ls list list_dir list_directory list_files dir directory_tree tree".split()),
    "glob": frozenset("glob find_files file_search glob_files".split()),
    "edit": frozenset("edit edit_file multi_edit multiedit str_replace str_replace_editor str_replace_based_edit_tool "
                      "apply_patch patch replace replace_in_file insert notebook_edit write write_file create_file "
                      "create save_file file_write update_file append_file".split()),
    "search": frozenset("grep search search_files ripgrep rg codebase_search search_code grep_search find "
                        "find_in_files".split()),
    "shell": frozenset("bash run run_command shell execute execute_command exec terminal run_terminal_cmd "
                       "run_shell_command command sh powershell cmd run_in_terminal".split()),
    "fetch": frozenset("web_fetch webfetch fetch browse open_url http_get fetch_url read_url".split()),
    "websearch": frozenset("web_search websearch search_web google bing".split()),
    "todo": frozenset("todo_write todowrite todo update_todos todo_read todoread".split()),
    "task": frozenset("task agent dispatch_agent subagent spawn_agent delegate".split()),
}
_PATH_KEYS = ("file_path", "path", "filename", "file", "notebook_path", "target_file", "relative_workspace_path",
              "filepath", "dir", "directory", "target", "absolute_path")
_OLD_KEYS = ("old_str", "old_string", "old_text", "old", "search")
_NEW_KEYS = ("new_str", "new_string", "new_text", "new", "replace", "content", "file_text", "text", "contents")
_PATTERN_KEYS = ("pattern", "query", "regex", "q", "search", "text", "search_term")
_COMMAND_KEYS = ("command", "cmd", "script", "code", "input", "commands")

_TEST_CMD = re.compile(
    r"\b(?:pytest|py\.test|tox|nox|unittest|jest|vitest|mocha|rspec|phpunit|ctest|"
    r"(?:npm|yarn|pnpm|bun)\s+(?:run\s+)?test|cargo\s+test|go\s+test|mvn\s+\S*test|gradle\w*\s+test|make\s+test|"
    r"python\d?(?:\.\d+)?\s+-m\s+(?:pytest|unittest))\b"
)
_PYTEST_COUNTS = re.compile(r"(\d+) (passed|failed|errors?|error|skipped|xfailed|xpassed|deselected)\b")
_FAILED_TEST = re.compile(
    r"^(?:FAILED|ERROR)\s+(\S+)|^--- FAIL: (\S+)|^\s*✕\s+(.+?)(?:\s+\(\d+\s*ms\))?$|^test (\S+) \.\.\. FAILED", re.M
)
_COMMIT_LINE = re.compile(r"^\[([^\]\s]+)(?: \(root-commit\))? ([0-9a-f]{7,40})\] (.+)$", re.M)
_PR_URL = re.compile(r"https?://\S+/(pull|pulls|merge_requests|issues)/(\d+)")
_EXIT = re.compile(r"\bexit(?:ed)?(?: with)?(?: code| status)?[:= ]+(\d+)", re.I)
_ERROR_LINE = re.compile(
    r"\b\w*(?:Error|Exception)\b|\berror\b|\bfatal\b|\bfailed\b|\bFAILED\b|\bTraceback\b|No such file|"
    r"not found|Permission denied|cannot|can't|refused|timed out|panic",
    re.I,
)
_SUMMARY_LINE = re.compile(
    r"\b(?:passed|failed|error|warning|created|deleted|removed|updated|wrote|written|inserted|copied|installed|"
    r"rows?|done|complete[d]?|success(?:ful)?|ok|took|elapsed|real|matches|found|applied|upgraded|built|deployed|"
    r"rolled out|switched|merged|pushed|up to date|no changes)\b",
    re.I,
)
_JSONISH = re.compile(r"[{}\[\]\"]")
_FAILURE_WORDS = re.compile(
    r"\b(?:FAILED|failed|failure|crash(?:ed|es)?|OOMKilled|killed|\w+Error|exception|timed out|backoff|stuck|leaked|"
    r"rolled back|restarted|denied|refused|panic)\b"
)
_DIFF_LINE = re.compile(r"^(?:diff --git|index [0-9a-f]|@@|\+\+\+|---|[+-](?![+-]))")


#: What separates a tool's namespace from its name: ``mcp__fs__ReadFile``, ``fs.read``, ``fs/read``, ``fs:read``.
_TOOL_PREFIX = re.compile(r"__|\.|/|:")
_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_FAILED = re.compile(r"\b(?:failed|errors)\b")


def canonical_tool(name: str) -> str:
    """``mcp__fs__ReadFile`` → ``read_file``: the part that says what the tool does, snake_case."""
    base = _TOOL_PREFIX.split(name.strip())[-1] or name
    base = _CAMEL_HUMP.sub("_", base).lower().replace("-", "_")
    return base


def tool_kind(name: str) -> str:
    """What a tool does: one of the keys of ``_KINDS``, or ``call`` for anything else."""
    base = canonical_tool(name)
    for kind, names in _KINDS.items():
        if base in names or base.replace("_", "") in names:
            return kind
    return "call"


@dataclass
class Action:
    """One tool call (or a merged run of similar calls) and how it ended."""

    kind: str
    item: int
    """Index of the source item holding the (first) call; the line links to it."""
    text: str
    """What was done, without the outcome: ``edited src/x.py``."""
    outcome: str = ""
    """How it ended: ``→ 1 failed: test_due_date``; empty when there is nothing to say."""
    error: bool = False
    paths: list[str] = field(default_factory=list)
    added: int = 0
    removed: int = 0
    count: int = 1
    matches: int | None = None
    pattern: str = ""
    command: str = ""
    open_items: list[str] = field(default_factory=list)
    """Pending entries of a todo list the agent wrote."""

    def render(self) -> str:
        return f"{self.text} {self.outcome}".strip()

    @property
    def weight(self) -> int:
        """How much a reader needs this line: changes and failures first, reading last."""
        base = {"edit": 4, "shell": 2, "todo": 3, "task": 3, "search": 2, "fetch": 2, "websearch": 2, "call": 3,
                "read": 1, "glob": 1, "list": 1}.get(self.kind, 2)
        if self.error:
            base += 3
        if self.command.startswith(("git commit", "gh pr", "gh issue", "git push")):
            base += 4
        if _TEST_CMD.search(self.command):
            base += 1
        if self.command == "git commit" or self.command.startswith(("git tag", "gh release")):
            base += 2
        if _FAILURE_WORDS.search(self.outcome):
            base += 3  # a failed deploy, a crashed job: an event someone will ask about
        # An outcome that names things (a build number, a version, an amount) weighs more.
        return base + min(4, score(self.outcome) // 3)


# -- arguments and results ------------------------------------------------------------------


def _first(args: dict[str, Any], keys: Iterable[str]) -> Any:
    for key in keys:
        value = args.get(key)
        if value not in (None, ""):
            return value
    return None


def _short_value(value: Any, limit: int = 40) -> str:
    if isinstance(value, str):
        text = clean(value)
    elif isinstance(value, (bool, int, float)) or value is None:
        text = json.dumps(value)
    elif isinstance(value, list):
        text = f"{len(value)} item{'s' if len(value) != 1 else ''}"
    elif isinstance(value, dict):
        text = f"{len(value)} field{'s' if len(value) != 1 else ''}"
    else:
        text = clean(str(value))
    text = _JSONISH.sub("", text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def flatten_args(args: Any, limit: int = 3) -> str:
    """``city=Paris, units=metric``: the first scalar arguments, never JSON."""
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return _short_value(args)
    if not isinstance(args, dict):
        return _short_value(args) if args not in (None, "", [], {}) else ""
    parts = [f"{_short_value(k, 20)}={_short_value(v)}" for k, v in list(args.items())[:limit]]
    if len(args) > limit:
        parts.append("…")
    return ", ".join(parts)


def result_text(content: Any) -> str:
    """The text of a tool result (string or blocks), bounded to its head and tail."""
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict):
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif block.get("type") == "image":
                    parts.append("[image]")
            elif isinstance(block, str):
                parts.append(block)
        text = "\n".join(parts)
    elif content is None:
        text = ""
    else:
        text = str(content)
    if len(text) > RESULT_HEAD + RESULT_TAIL:
        text = text[:RESULT_HEAD] + "\n" + text[-RESULT_TAIL:]
    return text


def _json_outcome(text: str) -> str | None:
    """A JSON result flattened to ``key=value`` pairs (None when it is not JSON)."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        value = json.loads(stripped)
    except ValueError:
        return "returned " + ("a JSON object" if stripped[0] == "{" else "a JSON list")
    if isinstance(value, dict):
        for key in ("error", "message", "status", "result"):
            if isinstance(value.get(key), (str, int, float, bool)):
                return flatten_args({key: value[key]}, 1)
        return flatten_args(value)
    if isinstance(value, list):
        return f"{len(value)} item{'s' if len(value) != 1 else ''}"
    return _short_value(value)


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.replace("\r\n", "\n").replace("\r", "\n").split("\n") if ln.strip()]


def _words(text: str, n: int) -> str:
    words = clean(text).split()
    out = " ".join(words[:n])
    return out + (" …" if len(words) > n else "")


def _outcome_line(line: str) -> str:
    flat = _json_outcome(line)
    if flat is not None:
        return flat
    if line.count('"') >= 4 or '":' in line:
        line = _JSONISH.sub("", line)
    return _words(line, 12)


def _is_error(block: dict[str, Any], text: str) -> bool:
    if block.get("is_error") is True:
        return True
    m = _EXIT.search(text[-400:])
    return bool(m and m.group(1) != "0")


def _error_line(text: str) -> str:
    lines = _lines(text)
    for line in reversed(lines):
        if _ERROR_LINE.search(line):
            return _outcome_line(line)
    return _outcome_line(lines[-1]) if lines else "no output"


def _test_outcome(text: str) -> str:
    counts = _PYTEST_COUNTS.findall(text[-3000:])
    names: list[str] = []
    for m in _FAILED_TEST.finditer(text):
        raw = next(g for g in m.groups() if g)
        name = raw.split("::")[-1].split(" - ")[0].strip()
        if name and name not in names:
            names.append(name)
    parts: list[str] = []
    seen: set[str] = set()
    for number, word in counts[-4:]:
        word = "errors" if word.startswith("error") else word
        if word not in seen:
            seen.add(word)
            parts.append(f"{number} {word}")
    summary = ", ".join(sorted(parts, key=lambda p: (not p.endswith(("failed", "errors")), p)))
    if not summary:
        found = re.search(r"\b(?:Tests?:|test result:)\s*(.+)", text[-3000:])
        summary = _words(found.group(1), 8) if found else ""
    if names:
        shown = ", ".join(names[:3]) + (f" (+{len(names) - 3} more)" if len(names) > 3 else "")
        return f"{summary or 'failed'}: {shown}"
    return summary


def _matches(text: str) -> int:
    m = re.search(r"\bFound (\d+) (?:files?|matches|results?|lines?)\b", text[:400])
    if m:
        return int(m.group(1))
    if re.search(r"\bno (?:matches|files|results)\b", text[:400], re.I):
        return 0
    return len(_lines(text))


def _edit_counts(old: str, new: str) -> tuple[int, int]:
    a = old.splitlines() if old else []
    b = new.splitlines() if new else []
    if len(a) + len(b) > 4000:
        return max(0, len(b) - len(a)), max(0, len(a) - len(b))
    added = removed = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op != "equal":
            removed += i2 - i1
            added += j2 - j1
    return added, removed


def _patch_counts(patch: str) -> tuple[list[str], int, int]:
    paths, added, removed = [], 0, 0
    for line in patch.splitlines():
        m = re.match(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$|^\+\+\+ (?:b/)?(\S+)", line)
        if m:
            path = (m.group(1) or m.group(2) or "").strip()
            if path and path != "/dev/null" and path not in paths:
                paths.append(path)
        elif line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return paths, added, removed


def _short_path(path: str) -> str:
    path = clean(path)
    return path if len(path) <= 70 else "…" + path[-69:]


def _short_command(command: str) -> str:
    first = next((ln.strip() for ln in command.splitlines() if ln.strip()), "")
    first = re.sub(r"^(?:cd \S+ (?:&&|;) )+", "", first)
    first = clean(first).replace("`", "'")
    return first if len(first) <= 60 else first[:59].rstrip() + "…"


# -- building actions -------------------------------------------------------------------------


def make_action(call: dict[str, Any], result: dict[str, Any] | None, item: int) -> Action:
    """The action for one ``tool_call`` block and its ``tool_result`` block (if any)."""
    name = str(call.get("name") or "tool")
    args = call.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            args = {"input": args}
    if not isinstance(args, dict):
        args = {"input": args}
    kind = tool_kind(name)
    base = canonical_tool(name)
    text = result_text(result.get("content")) if result is not None else ""
    error = _is_error(result, text) if result is not None else False
    path = _first(args, _PATH_KEYS)
    path_s = _short_path(str(path)) if path is not None else ""
    if kind == "edit" and base == "str_replace_based_edit_tool" and args.get("command") == "view":
        kind = "read"
    action: Action
    if kind == "read":
        lines = ""
        if args.get("start_line") or args.get("offset") or args.get("view_range"):
            start = args.get("start_line") or args.get("offset")
            end = args.get("end_line")
            if args.get("view_range") and isinstance(args["view_range"], list) and len(args["view_range"]) == 2:
                start, end = args["view_range"]
            first = _short_value(start, 8)
            lines = f" lines {first}–{_short_value(end, 8)}" if end else f" from line {first}"
        action = Action("read", item, f"read {path_s or flatten_args(args)}{lines}",
                        paths=[path_s] if path_s else [])
    elif kind in ("list", "glob"):
        target = str(_first(args, ("pattern",)) or path_s or ".") if kind == "glob" else (path_s or ".")
        verb = "globbed" if kind == "glob" else "listed"
        action = Action(kind, item, f"{verb} {_short_value(target, 60)}", paths=[path_s] if path_s else [])
        if kind == "glob" and result is not None and not error:
            action.matches = _matches(text)
    elif kind == "edit":
        paths, added, removed = [path_s] if path_s else [], 0, 0
        patch = args.get("patch") or (args.get("input") if base in ("apply_patch", "patch") else None)
        if isinstance(patch, str):
            found, added, removed = _patch_counts(patch)
            paths = [_short_path(p) for p in found] or paths
        elif isinstance(args.get("edits"), list):
            for edit in args["edits"]:
                if isinstance(edit, dict):
                    a, r = _edit_counts(str(_first(edit, _OLD_KEYS) or ""), str(_first(edit, _NEW_KEYS) or ""))
                    added, removed = added + a, removed + r
        else:
            old = _first(args, _OLD_KEYS)
            new = _first(args, _NEW_KEYS)
            added, removed = _edit_counts(str(old or ""), str(new or ""))
            if not old and new is not None and (base in ("write", "write_file", "create_file", "create")
                                               or "old_str" in args or "old_string" in args):
                action = Action("edit", item, f"created {path_s or 'a file'} ({added} lines)", paths=paths,
                                added=added)
                return _finish(action, error, text)
        action = Action("edit", item, "edited " + (", ".join(paths) or "a file"), paths=paths, added=added,
                        removed=removed)
    elif kind == "search":
        pattern = _short_value(str(_first(args, _PATTERN_KEYS) or ""), 50)
        where = path_s or _short_value(str(args.get("include") or args.get("glob") or ""), 40)
        action = Action("search", item, f'searched for "{pattern}"' + (f" in {where}" if where else ""),
                        pattern=pattern)
        if result is not None and not error:
            action.matches = _matches(text)
    elif kind == "shell":
        command = _first(args, _COMMAND_KEYS)
        if isinstance(command, list):
            command = " ".join(str(c) for c in command)
        cmd = _short_command(str(command or ""))
        action = Action("shell", item, f"ran `{cmd}`" if cmd else "ran a command", command=cmd)
        return _finish_shell(action, error, text, str(command or "")[:2000])
    elif kind == "fetch":
        url = _short_value(str(_first(args, ("url", "uri", "href")) or flatten_args(args)), 70)
        action = Action("fetch", item, f"fetched {url}")
    elif kind == "websearch":
        query = _short_value(str(_first(args, _PATTERN_KEYS) or ""), 50)
        action = Action("websearch", item, f'searched the web for "{query}"')
    elif kind == "todo":
        todos: list[Any] = args["todos"] if isinstance(args.get("todos"), list) else []
        pending = [
            _short_value(str(t.get("content") or t.get("title") or t.get("task") or ""), 80)
            for t in todos
            if isinstance(t, dict) and str(t.get("status", "pending")).lower() not in ("completed", "done", "cancelled")
        ]
        action = Action("todo", item, f"updated the todo list ({len(todos)} item{'s' if len(todos) != 1 else ''}, "
                        f"{len(pending)} open)", open_items=[p for p in pending if p])
        return action
    elif kind == "task":
        what = _short_value(str(_first(args, ("description", "prompt", "task", "goal")) or flatten_args(args)), 60)
        action = Action("task", item, f"delegated to a subagent: {what}")
    else:
        shown = flatten_args(args)
        action = Action("call", item, f"called {_short_value(name, 40)}({shown})")
    return _finish(action, error, text)


def _finish(action: Action, error: bool, text: str) -> Action:
    action.error = error
    if error:
        action.outcome = "→ failed: " + _error_line(text)
    elif action.kind == "call" and text.strip():
        action.outcome = "→ " + _outcome_line(_lines(text)[0] if _json_outcome(text) is None else text)
    return action


def _finish_shell(action: Action, error: bool, text: str, full_command: str) -> Action:
    action.error = error
    cmd = action.command
    if _TEST_CMD.search(full_command):
        outcome = _test_outcome(text)
        if outcome:
            action.outcome = "→ " + outcome
            action.error = error or bool(_FAILED.search(outcome))
            return action
    commit = _COMMIT_LINE.search(text[:2000])
    if commit and "commit" in full_command:
        action.text = f'git commit {commit.group(2)} "{_words(commit.group(3), 8)}"'
        action.command = "git commit"
        return action
    url = _PR_URL.search(text)
    if url and cmd.startswith("gh "):
        kind = "PR" if url.group(1) != "issues" else "issue"
        action.text = f"opened {kind} #{url.group(2)}" if kind == "PR" else f"filed issue #{url.group(2)}"
        action.command = "gh pr" if kind == "PR" else "gh issue"
        return action
    if error:
        m = _EXIT.search(text[-400:])
        line = _error_line(text)
        action.outcome = f"→ exit {m.group(1)}: {line}" if m else f"→ failed: {line}"
        return action
    lines = _lines(text)
    if not lines:
        return action
    if len(lines) == 1:
        action.outcome = "→ " + _outcome_line(lines[0])
        return action
    telling = _telling_lines(lines)
    if telling:
        action.outcome = "→ " + " · ".join(telling)
        return action
    for line in reversed(lines[-40:]):
        if _SUMMARY_LINE.search(line):
            action.outcome = "→ " + _outcome_line(line)
            return action
    return action  # a long output with nothing telling in it: what ran says enough


def _telling_lines(lines: list[str], limit: int = 3) -> list[str]:
    """Up to ``limit`` short output lines that say something (a state, an id, a number), in output order.

    ``build 5207 · state FAILED · reason readiness probe timed out`` says how a
    status command ended better than its last line does.
    """
    candidates = [(i, ln) for i, ln in enumerate(lines[:60] + lines[-40:] if len(lines) > 100 else lines)
                  if len(ln) <= 160 and not _JSONISH.search(ln[:1]) and not _DIFF_LINE.match(ln)]
    scored = sorted(((score(ln), i, ln) for i, ln in candidates), key=lambda t: (-t[0], t[1]))
    picked = sorted((i, ln) for s, i, ln in scored[:limit] if s >= 2)
    return [_words(" ".join(ln.split()), 14) for _, ln in picked]


#: How a line of code opens; :data:`_CODE_LINE` is that, or a line ending in ``;``, ``{`` or ``}``.
_CODE_START = re.compile(
    r"^(?:def |class |import |from \S+ import|return\b|if |elif |else:|for |while |try:|except|with |@|#!|//|/\*|\*|"
    r"[})\]]|\{|[\w.\[\]'\"]+\s*[-+*/]?=[^=])"
)
_CODE_LINE = re.compile(_CODE_START.pattern + r"|[;{}]\s*$")
_CODE_ENDS = (";", "{", "}")
_CSV_LINE = re.compile(r"^[^\s,]*(?:,[^,]*){3,}$")
_LINE_NUMBER = re.compile(r"^\s*\d+[\t│|:]\s?")


def _prose_line(raw: str) -> str | None:
    """A result line without its line number, or None when it is code or a CSV row.

    ``_CODE_LINE.search`` of the stripped line, without a scan of every position for its end: a
    stripped line ends in white space nowhere, so ``[;{}]\\s*$`` is its last character. Each pattern
    runs only where it can match (a number or a space first, three commas).
    """
    line = _LINE_NUMBER.sub("", raw) if raw[:1].isdigit() or raw[:1].isspace() else raw
    stripped = line.strip()
    if stripped.endswith(_CODE_ENDS) or _CODE_START.match(stripped):
        return None
    if line.count(",") >= 3 and _CSV_LINE.search(line):
        return None
    return line


def result_facts(content: Any, limit: int = 2) -> list[str]:
    """Sentences of a tool result worth keeping: a runbook's "memory limit of 1536 MiB", not its code.

    Prose and log lines only (code is what was read, not what was learned),
    the ``limit`` best by :func:`~.facts.score`, in the order they appear.
    """
    text = result_text(content)
    prose = "\n".join(line for line in map(_prose_line, text.splitlines()) if line is not None)
    units = list(prose_units(prose))
    scored = sorted(((score(u), i, u) for i, u in enumerate(units)), key=lambda t: (-t[0], t[1]))
    return [u for _, u in sorted((i, u) for s, i, u in scored[:limit] if s >= 5)]


# -- merging ----------------------------------------------------------------------------------


def _common_dir(paths: list[str]) -> str:
    dirs = [posixpath.dirname(p.lstrip("…")) for p in paths]
    if not all(dirs):
        return ""
    try:
        common = posixpath.commonpath(dirs)
    except ValueError:
        return ""
    return common


def merge_actions(actions: list[Action]) -> list[Action]:
    """Consecutive similar actions as one line each (see the module docstring)."""
    out: list[Action] = []
    for action in actions:
        prev = out[-1] if out else None
        if prev is not None and not prev.error and not action.error and prev.kind == action.kind:
            merged = _merge(prev, action)
            if merged is not None:
                out[-1] = merged
                continue
        out.append(action)
    return [_render_group(a) for a in out]


def _merge(a: Action, b: Action) -> Action | None:
    if a.kind == "edit" and a.text.startswith("created") != b.text.startswith("created"):
        return None  # creating a file and changing one are different things to report
    if a.kind in ("read", "list", "glob", "edit") and b.paths:
        paths = a.paths + [p for p in b.paths if p not in a.paths]
        return replace(a, paths=paths, added=a.added + b.added, removed=a.removed + b.removed, count=a.count + b.count,
                       matches=_sum_matches(a, b))
    if a.kind == "search":
        pattern = a.pattern if b.pattern == a.pattern else f'{a.pattern}", "{b.pattern}'
        return replace(a, pattern=pattern, count=a.count + b.count, matches=_sum_matches(a, b))
    if a.kind == "shell" and a.command == b.command and not a.command.startswith("git commit"):
        return replace(a, count=a.count + b.count, outcome=b.outcome)
    return None


def _sum_matches(a: Action, b: Action) -> int | None:
    if a.matches is None and b.matches is None:
        return None
    return (a.matches or 0) + (b.matches or 0)


def _render_group(a: Action) -> Action:
    if a.count == 1 and a.kind not in ("edit", "search", "glob"):
        return a
    if a.kind == "read":
        if len(a.paths) >= 3:
            common = _common_dir(a.paths)
            where = f" under {common}/" if common and common != "." else ""
            names = ", ".join(posixpath.basename(p) for p in a.paths[:4]) + ("…" if len(a.paths) > 4 else "")
            a.text = f"read {len(a.paths)} files{where}" if where else f"read {names}"
        else:
            a.text = "read " + ", ".join(a.paths)
    elif a.kind == "list":
        a.text = "listed " + ", ".join(a.paths or ["."])
    elif a.kind == "edit":
        if a.text.startswith("created"):
            if len(a.paths) > 1:
                a.text = f"created {', '.join(a.paths[:3])}{' …' if len(a.paths) > 3 else ''} ({a.added} lines)"
            return a
        where = ", ".join(a.paths[:3]) + (f" and {len(a.paths) - 3} more" if len(a.paths) > 3 else "")
        verb = "edited" if a.count == 1 or len(a.paths) > 1 else f"edited ({a.count}×)"
        a.text = f"{verb} {where or 'a file'} (+{a.added} −{a.removed})"
    elif a.kind in ("search", "glob"):
        if a.kind == "search":
            again = f" ({a.count}×)" if a.count > 1 and '", "' not in a.pattern else ""
            a.text = f'searched for "{a.pattern}"{again}'
        if a.matches is not None:
            a.outcome = f"({a.matches} match{'es' if a.matches != 1 else ''})"
    elif a.kind == "shell" and a.count > 1:
        a.text = f"{a.text} ×{a.count}"
    return a
