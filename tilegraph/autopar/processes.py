"""The processes backend of autopar: a program's steps run on forked worker processes, each
holding a namespace. It is a :class:`~tilegraph.runtime.backends.Backend` object that the
front end hands to the pipeline (``backend=``); the runtime does not know it.

Some programs are not functions of their inputs but steps over shared variables: the
top-level statements of a script. A front end lowers such a program to a TaskGraph whose
tasks' operations are :class:`CodeStep` objects (compiled code, the names it reads and
writes, its position in the program), with a ``serial`` column of those positions (see
:func:`tilegraph.autopar.runner.script_taskgraph` for scripts). The graph is planned and
run by the one pipeline like any other: the executor core keeps the task states, the
priorities, the events (progress, the HTML report) and the failure rule of programs with
side effects (a step that raises stops the run as the program run in order stops: nothing
after it starts, everything before it finishes). :class:`ProcessesBackend` is only the seam
below it: it drives ``Execution.worker_loop`` on one thread per worker process, with a
``call`` that runs the step in a process.

Each worker process is forked when the run starts, from this process once it has imported
tilegraph and NumPy and threadpoolctl has found the BLAS libraries (a worker imports and
scans nothing before its first step: it only limits its BLAS threads), and holds a
namespace: a module named ``__main__``, registered as such in its ``sys.modules``, so that
the program's functions and classes pickle by reference. Its ``__file__`` is the program's
file name, and tracebacks are cut to the frames of that file (what ``python script.py``
prints).

Backend state (guarded by ``cond``):

========================  ===============================================================
field                     meaning
========================  ===============================================================
``owner[v]``              process holding the current value of variable ``v``
``holders[v]``            processes holding a copy of the current value (``owner``
                          included); a process never holds an out-of-date value
``nbytes[v]``             size of ``v`` measured where it was defined (for placement)
``touches[v]``            steps reading or writing ``v`` not finished yet; at 0, ``v`` is
                          freed on every process
``busy[w]``               step running (or being staged) on process ``w``, or ``None``
``group_worker[g]``       the process of group ``g`` once its first step was placed
``stuck[v]``              process of a value that cannot be pickled: its users run there
``results[i]``            captured (stdout, stderr, log file record) of a finished step,
                          until released in program order
``failed``                the earliest step that raised (its output is the last released)
========================  ===============================================================

The graph's dependencies must make this bookkeeping true: a step runs after the last step
before it that writes a name it reads, and before the next step that writes a name it reads
or writes (def-use, write-after-read and write-after-write edges). Placement happens when a
step starts, because only then are its inputs' sizes known: it runs on the idle process
holding the most bytes of its inputs (its group's process if it has one), unless a busy
process holds more than ``MOVE_WAIT_BYTES`` more, in which case it waits for that one. The
first step of a group goes to the process with the fewest steps still to run of the groups
already placed on it (waiting for it if it is busy), so that independent chains run on
different processes.
Missing inputs are exported by their owners (pickle protocol 5, NumPy buffers out of band)
and loaded into it; of a variable a step needs only a part of (:class:`Part`: a chunk of a
split loop's items), the owner makes that part and sends it alone. Steps marked
``everywhere`` (imports, ``def``, ``class``, and settings of
the process state such as ``np.set_printoptions`` or ``logging.basicConfig``) run on every
process, after the values they read were sent to every process. ``os.chdir``,
``os.environ`` and ``sys.path`` are process state: after a step that may change them the
process reports them, and a step runs with the state its predecessors in program order
left. Standard output and error are captured per step and written in
program order; a step's ``sys.stdout`` and ``sys.stderr`` are proxies to its buffers, so a
stream kept by an earlier step (a logging handler) writes into the later step's output.
Files written by ``logging.FileHandler`` (``logging.basicConfig(filename=...)``) are
captured the same way (:class:`_LogFiles`): a worker's handler writes into the step's
record, and this process opens, truncates and appends to the file when it writes the step's
output, so the file's lines are in program order.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import itertools
import marshal
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import threading
import traceback
import types
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Future
from multiprocessing.connection import Connection
from types import CodeType
from typing import Any, NamedTuple

from tilegraph.graph.taskgraph import TaskGraph
from tilegraph.runtime.backends import PARALLEL, Backend, Execution
from tilegraph.runtime.blas import blas_controller
from tilegraph.util import cores, die_with_parent

MOVE_WAIT_BYTES = 32 << 20   # wait for a busy process rather than move this much more data
STATE_PARTS = ("cwd", "env", "path")


class ScriptError(Exception):
    """The program (a script) raised an exception: ``traceback`` is the text the serial run prints,
    ``filename``/``lineno`` the script's line that raised, ``exit_code`` the process
    status the serial run would end with."""

    def __init__(self, traceback_text: str, filename: str | None, lineno: int | None,
                 exit_code: int = 1):
        self.traceback = traceback_text
        self.filename = filename
        self.lineno = lineno
        self.exit_code = exit_code
        last = traceback_text.strip().splitlines()[-1] if traceback_text.strip() else ""
        super().__init__(f"{filename}, line {lineno}: {last}")


class ScriptExit(Exception):
    """The script called ``sys.exit``: the run stops with ``code`` (``message``: what
    ``sys.exit`` writes to standard error, e.g. for ``sys.exit("reason")``)."""

    def __init__(self, code: int, message: str = ""):
        self.code = code
        self.message = message
        super().__init__(f"the script exited with status {code}")


# -- reporting like the serial run ------------------------------------------------------------


def error_info(exc: BaseException, path: str) -> tuple[str, str | None, int | None]:
    """The traceback as the serial run prints it (frames from the script's first line on)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != path:
        tb = tb.tb_next
    if tb is None:
        tb = exc.__traceback__
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    line = None
    for frame, lineno in traceback.walk_tb(tb):
        if frame.f_code.co_filename == path:
            line = lineno
    return text, path, line


def exit_status(exc: SystemExit) -> tuple[int, str]:
    """The status ``sys.exit(arg)`` ends the process with, and what it writes to stderr."""
    code = exc.code
    if code is None:
        return 0, ""
    if isinstance(code, int):
        return code, ""
    return 1, f"{code}\n"


def value_size(value: Any) -> int:
    """A quick estimate of the bytes of a value (NumPy arrays exactly, containers sampled)."""
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    try:
        size = sys.getsizeof(value)
    except TypeError:
        return 0
    if isinstance(value, (list, tuple, set, frozenset, dict)) and value:
        items = list(value.values() if isinstance(value, dict) else value)
        sample = items[:: max(1, len(items) // 64)][:64]
        size += int(sum(value_size(x) for x in sample) * len(items) / len(sample))
    return size


# -- the steps ---------------------------------------------------------------------------------


class Part(NamedTuple):
    """A step reads only a part of a variable (a chunk of the items of a loop split across
    processes): ``take(value)`` is that part, made by the process that holds ``source``
    and sent, alone, under ``name`` to the process that runs the step when that one does
    not hold ``source`` (the step's code then reads ``name`` if it is defined, else the
    part of ``source``, and removes ``name`` when done). ``take`` must pickle by reference
    (a function of a module, or a ``functools.partial`` of one); ``share`` is the part's
    expected fraction of ``source``'s bytes (for placement)."""

    source: str
    name: str
    take: Callable[[Any], Any]
    share: float


class CodeStep:
    """The operation of a task of :class:`ProcessesBackend`: ``code`` executed in a worker
    process's namespace. ``index``: the step's position in the program (the task's
    ``serial``); ``reads``: names it reads (or mutates); ``writes``: names it binds, deletes
    or mutates; ``label``/``lineno``: where it is in the program (for messages);
    ``everywhere``: it runs on every process (imports, ``def``, ``class``: what later steps
    need wherever they run); ``reads_all``: it may read and write any name (a barrier);
    ``group``: steps of one group run on one process; ``changes``: the parts of the process
    state it may change (``"cwd"``, ``"env"``, ``"path"``); ``part``: a :class:`Part` of a
    variable of ``reads`` that is all the step needs of it."""

    __slots__ = ("changes", "code", "everywhere", "group", "index", "label", "lineno",
                 "part", "reads", "reads_all", "writes")

    def __init__(self, index: int, code: CodeType, reads: frozenset[str] = frozenset(),
                 writes: frozenset[str] = frozenset(), *, label: str = "",
                 lineno: int | None = None, everywhere: bool = False,
                 reads_all: bool = False, group: int | None = None,
                 changes: tuple[str, ...] = (), part: Part | None = None):
        if not isinstance(code, CodeType):
            raise TypeError(f"CodeStep {index}: code must be a code object, got "
                            f"{type(code).__name__}")
        bad = [c for c in changes if c not in STATE_PARTS]
        if bad:
            raise ValueError(f"CodeStep {index}: changes must name parts of "
                             f"{STATE_PARTS}, got {bad}")
        self.index, self.code = index, code
        self.reads, self.writes = frozenset(reads), frozenset(writes)
        self.label = label or f"step {index}"
        self.lineno = lineno
        self.everywhere, self.reads_all, self.group = everywhere, reads_all, group
        self.changes = tuple(STATE_PARTS) if reads_all else tuple(changes)
        if part is not None and (part.source not in self.reads or everywhere or reads_all):
            raise ValueError(f"CodeStep {index}: a part must be of a variable it reads, on "
                             "a step that runs on one process and is not a barrier")
        self.part = part

    def __call__(self, *inputs: Any) -> Any:
        raise RuntimeError(f"{self.label} is a step of a program: it runs only on the worker "
                           "processes of a ProcessesBackend")

    def __repr__(self) -> str:
        return f"CodeStep({self.index}, {self.label!r})"


# -- pickling between processes --------------------------------------------------------------


def _rebuild_function(code: bytes, name: str, defaults: Any, kwdefaults: Any) -> Any:
    main = sys.modules["__main__"]
    fn = types.FunctionType(marshal.loads(code), main.__dict__, name, defaults)
    fn.__kwdefaults__ = kwdefaults
    return fn


class _Pickler(pickle.Pickler):
    """Modules travel by name; functions of the script by their code (by name they would
    be looked up in the receiving process's namespace, where a function defined by a step
    that ran elsewhere does not exist yet)."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.ModuleType):
            return importlib.import_module, (obj.__name__,)
        if isinstance(obj, types.FunctionType) and obj.__module__ == "__main__" and \
                obj.__closure__ is None:
            return _rebuild_function, (marshal.dumps(obj.__code__), obj.__name__,
                                       obj.__defaults__, obj.__kwdefaults__)
        return NotImplemented


def _dumps(values: dict[str, Any]) -> list[Any]:
    """``[data, *buffers]`` of ``values``, pickle protocol 5 with out-of-band buffers."""
    buffers: list[pickle.PickleBuffer] = []
    out = io.BytesIO()
    _Pickler(out, protocol=5, buffer_callback=buffers.append).dump(values)
    return [out.getbuffer(), *[b.raw() for b in buffers]]


def _send(conn: Connection, obj: Any, frames: list[Any] = ()) -> None:  # type: ignore[assignment]
    sizes = [memoryview(f).nbytes for f in frames]
    conn.send_bytes(pickle.dumps((obj, sizes), protocol=5))
    for f in frames:
        conn.send_bytes(f)


def _recv(conn: Connection) -> tuple[Any, list[bytearray]]:
    obj, sizes = pickle.loads(conn.recv_bytes())
    frames = []
    for n in sizes:
        buf = bytearray(n)
        if n:
            conn.recv_bytes_into(buf)
        else:
            conn.recv_bytes()
        frames.append(buf)
    return obj, frames


# -- the worker process ------------------------------------------------------------------------


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
        frames_out = _dumps(values)
    except Exception:
        bad = []
        for n, v in values.items():
            try:
                _dumps({n: v})
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
        frames_out = _dumps({part.name: part.take(ns[part.source])})
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
    in program order (:func:`_write_logs`). Opening checks the file as the handler would
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


def _write_logs(ops: list[list[Any]]) -> None:
    """Apply a step's log file record (:class:`_LogFiles`) to the files."""
    for op, path, arg in ops:
        if op == "open":
            open(path, "wb" if arg == "w" else "ab").close()
        else:
            with open(path, "ab") as f:
                f.write(arg)


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


def _worker(conn: Connection, codes: list[Any], path: str, argv: list[str],
            blas: int = 1, controller: Any = None) -> None:
    """The loop of a worker process. Messages are ``(op, token, *payload)``; a request
    (a token that is not ``None``) gets the reply ``(token, payload)``. ``controller``:
    the parent's threadpoolctl controller, made before the fork (the BLAS libraries it
    found are this process's too, so none is imported or scanned again here)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the parent handles Ctrl-C
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent(signal.SIGTERM)
    # processes x BLAS threads stay within the cores: NumPy steps on several processes
    # would otherwise each start a BLAS thread per core and slow each other down
    if controller is None:
        from threadpoolctl import ThreadpoolController

        controller = ThreadpoolController()
    limits = controller.limit(limits=blas, user_api="blas")  # noqa: F841 (held for life)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __builtins__=__builtins__)
    sys.modules["__main__"] = main
    ns = main.__dict__
    sys.argv = list(argv)
    real_out, real_err = sys.stdout, sys.stderr
    # the streams a step writes to are proxies to that step's buffers, so that a handler
    # made by one step (logging.basicConfig) writes where a later step's output goes
    proxy_out, proxy_err = _Stream(real_out), _Stream(real_err)
    log_files = _LogFiles()
    log_files.install()
    send_lock = threading.Lock()

    def send(obj: Any, frames: list[Any] = ()) -> None:  # type: ignore[assignment]
        with send_lock:
            _send(conn, obj, frames)

    # exports are answered by a thread of their own, also while a step runs: a step on
    # another process that needs a value made here need not wait for this one's step (the
    # graph's edges keep a value from being read while a step writes it)
    inbox: queue.SimpleQueue = queue.SimpleQueue()

    def read() -> None:
        while True:
            try:
                msg, frames = _recv(conn)
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
            if barrier:
                names = [n for n in ns if not (n.startswith("__") and n.endswith("__"))]
            defined = {n: (value_size(ns[n]) if n in ns else None) for n in names}
            state = _process_state(want_state) if want_state else None
            send((token, (out.getvalue(), err.getvalue(), defined, state, error,
                          log_files.take())))


class _Channel:
    """The parent's end of one worker process: messages are queued and sent by a thread
    (a send never blocks the caller), replies are read by another thread and resolve the
    request's Future. A small request made with ``inline=True`` when nothing is queued is
    sent by the caller itself (one thread hand-off less per step; the order of messages is
    kept by ``_send_lock`` and the count of ``queued`` ones). When the process is lost,
    ``on_lost(index)`` is called first and then every pending request fails with the error
    it returns."""

    def __init__(self, index: int, conn: Connection, proc: Any,
                 on_lost: Callable[[int], BaseException]):
        self.index, self.conn, self.proc = index, conn, proc
        self._on_lost = on_lost
        self._lock = threading.Lock()
        self._pending: dict[int, Future] = {}
        self._tokens = itertools.count(1)
        self._lost: BaseException | None = None
        self._box: queue.SimpleQueue = queue.SimpleQueue()
        self._send_lock = threading.Lock()
        self._queued = 0   # messages in the box or being sent by the sender thread
        self._broken = False
        self._sender = threading.Thread(target=self._send_loop, daemon=True,
                                        name=f"tilegraph-step-send-{index}")
        self._receiver = threading.Thread(target=self._receive_loop, daemon=True,
                                          name=f"tilegraph-step-recv-{index}")
        self._sender.start()
        self._receiver.start()

    def post(self, msg: tuple, frames: list[Any] = (),  # type: ignore[assignment]
             inline: bool = False) -> None:
        with self._send_lock:
            if inline and self._queued == 0:
                if not self._broken:
                    try:
                        _send(self.conn, msg, frames)
                    except (OSError, EOFError, ValueError):
                        self._broken = True   # the receiver sees the end and reports it
                return
            self._queued += 1
            self._box.put((msg, list(frames)))

    def request(self, op: str, *payload: Any, frames: list[Any] = (),  # type: ignore[assignment]
                inline: bool = False) -> Future:
        fut: Future = Future()
        with self._lock:
            if self._lost is not None:
                fut.set_exception(self._lost)
                return fut
            token = next(self._tokens)
            self._pending[token] = fut
        self.post((op, token, *payload), frames, inline=inline)
        return fut

    def close(self) -> None:
        self.post(("stop", None))
        self._box.put(None)

    def _send_loop(self) -> None:
        while True:
            item = self._box.get()
            if item is None:
                return
            try:
                if not self._broken:
                    _send(self.conn, *item)
            except (OSError, EOFError, ValueError):
                self._broken = True
            finally:
                with self._send_lock:
                    self._queued -= 1

    def _receive_loop(self) -> None:
        while True:
            try:
                (token, payload), frames = _recv(self.conn)
            except (EOFError, OSError, ValueError):
                break
            with self._lock:
                fut = self._pending.pop(token, None)
            if fut is not None:
                fut.set_result((payload, frames))
        error = self._on_lost(self.index)
        with self._lock:
            self._lost = error
            pending, self._pending = self._pending, {}
        for fut in pending.values():
            fut.set_exception(error)

    def join(self, timeout: float) -> None:
        self._sender.join(timeout)
        self._receiver.join(timeout)


class _Cancelled(Exception):
    """The run ended while a step waited for a process (never seen by the user: the
    executor marks the task cancelled)."""


class ProcessesBackend(Backend):
    """Runs a graph of :class:`CodeStep` tasks on ``workers`` forked worker processes (see
    the module docstring). ``filename``: the program's file (its namespace's ``__file__``,
    the file whose frames tracebacks keep); ``argv``: its ``sys.argv``; ``directory``: put
    first on the workers' ``sys.path`` (a script's directory); ``out`` and ``err``: where
    the steps' standard output and error go, in program order. One backend object runs one
    graph once."""

    name = "processes"
    processes = 1   # one executor; steps are placed on processes when they start

    def __init__(self, workers: int, *, filename: str, argv: list[str] | None = None,
                 directory: str | None = None, out: Any = None, err: Any = None):
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
        if sys.platform == "win32" or "fork" not in multiprocessing.get_all_start_methods():
            raise RuntimeError("the processes backend needs the 'fork' start method "
                               "(Linux, macOS)")
        self.workers = workers
        self.path = filename
        self.argv = list(argv) if argv is not None else [filename]
        self.directory = directory
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.cond = threading.Condition(threading.Lock())
        self.steps: dict[int, CodeStep] = {}
        self.owner: dict[str, int] = {}
        self.holders: dict[str, set[int]] = defaultdict(set)
        self.nbytes: dict[str, int] = {}
        self.everywhere_names: set[str] = set()
        self.touches: dict[str, int] = defaultdict(int)
        self.touch_set: dict[int, set[str]] = {}
        self.busy: list[int | None] = [None] * workers
        self.group_worker: dict[int, int] = {}
        self.group_left: dict[int, int] = defaultdict(int)   # steps of a group still to run
        self.stuck: dict[str, int] = {}
        self.results: dict[int, tuple[str, str, list]] = {}
        self.order: list[int] = []
        self.next_release = 0
        self.failed: int | None = None
        # part of the process state -> [(step, value)] of the finished steps that set it
        self.state_writers: dict[str, list[tuple[int, Any]]] = defaultdict(list)
        self.worker_state: list[dict[str, int]] = [dict.fromkeys(STATE_PARTS, -1)
                                                   for _ in range(workers)]
        self.ran_on = [0] * workers
        self.transfers = 0
        self.bytes_moved = 0
        self.bytes_in = [0] * workers   # bytes of values loaded into each process
        self.channels: list[_Channel] = []
        self.closing = False
        self.lost: BaseException | None = None
        self.execution: Execution | None = None
        self.used = False
        self._slot = threading.local()

    def _take_steps(self, graph: TaskGraph) -> None:
        """The graph's steps, in program order, and who touches which name."""
        for i, func in enumerate(graph.funcs):
            if not isinstance(func, CodeStep):
                raise TypeError(f"the processes backend runs CodeStep tasks only; task "
                                f"{graph.keys[i]!r} is {func!r}")
        steps = sorted(graph.funcs, key=lambda f: f.index)
        self.steps = {f.index: f for f in steps}
        if len(self.steps) != len(steps):
            twice = sorted({f.index for f in steps if sum(g.index == f.index
                                                          for g in steps) > 1})
            raise ValueError(f"the processes backend needs one CodeStep per program "
                             f"position; positions {twice} have several")
        self.order = [f.index for f in steps]
        seen: set[str] = set()
        for f in steps:
            names = set(f.reads | f.writes)
            if f.reads_all:   # it may read anything defined before it
                names |= seen
            seen |= f.writes
            if f.group is not None:
                self.group_left[f.group] += 1
            if f.everywhere:   # its writes exist everywhere; its reads are sent everywhere
                self.everywhere_names |= f.writes
                names = set(f.reads)
            self.touch_set[f.index] = names
            for v in names:
                self.touches[v] += 1

    # -- the seam ---------------------------------------------------------------------------

    def task_policy(self, graph: TaskGraph, seconds: Any) -> bytearray | None:
        # every step runs in a process (the driving thread only waits): always worth a
        # worker of its own
        return bytearray([PARALLEL]) * len(graph)

    def run(self, execution: Execution) -> None:
        if self.used:
            raise RuntimeError("a ProcessesBackend runs one graph once; make a new one")
        self.used = True
        self._take_steps(execution.graph)
        self.execution = execution
        threads: list[threading.Thread] = []
        try:
            self._start()
            for w in range(self.workers):
                t = threading.Thread(target=self._drive, args=(execution, w), daemon=True,
                                     name=f"tilegraph-step-driver-{w}")
                t.start()
                threads.append(t)
            while not execution.done_event.wait(0.05):   # Ctrl-C seen in 50 ms
                pass
        except BaseException as exc:
            execution.cancel(exc)
            raise
        finally:
            self._shutdown(graceful=execution.status == "done")
            for t in threads:
                while t.is_alive():
                    try:
                        t.join()
                    except KeyboardInterrupt:   # the run is already cancelled
                        execution.cancel(KeyboardInterrupt())
            execution.finish_io()

    def _drive(self, execution: Execution, w: int) -> None:
        self._slot.w = w   # so that the report's worker w is mostly process w
        try:
            execution.worker_loop(w, call=self._call)
        except BaseException as exc:
            execution.cancel(exc)

    # -- processes ----------------------------------------------------------------------------

    def _start(self) -> None:
        ctx = multiprocessing.get_context("fork")
        codes = {i: f.code for i, f in self.steps.items()}
        saved_path = list(sys.path)
        if self.directory is not None:
            sys.path.insert(0, self.directory)
        sys.stdout.flush()
        sys.stderr.flush()
        controller = blas_controller()   # scanned once here, inherited by every worker
        try:
            for w in range(self.workers):
                parent, child = ctx.Pipe(duplex=True)
                p = ctx.Process(target=_worker,
                                args=(child, codes, self.path, self.argv,
                                      max(1, cores() // self.workers), controller),
                                daemon=True, name=f"tilegraph-step-worker-{w}")
                p.start()
                child.close()
                self.channels.append(_Channel(w, parent, p, self._lost))
        finally:
            sys.path[:] = saved_path

    def _lost(self, w: int) -> BaseException:
        """Process ``w`` is gone (its pipe closed): unless we are stopping it, the values it
        held are lost, so the run stops now."""
        with self.cond:
            if self.closing:
                return _Cancelled("the run is over")
        proc = self.channels[w].proc
        proc.join(timeout=5.0)   # for its exit code (it is dead: this returns at once)
        with self.cond:
            i = self.busy[w]
            line = self.steps[i].lineno if i is not None else None
            error = ScriptError(f"worker process {w} died (exit code {proc.exitcode})"
                                + (f" while running line {line}\n" if line else "\n"),
                                self.path, line)
            if self.lost is None:
                self.lost = error
            self.cond.notify_all()
        if self.execution is not None:
            self.execution.cancel(error)
        return error

    def _shutdown(self, graceful: bool) -> None:
        with self.cond:
            self.closing = True
            self.cond.notify_all()
        for ch in self.channels:
            ch.close()
        for ch in self.channels:
            ch.proc.join(timeout=2 if graceful else 0.05)
        for ch in self.channels:
            if ch.proc.is_alive():
                ch.proc.terminate()
                ch.proc.join(timeout=2)
            if ch.proc.is_alive():
                ch.proc.kill()
                ch.proc.join()
        for ch in self.channels:
            ch.join(timeout=2)
            ch.conn.close()

    # -- one step -----------------------------------------------------------------------------

    def _call(self, func: Callable, args: Any, kwargs: Any) -> None:
        """Run step ``func.index`` on a process (the executor's ``call``)."""
        if not isinstance(func, CodeStep):
            raise TypeError(f"the processes backend runs CodeStep tasks only, not {func!r}")
        i = func.index
        if func.everywhere:
            return self._replicate(i)
        w = self._stage(i)
        t = func
        ch = self.channels[w]
        with self.cond:
            self._post_state(i, w)
        reply = ch.request("run", i, sorted(t.writes), list(t.changes), t.reads_all,
                           inline=True)
        (out, err, defined, state, error, logs), _ = reply.result()
        with self.cond:
            self.busy[w] = None
            self.ran_on[w] += 1
            if t.group is not None:
                self.group_left[t.group] -= 1
            self.cond.notify_all()
            if state is not None:
                for part, value in state.items():
                    self.state_writers[part].append((i, value))
                    self.worker_state[w][part] = i
            self.results[i] = (out, err, logs)
            if error is not None:
                if self.failed is None or i < self.failed:
                    self.failed = i
                self._release()
                raise _script_exception(error)
            self._defined(i, w, defined)
            self._release()
        return None

    def _replicate(self, i: int) -> None:
        """Run step ``i`` (imports, ``def``, ``class``, settings of the process state) on
        every process, once the values it reads are on every process and each process has
        the state the steps before it left; the output of the first one is the step's."""
        t = self.steps[i]
        for w in range(self.workers):
            with self.cond:
                names = sorted(v for v in t.reads if v in self.owner
                               and v not in self.everywhere_names)
                missing: dict[int, list[str]] = defaultdict(list)
                for v in names:
                    if w not in self.holders[v]:
                        missing[self.owner[v]].append(v)
                self._post_state(i, w)
            stuck = self._move(w, missing)
            if stuck:
                held = ", ".join(f"{v!r} (worker {src})" for v, src in stuck.items())
                raise ScriptError(f"{t.label} of {self.path} sets process state on every "
                                  f"worker but reads values that cannot be pickled: {held}; "
                                  "run it with --workers 1\n", self.path, t.lineno)
        replies = [ch.request("run", i, [], [], False, inline=True) for ch in self.channels]
        answers = [r.result()[0] for r in replies]
        out, err, _, _, _, logs = answers[0]
        error = next((a[4] for a in answers if a[4] is not None), None)
        with self.cond:
            self.results[i] = (out, err, logs)
            if error is not None and (self.failed is None or i < self.failed):
                self.failed = i
            else:
                self._free_touched(i, defaultdict(list))
            self._release()
        if error is not None:
            raise _script_exception(error)

    def _post_state(self, i: int, w: int) -> None:
        """Give process ``w`` the process state (``STATE_PARTS``) that the steps before
        ``i`` in program order left (called with ``cond``)."""
        ch = self.channels[w]
        for part in STATE_PARTS:
            j, value = self._state_for(i, part)
            if j != self.worker_state[w][part] and value is not None:
                ch.post(("state", None, part, value))
                self.worker_state[w][part] = j

    def _stage(self, i: int) -> int:
        """Choose the process of step ``i`` and move its missing inputs there; the
        process is marked busy with ``i``."""
        t = self.steps[i]
        while True:
            with self.cond:
                names = self._inputs(i)
                w = self._choose(i, names)
                self.busy[w] = i
                if t.group is not None:
                    self.group_worker.setdefault(t.group, w)
                missing: dict[int, list[str]] = defaultdict(list)
                part = None
                for v in names:
                    if w in self.holders[v]:
                        continue
                    if t.part is not None and v == t.part.source:
                        part = (self.owner[v], t.part)   # only its part is sent
                    else:
                        missing[self.owner[v]].append(v)
            try:
                stuck = self._move(w, missing, part)
            except BaseException:
                with self.cond:
                    self.busy[w] = None
                    self.cond.notify_all()
                raise
            if not stuck:
                return w
            with self.cond:   # run it where the value that cannot be pickled is
                self.stuck.update(stuck)
                self.busy[w] = None
                if t.part is not None:   # a part sent already is not needed there
                    self.channels[w].post(("free", None, [t.part.name]))
                self.cond.notify_all()

    def _move(self, w: int, missing: dict[int, list[str]],
              part: tuple[int, Part] | None = None) -> dict[str, int]:
        """Copy the variables ``missing[src]`` from each ``src`` to process ``w``, and
        ``part = (src, Part)``'s part made on ``src`` (``w`` does not become a holder of its
        source); the variables that cannot be pickled (and their process) if any."""
        exports = [(src, vs, self.channels[src].request("export", vs, inline=True))
                   for src, vs in missing.items()]
        if part is not None:
            src, p = part
            exports.append((src, [], self.channels[src].request(
                "export_part", tuple(p), inline=True)))
        stuck: dict[str, int] = {}
        loads = []
        for src, names, fut in exports:
            bad, frames = fut.result()
            if bad:
                stuck.update(dict.fromkeys(bad, src))
                continue
            loads.append((names, frames, self.channels[w].request("load", frames=frames)))
        for names, frames, fut in loads:
            problem, _ = fut.result()
            if problem is not None:
                raise ScriptError(f"a value could not be moved to worker {w}: {problem}\n",
                                  self.path, None)
            with self.cond:
                self.transfers += max(1, len(names))
                self.bytes_moved += sum(len(f) for f in frames)
                self.bytes_in[w] += sum(len(f) for f in frames)
                for v in names:
                    self.holders[v].add(w)
        return stuck

    def _choose(self, i: int, names: list[str]) -> int:
        """The process step ``i`` runs on, once it is idle (called with ``cond``)."""
        t = self.steps[i]
        while True:
            if self.lost is not None:
                raise self.lost
            if self.closing or self.execution.finished:
                raise _Cancelled("the run is over")
            need = {self.stuck[v] for v in names if v in self.stuck}
            if t.group is not None and t.group in self.group_worker:
                need.add(self.group_worker[t.group])
            if len(need) > 1:
                held = ", ".join(f"{v!r} (worker {self.stuck[v]})" for v in names
                                 if v in self.stuck)
                raise ScriptError(f"{t.label} of {self.path} needs values that cannot "
                                  f"be pickled on different workers: {held}; run it with "
                                  "--workers 1\n", self.path, t.lineno)
            if need:
                w = need.pop()
                if self.busy[w] is None:
                    return w
            else:
                idle = [w for w in range(self.workers) if self.busy[w] is None]
                if idle:
                    score = [self._local_bytes(t, names, w) for w in range(self.workers)]
                    me = getattr(self._slot, "w", -1)   # ties: the driving thread's own
                    if t.group is not None:   # a group's first step: the work to come
                        load = self._committed()
                        w = min(idle, key=lambda w: (load[w], -score[w], w != me, w))
                        # a busy process bound to less work is waited for: the group
                        # would otherwise join another group's process for good
                        if load[w] <= min(load):
                            return w
                        self.cond.wait(0.5)
                        continue
                    w = max(idle, key=lambda w: (score[w], w == me, -w))
                    if max(score) - score[w] <= MOVE_WAIT_BYTES:
                        return w
            self.cond.wait(0.5)

    def _committed(self) -> list[int]:
        """Per process, the steps still to run of the groups placed on it: the work it is
        bound to (a group's steps all run where its first one ran), which a new group's
        first step avoids, so that independent chains land on different processes."""
        load = [0] * self.workers
        for g, w in self.group_worker.items():
            load[w] += self.group_left[g]
        return load

    def _inputs(self, i: int) -> list[str]:
        t = self.steps[i]
        if t.reads_all:
            return sorted(self.owner)
        return sorted(v for v in t.reads | t.writes if v in self.owner
                      and v not in self.everywhere_names)

    def _local_bytes(self, t: CodeStep, names: list[str], w: int) -> int:
        """The bytes of ``names`` that need not move if step ``t`` runs on ``w`` (of a
        variable it needs a part of, that part's share)."""
        total = 0
        for v in names:
            if w in self.holders[v]:
                size = self.nbytes.get(v, 0)
                total += int(size * t.part.share) if t.part is not None and \
                    v == t.part.source else size
        return total

    def _state_for(self, i: int, part: str) -> tuple[int, Any]:
        """The value of a part of the process state that the last finished step before
        ``i`` in program order left (``-1``: the state the processes started with)."""
        best: tuple[int, Any] = (-1, None)
        for j, value in self.state_writers[part]:
            if best[0] < j < i:
                best = (j, value)
        return best

    def _defined(self, i: int, w: int, defined: dict[str, int | None]) -> None:
        """Step ``i`` finished on ``w`` defining ``defined`` (name -> size, ``None``:
        deleted): record where the values are and free those no step needs any more."""
        stale: dict[int, list[str]] = defaultdict(list)
        for v, size in defined.items():
            for h in self.holders[v] - {w}:
                stale[h].append(v)
            if size is None:
                self.owner.pop(v, None)
                self.holders[v] = set()
            else:
                self.owner[v] = w
                self.holders[v] = {w}
                self.nbytes[v] = size
        if self.steps[i].reads_all:
            for v in list(self.owner):
                if v not in defined:
                    for h in self.holders[v]:
                        stale[h].append(v)
                    self.owner.pop(v)
                    self.holders[v] = set()
        self._free_touched(i, stale)

    def _free_touched(self, i: int, stale: dict[int, list[str]]) -> None:
        """Step ``i`` is done with its names: free those no later step touches, and the
        ``stale`` copies (process -> names) everywhere (called with ``cond``)."""
        for v in self.touch_set[i]:
            if v in self.touches:
                self.touches[v] -= 1
                if self.touches[v] == 0 and v in self.owner:
                    for h in self.holders[v]:
                        stale[h].append(v)
                    self.owner.pop(v)
                    self.holders[v] = set()
        for h, vs in stale.items():
            self.channels[h].post(("free", None, sorted(set(vs))))

    def _release(self) -> None:
        """Write the captured output of finished steps, in program order, up to the
        earliest one that raised (called with ``cond``)."""
        order = self.order
        stop = self.failed if self.failed is not None else order[-1]
        while (self.next_release < len(order) and order[self.next_release] <= stop
               and order[self.next_release] in self.results):
            out, err, logs = self.results.pop(order[self.next_release])
            _write_logs(logs)
            if out:
                self.out.write(out)
                self.out.flush()
            if err:
                self.err.write(err)
                self.err.flush()
            self.next_release += 1


def _script_exception(error: tuple) -> Exception:
    if error[0] == "exit":
        return ScriptExit(error[1], error[2])
    return ScriptError(error[1], error[2], error[3])
