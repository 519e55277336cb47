"""The fictional project the generated sessions work on, and the noise it produces.

Everything here is ordinary agent traffic with no planted fact in it: a repo
(``tidewater``, a logistics platform in Python), code listings, pytest runs,
git output, service logs, grep results and the chatter around them. Every
helper takes the session's :class:`random.Random`, so a seed gives the same
bytes. Numbers go through :meth:`World.num`, which never returns a number a
planted fact uses, so an answer string cannot turn up by chance in the noise.
"""

from __future__ import annotations

import random
import string
import zlib

PACKAGES = {
    "routing": "routing-api", "billing": "billing-service", "notify": "notifier", "ledger": "ledger-core",
    "auth": "auth-gateway", "exports": "export-worker", "payouts": "payouts", "search": "search-indexer",
}
MODULES = ["service", "models", "handlers", "schemas", "client", "tasks", "repository", "rules", "cache", "views"]
VERBS = ["compute", "load", "build", "apply", "resolve", "parse", "fetch", "render", "validate", "schedule",
         "normalize", "merge", "emit", "reconcile", "flush", "split", "score", "group", "expire", "sync"]
NOUNS = ["route", "leg", "shipment", "manifest", "tariff", "quote", "invoice_line", "ledger_row", "payout",
         "webhook", "session", "carrier", "stop", "window", "batch", "rate_card", "depot", "parcel", "label", "hold"]
ERRORS = ["ValueError", "KeyError", "TimeoutError", "IntegrityError", "ValidationError", "CarrierUnavailable",
          "StaleManifest", "RateCardMissing"]
#: Teammates who only ever appear in noise (facts use their own names).
NOISE_PEOPLE = ["Tomás", "Wen", "Kofi", "Aiko", "Bilal", "Marta", "Jonas", "Leila"]
USER = "Priya"


