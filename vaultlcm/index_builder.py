"""A reindex's second process: it builds the index's message documents while the first rebuilds the catalog.

A tantivy rebuild spends about half its CPU making the index's documents (decoding
each entry, tokenizing it, tantivy's ``Token`` objects) and the other half on the
catalog (reading the logs, the notes, the DAG). Neither needs the other's work
until the end, so :meth:`IndexKeeper.rebuild <vaultlcm.indexing.IndexKeeper.rebuild>`
runs the index's part in a child process (``python -m vaultlcm.index_builder``,
the same interpreter and the same package): each process parses the logs itself,
and nothing per message crosses between them (a document pickled across costs more
to load than to build).

The child holds the index's writer lock from the start, resets the index and adds
every message it finds in the logs, picking the entries the catalog stores as
messages (:func:`log_docs`). It then sends one tally per conversation: how many
messages it indexed and the sum of their content hashes. The parent, once the
catalog is rebuilt, compares those with what the catalog stored (and checks that
each message sits at its writer's position: :meth:`Catalog.at_writer_positions
<vaultlcm.catalog.Catalog.at_writer_positions>`). When both hold it sends the
summaries' documents (few, and only the parent has the DAG) and the child commits
once; otherwise it tells the child to abort, and indexes from the catalog's rows
itself.

Nothing the child wrote is visible before its single commit: a child that dies,
raises or is stopped leaves the index empty (with no marks, so the next process to
open it compares it with the catalog and rebuilds it). The parent turns any
failure of the child into :class:`~vaultlcm.errors.IndexBuildError` naming it, and
never leaves the child running: a parent that dies closes the child's stdin, which
stops it at its next document.

Protocol, pickled tuples (the child's only partner is the process that started it):

* parent to child (stdin): ``("job", {...})``; later ``("docs", [IndexDoc, ...])``
  any number of times then ``("commit",)``, or ``("abort",)`` at any time;
* child to parent (stdout; stray prints go to stderr): ``("progress", n)``,
  ``("tallies", {conv: (count, digest)})``, then ``("done", count)`` or
  ``("error", text)``.
"""

from __future__ import annotations

import os
import pickle
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .errors import IndexBuildError

if TYPE_CHECKING:
    from .catalog import Catalog
    from .index.base import IndexDoc
    from .layout import VaultLayout

#: Tallies are sums of the catalog's 64-bit content hashes, kept to 64 bits.
_MASK = (1 << 64) - 1
#: Summary documents sent to the child per message.
_BATCH = 256
#: How long a child that was told to stop may take before it is killed.
_GRACE_S = 30.0


def hash_sum(hashes: Iterable[str]) -> int:
    """A tally's digest: the sum of the catalog's content hashes (16 hex digits each), mod 2**64.

    The hash is over the entry's raw bytes, which hold its id and position, so equal
    counts and sums say both processes picked the same entries (whatever the order)."""
    return sum(int(h, 16) for h in hashes) & _MASK


def catalog_tally(catalog: "Catalog", conv: str) -> tuple[int, int]:
    """How many messages ``conv`` holds in the catalog and their :func:`hash_sum` (read a page at a time)."""
    count, digest, after = 0, 0, 0
    while True:
        page = catalog.execute("SELECT seq, hash FROM messages WHERE conv=? AND seq>? ORDER BY seq LIMIT 20000",
                               (conv, after))
        if not page:
            return count, digest
        count += len(page)
        digest = (digest + hash_sum(h for _, h in page)) & _MASK
        after = page[-1][0]


def log_docs(layout: "VaultLayout", conv: str, tally: list[int]) -> Iterator["IndexDoc"]:
    """The documents of ``conv``'s messages as its logs hold them, the entries the catalog's rebuild stores.

    Mirrors :meth:`Catalog.rebuild_logs <vaultlcm.catalog.Catalog.rebuild_logs>`: the
    same files (plain ``.md`` files of the logs folder, in name order), every entry
    parsed, at its writer's position. It cannot see what only the catalog knows (an
    id repeated in two places, a batch left incomplete by a crash, an order restored
    after a merge); the tallies (``tally``: count and digest, updated as documents
    are made) tell the parent when the two differ.
    """
    from .catalog import entry_hash, log_files
    from .indexing import entry_doc
    from .logcodec import ParsedEntry, iter_entries
    from .msglog import FileStore

    logs_dir = layout.inside(layout.logs_dir(conv))
    if not logs_dir.is_dir():
        return
    base = logs_dir.relative_to(layout.root).as_posix()
    names = [entry.name for entry in log_files(logs_dir)]  # the files the catalog's rebuild reads
    store = FileStore(layout, layout.files_dir(conv))
    for name in sorted(names):
        try:
            data = (logs_dir / name).read_bytes()
        except OSError:
            continue  # the catalog skips it too
        for item in iter_entries(data, path=f"{base}/{name}", base_offset=0, base_line=1):
            if not isinstance(item, ParsedEntry):
                continue
            h = entry_hash(item.raw)
            tally[0] += 1
            tally[1] = (tally[1] + int(h, 16)) & _MASK
            yield entry_doc(conv, item, h, store)


