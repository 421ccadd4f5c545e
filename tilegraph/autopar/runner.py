"""Running a script's task graph on forked worker processes.

The parent process (the *scheduler*) forks ``workers`` processes after compiling every
top-level statement (with the script's own file name, so tracebacks name the script's lines).
Each worker holds a namespace, a module named ``__main__`` registered as such in its
``sys.modules``, so that functions and classes of the script pickle by reference.

Scheduler state (all in :class:`_Scheduler`):

========================  ===============================================================
field                     meaning
========================  ===============================================================
``waiting[i]``            tasks ``i`` still waits for (edges of the graph, minus the
                          ``output-stream`` class: output is captured per statement)
``ready``                 heap of task indices whose predecessors are done
``owner[v]``              worker holding the current value of variable ``v``
``holders[v]``            workers holding a copy of the current value (``owner`` included);
                          a worker never holds an out-of-date value of a variable
``nbytes[v]``             estimated size of ``v`` (for choosing where a task runs)
``touches[v]``            tasks using or defining ``v`` not finished yet; at 0, ``v`` is
                          freed on every worker
``busy[w]``               task running (or being staged) on worker ``w``, or ``None``
``group_worker[g]``       the worker of group ``g`` once its first task was placed
``stuck[v]``              worker of a value that cannot be pickled: its users run there
``results[i]``            captured (stdout, stderr) of a finished task, until released in
                          program order
``failure``               the earliest failed task: (index, message) ; nothing after it is
                          started, everything before it finishes, then it is reported
========================  ===============================================================

A task that writes files starts only when every task before it has finished (an exception
stops the run before the serial run would have written anything later). A task runs on the
worker that holds the most bytes of its inputs among the idle ones (its
group's worker if it has one); missing inputs are exported by their owners (pickle protocol 5,
NumPy buffers out of band) and relayed to it. Imports, ``def`` and ``class`` statements that
depend only on each other run on every worker first. ``os.chdir``, ``os.environ`` and
``sys.path`` are process state: after a task that may change them the worker reports them,
and a task runs with the state its predecessors in program order left.
"""

from __future__ import annotations

import contextlib
import heapq
import importlib
import io
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
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from tilegraph.autopar.analysis import ScriptGraph, analyze, load_script, parse_script
from tilegraph.runtime.blas import cores

_MOVE_WAIT_BYTES = 32 << 20   # wait for a busy worker rather than move this much more data


class ScriptError(Exception):
    """The script raised an exception: ``traceback`` is the text the serial run prints,
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
    """The script called ``sys.exit``: the run stops with ``code``."""

    def __init__(self, code: int):
        self.code = code
        super().__init__(f"the script exited with status {code}")


@dataclass(frozen=True)
class RunStats:
    """What a parallel run did: tasks per worker, values moved and their bytes."""

    workers: int
    tasks_per_worker: tuple[int, ...]
    transfers: int
    bytes_moved: int


# -- pickling between workers -----------------------------------------------------------------


def _rebuild_function(code: bytes, name: str, defaults: Any, kwdefaults: Any) -> Any:
    main = sys.modules["__main__"]
    fn = types.FunctionType(marshal.loads(code), main.__dict__, name, defaults)
    fn.__kwdefaults__ = kwdefaults
    return fn


class _Pickler(pickle.Pickler):
    """Modules travel by name; functions of the script without a global name (lambdas) by
    their code."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.ModuleType):
            return importlib.import_module, (obj.__name__,)
        if isinstance(obj, types.FunctionType) and obj.__module__ == "__main__" and \
                obj.__closure__ is None:
            main = sys.modules["__main__"]
            if getattr(main, obj.__qualname__, None) is not obj:
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


def _size(value: Any) -> int:
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
        size += int(sum(_size(x) for x in sample) * len(items) / len(sample))
    return size


# -- the worker --------------------------------------------------------------------------------


_STATE_PARTS = ("cwd", "env", "path")


def _process_state(parts: list[str]) -> dict[str, Any]:
    """The parts of the process state a task may have changed."""
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


