"""Memory of a long-running ``Engine``: does its RSS grow with history?

    python benchmarks/bench_engine_memory.py --backend tantivy --messages 200000 --out benchmarks/results/engine_memory.json

One ``Engine`` lives for the whole run, as a 24/7 agent's would: every message
is ingested on the agent path (durable before return; with ``--batch turn``, the
default, a turn's messages, the user's and the replies and tool results that
follow it, in one call, as an agent loop that stores each exchange does; with
``--batch message`` one call per message), ``after_turn`` schedules compaction
in the background after each turn, the context is assembled every
``--assemble-every`` turns and the memory tools (``lcm_grep``) are called every
``--grep-every`` turns, so the index is open and followed too. Traffic is
``benchmarks/common`` agent traffic, about 2,860 messages a day (a million over
350 days).

Every ``--sample-every`` messages the process's resident set (``VmRSS``, and its
anonymous part ``RssAnon``: memory the process allocated, not files mapped in)
is recorded. The result is the RSS at the end, its high-water mark, and the
slope in MiB per 1,000 messages over the second half of the run (a least-squares
fit, so one spike does not decide it): flat means costs do not grow with
history. The machine is shared and noisy: read the slope, not single samples.

``--trace A:B`` also starts ``tracemalloc`` at message A and prints, at message B,
what Python allocated in between and still holds, by traceback (what grows per
message for the life of the process). Tracing slows the run several times.

``--native-trace A:B`` records every allocation from message A to message B with memray (``pip
install memray``), native stack frames included (SQLite's, tantivy's, tiktoken's allocations, which
tracemalloc cannot see), and prints what was allocated in that window and is still held at B, by
owning library and by stack: what grows in native memory, and whose it is.

A run of 200k messages takes hours on a loaded 2-core machine: it is a slow
benchmark, outside the test suite (the suite runs a few hundred messages as a
smoke test). Compare two versions of the code in the same minutes by running this
script with ``PYTHONPATH`` pointing at the other checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import synthetic_messages  # noqa: E402

from vaultlcm import Engine, Vault  # noqa: E402

PER_DAY = 2_860
START = datetime(2025, 1, 1, tzinfo=UTC)


def _status_mib(field: str) -> float | None:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return None


def rss_mib() -> float:
    """Current resident set of this process (not the high-water mark), in MiB."""
    try:
        value = _status_mib("VmRSS")
    except OSError:
        value = None
    # Not Linux: the high-water mark is all there is.
    return value if value is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def anon_mib() -> float:
    """The anonymous part of the resident set (heap, not mapped files), in MiB; NaN where unknown."""
    try:
        value = _status_mib("RssAnon")
    except OSError:
        value = None
    return value if value is not None else float("nan")


def malloc_mib(trim: bool = False) -> dict[str, float] | None:
    """What glibc's allocator holds, summed over its arenas: ``used`` (handed out and not freed: native
    memory of SQLite, tantivy and Python's large objects) and ``free`` (freed but kept, not returned to
    the system). With ``trim``, ``malloc_trim(0)`` runs first and ``anon_trimmed`` is the anonymous
    memory left after it. None where the allocator is not glibc's.
    """
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _Mallinfo2
    except (OSError, AttributeError):
        return None
    out: dict[str, float] = {}
    if trim:
        libc.malloc_trim(0)
        out["anon_trimmed"] = anon_mib()
    info = libc.mallinfo2()
    # arena: bytes of the main heap; hblkhd: bytes in large blocks mmapped one by one.
    out.update(used=(info.uordblks + info.hblkhd) / 2**20, free=info.fordblks / 2**20,
               heap=(info.arena + info.hblkhd) / 2**20,
               # Python's own small-object allocator does not go through malloc: the blocks it has out
               # (thousands) say whether live Python objects grow, where its arenas may only fragment.
               py_kblocks=sys.getallocatedblocks() / 1000)
    arenas = _pymalloc_arenas()
    if arenas is not None:
        out["py_arenas"] = arenas / 2**20
    heaps = malloc_arenas(libc)
    if heaps:
        # Per glibc arena (0 is the main thread's; the others are shared by the threads that allocate):
        # which thread's heap grows, and whether it is memory in use or freed and kept.
        out["arenas"] = len(heaps)
        for nr, (size, free) in heaps.items():
            out[f"arena{nr}_mib"] = round(size / 2**20, 2)
            out[f"arena{nr}_used_mib"] = round((size - free) / 2**20, 2)
    out["threads"] = _threads()
    return out


def malloc_arenas(libc: Any) -> dict[int, tuple[int, int]]:
    """Each glibc arena's bytes from the system and bytes free in it (``malloc_info``'s XML), by arena number."""
    import ctypes
    import re

    with tempfile.NamedTemporaryFile(suffix=".xml") as tmp:
        libc.fopen.restype = ctypes.c_void_p
        libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
        libc.fclose.argtypes = [ctypes.c_void_p]
        fp = libc.fopen(tmp.name.encode(), b"w")
        if not fp:
            return {}
        try:
            libc.malloc_info(0, fp)
        finally:
            libc.fclose(fp)
        text = Path(tmp.name).read_text()
    heaps: dict[int, tuple[int, int]] = {}
    for nr, body in re.findall(r'<heap nr="(\d+)">(.*?)</heap>', text, re.S):
        current = re.search(r'<system type="current" size="(\d+)"', body)
        free = sum(int(x) for x in re.findall(r'<total type="(?:fast|rest)" count="\d+" size="(\d+)"', body))
        if current:
            heaps[int(nr)] = (int(current.group(1)), free)
    return heaps


def _threads() -> int:
    """Threads of this process now (``/proc/self/status``), 0 where unknown."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pymalloc_arenas() -> int | None:
    """Bytes of the arenas Python's small-object allocator holds now, from ``sys._debugmallocstats``
    (which prints to the C stderr, so it is caught through a temp file on fd 2)."""
    try:
        with tempfile.TemporaryFile() as tmp:
            sys.stderr.flush()
            saved = os.dup(2)
            try:
                os.dup2(tmp.fileno(), 2)
                sys._debugmallocstats()
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode("ascii", "replace")
    except (OSError, AttributeError):
        return None
    for line in text.splitlines():
        if " bytes/arena" in line:  # "N arenas * S bytes/arena = total"
            return int(line.split("=")[-1].replace(",", "").strip())
    return None