# ------------------------------------------------------------------ the child


class _Stopped(Exception):
    """The parent said abort, or went away."""


def _child(inp: IO[bytes], out: IO[bytes]) -> int:
    from .index import open_index
    from .layout import VaultLayout

    send_lock = threading.Lock()

    def send(*msg: Any) -> None:
        with send_lock:
            pickle.dump(msg, out, protocol=pickle.HIGHEST_PROTOCOL)
            out.flush()

    job = pickle.load(inp)[1]
    commands: queue.Queue[tuple[Any, ...]] = queue.Queue(maxsize=4)  # bounded: the pipe holds the rest back
    stop = threading.Event()

    def read() -> None:
        try:
            while True:
                msg = pickle.load(inp)
                if msg[0] == "abort":
                    break
                commands.put(msg)
                if msg[0] == "commit":
                    return
        except Exception:  # noqa: BLE001 - EOF or a broken pipe: the parent is gone
            pass
        stop.set()
        commands.put(("abort",))

    threading.Thread(target=read, name="vaultlcm-index-builder-stdin", daemon=True).start()
    layout = VaultLayout(Path(job["root"]), Path(job["state"]) if job["state"] else None)

    failure: list[BaseException] = []

    def docs() -> Iterator["IndexDoc"]:
        try:
            tallies: dict[str, tuple[int, int]] = {}
            for conv in job["conversations"]:
                tally = [0, 0]
                for doc in log_docs(layout, conv, tally):
                    if stop.is_set():
                        raise _Stopped
                    yield doc
                tallies[conv] = (tally[0], tally[1])
            send("tallies", tallies)
            while True:
                msg = commands.get()
                if msg[0] == "commit":
                    return
                if msg[0] != "docs":
                    raise _Stopped
                yield from msg[1]
        except BaseException as exc:
            failure.append(exc)  # the index wraps what its documents raise; the parent gets the original
            raise

    try:
        index = open_index(job["backend"], job["index_dir"], reset=True, lock_timeout=job["lock_timeout"])
        try:
            count = index.rebuild(docs(), progress=lambda n: send("progress", n), unique=True)
        finally:
            index.close()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it as IndexBuildError
        exc = failure[0] if failure else exc
        if isinstance(exc, _Stopped) or stop.is_set():
            return 3
        if isinstance(exc, KeyboardInterrupt):
            return 130
        try:
            send("error", f"{type(exc).__name__}: {exc}")
        except OSError:
            pass  # the parent is gone
        return 1
    send("done", count)
    return 0


