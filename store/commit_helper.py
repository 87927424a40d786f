"""Commit from a helper process forked before a collector's own work (issue 12).

Importing DuckDB costs 60-90 ms in a fresh process, and a collector that imports a small
trace spends about as long on everything else. Paid after the collector's work, that import
is a third of the wall time; paid in a helper forked when the verb starts, it overlaps the
collector on another core. ``CommitHelper.start()`` forks a child that imports store.commit
at once, then waits for one spool entry; it runs the same ``commit_then_flush`` as an
in-process commit would and sends back its return value or its exception.

Fork is safe here: ``start`` refuses while any other thread runs (a fork copies only the
calling thread, so a lock held by another one would stay held in the child forever; C++
threads count too: importing duckdb starts a worker, importing numpy OpenBLAS's pool), and the
child leaves with ``os._exit``, never running the parent's exit handlers or flushing the
parent's buffers a second time. The store is opened only once the entry exists, so the file
lock is held no longer than by an in-process commit.

The helper lives and dies with the collector: it is killed when its parent dies
(``PR_SET_PDEATHSIG``), so a collector killed between spool and commit leaves its entry to
the next ``flush`` exactly as an in-process commit would, and no orphan keeps retrying a
busy store for the collector's whole ``--commit-timeout``. Nothing is lost if the helper
dies: the entry stays in the spool until a commit removes it, and ``commit`` returns None
so that the caller commits in-process instead.

The helper is idle while the collector works, so it also runs one ``early`` job for it
first (the collector's environment snapshot: reading package metadata and probing NVML
take 30-50 ms that the collector would otherwise spend before it can spool). Its result
is the first message on the reply pipe; ``early_result`` is None when the job raised or
the helper is gone, and the caller then runs the job itself.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, NoReturn

if TYPE_CHECKING:
    from store.bundle import CommitResult, FlushReport
    from store.location import StoreLocation

Outcome = tuple["CommitResult", "FlushReport | None"]
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@dataclass
class CommitHelper:
    pid: int
    requests: int | None  # write end: the entry to commit (closing it tells the child to go)
    replies: BinaryIO | None  # read end: the early job's result, then the commit's outcome
    early: tuple[str, Any] | None = field(default=None, repr=False)  # first reply, once read

    @classmethod
    def start(
        cls, loc: StoreLocation, early: Callable[[], Any] | None = None
    ) -> CommitHelper | None:
        """Fork the helper for ``loc``; None where forking is not safe or possible.

        ``early``: a job the helper runs first, while the collector works (``early_result``).
        """
        if _threads() > 1 or not hasattr(os, "fork"):
            return None
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the helper: whatever happens, it never returns into the collector
            try:
                os.close(request_w)
                os.close(reply_r)
                _die_with(parent)
                _serve(loc, early, request_r, reply_w)
            finally:
                os._exit(1)
        os.close(request_r)
        os.close(reply_w)
        return cls(pid, request_w, os.fdopen(reply_r, "rb"))

    def early_result(self) -> Any | None:
        """What the ``early`` job returned in the helper; None if there was none, it raised,
        or the helper is gone."""
        if self.early is None:
            self.early = self._receive() or ("gone", None)
        kind, value = self.early
        return value if kind == "early" else None

    def commit(self, entry: Path, timeout_s: float) -> Outcome | None:
        """What ``commit_then_flush(loc, entry, timeout_s)`` returned in the helper, or
        raise what it raised; None when the helper is gone before answering."""
        try:
            self.early_result()  # the outcome comes after the early job's reply
            with os.fdopen(self._take_requests(), "wb") as out:
                pickle.dump((str(entry), timeout_s), out)
            answer = self._receive()
        except OSError:
            return None
        except KeyboardInterrupt:  # stop the commit as an in-process one would stop
            with suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGINT)
            raise
        finally:
            self.close()
        if answer is None:
            return None
        kind, value = answer
        if kind == "raised":
            raise value
        return value

    def close(self) -> None:
        """Stop a helper that was never sent an entry, and reap it.

        Such a helper has not opened the store (it may still be importing DuckDB), so it is
        killed rather than waited for: a verb that failed on its input exits at once."""
        if self.requests is not None:
            with suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            os.close(self._take_requests())
        if self.replies is not None:
            replies, self.replies = self.replies, None
            replies.close()
        with suppress(ChildProcessError):
            os.waitpid(self.pid, 0)

    def _take_requests(self) -> int:
        fd = self.requests
        if fd is None:
            raise OSError(f"commit helper {self.pid}: its request pipe is already closed")
        self.requests = None  # os.fdopen's file object owns and closes it now
        return fd

    def _receive(self) -> tuple[str, Any] | None:
        """The helper's next message; None when it is gone (or sent something unreadable)."""
        if self.replies is None:
            return None
        try:
            return pickle.load(self.replies)
        except (OSError, EOFError, pickle.UnpicklingError):
            return None


def _threads() -> int:
    """This process's threads, native ones included (DuckDB's workers, OpenBLAS's pool),
    which ``threading.active_count()`` does not see; that count where /proc is absent.

    The helper attaches stores to duckdb's default database (store/connect.py ``_attach``),
    built when the helper imports duckdb: a fork of a process that had imported it would
    hand the child that database without its worker thread."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _die_with(parent: int) -> None:
    """Have the kernel kill this process when ``parent`` dies (Linux; elsewhere a no-op)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the line above took effect
        os._exit(0)


def _serve(
    loc: StoreLocation, early: Callable[[], Any] | None, requests: int, replies: int
) -> NoReturn:
    code = 1
    try:
        with os.fdopen(replies, "wb") as out:
            try:  # always the first message, so the collector knows what comes next
                _send(out, ("early", early() if early is not None else None))
            except Exception as exc:  # noqa: BLE001 - the collector runs it itself
                _send(out, ("early-raised", f"{type(exc).__name__}: {exc}"))
            from store.commit import commit_then_flush  # the import this process exists for

            with os.fdopen(requests, "rb") as incoming:
                try:
                    entry, timeout_s = pickle.load(incoming)
                except EOFError:  # the collector ended without a bundle
                    os._exit(0)
            try:
                outcome = ("returned", commit_then_flush(loc, Path(entry), timeout_s))
            except Exception as exc:  # noqa: BLE001 - the parent raises it as its own
                outcome = ("raised", _picklable(exc))
            _send(out, outcome)
        code = 0
    except BaseException:  # noqa: BLE001 - Ctrl-C, or a parent that is gone: just leave
        pass
    finally:
        os._exit(code)


def _send(out: BinaryIO, message: tuple[str, Any]) -> None:
    data = pickle.dumps(message)  # whole before any byte is sent: a failure sends nothing
    out.write(data)
    out.flush()


def _picklable(exc: Exception) -> Exception:
    """The exception itself when it survives a round trip through pickle, else its text."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - any failure means: send the text instead
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc
