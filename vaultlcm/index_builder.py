"""A reindex's second process: it builds the index from documents the first sends while that one goes on.

A tantivy rebuild spends about half its CPU making the index's documents (tokenizing
each text in Python, tantivy's ``Token`` objects, tantivy's own indexing) and the
other half on the catalog (reading the logs, the notes, the DAG) and on decoding each
message. :meth:`IndexKeeper.rebuild <vaultlcm.indexing.IndexKeeper.rebuild>` runs the
first half in a child process (the same interpreter, the same ``sys.path``): the
parent reads each daily log once, into the catalog, decodes the entries the catalog
stored as messages and sends their documents (plain tuples: a message's text pickles
and loads in about a microsecond a kilobyte, far less than tokenizing it) while the
child tokenizes and indexes the ones before. The parent's notes' sync and DAG
recompute then run beside the child's last documents; the summaries' documents
follow, and the child commits **once**.

Each conversation's documents are those of the entries the catalog stored as it read
the logs, at the positions their writers gave them. When those did not stand (the
catalog restored an order after a merge, or released a batch from ``pending`` after
its last log), the parent tells the child to forget the conversation's documents
(:class:`~vaultlcm.index.base.Forget`) and sends them again from the catalog's rows.

Nothing the child wrote is visible before its single commit: a child that dies,
raises or is stopped leaves the index empty (with no marks, so the next process to
open it compares it with the catalog and rebuilds it). The parent turns any failure
of the child into :class:`~vaultlcm.errors.IndexBuildError` naming it, including a
child that stops making progress (:data:`STALL_TIMEOUT_S` without a word while the
parent waits for it, or without reading what it is sent), and never leaves the child
running: a parent that dies closes the child's stdin, which stops it.

Protocol, pickled tuples (the child's only partner is the process that started it):

* parent to child (stdin): ``("job", {...})``; then any number of ``("docs", [fields, ...])``
  (each document's :class:`~vaultlcm.index.base.IndexDoc` fields in order), ``("forget", conv)``
  and ``("settle", n)``; then ``("commit",)``, or ``("abort",)`` at any time;
* child to parent (stdout; stray prints go to stderr): ``("progress", n)``, ``("settled", n)``
  once everything sent before ``("settle", n)`` is indexed, then ``("done", count)`` or
  ``("error", text)``.
"""

from __future__ import annotations

import json
import os
import pickle
import queue
import select
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any

from .errors import IndexBuildError
from .native_memory import release_free_memory

if TYPE_CHECKING:
    from .index.base import Forget, IndexDoc
    from .layout import VaultLayout

#: Documents sent to the child per message.
_BATCH = 256
#: How long a child that was told to stop may take before it is killed.
_GRACE_S = 30.0
#: How long the parent waits for a child that says nothing (no progress report, nothing read of
#: what it is sent) before it takes it as hung, kills it and fails the reindex. The child reports
#: every thousand documents; its commit (merging the segments of a million documents) is the
#: longest silence of a healthy child.
STALL_TIMEOUT_S = 600.0

#: What the child runs: it takes the parent's ``sys.path`` as it is (argv[1], JSON) before it imports
#: anything of the package, so it finds the same modules in the same order (``PYTHONPATH`` would put
#: the package's folder first, and for an installed package that is site-packages, before the stdlib).
_BOOT = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
         "from vaultlcm.index_builder import main; sys.exit(main())")


def _interpreter_flags() -> list[str]:
    """The flags of this interpreter that change what the child would import or where from."""
    flags = []
    if sys.flags.isolated:
        flags.append("-I")
    else:
        if sys.flags.ignore_environment:
            flags.append("-E")
        if sys.flags.no_user_site:
            flags.append("-s")
    if sys.flags.no_site:
        flags.append("-S")
    if sys.flags.safe_path and not sys.flags.isolated:
        flags.append("-P")
    return flags


# ------------------------------------------------------------------ the child


class _Stopped(Exception):
    """The parent said abort, or went away."""


def _child(inp: IO[bytes], out: IO[bytes]) -> int:
    from .index import open_index
    from .index.base import Forget, IndexDoc

    send_lock = threading.Lock()

    def send(*msg: Any) -> None:
        with send_lock:
            pickle.dump(msg, out, protocol=pickle.HIGHEST_PROTOCOL)
            out.flush()

    job = pickle.load(inp)[1]
    # Bounded: a child behind holds the parent back through the pipe rather than its memory.
    commands: queue.Queue[tuple[Any, ...]] = queue.Queue(maxsize=4)
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
    failure: list[BaseException] = []

    def docs() -> Iterator["IndexDoc | Forget"]:
        try:
            while True:
                msg = commands.get()
                what = msg[0]
                if what == "docs":
                    for fields in msg[1]:
                        yield IndexDoc(*fields)
                elif what == "forget":
                    yield Forget(msg[1])
                elif what == "settle":
                    release_free_memory()  # the parent's recompute comes next: what the child freed is its to use
                    send("settled", msg[1])
                elif what == "commit":
                    return
                else:
                    raise _Stopped
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
    """Entry point of the child process (see :data:`_BOOT`)."""
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


def _fields(d: "IndexDoc") -> tuple[Any, ...]:
    """A document as the child rebuilds it (``IndexDoc(*fields)``): a tuple pickles far faster than the dataclass."""
    return (d.id, d.kind, d.conversation, d.text, d.at, d.role, d.depth, d.content_hash, d.seq)