def main() -> int:
    """Entry point of the child process (``python -m vaultlcm.index_builder``)."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # the protocol owns the real stdout
    try:
        return _child(sys.stdin.buffer, out)
    finally:
        try:
            out.close()
        except OSError:
            pass


# ------------------------------------------------------------------ the parent


class IndexBuilder:
    """The parent's handle on the child process (see the module docstring); use it as a context manager,
    which makes sure the child is gone when the block ends, whatever happened."""

    def __init__(self, layout: "VaultLayout", backend: str, conversations: list[str], *,
                 lock_timeout: float = 10.0) -> None:
        import vaultlcm

        self._stderr = tempfile.TemporaryFile()
        env = dict(os.environ)
        # The child imports the very package this process runs, wherever it was found.
        package_root = str(Path(vaultlcm.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        try:
            self._proc = subprocess.Popen([sys.executable, "-m", "vaultlcm.index_builder"], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=self._stderr, env=env)
        except OSError as exc:
            self._stderr.close()
            raise IndexBuildError(f"cannot start a process to build the search index ({sys.executable}): {exc}. "
                                  "Run `vaultlcm reindex` again.") from exc
        self._cv = threading.Condition()
        self._progress: list[int] = []  # the child's progress reports not handed on yet
        self._tallies: dict[str, tuple[int, int]] | None = None
        self._done: int | None = None
        self._error: str | None = None
        self._ended = False
        self._reader = threading.Thread(target=self._read, name="vaultlcm-index-builder", daemon=True)
        self._reader.start()
        try:
            self._send("job", {"root": str(layout.root), "state": str(layout.state) if layout.state else "",
                               "index_dir": str(layout.index_dir), "backend": backend,
                               "conversations": list(conversations), "lock_timeout": lock_timeout})
        except BaseException:
            self.close()  # not yet inside a ``with``: nothing else would
            raise

    def __enter__(self) -> "IndexBuilder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self) -> None:
        out = self._proc.stdout
        assert out is not None
        try:
            while True:
                msg = pickle.load(out)
                with self._cv:
                    if msg[0] == "progress":
                        self._progress.append(int(msg[1]))
                    elif msg[0] == "tallies":
                        self._tallies = msg[1]
                    elif msg[0] == "done":
                        self._done = int(msg[1])
                    elif msg[0] == "error":
                        self._error = str(msg[1])
                    self._cv.notify_all()
        except Exception:  # noqa: BLE001 - EOF: the child ended (or died)
            pass
        with self._cv:
            self._ended = True
            self._cv.notify_all()

    def _send(self, *msg: Any) -> None:
        stdin = self._proc.stdin
        assert stdin is not None
        try:
            pickle.dump(msg, stdin, protocol=pickle.HIGHEST_PROTOCOL)
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            self._fail("stopped reading its instructions")

    def _fail(self, what: str) -> None:
        """Raise :class:`IndexBuildError` for a child that failed (``what`` it did), with what it said."""
        self._proc.poll()
        with self._cv:
            self._cv.wait_for(lambda: self._ended, timeout=5.0)  # its last words, if any
            said = self._error
        if said is None:
            try:
                code = self._proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                code = None
            said = f"exit code {code}" if code is not None else "still running"
            self._stderr.seek(0)
            tail = self._stderr.read()[-2000:].decode("utf-8", "replace").strip()
            if tail:
                said += f"; its last output: {tail}"
        raise IndexBuildError(
            f"the process building the search index (pid {self._proc.pid}) {what}: {said.rstrip('.')}. "
            "Nothing it built was committed (the index is left empty, not marked current); "
            "fix the cause and run `vaultlcm reindex` again.")

    def check(self, progress: Callable[[int], None] | None = None) -> None:
        """Hand on the child's progress (on this thread); raise :class:`IndexBuildError` if it failed."""
        with self._cv:
            reports, self._progress = self._progress, []
            failed = self._error is not None or (self._ended and self._done is None)
        if progress is not None:
            for n in reports:
                progress(n)
        if failed:
            self._fail("failed")

    def _wait(self, ready: Callable[[], bool], progress: Callable[[int], None] | None) -> None:
        while True:
            with self._cv:
                # A short timeout: Ctrl-C reaches this thread between waits.
                self._cv.wait_for(lambda: ready() or bool(self._progress) or self._ended
                                  or self._error is not None, timeout=0.2)
                done = ready()
            self.check(progress)
            if done:
                return

    def tallies(self, progress: Callable[[int], None] | None = None) -> dict[str, tuple[int, int]]:
        """Wait for the child's messages to be indexed; their count and digest per conversation."""
        self._wait(lambda: self._tallies is not None, progress)
        assert self._tallies is not None
        return self._tallies

    def add(self, docs: Iterable["IndexDoc"]) -> None:
        """Send documents to be indexed after the messages (the summaries)."""
        batch: list[IndexDoc] = []
        for d in docs:
            batch.append(d)
            if len(batch) >= _BATCH:
                self._send("docs", batch)
                batch = []
        if batch:
            self._send("docs", batch)

    def commit(self, progress: Callable[[int], None] | None = None) -> int:
        """Have the child commit the index, wait until it has closed it; the number of documents."""
        self._send("commit")
        self._wait(lambda: self._done is not None, progress)
        assert self._done is not None
        try:
            self._proc.wait(timeout=_GRACE_S)
        except subprocess.TimeoutExpired:
            self._fail("did not exit after committing")
        return self._done

    def abort(self) -> None:
        """Tell the child to drop what it built (nothing is committed) and wait for it to exit."""
        try:
            self._send("abort")
        except IndexBuildError:
            pass  # already gone
        self.close()

    def close(self) -> None:
        """Make sure the child has ended: wait a little for one told to stop, then kill it."""
        proc = self._proc
        if proc.poll() is None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()  # EOF: the child stops at its next document
            except OSError:
                pass
            try:
                proc.wait(timeout=_GRACE_S if self._done is not None else 2.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for f in (proc.stdin, proc.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass
        self._reader.join(timeout=5.0)
        self._stderr.close()


if __name__ == "__main__":
    sys.exit(main())
