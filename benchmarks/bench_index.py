#!/usr/bin/env python
"""Benchmark the full-text index backends against SQLite FTS5 doing the same work.

    python benchmarks/bench_index.py --docs 100000 --backend both

Synthetic message-like documents (Zipf-distributed vocabulary, identifiers such as
paths, snake_case names, message ids and port numbers, 20 conversations, 10%
summaries) are indexed three ways in the same run:

* bulk: ``SearchIndex.rebuild`` vs one FTS5 transaction (docs/min);
* incremental: ``SearchIndex.add`` of one document at a time at ``--add-rate``
  docs/s, timing the add call itself (the index commits in the background), vs
  an FTS5 insert committed per document (WAL, synchronous=NORMAL);
* queries: a fixed mix (rare/common words, AND, phrase, prefix, identifiers,
  filters) run ``--repeat`` times each after the incremental phase.

Ratios are "backend / FTS5": above 1 is better for throughput, below 1 is better
for latencies.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vaultlcm.index import open_index  # noqa: E402
from vaultlcm.index.base import IndexDoc  # noqa: E402
from vaultlcm.index.query import parse_query  # noqa: E402

COMMON = (
    "the of and to in is it that for on with as this was be at by not are from or have an but they which you "
    "were all we there been one if would will when who more no so what out up about into than them can only other "
    "time new some could these two may first then do any like now over such after also did many before must "
    "through back where much your way well down should because each just those how too little good very make "
    "still own see work long get here between both life being under never day same another know while last "
    "might great old year off come since against go came right used take three"
).split()
SYLLABLES = "ka lo mi ne ru sa te vo zu pi da fe gi ho ju ly mo nu qa ri st tr pl an er in on".split()


def _pseudo_words(n: int, rng: random.Random) -> list[str]:
    seen: set[str] = set(COMMON)
    words: list[str] = []
    while len(words) < n:
        w = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


@dataclass
class Corpus:
    docs: list[IndexDoc]
    vocab: list[str]
    paths: list[str]
    snakes: list[str]
    ids_in_text: list[str]
    incremental: list[IndexDoc] = field(default_factory=list)


def make_corpus(n: int, n_incremental: int, seed: int = 7) -> Corpus:
    rng = random.Random(seed)
    vocab = COMMON + _pseudo_words(20_000, rng)
    weights = [1.0 / (r + 1) ** 1.07 for r in range(len(vocab))]  # Zipf
    cum = list(_accumulate(weights))
    paths = [f"src/{rng.choice(vocab[200:2000])}/{rng.choice(vocab[200:5000])}_{i}.py" for i in range(400)]
    snakes = [f"{rng.choice(vocab[100:3000])}_{rng.choice(vocab[100:3000])}_{i}" for i in range(400)]
    camels = ["".join(w.capitalize() for w in rng.sample(vocab[100:3000], 2)) for _ in range(200)]
    ids_in_text: list[str] = []
    base = 1_760_000_000.0

    def make(i: int) -> IndexDoc:
        length = max(3, min(400, int(rng.lognormvariate(3.6, 0.8))))
        words = rng.choices(vocab, cum_weights=cum, k=length)
        for _ in range(rng.randint(0, 3)):
            r = rng.random()
            if r < 0.3:
                ident = rng.choice(paths)
            elif r < 0.55:
                ident = rng.choice(snakes)
            elif r < 0.7:
                ident = rng.choice(camels)
            elif r < 0.85:
                ident = f"m-{rng.getrandbits(32):08x}"
                if len(ids_in_text) < 50:
                    ids_in_text.append(ident)
            else:
                ident = str(rng.choice([8443, 8080, 5432, 6379, 3000, 27017]))
            words.insert(rng.randrange(len(words) + 1), ident)
        if rng.random() < 0.2:  # some structure: newlines, punctuation
            words.insert(rng.randrange(len(words) + 1), "\n\n```\n")
        summary = i % 10 == 9
        return IndexDoc(
            id=f"sum_{i:012x}" if summary else f"m-{i:012x}",
            kind="summary" if summary else "message",
            conversation=f"conv-{i % 20:02d}",
            text=" ".join(words),
            at=base + i * 7.0,
            role="" if summary else ("user", "assistant", "tool")[i % 3],
            depth=(i // 10) % 2 if summary else -1,
            content_hash=f"{rng.getrandbits(64):016x}",
        )

    docs = [make(i) for i in range(n)]
    incremental = [make(n + i) for i in range(n_incremental)]
    return Corpus(docs, vocab, paths, snakes, ids_in_text, incremental)


def _accumulate(xs: list[float]) -> list[float]:
    total, out = 0.0, []
    for x in xs:
        total += x
        out.append(total)
    return out


def query_mix(c: Corpus) -> list[tuple[str, dict]]:
    """Fixed queries: (query, filters)."""
    v = c.vocab
    sample = c.docs[len(c.docs) // 3].text.split()
    phrase = next(
        (f'"{a} {b}"' for a, b in zip(sample, sample[1:]) if a.isalpha() and b.isalpha() and a not in COMMON[:20]),
        f'"{v[300]} {v[301]}"',
    )
    mid_since = c.docs[len(c.docs) // 2].at
    return [
        (v[5000], {}),  # rare word
        (v[300], {}),  # mid-frequency word
        (v[3], {}),  # very common word
        (f"{v[250]} {v[400]}", {}),  # AND of two words
        (phrase, {}),  # phrase from a real document
        (v[520][:4] + "*", {}),  # prefix
        (c.paths[7], {}),  # path identifier
        (c.snakes[11], {}),  # snake_case identifier
        (c.ids_in_text[0] if c.ids_in_text else "m-deadbeef", {}),  # message id
        ("8443", {}),  # number
        (v[310], {"conversations": ["conv-03"]}),  # conversation filter
        (v[320], {"kind": "summary", "since": mid_since}),  # kind + time filter
    ]


# ------------------------------------------------------------------------ FTS5


def fts5_query(q: str) -> str:
    """The same query in FTS5 syntax (quoted tokens, phrases, prefix*)."""
    parts = []
    for clause in parse_query(q).clauses:
        parts.append(_fts5_clause(clause))
    return " AND ".join(parts) if parts else '""'


def _fts5_clause(node: object) -> str:
    from vaultlcm.index.query import QAny, QPhrase, QPhrasePrefix, QPrefix, QTerm

    if isinstance(node, QTerm):
        return '"' + " ".join(node.text.replace('"', " ").split()) + '"'
    if isinstance(node, QPhrase):
        return '"' + " ".join(node.words) + '"'
    if isinstance(node, QPrefix):
        return '"' + node.text + '"*'
    if isinstance(node, QPhrasePrefix):
        return '"' + " ".join(node.words) + '"*'
    assert isinstance(node, QAny)
    # FTS5's tokenizer splits identifiers, so the phrase-of-parts option is enough.
    return _fts5_clause(node.options[-1])


class Fts5:
    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path / "fts5.db", isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute(
            "CREATE VIRTUAL TABLE fts USING fts5(text, id UNINDEXED, kind UNINDEXED, conversation UNINDEXED, "
            "at UNINDEXED, content_hash UNINDEXED)"
        )

    def bulk(self, docs: list[IndexDoc]) -> None:
        self.db.execute("BEGIN")
        self.db.executemany(
            "INSERT INTO fts(text, id, kind, conversation, at, content_hash) VALUES (?,?,?,?,?,?)",
            [(d.text, d.id, d.kind, d.conversation, d.at, d.content_hash) for d in docs],
        )
        self.db.execute("COMMIT")

    def add(self, d: IndexDoc) -> None:  # autocommit: durable and visible on return
        self.db.execute(
            "INSERT INTO fts(text, id, kind, conversation, at, content_hash) VALUES (?,?,?,?,?,?)",
            (d.text, d.id, d.kind, d.conversation, d.at, d.content_hash),
        )

    def search(self, q: str, kind: str | None = None, conversations: list[str] | None = None,
               since: float | None = None, before: float | None = None, limit: int = 20) -> list[tuple]:
        sql = "SELECT id, kind, conversation, snippet(fts, 0, '', '', '…', 30), at FROM fts WHERE fts MATCH ?"
        args: list[object] = [fts5_query(q)]
        if kind:
            sql += " AND kind = ?"
            args.append(kind)
        if conversations:
            sql += f" AND conversation IN ({','.join('?' * len(conversations))})"
            args.extend(conversations)
        if since is not None:
            sql += " AND at >= ?"
            args.append(since)
        if before is not None:
            sql += " AND at < ?"
            args.append(before)
        sql += " ORDER BY rank, at DESC LIMIT ?"
        args.append(limit)
        return self.db.execute(sql, args).fetchall()

    def close(self) -> None:
        self.db.close()


# ------------------------------------------------------------------------ runs


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, math.ceil(p / 100 * len(xs)) - 1))]


def dir_mb(p: Path) -> float:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) / 1e6


def paced(docs: list[IndexDoc], rate: float, fn: Callable[[IndexDoc], None]) -> list[float]:
    """Call ``fn`` once per doc at ``rate`` docs/s; return each call's seconds."""
    lat = []
    interval = 1.0 / rate if rate > 0 else 0.0
    start = time.perf_counter()
    for i, d in enumerate(docs):
        t0 = time.perf_counter()
        fn(d)
        lat.append(time.perf_counter() - t0)
        wait = start + (i + 1) * interval - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
    return lat