class IndexBuilder:
    """The parent's handle on the child process (see the module docstring); use it as a context manager,
    which makes sure the child is gone when the block ends, whatever happened."""

    def __init__(self, layout: "VaultLayout", backend: str, *, lock_timeout: float = 10.0,
                 stall_timeout: float | None = None) -> None:
        self._stall = STALL_TIMEOUT_S if stall_timeout is None else stall_timeout
        self._stderr = tempfile.TemporaryFile()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, *_interpreter_flags(), "-c", _BOOT, json.dumps(sys.path)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr)
        except OSError as exc:
            self._stderr.close()
            raise IndexBuildError(f"cannot start a process to build the search index ({sys.executable}): {exc}. "
                                  "Run `vaultlcm reindex` again.") from exc
        assert self._proc.stdin is not None
        self._stdin = self._proc.stdin.fileno()
        os.set_blocking(self._stdin, False)  # writes wait in select, where a stall is seen (see _write)
        self._cv = threading.Condition()
        self._progress: list[int] = []  # the child's progress reports not handed on yet
        self._settled = 0
        self._settles = 0
        self._done: int | None = None
        self._error: str | None = None
        self._ended = False
        self._heard = time.monotonic()  # when the child last said something
        self._reader = threading.Thread(target=self._read, name="vaultlcm-index-builder", daemon=True)
        self._reader.start()
        self._batch: list[tuple[Any, ...]] = []
        try:
            self._send("job", {"index_dir": str(layout.index_dir), "backend": backend, "lock_timeout": lock_timeout})
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
                    self._heard = time.monotonic()
                    if msg[0] == "progress":
                        self._progress.append(int(msg[1]))
                    elif msg[0] == "settled":
                        self._settled = int(msg[1])
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

    def _send(self, *msg: Any, progress: Callable[[int], None] | None = None) -> None:
        self._write(pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL), progress)

    def _write(self, data: bytes, progress: Callable[[int], None] | None) -> None:
        """Write ``data`` to the child's stdin; while the pipe is full, watch the child (its failure, a stall)."""
        view = memoryview(data)
        since = time.monotonic()
        while view:
            try:
                n = os.write(self._stdin, view)
            except BlockingIOError:
                n = 0
            except (BrokenPipeError, OSError, ValueError):
                self._fail("stopped reading its instructions")
            if n:
                view = view[n:]
                since = time.monotonic()
                continue
            self.check(progress)
            # A short timeout: Ctrl-C reaches this thread between waits.
            select.select([], [self._stdin], [], 0.2)
            self._check_stall(since)

    def _check_stall(self, since: float) -> None:
        """Kill the child and fail when it has said and read nothing for :attr:`_stall` seconds since ``since``."""
        with self._cv:
            heard = self._heard
        quiet = time.monotonic() - max(since, heard)
        if quiet >= self._stall:
            self._proc.kill()
            self._proc.wait()
            self._fail(f"made no progress for {quiet:.0f} s (it was killed)")

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
        since = time.monotonic()
        while True:
            with self._cv:
                # A short timeout: Ctrl-C reaches this thread between waits.
                self._cv.wait_for(lambda: ready() or bool(self._progress) or self._ended
                                  or self._error is not None, timeout=0.2)
                done = ready()
            self.check(progress)
            if done:
                return
            self._check_stall(since)

    def add(self, docs: Iterable["IndexDoc"], progress: Callable[[int], None] | None = None) -> None:
        """Queue documents for the child, sent a batch at a time (:meth:`flush` sends the rest)."""
        batch = self._batch
        for d in docs:
            batch.append(_fields(d))
            if len(batch) >= _BATCH:
                self.flush(progress)
                batch = self._batch

    def flush(self, progress: Callable[[int], None] | None = None) -> None:
        """Send the documents :meth:`add` holds back."""
        if self._batch:
            batch, self._batch = self._batch, []
            self._send("docs", batch, progress=progress)

    def forget(self, conv: str) -> None:
        """Have the child drop the documents of ``conv`` sent so far (those sent later stay)."""
        self.flush()
        self._send("forget", conv)

    def settle(self, progress: Callable[[int], None] | None = None) -> None:
        """Wait until the child has indexed every document sent so far (it holds them then, not the pipe)."""
        self.flush(progress)
        self._settles += 1
        mark = self._settles
        self._send("settle", mark, progress=progress)
        self._wait(lambda: self._settled >= mark, progress)

    def commit(self, progress: Callable[[int], None] | None = None) -> int:
        """Have the child commit the index, wait until it has closed it; the number of documents."""
        self.flush(progress)
        self._send("commit", progress=progress)
        self._wait(lambda: self._done is not None, progress)
        assert self._done is not None
        try:
            self._proc.wait(timeout=_GRACE_S)
        except subprocess.TimeoutExpired:
            self._fail("did not exit after committing")
        return self._done

    def abort(self) -> None:
        """Have the child drop what it built (nothing is committed) and make sure it has exited."""
        self._batch = []
        self.close()  # its stdin closed: it stops at its next command

    def close(self) -> None:
        """Make sure the child has ended: wait a little for one told to stop, then kill it."""
        proc = self._proc
        if proc.poll() is None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()  # EOF: the child stops at its next command
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