class World:
    """Noise generators over one seeded ``random.Random``."""

    def __init__(self, rng: random.Random, reserved_numbers: set[int]) -> None:
        self.rng = rng
        self.reserved = reserved_numbers
        self.files = [(pkg, mod) for pkg in PACKAGES for mod in MODULES]

    # -- small pieces ------------------------------------------------------------

    def num(self, lo: int, hi: int) -> int:
        """A random integer in ``[lo, hi]`` that no planted fact uses."""
        for _ in range(100):
            n = self.rng.randint(lo, hi)
            if n not in self.reserved:
                return n
        return n  # a range made only of reserved numbers: the check in sessions.py still guards answers

    def pick(self, seq: list[str] | tuple[str, ...]) -> str:
        return self.rng.choice(seq)

    def hexid(self, n: int = 7) -> str:
        while True:
            h = "".join(self.rng.choice("0123456789abcdef") for _ in range(n))
            if any(c.isalpha() for c in h) and any(c.isdigit() for c in h):
                return h

    def call_id(self) -> str:
        return "toolu_01" + "".join(self.rng.choice(string.ascii_letters + string.digits) for _ in range(22))

    def func(self) -> str:
        return f"{self.pick(VERBS)}_{self.pick(NOUNS)}"

    def file(self) -> tuple[str, str, str]:
        pkg, mod = self.rng.choice(self.files)
        return pkg, f"src/tidewater/{pkg}/{mod}.py", f"tests/{pkg}/test_{mod}.py"

    def service(self) -> str:
        return PACKAGES[self.pick(list(PACKAGES))]

    def teammate(self) -> str:
        return self.pick(NOISE_PEOPLE)

    # -- code ----------------------------------------------------------------------

    def code_lines(self, path: str) -> list[str]:
        """The same file always reads the same (seeded by its path), like a real checkout."""
        r = random.Random(zlib.crc32(path.encode()))
        if path.startswith("tests/"):
            return self._test_lines(path, r)
        pkg = path.split("/")[2] if path.startswith("src/") else "core"
        out = [f'"""{pkg.capitalize()} {path.rsplit("/", 1)[-1][:-3]}: {r.choice(NOUNS).replace("_", " ")} handling."""',
               "from __future__ import annotations", "", "import logging",
               f"from tidewater.{pkg} import {r.choice(MODULES)}", "", "logger = logging.getLogger(__name__)", ""]
        for _ in range(r.randint(2, 4)):
            fn = f"{r.choice(VERBS)}_{r.choice(NOUNS)}"
            a, b = r.sample(["stop", "leg", "account", "payload", "rows", "carrier", "ts", "limit", "ctx"], 2)
            out.append(f"def {fn}({a}, {b}=None):")
            out.append(f'    """{r.choice(VERBS).capitalize()} the {r.choice(NOUNS).replace("_", " ")} for one {a}."""')
            v = r.choice(["result", "items", "total", "found", "pending"])
            for _ in range(r.randint(3, 7)):
                kind = r.randrange(6)
                if kind == 0:
                    out.append(f"    {v} = {r.choice(VERBS)}_{r.choice(NOUNS)}({a}, {b})")
                elif kind == 1:
                    out += [f"    if {b} is None:", f"        {b} = {r.randint(2, 90)}"]
                elif kind == 2:
                    out += [f"    for row in {v} or []:", f"        row.{r.choice(['touch', 'close', 'refresh'])}()"]
                elif kind == 3:
                    out.append(f'    logger.{r.choice(["info", "debug", "warning"])}("{r.choice(VERBS)} %s", {a})')
                elif kind == 4:
                    out += [f"    if not {a}:", f'        raise {r.choice(ERRORS)}("{r.choice(NOUNS)} missing")']
                else:
                    out.append(f"    {v} = [x for x in {v} if x.{r.choice(['active', 'due', 'open'])}]")
            out += [f"    return {v}", ""]
        return out

    def _test_lines(self, path: str, r: random.Random) -> list[str]:
        pkg, mod = path.split("/")[1], path.rsplit("/", 1)[-1][5:-3]
        out = ["import pytest", "", f"from tidewater.{pkg} import {mod}", "from tests.factories import make_stop, make_route", ""]
        for _ in range(r.randint(3, 5)):
            fn = f"{r.choice(VERBS)}_{r.choice(NOUNS)}"
            case = r.choice(["empty", "single_leg", "retry", "rollover", "inactive", "large_account", "unicode"])
            out.append(f"def test_{fn}_{case}(db, frozen_clock):")
            out.append(f"    route = make_route(stops={r.randint(0, 12)}, carrier=\"{r.choice(['bluefin', 'kestrel', 'gull'])}\")")
            out.append(f"    result = {mod}.{fn}(route, limit={r.randint(1, 40)})")
            for _ in range(r.randint(1, 3)):
                out.append(r.choice([f"    assert result.total == {r.randint(0, 500)}",
                                     "    assert not result.pending",
                                     f"    assert len(result.rows) == {r.randint(0, 30)}",
                                     f"    assert result.rows[0].{r.choice(['status', 'carrier', 'due'])} is not None"]))
            if r.random() < 0.3:
                out += [f"    with pytest.raises({r.choice(ERRORS)}):", f"        {mod}.{fn}(None)"]
            out.append("")
        return out

    def listing(self, path: str) -> str:
        lines = self.code_lines(path)
        start = self.rng.randint(0, max(0, len(lines) - 24))
        chunk = lines[start : start + self.rng.randint(14, 34)]
        return "\n".join(f"{start + i + 1:>6}\t{ln}" for i, ln in enumerate(chunk))

    def edit(self, path: str) -> tuple[dict[str, str], str]:
        """An edit_file call's arguments and its tool result."""
        lines = [ln for ln in self.code_lines(path) if ln.startswith("    ") and len(ln) > 12]
        old = self.pick(lines)
        new = old.replace("None", "()") if "None" in old else old + f"  # {self.pick(VERBS)} first"
        if self.rng.random() < 0.5:
            new += f"\n    {self.func()}({self.pick(['row', 'stop', 'leg'])})"
        at = self.num(20, 140)
        result = (f"The file {path} has been edited. Snippet of the edited file:\n"
                  + "\n".join(f"{at + i:>6}\t{ln}" for i, ln in enumerate(new.split("\n"))))
        return {"path": path, "old_str": old.strip(), "new_str": new.strip()}, result

    def diff(self, path: str) -> str:
        lines = self.code_lines(path)
        at = self.rng.randint(5, max(6, len(lines) - 6))
        ctx = lines[at : at + 3]
        body = [f" {ln}" for ln in ctx]
        body.insert(1, f"-{ctx[0] if ctx else ''}")
        body.insert(2, f"+    {self.func()}({self.pick(['row', 'stop', 'payload'])})")
        return (f"diff --git a/{path} b/{path}\nindex {self.hexid()}..{self.hexid()} 100644\n--- a/{path}\n+++ b/{path}\n"
                f"@@ -{at},{len(ctx)} +{at},{len(ctx) + 1} @@\n" + "\n".join(body))

    # -- commands -----------------------------------------------------------------

    def pytest(self, test_path: str, fail: str | None = None) -> str:
        n = self.num(6, 48)
        dots = "".join("F" if fail and i == n // 2 else "." for i in range(n))
        secs = f"{self.num(1, 19)}.{self.num(10, 99)}s"
        head = ("============================= test session starts ==============================\n"
                "platform linux -- Python 3.11.9, pytest-8.3.3, pluggy-1.5.0\nrootdir: /home/priya/src/tidewater\n"
                f"collected {n} items\n\n{test_path} {dots} [100%]\n")
        if not fail:
            return head + f"\n============================== {n} passed in {secs} =============================="
        exp, got = self.num(10, 900), self.num(10, 900)
        return head + (
            f"\n=================================== FAILURES ===================================\n"
            f"_______________________ {fail} _______________________\n\n"
            f"    def {fail}(db, frozen_clock):\n        result = {self.func()}(make_stop(), limit={self.num(2, 30)})\n"
            f">       assert result.total == {exp}\nE       assert {got} == {exp}\n"
            f"E        +  where {got} = <Result total={got} pending={self.num(0, 9)}>.total\n\n"
            f"{test_path}:{self.num(20, 300)}: AssertionError\n"
            f"=========================== short test summary info ============================\n"
            f"FAILED {test_path}::{fail} - assert {got} == {exp}\n"
            f"========================= 1 failed, {n - 1} passed in {secs} =========================")

    def git_log(self, n: int) -> str:
        rows = []
        for _ in range(n):
            h = self.hexid()
            msg = self.pick(["Tighten", "Fix", "Refactor", "Add tests for", "Speed up", "Log", "Document"]) + \
                f" {self.func()} in {self.pick(list(PACKAGES))}"
            rows.append(f"{h} {msg}")
        return "\n".join(rows)

    def commit(self, branch: str, message: str) -> str:
        h = self.hexid()
        files, ins, dels = self.num(1, 6), self.num(2, 80), self.num(0, 40)
        return (f"[{branch} {h}] {message}\n {files} files changed, {ins} insertions(+), {dels} deletions(-)")

    def log_lines(self, service: str, n: int) -> str:
        levels = ["INFO", "INFO", "INFO", "WARNING", "DEBUG", "ERROR"]
        out = []
        clock = self.num(9, 16) * 3600 + self.num(0, 3599)
        for _ in range(n):
            clock += self.num(0, 90)
            lvl = self.pick(levels)
            ev = self.pick(["request finished", "cache miss", "retrying upstream", "slow query", "job done",
                            "lease renewed", "connection reset", "batch flushed"])
            out.append(f"{clock // 3600:02d}:{clock // 60 % 60:02d}:{clock % 60:02d}.{self.num(100, 999)} {lvl:<7} "
                       f"{service} {ev} request_id={self.hexid(12)} duration_ms={self.num(3, 4000)} "
                       f"{self.pick(['stop', 'route', 'account', 'batch'])}_id={self.num(1000, 99999)}")
        return "\n".join(out)

    def grep_out(self, term: str) -> str:
        rows = []
        for _ in range(self.rng.randint(2, 7)):
            _, path, _ = self.file()
            rows.append(f"{path}:{self.num(5, 300)}:    {term}({self.pick(['stop', 'leg', 'row', 'ctx'])})")
        return "\n".join(rows)

    def lint(self) -> str:
        if self.rng.random() < 0.5:
            return "All checks passed!"
        _, path, _ = self.file()
        code = self.pick(["F401 `typing.Any` imported but unused", "E501 Line too long (131 > 120)",
                          "B006 Do not use mutable data structures for argument defaults",
                          "UP035 `typing.Dict` is deprecated, use `dict` instead"])
        return f"{path}:{self.num(1, 200)}:{self.num(1, 80)}: {code}\nFound 1 error."

    def git_status(self, paths: list[str]) -> str:
        return ("On branch " + self.pick(["main", "fix/" + self.pick(NOUNS), "feat/" + self.pick(NOUNS)]) +
                "\nChanges not staged for commit:\n" + "\n".join(f"\tmodified:   {p}" for p in paths))

    def deploy_ok(self, service: str, build: int) -> str:
        return (f"deployctl status {service}\n  build      {build}\n  image      registry.internal/{service}:{self.hexid(10)}\n"
                f"  rollout    {self.num(3, 12)}/{self.num(3, 12)} pods ready\n  state      SUCCEEDED\n  took       {self.num(40, 400)}s")