def run_queries(queries: list[tuple[str, dict]], repeat: int, fn: Callable[..., object]) -> tuple[list[float], int]:
    for q, f in queries:  # warm-up
        fn(q, **f)
    lat, hits = [], 0
    for _ in range(repeat):
        for q, f in queries:
            t0 = time.perf_counter()
            res = fn(q, **f)
            lat.append(time.perf_counter() - t0)
            hits += len(res)  # type: ignore[arg-type]
    return lat, hits


def bench_fts5(c: Corpus, work: Path, args: argparse.Namespace) -> dict:
    d = work / "fts5"
    d.mkdir()
    f = Fts5(d)
    t0 = time.perf_counter()
    f.bulk(c.docs)
    bulk_s = time.perf_counter() - t0
    add_lat = paced(c.incremental, args.add_rate, f.add)
    q_lat, hits = run_queries(query_mix(c), args.repeat, f.search)
    f.close()
    return dict(name="sqlite-fts5", bulk_s=bulk_s, add=add_lat, visible_s=0.0, query=q_lat, hits=hits,
                size_mb=dir_mb(d))


def bench_backend(backend: str, c: Corpus, work: Path, args: argparse.Namespace) -> dict:
    d = work / backend
    ix = open_index(backend, d)
    t0 = time.perf_counter()
    n = ix.rebuild(iter(c.docs))
    bulk_s = time.perf_counter() - t0
    assert n == len(c.docs), (n, len(c.docs))
    add_lat = paced(c.incremental, args.add_rate, lambda doc: ix.add([doc]))
    t0 = time.perf_counter()
    ix.flush()
    visible_s = time.perf_counter() - t0
    assert ix.count() == len(c.docs) + len(c.incremental)
    q_lat, hits = run_queries(query_mix(c), args.repeat, ix.search)
    t0 = time.perf_counter()
    hashes = ix.stored_hashes()
    hashes_s = time.perf_counter() - t0
    assert len(hashes) == len(c.docs) + len(c.incremental)
    ix.close()
    return dict(name=backend, bulk_s=bulk_s, add=add_lat, visible_s=visible_s, query=q_lat, hits=hits,
                size_mb=dir_mb(d), hashes_s=hashes_s)


