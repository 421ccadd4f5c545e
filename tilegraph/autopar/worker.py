"""The loop of one of autopar's worker processes (:func:`worker_main`): a namespace
registered as ``__main__``, the steps run in it with their standard output, standard error
and log files captured, values exported to other processes on request, the process
state (working directory, environment, ``sys.path``) reported and replayed, and the
standard input of the driving process read by the steps that the analysis found reading it
(:class:`_StdinGate`)."""

from __future__ import annotations

import builtins
import contextlib
import io
import os
import pickle
import queue
import signal
import sys
import threading
import types
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from tilegraph.autopar.channel import dumps_values, receive_message, send_message
from tilegraph.autopar.steps import Part, error_info, exit_status, value_size
from tilegraph.util import die_with_parent


def _process_state(parts: list[str]) -> dict[str, Any]:
    """The parts of the process state a step may have changed."""
    out: dict[str, Any] = {}
    if "cwd" in parts:
        out["cwd"] = os.getcwd()
    if "env" in parts:
        out["env"] = dict(os.environ)
    if "path" in parts:
        out["path"] = list(sys.path)
    return out


def _apply_state(part: str, value: Any) -> None:
    if part == "cwd":
        if os.getcwd() != value:
            os.chdir(value)
    elif part == "env":
        if dict(os.environ) != value:
            os.environ.clear()
            os.environ.update(value)
    elif part == "path":
        sys.path[:] = value


def _export(send: Callable[..., None], ns: dict[str, Any], names: list[str], token: Any
            ) -> None:
    """Reply to an export request: the values of ``names`` pickled, or the names of those
    that cannot be pickled."""
    values = {n: ns[n] for n in names if n in ns}
    try:
        frames_out = dumps_values(values)
    except Exception:
        bad = []
        for n, v in values.items():
            try:
                dumps_values({n: v})
            except Exception:
                bad.append(n)
        send((token, bad or list(values)))
    else:
        send((token, None), frames_out)


def _export_part(send: Callable[..., None], ns: dict[str, Any], part: Part, token: Any
                 ) -> None:
    """Reply to a request for a part of a variable: ``{part.name: part}`` pickled, or
    ``[part.source]`` when the part cannot be made or pickled (an iterator is not split:
    its steps run where it is)."""
    try:
        frames_out = dumps_values({part.name: part.take(ns[part.source])})
    except Exception:
        send((token, [part.source]))
    else:
        send((token, None), frames_out)


class _LogSink(io.RawIOBase):
    """The bytes a log file's handler writes, appended to the running step's record."""

    def __init__(self, files: _LogFiles, path: str):
        self.files, self.path = files, path

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        data = bytes(data)
        ops = self.files.ops
        if ops and ops[-1][0] == "write" and ops[-1][1] == self.path:
            ops[-1][2] += data
        else:
            ops.append(["write", self.path, bytearray(data)])
        return len(data)


class _LogFiles:
    """The files of a worker's ``logging.FileHandler`` handlers (the plain class, in mode
    ``"a"`` or ``"w"``; ``logging.basicConfig(filename=...)`` makes one), captured per step
    as standard output is: a handler's stream is a text stream over the running step's
    record (same encoding, errors and newlines as the file it would open), whose ``ops``
    (``["open", path, mode]``, ``["write", path, bytes]``) the parent applies to the files
    in program order (:func:`write_logs`). Opening checks the file as the handler would
    (a missing directory raises in the script's line), without truncating it."""

    def __init__(self) -> None:
        self.ops: list[list[Any]] = []

    def install(self) -> None:
        import logging

        original = logging.FileHandler._open
        files = self

        def _open(handler: logging.FileHandler) -> Any:
            if type(handler) is not logging.FileHandler or handler.mode not in ("a", "w"):
                return original(handler)
            handler._builtin_open(handler.baseFilename, "a", encoding=handler.encoding,
                                  errors=handler.errors).close()
            files.ops.append(["open", handler.baseFilename, handler.mode])
            return io.TextIOWrapper(io.BufferedWriter(_LogSink(files, handler.baseFilename)),
                                    encoding=handler.encoding, errors=handler.errors)

        logging.FileHandler._open = _open

    def take(self) -> list[list[Any]]:
        ops, self.ops = self.ops, []
        return ops