def _error_info(exc: BaseException, path: str) -> tuple[str, str | None, int | None]:
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


def _exit_code(exc: SystemExit) -> tuple[int, str]:
    code = exc.code
    if code is None:
        return 0, ""
    if isinstance(code, int):
        return code, ""
    return 1, f"{code}\n"


def _die_with_parent() -> None:
    """On Linux, a worker gets SIGTERM when the scheduler's process dies, even by SIGKILL."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM))   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _worker(index: int, conn: Connection, codes: list[Any], path: str,
            argv: list[str], blas: int = 1) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the scheduler handles Ctrl-C
    _die_with_parent()
    # workers x BLAS threads stay within the cores: NumPy statements on several workers
    # would otherwise each start a BLAS thread per core and slow each other down
    from threadpoolctl import threadpool_limits

    limits = threadpool_limits(limits=blas, user_api="blas")  # noqa: F841 (held for life)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __builtins__=__builtins__)
    sys.modules["__main__"] = main
    ns = main.__dict__
    sys.argv = list(argv)
    real_out, real_err = sys.stdout, sys.stderr
    while True:
        try:
            msg, frames = _recv(conn)
        except (EOFError, OSError):
            return
        op = msg[0]
        if op == "stop":
            return
        if op == "state":
            _apply_state(msg[1], msg[2])
        elif op == "free":
            for name in msg[1]:
                ns.pop(name, None)
        elif op == "load":
            try:
                values = pickle.loads(frames[0], buffers=frames[1:])
                ns.update(values)
                _send(conn, ("loaded", msg[1], None))
            except Exception as exc:
                _send(conn, ("loaded", msg[1], f"{type(exc).__name__}: {exc}"))
        elif op == "export":
            token, names = msg[1], msg[2]
            values = {n: ns[n] for n in names if n in ns}
            try:
                _send(conn, ("exported", token, None), _dumps(values))
            except Exception:
                bad = []
                for n, v in values.items():
                    try:
                        _dumps({n: v})
                    except Exception:
                        bad.append(n)
                _send(conn, ("exported", token, bad or list(values)))
        elif op in ("run", "replicate"):
            i, names, want_state, barrier = msg[1], msg[2], msg[3], msg[4]
            out, err = io.StringIO(), io.StringIO()
            sys.stdout, sys.stderr = out, err
            error = None
            try:
                exec(codes[i], ns)
            except SystemExit as exc:
                code, text = _exit_code(exc)
                error = ("exit", code, text)
            except BaseException as exc:
                error = ("error", *_error_info(exc, path))
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                sys.stdout, sys.stderr = real_out, real_err
            if barrier:
                names = [n for n in ns if not (n.startswith("__") and n.endswith("__"))]
            defined = {n: (_size(ns[n]) if n in ns else None) for n in names}
            state = _process_state(want_state) if want_state else None
            _send(conn, ("done", i, index, out.getvalue(), err.getvalue(), defined, state,
                         error))


# -- the scheduler -----------------------------------------------------------------------------


class _Scheduler:
    def __init__(self, graph: ScriptGraph, workers: int, argv: list[str],
                 out: Any, err: Any):
        self.graph = graph
        self.n = workers
        self.out, self.err = out, err
        self.argv = argv
        tasks = graph.tasks
        preds = graph.predecessors(skip=("output-stream",))
        self.succs: list[list[int]] = [[] for _ in tasks]
        for i, ps in enumerate(preds):
            for p in ps:
                self.succs[p].append(i)
        self.waiting = [len(p) for p in preds]
        self.ready: list[int] = []
        self.owner: dict[str, int] = {}
        self.holders: dict[str, set[int]] = defaultdict(set)
        self.nbytes: dict[str, int] = {}
        self.replicated_names: set[str] = set()
        self.touches: dict[str, int] = defaultdict(int)
        self.touch_set: list[set[str]] = []
        seen: set[str] = set()
        for t in tasks:
            names = set(t.uses | t.defines)
            if t.barrier is not None:   # it may read anything defined before it
                names |= seen
            seen |= t.defines
            if t.replicated:
                self.replicated_names |= t.defines
                names = set()
            self.touch_set.append(names)
            for v in names:
                self.touches[v] += 1
        self.busy: list[int | None] = [None] * workers
        self.group_worker: dict[int, int] = {}
        self.stuck: dict[str, int] = {}
        self.results: dict[int, tuple[str, str]] = {}
        self.done: set[int] = set()
        self.replicas_left: dict[int, int] = {}
        self.next_release = 0
        self.failure: tuple[int, Any] | None = None
        self.aborted = False
        self.dead: set[int] = set()
        self.staging: dict[int, dict[str, Any]] = {}
        self.tokens = 0
        self.exports: dict[int, tuple[int, list[str]]] = {}   # token -> (task, names)
        # part of the process state -> [(task, value)] of the finished tasks that set it
        self.state_writers: dict[str, list[tuple[int, Any]]] = defaultdict(list)
        self.worker_state: list[dict[str, int]] = [dict.fromkeys(_STATE_PARTS, -1)
                                                   for _ in range(workers)]
        self.ran_on = [0] * workers
        self.transfers = 0
        self.bytes_moved = 0
        self.codes = _compile(graph)
        # a task that writes files starts only once every task before it has finished, so
        # that an exception stops the run before any later file is written
        self.gated = [any(e.kind == "file" and e.mode == "w" for e in t.effects)
                      for t in tasks]
        self.first_undone = 0

    # -- processes ----------------------------------------------------------------------------

    def start(self) -> None:
        ctx = multiprocessing.get_context("fork")
        self.conns: list[Connection] = []
        self.procs = []
        self.outboxes: list[queue.Queue] = []
        self.senders: list[threading.Thread] = []
        for w in range(self.n):
            parent, child = ctx.Pipe(duplex=True)
            p = ctx.Process(target=_worker, args=(w, child, self.codes,
                                                  _filename(self.graph.path), self.argv,
                                                  max(1, cores() // self.n)),
                            daemon=True,
                            name=f"tilegraph-autopar-{w}")
            p.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(p)
            box: queue.Queue = queue.Queue()
            t = threading.Thread(target=self._sender, args=(parent, box), daemon=True)
            t.start()
            self.outboxes.append(box)
            self.senders.append(t)

    @staticmethod
    def _sender(conn: Connection, box: queue.Queue) -> None:
        while True:
            item = box.get()
            if item is None:
                return
            try:
                _send(conn, *item)
            except (OSError, EOFError, BrokenPipeError):
                return

    def post(self, w: int, obj: Any, frames: list[Any] = ()) -> None:  # type: ignore[assignment]
        self.outboxes[w].put((obj, list(frames)))

    def shutdown(self, graceful: bool) -> None:
        for w in range(len(getattr(self, "outboxes", []))):
            self.post(w, ("stop",))
            self.outboxes[w].put(None)
        for p in getattr(self, "procs", []):
            p.join(timeout=2 if graceful else 0.05)
        for p in getattr(self, "procs", []):
            if p.is_alive():
                p.terminate()
                p.join(timeout=2)
            if p.is_alive():
                p.kill()
                p.join()
        for c in getattr(self, "conns", []):
            c.close()

    # -- the run ------------------------------------------------------------------------------

    def run(self) -> None:
        tasks = self.graph.tasks
        for i, k in enumerate(self.waiting):
            if k == 0 and not tasks[i].replicated:
                heapq.heappush(self.ready, i)
        for t in tasks:   # every worker runs these first, in program order
            if t.replicated:
                self.replicas_left[t.index] = self.n
                for w in range(self.n):
                    self.post(w, ("replicate", t.index, [], False, False))
                self._finish_deps(t.index)
        while True:
            self._dispatch()
            if self._finished():
                break
            if self._stalled():
                raise RuntimeError(f"autopar: the run of {self.graph.path} stalled with "
                                   f"tasks {sorted(self.ready)} ready and none running")
            live = {self.conns[w]: w for w in range(self.n) if w not in self.dead}
            for conn in wait(list(live)):
                w = live[conn]
                try:
                    msg, frames = _recv(conn)
                except (EOFError, OSError):
                    self._worker_died(w)
                    break
                self._handle(w, msg, frames)
            if self.aborted:
                break
        self._release()
        if self.failure is not None:
            raise self.failure[1]

    def _stalled(self) -> bool:
        return (all(b is None for b in self.busy) and not self.exports
                and not any(self.replicas_left.values()) and not self._finished())

    def _finished(self) -> bool:
        if self.aborted:
            return True
        if self.failure is not None:
            stop = self.failure[0]
            return all(i in self.done for i in range(stop)) and not any(
                b is not None and b < stop for b in self.busy)
        return len(self.done) == len(self.graph.tasks)

    def _worker_died(self, w: int) -> None:
        i = self.busy[w]
        line = self.graph.tasks[i].lineno if i is not None else None
        err = ScriptError(f"worker process {w} died (exit code {self.procs[w].exitcode})"
                          + (f" while running line {line}\n" if line else "\n"),
                          self.graph.path, line)
        self._fail(i if i is not None else 0, err)
        self.dead.add(w)
        self.aborted = True   # the values it held are lost: stop now

    def _fail(self, i: int, exc: BaseException) -> None:
        if self.failure is None or i < self.failure[0]:
            self.failure = (max(i, 0), exc)

    # -- placement ----------------------------------------------------------------------------

    def _inputs(self, i: int) -> list[str]:
        t = self.graph.tasks[i]
        if t.barrier is not None:
            return sorted(self.owner)
        return sorted(v for v in t.uses | t.defines if v in self.owner
                      and v not in self.replicated_names)

    def _local_bytes(self, names: list[str], w: int) -> int:
        return sum(self.nbytes.get(v, 0) for v in names if w in self.holders[v])

    def _forced(self, i: int, names: list[str]) -> int | str | None:
        """The worker task ``i`` must run on, ``None`` if any, or an error message."""
        t = self.graph.tasks[i]
        need = {self.stuck[v] for v in names if v in self.stuck}
        if t.group is not None and t.group in self.group_worker:
            need.add(self.group_worker[t.group])
        if len(need) > 1:
            held = ", ".join(f"{v!r} (worker {self.stuck[v]})" for v in names
                             if v in self.stuck)
            return (f"{t.label} of {self.graph.path} needs values that cannot be pickled on "
                    f"different workers: {held}; run it with --workers 1")
        return need.pop() if need else None

    def _dispatch(self) -> None:
        deferred = []
        stop = self.failure[0] if self.failure is not None else None
        while self.ready and None in self.busy:
            i = heapq.heappop(self.ready)
            if (stop is not None and i > stop) or (self.gated[i] and self._undone_before(i)):
                deferred.append(i)
                continue
            names = self._inputs(i)
            forced = self._forced(i, names)
            if isinstance(forced, str):
                self._fail(i, ScriptError(forced + "\n", self.graph.path,
                                          self.graph.tasks[i].lineno))
                self.results[i] = ("", "")
                self.done.add(i)
                continue
            if forced is not None:
                if self.busy[forced] is not None:
                    deferred.append(i)
                    continue
                w = forced
            else:
                idle = [w for w in range(self.n) if self.busy[w] is None]
                score = {w: self._local_bytes(names, w) for w in range(self.n)}
                w = max(idle, key=lambda w: (score[w], -w))
                if max(score.values()) - score[w] > _MOVE_WAIT_BYTES:
                    deferred.append(i)
                    continue
            self._stage(i, w, names)
        for i in deferred:
            heapq.heappush(self.ready, i)

    def _undone_before(self, i: int) -> bool:
        while self.first_undone < len(self.graph.tasks) and self.first_undone in self.done:
            self.first_undone += 1
        return self.first_undone < i

    def _stage(self, i: int, w: int, names: list[str]) -> None:
        t = self.graph.tasks[i]
        self.busy[w] = i
        if t.group is not None:
            self.group_worker.setdefault(t.group, w)
        missing: dict[int, list[str]] = defaultdict(list)
        for v in names:
            if w not in self.holders[v]:
                missing[self.owner[v]].append(v)
        self.staging[i] = {"worker": w, "pending": set()}
        for src, vs in missing.items():
            self.tokens += 1
            self.exports[self.tokens] = (i, vs)
            self.staging[i]["pending"].add(self.tokens)
            self.post(src, ("export", self.tokens, vs))
        if not missing:
            self._launch(i)

    def _state_for(self, i: int, part: str) -> tuple[int, Any]:
        """The value of a part of the process state that the last finished task before
        ``i`` in program order left (``-1``: the state the workers started with)."""
        best: tuple[int, Any] = (-1, None)
        for j, value in self.state_writers[part]:
            if best[0] < j < i:
                best = (j, value)
        return best

    def _launch(self, i: int) -> None:
        st = self.staging.pop(i)
        w = st["worker"]
        t = self.graph.tasks[i]
        for part in _STATE_PARTS:
            j, value = self._state_for(i, part)
            if j != self.worker_state[w][part] and value is not None:
                self.post(w, ("state", part, value))
                self.worker_state[w][part] = j
        self.post(w, ("run", i, sorted(t.defines), _state_written(t), t.barrier is not None))

    # -- messages -----------------------------------------------------------------------------

    def _handle(self, w: int, msg: tuple, frames: list[bytearray]) -> None:
        op = msg[0]
        if op == "exported":
            token, bad = msg[1], msg[2]
            i, names = self.exports.pop(token)
            st = self.staging.get(i)
            if st is None or token not in st["pending"]:
                return   # an export for a staging that was given up
            if bad:
                for v in bad:
                    self.stuck[v] = w
                # run the task where the value is: stage it again
                self.busy[st["worker"]] = None
                del self.staging[i]
                heapq.heappush(self.ready, i)
                return
            target = st["worker"]
            self.transfers += len(names)
            self.bytes_moved += sum(len(f) for f in frames)
            self.post(target, ("load", token), frames)
            for v in names:
                self.holders[v].add(target)
            st["pending"].discard(token)
            if not st["pending"]:
                self._launch(i)
        elif op == "loaded":
            if msg[2] is not None:
                i = self.busy[w]
                self._fail(i if i is not None else 0, ScriptError(
                    f"a value could not be moved to worker {w}: {msg[2]}\n",
                    self.graph.path, None))
        elif op == "done":
            self._done(w, msg)

    def _done(self, w: int, msg: tuple) -> None:
        _, i, _, out, err, defined, state, error = msg
        t = self.graph.tasks[i]
        if t.replicated:
            self.replicas_left[i] -= 1
            if error is not None:
                self._record_error(i, out, err, error)
            if self.replicas_left[i] == 0:
                self.results.setdefault(i, ("", ""))
                self.done.add(i)
            return
        self.busy[w] = None
        self.ran_on[w] += 1
        if state is not None:
            for part, value in state.items():
                self.state_writers[part].append((i, value))
                self.worker_state[w][part] = i
        if error is not None:
            self._record_error(i, out, err, error)
            self.done.add(i)
            return
        self.results[i] = (out, err)
        self.done.add(i)
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
        if t.barrier is not None:
            for v in list(self.owner):
                if v not in defined:
                    for h in self.holders[v]:
                        stale[h].append(v)
                    self.owner.pop(v)
                    self.holders[v] = set()
        for v in self.touch_set[i]:
            if v in self.touches:
                self.touches[v] -= 1
                if self.touches[v] == 0 and v in self.owner:
                    for h in self.holders[v]:
                        stale[h].append(v)
                    self.owner.pop(v)
                    self.holders[v] = set()
        for h, vs in stale.items():
            self.post(h, ("free", sorted(set(vs))))
        self._finish_deps(i)
        self._release()

    def _record_error(self, i: int, out: str, err: str, error: tuple) -> None:
        self.results[i] = (out, err)
        if error[0] == "exit":
            exc: BaseException = ScriptExit(error[1])
            exc.message = error[2]  # type: ignore[attr-defined]
        else:
            exc = ScriptError(error[1], error[2], error[3])
        self._fail(i, exc)

    def _finish_deps(self, i: int) -> None:
        for s in self.succs[i]:
            self.waiting[s] -= 1
            if self.waiting[s] == 0 and not self.graph.tasks[s].replicated:
                heapq.heappush(self.ready, s)

    def _release(self) -> None:
        """Print the captured output of finished tasks, in program order."""
        stop = self.failure[0] if self.failure is not None else len(self.graph.tasks) - 1
        while self.next_release <= stop and self.next_release in self.results:
            out, err = self.results.pop(self.next_release)
            if out:
                self.out.write(out)
                self.out.flush()
            if err:
                self.err.write(err)
                self.err.flush()
            self.next_release += 1
            if self.failure is not None and self.next_release > self.failure[0]:
                break


def _state_written(t: Any) -> list[str]:
    """The parts of the process state task ``t`` may change."""
    if t.barrier is not None:
        return list(_STATE_PARTS)
    parts = []
    if any(e.kind == "cwd" and e.mode == "w" for e in t.effects):
        parts.append("cwd")
    if any(e.kind == "env" and e.mode == "w" for e in t.effects):
        parts.append("env")
    if any(e.kind == "import" and e.detail == "sys.path" and e.mode == "w"
           for e in t.effects):
        parts.append("path")
    return parts


def _filename(path: str) -> str:
    """The file name the script's code carries: absolute, as ``python script.py`` has it."""
    return path if path.startswith("<") else os.path.abspath(path)


