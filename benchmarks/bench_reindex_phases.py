"""Where a tantivy reindex spends its time: the parent's wall and CPU per phase, the child's CPU and idle time.

    python benchmarks/bench_reindex_phases.py COPY [--digest]

``COPY`` is a vault the run may rebuild (a ``cp -a`` of a build: the reindex rewrites its
``.vaultlcm``). Prints one JSON object: the wall time, the CPU of the parent and of the
index builder (the child), the peak RSS of each and of both together (sampled every
0.2 s), each phase's exclusive wall and CPU seconds on the parent's main thread with
its number of calls, and how long the child sat idle (under a tenth of a core) during
each phase of the parent. ``--digest`` adds hashes of what the reindex built (every
document's stored fields, every term of the ``text`` field with its document
frequency, every catalog table's rows) to compare two code trees' results
(``PYTHONPATH`` picks the tree).

The phases are found by wrapping functions of the package (names looked up, missing
ones skipped), so the same script times older trees too; the wrappers cost about a
microsecond a call.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import resource
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

#: (module, attribute path, phase): the parent's phases, innermost wins (exclusive times).
PHASES = [
    ("catalog", "Catalog.reset", "catalog reset"),
    ("catalog", "Catalog._sync_file", "logs: read and commit"),
    ("catalog", "Catalog._insert", "logs: insert"),
    ("catalog", "Catalog._settle", "logs: settle order"),
    ("catalog", "Catalog.at_writer_positions", "logs: positions check"),
    ("indexing", "entry_doc", "decode and document"),
    ("index_builder", "IndexBuilder.__init__", "child start"),
    ("index_builder", "IndexBuilder._send", "send"),
    ("index_builder", "IndexBuilder.settle", "settle"),
    ("index_builder", "IndexBuilder.commit", "commit"),
    ("index_builder", "IndexBuilder._wait", "/wait"),
    ("dag", "Dag.sync", "notes sync"),
    ("dag", "Dag._read_note", "notes: read note"),
    ("dag", "Dag._scan", "notes: scan"),
    ("dag", "Dag.recompute", "recompute"),
    ("dag", "Dag.page", "summary documents"),
    ("indexing", "IndexKeeper._summary_doc", "summary documents"),
    ("indexing", "IndexKeeper._set_marks", "marks"),
    ("indexing", "open_index", "open index"),
]
#: Generators whose every step is a phase.
GENERATOR_PHASES = [("catalog", "iter_entries", "logs: parse")]


class Timer:
    """Exclusive wall and CPU time per phase of one thread (nested phases are taken out of their caller)."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.stack: list[list[Any]] = []
        self.totals: dict[str, list[float]] = {}

    def enter(self, name: str) -> None:
        if name.startswith("/"):
            name = (self.stack[-1][0] if self.stack else "?") + name
        self.stack.append([name, time.perf_counter(), time.thread_time(), 0.0, 0.0])

    def leave(self) -> None:
        name, w0, c0, inner_w, inner_c = self.stack.pop()
        w, c = time.perf_counter() - w0, time.thread_time() - c0
        t = self.totals.setdefault(name, [0.0, 0.0, 0])
        t[0] += w - inner_w
        t[1] += c - inner_c
        t[2] += 1
        if self.stack:
            self.stack[-1][3] += w
            self.stack[-1][4] += c

    @property
    def current(self) -> str:
        return self.stack[-1][0] if self.stack else "-"

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != self.thread:
                return fn(*args, **kwargs)
            self.enter(name)
            try:
                return fn(*args, **kwargs)
            finally:
                self.leave()
        return timed

    def wrap_generator(self, name: str, fn: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Iterator[Any]:
            steps = fn(*args, **kwargs)
            while True:
                self.enter(name)
                try:
                    item = next(steps)
                except StopIteration:
                    return
                finally:
                    self.leave()
                yield item
        return timed


def _install(timer: Timer) -> dict[str, int | None]:
    import importlib

    from vaultlcm import index_builder

    for module, attr, name in PHASES + GENERATOR_PHASES:
        owner: Any = importlib.import_module(f"vaultlcm.{module}")
        *path, last = attr.split(".")
        for part in path:
            owner = getattr(owner, part)
        if hasattr(owner, last):
            wrap = timer.wrap_generator if (module, attr, name) in GENERATOR_PHASES else timer.wrap
            setattr(owner, last, wrap(name, getattr(owner, last)))
    child: dict[str, int | None] = {"pid": None}
    started = index_builder.IndexBuilder.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        started(self, *args, **kwargs)
        child["pid"] = self._proc.pid

    index_builder.IndexBuilder.__init__ = init  # type: ignore[method-assign]
    return child


def _proc_rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def _proc_cpu(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return None


def digest(root: str) -> dict[str, Any]:
    """Hashes of what a tantivy reindex built: documents, terms with document frequencies, catalog tables."""
    import tantivy

    searcher = tantivy.Index.open(os.path.join(root, ".vaultlcm", "index")).searcher()
    n = searcher.num_docs
    docs = sorted(json.dumps(searcher.doc(addr).to_dict(), sort_keys=True, ensure_ascii=False)
                  for _score, addr in searcher.search(tantivy.Query.all_query(), limit=max(n, 1), count=False).hits)
    terms = sorted(searcher.terms_with_prefix("text", "", limit=10_000_000))
    out: dict[str, Any] = {
        "documents": [n, hashlib.sha256("\n".join(docs).encode()).hexdigest()[:16]],
        "terms": [len(terms), hashlib.sha256(json.dumps(terms, ensure_ascii=False).encode()).hexdigest()[:16]],
    }
    db = sqlite3.connect(os.path.join(root, ".vaultlcm", "catalog.sqlite"))
    try:
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"):
            rows = [r for r in db.execute(f"SELECT * FROM {table}") if not (table == "meta" and r[0] == "catalog_id")]
            lines = sorted(json.dumps(r, ensure_ascii=False) for r in rows)
            out[f"catalog.{table}"] = [len(lines), hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]]
    finally:
        db.close()
    return out


def main() -> None:
    root = sys.argv[1]
    os.environ["VAULTLCM_INDEX_BACKEND"] = "tantivy"
    import vaultlcm
    from vaultlcm import Vault

    timer = Timer()
    child = _install(timer)
    samples: list[tuple[float, float | None, str, int, int]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            pid = child["pid"]
            samples.append((time.perf_counter(), _proc_cpu(pid) if pid else None, timer.current,
                            _proc_rss(os.getpid()), _proc_rss(pid) if pid else 0))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    who = (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    cpu0 = [sum(resource.getrusage(w)[:2]) for w in who]
    with Vault(root) as v:
        t0 = time.perf_counter()
        timer.enter("reindex (the rest)")
        report = v.reindex()
        timer.leave()
        wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    cpu1 = [sum(resource.getrusage(w)[:2]) for w in who]
    idle: dict[str, float] = {}
    for (ta, ca, _pa, _ra, _qa), (tb, cb, pb, _rb, _qb) in zip(samples, samples[1:]):
        if ca is not None and cb is not None and cb - ca < 0.1 * (tb - ta):
            idle[pb] = idle.get(pb, 0.0) + tb - ta
    out: dict[str, Any] = {
        "package": os.path.dirname(vaultlcm.__file__),
        "load": os.getloadavg()[0],
        "messages": report["messages"],
        "wall_s": round(wall, 2),
        "msg_per_min": round(report["messages"] / wall * 60),
        "parent_cpu_s": round(cpu1[0] - cpu0[0], 2),
        "child_cpu_s": round(cpu1[1] - cpu0[1], 2),
        "peak_rss_mb": {"both": round(max((s[3] + s[4] for s in samples), default=0) / 2**20),
                        "parent": round(max((s[3] for s in samples), default=0) / 2**20),
                        "child": round(max((s[4] for s in samples), default=0) / 2**20)},
        "phases": {k: {"wall_s": round(w, 2), "cpu_s": round(c, 2), "calls": int(n)}
                   for k, (w, c, n) in sorted(timer.totals.items(), key=lambda kv: -kv[1][1])},
        "child_idle_s": {k: round(s, 1) for k, s in sorted(idle.items(), key=lambda kv: -kv[1])},
    }
    if "--digest" in sys.argv:
        out["digest"] = digest(root)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