def write_logs(ops: list[list[Any]]) -> None:
    """Apply a step's log file record (:class:`_LogFiles`) to the files."""
    for op, path, arg in ops:
        if op == "open":
            open(path, "wb" if arg == "w" else "ab").close()
        else:
            with open(path, "ab") as f:
                f.write(arg)


class StdinUnread(RuntimeError):
    """A statement read the standard input where the analysis did not see it reading it (a
    library's code, for instance): on a worker process that input is not there."""


_READING = frozenset({"read", "readline", "readlines", "buffer", "detach", "__next__"})


class _StdinGate:
    """``sys.stdin`` of a worker process. The steps the analysis found reading the standard
    input (``allowed``) read the driving process's own, ``source`` (a descriptor of it
    inherited through the fork, with its encoding and errors); it is opened at their first
    read, on descriptor 0 of this process, so that ``os.read(0, n)`` and ``open(0)`` read
    it too. The graph keeps those steps on one process, in program order, so one process
    reads it, as the serial run does. Any other step that reads it through ``sys.stdin``
    raises :class:`StdinUnread`, so nothing reads it in another order or on another process
    without a word; asking what it is (``isatty()``, ``encoding``...) is no read. (A read
    of descriptor 0 itself, below ``sys.stdin``, by a step the analysis did not see reading
    it is not caught: descriptor 0 of every worker is the standard input it inherited.)"""

    def __init__(self, source: tuple[int, str, str] | None, inert: Any):
        self.source = source
        self.inert = inert   # what the process had (os.devnull): for questions only
        self.stream: Any = None
        self.allowed = False

    def allow(self, allowed: bool) -> None:
        """The next step may read the standard input (or not); the first one that may
        puts it on descriptor 0."""
        self.allowed = allowed
        if allowed and self.source is not None and self.stream is None:
            fd, encoding, errors = self.source
            os.dup2(fd, 0)
            os.close(fd)
            self.stream = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)),
                                           encoding=encoding, errors=errors, newline="\n")

    def _open(self) -> Any:
        if not self.allowed:
            raise StdinUnread("this statement reads the standard input, which tilegraph "
                              "autopar did not see it doing: run the script with "
                              "--workers 1")
        if self.stream is None:
            raise StdinUnread("the standard input was not given to the worker processes: "
                              "run the script with --workers 1")
        return self.stream

    def read(self, size: int = -1) -> str:
        return self._open().read(size)

    def readline(self, size: int = -1) -> str:
        return self._open().readline(size)

    def readlines(self, hint: int = -1) -> list[str]:
        return self._open().readlines(hint)

    def __iter__(self) -> _StdinGate:
        self._open()
        return self

    def __next__(self) -> str:
        return next(self._open())

    def __getattr__(self, name: str) -> Any:
        if name in _READING:
            return getattr(self._open(), name)
        return getattr(self.stream if self.stream is not None else self.inert, name)


class _Stream(io.TextIOBase):
    """A text stream writing to ``target`` (changed from step to step)."""

    def __init__(self, target: Any):
        self.target = target

    def write(self, text: str) -> int:
        return self.target.write(text)

    def flush(self) -> None:
        self.target.flush()

    def writable(self) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