def _compile(graph: ScriptGraph) -> list[Any]:
    """Every top-level statement compiled alone, keeping the script's file and lines."""
    tree = parse_script(graph.path, graph.source)
    name = _filename(graph.path)
    return [compile(_module([st]), name, "exec") for st in tree.body]


def _module(body: list[Any]) -> Any:
    import ast

    return ast.Module(body=body, type_ignores=[])


# -- entry points ------------------------------------------------------------------------------


def _check_workers(workers: Any) -> int:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    return workers


def run_serial(path: str, source: str, argv: list[str] | None = None) -> None:
    """Run the script in this process, as ``python script.py`` would (a fresh ``__main__``
    namespace, ``sys.argv`` and ``sys.path[0]`` set for it)."""
    tree = parse_script(path, source)
    path = _filename(path)
    code = compile(tree, path, "exec")
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __builtins__=__builtins__)
    saved = sys.modules.get("__main__"), list(sys.argv), list(sys.path)
    sys.modules["__main__"] = main
    sys.argv[:] = argv if argv is not None else [path]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        exec(code, main.__dict__)
    except SystemExit as exc:
        code_, text = _exit_code(exc)
        if text:
            sys.stderr.write(text)
        if code_:
            raise ScriptExit(code_) from None
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        text, fname, line = _error_info(exc, path)
        raise ScriptError(text, fname, line) from None
    finally:
        if saved[0] is not None:
            sys.modules["__main__"] = saved[0]
        sys.argv[:] = saved[1]
        sys.path[:] = saved[2]