def report(results: list[dict], n_docs: int) -> list[dict]:
    rows = []
    for r in results:
        rows.append(dict(
            name=r["name"],
            bulk_docs_per_min=n_docs / r["bulk_s"] * 60,
            add_p50_us=pct(r["add"], 50) * 1e6,
            add_p99_us=pct(r["add"], 99) * 1e6,
            add_max_us=max(r["add"]) * 1e6,
            query_p50_ms=pct(r["query"], 50) * 1e3,
            query_p95_ms=pct(r["query"], 95) * 1e3,
            size_mb=r["size_mb"],
            flush_after_adds_ms=r["visible_s"] * 1e3,
            stored_hashes_ms=r.get("hashes_s", float("nan")) * 1e3,
            hits=r["hits"],
        ))
    b = rows[0]
    metrics = [
        ("bulk rebuild (docs/min)", "bulk_docs_per_min", "{:,.0f}"),
        ("add() p50 (us)", "add_p50_us", "{:,.1f}"),
        ("add() p99 (us)", "add_p99_us", "{:,.1f}"),
        ("add() max (us)", "add_max_us", "{:,.1f}"),
        ("query p50 (ms)", "query_p50_ms", "{:,.2f}"),
        ("query p95 (ms)", "query_p95_ms", "{:,.2f}"),
        ("size on disk (MB)", "size_mb", "{:,.1f}"),
        ("flush after adds (ms)", "flush_after_adds_ms", "{:,.1f}"),
        ("stored_hashes() (ms)", "stored_hashes_ms", "{:,.1f}"),
        ("hits returned (sum)", "hits", "{:,}"),
    ]
    width = 26
    print(f"\n{n_docs:,} docs; ratios are backend / FTS5 (same run)\n")
    print("metric".ljust(width) + "".join(r["name"].rjust(24) for r in rows))
    for label, key, fmt in metrics:
        line = label.ljust(width)
        for r in rows:
            val = fmt.format(r[key]) if not (isinstance(r[key], float) and math.isnan(r[key])) else "-"
            if r is not b and key not in ("hits", "flush_after_adds_ms", "stored_hashes_ms") and b[key]:
                val += f" ({r[key] / b[key]:.2f}x)"
            line += val.rjust(24)
        print(line)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=100_000, help="documents in the bulk rebuild (default 100000)")
    ap.add_argument("--backend", choices=["whoosh", "tantivy", "both"], default="both")
    ap.add_argument("--incremental", type=int, default=2000, help="documents added one by one after the rebuild")
    ap.add_argument("--add-rate", type=float, default=500.0, help="add() calls per second (0 = as fast as possible)")
    ap.add_argument("--repeat", type=int, default=25, help="passes over the query mix")
    ap.add_argument("--workdir", type=Path, default=None, help="where to build the indexes (default: a temp dir)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    args = ap.parse_args()

    backends = ["whoosh", "tantivy"] if args.backend == "both" else [args.backend]
    t0 = time.perf_counter()
    corpus = make_corpus(args.docs, args.incremental)
    words = statistics.mean(len(d.text.split()) for d in corpus.docs[:2000])
    print(f"corpus: {args.docs:,} docs (+{args.incremental:,} incremental), ~{words:.0f} words/doc, "
          f"generated in {time.perf_counter() - t0:.1f}s")
    work = Path(tempfile.mkdtemp(prefix="bench-index-", dir=args.workdir))
    try:
        results = [bench_fts5(corpus, work, args)]
        print(f"  sqlite-fts5 done ({results[-1]['bulk_s']:.1f}s bulk)")
        for b in backends:
            results.append(bench_backend(b, corpus, work, args))
            print(f"  {b} done ({results[-1]['bulk_s']:.1f}s bulk)")
        rows = report(results, args.docs)
        if args.json:
            args.json.write_text(json.dumps({"docs": args.docs, "results": rows}, indent=2) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