def _prepare_process(path: str, argv: list[str], blas: int, controller: Any
                     ) -> tuple[dict[str, Any], Any]:
    """``(namespace, BLAS limits)``: this forked process made ready to run the script's
    steps: it ignores Ctrl-C (the parent handles it) and dies with its parent, its BLAS
    libraries run ``blas`` threads (the limits returned must be held for the process's
    life), and a fresh ``__main__`` module for ``path``, whose namespace is returned, and
    ``sys.argv`` are the script's."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the parent handles Ctrl-C
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent(signal.SIGTERM)
    # processes x BLAS threads stay within the cores: NumPy steps on several processes
    # would otherwise each start a BLAS thread per core and slow each other down
    if controller is None:
        from threadpoolctl import ThreadpoolController

        controller = ThreadpoolController()
    limits = controller.limit(limits=blas, user_api="blas")
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __builtins__=builtins)
    sys.modules["__main__"] = main
    ns = main.__dict__
    sys.argv = list(argv)
    return ns, limits


def worker_main(conn: Connection, codes: list[Any], path: str, argv: list[str],
                blas: int = 1, controller: Any = None,
                stdin: tuple[int, str, str] | None = None) -> None:
    """The loop of a worker process. Messages are ``(op, token, *payload)``; a request
    (a token that is not ``None``) gets the reply ``(token, payload)``. ``controller``:
    the parent's threadpoolctl controller, made before the fork (the BLAS libraries it
    found are this process's too, so none is imported or scanned again here). ``stdin``:
    ``(descriptor, encoding, errors)`` of the driving process's standard input, for the
    steps that read it (:class:`_StdinGate`)."""
    ns, _limits = _prepare_process(path, argv, blas, controller)   # held for life
    gate = _StdinGate(stdin, sys.stdin)
    sys.stdin = gate
    real_out, real_err = sys.stdout, sys.stderr
    # the streams a step writes to are proxies to that step's buffers, so that a handler
    # made by one step (logging.basicConfig) writes where a later step's output goes
    proxy_out, proxy_err = _Stream(real_out), _Stream(real_err)
    log_files = _LogFiles()
    log_files.install()
    send_lock = threading.Lock()

    def send(obj: Any, frames: list[Any] = ()) -> None:  # type: ignore[assignment]
        with send_lock:
            send_message(conn, obj, frames)

    # exports are answered by a thread of their own, also while a step runs: a step on
    # another process that needs a value made here need not wait for this one's step (the
    # graph's edges keep a value from being read while a step writes it)
    inbox: queue.SimpleQueue = queue.SimpleQueue()

    def read() -> None:
        while True:
            try:
                msg, frames = receive_message(conn)
            except (EOFError, OSError):
                inbox.put(None)
                return
            if msg[0] == "export":
                _export(send, ns, msg[2], msg[1])
                continue
            if msg[0] == "export_part":
                _export_part(send, ns, Part(*msg[2]), msg[1])
                continue
            inbox.put((msg, frames))
            if msg[0] == "stop":
                return

    threading.Thread(target=read, name="tilegraph-step-reader", daemon=True).start()
    while True:
        item = inbox.get()
        if item is None:
            return
        msg, frames = item
        op, token = msg[0], msg[1]
        if op == "stop":
            return
        if op == "state":
            _apply_state(msg[2], msg[3])
        elif op == "free":
            for name in msg[2]:
                ns.pop(name, None)
        elif op == "load":
            try:
                ns.update(pickle.loads(frames[0], buffers=frames[1:]))
                send((token, None))
            except Exception as exc:
                send((token, f"{type(exc).__name__}: {exc}"))
        elif op == "run":
            i, names, want_state, barrier = msg[2], msg[3], msg[4], msg[5]
            gate.allow(bool(msg[6]) if len(msg) > 6 else False)
            out, err = io.StringIO(), io.StringIO()
            proxy_out.target, proxy_err.target = out, err
            sys.stdout, sys.stderr = proxy_out, proxy_err
            log_files.take()
            error = None
            try:
                exec(codes[i], ns)
            except SystemExit as exc:
                error = ("exit", *exit_status(exc))
            except BaseException as exc:
                error = ("error", *error_info(exc, path))
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                sys.stdout, sys.stderr = real_out, real_err
                proxy_out.target, proxy_err.target = real_out, real_err
                gate.allow(False)
            if barrier:
                names = [n for n in ns if not (n.startswith("__") and n.endswith("__"))]
            defined = {n: (value_size(ns[n]) if n in ns else None) for n in names}
            state = _process_state(want_state) if want_state else None
            send((token, (out.getvalue(), err.getvalue(), defined, state, error,
                          log_files.take())))