def run_script(path_or_source: str | os.PathLike, workers: int = 2, *,
               argv: list[str] | None = None, graph: ScriptGraph | None = None,
               stdout: Any = None, stderr: Any = None) -> RunStats:
    """Run a script on ``workers`` forked worker processes, in the order its task graph
    allows, with the same standard output, standard error and files as the serial run.

    With ``workers=1``, or when the graph has no two tasks that may run at once, the script
    runs serially in this process. An exception of the script raises :class:`ScriptError`
    (its ``traceback`` is what ``python script.py`` prints) after the output of every
    statement before it was written; ``sys.exit(n)`` with ``n != 0`` raises
    :class:`ScriptExit`. No worker process is left behind, whatever happens.
    """
    workers = _check_workers(workers)
    path, source = load_script(path_or_source)
    g = graph if graph is not None else analyze(path_or_source)
    argv = list(argv) if argv is not None else [path]
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    if workers == 1 or not has_parallelism(g):
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            run_serial(path, source, argv)
        finally:
            sys.stdout, sys.stderr = saved
        return RunStats(1, (len(g.tasks),), 0, 0)
    if sys.platform == "win32" or "fork" not in multiprocessing.get_all_start_methods():
        raise RuntimeError("autopar needs the 'fork' start method (Linux, macOS)")
    sched = _Scheduler(g, workers, argv, out, err)
    script_dir = os.path.dirname(os.path.abspath(path))
    saved_path = list(sys.path)
    sys.path.insert(0, script_dir)   # the workers see the script's directory first
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        sched.start()
    finally:
        sys.path[:] = saved_path
    graceful = False
    try:
        sched.run()
        graceful = True
    except ScriptExit as exc:
        graceful = True
        text = getattr(exc, "message", "")
        if text:
            err.write(text)
        if exc.code:
            raise
    finally:
        sched.shutdown(graceful)
    return RunStats(workers, tuple(sched.ran_on), sched.transfers, sched.bytes_moved)