try:
    import ctypes as _ctypes

    class _Mallinfo2(_ctypes.Structure):
        _fields_ = [(name, _ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost")]
except ImportError:  # pragma: no cover - ctypes is part of CPython
    pass


def mapped_mib(root: Path) -> dict[str, float]:
    """File-backed resident pages by what is mapped (``/proc/self/smaps``), in MiB.

    Groups: the search index's files by extension (``index.store``, ``index.idx``, ...; files a merge
    deleted but a mapping still holds are ``(deleted)``), the catalog and other files under the vault
    (``vault``), shared libraries and Python's own files (``libs``), anything else by path.
    RSS minus anonymous memory is mostly these: clean pages the kernel can take back.
    """
    groups: dict[str, float] = {}
    try:
        text = Path("/proc/self/smaps").read_text()
    except OSError:
        return groups
    vault = str(root.resolve())
    path = ""
    for line in text.splitlines():
        head = line.split(None, 1)
        if not head:
            continue
        if "-" in head[0] and not head[0].endswith(":"):  # a mapping's header line: address range first
            fields = line.split(None, 5)
            path = fields[5].strip() if len(fields) > 5 else ""
        elif head[0] in ("Rss:", "Anonymous:") and path.startswith("/"):
            kb = int(line.split()[1]) * (1 if head[0] == "Rss:" else -1)  # file pages = Rss - Anonymous (COW)
            if path.startswith(vault):
                rel = path[len(vault):]
                if "/index" in rel:  # by the file's kind (.store, .idx, .pos, .term, .fast, ...); merged away?
                    name = rel.removesuffix(" (deleted)").rsplit("/", 1)[-1]
                    key = "index" + ("." + name.rsplit(".", 1)[-1] if "." in name else "")
                    key += " (deleted)" if rel.endswith(" (deleted)") else ""
                else:
                    key = "vault"
            elif ".so" in path or "/python" in path:
                key = "libs"
            else:
                key = path
            groups[key] = groups.get(key, 0.0) + kb / 1024
    return {k: round(v, 2) for k, v in sorted(groups.items(), key=lambda kv: -kv[1]) if abs(v) >= 0.05}


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of ``(messages, MiB)`` points, in MiB per 1,000 messages."""
    if len(points) < 2:
        return float("nan")
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    return sxy / sxx * 1000 if sxx else float("nan")


def traffic(n: int, seed: int = 5) -> Iterator[dict[str, Any]]:
    """Agent traffic re-timed to :data:`PER_DAY` messages a day."""
    for i, m in enumerate(synthetic_messages(n, seed=seed)):
        m["timestamp"] = (START + timedelta(seconds=i * 86_400 // PER_DAY)).strftime("%Y-%m-%dT%H:%M:%SZ")
        yield m


def turns(messages: Iterator[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Messages grouped by turn: a user message and everything up to the next one."""
    turn: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "user" and turn:
            yield turn
            turn = []
        turn.append(m)
    if turn:
        yield turn


def parse_trace(text: str | None) -> tuple[int, int] | None:
    """``"A:B"`` (trace allocations from message A to message B) as a pair, or None."""
    if not text:
        return None
    a, _, b = text.partition(":")
    start, stop = int(a), int(b)
    if not 0 <= start < stop:
        raise argparse.ArgumentTypeError(f"--trace wants A:B with 0 <= A < B, not {text!r}")
    return start, stop


#: Shared libraries whose frames name the owner of a native allocation, by a part of the file's path.
OWNERS = (("tantivy", "tantivy"), ("sqlite", "sqlite"), ("tiktoken", "tiktoken"), ("_regex", "regex"),
          ("yaml", "yaml"), ("pydantic", "pydantic"), ("watchdog", "watchdog"), ("libstdc++", "libstdc++"))


def native_owner(stack: list[tuple[str, str, int]]) -> str:
    """The library that made a native allocation: the innermost frame (function or file) naming a library in
    :data:`OWNERS`, else ``python`` (the interpreter itself: objects, pymalloc's arenas, bytes and lists),
    else ``other``. Rust libraries are stripped of file names, but their mangled symbols name the crate."""
    for function, filename, _line in stack:
        text = f"{function} {filename}".lower()
        for needle, owner in OWNERS:
            if needle in text:
                return owner
    if any("python" in filename.lower() or filename.endswith((".c", ".h")) for _f, filename, _l in stack):
        return "python"
    return "other"


def native_trace_report(path: Path, messages: int, top: int = 20) -> str:
    """What memray saw allocated between the window's ends and still held at its end, by owner and by stack."""
    import memray

    reader = memray.FileReader(str(path))
    by_owner: dict[str, list[float]] = {}
    stacks: list[tuple[int, int, str, list[str]]] = []
    for rec in reader.get_leaked_allocation_records(merge_threads=True):
        try:
            native = [(f, fn, ln) for f, fn, ln in rec.native_stack_trace(max_stacks=40)]
        except NotImplementedError:
            native = []
        try:
            hybrid = [f"{f} {fn}:{ln}" for f, fn, ln in rec.hybrid_stack_trace(max_stacks=14)]
        except NotImplementedError:
            hybrid = [f"{f} {fn}:{ln}" for f, fn, ln in rec.stack_trace(max_stacks=8)]
        owner = native_owner(native)
        if "mmap" in str(rec.allocator).lower() and owner == "tantivy" and any(
                "mmap_directory" in f for f, _fn, _ln in native):
            owner = "tantivy file maps"  # the index's files: file-backed pages, not anonymous memory
        acc = by_owner.setdefault(owner, [0.0, 0])
        acc[0] += rec.size
        acc[1] += rec.n_allocations
        stacks.append((rec.size, rec.n_allocations, owner, hybrid))
    total = sum(v[0] for v in by_owner.values())
    lines = [f"memray: {total / 2**20:+.2f} MiB allocated and still held over {messages:,} messages "
             f"({total / 2**20 / messages * 1000:+.3f} MiB per 1,000)"]
    for owner, (size, count) in sorted(by_owner.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"  {owner:<10} {size / 2**20:+9.3f} MiB in {int(count):>8,} blocks "
                     f"({size / 2**20 / messages * 1000:+.4f} MiB per 1,000)")
    for size, count, owner, frames in sorted(stacks, key=lambda s: -s[0])[:top]:
        lines.append(f"{size / 2**20:+8.3f} MiB {count:>8,} blocks  [{owner}]")
        lines.extend(f"      {frame}" for frame in frames)
    return "\n".join(lines)


def trace_report(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, messages: int, top: int = 25) -> str:
    """What was allocated between two snapshots and is still held, largest first, by traceback."""
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap>")]
    stats = after.filter_traces(ignore).compare_to(before.filter_traces(ignore), "traceback")
    grown = sorted((s for s in stats if s.size_diff > 0), key=lambda s: -s.size_diff)
    total = sum(s.size_diff for s in stats)
    lines = [f"tracemalloc: {total / 2**20:+.2f} MiB held over {messages:,} messages "
             f"({total / 2**20 / messages * 1000:+.2f} MiB per 1,000)"]
    for s in grown[:top]:
        lines.append(f"{s.size_diff / 2**20:+8.3f} MiB {s.count_diff:+8d} blocks")
        lines.extend(f"      {line}" for line in s.traceback.format(limit=6, most_recent_first=True))
    return "\n".join(lines)


class Splits:
    """Where the time goes, by part, summed between two samples: the engine's calls and, inside them, the parts
    whose cost grew with history before (compaction and what follows it, the index follow-up, log syncs).

    Times are wall seconds measured with ``perf_counter`` around each call, in whichever thread runs it
    (compaction runs in the engine's own thread): flat per-message figures mean per-turn cost does not
    grow with history. Nested parts are included in their callers' figures. Each part's CPU time in its
    own thread (``thread_time``) is kept beside its wall time: wall time well above it is waiting (for
    a lock the other thread holds, for the GIL, for the disk), not work that grew.
    """

    #: (attribute path from the engine, method name, label)
    INNER = (
        ("vault", "compact", "compact"),
        ("vault.compactor", "compact", "compact.compactor"),
        ("vault.assembler", "prime", "compact.prime"),
        ("vault", "_on_new_day", "compact.home_and_views"),
        ("vault", "refresh_views", "views"),
        ("vault.indexer", "follow", "index_follow"),
        ("vault.catalog", "sync_logs", "sync_logs"),
        ("vault.dag", "sync", "dag_sync"),
    )

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self.total: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._mark: tuple[dict[str, float], dict[str, float], dict[str, int]] = ({}, {}, {})

    def add(self, label: str, seconds: float, cpu: float = 0.0) -> None:
        with self._lock:
            self.total[label] = self.total.get(label, 0.0) + seconds
            self.cpu[label] = self.cpu.get(label, 0.0) + cpu
            self.calls[label] = self.calls.get(label, 0) + 1

    def timed(self, label: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t, c = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.add(label, time.perf_counter() - t, time.thread_time() - c)
        return wrapper

    def instrument(self, engine: Engine) -> None:
        """Time the engine's inner parts by wrapping them on their instances (the benchmark's own business)."""
        for path, name, label in self.INNER:
            obj: Any = engine
            for part in path.split("."):
                obj = getattr(obj, part)
            setattr(obj, name, self.timed(label, getattr(obj, name)))

    def window(self, messages: int) -> dict[str, Any]:
        """Milliseconds per message of each part since the last call, and calls per 1,000 messages."""
        with self._lock:
            total, cpu, calls = dict(self.total), dict(self.cpu), dict(self.calls)
        before_t, before_cpu, before_c = self._mark
        self._mark = (total, cpu, calls)
        return {label: {"ms_per_message": round((total[label] - before_t.get(label, 0.0)) * 1000 / messages, 3),
                        "cpu_ms_per_message": round((cpu[label] - before_cpu.get(label, 0.0)) * 1000 / messages, 3),
                        "calls_per_1k": round((calls[label] - before_c.get(label, 0)) * 1000 / messages, 1)}
                for label in sorted(total) if messages}


def cache_sizes(engine: Engine) -> dict[str, int]:
    """Entries in the process's bounded caches (what fills them is history; their bounds must hold)."""
    from vaultlcm import assembly, tokens
    from vaultlcm.index import query

    asm = engine.vault.assembler
    return {
        "token_counts": len(tokens._cache),
        "summary_costs": len(assembly._cost_cache),
        "decoded_messages": len(asm._decoded),
        "decoded_bytes": asm._decoded_bytes,
        "chunk_tokens": query._cached_chunk_tokens.cache_info().currsize,
        "stem_tokens": query.stem_token.cache_info().currsize,
        "word_stems": query.word_stem.cache_info().currsize,
    }


def summarize(messages: int, samples: list[tuple[int, float]], anon: list[tuple[int, float]],
              seconds: float) -> dict[str, Any]:
    """The slopes of a run's samples (all of it, and its second half) and its pace."""
    half = max(n for n, _ in samples) // 2 if samples else 0
    return {
        "messages": messages,
        "seconds": seconds,
        "ms_per_message": seconds * 1000 / messages if messages else float("nan"),
        "rss_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "slope_mib_per_1k": slope([p for p in samples if p[0] >= half]),
        "slope_all_mib_per_1k": slope(samples),
        "anon_slope_mib_per_1k": slope([p for p in anon if p[0] >= half]),
        "samples": samples,
        "anon_samples": anon,
    }


def run(root: Path, messages: int, *, sample_every: int, assemble_every: int, grep_every: int,
        budget: int, backend: str | None = None, batch: str = "turn", trace: tuple[int, int] | None = None,
        progress: bool = False, partial: Path | None = None, inline: bool = False,
        trim_probe: bool = False, native_trace: tuple[int, int] | None = None,
        native_file: Path | None = None) -> dict[str, Any]:
    """Drive one Engine through ``messages`` messages of agent traffic; the RSS samples and their slopes.

    With ``partial``, the samples so far are written there (JSON) at every sample, so a run
    stopped before its end still says what it measured.
    """
    # The vault's configured budget is the engine's: compaction counts, for the next process, a context
    # at the configured budget, and a 100k-token default would cost every compaction a context six
    # times the one this agent assembles.
    environ = {"VAULTLCM_CONTEXT_BUDGET_TOKENS": str(budget)}
    if backend:
        environ["VAULTLCM_INDEX_BACKEND"] = backend
    if inline:
        environ["VAULTLCM_BACKGROUND_COMPACTION"] = "false"
    Vault.init(root, environ=environ).close()
    samples: list[tuple[int, float]] = []
    anon: list[tuple[int, float]] = []
    caches: list[tuple[int, dict[str, int]]] = []
    mapped: list[tuple[int, dict[str, float]]] = []  # file-backed pages by mapped group (see mapped_mib)
    allocator: list[tuple[int, dict[str, float] | None]] = []  # glibc's arenas (see malloc_mib)
    # Per sample window: wall ms a message, the turns in it, and the splits (see :class:`Splits`).
    pace: list[dict[str, Any]] = []
    splits = Splits()
    trace_text = ""
    snapshot: tracemalloc.Snapshot | None = None
    tracker: Any = None  # memray's, for --native-trace
    native_text = ""
    t0 = time.perf_counter()
    last = [0, t0, 0]  # messages, time and turns at the previous sample

    def sample(i: int, turn_count: int = 0) -> None:
        now = time.perf_counter()
        samples.append((i, rss_mib()))
        anon.append((i, anon_mib()))
        caches.append((i, cache_sizes(engine)))
        mapped.append((i, mapped_mib(root)))
        allocator.append((i, malloc_mib(trim=trim_probe)))
        window = i - last[0]
        if window:
            pace.append({"messages": i, "ms_per_message": round((now - last[1]) * 1000 / window, 3),
                         "ms_per_turn": round((now - last[1]) * 1000 / max(1, turn_count - last[2]), 3),
                         "parts": splits.window(window)})
        last[:] = [i, now, turn_count]
        if progress:
            rate = f"  {pace[-1]['ms_per_message']:6.1f} ms/msg" if window else ""
            index = sum(v for k, v in mapped[-1][1].items() if k.startswith("index"))
            files = f"index {index:.1f}  " + "  ".join(f"{k} {v:.1f}" for k, v in list(mapped[-1][1].items())[:4])
            heap = allocator[-1][1]
            if heap:
                files += "  malloc used {used:.1f} free {free:.1f} py blocks {py_kblocks:.0f}k".format(**heap)
                if "py_arenas" in heap:
                    files += f" py arenas {heap['py_arenas']:.1f}"
                if "arenas" in heap:
                    files += f" arenas {heap['arenas']:.0f} threads {heap['threads']:.0f}"
                    files += " [" + " ".join(f"{heap[f'arena{k}_used_mib']:.0f}/{heap[f'arena{k}_mib']:.0f}"
                                             for k in range(int(heap["arenas"]))) + "]"
                if "anon_trimmed" in heap:
                    files += f" anon after trim {heap['anon_trimmed']:.1f}"
            print(f"{i:>9,} messages  {samples[-1][1]:8.1f} MiB  (anon {anon[-1][1]:7.1f})  "
                  f"{now - t0:7.0f} s{rate}  files: {files}", file=sys.stderr, flush=True)
        if partial is not None and i:
            data = {**summarize(i, samples, anon, now - t0), "backend": backend or "default",
                    "batch": batch, "partial": True, "caches": caches, "mapped": mapped, "allocator": allocator,
                    "pace": pace}
            partial.write_text(json.dumps(data, indent=1))

    with Engine(root, "agent", token_budget=budget, environ=environ) as engine:
        splits.instrument(engine)
        ingest_batch = splits.timed("ingest", engine.ingest_batch)
        after_turn = splits.timed("after_turn", engine.after_turn)
        assemble = splits.timed("assemble", engine.assemble)
        call_tool = splits.timed("grep", engine.call_tool)
        sample(0)
        done = 0
        for n, turn in enumerate(turns(traffic(messages)), start=1):
            calls = [turn] if batch == "turn" else [[m] for m in turn]
            for call in calls:
                ingest_batch(call)
            before, done = done, done + len(turn)
            after_turn()
            # Sampled before this turn's calls: the traffic's turns are 4 messages, so every sample falls
            # on a turn that also assembles and greps, and after them it would measure what a grep just
            # mapped in (let go a few seconds later), not what the engine holds between calls.
            if done // sample_every != before // sample_every:
                sample(done, n)
            if n % assemble_every == 0:
                assemble()
            if n % grep_every == 0:
                call_tool("lcm_grep", {"pattern": "deploy timeout"})
            if trace is not None and before < trace[0] <= done:
                tracemalloc.start(8)
                snapshot = tracemalloc.take_snapshot()
            if trace is not None and snapshot is not None and before < trace[1] <= done:
                trace_text = trace_report(snapshot, tracemalloc.take_snapshot(), done - trace[0])
                tracemalloc.stop()
                snapshot = None
                if progress:
                    print(trace_text, file=sys.stderr, flush=True)
            if native_trace is not None and tracker is None and not native_text and before < native_trace[0] <= done:
                import memray

                assert native_file is not None
                native_file.unlink(missing_ok=True)
                tracker = memray.Tracker(native_file, native_traces=True,
                                         file_format=memray.FileFormat.AGGREGATED_ALLOCATIONS)
                tracker.__enter__()
            if tracker is not None and native_trace is not None and before < native_trace[1] <= done:
                tracker.__exit__(None, None, None)
                tracker = None
                assert native_file is not None
                native_text = native_trace_report(native_file, done - native_trace[0])
                if progress:
                    print(native_text, file=sys.stderr, flush=True)
        if tracker is not None:
            tracker.__exit__(None, None, None)
        engine.wait_idle(600)
        end_rss = rss_mib()
    return {
        **summarize(messages, samples, anon, time.perf_counter() - t0),
        "backend": backend or "default",
        "batch": batch,
        "rss_end_mib": end_rss,
        "caches": caches,
        "mapped": mapped,
        "allocator": allocator,
        "pace": pace,
        "trace": trace_text,
        "native_trace": native_text,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--backend", choices=["whoosh", "tantivy"], default=None,
                    help="the index backend (default: the vault's default)")
    ap.add_argument("--batch", choices=["turn", "message"], default="turn",
                    help="ingest a turn's messages in one call (default) or one call per message")
    ap.add_argument("--sample-every", type=int, default=10_000)
    ap.add_argument("--assemble-every", type=int, default=10, help="turns between assembled contexts")
    ap.add_argument("--grep-every", type=int, default=250, help="turns between lcm_grep calls")
    ap.add_argument("--budget", type=int, default=16_000, help="the engine's token budget")
    ap.add_argument("--trace", type=parse_trace, default=None, metavar="A:B",
                    help="print what Python allocated from message A to B and still holds (tracemalloc)")
    ap.add_argument("--native-trace", type=parse_trace, default=None, metavar="A:B",
                    help="record native allocations from message A to B with memray and print what is still held at "
                         "B, by owning library (SQLite, tantivy, tiktoken, Python) and by stack")
    ap.add_argument("--native-file", type=Path, default=Path("engine-memray.bin"),
                    help="where --native-trace writes memray's capture (default: engine-memray.bin)")
    ap.add_argument("--inline", action="store_true",
                    help="compact in the calling thread (after_turn waits for it), so a profile sees it")
    ap.add_argument("--profile", type=Path, default=None, metavar="FILE",
                    help="write a cProfile of the run there (with --inline it covers compaction too)")
    ap.add_argument("--trim-probe", action="store_true",
                    help="at each sample, call glibc's malloc_trim(0) and record the anonymous memory left: "
                         "what of the growth is freed memory the allocator keeps")
    ap.add_argument("--workdir", type=Path, default=None, help="where to build the vault (default: a temp folder)")
    ap.add_argument("--keep", type=Path, default=None, metavar="DIR",
                    help="build the vault in DIR (which must not exist) and keep it, e.g. to profile turns on it")
    ap.add_argument("--out", type=Path, default=None, help="write the result as JSON")
    args = ap.parse_args()
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    options: dict[str, Any] = dict(sample_every=args.sample_every, assemble_every=args.assemble_every,
                                   grep_every=args.grep_every, budget=args.budget, backend=args.backend,
                                   batch=args.batch, trace=args.trace, progress=True, partial=args.out,
                                   inline=args.inline, trim_probe=args.trim_probe,
                                   native_trace=args.native_trace, native_file=args.native_file)
    if args.keep is not None:
        if args.keep.exists():
            ap.error(f"--keep {args.keep}: already exists; name a new folder")
        result = run(args.keep, args.messages, **options)
    else:
        with tempfile.TemporaryDirectory(prefix="vaultlcm-engine-mem-", dir=args.workdir) as tmp:
            result = run(Path(tmp) / "vault", args.messages, **options)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    result["command"] = "python benchmarks/bench_engine_memory.py " + " ".join(sys.argv[1:])
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
    print(f"{result['messages']:,} messages ({result['backend']}, by {result['batch']}) in {result['seconds']:.0f} s "
          f"({result['ms_per_message']:.1f} ms a message): RSS {result['rss_end_mib']:.0f} MiB at the end "
          f"(peak {result['rss_peak_mib']:.0f} MiB); slope {result['slope_mib_per_1k']:.2f} MiB per 1,000 messages "
          f"over the second half ({result['slope_all_mib_per_1k']:.2f} over the whole run; anonymous memory "
          f"{result['anon_slope_mib_per_1k']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