def has_parallelism(graph: ScriptGraph) -> bool:
    """Whether two tasks of the graph (not run on every worker) may run at the same time."""
    preds = graph.predecessors(skip=("output-stream",))
    level: list[int] = []
    seen: set[int] = set()
    for i, t in enumerate(graph.tasks):
        lv = 1 + max((level[p] for p in preds[i]), default=0)
        level.append(lv)
        if not t.replicated:
            if lv in seen:
                return True
            seen.add(lv)
    return False


@dataclass(frozen=True)
class Profile:
    """One serial run, timed: ``seconds[i]`` of task ``i``, and ``nbytes[i]``, the estimated
    bytes of the variables it defines, just after it ran."""

    seconds: tuple[float, ...]
    nbytes: tuple[int, ...]

    @property
    def total(self) -> float:
        return float(sum(self.seconds))


def profile_script(graph: ScriptGraph, argv: list[str] | None = None) -> Profile:
    """Run the script of ``graph`` once, serially in this process, timing every top-level
    statement and sizing the variables it defines. Its standard output and error are
    captured and dropped; its other effects (files...) happen. An exception of the script
    raises :class:`ScriptError`."""
    import time

    codes = _compile(graph)
    filename = _filename(graph.path)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=filename, __builtins__=__builtins__)
    ns = main.__dict__
    saved = (sys.modules.get("__main__"), list(sys.argv), list(sys.path), sys.stdout,
             sys.stderr, os.getcwd())
    sys.modules["__main__"] = main
    sys.argv[:] = argv if argv is not None else [graph.path]
    sys.path.insert(0, os.path.dirname(os.path.abspath(graph.path)))
    sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
    seconds, sizes = [], []
    try:
        for t, code in zip(graph.tasks, codes, strict=True):
            t0 = time.perf_counter()
            try:
                exec(code, ns)
            except SystemExit:
                break
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                text, fname, line = _error_info(exc, filename)
                raise ScriptError(text, fname, line) from None
            seconds.append(time.perf_counter() - t0)
            sizes.append(sum(_size(ns[v]) for v in t.defines if v in ns))
    finally:
        if saved[0] is not None:
            sys.modules["__main__"] = saved[0]
        sys.argv[:] = saved[1]
        sys.path[:] = saved[2]
        sys.stdout, sys.stderr = saved[3], saved[4]
        if os.getcwd() != saved[5]:
            os.chdir(saved[5])
    missing = len(graph.tasks) - len(seconds)
    return Profile(tuple(seconds) + (0.0,) * missing, tuple(sizes) + (0,) * missing)
